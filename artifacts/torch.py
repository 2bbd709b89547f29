"""Torch glue: allocate and apply XGrammar-layout bitmasks on CPU or CUDA tensors.

Imported lazily; the rest of maskc works without torch installed.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from maskc.compiler.maskstore import bitmask_words

__all__ = ["allocate_token_bitmask", "apply_token_bitmask_inplace", "apply_on_device", "copy_row", "staged_fill"]

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
    if len(set(rows)) != len(rows):
        raise ValueError(f"indices must be distinct, got {rows[:8]}")
    if lg.device.type == "cpu":
        _apply_cpu(lg, bm, rows if indices is not None else None, width)
    elif _triton_ready(lg, bm):
        _apply_triton(lg, bm, rows if indices is not None else None, width)
    else:
        apply_on_device(lg, bm, rows if indices is not None else None, width)


def _apply_cpu(lg: torch.Tensor, bm: torch.Tensor, rows: list[int] | None, width: int) -> None:
    """The reference: unpack the bits, then a masked fill of the covered columns."""
    covered = min(width, bm.shape[1] * 32)
    n = lg.shape[0] if rows is None else len(rows)
    allowed = _unpack(bm[:n], covered)
    target = lg[rows] if rows is not None else lg
    masked = target[:, :covered].masked_fill(~allowed, float("-inf"))
    if rows is None:
        lg[:, :covered] = masked
        if covered < width:
            lg[:, covered:] = float("-inf")
    else:
        idx = torch.as_tensor(rows, device=lg.device)
        lg[idx, :covered] = masked
        if covered < width:
            lg[idx, covered:] = float("-inf")


def apply_on_device(lg: torch.Tensor, bm: torch.Tensor, rows: list[int] | None, width: int) -> None:
    """Torch ops only, on any device (no host unpack, no host sync): the bits are unpacked
    where the logits live and the disallowed columns are filled in place. Gives exactly the
    result of the CPU path: column ``j`` keeps its logit iff ``j < 32 * words`` and bit
    ``j % 32`` of word ``j // 32`` is set."""
    words = bm.shape[1]
    covered = min(width, words * 32)
    n = lg.shape[0] if rows is None else len(rows)
    key = str(lg.device)
    shifts = _SHIFTS.get(key)
    if shifts is None:
        shifts = torch.arange(32, dtype=torch.int32, device=lg.device)
        _SHIFTS[key] = shifts
    reject = ((bm[:n].unsqueeze(-1) >> shifts) & 1).reshape(n, words * 32)[:, :covered] == 0
    if rows is None:
        lg[:, :covered].masked_fill_(reject, float("-inf"))
        if covered < width:
            lg[:, covered:] = float("-inf")
    else:
        idx = torch.as_tensor(rows, device=lg.device)
        sub = lg.index_select(0, idx)
        sub[:, :covered].masked_fill_(reject, float("-inf"))
        if covered < width:
            sub[:, covered:] = float("-inf")
        lg.index_copy_(0, idx, sub)


# -- Triton kernel (CUDA, where triton imports) --------------------------------------------------

_TRITON: Any = None  # the compiled kernel launcher, False when triton is unavailable
_SM_COUNT: dict[int, int] = {}
_BLOCK = 4096


def _triton_ready(lg: torch.Tensor, bm: torch.Tensor) -> bool:
    """Whether the Triton kernel can take this call: a CUDA tensor, rows of unit stride."""
    global _TRITON
    if lg.device.type != "cuda" or lg.stride(1) != 1 or not bm.is_contiguous():
        return False
    if _TRITON is None:
        try:
            _TRITON = _build_kernel()
        except Exception:  # noqa: BLE001 - no triton, or one that cannot build: the torch path serves
            _TRITON = False
    return _TRITON is not False


def _build_kernel() -> Any:
    import triton
    import triton.language as tl

    @triton.jit  # type: ignore[untyped-decorator]
    def kernel(logits_ptr: Any, bitmask_ptr: Any, rows_ptr: Any, num_rows: Any, width: Any, words: Any,
               logits_stride: Any, HAS_ROWS: tl.constexpr, BLOCK: tl.constexpr) -> None:
        # one program per (bitmask row, column block); column j survives iff
        # j < 32 * words and bit j % 32 of word j // 32 is set
        pid_row = tl.program_id(0)
        pid_col = tl.program_id(1)
        if HAS_ROWS:
            out_row = tl.load(rows_ptr + pid_row).to(tl.int64)
        else:
            out_row = pid_row.to(tl.int64)
        cols = pid_col * BLOCK + tl.arange(0, BLOCK)
        word_idx = cols // 32
        packed = tl.load(bitmask_ptr + pid_row.to(tl.int64) * words + word_idx,
                         mask=(cols < width) & (word_idx < words), other=0)
        allowed = ((packed >> (cols % 32)) & 1) != 0
        tl.store(logits_ptr + out_row * logits_stride + cols, float("-inf"), mask=(cols < width) & ~allowed)

    def launch(lg: torch.Tensor, bm: torch.Tensor, rows: torch.Tensor | None, n: int, width: int) -> None:
        grid = (n, triton.cdiv(width, _BLOCK))
        kernel[grid](lg, bm, rows if rows is not None else bm, n, width, bm.shape[1], lg.stride(0),
                     HAS_ROWS=rows is not None, BLOCK=_BLOCK)

    return launch


def _apply_triton(lg: torch.Tensor, bm: torch.Tensor, rows: list[int] | None, width: int) -> None:
    n = lg.shape[0] if rows is None else len(rows)
    if n == 0:
        return
    idx = torch.as_tensor(rows, dtype=torch.int32).to(lg.device, non_blocking=True) if rows is not None else None
    _TRITON(lg, bm.contiguous(), idx, n, width)


def copy_row(bitmask: torch.Tensor, index: int, row: NDArray[np.int32], *, key: int, cache: dict[tuple[int, str], Any]) -> None:
    """Copy one precomputed row into ``bitmask[index]``, caching its tensor per device."""
    ck = (key, str(bitmask.device))
    t = cache.get(ck)
    if t is None:
        t = torch.from_numpy(np.array(row, dtype=np.int32, copy=True)).to(bitmask.device)
        if key >= 0:
            cache[ck] = t
    bitmask[index].copy_(t, non_blocking=True)


# (device, shape) -> (host tensor, its numpy view, the event of the last copy out of it)
_STAGING: dict[tuple[str, tuple[int, ...]], tuple[torch.Tensor, NDArray[np.int32], Any]] = {}


def staged_fill(bitmask: torch.Tensor, matchers: Sequence[Any], rows: Sequence[int]) -> None:
    """Fill rows of a bitmask on an accelerator: the rows are written into a host buffer
    (pinned where CUDA is), which then travels in one copy. The buffer is reused once the
    previous copy out of it has finished (a CUDA event), so the copy runs asynchronously."""
    key = (str(bitmask.device), tuple(bitmask.shape))
    got = _STAGING.get(key)
    cuda = bitmask.device.type == "cuda"
    if got is None:
        if len(_STAGING) >= 16:
            _STAGING.clear()
        host = torch.empty(tuple(bitmask.shape), dtype=torch.int32, pin_memory=cuda)
        got = (host, host.numpy(), torch.cuda.Event() if cuda else None)  # type: ignore[no-untyped-call]
        _STAGING[key] = got
    host, view, event = got
    if event is not None:
        event.synchronize()
    for m, i in zip(matchers, rows):
        view[i] = m.current_row()
    if len(rows) == bitmask.shape[0]:  # distinct rows covering the batch: the whole buffer
        bitmask.copy_(host, non_blocking=cuda)
    else:
        idx = torch.as_tensor(list(rows), dtype=torch.int64)
        bitmask.index_copy_(0, idx.to(bitmask.device), host.index_select(0, idx).to(bitmask.device))
    if event is not None:
        event.record(torch.cuda.current_stream(bitmask.device))
