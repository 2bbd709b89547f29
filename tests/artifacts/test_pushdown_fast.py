"""The pushdown runtime's fast path (masks and steps keyed on the top state and the headroom)
against the general walk it short-cuts, on random walks of recursive artifacts; and loads
that reuse a verification only while the file is unchanged."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest

import maskc
from maskc.artifacts import io, pushdown
from maskc.artifacts.artifact import Artifact
from maskc.artifacts.pushdown import Config, PushdownRuntime
from maskc.compiler.ir import Grammar
from maskc.compiler.options import CompileOptions
from maskc.compiler.pipeline import compile_grammar
from maskc.compiler.vocab import Vocabulary
from tests.compiler.test_pushdown import AMB_IR, ARR_IR, MUT_IR, OBJ_IR

GRAMMARS = {"arrays": ARR_IR, "objects": OBJ_IR, "mutual": MUT_IR, "ambiguous": AMB_IR}
SCHEMA = {"$defs": {"node": {"type": "object", "properties": {"a": {"type": "integer"},
                                                              "b": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                             "required": ["a"]}},
          "$ref": "#/$defs/node"}  # spelled by the toy vocabulary


def _loaded(grammar: Grammar, vocab: Vocabulary, max_depth: int) -> Artifact:
    g = compile_grammar("test", repr(grammar), grammar, vocab, CompileOptions(max_depth=max_depth))
    art = Artifact.from_bytes(Artifact.from_compiled(g, vocab).to_bytes())
    art.tokenizer = vocab
    return art


def _compare_walks(art: Artifact, seed: int, walks: int, steps: int) -> int:
    """Random walks driven by the fast runtime; at every configuration the mask and the step
    of every token equal the general walk's. Returns the deepest stack seen."""
    vocab = art.tokenizer
    assert vocab is not None
    fast = PushdownRuntime(art, fast=True)
    ref = PushdownRuntime(art, fast=False)
    rng = random.Random(seed)
    tokens = [(t, b) for t, b in enumerate(vocab.token_bytes) if b and t not in vocab.special_ids]
    deepest = 0
    for _ in range(walks):
        config: Config = ((0,),)
        for _ in range(steps):
            deepest = max(deepest, max(len(s) for s in config))
            row, end = fast.mask(config)
            want_row, want_end = ref.mask(config)
            assert end == want_end, config
            assert np.array_equal(row, want_row), config
            nexts = []
            for t, data in tokens:
                got = fast.advance(config, data, t)
                assert got == ref.advance(config, data, t), (config, data)
                allowed = bool((int(row[t >> 5]) >> (t & 31)) & 1)
                assert allowed == bool(got), (config, data)
                if got:
                    nexts.append(got)
            if not nexts:
                break
            # lean towards the deepest continuations so the walk meets the depth bound
            nexts.sort(key=lambda c: -max(len(s) for s in c))
            config = nexts[0] if rng.random() < 0.5 else rng.choice(nexts)
    return deepest


@pytest.mark.parametrize("name", sorted(GRAMMARS))
@pytest.mark.parametrize("max_depth", [2, 3, 5, 8])
def test_fast_path_equals_the_general_walk(name: str, max_depth: int, pda_vocab: Vocabulary) -> None:
    art = _loaded(GRAMMARS[name], pda_vocab, max_depth)
    deepest = _compare_walks(art, seed=max_depth, walks=6, steps=40)
    assert deepest >= min(max_depth, 2)  # the walks did nest


@pytest.mark.parametrize("max_depth", [3, 6])
def test_fast_path_equals_the_general_walk_on_a_recursive_schema(max_depth: int, toy_vocab: Vocabulary) -> None:
    art = maskc.compile_json_schema(SCHEMA, toy_vocab, max_depth=max_depth)
    assert art.is_pushdown
    assert _compare_walks(art, seed=max_depth, walks=6, steps=60) >= 2


def test_matcher_on_the_fast_path_accepts_and_rolls_back(pda_vocab: Vocabulary) -> None:
    art = _loaded(ARR_IR, pda_vocab, 3)
    m = art.matcher()
    ids = {b: t for t, b in enumerate(pda_vocab.token_bytes)}
    for piece in (b"[[", b"1", b"]", b",", b"1", b"]"):
        assert m.accept_token(ids[piece]), piece
    assert m.can_terminate()
    assert not m.accept_token(ids[b"]"])  # nothing left open
    m.rollback(3)  # back to "[[1]"
    assert not m.can_terminate()
    bm = maskc.allocate_bitmask_np(1, art.vocab_size)
    for t in range(len(pda_vocab.token_bytes)):  # the mask and the steps agree
        m.fill_next_token_bitmask(bm, 0)
        allowed = bool((int(bm[0, t >> 5]) >> (t & 31)) & 1)
        assert m.accept_token(t) == allowed, pda_vocab.token_bytes[t]
        if allowed:
            m.rollback(1)
    assert m.accept_token(ids[b"]"])
    assert m.can_terminate()


# -- loads that reuse a verification ---------------------------------------------------------


def _settled(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the just-written file count as settled (its timestamps are trusted at once)."""
    monkeypatch.setattr(io, "SETTLE_NS", 0)


def test_a_fresh_file_is_verified_on_every_load(tmp_path: Path, pda_vocab: Vocabulary) -> None:
    art = _loaded(OBJ_IR, pda_vocab, 3)
    path = art.save(tmp_path / "a.safetensors")
    maskc.load_artifact(path)
    assert io.verified_file(path) is None  # written just now: its timestamps are not trusted yet
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0x01  # in place, same size, at once
    with open(path, "r+b") as f:
        f.write(raw)
    with pytest.raises(maskc.ArtifactCorrupt, match="content check"):
        maskc.load_artifact(path)


def test_a_settled_file_is_verified_once_until_it_changes(tmp_path: Path, pda_vocab: Vocabulary,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _settled(tmp_path, monkeypatch)
    art = _loaded(OBJ_IR, pda_vocab, 3)
    path = art.save(tmp_path / "a.safetensors")
    first = maskc.load_artifact(path, tokenizer=pda_vocab)
    assert io.verified_file(path) is not None
    again = maskc.load_artifact(path, tokenizer=pda_vocab)
    assert again is not first and again.dfa is first.dfa  # the tables are shared, the memos are not
    assert again.runtime() is not first.runtime()
    # a write in place changes the identity (here its mtime): the next load verifies again
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0x01
    path.write_bytes(bytes(raw))
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert io.verified_file(path) is None
    with pytest.raises(maskc.ArtifactCorrupt, match="content check"):
        maskc.load_artifact(path)
    # a replacement by rename is another file
    other = _loaded(ARR_IR, pda_vocab, 3)
    other.save(path)
    assert maskc.load_artifact(path).metadata["grammar_source"] == other.metadata["grammar_source"]
    io.forget_verified()
    assert io.verified_file(path) is None


def test_matcher_steps_memoized_per_configuration_and_token(toy_vocab: Vocabulary) -> None:
    # The second matcher of an artifact finds every step the first took, accepted or
    # rejected, in the shared memo: it must move (and refuse) exactly as the first did, and
    # as the runtime's own step does, rollback included.
    art = _loaded(OBJ_IR, toy_vocab, 6)
    rng = random.Random(3)
    ids = list(range(toy_vocab.vocab_size))
    first, second = art.matcher(), art.matcher()
    rt = first._rt
    for _ in range(30):
        first.reset()
        second.reset()
        for _ in range(12):
            c = first.config
            t = rng.choice(ids)
            got = first.accept_token(t)
            assert second.accept_token(t) == got
            assert second.config == first.config
            if t in toy_vocab.eos_ids:
                assert got == (bool(c) and rt.can_end(c))
            elif c and t < len(toy_vocab.token_bytes) and toy_vocab.token_bytes[t] and t not in toy_vocab.special_ids:
                assert got == bool(rt.advance(c, toy_vocab.token_bytes[t], t))
            else:
                assert not got
            if got and rng.random() < 0.2:
                first.rollback(1)
                second.rollback(1)
    assert rt._step_exact


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_state_kinds_and_needs_are_read_off_the_automaton(name: str, pda_vocab: Vocabulary) -> None:
    """The fast path's per-state tables: a state that makes a call is ``_CALLS`` (whether or
    not it accepts), an accepting one without calls ``_ACCEPTS``, every other one 0; the needs
    are the automaton's. Found from the call edges, not state by state."""
    art = _loaded(GRAMMARS[name], pda_vocab, 5)
    pda = art.pda
    assert pda is not None
    rt = PushdownRuntime(art)
    rt._build_kinds()
    kinds, needs = rt._kinds, rt._needs
    assert kinds is not None and needs is not None
    calls = pda.all_calls()
    want = [pushdown._CALLS if calls[q] else pushdown._ACCEPTS if pda.dfa.accepting[q] else 0
            for q in range(pda.num_states)]
    assert list(kinds) == want
    assert pushdown._CALLS in want and pushdown._ACCEPTS in want  # (both kinds met: the test can fail)
    assert list(needs) == pda.need.tolist()
