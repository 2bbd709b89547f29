"""Torch glue: allocate and apply XGrammar-layout bitmasks on CPU or CUDA tensors.

Imported lazily; the rest of maskc works without torch installed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from maskc.compiler.maskstore import bitmask_words

__all__ = ["allocate_token_bitmask", "apply_token_bitmask_inplace", "copy_row"]

_SHIFTS: dict[str, torch.Tensor] = {}


def allocate_token_bitmask(batch_size: int, vocab_size: int) -> torch.Tensor:
    """An int32 ``[batch, ceil(vocab/32)]`` CPU tensor with every token allowed.

    Note:
        ``vocab_size`` is the logits width of the model, which may exceed the tokenizer's
        token count (padded embeddings); masks cover the artifact's ``vocab_size``.
    """
    if batch_size < 1 or vocab_size < 1:
        raise ValueError(f"batch_size and vocab_size must be positive, got {batch_size}, {vocab_size}")
    return torch.full((batch_size, bitmask_words(vocab_size)), -1, dtype=torch.int32)


def _unpack(bitmask: torch.Tensor, width: int) -> torch.Tensor:
    key = str(bitmask.device)
    shifts = _SHIFTS.get(key)
    if shifts is None:
        shifts = torch.arange(32, dtype=torch.int32, device=bitmask.device)
        _SHIFTS[key] = shifts
    bits = (bitmask.unsqueeze(-1) >> shifts) & 1  # [batch, words, 32]
    return bits.reshape(bitmask.shape[0], -1)[:, :width].bool()


def apply_token_bitmask_inplace(
    logits: torch.Tensor, bitmask: torch.Tensor, indices: list[int] | None = None
) -> None:
    """Set logits of disallowed tokens to ``-inf`` in place.

    Args:
        logits: float ``[batch, V]`` (or ``[V]``) on any device.
        bitmask: int32 ``[batch, ceil(V'/32)]``; columns of ``logits`` past ``32 * words`` are
            disallowed. Moved to ``logits.device`` if needed.
        indices: apply only to these rows of ``logits`` (bitmask rows in the same order).
    """
    if bitmask.dtype != torch.int32:
        raise TypeError(f"bitmask must be int32, got {bitmask.dtype}")
    squeeze = logits.dim() == 1
    lg = logits.unsqueeze(0) if squeeze else logits
    bm = bitmask.to(lg.device, non_blocking=True)
    if bm.dim() == 1:
        bm = bm.unsqueeze(0)
    rows = list(range(lg.shape[0])) if indices is None else list(indices)
    if len(rows) > bm.shape[0]:
        raise ValueError(f"bitmask has {bm.shape[0]} rows for {len(rows)} logits rows")
    width = lg.shape[1]
    covered = min(width, bm.shape[1] * 32)
    allowed = _unpack(bm[: len(rows)], covered)
    target = lg[rows] if indices is not None else lg
    masked = target[:, :covered].masked_fill(~allowed, float("-inf"))
    if indices is None:
        lg[:, :covered] = masked
        if covered < width:
            lg[:, covered:] = float("-inf")
    else:
        idx = torch.as_tensor(rows, device=lg.device)
        lg[idx, :covered] = masked
        if covered < width:
            lg[idx, covered:] = float("-inf")


def copy_row(bitmask: torch.Tensor, index: int, row: NDArray[np.int32], *, key: int, cache: dict[tuple[int, str], Any]) -> None:
    """Copy one precomputed row into ``bitmask[index]``, caching its tensor per device."""
    ck = (key, str(bitmask.device))
    t = cache.get(ck)
    if t is None:
        t = torch.from_numpy(np.array(row, dtype=np.int32, copy=True)).to(bitmask.device)
        if key >= 0:
            cache[ck] = t
    bitmask[index].copy_(t, non_blocking=True)
