"""The MaskBench benchmark judges every engine on the same labelled instances.

Peers (XGrammar, llguidance) run in their child process on a toy vocabulary (printable
ASCII plus a few JSON tokens and an EOS) and must report the four counts of every labelled
instance, time only the first valid one, and take their options (XGrammar's
``strict_mode``) through the child. Each peer test is skipped where the peer is absent.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import string
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from maskc.artifacts.bench import ENGINES, EngineResult, Instance, Job, TokenizerSpec, make_engine, measure
from maskc.artifacts.bench.engines import MaskcEngine
from maskc.compiler.vocab import Vocabulary

TOKENS = [c for c in string.printable if c not in "\t\n\r\x0b\x0c"] + \
    ['{"', '":', '",', '"}', "true", "false", "null", "<eos>"]

OPEN: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
CASE: dict[str, Any] = {
    "schema": OPEN,
    "tests": [
        {"description": "a string", "data": {"a": "x"}, "valid": False},
        {"description": "an undeclared key", "data": {"zz": 2, "a": 1}, "valid": True},
        {"description": "not spelled by the vocabulary", "data": {"a": 1, "é": 1}, "valid": True},
        {"description": "unlabelled", "data": {"a": 1}},
    ],
}


def _load_bench() -> ModuleType:
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "maskbench_bench.py"
    spec = importlib.util.spec_from_file_location("maskbench_bench", path)
    assert spec is not None and spec.loader is not None
    if spec.name in sys.modules:
        return sys.modules[spec.name]
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


mb = _load_bench()


@pytest.fixture(scope="module")
def toy() -> Vocabulary:
    return Vocabulary.from_tokens(TOKENS, eos="<eos>", name="toy")


@pytest.fixture(scope="module")
def toy_spec(tmp_path_factory: pytest.TempPathFactory) -> TokenizerSpec:
    path = tmp_path_factory.mktemp("toy") / "toy-tokens.json"
    path.write_text(json.dumps({"tokens": TOKENS, "eos": "<eos>"}))
    return TokenizerSpec(str(path))


def _skip_absent(peer: str) -> None:
    pytest.importorskip(ENGINES[peer].module)


def test_labelled_instances_follow_the_harness(toy: Vocabulary) -> None:
    instances, skipped = mb.labelled_instances(CASE, toy)
    # the unlabelled test is not one; the one the vocabulary cannot spell is left out
    assert skipped == 1
    assert [(x.desc, x.valid, toy.decode(x.ids)) for x in instances] == [
        ("#0 a string", False, b'{"a":"x"}'),
        ("#1 an undeclared key", True, b'{"a":1,"zz":2}'),  # maskc's key order: declared first
    ]


@pytest.mark.parametrize("peer", ["xgrammar", "llguidance"])
def test_peer_counts_every_instance_and_times_the_first_valid(peer: str, toy: Vocabulary,
                                                              toy_spec: TokenizerSpec) -> None:
    _skip_absent(peer)
    instances, _ = mb.labelled_instances(CASE, toy)
    proc = mb.PeerProcess(peer, mem_gb=0, timeout_s=120, tokenizer=toy_spec)
    try:
        run = proc.run(OPEN, instances, 1, judged=True)
        alone = proc.run(OPEN, instances, 1, judged=False)
    finally:
        proc.close()
    assert run.compiled, run.error
    assert (run.valid_accepted, run.valid_rejected, run.invalid_accepted, run.invalid_rejected) == (1, 0, 0, 1)
    assert run.sound and run.passed
    assert run.valid_rejected_tests == [] and run.invalid_accepted_tests == []
    # only the first valid instance's steps are timed
    assert len(run.token_us) == run.instance_tokens == run.tokens_accepted == len(instances[1].ids)
    assert run.instance_accepted is True
    # without the checks the peer walks the first valid instance alone, and judges nothing
    assert not alone.judged and alone.passed is None and alone.sound is None
    assert (alone.valid_accepted, alone.invalid_rejected) == (0, 0) and alone.instance_accepted is True
    assert proc.worker.info.get("strict_mode", False) is False


def test_xgrammar_strict_option_reaches_the_child(toy: Vocabulary, toy_spec: TokenizerSpec) -> None:
    _skip_absent("xgrammar")
    instances, _ = mb.labelled_instances(CASE, toy)
    proc = mb.PeerProcess("xgrammar", mem_gb=0, timeout_s=120, options={"strict": True}, tokenizer=toy_spec)
    try:
        run = proc.run(OPEN, instances, 1, judged=True)
    finally:
        proc.close()
    assert proc.worker.info["strict_mode"] is True
    # strict mode forbids the undeclared key the schema admits: a valid instance rejected
    assert (run.valid_accepted, run.valid_rejected, run.invalid_accepted, run.invalid_rejected) == (0, 1, 0, 1)
    assert run.compiled and run.sound and not run.passed
    assert run.valid_rejected_tests == ["#1 an undeclared key"] and run.instance_accepted is False


@pytest.mark.parametrize("strict", [False, True])
def test_xgrammar_strict_decides_undeclared_keys(strict: bool, toy: Vocabulary, tmp_path: Path) -> None:
    _skip_absent("xgrammar")
    engine = make_engine("xgrammar", toy, {"strict": strict})
    assert engine.info()["strict_mode"] is strict
    extra = Instance(tuple(toy.encode('{"a":1,"zz":2}')), True)
    plain = Instance(tuple(toy.encode('{"a":1}')), True)
    res = measure(engine, Job(OPEN, (extra, plain), timed=1), tmp_path)
    assert res.verdicts == [not strict, True]
    assert len(res.step_us) == len(plain.ids)


def test_steps_run_over_a_frozen_heap_thawed_after(toy: Vocabulary, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A full collection during the timed steps scans what the steps made, not the heap the
    process held before them; the collector is as it was once the steps end."""
    from maskc.artifacts.bench import runner

    seen: list[int] = []
    walk = runner._walk
    monkeypatch.setattr(runner, "_walk", lambda *a: seen.append(gc.get_freeze_count()) or walk(*a))
    before = gc.get_freeze_count()
    plain = Instance(tuple(toy.encode('{"a":1}')), True)
    bad = Instance(tuple(toy.encode('{"a":"x"}')), False)
    res = measure(make_engine("maskc", toy), Job(OPEN, (plain, bad), timed=0), tmp_path)
    assert res.verdicts == [True, False] and len(res.step_us) == len(plain.ids)
    assert len(seen) == 2 and all(n > before for n in seen)
    assert gc.get_freeze_count() == before


def test_xgrammar_follows_maskc_semantics_by_default(toy: Vocabulary) -> None:
    _skip_absent("xgrammar")
    assert MaskcEngine.semantics == "exact"
    assert make_engine("xgrammar", toy).info()["strict_mode"] is False


def test_engine_options_and_timed_index_are_checked(toy: Vocabulary) -> None:
    with pytest.raises(TypeError):
        make_engine("maskc", toy, {"strict": True})
    with pytest.raises(ValueError, match="timed must index the 1 instances, got 1"):
        Job(OPEN, (Instance((1,), True),), timed=1)


def _row(name: str, **engines: Any) -> dict[str, Any]:
    return {"name": name, "engines": {e: r.as_dict() for e, r in engines.items()},
            "_token_us": {e: r.token_us for e, r in engines.items()}}


def test_sound_and_passed_rows_and_failure_lines() -> None:
    ok = mb.EngineRun(compiled=True, compile_ms=1.0, judged=True, valid_accepted=2, invalid_rejected=1)
    leaky = mb.EngineRun(compiled=True, compile_ms=1.0, judged=True, valid_accepted=2, invalid_accepted=1,
                         invalid_accepted_tests=["#2 too long"])
    strict = mb.EngineRun(compiled=True, compile_ms=1.0, judged=True, valid_accepted=1, valid_rejected=1,
                          invalid_rejected=1, valid_rejected_tests=["#0 extra key"])
    broken = mb.EngineRun(error="boom", compile_ms=1.0, judged=True)
    rows = [_row("A.json", maskc=ok, peer=leaky), _row("B.json", maskc=ok, peer=strict),
            _row("C.json", maskc=broken, peer=ok)]
    agg = mb.aggregate(rows, ["maskc", "peer"])
    m, p = agg["engines"]["maskc"], agg["engines"]["peer"]
    assert (m["compiled"], m["sound"], m["passed"], m["failed_schemas"]) == (2, 2, 2, [])
    assert (p["compiled"], p["sound"], p["passed"]) == (3, 2, 1)
    assert p["instances"] == {"valid_accepted": 5, "valid_rejected": 1, "invalid_accepted": 1, "invalid_rejected": 2}
    assert [(f["name"], f["invalid_accepted"], f["valid_rejected"]) for f in p["failed_schemas"]] == \
        [("A.json", 1, 0), ("B.json", 0, 1)]
    assert p["failed_schemas"][0]["invalid_accepted_tests"] == ["#2 too long"]
    table = {r[0]: r[1:3] for r in mb.table_rows(agg, ["maskc", "peer"])}
    assert table["compiled (all schemas)"] == ["2/3", "3/3"]
    assert table["sound (compiled, no invalid accepted)"] == ["2/3", "2/3"]
    assert table["passed (compiled, every instance right)"] == ["2/3", "1/3"]
    assert mb.failure_lines(agg, ["maskc", "peer"]) == [
        "maskc: every instance right on the 2 compiled schema(s)",
        "peer: accepted an invalid instance in 1: A; rejected a valid instance in 1: B",
    ]


def test_a_child_that_cannot_restart_fails_one_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[int] = []

    class Worker:
        """Stands in for ``EngineWorker``: the first one's restart fails, the next one works."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            started.append(1)
            self.first = len(started) == 1
            self.info: dict[str, Any] = {"version": str(len(started))}

        def run(self, job: Job) -> EngineResult:
            if self.first:
                raise RuntimeError("peer died while starting (exit code 1)")
            return EngineResult(ok=True, cold_ms=1.0, step_us=[1.0] * len(job.instances[0].ids), verdicts=[True],
                                valid_accepted=1)

        def close(self) -> None:
            pass

    monkeypatch.setattr(mb, "EngineWorker", Worker)
    proc = mb.PeerProcess("peer", mem_gb=0, timeout_s=1)
    instances = [mb.Labelled("#0 x", True, (1, 2, 3))]
    failed = proc.run({}, instances, 0, judged=True)
    assert not failed.compiled and failed.error.startswith("restart failed: peer died while starting")
    assert failed.judged and failed.passed is False
    ok = proc.run({}, instances, 0, judged=True)
    assert ok.compiled and ok.passed and ok.valid_accepted == 1 and ok.instance_accepted is True
    assert len(started) == 2


def test_the_frozen_heap_is_not_collected_first() -> None:
    """Freezing alone clears the count a collection is due by; a collection of the heap right
    before the steps would evict the caches their first visits use."""
    from maskc.artifacts.bench import runner

    events: list[str] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        events.append(phase)

    gc.collect()
    junk = [[i] for i in range(5_000)]  # tracked objects: the youngest generation's count grows
    gc.callbacks.append(seen)
    try:
        with runner.frozen_heap():
            due = gc.get_count()[0]
    finally:
        gc.callbacks.remove(seen)
    del junk
    assert events == [] and due == 0
