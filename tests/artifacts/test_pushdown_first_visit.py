"""The pushdown runtime's inlined walk against the general one: on every configuration of
random walks, closing, stepping and running every token's bytes give the same stacks and
record the same reach and headroom (the memo keys a first visit leaves behind); and a
runtime's first answers equal the reference's."""

from __future__ import annotations

import random

import numpy as np
import pytest

from maskc.artifacts.artifact import Artifact
from maskc.artifacts.pushdown import Config, PushdownRuntime, _FastWalk, _Walk
from maskc.compiler.ir import Grammar
from maskc.compiler.options import CompileOptions
from maskc.compiler.pipeline import compile_grammar
from maskc.compiler.vocab import Vocabulary
from tests.compiler.test_pushdown import AMB_IR, ARR_IR, MUT_IR, OBJ_IR, TOKENS

GRAMMARS = {"arrays": ARR_IR, "objects": OBJ_IR, "mutual": MUT_IR, "ambiguous": AMB_IR}


@pytest.fixture(scope="module")
def pda_vocab() -> Vocabulary:
    return Vocabulary.from_tokens(TOKENS, eos="<eos>", name="pda-toy", vocab_size=len(TOKENS) + 3)


def _loaded(grammar: Grammar, vocab: Vocabulary, max_depth: int) -> Artifact:
    g = compile_grammar("test", repr(grammar), grammar, vocab, CompileOptions(max_depth=max_depth))
    art = Artifact.from_bytes(Artifact.from_compiled(g, vocab).to_bytes())
    art.tokenizer = vocab
    return art


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
def test_first_answers_equal_the_reference(name: str, pda_vocab: Vocabulary) -> None:
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
