"""Artifact format: round trip, determinism, refusal of foreign, damaged or newer files; cache."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import maskc
from maskc.artifacts.cache import ArtifactCache
from maskc.compiler.vocab import Vocabulary

SCHEMA = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 8}, "b": {"type": "integer", "minimum": 0}}, "required": ["a"]}


def test_round_trip_same_masks(tmp_path: Path, toy_vocab: Vocabulary) -> None:
    art = maskc.compile_json_schema(SCHEMA, toy_vocab)
    path = art.save(tmp_path / "a.safetensors")
    back = maskc.load_artifact(path, tokenizer=toy_vocab)
    assert back.metadata == art.metadata
    for s in range(art.num_states):
        assert np.array_equal(back.mask_row(s), art.mask_row(s))
    meta = back.metadata
    assert meta["format"] == "maskc-artifact" and meta["grammar_kind"] == "json_schema"
    assert meta["tokenizer_sha256"] == toy_vocab.fingerprint
    assert meta["not_enforced"] == "[]"


def test_bytes_identical_across_processes(tmp_path: Path) -> None:
    code = (
        "import maskc, sys, json\n"
        "from maskc.compiler.vocab import byte_tokenizer\n"
        f"art = maskc.compile_json_schema({SCHEMA!r}, byte_tokenizer())\n"
        "sys.stdout.buffer.write(art.to_bytes())\n"
    )
    outs = [subprocess.run([sys.executable, "-c", code], capture_output=True, check=True).stdout for _ in range(2)]
    assert outs[0] == outs[1] and len(outs[0]) > 1000


def test_refuses_other_tokenizer(tmp_path: Path, toy_vocab: Vocabulary, byte_vocab: Vocabulary) -> None:
    path = maskc.compile_json_schema(SCHEMA, toy_vocab).save(tmp_path / "a.safetensors")
    with pytest.raises(maskc.TokenizerMismatch) as e:
        maskc.load_artifact(path, tokenizer=byte_vocab)
    assert "toy" in str(e.value) and "recompile" in str(e.value)


def test_refuses_truncated_and_tampered(tmp_path: Path, toy_vocab: Vocabulary) -> None:
    raw = maskc.compile_json_schema(SCHEMA, toy_vocab).to_bytes()
    for i, damaged in enumerate([raw[: len(raw) // 2], raw[:5], b"", raw + b"x"]):
        p = tmp_path / f"t{i}.safetensors"
        p.write_bytes(damaged)
        with pytest.raises(maskc.ArtifactCorrupt):
            maskc.load_artifact(p)
    flipped = bytearray(raw)
    flipped[-3] ^= 0x01
    p = tmp_path / "flip.safetensors"
    p.write_bytes(bytes(flipped))
    with pytest.raises(maskc.ArtifactCorrupt, match="content check"):
        maskc.load_artifact(p)


def test_refuses_other_format_version(tmp_path: Path, toy_vocab: Vocabulary) -> None:
    from maskc.artifacts.io import save_bytes

    art = maskc.compile_json_schema(SCHEMA, toy_vocab)
    meta = dict(art.metadata, format_version="999")
    p = tmp_path / "v.safetensors"
    p.write_bytes(save_bytes(art.tensors, meta))
    with pytest.raises(maskc.ArtifactVersionMismatch):
        maskc.load_artifact(p)


def test_missing_file_is_an_artifact_error(tmp_path: Path) -> None:
    with pytest.raises(maskc.ArtifactError, match="not found"):
        maskc.load_artifact(tmp_path / "nope.safetensors")


def test_cache_second_compile_is_a_load(tmp_path: Path, toy_vocab: Vocabulary) -> None:
    a = maskc.compile_json_schema(SCHEMA, toy_vocab, cache=tmp_path)
    b = maskc.compile_json_schema(SCHEMA, toy_vocab, cache=tmp_path)
    assert not a.cache_hit and b.cache_hit
    assert a.to_bytes() == b.to_bytes()
    c = maskc.compile_json_schema(SCHEMA, toy_vocab, cache=tmp_path, whitespace="pretty")
    assert not c.cache_hit  # options are part of the key
    assert len(ArtifactCache(tmp_path).entries()) == 2


def test_corrupt_cache_entry_is_rebuilt(tmp_path: Path, toy_vocab: Vocabulary) -> None:
    a = maskc.compile_json_schema(SCHEMA, toy_vocab, cache=tmp_path)
    assert a.cache_path is not None
    a.cache_path.write_bytes(b"garbage")
    b = maskc.compile_json_schema(SCHEMA, toy_vocab, cache=tmp_path)
    assert not b.cache_hit and b.to_bytes() == a.to_bytes()
    assert maskc.compile_json_schema(SCHEMA, toy_vocab, cache=tmp_path).cache_hit


def test_atomic_write_leaves_nothing_on_failure(tmp_path: Path, toy_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    art = maskc.compile_json_schema(SCHEMA, toy_vocab)

    def full_disk(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(maskc.ArtifactError) as e:
        art.save(tmp_path / "out.safetensors")
    assert "disk" in str(e.value)
    assert list(tmp_path.iterdir()) == []


def test_lenient_artifact_records_not_enforced(toy_vocab: Vocabulary) -> None:
    schema = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    art = maskc.compile_json_schema(schema, toy_vocab, lenient=True)
    assert [(n["keyword"], n["pointer"]) for n in art.not_enforced] == [("uniqueItems", "/uniqueItems")]
    assert "not regular" in art.not_enforced[0]["detail"]
    with pytest.raises(maskc.UnsupportedKeyword):
        maskc.compile_json_schema(schema, toy_vocab)


def test_summary_counts_every_mask_kind(deepseek: Vocabulary) -> None:
    art = maskc.compile_json_schema({"type": "string", "maxLength": 40}, deepseek)
    kinds = art.summary()["masks_by_kind"]
    assert sum(kinds.values()) == art.num_masks
    assert kinds["delta"] > 0  # neighbouring counted positions differ in a few tokens
