"""The JSON-Schema-Test-Suite as maskc runs it: each case compiled in ``exact`` semantics
(compact whitespace, a byte vocabulary so the masks are the automaton's own), each
labelled instance serialized in the grammar's property order and judged by a matcher.

Used by ``tests/test_jsts.py`` (the suite in CI, held to ``tests/data/jsts_expected.json``)
and ``benchmarks/jsts_conformance.py`` (counts, and the expected file rewritten).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import maskc
from maskc.compiler.vocab import byte_tokenizer
from tests.maskbench import error_reason, serialize

__all__ = ["DRAFTS", "EXPECTED_FILE", "JSTS_HOWTO", "CaseResult", "jsts_location", "suite_files", "judge_case",
           "run_file", "with_draft", "load_expected", "keyed"]

DRAFTS = ("draft2020-12", "draft7")
REPO_ROOT = Path(__file__).resolve().parent.parent
EXPECTED_FILE = REPO_ROOT / "tests" / "data" / "jsts_expected.json"
JSTS_ENV = "MASKC_JSTS_DIR"
JSTS_HOWTO = (
    "get the JSON-Schema-Test-Suite from github.com/json-schema-org/JSON-Schema-Test-Suite (folder tests) "
    f"and set {JSTS_ENV} to that folder, or place it at ../shared/jsts next to the repository"
)
COMPILE_SECONDS = 10.0

SCHEMA_URIS = {
    "draft4": "http://json-schema.org/draft-04/schema#",
    "draft6": "http://json-schema.org/draft-06/schema#",
    "draft7": "http://json-schema.org/draft-07/schema#",
    "draft2019-09": "https://json-schema.org/draft/2019-09/schema",
    "draft2020-12": "https://json-schema.org/draft/2020-12/schema",
}


def jsts_location() -> Path:
    """``$MASKC_JSTS_DIR``, else ``$MASKC_SHARED_DIR/jsts``, else ``../shared/jsts``."""
    env = os.environ.get(JSTS_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    shared = os.environ.get("MASKC_SHARED_DIR", "").strip()
    return Path(shared).expanduser() / "jsts" if shared else REPO_ROOT.parent / "shared" / "jsts"


def suite_files(draft: str, folder: Path | None = None) -> list[Path]:
    """The suite's files of one draft (required keywords only, not ``optional/``)."""
    return sorted(((folder or jsts_location()) / draft).glob("*.json"))


def with_draft(schema: Any, draft: str) -> Any:
    """``schema`` with the ``$schema`` of its draft when it names none (the suite runs each
    folder under its draft)."""
    if isinstance(schema, dict) and "$schema" not in schema and draft in SCHEMA_URIS:
        return {"$schema": SCHEMA_URIS[draft], **schema}
    return schema


@dataclass
class CaseResult:
    """One case: refused (with the reason), or compiled with the instances it got wrong."""

    description: str
    refused: str | None = None  # error_reason() of the refusal
    message: str = ""
    invalid_accepted: list[str] = field(default_factory=list)  # soundness bugs
    valid_rejected: list[str] = field(default_factory=list)
    instances: int = 0
    compile_ms: float = 0.0


def judge_case(case: dict[str, Any], draft: str, vocab: maskc.Vocabulary | None = None,
               semantics: str = "exact", seconds: float = COMPILE_SECONDS) -> CaseResult:
    import time

    vocab = vocab or byte_tokenizer()
    schema = with_draft(case["schema"], draft)
    out = CaseResult(case["description"])
    opts = maskc.CompileOptions(limits=maskc.Limits(max_seconds=seconds), semantics=semantics)  # type: ignore[arg-type]
    t0 = time.perf_counter()
    try:
        art = maskc.compile_json_schema(schema, vocab, options=opts)
    except maskc.MaskcError as e:
        out.refused, out.message = error_reason(e), str(e)
        return out
    out.compile_ms = (time.perf_counter() - t0) * 1000
    for t in case["tests"]:
        try:
            text = serialize(t["data"], schema)
        except (TypeError, ValueError):
            continue  # an instance JSON cannot carry as given (NaN, say): no verdict
        m = art.matcher()
        ok = bool(m.accept_string(text) and m.can_terminate())
        out.instances += 1
        if ok and not t["valid"]:
            out.invalid_accepted.append(t["description"])
        elif not ok and t["valid"]:
            out.valid_rejected.append(t["description"])
    return out


def run_file(path: Path, draft: str, **kw: Any) -> Iterator[CaseResult]:
    vocab = byte_tokenizer()
    for case in json.loads(path.read_text(encoding="utf-8")):
        yield judge_case(case, draft, vocab, **kw)


def keyed(names: list[str]) -> list[str]:
    """Case descriptions made unique within a file (a repeat gets `` #2``, ...): the keys of
    the expected file."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n} #{seen[n]}")
    return out


def load_expected(path: Path = EXPECTED_FILE) -> dict[str, Any]:
    """``{draft: {file: {"refused": {case: reason}, "deviations": {case: {instance: why}}}}}``."""
    if not path.is_file():
        return {}
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data
