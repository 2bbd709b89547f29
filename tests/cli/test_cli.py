"""The ``maskc`` command line, end to end through ``typer.testing.CliRunner``.

Compiles tiny schemas against a toy vocabulary (every printable ASCII byte plus a few JSON
tokens and an EOS), parses ``--json`` output from stdout and checks exit codes: 0 clean,
1 a compile failure, 2 bad invocation or input, 3 internal error.
"""

from __future__ import annotations

import json
import string
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

import maskc
from maskc.compiler import errors
from maskc.cli import app
from maskc.cli import errors as cli_errors

TOY_TOKENS = ["{", "}", '"', ":", ",", "a", "b", "1", "2", "true", "false", "null", "[", "]", " ",
              "<eos>"]
SCHEMAS: dict[str, Any] = {
    "person.json": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
    "flag.json": {"enum": [True, False, None]},
    "even.json": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
}


def toy_vocabulary(path: Path, extra: tuple[str, ...] = ()) -> Path:
    tokens = list(TOY_TOKENS)
    tokens += [c for c in string.printable if c not in tokens and c not in "\t\n\r\x0b\x0c"]
    tokens += ["\n", "\t", *extra]
    path.write_text(json.dumps({"tokens": tokens, "eos": "<eos>"}))
    return path


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASKC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.delenv("MASKC_DEBUG", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def vocab(tmp_path: Path) -> str:
    return str(toy_vocabulary(tmp_path / "toy-vocab.json"))


@pytest.fixture
def schema_dir(tmp_path: Path) -> Path:
    d = tmp_path / "schemas"
    d.mkdir()
    for name, schema in SCHEMAS.items():
        (d / name).write_text(json.dumps(schema))
    (d / "notes.json").write_text(json.dumps({"person.json": {"valid": [{"a": 1}]}}))
    return d


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def compile_json(*args: str | Path) -> tuple[int, dict[str, Any]]:
    result = invoke("compile", *args, "--json")
    assert "Traceback" not in result.output, result.output
    return result.exit_code, json.loads(result.stdout)


def by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {Path(r["path"]).name: r for r in doc["results"]}


def test_compile_directory_reports_each_schema(schema_dir: Path, vocab: str,
                                               tmp_path: Path) -> None:
    code, doc = compile_json(schema_dir, "--tokenizer", vocab, "-o", tmp_path / "out")
    assert code == 1
    assert doc["schema_version"] == 1
    assert doc["tokenizer"]["name"] == "toy-vocab.json"
    assert doc["summary"] == {"compiled": 2, "failed": 1}
    assert [Path(p).name for p in doc["skipped"]] == ["notes.json"]
    results = by_name(doc)
    assert sorted(results) == ["even.json", "flag.json", "person.json"]
    failed = results["even.json"]
    assert not failed["ok"] and failed["artifact"] is None
    assert failed["error"]["type"] == "UnsupportedKeyword"
    assert failed["error"]["pointer"] == "/uniqueItems"
    assert "--lenient" in failed["error"]["hint"]
    for name in ("flag.json", "person.json"):
        r = results[name]
        assert r["ok"] and r["error"] is None and r["cache_hit"] is False
        artifact = Path(r["artifact"])
        assert artifact.parent == tmp_path / "out"
        key = maskc.load_artifact(artifact).content_key[:16]
        assert artifact.name == f"{Path(name).stem}.{key}.safetensors"
        assert artifact.stat().st_size == r["bytes"]
        assert r["states"] > 0 and r["distinct_masks"] > 0


def test_lenient_records_not_enforced_and_second_run_hits_cache(schema_dir: Path,
                                                                vocab: str) -> None:
    code, doc = compile_json(schema_dir, "-t", vocab, "--lenient")
    assert code == 0
    assert doc["summary"] == {"compiled": 3, "failed": 0}
    even = by_name(doc)["even.json"]
    assert [(n["keyword"], n["pointer"]) for n in even["not_enforced"]] == [("uniqueItems", "/uniqueItems")]
    assert Path(even["artifact"]).parent.name == "maskc-artifacts"

    result = invoke("inspect", even["artifact"], "--json")
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert [n["keyword"] for n in info["not_enforced"]] == ["uniqueItems"]
    assert info["options"]["lenient"] is True
    assert info["grammar_kind"] == "json_schema" and info["tokenizer_verified"] is False

    human = invoke("inspect", even["artifact"])
    assert "not enforced: validate after decoding" in human.stdout
    assert "uniqueItems" in human.stdout

    code, again = compile_json(schema_dir, "-t", vocab, "--lenient")
    assert code == 0
    assert all(r["cache_hit"] for r in again["results"])
    assert [r["states"] for r in again["results"]] == [r["states"] for r in doc["results"]]


def test_human_output_has_table_and_summary_line(schema_dir: Path, vocab: str) -> None:
    result = invoke("compile", schema_dir, "-t", vocab)
    assert result.exit_code == 1
    assert "person" in result.stdout and "UnsupportedKeyword" in result.stdout
    assert "not enforced" not in result.stdout
    assert "2 compiled, 1 failed" in result.stdout
    assert "hint:" in result.stderr and "hint:" not in result.stdout
    assert "skipped" in result.stderr


def test_jobs_uses_worker_processes(schema_dir: Path, vocab: str) -> None:
    code, doc = compile_json(schema_dir, "-t", vocab, "--jobs", "2", "--lenient", "--no-cache")
    assert code == 0
    names = [Path(r["path"]).name for r in doc["results"]]
    assert names == ["even.json", "flag.json", "person.json"]
    assert all(r["ok"] and r["cache_hit"] is False for r in doc["results"])


def test_invalid_json_file_is_a_compile_failure(tmp_path: Path, vocab: str) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text('{"type": "object",')
    code, doc = compile_json(bad, "-t", vocab)
    assert code == 1
    assert doc["results"][0]["error"]["type"] == "InputError"
    assert "not valid JSON" in doc["results"][0]["error"]["message"]


def test_maskbench_file_compiles_its_schema(tmp_path: Path, vocab: str) -> None:
    case = tmp_path / "case.json"
    case.write_text(json.dumps({"schema": {"type": "boolean"},
                                "tests": [{"data": True, "valid": True}]}))
    code, doc = compile_json(case, "-t", vocab)
    assert code == 0 and doc["results"][0]["ok"]


def test_regex_and_choice(tmp_path: Path, vocab: str) -> None:
    code, doc = compile_json("--regex", "[ab]+1", "ab|ba", "-t", vocab)
    assert code == 0
    assert [r["path"] for r in doc["results"]] == ["[ab]+1", "ab|ba"]
    assert all(Path(r["artifact"]).name.startswith("regex-") for r in doc["results"])
    result = invoke("inspect", doc["results"][0]["artifact"], "--json")
    assert json.loads(result.stdout)["grammar_kind"] == "regex"

    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps(["true", "false", "abba"]))
    code, doc = compile_json("--choice", labels, "-t", vocab)
    assert code == 0 and Path(doc["results"][0]["artifact"]).name.startswith("labels.")

    code, doc = compile_json("--regex", "(ab", "-t", vocab)
    assert code == 1 and doc["results"][0]["error"]["type"] == "RegexSyntaxError"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("missing-dir",), "no such file or directory"),
        (("schemas", "--whitespace", "loose"), "whitespace"),
        (("schemas", "--whitespace", "flexible:x"), "whitespace"),
        (("schemas", "--tokenizer", "no-such-tokenizer.json"), "not found"),
        (("schemas", "--regex", "--choice"), "use one of"),
        (("schemas", "--jobs", "0"), "jobs"),
    ],
)
def test_bad_invocation_exits_2_without_traceback(schema_dir: Path, vocab: str,
                                                  args: tuple[str, ...], message: str) -> None:
    result = invoke("compile", *args, *(() if "--tokenizer" in args else ("-t", vocab)))
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_eos_override_by_text_and_id(schema_dir: Path, vocab: str) -> None:
    code, doc = compile_json(schema_dir / "flag.json", "-t", vocab, "--eos", "<eos>")
    assert code == 0 and doc["tokenizer"]["eos_ids"] == [TOY_TOKENS.index("<eos>")]
    code, doc = compile_json(schema_dir / "flag.json", "-t", vocab, "--eos", "5",
                             "--vocab-size", "128")
    assert code == 0
    assert doc["tokenizer"]["eos_ids"] == [5] and doc["tokenizer"]["vocab_size"] == 128


def test_inspect_rejects_corrupt_missing_and_mismatched_artifacts(schema_dir: Path, vocab: str,
                                                                  tmp_path: Path) -> None:
    _, doc = compile_json(schema_dir / "person.json", "-t", vocab)
    artifact = Path(doc["results"][0]["artifact"])
    verified = invoke("inspect", artifact, "--tokenizer", vocab)
    assert verified.exit_code == 0 and "built for toy-vocab.json" in verified.stdout
    assert "every keyword is enforced" in verified.stdout

    other = toy_vocabulary(tmp_path / "other-vocab.json", extra=("ab",))
    result = invoke("inspect", artifact, "--tokenizer", other)
    assert result.exit_code == 2
    assert "artifact was built for tokenizer 'toy-vocab.json'" in result.stderr

    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(artifact.read_bytes()[:100])
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"not an artifact at all")
    for path in (truncated, garbage, tmp_path / "absent.safetensors"):
        result = invoke("inspect", path)
        assert result.exit_code == 2, result.output
        assert "error:" in result.stderr and "Traceback" not in result.output


def test_internal_error_exits_3_and_debug_shows_traceback(schema_dir: Path, vocab: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(maskc, "compile_source", broken)
    result = invoke("compile", schema_dir / "flag.json", "-t", vocab)
    assert result.exit_code == 3
    assert "internal error" in result.stdout and "MASKC_DEBUG=1" in result.stderr
    assert "Traceback" not in result.output

    monkeypatch.setenv("MASKC_DEBUG", "1")
    result = invoke("compile", schema_dir / "flag.json", "-t", vocab, "--json")
    assert result.exit_code == 3
    assert "Traceback" in json.loads(result.stdout)["results"][0]["error"]["traceback"]


def test_cache_commands(schema_dir: Path, vocab: str, tmp_path: Path) -> None:
    result = invoke("cache", "path")
    assert result.exit_code == 0 and result.stdout.strip() == str(tmp_path / "cache")
    compile_json(schema_dir, "-t", vocab)

    listing = json.loads(invoke("cache", "ls", "--json").stdout)
    assert len(listing["entries"]) == 2
    kinds = {(e["kind"], e["tokenizer"]) for e in listing["entries"]}
    assert kinds == {("json_schema", "toy-vocab.json")}
    assert listing["total_bytes"] == sum(e["bytes"] for e in listing["entries"]) > 0
    assert "2 entries" in invoke("cache", "ls").stdout

    cleared = invoke("cache", "clear", "--format", "json")
    assert cleared.exit_code == 0 and json.loads(cleared.stdout)["removed"] == 2
    assert json.loads(invoke("cache", "ls", "--json").stdout)["entries"] == []


def test_cache_lists_and_clears_dequantized_models(tmp_path: Path) -> None:
    models = tmp_path / "cache" / "models"
    done, partial = models / "0123abcd-SmolLM2", models / "4567ef01-Broken"
    for d in (done, partial):
        d.mkdir(parents=True)
        (d / "model.safetensors").write_bytes(b"x" * 1000)
    (done / "maskc-model.json").write_text("{}")
    listing = json.loads(invoke("cache", "ls", "--json").stdout)
    assert [m["path"] for m in listing["models"]] == [str(done)]  # a crash's partial copy is not a model
    assert listing["models"][0]["bytes"] == 1002 and listing["models"][0]["tokenizer"] == "SmolLM2"
    assert "1 dequantized model" in invoke("cache", "ls").stdout
    assert json.loads(invoke("cache", "clear", "--json").stdout)["models_removed"] == 0
    assert done.exists()
    assert json.loads(invoke("cache", "clear", "--models", "--json").stdout)["models_removed"] == 1
    assert not done.exists() and json.loads(invoke("cache", "ls", "--json").stdout)["models"] == []


def test_help_lists_commands_and_examples() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for command in ("compile", "inspect", "check", "trace", "cache"):
        assert command in result.stdout
    for args in (["compile"], ["inspect"], ["check"], ["trace"], ["cache", "ls"]):
        assert "Examples" in invoke(*args, "--help").stdout


def test_default_tokenizer_is_deepseek(tmp_path: Path) -> None:
    schema = tmp_path / "yes.json"
    schema.write_text(json.dumps({"const": "yes"}))
    code, doc = compile_json(schema)
    assert code == 0
    assert doc["tokenizer"]["vocab_size"] > 100_000
    assert doc["results"][0]["ok"]


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (errors.SchemaError("bad", pointer="/type"), 2),
        (errors.UnsupportedKeyword("multipleOf", pointer="/multipleOf"), 2),
        (errors.RegexSyntaxError("unbalanced", pattern="(a", offset=0), 2),
        (errors.EmptyLanguage("nothing matches"), 2),
        (errors.TokenizerError("unreadable"), 2),
        (errors.ArtifactCorrupt("truncated"), 2),
        (errors.TokenizerMismatch(expected_name="a", expected_sha="0" * 64, got_name="b",
                                  got_sha="1" * 64), 2),
        (errors.StateLimitExceeded("states", limit=10, got=11), 1),
    ],
)
def test_error_table(error: errors.MaskcError, code: int) -> None:
    assert cli_errors.rule_for(error).code == code
    info = cli_errors.describe(error)
    assert info["type"] == type(error).__name__ and info["message"] == error.message


def test_console_script_entry_point(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "maskc", "compile", "missing.json"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False)
    assert done.returncode == 2
    assert "no such file or directory: missing.json" in done.stderr
    assert "Traceback" not in done.stderr
