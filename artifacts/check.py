"""``maskc check`` as a library: decode with a real model under the mask and beside it.

For each prompt and sample the model decodes twice in one run: under the artifact's masks
(constrained) and freely (the baseline), and optionally once more with the adversarial
sampler. Every output is judged the same way: why it finished, whether it parses, whether
it validates against the schema (jsonschema, formats included), and which length limits
it broke. Two static facts frame the run: the schema's worst-case length (the ``auto``
token budget) and the proof that whole tokens can always reach EOS.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import torch

from maskc.artifacts.analysis import Adversary, LengthBound, Reachability, eos_reachability, length_bound
from maskc.artifacts.artifact import Artifact
from maskc.artifacts.decode import DecodeRun, LogitsSource, Output, decode
from maskc.compiler.frontends.registry import frontend
from maskc.compiler.vocab import Vocabulary

__all__ = [
    "AUTO_TOKEN_CAP",
    "UNBOUNDED_BUDGET",
    "CheckReport",
    "Judge",
    "ModeReport",
    "StepTimes",
    "Verdict",
    "default_prompt",
    "count_text",
    "resolve_budget",
    "run_check",
    "step_times",
]

AUTO_TOKEN_CAP = 4096
"""``--max-tokens auto`` never exceeds this; a larger worst case is reported, not budgeted."""

UNBOUNDED_BUDGET = 1024
"""The ``auto`` budget of a grammar with no worst case (a loop): generous, and reported."""

_LIMIT_KEYWORDS = ("maxLength", "maxItems")


def default_prompt(artifact: Artifact, instruction: str | None = None) -> str:
    """The user turn: an instruction, then the grammar the output must follow (per the
    grammar kind's front end)."""
    return frontend(artifact.grammar_kind).prompt(artifact.metadata["grammar_source"], instruction)


_EXACT_DIGITS = 18
"""Past this many digits a count is written as a power of ten (recursive worst cases can
have hundreds of digits)."""


def count_text(n: int) -> str:
    """``n`` with thousands separators, or ``about 1.2e301`` when it is astronomically large."""
    digits = str(n)
    if len(digits) <= _EXACT_DIGITS:
        return f"{n:,}"
    return f"about {digits[0]}.{digits[1:3]}e{len(digits) - 1}"


def resolve_budget(max_tokens: int | str, bound: LengthBound) -> tuple[int, str]:
    """The token budget and a sentence saying where it came from."""
    if max_tokens != "auto":
        return int(max_tokens), "given"
    if bound.max_tokens is None:
        if bound.loop:
            where = f"after {bound.loop_prefix[-40:]!r} it can repeat {bound.loop[:40]!r} forever"
        else:
            where = f"rule {', '.join(bound.loop_rules) or '?'} can repeat forever"
        return UNBOUNDED_BUDGET, f"unbounded grammar ({where}): capped at {UNBOUNDED_BUDGET}"
    if bound.max_tokens > AUTO_TOKEN_CAP:
        if len(str(bound.max_tokens)) > _EXACT_DIGITS:
            return AUTO_TOKEN_CAP, (f"worst case {count_text(bound.max_tokens)} tokens exceeds the auto cap "
                                    f"(no budget covers it: bound the nesting with max_depth)")
        return AUTO_TOKEN_CAP, (f"worst case {bound.max_tokens:,} tokens exceeds the auto cap; "
                                f"pass --max-tokens {bound.max_tokens} to budget all of it")
    return bound.max_tokens, f"worst case: {bound.max_bytes:,} bytes + EOS"


def _json_count(n: int | None) -> int | str | None:
    """An exact count for JSON: an int while it fits in 64 bits, else its decimal digits."""
    return n if n is None or n < 2**63 else str(n)


@dataclass(slots=True)
class Verdict:
    """How one output fared."""

    text: str
    tokens: int
    finish: str
    parsed: bool | None = None  # None: not a JSON grammar
    valid: bool | None = None
    grammar_ok: bool | None = None
    errors: list[str] = field(default_factory=list)
    limit_violations: dict[str, int] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return (self.finish == "eos" and self.parsed is not False and self.valid is not False
                and self.grammar_ok is not False)

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "tokens": self.tokens, "finish": self.finish, "parsed": self.parsed,
                "valid": self.valid, "grammar_ok": self.grammar_ok, "errors": self.errors[:5],
                "limit_violations": self.limit_violations}


class Judge:
    """Parses and validates outputs against the artifact's source schema (or its grammar)."""

    def __init__(self, artifact: Artifact, vocab: Vocabulary) -> None:
        self.artifact = artifact
        self.vocab = vocab
        self._eos = frozenset(artifact.eos_token_ids)
        self.validator: Any = None
        if artifact.grammar_kind == "json_schema":
            import jsonschema

            schema = orjson.loads(artifact.metadata["grammar_source"])
            cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
            self.validator = cls(schema, format_checker=cls.FORMAT_CHECKER)

    def _in_language(self, data: bytes) -> bool:
        """Whether ``data`` is a complete output: walked through a fresh matcher."""
        art = self.artifact
        if art.tokenizer is None and art.pda is None:
            return art.dfa.accepts(data)
        m = art.matcher()
        return m.accept_string(data) and m.can_terminate()

    def __call__(self, out: Output) -> Verdict:
        body = [t for t in out.tokens if t not in self._eos]
        data = self.vocab.decode(body)
        text = data.decode("utf-8", errors="replace")
        v = Verdict(text, out.num_tokens, out.finish)
        v.grammar_ok = self._in_language(data)
        if self.validator is None:
            return v
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError as e:
            v.parsed, v.errors = False, [f"not JSON: {e}"]
            return v
        v.parsed = True
        errors = sorted(self.validator.iter_errors(value), key=lambda err: list(err.absolute_path))
        v.valid = not errors
        for err in errors:
            where = "/" + "/".join(str(p) for p in err.absolute_path)
            v.errors.append(f"{where}: {err.message[:160]}")
            if err.validator in _LIMIT_KEYWORDS:
                v.limit_violations[str(err.validator)] = v.limit_violations.get(str(err.validator), 0) + 1
        return v


@dataclass(frozen=True, slots=True)
class StepTimes:
    """A distribution of durations, in milliseconds: its size, median and 90th percentile."""

    count: int
    median_ms: float
    p90_ms: float

    def to_json(self) -> dict[str, float | int]:
        return {"count": self.count, "median": self.median_ms, "p90": self.p90_ms}


def step_times(seconds: Sequence[float]) -> StepTimes | None:
    """The median and the 90th percentile (nearest rank: the smallest time that at least 90 %
    of the steps do not exceed) of ``seconds``, in milliseconds; None when empty.

    Medians, not means: the first steps pay warm-up (lazy tables, kernel launches) and one
    slow step would otherwise speak for all of them. Pass decode steps only; the prefill is
    reported apart.
    """
    if not seconds:
        return None
    ordered = sorted(seconds)
    rank = math.ceil(0.9 * len(ordered))
    return StepTimes(len(ordered), 1e3 * float(np.median(ordered)), 1e3 * ordered[rank - 1])


def _times_json(seconds: Sequence[float]) -> dict[str, float | int] | None:
    t = step_times(seconds)
    return None if t is None else t.to_json()


@dataclass(slots=True)
class ModeReport:
    """The outputs of one decoding mode, judged and timed."""

    mode: str  # constrained | unconstrained | adversarial
    verdicts: list[Verdict]
    steps: int
    model_seconds: float
    mask_seconds: float
    wall_seconds: float
    forced_bytes: int
    output_bytes: int
    prefill_seconds: list[float] = field(default_factory=list)  # one per batch
    model_step_seconds: list[float] = field(default_factory=list)  # decode steps, prefill apart
    mask_step_seconds: list[float] = field(default_factory=list)  # empty when unconstrained

    @property
    def n(self) -> int:
        return len(self.verdicts)

    @property
    def finish(self) -> dict[str, int]:
        return dict(Counter(v.finish for v in self.verdicts))

    @property
    def failures(self) -> int:
        return sum(not v.passed for v in self.verdicts)

    def to_json(self) -> dict[str, Any]:
        vs = self.verdicts
        toks = [v.tokens for v in vs]
        limits: Counter[str] = Counter()
        for v in vs:
            limits.update(v.limit_violations)
        return {
            "mode": self.mode,
            "outputs": self.n,
            "finish": self.finish,
            "json_failures": sum(v.parsed is False for v in vs),
            "schema_failures": sum(v.valid is False for v in vs),
            "grammar_failures": sum(v.grammar_ok is False for v in vs),
            "limit_violations": {k: limits.get(k, 0) for k in _LIMIT_KEYWORDS},
            "failures": self.failures,
            "failure_rate": self.failures / self.n if self.n else 0.0,
            "tokens_mean": float(np.mean(toks)) if toks else 0.0,
            "tokens_max": max(toks, default=0),
            "tokens_per_second": sum(toks) / self.wall_seconds if self.wall_seconds else 0.0,
            # means over all steps, the model's including the prefill: kept for old readers;
            # ``timing`` holds the per-step medians
            "mask_ms_per_step": 1e3 * self.mask_seconds / self.steps if self.steps else 0.0,
            "model_ms_per_step": 1e3 * self.model_seconds / self.steps if self.steps else 0.0,
            "timing": {
                "mask_ms": _times_json(self.mask_step_seconds),
                "model_ms": _times_json(self.model_step_seconds),
                "prefill_ms": _times_json(self.prefill_seconds),
            },
            "forced_byte_share": self.forced_bytes / self.output_bytes if self.output_bytes else 0.0,
            "samples": [v.to_json() for v in vs],
        }


@dataclass(slots=True)
class CheckReport:
    """Everything ``maskc check`` found; ``passed`` decides the exit code."""

    budget: int
    budget_reason: str
    bound: LengthBound
    reachability: Reachability
    modes: list[ModeReport]
    prompts: list[str]
    baseline_budget: int | None = None
    rendered_prompts: list[str] = field(default_factory=list)  # what the model read (chat template)
    prompt_tokens: list[int] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.reachability.proved and all(
            m.failures == 0 for m in self.modes if m.mode != "unconstrained")

    def mode(self, name: str) -> ModeReport | None:
        return next((m for m in self.modes if m.mode == name), None)

    def to_json(self, vocab: Vocabulary) -> dict[str, Any]:
        r = self.reachability
        return {
            "passed": self.passed,
            "budget": {"max_tokens": self.budget, "reason": self.budget_reason,
                       "baseline_max_tokens": self.baseline_budget,
                       "worst_case_bytes": _json_count(self.bound.max_bytes),
                       "loop_prefix": None if self.bound.bounded else self.bound.loop_prefix.decode("utf-8", "replace"),
                       "loop": None if self.bound.bounded else self.bound.loop.decode("utf-8", "replace")},
            "eos_reachability": {
                "proved": r.proved, "method": r.method, "states": r.states, "detail": r.detail,
                "counterexample": None if r.counterexample is None else {
                    "token_ids": list(r.counterexample),
                    "text": vocab.decode(r.counterexample).decode("utf-8", "replace")},
            },
            "prompts": self.prompts,
            "rendered_prompts": self.rendered_prompts,
            "prompt_tokens": self.prompt_tokens,
            "modes": {m.mode: m.to_json() for m in self.modes},
        }


def _run_mode(
    mode: str,
    source_factory: Callable[[], LogitsSource],
    prompt_ids: Sequence[Sequence[int]],
    *,
    artifact: Artifact,
    vocab: Vocabulary,
    eos_ids: Sequence[int],
    budget: int,
    batch: int,
    temperature: float,
    seed: int,
    adversary: Adversary | None,
    judge: Judge,
    progress: Callable[[int], None] | None,
) -> ModeReport:
    gen = torch.Generator().manual_seed(seed)
    runs: list[DecodeRun] = []
    for lo in range(0, len(prompt_ids), batch):
        chunk = prompt_ids[lo:lo + batch]
        runs.append(decode(source_factory(), chunk, artifact=None if mode == "unconstrained" else artifact,
                           eos_ids=eos_ids, token_bytes=vocab.token_bytes, max_tokens=budget,
                           temperature=0.0 if mode == "adversarial" else temperature,
                           generator=gen, adversary=adversary))
        if progress is not None:
            progress(len(chunk))
    outputs = [o for r in runs for o in r.outputs]
    verdicts = [judge(o) for o in outputs]
    eos = set(eos_ids)
    out_bytes = sum(len(vocab.decode([t for t in o.tokens if t not in eos])) for o in outputs)
    return ModeReport(mode, verdicts, sum(r.steps for r in runs), sum(r.model_seconds for r in runs),
                      sum(r.mask_seconds for r in runs), sum(r.wall_seconds for r in runs),
                      sum(o.forced_bytes for o in outputs), out_bytes,
                      [r.prefill_seconds for r in runs], [t for r in runs for t in r.model_step_seconds],
                      [t for r in runs for t in r.mask_step_seconds])


def run_check(
    artifact: Artifact,
    vocab: Vocabulary,
    source_factory: Callable[[], LogitsSource],
    prompts: Sequence[str],
    encode_prompt: Callable[[str], list[int]],
    *,
    eos_ids: Sequence[int],
    samples: int = 4,
    temperature: float = 0.7,
    max_tokens: int | str = "auto",
    batch: int = 8,
    seed: int = 0,
    adversarial: bool = False,
    baseline: bool = True,
    baseline_tokens: int | None = None,
    progress: Callable[[str, int], None] | None = None,
) -> CheckReport:
    """Decode ``samples`` outputs per prompt in each mode and judge them.

    Args:
        artifact: The compiled grammar (its tokenizer attached).
        vocab: The model's vocabulary (the artifact's tokenizer).
        source_factory: A fresh :class:`LogitsSource` per batch (the model).
        prompts: User-turn texts; ``encode_prompt`` turns one into token ids.
        eos_ids: The model's end tokens.
        max_tokens: A budget, or ``auto`` (the schema's worst case; see :func:`resolve_budget`).
        adversarial: Also decode once per prompt with the adversarial sampler.
        baseline: Also decode unconstrained.
        baseline_tokens: The baseline's budget (default: the same as the constrained one).
        progress: Called as ``progress(mode, sequences_done)``.
    """
    bound = length_bound(artifact)
    budget, reason = resolve_budget(max_tokens, bound)
    reach = eos_reachability(artifact, vocab)
    judge = Judge(artifact, vocab)
    ids = [encode_prompt(p) for p in prompts]
    sampled = [p for p in ids for _ in range(samples)]
    modes: list[ModeReport] = []
    plan: list[tuple[str, Sequence[Sequence[int]]]] = [("constrained", sampled)]
    if baseline:
        plan.append(("unconstrained", sampled))
    if adversarial:
        plan.append(("adversarial", ids))
    adversary = Adversary(artifact, vocab, bound) if adversarial else None
    for mode, pids in plan:
        def tick(n: int, mode: str = mode) -> None:
            if progress is not None:
                progress(mode, n)
        modes.append(_run_mode(mode, source_factory, pids, artifact=artifact, vocab=vocab, eos_ids=eos_ids,
                               budget=(baseline_tokens or budget) if mode == "unconstrained" else budget,
                               batch=batch, temperature=temperature, seed=seed,
                               adversary=adversary if mode == "adversarial" else None, judge=judge,
                               progress=tick))
    rendered = [vocab.decode(p, skip_special=False).decode("utf-8", "replace") for p in ids]
    return CheckReport(budget, reason, bound, reach, modes, list(prompts),
                       (baseline_tokens or budget) if baseline else None, rendered, [len(p) for p in ids])
