"""``maskc bench`` end to end: child processes per engine, exact pass counts, timeouts,
skipped peers, and random-walk instances checked against the grammar and jsonschema.

Runs on a toy vocabulary (printable ASCII plus a few JSON tokens and an EOS), so every
engine child loads its tokenizer in milliseconds; peers run only where they import.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner, Result

import maskc
from maskc.artifacts.bench import engines as bench_engines
from maskc.artifacts.bench import load_case, random_walks
from maskc.cli import app
from maskc.compiler.vocab import Vocabulary
from tests.cli.test_cli import _env  # noqa: F401 (the CLI tests' environment fixture)

TOKENS = [c for c in string.printable if c not in "\t\n\r\x0b\x0c"] + \
    ['{"', '":', '",', '"}', "true", "false", "null", "<eos>"]

LABELLED: dict[str, Any] = {
    "schema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", "y"]}},
               "required": ["a"], "additionalProperties": False},
    "tests": [
        {"data": {"a": 1, "b": "x"}, "valid": True},
        {"data": {"b": "y", "a": 12}, "valid": True},  # serialized in the schema's key order
        {"data": {"a": "no"}, "valid": False},
        {"data": {"b": "x"}, "valid": False},
        {"data": {"a": 1, "b": "z"}, "valid": False},
    ],
}
FLAT: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 8},
                   "tags": {"type": "array", "items": {"enum": ["p", "q"]}, "maxItems": 3},
                   "n": {"type": "integer", "minimum": 0, "maximum": 99}},
    "required": ["name"], "additionalProperties": False,
}
RECURSIVE: dict[str, Any] = {
    "$defs": {"node": {"type": "object",
                       "properties": {"v": {"type": "boolean"},
                                      "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
                       "required": ["v"], "additionalProperties": False}},
    "$ref": "#/$defs/node",
}
HEAVY: dict[str, Any] = {"type": "string", "pattern": "^[ab]*a[ab]{16}$"}  # 131k DFA states: 2.4 s to compile here


@pytest.fixture
def vocab_file(tmp_path: Path) -> Path:
    path = tmp_path / "toy-tokens.json"
    path.write_text(json.dumps({"tokens": TOKENS, "eos": "<eos>"}))
    return path


@pytest.fixture
def toy() -> Vocabulary:
    return Vocabulary.from_tokens(TOKENS, eos="<eos>", name="toy")


def _write(folder: Path, files: dict[str, Any]) -> Path:
    folder.mkdir(exist_ok=True)
    for name, doc in files.items():
        (folder / name).write_text(json.dumps(doc))
    return folder


def _bench(*args: str | Path) -> tuple[Result, dict[str, Any]]:
    result = CliRunner().invoke(app, ["bench", *[str(a) for a in args], "--json"])
    assert "Traceback" not in result.output, result.output
    return result, json.loads(result.stdout)


def _by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {Path(r["path"]).name: r for r in doc["schemas"]}


def test_maskc_only_json_report(tmp_path: Path, vocab_file: Path) -> None:
    folder = _write(tmp_path / "schemas", {"labelled.json": LABELLED, "flat.json": FLAT, "recursive.json": RECURSIVE,
                                           "untested.json": {"schema": FLAT, "tests": []}})
    result, doc = _bench(folder, "--tokenizer", vocab_file, "--engines", "maskc", "--walks", "5")
    assert result.exit_code == 0, result.output
    assert doc["schema_version"] == 1
    assert set(doc) >= {"engines", "failed_engines", "skipped_engines", "settings", "schemas", "summary",
                        "ratios", "tokenizer"}
    assert list(doc["engines"]) == ["maskc"] and doc["engines"]["maskc"]["version"] == maskc.__version__
    assert doc["ratios"] == {} and doc["skipped_engines"] == {} and doc["failed_engines"] == {}
    assert doc["tokenizer"]["name"] == "toy-tokens.json"
    assert doc["settings"]["walks"] == 5 and doc["settings"]["memory_method"] in ("rss", "tracemalloc")

    rows = _by_name(doc)
    assert sorted(rows) == ["flat.json", "labelled.json", "recursive.json", "untested.json"]
    labelled = rows["labelled.json"]
    assert labelled["instances"] == {"source": "labelled", "valid": 2, "invalid": 3, "dropped": 0}
    run = labelled["engines"]["maskc"]
    assert run["ok"] and run["error"] is None
    assert (run["valid_accepted"], run["valid_rejected"], run["invalid_rejected"], run["invalid_accepted"]) == \
        (2, 0, 3, 0)
    assert run["cold_ms"] > 0 and run["warm_ms"] > 0 and run["size_bytes"] > 0
    assert run["peak_memory_bytes"] is not None
    # every token of both valid instances is one step; the invalid ones stop at their first refusal
    assert run["step_us"]["n"] >= len('{"a":1,"b":"x"}') // 2 and run["step_us"]["p50"] <= run["step_us"]["max"]

    for name in ("flat.json", "recursive.json", "untested.json"):  # no instances of their own: random walks
        row = rows[name]
        assert row["instances"]["source"] == "random walks"
        assert row["instances"]["valid"] == 5 and row["instances"]["invalid"] == 0
        assert row["engines"]["maskc"]["valid_accepted"] == 5

    s = doc["summary"]["maskc"]
    assert (s["schemas"], s["compiled"], s["errors"], s["common"]) == (4, 4, 0, 4)
    assert (s["passed"], s["failed"]) == (2 + 3 + 5 + 5 + 5, 0)
    assert set(s["step_us"]) == {"p50", "p90", "p99", "max", "n"}


def test_compile_error_and_timeout_are_per_schema_errors(tmp_path: Path, vocab_file: Path) -> None:
    folder = _write(tmp_path / "schemas", {"heavy.json": HEAVY, "unique.json": {"type": "array", "uniqueItems": True},
                                           "ok.json": LABELLED})
    result, doc = _bench(folder, "--tokenizer", vocab_file, "--engines", "maskc", "--timeout", "0.5")
    assert result.exit_code == 0, result.output
    rows = _by_name(doc)
    heavy = rows["heavy.json"]["engines"]["maskc"]
    assert not heavy["ok"] and heavy["error"].startswith("timeout: no result within 0.5 s")
    unique = rows["unique.json"]["engines"]["maskc"]
    assert not unique["ok"] and unique["error"].startswith("UnsupportedKeyword"), unique["error"]
    # the child killed for the timeout is replaced: the schema after it still runs
    assert rows["ok.json"]["engines"]["maskc"]["ok"]
    s = doc["summary"]["maskc"]
    assert (s["compiled"], s["errors"]) == (1, 2)
    assert s["error_kinds"] == {"UnsupportedKeyword": 1, "timeout": 1}


def test_missing_peer_is_skipped_with_its_install_line(tmp_path: Path, vocab_file: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_engines.OutlinesEngine, "module", "outlines_core_not_installed_here")
    folder = _write(tmp_path / "schemas", {"labelled.json": LABELLED})
    result, doc = _bench(folder, "--tokenizer", vocab_file, "--engines", "maskc,outlines")
    assert result.exit_code == 0, result.output
    assert list(doc["engines"]) == ["maskc"]
    assert doc["skipped_engines"] == {"outlines": "outlines is not installed: pip install outlines-core, "
                                                  "or pip install 'maskc[bench]'"}
    assert "skipped outlines is not installed: pip install outlines-core" in " ".join(result.stderr.split())


def test_bad_engine_names_are_usage_errors(tmp_path: Path, vocab_file: Path) -> None:
    folder = _write(tmp_path / "schemas", {"labelled.json": LABELLED})
    for engines, message in (("maskc,vllm", "unknown engine(s) vllm"), ("xgrammar", "must include maskc")):
        result = CliRunner().invoke(app, ["bench", str(folder), "--tokenizer", str(vocab_file), "--engines", engines])
        assert result.exit_code == 2
        assert message in " ".join(result.output.split())


def test_human_table_names_engines_and_metrics(tmp_path: Path, vocab_file: Path) -> None:
    folder = _write(tmp_path / "schemas", {"labelled.json": LABELLED})
    result = CliRunner().invoke(app, ["bench", str(folder), "--tokenizer", str(vocab_file), "--engines", "maskc"])
    assert result.exit_code == 0, result.output
    out = " ".join(result.stdout.split())
    for text in ("labelled.json", "2+3", "compiled", "1/1", "instances passed / failed", "5 / 0",
                 "cold: compile + first mask", "per token: mask + accept"):
        assert text in out


def test_sample_picks_n_files_with_the_seed(tmp_path: Path, vocab_file: Path) -> None:
    folder = _write(tmp_path / "schemas", {f"s{i}.json": {"const": i} for i in range(6)})
    picks = []
    for _ in range(2):
        result, doc = _bench(folder, "--tokenizer", vocab_file, "--engines", "maskc", "--sample", "2",
                             "--seed", "3", "--walks", "1")
        assert result.exit_code == 0, result.output
        picks.append(sorted(_by_name(doc)))
    assert len(picks[0]) == 2 and picks[0] == picks[1]


@pytest.mark.parametrize("schema", [FLAT, RECURSIVE], ids=["flat", "recursive"])
def test_random_walks_are_accepted_and_schema_valid(schema: dict[str, Any], toy: Vocabulary) -> None:
    art = maskc.compile_json_schema(schema, toy)
    walks = random_walks(art, toy, count=12, max_tokens=96, seed=7)
    assert len(walks) == 12
    assert walks == random_walks(art, toy, count=12, max_tokens=96, seed=7)
    for ids in walks:
        assert len(ids) <= 96
        m = art.matcher()
        assert all(m.accept_token(t) for t in ids) and m.can_terminate()
        jsonschema.validate(json.loads(toy.decode(ids)), schema)


def test_labelled_case_serializes_in_schema_order(tmp_path: Path, toy: Vocabulary) -> None:
    path = tmp_path / "case.json"
    path.write_text(json.dumps(LABELLED))
    case = load_case(path, toy)
    assert case.labelled and case.dropped == 0
    texts = [(toy.decode(i.ids), i.valid) for i in case.instances]
    assert texts[:2] == [(b'{"a":1,"b":"x"}', True), (b'{"a":12,"b":"y"}', True)]


@pytest.mark.parametrize("peer", ["llguidance", "xgrammar", "outlines"])
def test_peer_side_by_side(peer: str, tmp_path: Path, vocab_file: Path) -> None:
    pytest.importorskip(bench_engines.ENGINES[peer].module)
    folder = _write(tmp_path / "schemas", {"labelled.json": LABELLED})
    result, doc = _bench(folder, "--tokenizer", vocab_file, "--engines", f"maskc,{peer}")
    assert result.exit_code == 0, result.output
    run = _by_name(doc)["labelled.json"]["engines"][peer]
    assert run["ok"], run["error"]
    assert (run["valid_accepted"], run["invalid_rejected"], run["invalid_accepted"]) == (2, 3, 0)
    assert (run["size_bytes"] is None) == (peer == "llguidance")
    ratios = doc["ratios"][peer]
    assert ratios["cold_ms_p50"] == pytest.approx(run["cold_ms"] / doc["summary"]["maskc"]["cold_ms"]["p50"])
