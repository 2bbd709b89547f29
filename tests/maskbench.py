"""MaskBench harness: compile a benchmark schema and check its labelled instances.

MaskBench files (``$MASKC_MASKBENCH_DIR``, else ``../shared/maskbench`` relative to the
repository root; see :data:`MASKBENCH_HOWTO`) hold a real-world
schema and instances labelled valid or invalid. A valid instance must be accepted; an
invalid one must be rejected, else the artifact is unsound. Instances are serialized as the
grammar emits them: compact JSON with object keys in the schema's property order
(:func:`serialize`).

Shared by ``tests/test_maskbench.py`` and ``benchmarks/maskbench_bench.py``.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from maskc.artifacts.api import make_options
from maskc.artifacts.bench.serialize import serialize
from maskc.compiler.vocab import Vocabulary

import maskc

__all__ = [
    "COMPILE_SECONDS",
    "MASKBENCH_DIR",
    "MASKBENCH_ENV",
    "MASKBENCH_HOWTO",
    "OVERRUN_FACTOR",
    "HarnessTimeout",
    "SchemaResult",
    "Verdicts",
    "backstop_seconds",
    "check_artifact",
    "compile_case",
    "load_case",
    "maskbench_dir",
    "maskbench_location",
    "run_schema",
    "schema_files",
    "serialize",
    "split_of",
    "stratified",
    "summarize",
    "token_walk",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
MASKBENCH_DIR = REPO_ROOT.parent / "shared" / "maskbench"  # the default location
MASKBENCH_ENV = "MASKC_MASKBENCH_DIR"
MASKBENCH_HOWTO = (
    "get the MaskBench files from github.com/guidance-ai/jsonschemabench (folder maskbench/data) "
    f"and set {MASKBENCH_ENV} to that folder, or place them at ../shared/maskbench next to the repository"
)
COMPILE_SECONDS = 20.0  # per-schema compile guard
OVERRUN_FACTOR = 1.5  # a compile past this many times its limit is flagged; see compile_case

_NUMBERED = re.compile(r"^(?P<split>.+)_\d+$")
_MAX_DESCRIPTIONS = 20  # failing test descriptions kept per list


# -- files -----------------------------------------------------------------------------------


def maskbench_location() -> Path:
    """Where the MaskBench folder is looked for: ``$MASKC_MASKBENCH_DIR``, else
    ``$MASKC_SHARED_DIR/maskbench`` (the shared folder the GBNF tests read), else the default."""
    env = os.environ.get(MASKBENCH_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    shared = os.environ.get("MASKC_SHARED_DIR", "").strip()
    return Path(shared).expanduser() / "maskbench" if shared else MASKBENCH_DIR


def maskbench_dir() -> Path | None:
    """The MaskBench folder (:func:`maskbench_location`), or None where it is absent."""
    folder = maskbench_location()
    return folder if folder.is_dir() else None


def schema_files(folder: Path | None = None) -> list[Path]:
    folder = folder or maskbench_location()
    return sorted(folder.glob("*.json"))


def split_of(filename: str | Path) -> str:
    """The source split of a MaskBench file name.

    ``Github_easy---o123.json`` -> ``Github_easy``; ``BFCL_simple_12.json`` -> ``BFCL``;
    ``JME_3.json`` -> ``JME``.
    """
    stem = Path(filename).name
    stem = stem.removesuffix(".json")
    if "---" in stem:
        return stem.split("---", 1)[0]
    m = _NUMBERED.match(stem)
    split = m.group("split") if m else stem
    for group in ("BFCL", "JME"):
        if split == group or split.startswith(group + "_"):
            return group
    return split


def stratified(files: Iterable[Path], per_split: int, seed: int = 0) -> list[Path]:
    """Up to ``per_split`` files of each split, drawn deterministically from ``seed``."""
    by_split: dict[str, list[Path]] = {}
    for f in sorted(files, key=lambda p: p.name):
        by_split.setdefault(split_of(f), []).append(f)
    out: list[Path] = []
    for split in sorted(by_split):
        group = by_split[split]
        rng = random.Random(f"{seed}:{split}")
        out.extend(sorted(rng.sample(group, min(per_split, len(group))), key=lambda p: p.name))
    return out


# -- serialization ---------------------------------------------------------------------------


# -- running ---------------------------------------------------------------------------------


@dataclass(kw_only=True)
class Verdicts:
    """How an engine judged a schema's labelled instances, with the failing ones named."""

    valid_accepted: int = 0
    valid_rejected: int = 0
    invalid_accepted: int = 0
    invalid_rejected: int = 0
    valid_rejected_tests: list[str] = field(default_factory=list)
    invalid_accepted_tests: list[str] = field(default_factory=list)


@dataclass
class SchemaResult(Verdicts):
    """The outcome of one MaskBench schema."""

    split: str
    name: str
    status: str  # "compiled" | "compile_error" | "crash" (an exception other than MaskcError)
    error: str = ""  # exception class name, "UnsupportedKeyword:<keyword>", "crash:<exception class>"
    message: str = ""
    compile_ms: float = 0.0
    states: int = 0
    masks: int = 0
    artifact_bytes: int = 0
    limit_overrun: bool = False  # ran past OVERRUN_FACTOR x max_seconds (time guard late)
    # a valid instance the DFA accepts but the token walk rejects (an alignment bug)
    token_mismatch_tests: list[str] = field(default_factory=list)
    # serializations of the invalid instances that were accepted (soundness offenders)
    invalid_accepted_texts: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def error_reason(exc: BaseException) -> str:
    name = type(exc).__name__
    kw = getattr(exc, "keyword", None)
    return f"{name}:{kw}" if kw else name


SEMANTICS = "exact"
"""MaskBench instances are labelled by JSON Schema's verdict, so the slice is compiled in
``exact`` semantics: a valid instance rejected is then a restriction to fix, not a choice."""


def compile_options(max_seconds: float = COMPILE_SECONDS, semantics: str = SEMANTICS) -> maskc.CompileOptions:
    return make_options(limits=maskc.Limits(max_seconds=max_seconds), semantics=semantics)


def load_case(path: Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        case: dict[str, Any] = json.load(f)
    return case


def token_walk(art: maskc.Artifact, tok: Vocabulary, text: bytes, *, check_mask: bool = True) -> bool:
    """Whether the matcher accepts ``text`` token by token and can then terminate.

    With ``check_mask``, every token must also be allowed by the bitmask of its step.
    """
    ids = tok.encode(text.decode("utf-8"))
    m = art.matcher()
    bitmask = maskc.allocate_bitmask_np(1, art.vocab_size) if check_mask else None
    for t in ids:
        if bitmask is not None:
            m.fill_next_token_bitmask(bitmask, 0)
            if not (int(bitmask[0, t >> 5]) >> (t & 31)) & 1:
                return False
        if not m.accept_token(t):
            return False
    return bool(m.can_terminate())


def _tests(case: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    tests = case.get("tests") or []
    yield from enumerate(t for t in tests if isinstance(t, dict) and "valid" in t)


def run_schema(path: Path, tok: Vocabulary, *, token_level: bool,
               max_seconds: float = COMPILE_SECONDS) -> SchemaResult:
    """Compile one MaskBench schema (no cache) and check each of its labelled instances.

    A valid instance counts accepted when the byte-level DFA accepts its serialization and,
    with ``token_level``, the matcher accepts its tokens (each allowed by the step's mask)
    and can then terminate. An invalid instance counts accepted when the byte-level DFA
    accepts its serialization: a soundness bug.
    """
    case = load_case(path)
    res = SchemaResult(split=split_of(path), name=path.name, status="compiled")
    art = compile_case(case, tok, res, max_seconds=max_seconds)
    if art is not None:
        check_artifact(art, case, tok, res, token_level=token_level)
    return res


class HarnessTimeout(Exception):
    """The compile ran well past its ``max_seconds`` without raising TimeLimitExceeded."""


@contextmanager
def _backstop(seconds: float) -> Iterator[None]:
    """Raise :class:`HarnessTimeout` after ``seconds`` (SIGALRM; a no-op off the main thread)."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def fire(signum: int, frame: Any) -> None:
        raise HarnessTimeout

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def backstop_seconds(max_seconds: float) -> float:
    """How long the harness lets a compile run before it stops it itself."""
    return max_seconds * OVERRUN_FACTOR + 5.0


def compile_case(case: dict[str, Any], tok: Vocabulary, res: SchemaResult, *,
                 max_seconds: float = COMPILE_SECONDS) -> maskc.Artifact | None:
    """Compile ``case["schema"]`` without cache, recording the outcome in ``res``.

    A compile still running at :func:`backstop_seconds` is stopped and recorded as
    ``HarnessTimeout``; any compile that ends past ``OVERRUN_FACTOR`` times its limit is
    flagged ``limit_overrun`` (the compiler's own time guard came late or never).
    """
    t0 = time.perf_counter()
    art = None
    try:
        with _backstop(backstop_seconds(max_seconds)):
            art = maskc.compile_json_schema(case["schema"], tok, options=compile_options(max_seconds))
    except maskc.MaskcError as e:
        res.status, res.error, res.message = "compile_error", error_reason(e), str(e)[:300]
    except HarnessTimeout:
        res.status, res.error = "compile_error", "HarnessTimeout"
        res.message = (f"stopped by the harness after {backstop_seconds(max_seconds):.0f} s; "
                       f"max_seconds={max_seconds:g} did not fire")
    except Exception as e:  # noqa: BLE001
        # Not a MaskcError: the compiler failed instead of refusing the schema (a bug).
        res.status, res.error, res.message = "crash", f"crash:{type(e).__name__}", str(e)[:300]
    elapsed_ms = (time.perf_counter() - t0) * 1e3
    res.limit_overrun = elapsed_ms > OVERRUN_FACTOR * max_seconds * 1e3
    if art is None:
        res.compile_ms = elapsed_ms
        return None
    res.status = "compiled"
    res.compile_ms = art.compile_ms
    res.states, res.masks, res.artifact_bytes = art.num_states, art.num_masks, art.nbytes
    return art


def check_artifact(art: maskc.Artifact, case: dict[str, Any], tok: Vocabulary, res: SchemaResult, *,
                   token_level: bool) -> None:
    """Count the labelled instances of ``case`` that ``art`` accepts and rejects into ``res``."""
    schema = case["schema"]
    for i, test in _tests(case):
        desc = f"#{i} {test.get('description', '')}"[:160]
        text = serialize(test.get("data"), schema)
        m = art.matcher()
        ok = bool(m.accept_string(text) and m.can_terminate())
        if test["valid"]:
            if ok and token_level and not token_walk(art, tok, text):
                ok = False
                if len(res.token_mismatch_tests) < _MAX_DESCRIPTIONS:
                    res.token_mismatch_tests.append(desc)
            if ok:
                res.valid_accepted += 1
            else:
                res.valid_rejected += 1
                if len(res.valid_rejected_tests) < _MAX_DESCRIPTIONS:
                    res.valid_rejected_tests.append(desc)
        elif ok:
            res.invalid_accepted += 1
            if len(res.invalid_accepted_tests) < _MAX_DESCRIPTIONS:
                res.invalid_accepted_tests.append(desc)
                res.invalid_accepted_texts.append(text.decode("utf-8")[:500])
        else:
            res.invalid_rejected += 1


def summarize(results: Sequence[SchemaResult]) -> dict[str, dict[str, Any]]:
    """Counts per split (and ``ALL``): schemas, compiled, crashes, errors by reason, instance outcomes."""
    out: dict[str, dict[str, Any]] = {}
    for r in results:
        for key in (r.split, "ALL"):
            s = out.setdefault(key, {
                "schemas": 0, "compiled": 0, "crashes": 0, "limit_overruns": 0, "compile_errors": {}, "valid_accepted": 0,
                "valid_rejected": 0, "invalid_accepted": 0, "invalid_rejected": 0,
                "schemas_all_valid_accepted": 0,
            })
            s["schemas"] += 1
            s["limit_overruns"] += r.limit_overrun
            if r.status == "compiled":
                s["compiled"] += 1
                for k in ("valid_accepted", "valid_rejected", "invalid_accepted", "invalid_rejected"):
                    s[k] += getattr(r, k)
                s["schemas_all_valid_accepted"] += r.valid_rejected == 0
            else:
                s["crashes"] += r.status == "crash"
                s["compile_errors"][r.error] = s["compile_errors"].get(r.error, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: (kv[0] == "ALL", kv[0])))
