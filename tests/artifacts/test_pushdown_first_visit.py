"""The pushdown runtime's inlined walk against the general one: on every configuration of
random walks, closing, stepping and running every token's bytes give the same stacks and
record the same reach and headroom (the memo keys a first visit leaves behind); and a
runtime's first answers equal the reference's."""

from __future__ import annotations

import random

import numpy as np
import pytest

from maskc.artifacts.artifact import Artifact
from maskc.artifacts import pushdown
from maskc.artifacts.pushdown import Config, PushdownRuntime, _FastWalk, _set_bits, _Walk
from maskc.compiler.maskstore import unpack_bool
from maskc.compiler.vocab import Vocabulary
from tests.artifacts.test_pushdown_fast import _loaded
from tests.compiler.test_pushdown import AMB_IR, ARR_IR, MUT_IR, OBJ_IR

GRAMMARS = {"arrays": ARR_IR, "objects": OBJ_IR, "mutual": MUT_IR, "ambiguous": AMB_IR}


@pytest.fixture(params=["one by one", "in arrays"])
def candidate_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A mask's candidates walked one by one, or (every mask, however few) gathered and walked
    a byte position at a time in arrays, as a mask with many candidates does."""
    monkeypatch.setattr(pushdown, "MANY_CANDIDATES", 1 << 30 if request.param == "one by one" else 0)
    return str(request.param)



def _record(w: _Walk) -> tuple[list[int], list[int], list[int]]:
    return list(w.reach), list(w.lo), list(w.hi)


def _walks(rt: PushdownRuntime, config: Config) -> tuple[_Walk, _Walk]:
    fast = rt._walk(config)
    assert isinstance(fast, _FastWalk)
    return _Walk(rt, config), fast


def _configs(art: Artifact, seed: int, walks: int, steps: int) -> list[Config]:
    """Configurations met on random walks that lean towards the depth bound."""
    rt = PushdownRuntime(art, fast=False)
    vocab = art.tokenizer
    assert vocab is not None
    tokens = [b for t, b in enumerate(vocab.token_bytes) if b and t not in vocab.special_ids]
    rng = random.Random(seed)
    out: list[Config] = []
    for _ in range(walks):
        config: Config = ((0,),)
        for _ in range(steps):
            out.append(config)
            nexts = [c for c in (rt.advance(config, data) for data in tokens) if c]
            if not nexts:
                break
            nexts.sort(key=lambda c: -max(len(s) for s in c))
            config = nexts[0] if rng.random() < 0.5 else rng.choice(nexts)
    return out


@pytest.mark.parametrize("name", sorted(GRAMMARS))
@pytest.mark.parametrize("max_depth", [2, 3, 6])
def test_inlined_walk_reads_what_the_general_walk_reads(name: str, max_depth: int, pda_vocab: Vocabulary) -> None:
    art = _loaded(GRAMMARS[name], pda_vocab, max_depth)
    rt = PushdownRuntime(art)
    tokens = [b for t, b in enumerate(pda_vocab.token_bytes) if b and t not in pda_vocab.special_ids]
    for config in _configs(art, seed=max_depth, walks=4, steps=30):
        start = [(i, 0, ()) for i in range(len(config))]
        ref, fast = _walks(rt, config)
        closed = ref.close(start)
        assert fast.close(start) == closed, config
        assert _record(fast) == _record(ref), config
        for b in range(256):
            ref, fast = _walks(rt, config)
            assert fast.step(fast.close(start), b) == ref.step(ref.close(start), b), (config, b)
            assert _record(fast) == _record(ref), (config, b)
        for data in tokens:
            ref, fast = _walks(rt, config)
            assert fast.run(start, data) == ref.run(start, data), (config, data)
            assert _record(fast) == _record(ref), (config, data)
        ref, fast = _walks(rt, config)  # candidates sharing prefixes, as a mask walks them
        ref_closed, fast_closed = ref.close(start), fast.close(start)
        ref_after: dict[bytes, list[tuple[int, int, tuple[int, ...]]]] = {}
        fast_after: dict[bytes, list[tuple[int, int, tuple[int, ...]]]] = {}
        for data in tokens:
            assert fast.run_from(fast_closed, data, fast_after) == ref.run_from(ref_closed, data, ref_after)
        assert _record(fast) == _record(ref), config


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_first_answers_equal_the_reference(name: str, pda_vocab: Vocabulary, candidate_path: str) -> None:
    """Each configuration asked of fresh runtimes: every answer is a first visit."""
    art = _loaded(GRAMMARS[name], pda_vocab, 3)
    tokens = [(t, b) for t, b in enumerate(pda_vocab.token_bytes) if b and t not in pda_vocab.special_ids]
    for config in _configs(art, seed=7, walks=3, steps=25):
        fast, ref = PushdownRuntime(art), PushdownRuntime(art, fast=False)
        row, end = fast.mask(config)
        want_row, want_end = ref.mask(config)
        assert end == want_end, config
        assert np.array_equal(row, want_row), config
        assert not row.flags.writeable
        for t, data in tokens:
            assert PushdownRuntime(art).advance(config, data, t) == ref.advance(config, data, t), (config, data)


@pytest.mark.parametrize("name", sorted(GRAMMARS))
@pytest.mark.parametrize("max_depth", [2, 3, 6])
def test_first_masks_allow_exactly_the_tokens_a_step_takes(name: str, max_depth: int, pda_vocab: Vocabulary,
                                                           candidate_path: str) -> None:
    """Independent of how a mask gathers and walks its candidates: a token's bit is set
    exactly where stepping by its bytes leaves a configuration."""
    art = _loaded(GRAMMARS[name], pda_vocab, max_depth)
    tokens = [(t, b) for t, b in enumerate(pda_vocab.token_bytes) if b and t not in pda_vocab.special_ids]
    steps = PushdownRuntime(art, fast=False)
    allowed = 0
    for config in _configs(art, seed=max_depth + 23, walks=3, steps=25):
        row, _ = PushdownRuntime(art)._mask(config)
        bits = set(_set_bits(row, art.vocab_size).tolist())
        for t, data in tokens:
            assert (t in bits) == bool(steps.advance(config, data)), (config, data)
            allowed += t in bits
    assert allowed


def _memo_rows(memo: dict[object, list[tuple[object, object, object]]]) -> dict[object, list[tuple[object, object, object]]]:
    """A mask memo with its rows' values made comparable (bitmask rows as bytes)."""
    out = {}
    for key, rows in memo.items():
        out[key] = [(lo, hi, v if not isinstance(v, tuple) else (v[0].tobytes(), v[1])) for lo, hi, v in rows]
    return out


@pytest.mark.parametrize("name", sorted(GRAMMARS))
@pytest.mark.parametrize("max_depth", [2, 3, 6])
def test_first_masks_record_what_the_reference_records(name: str, max_depth: int, pda_vocab: Vocabulary,
                                                       candidate_path: str) -> None:
    """A computed mask walks its candidates together (stacks shared between candidates): it
    leaves the same memo entries (reach and headroom) as the reference's walk of each one."""
    art = _loaded(GRAMMARS[name], pda_vocab, max_depth)
    computed = 0
    for config in _configs(art, seed=max_depth + 11, walks=4, steps=30):
        fast, ref = PushdownRuntime(art, contexts=False), PushdownRuntime(art, fast=False)
        fast._build_kinds()
        row, end = fast._mask(config)  # the full computation, whatever the top (no stored answer)
        want_row, want_end = ref._mask(config)
        assert end == want_end and np.array_equal(row, want_row), config
        assert _memo_rows(fast._mask_memo) == _memo_rows(ref._mask_memo), config
        computed += 1
    assert computed


@pytest.mark.parametrize("name", sorted(GRAMMARS))
@pytest.mark.parametrize("max_depth", [2, 3, 6])
def test_candidates_met_again_walk_in_spelling_order_to_the_same_records(
        name: str, max_depth: int, pda_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    """A candidate list met a second time is walked in the order of its spellings, each walk
    taking up the one before where they part (and skipped where it shares the classes the
    one before died on): the same row and the same reach and headroom as the first walk of
    each candidate from the start, and as the reference's."""
    monkeypatch.setattr(pushdown, "MANY_CANDIDATES", 1 << 30)
    art = _loaded(GRAMMARS[name], pda_vocab, max_depth)
    spelled = 0
    for config in _configs(art, seed=max_depth + 5, walks=4, steps=30):
        fast, ref = PushdownRuntime(art, contexts=False, spell=True), PushdownRuntime(art, fast=False)
        (want_row, want_end), want = ref.compute_mask(config)
        for _ in range(2):  # (the second time, every list is met again)
            (row, end), got = fast.compute_mask(config)
            assert end == want_end and np.array_equal(row, want_row), config
            assert _record(got) == _record(want), config
        assert fast._spellings is not None
        spelled += sum(v is not None for v in fast._spellings.values())
    assert spelled


@pytest.mark.parametrize("vocab_size", [1, 7, 32, 33, 100, 1000, 4099])
def test_set_bits_equals_unpacking(vocab_size: int) -> None:
    rng = np.random.default_rng(vocab_size)
    words = (vocab_size + 31) // 32
    for density in (0.0, 0.001, 0.05, 0.5, 1.0):
        bits = rng.random(words * 32) < density
        row = np.packbits(bits, bitorder="little").view(np.int32)
        got = _set_bits(row, vocab_size)
        want = np.flatnonzero(unpack_bool(row, vocab_size))
        assert got.dtype == want.dtype and np.array_equal(got, want), (vocab_size, density)
