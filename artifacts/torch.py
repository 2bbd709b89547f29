"""Torch glue: allocate and apply XGrammar-layout bitmasks on CPU or CUDA tensors.

Imported lazily; the rest of maskc works without torch installed.
"""

from __future__ import annotations

import operator
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
        Pass the artifact's ``vocab_size``: the logits width it was compiled for, which may
        exceed the tokenizer's token count (padded embeddings). A matcher fills exactly
        ``ceil(artifact.vocab_size / 32)`` words per row; logits wider than that are fine
        (:func:`apply_token_bitmask_inplace` masks the extra columns), narrower ones are refused.
    """
    for name, value in (("batch_size", batch_size), ("vocab_size", vocab_size)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
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


def _as_bitmask(bitmask: Any) -> torch.Tensor:
    if isinstance(bitmask, np.ndarray):
        if bitmask.dtype != np.int32:
            raise TypeError(f"bitmask must have dtype int32, got {bitmask.dtype}")
        return torch.from_numpy(np.ascontiguousarray(bitmask))
    if not isinstance(bitmask, torch.Tensor):
        raise TypeError(f"bitmask must be a torch tensor or numpy array of dtype int32, got {type(bitmask).__name__}")
    if bitmask.dtype != torch.int32:
        raise TypeError(f"bitmask must have dtype int32, got {bitmask.dtype}")
    return bitmask


def _check_width(width: int, words: int, vocab_size: int | None) -> None:
    """Refuse logits too narrow for the vocabulary the bitmask was filled for."""
    remedy = ("the artifact's vocab_size is the logits width: compile for this model's width "
              "(tokenizer.with_overrides(vocab_size=...) or `--vocab-size`), or give the full logits")
    if vocab_size is not None:
        if vocab_size < 1 or bitmask_words(vocab_size) != words:
            raise ValueError(f"bitmask has {words} words per row, expected ceil(vocab_size / 32) = "
                             f"{bitmask_words(vocab_size) if vocab_size > 0 else '?'} for vocab_size {vocab_size}")
        if width < vocab_size:
            raise ValueError(f"logits have {width} columns, narrower than vocab_size {vocab_size}: the mask would be "
                             f"cut (EOS or every allowed token can fall outside, leaving a row of -inf); {remedy}")
    elif width <= 32 * (words - 1):
        raise ValueError(f"logits have {width} columns, but the bitmask's {words} words per row cover a vocabulary of "
                         f"more than {32 * (words - 1)} tokens: the mask would be cut (EOS can fall outside, leaving a "
                         f"row of -inf); {remedy}")


def apply_token_bitmask_inplace(
    logits: torch.Tensor, bitmask: Any, indices: list[int] | None = None, *, vocab_size: int | None = None
) -> None:
    """Set logits of disallowed tokens to ``-inf`` in place.

    Args:
        logits: float ``[batch, W]`` (or ``[W]``) on any device; ``W`` is the model's logits
            width.
        bitmask: int32 ``[batch, words]`` (or ``[words]``), a torch tensor or numpy array as
            filled by a matcher; moved to ``logits.device`` if needed.
        indices: apply only to these rows of ``logits``; bitmask row ``k`` masks logits row
            ``indices[k]``.
        vocab_size: the artifact's ``vocab_size``; when given, logits narrower than it are
            refused (without it, only logits that miss the bitmask's last word are).

    Width: columns ``0 .. min(W, 32 * words)`` follow the bitmask. Columns past
    ``32 * words`` (logits padded wider than the bitmask) are set to ``-inf``: no token of
    the artifact lives there. (XGrammar leaves such columns untouched; maskc masks them, so
    a padded id is never sampled.) Logits *narrower* than the vocabulary are refused: a cut
    mask can drop the EOS column and leave a row where every logit is ``-inf``.

    Raises:
        TypeError: ``logits`` not a floating-point tensor; ``bitmask`` not int32; an index
            not an int.
        ValueError: a dimension other than 1 or 2, logits narrower than the vocabulary,
            fewer bitmask rows than rows to mask, an index outside the logits batch.
    """
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point():
        got = logits.dtype if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise TypeError(f"logits must be a floating-point torch tensor, got {got}")
    bm = _as_bitmask(bitmask)
    if logits.dim() not in (1, 2) or bm.dim() not in (1, 2):
        raise ValueError(f"logits must be [batch, W] or [W] and bitmask [batch, words] or [words], got "
                         f"{list(logits.shape)} and {list(bm.shape)}")
    squeeze = logits.dim() == 1
    lg = logits.unsqueeze(0) if squeeze else logits
    bm = bm.to(lg.device, non_blocking=True)
    if bm.dim() == 1:
        bm = bm.unsqueeze(0)
    width = lg.shape[1]
    _check_width(width, bm.shape[1], vocab_size)
    try:
        rows = list(range(lg.shape[0])) if indices is None else [operator.index(i) for i in indices]
    except TypeError:
        raise TypeError(f"indices must be a list of ints, got {indices!r:.60}") from None
    if len(rows) > bm.shape[0]:
        raise ValueError(f"bitmask has {bm.shape[0]} rows for {len(rows)} logits rows")
    bad = [i for i in rows if not 0 <= i < lg.shape[0]]
    if bad:
        raise ValueError(f"indices must lie in [0, {lg.shape[0]}) (the logits batch), got {bad[:5]}")
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
