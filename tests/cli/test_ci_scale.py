"""``maskc compile`` at CI scale: every input for every ``--tokenizer``, ``--shard K/N``,
artifacts the output folder already holds reused without a compile, tokenizer tables cached
by fingerprint (and rebuilt when corrupt), and what ``manifest.json`` records.

Two small token-list tokenizers stand in for real ones: masks are exact and compiles fast.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import string
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

import maskc
from maskc.artifacts.cache import ArtifactCache, TokenizerTables
from maskc.artifacts.manifest import read_manifest
from maskc.cli import app, batch
from maskc.compiler import pipeline
from maskc.compiler.frontends import registry

PRINTABLE = [c for c in string.printable if c not in "\x0b\x0c"]
SCHEMAS: dict[str, Any] = {
    "order.json": {"type": "object", "properties": {"id": {"type": "integer"}, "paid": {"type": "boolean"}},
                   "required": ["id"]},
    "flag.json": {"enum": [True, False, None]},
    "label.json": {"type": "string", "maxLength": 5},
}


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASKC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("MASKC_DEBUG", raising=False)
    monkeypatch.chdir(tmp_path)


def token_list(path: Path, tokens: list[str]) -> str:
    path.write_text(json.dumps({"tokens": tokens, "eos": "<eos>"}))
    return str(path)


@pytest.fixture
def tok_a(tmp_path: Path) -> str:
    return token_list(tmp_path / "chars.json", [*PRINTABLE, "<eos>"])


@pytest.fixture
def tok_b(tmp_path: Path) -> str:
    return token_list(tmp_path / "words.json", [*PRINTABLE, "true", "false", "null", '{"', '":', "<eos>"])


@pytest.fixture
def schemas(tmp_path: Path) -> Path:
    folder = tmp_path / "schemas"
    folder.mkdir()
    for name, schema in SCHEMAS.items():
        (folder / name).write_text(json.dumps(schema))
    return folder


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def compile_json(*args: str | Path, code: int = 0) -> dict[str, Any]:
    result = invoke("compile", *args, "--json")
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def pairs(doc: dict[str, Any]) -> list[tuple[str, str]]:
    return [(Path(r["path"]).name, r["tokenizer_sha256"]) for r in doc["results"]]


def fingerprint(spec: str) -> str:
    fp: str = maskc.load_tokenizer(spec).fingerprint
    return fp


# -- every input × every tokenizer ------------------------------------------------------------


def test_every_input_is_compiled_for_every_tokenizer(schemas: Path, tok_a: str, tok_b: str,
                                                     tmp_path: Path) -> None:
    doc = compile_json(schemas, "-t", tok_a, "-t", tok_b, "-o", "out")
    fa, fb = fingerprint(tok_a), fingerprint(tok_b)
    assert fa != fb
    names = sorted(SCHEMAS)
    assert pairs(doc) == [(n, fa) for n in names] + [(n, fb) for n in names]
    assert doc["tokenizer"] is None
    assert [t["sha256"] for t in doc["tokenizers"]] == [fa, fb]
    assert [t["name"] for t in doc["tokenizers"]] == ["chars.json", "words.json"]
    assert doc["summary"] == {"compiled": 6, "failed": 0} and doc["shard"] is None
    for r in doc["results"]:
        art = maskc.load_artifact(r["artifact"])
        assert art.tokenizer_sha256 == r["tokenizer_sha256"]
    # the words tokenizer spells `true` in one token, the chars one cannot
    flag = {r["tokenizer_sha256"]: r["artifact"] for r in doc["results"] if r["path"].endswith("flag.json")}
    words = maskc.load_tokenizer(tok_b)
    m = maskc.load_artifact(flag[fb], tokenizer=words).matcher()
    assert m.accept_token(words.token_id("true") or -1) and m.can_terminate()
    assert maskc.load_tokenizer(tok_a).token_id("true") is None
    entries = read_manifest(tmp_path / "out")
    assert sorted((Path(e["source"]).name, e["tokenizer_sha256"]) for e in entries) == sorted(pairs(doc))


def test_one_tokenizer_keeps_its_document_shape(schemas: Path, tok_a: str) -> None:
    doc = compile_json(schemas / "flag.json", "-t", tok_a)
    assert doc["tokenizer"]["sha256"] == fingerprint(tok_a)
    assert doc["tokenizers"] == [doc["tokenizer"]]
    assert doc["summary"] == {"compiled": 1, "failed": 0}


def test_human_output_has_a_table_per_tokenizer(schemas: Path, tok_a: str, tok_b: str) -> None:
    result = invoke("compile", schemas / "flag.json", schemas / "label.json", "-t", tok_a, "-t", tok_b)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.index("chars.json") < out.index("words.json")
    first, second = out.split("words.json", 1)
    for part in (first, second):
        assert "flag.json" in part and "label.json" in part
        assert "2 compiled, 0 failed" in part


def test_the_same_tokenizer_twice_compiles_once(schemas: Path, tok_a: str, tmp_path: Path) -> None:
    copy = token_list(tmp_path / "copy.json", [*PRINTABLE, "<eos>"])
    result = invoke("compile", schemas / "flag.json", "-t", tok_a, "-t", copy, "--json")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["results"]) == 1
    assert "same tokenizer as" in result.stderr


# -- shards -----------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7])
def test_shards_cover_every_job_once(schemas: Path, tok_a: str, tok_b: str, count: int) -> None:
    everything = set(pairs(compile_json(schemas, "-t", tok_a, "-t", tok_b, "-o", "all")))
    assert len(everything) == 6
    seen: list[tuple[str, str]] = []
    for k in range(1, count + 1):
        doc = compile_json(schemas, "-t", tok_a, "-t", tok_b, "-o", f"shard{k}", "--shard", f"{k}/{count}")
        assert doc["shard"] == {"index": k, "count": count}
        # the arguments' order does not move a job to another shard
        swapped = compile_json(schemas, "-t", tok_b, "-t", tok_a, "-o", f"swapped{k}", "--shard", f"{k}/{count}")
        assert sorted(pairs(swapped)) == sorted(pairs(doc))
        seen += pairs(doc)
    assert len(seen) == len(set(seen))
    assert set(seen) == everything


def test_shard_deals_the_sorted_inputs_round_robin_with_all_their_tokenizers() -> None:
    jobs = [batch.Job(f"{name}.json", name, "json_schema", {}) for name in "dcab"]
    settings = [batch.Settings(t, None, None, "compact", False, None, "out") for t in ("y", "x")]
    work = [(j, s) for s in settings for j in jobs]
    got = {k: [(j.label[0], s.tokenizer) for j, s in batch.shard(work, k, 3)] for k in (1, 2, 3)}
    # inputs sorted: a b c d -> shard 1 takes ranks 0 and 3, each with both tokenizers (the
    # compiles of one input share their automaton); kept in the list's order
    assert sorted(got[1]) == [("a", "x"), ("a", "y"), ("d", "x"), ("d", "y")]
    assert sorted(got[2]) == [("b", "x"), ("b", "y")]
    assert sorted(got[3]) == [("c", "x"), ("c", "y")]
    assert [w for w in work if (w[0].label[0], w[1].tokenizer) in got[1]] == batch.shard(work, 1, 3)
    with pytest.raises(ValueError, match="1..3"):
        batch.shard(work, 4, 3)


@pytest.mark.parametrize("spec", ["0/3", "4/3", "x", "3", "1/0", "-1/2", "1/2/3", "a/b", "1/", "/2", "٣/4"])
def test_a_bad_shard_is_a_usage_error(schemas: Path, tok_a: str, spec: str) -> None:
    result = invoke("compile", schemas, "-t", tok_a, "--shard", spec)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "K/N" in result.output
    assert not Path("maskc-artifacts").exists()


# -- reuse of what the output folder holds ----------------------------------------------------


def _forbid_compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Count every front-end call; fail any compile."""
    calls: list[str] = []
    fe = registry.FRONTENDS["json_schema"]

    def counted_grammar(source: Any, options: Any) -> Any:
        calls.append("to_grammar")
        return fe.to_grammar(source, options)

    def counted_canonical(source: Any) -> str:
        calls.append("canonical")
        text: str = fe.canonical(source)
        return text

    def no_compile(*args: object, **kwargs: object) -> None:
        raise AssertionError("compiled")

    monkeypatch.setitem(registry.FRONTENDS, "json_schema",
                        dataclasses.replace(fe, to_grammar=counted_grammar, canonical=counted_canonical))
    monkeypatch.setattr(pipeline, "compile_source", no_compile)
    return calls


def test_a_second_run_reuses_the_output_folder_without_the_front_end(
        schemas: Path, tok_a: str, tok_b: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = compile_json(schemas, "-t", tok_a, "-t", tok_b, "-o", "out", "--no-cache")
    assert all(r["cached"] is False and r["cache_hit"] is False for r in first["results"])
    manifest = read_manifest(tmp_path / "out")

    calls = _forbid_compiles(monkeypatch)
    again = compile_json(schemas, "-t", tok_a, "-t", tok_b, "-o", "out", "--no-cache")
    assert calls == []
    assert all(r["ok"] and r["cached"] is True and r["cache_hit"] is True for r in again["results"])
    for key in ("path", "artifact", "states", "distinct_masks", "bytes", "not_enforced", "tokenizer_sha256"):
        assert [r[key] for r in again["results"]] == [r[key] for r in first["results"]]
    assert read_manifest(tmp_path / "out") == manifest  # the original compile times are kept

    human = invoke("compile", schemas, "-t", tok_a, "-o", "out", "--no-cache")
    assert human.exit_code == 0, human.output
    assert human.stdout.count("cached") == len(SCHEMAS)
    assert calls == []


def test_what_changed_is_compiled_again(schemas: Path, tok_a: str, tmp_path: Path) -> None:
    first = {Path(r["path"]).name: r for r in compile_json(schemas, "-t", tok_a, "-o", "out", "--no-cache")["results"]}
    (schemas / "label.json").write_text(json.dumps({"type": "string", "maxLength": 4}))
    tampered = Path(first["flag.json"]["artifact"])
    raw = bytearray(tampered.read_bytes())
    raw[-1] ^= 0x01
    tampered.write_bytes(bytes(raw))
    doc = compile_json(schemas, "-t", tok_a, "-o", "out", "--no-cache")
    cached = {Path(r["path"]).name: r["cached"] for r in doc["results"]}
    assert cached == {"order.json": True, "label.json": False, "flag.json": False}
    maskc.load_artifact(tampered)  # rewritten whole
    assert hashlib.sha256(tampered.read_bytes()).hexdigest() == next(
        e["sha256"] for e in read_manifest(tmp_path / "out") if e["source"].endswith("flag.json"))
    # other options are another artifact
    pretty = compile_json(schemas, "-t", tok_a, "-o", "out", "--no-cache", "-w", "pretty")
    assert not any(r["cached"] for r in pretty["results"])


def test_the_artifact_cache_serves_a_new_folder_without_the_front_end(
        schemas: Path, tok_a: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compile_json(schemas, "-t", tok_a, "-o", "one")
    calls = _forbid_compiles(monkeypatch)
    doc = compile_json(schemas, "-t", tok_a, "-o", "two")
    assert "to_grammar" not in calls
    assert all(r["cached"] is True for r in doc["results"])
    entries = read_manifest(tmp_path / "two")
    assert [e["compile_ms"] for e in entries] == [0, 0, 0]  # no compile ran for this folder
    for e in entries:
        path = tmp_path / "two" / e["artifact"]
        assert e["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


# -- manifest ---------------------------------------------------------------------------------


def test_manifest_entries_record_how_to_trust_and_reuse_the_file(schemas: Path, tok_a: str, tmp_path: Path) -> None:
    doc = compile_json(schemas, "-t", tok_a, "-o", "out", "--lenient")
    entries = {Path(e["source"]).name: e for e in read_manifest(tmp_path / "out")}
    assert sorted(entries) == sorted(SCHEMAS)
    for r in doc["results"]:
        e = entries[Path(r["path"]).name]
        path = Path(r["artifact"])
        art = maskc.load_artifact(path)
        assert e["artifact"] == path.name and e["source"] == f"../schemas/{Path(r['path']).name}"
        assert e["bytes"] == path.stat().st_size == r["bytes"]
        assert e["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert e["states"] == art.num_states == r["states"]
        assert e["distinct_masks"] == art.num_masks
        assert e["compile_ms"] > 0 and e["compile_ms"] == r["compile_ms"]
        assert e["tokenizer_sha256"] == art.tokenizer_sha256 and e["not_enforced"] == art.not_enforced
        assert e["content_key"] == art.content_key and e["grammar_sha256"] == art.metadata["grammar_sha256"]
        assert len(e["source_key"]) == 64 and e["source_key"] != e["content_key"]
    assert len({e["source_key"] for e in entries.values()}) == len(SCHEMAS)


def test_source_key_covers_source_kind_tokenizer_and_options() -> None:
    job = batch.Job("a.json", "a", "json_schema", {"type": "string"})
    s = batch.Settings("t", None, None, "compact", False, None, "out")
    opts = batch.job_options(job, s)
    key = batch.source_key(job, opts, "0" * 64)
    assert key == batch.source_key(dataclasses.replace(job, label="b.json"), opts, "0" * 64)
    assert key != batch.source_key(dataclasses.replace(job, source={"type": "integer"}), opts, "0" * 64)
    assert key != batch.source_key(dataclasses.replace(job, kind="choice"), opts, "0" * 64)
    assert key != batch.source_key(job, opts, "1" * 64)
    assert key != batch.source_key(job, batch.job_options(job, dataclasses.replace(s, whitespace="pretty")), "0" * 64)
    assert key != batch.source_key(job, batch.job_options(job, dataclasses.replace(s, max_depth=8)), "0" * 64)


# -- tokenizer tables -------------------------------------------------------------------------


def test_tokenizer_tables_round_trip_and_refuse_what_does_not_hash(tmp_path: Path, tok_b: str) -> None:
    vocab = maskc.load_tokenizer(tok_b, eos=["<eos>"], vocab_size=128)
    tables = TokenizerTables(tmp_path / "c")
    path = tables.save(vocab)
    assert path == tmp_path / "c" / "tokenizers" / f"{vocab.fingerprint}.safetensors"
    got = tables.load(vocab.fingerprint)
    assert got is not None
    assert (got.token_bytes, got.special_ids, got.eos_ids, got.vocab_size, got.name, got.fingerprint) == (
        vocab.token_bytes, vocab.special_ids, vocab.eos_ids, vocab.vocab_size, vocab.name, vocab.fingerprint)

    good = path.read_bytes()
    other = maskc.load_tokenizer(str(tmp_path / "words.json"), vocab_size=200)
    for bad in (good[:-3], good[:100], b"", good.replace(b"false", b"falsy"),
                Path(tables.save(other) or "").read_bytes()):  # another tokenizer's, renamed over it
        path.write_bytes(bad)
        assert tables.load(vocab.fingerprint) is None
        assert not path.exists()  # deleted, so the next save rebuilds it
    assert tables.save(vocab) == path and tables.load(vocab.fingerprint) is not None
    with pytest.raises(ValueError, match="64 lowercase hex"):
        tables.path("../x")


def _count_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tokenizer specs parsed from their files from now on (batch.load_vocabulary calls)."""
    parsed: list[str] = []
    real = batch.load_vocabulary

    def counted(st: batch.Settings) -> maskc.Vocabulary:
        parsed.append(st.tokenizer)
        return real(st)

    monkeypatch.setattr(batch, "load_vocabulary", counted)
    return parsed


def test_a_worker_builds_its_vocabulary_from_the_tables_once(tmp_path: Path, tok_b: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    vocab = maskc.load_tokenizer(tok_b)
    s = batch.Settings(tok_b, None, None, "compact", False, str(tmp_path / "c"), "out",
                       tokenizer_sha256=vocab.fingerprint)
    TokenizerTables(s.cache).save(vocab)
    parsed = _count_parses(monkeypatch)
    monkeypatch.setattr(batch, "_vocabs", {})
    got = batch.vocabulary(s)
    assert got is batch.vocabulary(s) and parsed == []  # once per process, without a parse
    assert got.fingerprint == vocab.fingerprint
    assert got.encode("true") == vocab.encode("true") and parsed == [tok_b]  # the encoder parses on demand

    # a corrupt table file is not trusted: the tokenizer is parsed, and the file dropped
    path = TokenizerTables(s.cache).path(vocab.fingerprint)
    path.write_bytes(path.read_bytes().replace(b"null", b"nul!"))
    monkeypatch.setattr(batch, "_vocabs", {})
    parsed.clear()
    again = batch.vocabulary(s)
    assert parsed == [tok_b] and again.fingerprint == vocab.fingerprint and not path.exists()


def test_a_tokenizer_file_is_parsed_once_then_read_from_its_tables(tmp_path: Path, tok_b: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # the tables filed for the file as it is (path, time, size) stand in for a parse in the
    # next process; a changed file, other overrides or a broken entry are parsed again
    base = batch.Settings(tok_b, None, None, "compact", False, str(tmp_path / "c"), "out")
    parsed = _count_parses(monkeypatch)
    first = batch.cached_vocabulary(base)
    assert parsed == [tok_b]
    again = batch.cached_vocabulary(base)
    assert parsed == [tok_b] and again is not first  # read from the tables, not parsed
    assert (again.token_bytes, again.special_ids, again.eos_ids, again.vocab_size, again.name) == (
        first.token_bytes, first.special_ids, first.eos_ids, first.vocab_size, first.name)
    assert again.encode("true") == first.encode("true") and parsed == [tok_b, tok_b]  # the encoder on demand
    parsed.clear()

    wider = dataclasses.replace(base, vocab_size=160)
    assert batch.cached_vocabulary(wider).vocab_size == 160 and parsed == [tok_b]  # other overrides: parsed
    parsed.clear()
    Path(tok_b).write_text(Path(tok_b).read_text().replace('"null", ', ""))  # the file changes
    maskc.compiler.tokenizer._cached.cache_clear()
    changed = batch.cached_vocabulary(base)
    assert parsed == [tok_b] and b"null" not in changed.token_bytes
    parsed.clear()
    tables = TokenizerTables(base.cache)
    for entry in (tables.root / "sources").iterdir():
        entry.write_text("not a fingerprint")
    assert batch.cached_vocabulary(base).token_bytes == changed.token_bytes and parsed == [tok_b]
    parsed.clear()
    assert tables.sources() and tables.entries()
    ArtifactCache(base.cache).clear()  # the cache clears what names the tables too
    assert not tables.sources() and not tables.entries()
    assert batch.cached_vocabulary(dataclasses.replace(base, cache=None)).token_bytes == changed.token_bytes
    assert parsed == [tok_b]  # no cache: parsed


def test_jobs_share_cached_tables_and_rebuild_a_corrupt_one(schemas: Path, tok_a: str, tok_b: str,
                                                           tmp_path: Path) -> None:
    tables = TokenizerTables(tmp_path / "cache")
    fa, fb = fingerprint(tok_a), fingerprint(tok_b)
    tables.root.mkdir(parents=True)
    tables.path(fa).write_bytes(b"not a table")
    doc = compile_json(schemas, "-t", tok_a, "-t", tok_b, "-j", "2", "-o", "out")
    assert pairs(doc) == [(n, fa) for n in sorted(SCHEMAS)] + [(n, fb) for n in sorted(SCHEMAS)]
    assert all(r["ok"] and r["cached"] is False for r in doc["results"])
    for fp in (fa, fb):
        got = tables.load(fp)
        assert got is not None and got.fingerprint == fp
    # tables are not artifacts: `cache ls` leaves them out, `cache clear` removes them too
    assert len(ArtifactCache(tmp_path / "cache").entries()) == 6
    assert ArtifactCache(tmp_path / "cache").clear() == 6
    assert tables.entries() == []


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_an_inputs_tokenizers_compiled_together_give_the_artifacts_of_separate_runs(
        tmp_path: Path, tok_a: str, tok_b: str, jobs: str) -> None:
    """One input's tokenizers share its grammar and pushdown automaton (``data: {}`` makes
    it recursive): the files are byte for byte those of one run per tokenizer (no counted
    repeat here: a counted loop is planned for the longest token of the run, which gives a
    tokenizer with shorter tokens more copies than its own run, and the same masks)."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "tree.json").write_text(json.dumps({"type": "object", "properties": {"name": {"type": "string"},
                                                                                   "data": {}}}))
    (folder / "order.json").write_text(json.dumps(SCHEMAS["order.json"]))

    def files(doc: dict[str, Any]) -> dict[tuple[str, str], bytes]:
        assert all(r["ok"] for r in doc["results"])
        return {(Path(r["path"]).name, r["tokenizer_sha256"]): Path(r["artifact"]).read_bytes() for r in doc["results"]}

    together = files(compile_json(folder, "-t", tok_a, "-t", tok_b, "-j", jobs, "--no-cache", "-o", "together"))
    alone = {**files(compile_json(folder, "-t", tok_a, "--no-cache", "-o", "a")),
             **files(compile_json(folder, "-t", tok_b, "--no-cache", "-o", "b"))}
    assert len(together) == 4 and together == alone


def test_every_result_reports_the_time_it_took_a_failed_one_too(tmp_path: Path, tok_a: str) -> None:
    folder = tmp_path / "some_fail"
    folder.mkdir()
    (folder / "good.json").write_text(json.dumps(SCHEMAS["order.json"]))
    (folder / "bad.json").write_text(json.dumps({"type": "string", "pattern": "(unclosed"}))
    doc = compile_json(folder, "-t", tok_a, "--no-cache", "-o", "out", code=1)
    by = {Path(r["path"]).name: r for r in doc["results"]}
    good, bad = by["good.json"], by["bad.json"]
    assert good["ok"] and good["elapsed_ms"] >= good["compile_ms"] > 0
    assert not bad["ok"] and bad["compile_ms"] is None and bad["elapsed_ms"] > 0
    again = compile_json(folder, "-t", tok_a, "--no-cache", "-o", "out", code=1)  # reused from the folder
    reused = {Path(r["path"]).name: r for r in again["results"]}["good.json"]
    assert reused["cached"] and reused["elapsed_ms"] == reused["compile_ms"] >= 0
