"""Artifact integrity: every metadata field is hashed and validated; the cache proves a hit;
files get the umask's mode; a killed writer's temporary is swept."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import maskc
from maskc.artifacts import artifact as artifact_module
from maskc.artifacts import format as fmt
from maskc.artifacts.artifact import Artifact
from maskc.artifacts.cache import ArtifactCache
from maskc.artifacts.io import save_bytes, sweep_stale_temporaries, write_atomic
from maskc.compiler.vocab import Vocabulary

SCHEMA = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 7}}, "required": ["a"]}
OTHER = {"type": "array", "items": {"type": "integer"}}
GBNF = 'root ::= "[" root "]" | "a"'

# A value for each field that is well-formed on its own: only the content hash can catch it.
EDITS = {
    "format_version": None,  # refused by the version check, tested apart
    "format": None,
    "compiler_version": "0.2.1",
    "grammar_kind": "regex",
    "grammar_sha256": "0" * 64,
    "grammar_source": '{"type":"string"}',
    "options": "lenient flipped",  # made from the artifact's own options
    "tokenizer_sha256": "f" * 64,
    "tokenizer_name": "another",
    "vocab_size": "65",
    "eos_token_ids": "[35]",
    "not_enforced": '[{"keyword":"multipleOf","pointer":"/multipleOf"}]',
    "num_states": "999",
    "num_masks": "999",
    "rule_names": '["root","x"]',
    "inline_depth": "7",
    "max_depth": "31",
}


@pytest.fixture(scope="module")
def arts(toy_vocab: Vocabulary) -> dict[str, Artifact]:
    return {"regular": maskc.compile_json_schema(SCHEMA, toy_vocab),
            "pushdown": maskc.compile_gbnf(GBNF, toy_vocab)}


def with_options(art: Artifact, **changes: object) -> str:
    """The artifact's options JSON with ``changes`` (``None`` drops a key)."""
    opts = {k: v for k, v in {**art.options, **changes}.items() if v is not None}
    return fmt.canonical_json(opts)


def rewritten(art: Artifact, tmp_path: Path, *, rehash: bool, **changes: str) -> Path:
    """The artifact re-written with ``changes`` into a valid safetensors header."""
    meta = {**art.metadata, **changes}
    if rehash:
        meta["content_sha256"] = fmt.content_hash(art.tensors, meta)
    path = tmp_path / f"edited-{len(list(tmp_path.iterdir()))}.safetensors"
    path.write_bytes(save_bytes(art.tensors, meta))
    return path


def test_every_metadata_field_is_hashed(arts: dict[str, Artifact], tmp_path: Path) -> None:
    assert set(arts["pushdown"].metadata) - {"content_sha256"} <= set(EDITS)
    for art in arts.values():
        for key in art.metadata:
            edit = EDITS.get(key)
            if edit is None or key == "content_sha256":
                continue
            if key == "options":
                edit = with_options(art, lenient=not art.options["lenient"])
            assert art.metadata[key] != edit, key
            with pytest.raises(maskc.ArtifactCorrupt, match="content check"):
                maskc.load_artifact(rewritten(art, tmp_path, rehash=False, **{key: edit}))


def test_a_flipped_bit_in_the_eos_ids_is_refused(arts: dict[str, Artifact], tmp_path: Path) -> None:
    raw = bytearray(arts["regular"].to_bytes())
    at = raw.index(b'"eos_token_ids":"[') + len(b'"eos_token_ids":"[')
    raw[at] ^= 0x01  # "[36]" -> "[26]"... a digit stays a digit
    assert chr(raw[at]).isdigit()
    p = tmp_path / "flip.safetensors"
    p.write_bytes(bytes(raw))
    with pytest.raises(maskc.ArtifactCorrupt, match="content check"):
        maskc.load_artifact(p)


@pytest.mark.parametrize(("key", "value"), [
    ("eos_token_ids", "[999999]"), ("eos_token_ids", "[-1]"), ("eos_token_ids", "{}"),
    ("eos_token_ids", "[true]"), ("eos_token_ids", "[3.0]"), ("eos_token_ids", "[36,36]"),
    ("eos_token_ids", "[64]"), ("eos_token_ids", "not json"),
    ("vocab_size", "0"), ("vocab_size", "-64"), ("vocab_size", "64.0"), ("vocab_size", "99999999999"),
    ("vocab_size", "٦٤"), ("vocab_size", "32"),
    ("options", "{}"), ("options", "[]"), ("options", {"lenient": 1}), ("options", {"max_depth": 0}),
    ("options", {"max_depth": 32.0}), ("options", {"whitespace": "loose"}), ("options", {"extra": 1}),
    ("options", {"lenient": None}),
    ("not_enforced", "{}"), ("not_enforced", '[{"keyword":1,"pointer":""}]'), ("not_enforced", '["x"]'),
    ("grammar_sha256", "0" * 64), ("grammar_sha256", "xyz"), ("tokenizer_sha256", "ABC"),
    ("grammar_kind", ""), ("grammar_kind", "regex"), ("compiler_version", ""), ("compiler_version", "v2"),
    ("num_states", "999"), ("num_masks", "-1"), ("unknown_key", "1"),
])
def test_out_of_range_values_are_refused_even_when_rehashed(arts: dict[str, Artifact], tmp_path: Path,
                                                            key: str, value: str | dict[str, object]) -> None:
    art = arts["regular"]
    text = with_options(art, **value) if isinstance(value, dict) else value
    with pytest.raises(maskc.ArtifactCorrupt) as e:
        maskc.load_artifact(rewritten(art, tmp_path, rehash=True, **{key: text}))
    assert "content check" not in str(e.value)


def test_bad_recorded_limits_are_refused(arts: dict[str, Artifact], tmp_path: Path) -> None:
    art = arts["regular"]
    if "limits" not in art.options:
        pytest.skip("this build records no limits in the options")
    limits = dict(art.options["limits"])
    for name, bad in (("max_states", 0), ("max_states", "many"), ("max_seconds", -1.0)):
        text = with_options(art, limits={**limits, name: bad})
        with pytest.raises(maskc.ArtifactCorrupt, match="options"):
            maskc.load_artifact(rewritten(art, tmp_path, rehash=True, options=text))


@pytest.mark.parametrize(("key", "value"), [
    ("rule_names", "[]"), ("rule_names", '["root","x","y"]'), ("inline_depth", "-1"),
    ("max_depth", "31"), ("max_depth", "0"),
])
def test_bad_pushdown_metadata_is_refused(arts: dict[str, Artifact], tmp_path: Path, key: str, value: str) -> None:
    with pytest.raises(maskc.ArtifactCorrupt):
        maskc.load_artifact(rewritten(arts["pushdown"], tmp_path, rehash=True, **{key: value}))


def test_a_rehashed_valid_edit_loads(arts: dict[str, Artifact], tmp_path: Path) -> None:
    """The checks above refuse the bad values, not any rewrite."""
    path = rewritten(arts["regular"], tmp_path, rehash=True, tokenizer_name="renamed")
    assert maskc.load_artifact(path).metadata["tokenizer_name"] == "renamed"


TWO_RULES = 'root ::= "(" inner ")" | "a"\ninner ::= root | root "," inner'

# (tensor, index, value) -> the value there breaks a table's range or order; n states, m
# masks, r rules, c classes. The grammar above: calls [inner, root], rule starts [0, 4].
TABLE_EDITS = {
    "byte class past the classes": ("dfa.byte_class", 0, lambda n, m, r, c: c),
    "state's mask past the masks": ("mask.state", 0, lambda n, m, r, c: m),
    "state's mask negative": ("mask.state", 1, lambda n, m, r, c: -1),
    "unknown mask kind": ("mask.kind", 0, lambda n, m, r, c: 4),
    "mask offsets decrease": ("mask.offsets", 2, lambda n, m, r, c: 0),
    "call to an unknown rule": ("pda.call_rule", 0, lambda n, m, r, c: r),
    "call to a negative rule": ("pda.call_rule", 1, lambda n, m, r, c: -1),
    "return past the states": ("pda.call_return", 0, lambda n, m, r, c: n),
    "negative return": ("pda.call_return", 1, lambda n, m, r, c: -1),
    "rule start past the states": ("pda.rule_start", 1, lambda n, m, r, c: n),
    "rule start below -1": ("pda.rule_start", 1, lambda n, m, r, c: -2),
    "a called rule without a start": ("pda.rule_start", 1, lambda n, m, r, c: -1),
    "negative need": ("pda.need", 0, lambda n, m, r, c: -1),
    "uncertain mask past the masks": ("mask.uncertain", 0, lambda n, m, r, c: m),
    "flat mask negative": ("mask.flat", 0, lambda n, m, r, c: -1),
    "call offsets decrease": ("pda.call_offsets", 1, lambda n, m, r, c: 2),
}


@pytest.fixture(scope="module")
def two_rules(toy_vocab: Vocabulary) -> Artifact:
    art = maskc.compile_gbnf(TWO_RULES, toy_vocab)
    assert art.tensors["pda.call_rule"].tolist() == [1, 0] and art.tensors["pda.rule_start"].tolist() == [0, 4]
    return art


def _with_table(art: Artifact, name: str, at: int, value: int) -> bytes:
    tensors = {k: np.array(v) for k, v in art.tensors.items()}
    tensors[name][at] = value
    meta = dict(art.metadata)
    meta["content_sha256"] = fmt.content_hash(tensors, meta)
    return save_bytes(tensors, meta)


@pytest.mark.parametrize("edit", sorted(TABLE_EDITS))
def test_a_table_value_out_of_its_range_is_refused_even_when_rehashed(two_rules: Artifact, edit: str) -> None:
    name, at, bad = TABLE_EDITS[edit]
    art = two_rules
    n, m, r = art.num_states, art.num_masks, art.tensors["pda.rule_start"].shape[0]
    value = bad(n, m, r, int(art.tensors["dfa.shape"][1]))
    assert art.tensors[name][at] != value
    with pytest.raises(maskc.ArtifactCorrupt, match="inconsistent tables"):
        Artifact.from_bytes(_with_table(art, name, at, value))


EDGE_VALUES = {  # the last value in range: loads
    "state's last mask": ("mask.state", 0, lambda n, m, r, c: m - 1),
    "return to the last state": ("pda.call_return", 0, lambda n, m, r, c: n - 1),
    "a need as deep as the states": ("pda.need", 0, lambda n, m, r, c: n),
    "flat mask the last": ("mask.flat", 1, lambda n, m, r, c: m - 1),
    "rule start the last state": ("pda.rule_start", 1, lambda n, m, r, c: n - 1),
    "byte class the last": ("dfa.byte_class", 0, lambda n, m, r, c: c - 1),
}


@pytest.mark.parametrize("edit", sorted(EDGE_VALUES))
def test_a_table_value_at_the_edge_of_its_range_loads(two_rules: Artifact, edit: str) -> None:
    name, at, edge = EDGE_VALUES[edit]
    art = two_rules
    value = edge(art.num_states, art.num_masks, art.tensors["pda.rule_start"].shape[0], int(art.tensors["dfa.shape"][1]))
    loaded = Artifact.from_bytes(_with_table(art, name, at, value))
    assert int(loaded.tensors[name][at]) == value


@pytest.fixture(params=["inline", "threaded", "whole-stream"])
def hash_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every way the content hash runs: at once (a small artifact), in pieces on helper
    threads beside the table checks (from ``_PARALLEL_HASH_BYTES`` on, pieces of ``PIECE``
    bytes: both lowered here so the toys take that path, 2 helpers per load), and, for a
    version-3 or -4 file, as one stream on one helper."""
    if request.param != "inline":
        monkeypatch.setattr(artifact_module, "_PARALLEL_HASH_BYTES", 0)
        monkeypatch.setattr(artifact_module, "_HASH_THREADS", 3)
        monkeypatch.setattr(fmt, "PIECE", 64)
    return str(request.param)


def _as_version(art: Artifact, hash_path: str, tmp_path: Path) -> Artifact:
    """``art`` as the path reads it: itself; rehashed under the lowered piece size; or the
    same tables written as version 3 (4 with counted loops)."""
    if hash_path == "inline":
        return art
    version = art.metadata["format_version"]
    if hash_path == "whole-stream":
        version = "4" if version == fmt.COUNTED_FORMAT_VERSION else "3"
    return maskc.load_artifact(rewritten(art, tmp_path, rehash=True, format_version=version),
                               tokenizer=art.tokenizer)


def _threads_started(monkeypatch: pytest.MonkeyPatch) -> list[threading.Thread]:
    started: list[threading.Thread] = []
    real = threading.Thread.start

    def start(self: threading.Thread) -> None:
        started.append(self)
        real(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    return started


def _damaged_table(art: Artifact, tmp_path: Path, *, rehash: bool) -> Path:
    """``art`` with a transition target out of range (the table checks refuse it)."""
    tensors = dict(art.tensors)
    tgt = np.array(tensors["dfa.exc_target"], dtype=np.int32)
    tgt[0] = 1 << 30
    tensors["dfa.exc_target"] = tgt
    meta = dict(art.metadata)
    if rehash:
        meta["content_sha256"] = fmt.content_hash(tensors, meta)
    path = tmp_path / f"damaged-{rehash}.safetensors"
    path.write_bytes(save_bytes(tensors, meta))
    return path


def test_the_content_check_holds_on_both_paths(arts: dict[str, Artifact], tmp_path: Path, hash_path: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    originals = [_as_version(art, hash_path, tmp_path) for art in arts.values()]
    started = _threads_started(monkeypatch)
    for art in originals:
        with pytest.raises(maskc.ArtifactCorrupt, match="content check"):
            maskc.load_artifact(rewritten(art, tmp_path, rehash=False, num_states="999"))
        loaded = maskc.load_artifact(rewritten(art, tmp_path, rehash=False))
        assert loaded.content_key == art.content_key
        assert loaded.metadata["format_version"] == art.metadata["format_version"]
        assert np.array_equal(loaded.dfa.trans, art.dfa.trans)
    assert len(started) == {"inline": 0, "threaded": 8, "whole-stream": 4}[hash_path]
    assert not any(t.is_alive() for t in started)  # every load waited for its hash


def test_a_damaged_file_fails_its_content_check_before_its_tables(arts: dict[str, Artifact], tmp_path: Path,
                                                                 hash_path: str) -> None:
    """A damaged table is reported as damage (not as whichever check it broke), and a table
    that is bad under a matching hash as an inconsistent table."""
    for art in (_as_version(a, hash_path, tmp_path) for a in arts.values()):
        with pytest.raises(maskc.ArtifactCorrupt, match="content check"):
            maskc.load_artifact(_damaged_table(art, tmp_path, rehash=False))
        with pytest.raises(maskc.ArtifactCorrupt, match="a transition target out of range") as e:
            maskc.load_artifact(_damaged_table(art, tmp_path, rehash=True))
        assert "content check" not in str(e.value)


@pytest.mark.parametrize("where", ["helper", "caller"])
def test_a_hash_that_raises_is_raised_on_the_callers_thread(arts: dict[str, Artifact], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    monkeypatch.setattr(artifact_module, "_PARALLEL_HASH_BYTES", 0)
    monkeypatch.setattr(fmt, "PIECE", 64)
    path = rewritten(arts["regular"], tmp_path, rehash=True)
    whole = rewritten(arts["regular"], tmp_path, rehash=True, format_version="3")
    caller = threading.get_ident()

    def broken(self: fmt.ContentHasher) -> None:
        if (threading.get_ident() == caller) == (where == "caller"):
            raise MemoryError("hash")
        real(self)

    for name, file in (("_hash_pieces", path), ("_hash_whole", whole)):
        real = getattr(fmt.ContentHasher, name)
        with monkeypatch.context() as m:
            m.setattr(fmt.ContentHasher, name, broken)
            if where == "caller" and name == "_hash_whole":  # (the whole stream is hashed by its helper)
                maskc.load_artifact(file)
                continue
            started = _threads_started(m)
            with pytest.raises(MemoryError, match="hash"):
                maskc.load_artifact(file)
            assert started and not any(t.is_alive() for t in started)  # joined, even on an error


def test_an_older_format_is_refused_with_a_remedy(arts: dict[str, Artifact], tmp_path: Path) -> None:
    with pytest.raises(maskc.ArtifactVersionMismatch) as e:
        maskc.load_artifact(rewritten(arts["regular"], tmp_path, rehash=True, format_version="2"))
    assert "older artifact format" in e.value.message and "recompile" in str(e.value.hint)


def test_a_cache_entry_of_another_grammar_is_a_miss(tmp_path: Path, toy_vocab: Vocabulary) -> None:
    a = maskc.compile_json_schema(SCHEMA, toy_vocab, cache=tmp_path)
    b = maskc.compile_json_schema(OTHER, toy_vocab, cache=tmp_path)
    assert a.cache_path is not None and b.cache_path is not None
    shutil.copyfile(b.cache_path, a.cache_path)  # B's valid entry now sits at A's key
    again = maskc.compile_json_schema(SCHEMA, toy_vocab, cache=tmp_path)
    assert not again.cache_hit
    assert again.metadata["grammar_sha256"] == a.metadata["grammar_sha256"]
    assert again.to_bytes() == a.to_bytes()
    assert a.cache_path.read_bytes() == a.to_bytes()  # the entry was rebuilt in place
    assert maskc.compile_json_schema(SCHEMA, toy_vocab, cache=tmp_path).cache_hit


def test_a_cache_entry_with_other_options_is_a_miss(tmp_path: Path, toy_vocab: Vocabulary) -> None:
    a = maskc.compile_json_schema(SCHEMA, toy_vocab, cache=tmp_path)
    pretty = maskc.compile_json_schema(SCHEMA, toy_vocab, cache=tmp_path, whitespace="pretty")
    assert a.cache_path is not None and pretty.cache_path is not None
    shutil.copyfile(pretty.cache_path, a.cache_path)
    again = maskc.compile_json_schema(SCHEMA, toy_vocab, cache=tmp_path)
    assert not again.cache_hit and again.options["whitespace"] == "compact"


def test_cache_load_checks_every_identity_field(tmp_path: Path, toy_vocab: Vocabulary) -> None:
    art = maskc.compile_json_schema(SCHEMA, toy_vocab, cache=tmp_path)
    store = ArtifactCache(tmp_path)
    key = art.content_key
    assert art.cache_path == store.path(key)
    ok = {"kind": "json_schema", "grammar_sha256": art.metadata["grammar_sha256"], "tokenizer": toy_vocab,
          "options_json": art.metadata["options"]}
    hit = store.load(key, **ok)  # type: ignore[arg-type]
    assert hit is not None and hit.cache_hit
    for field, wrong in (("kind", "regex"), ("grammar_sha256", "0" * 64), ("options_json", "{}")):
        art.save(store.path(key))
        assert store.load(key, **{**ok, field: wrong}) is None  # type: ignore[arg-type]
        assert not store.path(key).exists()  # discarded


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
@pytest.mark.usefixtures("umask_022")
def test_files_get_the_umask_mode(tmp_path: Path, toy_vocab: Vocabulary) -> None:
    art = maskc.compile_json_schema(SCHEMA, toy_vocab, cache=tmp_path / "cache")
    assert art.cache_path is not None
    saved = art.save(tmp_path / "out" / "a.safetensors")
    for path in (saved, art.cache_path):
        assert path.stat().st_mode & 0o777 == 0o644, path
    os.umask(0o077)
    assert write_atomic(tmp_path / "private", b"x").stat().st_mode & 0o777 == 0o600


@pytest.mark.skipif(os.name != "posix", reason="pid probes are POSIX")
def test_a_dead_writers_temporary_is_swept(tmp_path: Path) -> None:
    import subprocess
    import sys

    from maskc.artifacts import io

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    stale = tmp_path / f".a.safetensors.{io._HOST}-{dead}.{'0' * 16}.tmp"
    mine = tmp_path / f".b.safetensors.{io._HOST}-{os.getpid()}.{'1' * 16}.tmp"
    foreign = tmp_path / f".c.safetensors.{'f' * 8}-{dead}.{'2' * 16}.tmp"
    unrelated = tmp_path / "notes.tmp"
    for p in (stale, mine, foreign, unrelated):
        p.write_bytes(b"half")
    assert sweep_stale_temporaries(tmp_path) == 1
    assert not stale.exists() and mine.exists() and foreign.exists() and unrelated.exists()
