"""``maskc trace`` as a library: one row per decode step, and why an output was rejected.

Two ways in. :func:`trace_decode` lets logits (a model, or a fixed table) pick tokens under
the mask, greedily, and records each step: the state, the stack depth, how many tokens were
allowed, the best allowed ones, the pick, and the best token the mask vetoed over it. :func:`trace_text`
replays a given output token by token and stops at the first token the grammar rejects,
with the prefix and what was allowed there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from numpy.typing import NDArray

from maskc.artifacts.artifact import Artifact
from maskc.artifacts.pushdown import PushdownMatcher
from maskc.compiler.errors import InputError
from maskc.compiler.vocab import Vocabulary

__all__ = ["Trace", "TraceRow", "load_logits", "token_text", "trace_decode", "trace_text"]


def token_text(vocab: Vocabulary, token: int) -> str:
    """A token as people read it: its text, with undecodable bytes escaped."""
    if 0 <= token < vocab.token_count:
        return vocab.token_bytes[token].decode("utf-8", errors="backslashreplace")
    return f"<id {token}>"


def _finite(x: float) -> float | None:
    return None if not math.isfinite(x) else round(float(x), 4)


@dataclass(slots=True)
class Choice:
    token: int
    text: str
    logit: float | None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.token, "token": self.text, "logit": self.logit}


@dataclass(slots=True)
class TraceRow:
    """One step.

    ``vetoed`` is the highest-logit token the mask refused, shown only when the model
    preferred it to the pick (the grammar overruled the model there). ``state`` is the
    matcher's state (for a recursive grammar: the top of its first stack) and ``depth`` the
    stack's frames (always 1 for a regular grammar).
    """

    step: int
    state: int
    depth: int
    allowed: int
    top: list[Choice]
    picked: Choice
    vetoed: Choice | None
    forced: str
    accepted: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "state": self.state, "depth": self.depth, "allowed": self.allowed,
                "top": [c.to_json() for c in self.top], "picked": self.picked.to_json(),
                "vetoed": None if self.vetoed is None else self.vetoed.to_json(),
                "forced": self.forced, "accepted": self.accepted}


@dataclass(slots=True)
class Trace:
    """The rows, the output, and how it ended (``eos``, ``length``, ``dead``, ``rejected``,
    ``incomplete``: the text ended before the grammar could; ``complete``: a replay without
    EOS that the grammar could end)."""

    rows: list[TraceRow] = field(default_factory=list)
    output: bytes = b""
    finish: str = "length"
    prefix: bytes = b""  # the accepted output before a rejection
    rejected: Choice | None = None
    allowed_there: list[Choice] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "steps": [r.to_json() for r in self.rows],
            "output": self.output.decode("utf-8", errors="replace"),
            "finish": self.finish,
        }
        if self.finish in ("rejected", "incomplete"):
            doc["prefix"] = self.prefix.decode("utf-8", errors="replace")
            doc["rejected"] = None if self.rejected is None else self.rejected.to_json()
            doc["allowed_there"] = [c.to_json() for c in self.allowed_there]
        return doc


def load_logits(path: str | Path, vocab: Vocabulary, width: int) -> NDArray[np.float32]:
    """A fixed logits row from JSON: a map ``{"token text": logit}`` or a list of ``width`` floats.

    Tokens the map leaves out get ``-inf`` (never picked).

    Raises:
        InputError: unreadable file, unknown token, or a value that is not a number.
    """
    try:
        raw = orjson.loads(Path(path).read_bytes())
    except OSError as e:
        raise InputError(f"cannot read logits file {path}: {e.strerror or e}") from e
    except orjson.JSONDecodeError as e:
        raise InputError(f"logits file {path} is not JSON: {e}") from e
    row = np.full(width, -np.inf, dtype=np.float32)
    if isinstance(raw, list):
        if len(raw) != width or not all(isinstance(x, (int, float)) for x in raw):
            raise InputError(f"logits list in {path} must hold {width} numbers, one per token id")
        return np.asarray(raw, dtype=np.float32)
    if not isinstance(raw, dict):
        raise InputError(f"logits file {path} must be a JSON object {{token: logit}} or a list")
    for key, value in raw.items():
        tid = vocab.token_id(key)
        if tid is None:
            raise InputError(f"logits file {path}: {key!r} is not a token of {vocab.name}")
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise InputError(f"logits file {path}: the logit of {key!r} must be a number")
        row[tid] = float(value)
    return row


def _choices(vocab: Vocabulary, ids: NDArray[np.int64], logits: NDArray[np.float32] | None, k: int) -> list[Choice]:
    if logits is not None and ids.size:
        order = ids[np.argsort(-logits[ids], kind="stable")][:k]
        return [Choice(int(t), token_text(vocab, int(t)), _finite(float(logits[t]))) for t in order]
    return [Choice(int(t), token_text(vocab, int(t)), None) for t in ids[:k]]


def _row(vocab: Vocabulary, step: int, state: int, depth: int, allowed: NDArray[np.int64],
         logits: NDArray[np.float32] | None, token: int, forced: bytes, top_k: int) -> TraceRow:
    picked_logit = _finite(float(logits[token])) if logits is not None and token < logits.size else None
    vetoed = None
    if logits is not None:
        refused = logits.copy()
        refused[allowed[allowed < refused.size]] = -np.inf
        best = int(np.argmax(refused))
        if math.isfinite(float(refused[best])) and (picked_logit is None or refused[best] > logits[token]):
            vetoed = Choice(best, token_text(vocab, best), _finite(float(refused[best])))
    return TraceRow(step, state, depth, int(allowed.size), _choices(vocab, allowed, logits, top_k),
                    Choice(token, token_text(vocab, token), picked_logit), vetoed,
                    forced.decode("utf-8", errors="backslashreplace"))


def trace_decode(artifact: Artifact, vocab: Vocabulary, source: Any, prompt: list[int], *,
                 max_tokens: int, top_k: int = 5) -> Trace:
    """Greedy decoding under the mask with a :class:`~maskc.artifacts.decode.LogitsSource`."""
    from maskc.artifacts.decode import Step, decode

    trace = Trace()

    def observe(_: int, s: Step) -> None:
        assert s.state is not None and s.allowed is not None
        trace.rows.append(_row(vocab, s.index, s.state, s.depth or 1, s.allowed, s.raw, s.token, s.forced, top_k))

    run = decode(source, [prompt], artifact=artifact, eos_ids=artifact.eos_token_ids,
                 token_bytes=vocab.token_bytes, max_tokens=max_tokens, observe=observe)
    out = run.outputs[0]
    trace.finish = out.finish
    trace.output = vocab.decode(out.tokens)
    return trace


def trace_text(artifact: Artifact, vocab: Vocabulary, text: str, *, logits: NDArray[np.float32] | None = None,
               top_k: int = 5, eos: bool = True) -> Trace:
    """Replay ``text`` (tokenized as the tokenizer would) and stop at the first rejected token.

    After the last token, EOS is replayed too when ``eos`` (the grammar must be able to end).
    """
    ids = vocab.encode(text)
    m = artifact.matcher()
    trace = Trace()
    end = artifact.eos_token_ids[0] if artifact.eos_token_ids else None
    seq: list[int | None] = [*ids, end] if eos else list(ids)
    for step, tok in enumerate(seq):
        allowed = m.allowed_token_ids()
        forced = m.find_jump_forward_bytes()
        if tok is None:  # no EOS token in this vocabulary: just say whether it could end
            trace.finish = "eos" if m.can_terminate() else "incomplete"
            break
        depth = m.depth if isinstance(m, PushdownMatcher) else 1
        row = _row(vocab, step, m.state, depth, allowed, logits, tok, forced, top_k)
        ok = m.accept_token(tok)
        row.accepted = ok
        trace.rows.append(row)
        if not ok:
            trace.prefix = vocab.decode(ids[:step])
            trace.rejected = row.picked
            trace.allowed_there = _choices(vocab, allowed, logits, max(top_k, 20))
            trace.finish = "incomplete" if tok == end else "rejected"
            break
        if tok == end:
            trace.finish = "eos"
    else:
        if trace.finish != "eos":
            trace.finish = "complete" if m.can_terminate() else "incomplete"
    accepted = [t for t, r in zip(seq, trace.rows) if r.accepted and t is not None and t != end]
    trace.output = vocab.decode(accepted)
    return trace
