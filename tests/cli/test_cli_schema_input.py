"""``maskc compile`` on the inputs people bring: invalid and deeply nested schemas (exit 2,
no traceback), tool-definition files, and the compile limits ``--max-states`` /
``--max-seconds`` (exit 1 past them; recorded in the artifact)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import maskc
from tests.cli.test_cli import _env, compile_json, invoke, vocab  # noqa: F401 (fixtures)


def _write(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc))
    return path


def _nest(n: int, wrap: Any) -> Any:
    s: Any = {"type": "string"}
    for _ in range(n):
        s = wrap(s)
    return s


@pytest.mark.parametrize(("doc", "pointer"), [
    ({"type": "string", "minLength": None}, "/minLength"),
    ({"type": "array", "minItems": None}, "/minItems"),
    ({"type": "string", "maxLength": None}, "/maxLength"),
    (_nest(300, lambda s: {"items": s}), "/items/items/items"),
    (_nest(300, lambda s: {"type": "object", "properties": {"x": s}}), "/properties/x/properties/x"),
])
def test_invalid_or_too_deep_schema_is_an_input_error(tmp_path: Path, vocab: str, doc: Any, pointer: str) -> None:
    code, out = compile_json(_write(tmp_path / "bad.json", doc), "-t", vocab)
    assert code == 1  # a batch with a failed input; not 3 (internal)
    error = out["results"][0]["error"]
    assert error["type"] == "SchemaError"
    assert error["pointer"].startswith(pointer)


def test_too_deep_schema_in_human_format_has_no_traceback(tmp_path: Path, vocab: str) -> None:
    result = invoke("compile", _write(tmp_path / "deep.json", _nest(300, lambda s: {"items": s})), "-t", vocab)
    assert result.exit_code == 1
    assert "Traceback" not in result.output and "nests deeper than" in result.output


def test_tool_definitions_compile_to_their_schema(tmp_path: Path, vocab: str) -> None:
    params = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    files = [
        _write(tmp_path / "openai.json", {"type": "function", "function": {"name": "f", "parameters": params}}),
        _write(tmp_path / "anthropic.json", {"name": "f", "description": "d", "input_schema": params}),
        _write(tmp_path / "format.json", {"type": "json_schema", "json_schema": {"name": "f", "schema": params}}),
    ]
    code, out = compile_json(*files, "-t", vocab)
    assert code == 0, out
    shas = {maskc.load_artifact(r["artifact"]).metadata["grammar_sha256"] for r in out["results"]}
    assert len(shas) == 1


def test_tool_definition_without_a_schema_fails_with_its_pointer(tmp_path: Path, vocab: str) -> None:
    bad = _write(tmp_path / "tool.json", {"type": "function", "function": {"name": "f", "parameters": [1]}})
    code, out = compile_json(bad, "-t", vocab)
    assert code == 1
    assert out["results"][0]["error"]["pointer"] == "/function/parameters"


ARRAY = {"type": "array", "maxItems": 10,  # (items without a count of their own: copied whole)
         "items": {"type": "object", "required": ["a", "b"],
                   "properties": {"a": {"enum": [f"{i:03d}{i * 7919 % 1000:03d}" for i in range(200)]},
                                  "b": {"type": "integer"}}}}


def test_max_states_bounds_the_compile_and_is_recorded(tmp_path: Path, vocab: str) -> None:
    schema = _write(tmp_path / "list.json", ARRAY)
    code, out = compile_json(schema, "-t", vocab, "--max-states", "2000")
    assert code == 1
    error = out["results"][0]["error"]
    assert error["type"] == "StateLimitExceeded"
    assert "max_states 2000" in error["message"] and error["pointer"] == "/maxItems"
    assert "--max-states" in error["hint"]
    code, out = compile_json(schema, "-t", vocab, "--max-states", "100000", "--max-seconds", "120")
    assert code == 0, out
    limits = maskc.load_artifact(out["results"][0]["artifact"]).options["limits"]
    assert limits["max_states"] == 100000 and limits["max_seconds"] == 120.0


def test_small_max_states_fails_any_schema_naming_the_limit(tmp_path: Path, vocab: str) -> None:
    schema = _write(tmp_path / "s.json", {"type": "string", "maxLength": 30})
    result = invoke("compile", schema, "-t", vocab, "--max-states", "5")
    assert result.exit_code == 1
    assert "limit of 5" in result.output and "Traceback" not in result.output
    assert invoke("compile", schema, "-t", vocab, "--max-states", "20000").exit_code == 0


@pytest.mark.parametrize("args", [("--max-states", "0"), ("--max-seconds", "0"), ("--max-seconds", "inf"),
                                  ("--max-seconds", "nan"), ("--max-states", "x")])
def test_bad_limits_are_a_usage_error(tmp_path: Path, vocab: str, args: tuple[str, str]) -> None:
    result = invoke("compile", _write(tmp_path / "s.json", {"type": "boolean"}), "-t", vocab, *args)
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_trace_takes_the_limits(tmp_path: Path, vocab: str) -> None:
    schema = _write(tmp_path / "s.json", {"type": "string", "maxLength": 30})
    result = invoke("trace", schema, "-t", vocab, "--text", '"ab"', "--max-states", "5")
    assert result.exit_code == 1 and "limit of 5" in result.output
    assert invoke("trace", schema, "-t", vocab, "--text", '"ab"').exit_code == 0
