"""Numpy bitmask helpers in XGrammar's layout: int32 ``[batch, ceil(vocab/32)]``, bit 1 = allowed."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from maskc.compiler.maskstore import bitmask_words

__all__ = ["bitmask_shape", "allocate_bitmask_np", "unpack_bitmask", "apply_bitmask_np"]


def bitmask_shape(batch: int, vocab_size: int) -> tuple[int, int]:
    if batch < 1 or vocab_size < 1:
        raise ValueError(f"batch and vocab_size must be positive, got {batch}, {vocab_size}")
    return batch, bitmask_words(vocab_size)


def allocate_bitmask_np(batch: int, vocab_size: int) -> NDArray[np.int32]:
    """A bitmask with every token allowed (all bits set), as XGrammar allocates it."""
    return np.full(bitmask_shape(batch, vocab_size), -1, dtype=np.int32)


def unpack_bitmask(row: NDArray[np.int32], vocab_size: int) -> NDArray[np.bool_]:
    """One bitmask row as a boolean array of width ``vocab_size``."""
    bits = np.unpackbits(np.ascontiguousarray(row, dtype="<i4").view(np.uint8), bitorder="little")
    return bits[:vocab_size].astype(np.bool_)


def apply_bitmask_np(logits: NDArray[np.floating], bitmask: NDArray[np.int32]) -> None:
    """Set disallowed logits to -inf in place; columns past the mask's width are disallowed."""
    batch, width = logits.shape
    for i in range(batch):
        allowed = unpack_bitmask(bitmask[i], min(width, bitmask.shape[1] * 32))
        row = logits[i]
        row[: allowed.shape[0]][~allowed] = -np.inf
        row[allowed.shape[0] :] = -np.inf
