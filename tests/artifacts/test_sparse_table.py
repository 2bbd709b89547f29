"""A large transition table stays as stored when an artifact loads (each row's default target
and its exceptions) and is read row by row: matchers over it give exactly what they give
over the decoded table, and nothing decodes the whole table unless asked to."""

from __future__ import annotations

import copy
import pickle
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import maskc
from maskc.artifacts import artifact as artifact_module
from maskc.artifacts import format as fmt
from maskc.artifacts.artifact import Artifact
from maskc.compiler.dfa import Dfa, SparseTable
from maskc.compiler.tokenizer import Vocabulary


def _random_table(rng: np.random.Generator, n: int, c: int) -> np.ndarray:
    base = rng.integers(-1, n, size=(n, 1))
    trans = np.repeat(base, c, axis=1)
    flips = rng.random((n, c)) < rng.random((n, 1))  # rows from no exception to all of them
    trans[flips] = rng.integers(-1, n, size=int(flips.sum()))
    return trans.astype(np.int32)


@pytest.mark.parametrize("seed", range(4))
def test_rows_and_decode_read_the_stored_table_exactly(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, c = int(rng.integers(1, 60)), int(rng.integers(1, 40))
    trans = _random_table(rng, n, c)
    tensors = dict(fmt.encode_trans(trans))
    if seed % 2:  # stored in the other byte order: read through a native copy
        tensors["dfa.exc_target"] = tensors["dfa.exc_target"].astype(">i4")
        tensors["dfa.default"] = tensors["dfa.default"].astype(">i4")
    table = fmt.sparse_trans(tensors, "x")
    assert isinstance(table, SparseTable) and (table.num_states, table.num_classes) == (n, c)
    assert np.array_equal(table.decode(), trans)
    for q in range(n):
        assert table.row(q) == trans[q].tolist()
    accepting = np.zeros(n, dtype=np.bool_)
    byte_class = (np.arange(256) % c).astype(np.uint8)
    dfa = Dfa(None, byte_class, accepting, sparse=table)
    assert dfa.is_sparse and dfa.num_states == n and dfa.num_classes == c
    step = dfa.stepper()
    for q in range(n):
        assert [step(q, k) for k in range(c)] == trans[q].tolist()
        assert dfa.step(q, 3) == trans[q, 3 % c]
    assert dfa.is_sparse  # rows only
    assert np.array_equal(dfa.trans, trans) and not dfa.is_sparse
    assert dfa.stepper()(n - 1, c - 1) == trans[n - 1, c - 1]


@pytest.mark.parametrize("seed", range(3))
def test_each_row_stores_its_most_frequent_target_as_default(seed: int) -> None:
    """The default of a row is its most frequent target, the least of those tied: the fewest
    exceptions, and one answer for the same table."""
    rng = np.random.default_rng(100 + seed)
    for _ in range(200):
        n, c, k = int(rng.integers(1, 25)), int(rng.integers(1, 12)), int(rng.integers(1, 6))
        trans = rng.integers(-1, k, size=(n, c)).astype(np.int32)  # few values: many ties
        default = fmt.encode_trans(trans)["dfa.default"]
        for row, got in zip(trans.tolist(), default.tolist(), strict=True):
            counts = {v: row.count(v) for v in row}
            assert got == min(v for v in counts if counts[v] == max(counts.values()))


def test_a_dfa_cannot_be_changed_after_it_is_built() -> None:
    dfa = Dfa(np.zeros((2, 1), dtype=np.int32), np.zeros(256, dtype=np.uint8), np.array([True, False]))
    with pytest.raises(AttributeError):
        dfa.accepting = np.array([False, False])  # type: ignore[misc]
    with pytest.raises(AttributeError):
        dfa.num_states = 5  # type: ignore[misc]
    with pytest.raises(ValueError):
        dfa.trans[0, 0] = 1
    with pytest.raises(ValueError, match="dense or sparse"):
        Dfa(None, np.zeros(256, dtype=np.uint8), np.array([True]))


def _sparse_and_dense(art: Artifact, vocab: Vocabulary, tmp_path: Path,
                      monkeypatch: pytest.MonkeyPatch) -> tuple[Artifact, Artifact]:
    path = art.save(tmp_path / "a.msk")
    monkeypatch.setattr(artifact_module, "_SPARSE_TABLE_BYTES", 0)
    sparse = maskc.load_artifact(path, tokenizer=vocab)
    monkeypatch.setattr(artifact_module, "_SPARSE_TABLE_BYTES", 1 << 62)
    dense = maskc.load_artifact(path, tokenizer=vocab)
    assert sparse.dfa.is_sparse and not dense.dfa.is_sparse
    return sparse, dense


def _walk_both(a: Artifact, b: Artifact, vocab: Vocabulary, seed: int, walks: int = 12) -> int:
    """Lockstep random walks: the same mask, verdicts, jump-forward string and end at every step."""
    rng = random.Random(seed)
    steps = 0
    for _ in range(walks):
        ma, mb = a.matcher(), b.matcher()
        for _step in range(40):
            ia, ib = ma.allowed_token_ids(), mb.allowed_token_ids()
            assert np.array_equal(ia, ib)
            assert ma.can_terminate() == mb.can_terminate()
            assert ma.find_jump_forward_string() == mb.find_jump_forward_string()
            if not ia.size or ma.is_terminated():
                break
            for u in [rng.randrange(vocab.vocab_size) for _ in range(6)]:
                ok = ma.accept_token(u)
                assert ok == mb.accept_token(u)
                if ok:
                    ma.rollback(1)
                    mb.rollback(1)
            t = int(rng.choice(ia.tolist()))
            assert ma.accept_token(t) and mb.accept_token(t)
            steps += 1
    return steps


SCHEMAS: dict[str, Any] = {
    "regular": {"type": "object", "properties": {"a": {"type": "string", "pattern": "^[ab]{2,5}$"},
                                                 "b": {"enum": [12, "ab", None]}}, "required": ["a"]},
    "counted": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 30},
    "recursive": {"$ref": "#/$defs/t", "$defs": {"t": {
        "type": "object", "properties": {"a": {"type": "integer"}, "c": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
        "additionalProperties": False}}},
}


@pytest.mark.parametrize("kind", sorted(SCHEMAS))
def test_matchers_over_a_stored_table_equal_those_over_the_dense_table(
        kind: str, toy_vocab: Vocabulary, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    art = maskc.compile_json_schema(SCHEMAS[kind], toy_vocab, cache=False)
    sparse, dense = _sparse_and_dense(art, toy_vocab, tmp_path, monkeypatch)
    assert (sparse.dfa.counters is not None) == (kind == "counted")
    assert sparse.is_pushdown == (kind == "recursive")
    assert _walk_both(sparse, dense, toy_vocab, seed=len(kind)) >= 30
    for text in ('{"a":"ab"}', '[""]', '{"c":[{"a":1}]}', '{"a":"abab","b":12}', '["ab","b"]'):
        ms, md = sparse.matcher(), dense.matcher()
        assert ms.accept_string(text) == md.accept_string(text)
        assert ms.can_terminate() == md.can_terminate()
    assert sparse.dfa.is_sparse  # the matchers read rows, never the whole table
    assert np.array_equal(sparse.dfa.trans, dense.dfa.trans)  # decoded when asked for
    assert not sparse.dfa.is_sparse


def test_only_a_large_table_stays_sparse(toy_vocab: Vocabulary, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    art = maskc.compile_json_schema(SCHEMAS["regular"], toy_vocab, cache=False)
    table_bytes = art.dfa.num_states * art.dfa.num_classes * 4
    path = art.save(tmp_path / "a.msk")
    for bound, sparse in ((table_bytes, True), (table_bytes + 1, False)):
        monkeypatch.setattr(artifact_module, "_SPARSE_TABLE_BYTES", bound)
        assert maskc.load_artifact(path, tokenizer=toy_vocab).dfa.is_sparse == sparse


def test_a_sparse_dfa_copies_and_pickles(toy_vocab: Vocabulary, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    art = maskc.compile_json_schema(SCHEMAS["recursive"], toy_vocab, cache=False)
    sparse, dense = _sparse_and_dense(art, toy_vocab, tmp_path, monkeypatch)
    sparse.dfa.rows[0]  # a converted row travels too
    for dfa in (pickle.loads(pickle.dumps(sparse.dfa)), copy.deepcopy(sparse.dfa)):
        assert dfa.is_sparse and dfa.num_states == dense.dfa.num_states
        assert [dfa.rows[q] for q in range(dfa.num_states)] == dense.dfa.trans.tolist()
        assert np.array_equal(dfa.trans, dense.dfa.trans)
