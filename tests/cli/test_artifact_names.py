"""``maskc compile`` output folders: one file per (grammar, tokenizer, options), a
``manifest.json`` that finds it, distinct labels for inputs that share a stem."""

from __future__ import annotations

import hashlib
import json
import string
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

import maskc
from maskc.artifacts.manifest import find_artifact, read_manifest, update_manifest
from maskc.cli import app

SCHEMA = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASKC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def vocab(tmp_path: Path) -> str:
    tokens = [c for c in string.printable if c not in "\x0b\x0c"] + ["<eos>", "<end>"]
    path = tmp_path / "vocab.json"
    path.write_text(json.dumps({"tokens": tokens, "eos": "<eos>"}))
    return str(path)


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def compile_json(*args: str | Path) -> dict[str, Any]:
    result = invoke("compile", *args, "--json")
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


OPTION_SETS = [
    (), ("-w", "pretty"), ("-w", "flexible"), ("-w", "flexible:2"), ("--max-depth", "8"), ("--lenient",),
    ("--eos", "<end>"), ("--vocab-size", "128"),
]


def test_other_options_never_overwrite_an_artifact(tmp_path: Path, vocab: str) -> None:
    (tmp_path / "s.json").write_text(json.dumps(SCHEMA))
    files = []
    for opts in OPTION_SETS:
        doc = compile_json("s.json", "-t", vocab, *opts)
        files.append(Path(doc["results"][0]["artifact"]))
    assert len(set(files)) == len(OPTION_SETS)
    for path in files:
        art = maskc.load_artifact(path)  # every one still there, intact
        assert path.name == f"s.{art.content_key[:16]}.safetensors"
    entries = read_manifest(tmp_path / "maskc-artifacts")
    assert sorted(e["artifact"] for e in entries) == sorted(p.name for p in files)
    pretty = [e for e in entries if e["options"]["whitespace"] == "pretty:2"]
    assert len(pretty) == 1 and maskc.load_artifact(tmp_path / "maskc-artifacts" / pretty[0]["artifact"]).options[
        "whitespace"] == "pretty:2"


def test_manifest_records_each_artifact_and_finds_it(tmp_path: Path, vocab: str) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "order.json").write_text(json.dumps(SCHEMA))
    doc = compile_json("schemas/order.json", "-t", vocab, "-o", "build", "--lenient")
    written = Path(doc["results"][0]["artifact"])
    doc2 = compile_json("schemas/order.json", "-t", vocab, "-o", "build")  # other options: a second entry
    art = maskc.load_artifact(written)
    entries = read_manifest(tmp_path / "build")
    assert len(entries) == 2
    entry = next(e for e in entries if e["options"]["lenient"])
    assert entry["compile_ms"] > 0 and len(entry["source_key"]) == 64
    assert entry == {
        "source": "../schemas/order.json", "stem": "order", "kind": "json_schema", "artifact": written.name,
        "tokenizer_name": art.metadata["tokenizer_name"], "tokenizer_sha256": art.tokenizer_sha256,
        "vocab_size": art.vocab_size, "eos_token_ids": list(art.eos_token_ids), "options": art.options,
        "grammar_sha256": art.metadata["grammar_sha256"], "content_key": art.content_key,
        "format_version": art.metadata["format_version"], "not_enforced": [],
        "bytes": written.stat().st_size, "sha256": hashlib.sha256(written.read_bytes()).hexdigest(),
        "states": art.num_states, "distinct_masks": art.num_masks, "compile_ms": entry["compile_ms"],
        "source_key": entry["source_key"],
    }
    found = find_artifact(tmp_path / "build", source="../schemas/order.json", tokenizer_sha256=art.tokenizer_sha256,
                          options=art.options)
    assert found.resolve() == written.resolve()
    with pytest.raises(maskc.ArtifactError, match="2 artifacts"):
        find_artifact(tmp_path / "build", stem="order", tokenizer_sha256=art.tokenizer_sha256)
    # a recompile with the same options replaces its own entry
    compile_json("schemas/order.json", "-t", vocab, "-o", "build")
    assert len(read_manifest(tmp_path / "build")) == 2
    assert Path(doc2["results"][0]["artifact"]).is_file()


def test_a_corrupt_manifest_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "manifest.json").write_text("{not json")
    update_manifest(tmp_path / "out", [{"source": "x", "tokenizer_sha256": "t", "options": {}, "artifact": "x.s"}])
    assert [e["source"] for e in read_manifest(tmp_path / "out")] == ["x"]
    (tmp_path / "out" / "manifest.json").write_text("[]")
    with pytest.raises(maskc.ArtifactCorrupt):
        read_manifest(tmp_path / "out")


def test_inputs_with_one_stem_stay_apart(tmp_path: Path, vocab: str) -> None:
    for folder, schema in (("a", SCHEMA), ("b", {"type": "boolean"})):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "x.json").write_text(json.dumps(schema))
    doc = compile_json("a/x.json", "b/x.json", "-t", vocab)
    artifacts = [Path(r["artifact"]) for r in doc["results"]]
    assert len(set(artifacts)) == 2 and all(p.is_file() for p in artifacts)
    sources = {maskc.load_artifact(p).metadata["grammar_source"] for p in artifacts}
    assert sources == {'{"type":"boolean"}', json.dumps(SCHEMA, separators=(",", ":"))}
    assert sorted(e["source"] for e in read_manifest(tmp_path / "maskc-artifacts")) == ["../a/x.json", "../b/x.json"]

    human = invoke("compile", "a/x.json", "b/x.json", "-t", vocab)
    assert human.exit_code == 0, human.output
    assert "a/x.json" in human.stdout and "b/x.json" in human.stdout


def test_artifacts_line_only_when_something_was_written(tmp_path: Path, vocab: str) -> None:
    (tmp_path / "bad.json").write_text(json.dumps({"type": "array", "items": {"type": "string"}, "uniqueItems": True}))
    (tmp_path / "good.json").write_text(json.dumps({"type": "boolean"}))
    failed = invoke("compile", "bad.json", "-t", vocab)
    assert failed.exit_code == 1
    assert "artifacts in" not in failed.output
    assert not (tmp_path / "maskc-artifacts" / "manifest.json").exists()
    mixed = invoke("compile", "bad.json", "good.json", "-t", vocab)
    assert mixed.exit_code == 1
    assert "artifacts in maskc-artifacts/" in mixed.stdout
