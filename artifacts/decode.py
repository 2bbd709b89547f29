"""Batched decoding under a mask: the loop ``maskc check`` and ``maskc trace`` share.

A :class:`LogitsSource` produces next-token logits (a transformers model with its KV cache,
or a fixed table for teaching examples); :func:`decode` picks tokens under an artifact's
masks (or unconstrained), records why each sequence finished and how long the mask took,
and can report every step to an observer (the trace).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch
from numpy.typing import NDArray

from maskc.artifacts.analysis import Adversary
from maskc.artifacts.artifact import Artifact
from maskc.artifacts.matcher import Matcher
from maskc.artifacts.pushdown import Config, PushdownMatcher
from maskc.artifacts.torch import allocate_token_bitmask, apply_token_bitmask_inplace

__all__ = ["DecodeRun", "FixedLogits", "LogitsSource", "Output", "Step", "decode"]


class LogitsSource(Protocol):
    """Next-token logits for a batch of sequences."""

    width: int

    def start(self, prompts: Sequence[Sequence[int]]) -> torch.Tensor:
        """Run the prompts; float ``[batch, width]`` logits for the first new token."""
        ...

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """Append one token per sequence (long ``[batch]``); logits for the next one."""
        ...

    # Optional: ``select(rows) -> bool`` keeps only these rows of the batch (finished
    # sequences leave it); False when the source cannot, and then nothing changed.


class FixedLogits:
    """The same logits at every step, for every sequence: small examples without a model."""

    def __init__(self, logits: NDArray[np.float32]) -> None:
        self.row = torch.from_numpy(np.asarray(logits, dtype=np.float32))
        self.width = int(self.row.shape[0])
        self._batch = 1

    def start(self, prompts: Sequence[Sequence[int]]) -> torch.Tensor:
        self._batch = len(prompts)
        return self.row.expand(self._batch, -1).clone()

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.row.expand(self._batch, -1).clone()

    def select(self, rows: Sequence[int]) -> bool:
        self._batch = len(rows)
        return True


@dataclass(slots=True)
class Step:
    """What happened at one decode step of one sequence (handed to ``observe``)."""

    index: int
    state: int | None  # the matcher's state (pushdown: the top of its first stack)
    raw: NDArray[np.float32]  # the model's logits before the mask
    allowed: NDArray[np.int64] | None  # None when unconstrained
    token: int
    forced: bytes
    depth: int | None = None  # stack frames (1 for a regular artifact); None when unconstrained


@dataclass(slots=True)
class Output:
    """One generated sequence.

    ``finish`` says why it stopped: ``eos``; ``length`` (the token budget); ``dead`` (a state
    where the mask allowed nothing); ``rejected`` (a picked token the matcher refused: never
    expected under a mask).
    """

    tokens: list[int] = field(default_factory=list)
    finish: str = "length"
    forced_bytes: int = 0
    rejected_token: int | None = None

    @property
    def num_tokens(self) -> int:
        return len(self.tokens)


@dataclass(slots=True)
class DecodeRun:
    """Outputs plus where the time went.

    ``model_seconds`` and ``mask_seconds`` are totals (the model's includes the prefill).
    The per-step lists time each decode step of the whole batch, apart from the prefill:
    ``model_step_seconds`` one entry per model call after ``start`` (``step``),
    ``mask_step_seconds`` one per step under a mask (empty when unconstrained), and
    ``prefill_seconds`` the ``start`` call that runs the prompts.
    """

    outputs: list[Output]
    steps: int
    model_seconds: float
    mask_seconds: float
    wall_seconds: float
    prefill_seconds: float = 0.0
    model_step_seconds: list[float] = field(default_factory=list)
    mask_step_seconds: list[float] = field(default_factory=list)


def _position(m: Matcher | PushdownMatcher) -> int | Config:
    """What the adversary needs to know of a matcher: its state, or its stacks."""
    return m.config if isinstance(m, PushdownMatcher) else m.state


def _depth(m: Matcher | PushdownMatcher) -> int:
    return m.depth if isinstance(m, PushdownMatcher) else 1


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def decode(
    source: LogitsSource,
    prompts: Sequence[Sequence[int]],
    *,
    artifact: Artifact | None,
    eos_ids: Sequence[int],
    token_bytes: Sequence[bytes],
    max_tokens: int,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
    adversary: Adversary | None = None,
    observe: Callable[[int, Step], None] | None = None,
) -> DecodeRun:
    """Generate one output per prompt, under ``artifact``'s masks when it is given.

    Args:
        source: Where logits come from.
        prompts: Token ids per sequence.
        artifact: The grammar's masks; None decodes unconstrained (the baseline).
        eos_ids: Tokens that end a sequence.
        token_bytes: Bytes per token id (for forced-byte accounting).
        max_tokens: The budget per sequence, EOS included.
        temperature: 0 picks the highest logit; otherwise sample from ``softmax(l / T)``.
        generator: A seeded CPU generator for sampling.
        adversary: Picks among allowed tokens to delay the end (constrained only).
        observe: Called with ``(sequence, Step)`` for every step of every live sequence.
    """
    wall0 = time.perf_counter()
    batch = len(prompts)
    eos = set(int(i) for i in eos_ids)
    eos_fill = int(min(eos)) if eos else 0
    outputs = [Output() for _ in range(batch)]
    matchers: list[Matcher | PushdownMatcher] = (
        [artifact.matcher() for _ in range(batch)] if artifact is not None else [])
    select = getattr(source, "select", None)
    rows = list(range(batch))  # the sequence behind each row of the source's batch
    live = list(range(batch))  # rows still generating
    t0 = time.perf_counter()
    logits = source.start(prompts)
    device = logits.device
    _sync(device)
    prefill_s = model_s = time.perf_counter() - t0
    mask_s = 0.0
    model_steps: list[float] = []
    mask_steps: list[float] = []
    bitmask = allocate_token_bitmask(batch, artifact.vocab_size) if artifact is not None else None
    steps = 0
    while live and steps < max_tokens:
        steps += 1
        step_mask = 0.0
        raw = logits.float()
        picks = torch.full((len(rows),), eos_fill, dtype=torch.long)
        t0 = time.perf_counter()
        forced: dict[int, bytes] = {}
        allowed: dict[int, NDArray[np.int64]] = {}
        if artifact is not None:
            assert bitmask is not None
            for p in live:
                matchers[rows[p]].fill_next_token_bitmask(bitmask, p)
                forced[p] = matchers[rows[p]].find_jump_forward_bytes()
            masked = raw.clone()
            apply_token_bitmask_inplace(masked, bitmask[: len(rows)])
            _sync(device)
            step_mask = time.perf_counter() - t0
        else:
            masked = raw
        host = masked.cpu()
        raw_host = raw.cpu() if (observe is not None or adversary is not None) else host
        finite = torch.isfinite(host).any(dim=1)
        if temperature > 0:
            probs = torch.nan_to_num(torch.softmax(host / temperature, dim=-1), nan=0.0)
            probs[probs.sum(dim=1) <= 0, 0] = 1.0  # rows with nothing allowed (reported as dead)
            sampled = torch.multinomial(probs, 1, generator=generator).squeeze(1)
        else:
            sampled = host.argmax(dim=1)
        t0 = time.perf_counter()
        still: list[int] = []
        for p in live:
            i = rows[p]
            out = outputs[i]
            if artifact is not None and not bool(finite[p]):
                out.finish = "dead"
                continue
            tok = int(sampled[p])
            if artifact is not None and (adversary is not None or observe is not None):
                allowed[p] = matchers[i].allowed_token_ids()
            if adversary is not None and artifact is not None:
                tok = adversary.choose(_position(matchers[i]), allowed[p], raw_host[p].numpy())
                if tok < 0:
                    out.finish = "dead"
                    continue
            if observe is not None:
                state = matchers[i].state if artifact is not None else None
                depth = _depth(matchers[i]) if artifact is not None else None
                observe(i, Step(len(out.tokens), state, raw_host[p].numpy(), allowed.get(p), tok,
                                forced.get(p, b""), depth))
            if artifact is not None and not matchers[i].accept_token(tok):
                out.finish, out.rejected_token = "rejected", tok
                continue
            out.tokens.append(tok)
            if tok in eos:
                out.finish = "eos"
                continue
            if forced.get(p):
                data = token_bytes[tok] if tok < len(token_bytes) else b""
                out.forced_bytes += min(len(forced[p]), len(data))
            picks[p] = tok
            still.append(p)
        if artifact is not None:
            step_mask += time.perf_counter() - t0
            mask_s += step_mask
            mask_steps.append(step_mask)
        if not still or steps >= max_tokens:
            break
        t0 = time.perf_counter()
        if len(still) < len(rows) and select is not None and select(still):
            # finished sequences leave the batch (and the KV cache): later steps cost less
            rows, picks, live = [rows[p] for p in still], picks[still], list(range(len(still)))
        else:
            live = still
        logits = source.step(picks.to(device))
        _sync(device)
        model_steps.append(time.perf_counter() - t0)
        model_s += model_steps[-1]
    return DecodeRun(outputs, steps, model_s, mask_s, time.perf_counter() - wall0, prefill_s, model_steps,
                     mask_steps)
