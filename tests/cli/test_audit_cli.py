"""``maskc audit`` end to end: the JSON document, the human tables, --fail-on and exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

import maskc
from maskc.cli import app
from tests.cli.test_cli import _env  # noqa: F401 (the CLI tests' environment fixture)

PLANTED = ["{", '"', "a", ":", ",", "}", '",', '"}', '{"', '":"', "<eos>"]
OBJECT_A = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
            "additionalProperties": False}


def _vocab(tmp_path: Path, tokens: list[str], name: str = "vocab.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"tokens": tokens, "eos": "<eos>"}))
    return str(path)


def _run(*args: str) -> Result:
    return CliRunner().invoke(app, ["audit", *args])


def _doc(result: Result) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _category(grammar: dict[str, Any], rule: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in grammar["audit"]["categories"] if c["rule"] == rule)
    return found


def test_tokenizer_only(tmp_path: Path) -> None:
    r = _run("--tokenizer", _vocab(tmp_path, PLANTED), "--json")
    assert r.exit_code == 0, r.output
    doc = _doc(r)
    assert doc["schema_version"] == 1 and doc["tool"] == "maskc audit" and doc["grammars"] == []
    assert doc["tokenizer"]["summary"]["token_count"] == len(PLANTED)


def test_planted_schema_json(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(OBJECT_A))
    r = _run("-t", _vocab(tmp_path, PLANTED), "a.json", "--json", "--show", "10")
    assert r.exit_code == 0, r.output
    (g,) = _doc(r)["grammars"]
    assert g["path"] == "a.json" and g["grammar_kind"] == "json_schema" and g["error"] is None
    smug = _category(g, "smuggler")
    assert smug["total"] == {"states": 3, "pairs": 7, "tokens": 3}
    assert {(e["prefix"], e["token"]) for e in smug["examples"]} >= {('{"a":"', '",'), ("{", '"}')}
    rules = {f["rule"] for f in g["audit"]["findings"]}
    assert {"smuggler", "boundary-token", "eos-only-state"} <= rules


def test_artifact_input_matches_source(tmp_path: Path) -> None:
    spec = _vocab(tmp_path, PLANTED)
    (tmp_path / "a.json").write_text(json.dumps(OBJECT_A))
    vocab = maskc.load_tokenizer(spec)
    art = maskc.compile_json_schema(OBJECT_A, vocab)
    art.save(tmp_path / "a.safetensors")
    r = _run("-t", spec, "a.json", "a.safetensors", "--json")
    assert r.exit_code == 0, r.output
    src, loaded = _doc(r)["grammars"]
    assert loaded["audit"]["categories"] == src["audit"]["categories"]


def test_human_report(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(OBJECT_A))
    r = _run("-t", _vocab(tmp_path, PLANTED), "a.json")
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "quote+comma" in out  # the tokenizer table
    assert "smuggler" in out and "boundary-token" in out and "(state, token) pairs" in out
    assert "An engine that checks only a token's first byte" in out  # the sentence of the category
    assert "'{\"a\":\"'" in out and "rejected at byte 2" in out


def test_fail_on(tmp_path: Path) -> None:
    # vocabulary without 'b'/'c' tokens: after 'a' the grammar needs 'b' or 'c' (an error);
    # the forced run "abcde"-style warning comes from the second grammar
    spec = _vocab(tmp_path, ["a", "ab", "d", "<eos>"])
    (tmp_path / "g.gbnf").write_text('root ::= "a" [bc] "d"\n')
    assert _run("-t", spec, "g.gbnf").exit_code == 1
    assert _run("-t", spec, "g.gbnf", "--fail-on", "never").exit_code == 0
    forced = _vocab(tmp_path, ["a", "b", "c", "d", "e", "ab", "abc", "cde", "<eos>"], "forced.json")
    (tmp_path / "f.gbnf").write_text('root ::= "abcde"\n')
    assert _run("-t", forced, "f.gbnf").exit_code == 0  # a warning, below the default --fail-on error
    r = _run("-t", forced, "f.gbnf", "--fail-on", "warning", "--json")
    assert r.exit_code == 1
    (g,) = _doc(r)["grammars"]
    assert _category(g, "noncanonical-forced")["total"]["states"] == 1


def test_unreadable_input_exits_2_and_reports_the_rest(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(OBJECT_A))
    (tmp_path / "bad.json").write_text("{not json")
    r = _run("-t", _vocab(tmp_path, PLANTED), "a.json", "bad.json", "missing.json", "--json")
    assert r.exit_code == 2
    good, bad, missing = _doc(r)["grammars"]
    assert good["error"] is None and bad["error"]["type"] and missing["error"]["type"]
    assert "Traceback" not in r.output
    human = _run("-t", _vocab(tmp_path, PLANTED), "missing.json")
    assert human.exit_code == 2 and "missing.json" in human.stderr and "Traceback" not in human.output


def test_bad_show_is_a_usage_error(tmp_path: Path) -> None:
    assert _run("-t", _vocab(tmp_path, PLANTED), "--show", "-1").exit_code == 2
