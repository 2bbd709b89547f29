"""A running batch records what it finished in the manifest as it goes: a batch killed or
interrupted midway keeps the record of its finished artifacts, and a manifest that cannot be
written midway does not stop the batch."""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import pytest

from maskc.artifacts.manifest import read_manifest
from maskc.cli import batch
from maskc.compiler.errors import ArtifactError


def setup(tmp_path: Path, n: int) -> tuple[list[batch.Work], list[Any], Path]:
    tokens = [c for c in string.printable if c not in "\x0b\x0c"] + ["<eos>"]
    spec = tmp_path / "vocab.json"
    spec.write_text(json.dumps({"tokens": tokens, "eos": "<eos>"}))
    src = tmp_path / "schemas"
    src.mkdir()
    for i in range(n):
        (src / f"s{i}.json").write_text(json.dumps({"type": "string", "maxLength": 3 + i}))
    out = tmp_path / "out"
    out.mkdir()
    base = batch.Settings(str(spec), None, None, "compact", False, None, str(out))
    tokenizers, _ = batch.load_tokenizers(base, [str(spec)])
    jobs, _ = batch.collect_jobs([str(src)], "json_schema")
    return [(job, s) for _, s in tokenizers for job in jobs], [v for v, _ in tokenizers], out


def recorded(out: Path) -> list[str]:
    try:
        return sorted(Path(e["source"]).name for e in read_manifest(out))
    except ArtifactError:
        return []


def test_each_finished_compile_is_recorded_while_the_batch_runs(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    work, vocabs, out = setup(tmp_path, 4)
    monkeypatch.setattr(batch, "MANIFEST_FLUSH_SECONDS", 0.0)
    seen: list[list[str]] = []
    results = batch.run_all(work, vocabs, 1, started=lambda job: None,
                            finished=lambda r: seen.append(recorded(out)))
    assert all(r["ok"] for r in results)
    names = [f"s{i}.json" for i in range(4)]
    assert seen == [sorted(names[: k + 1]) for k in range(4)]  # on the record before the next began
    assert recorded(out) == names
    assert all(batch.MANIFEST_ENTRY not in r for r in results)


def test_without_a_flush_due_the_record_is_written_once_at_the_end(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    work, vocabs, out = setup(tmp_path, 3)
    monkeypatch.setattr(batch, "MANIFEST_FLUSH_SECONDS", 3600.0)
    seen: list[list[str]] = []
    batch.run_all(work, vocabs, 1, started=lambda job: None, finished=lambda r: seen.append(recorded(out)))
    assert seen == [[], [], []]
    assert recorded(out) == ["s0.json", "s1.json", "s2.json"]


def test_a_manifest_that_cannot_be_written_midway_waits_for_the_next_flush(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work, vocabs, out = setup(tmp_path, 3)
    monkeypatch.setattr(batch, "MANIFEST_FLUSH_SECONDS", 0.0)
    real = batch.update_manifest
    calls: list[int] = []

    def flaky(folder: Any, entries: Any) -> Path:
        calls.append(len(list(entries)))
        if len(calls) == 1:
            raise ArtifactError("cannot update manifest.json: No space left on device")
        return real(folder, entries)

    monkeypatch.setattr(batch, "update_manifest", flaky)
    results = batch.run_all(work, vocabs, 1, started=lambda job: None, finished=lambda r: None)
    assert all(r["ok"] for r in results)
    assert calls[:2] == [1, 2]  # the first entry kept for the next flush
    assert recorded(out) == ["s0.json", "s1.json", "s2.json"]


def test_a_manifest_that_cannot_be_written_at_the_end_is_an_error(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    work, vocabs, out = setup(tmp_path, 2)

    def broken(folder: Any, entries: Any) -> Path:
        raise ArtifactError("cannot update manifest.json: No space left on device")

    monkeypatch.setattr(batch, "update_manifest", broken)
    with pytest.raises(ArtifactError, match="No space left"):
        batch.run_all(work, vocabs, 1, started=lambda job: None, finished=lambda r: None)


def test_an_interrupted_batch_records_what_it_finished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work, vocabs, out = setup(tmp_path, 4)
    monkeypatch.setattr(batch, "MANIFEST_FLUSH_SECONDS", 3600.0)
    finished: list[str] = []

    def interrupt_after_two(r: dict[str, Any]) -> None:
        finished.append(Path(r["path"]).name)
        if len(finished) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        batch.run_all(work, vocabs, 1, started=lambda job: None, finished=interrupt_after_two)
    assert recorded(out) == sorted(finished) == ["s0.json", "s1.json"]
