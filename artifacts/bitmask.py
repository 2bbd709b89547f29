"""Numpy bitmask helpers in XGrammar's layout: int32 ``[batch, ceil(vocab/32)]``, bit 1 = allowed."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from maskc.compiler.maskstore import bitmask_words, unpack_bool

__all__ = ["bitmask_shape", "allocate_bitmask_np", "unpack_bitmask", "write_ids"]


def bitmask_shape(batch: int, vocab_size: int) -> tuple[int, int]:
    for name, value in (("batch", batch), ("vocab_size", vocab_size)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if batch < 1 or vocab_size < 1:
        raise ValueError(f"batch and vocab_size must be positive, got {batch}, {vocab_size}")
    return batch, bitmask_words(vocab_size)


def allocate_bitmask_np(batch: int, vocab_size: int) -> NDArray[np.int32]:
    """A bitmask with every token allowed (all bits set), as XGrammar allocates it."""
    return np.full(bitmask_shape(batch, vocab_size), -1, dtype=np.int32)


def unpack_bitmask(row: NDArray[np.int32], vocab_size: int) -> NDArray[np.bool_]:
    """One bitmask row as a boolean array of width ``vocab_size``."""
    return unpack_bool(np.ascontiguousarray(row, dtype="<i4"), vocab_size)


# int32 words of one set bit each, bit 31 negative: OR-ed into a word read as a Python int,
# they give the int32 value to store back (two's complement), with no conversion
_BITS = tuple([1 << b for b in range(31)] + [-(1 << 31)])


def write_ids(row: NDArray[np.int32], ids: list[int]) -> None:
    """Set the bits of token ``ids`` in the int32 bitmask ``row`` (one word read and written
    per id through a memoryview, in Python ints: for a few ids, cheaper than any array call)."""
    words = row.data
    for i in ids:
        words[i >> 5] |= _BITS[i & 31]
