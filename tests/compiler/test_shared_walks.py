"""Compiles of one source for several tokenizers walk their short tokens once for all
(:func:`maskc.compiler.pipeline.sharing_automata` given the tokenizers): the first alignment
of an automaton walks the trie of every tokenizer's distinct short tokens, and the next
tokenizer's alignment of the same automaton reads its tokens out of those walks. The
artifacts are those of compiling alone, byte for byte, except where counted loops are
planned for a longer token than a tokenizer's own (the same masks, more copies)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import maskc
from maskc.compiler import align as align_mod
from maskc.compiler import align_pda as pda_mod
from maskc.compiler import pipeline
from maskc.compiler.align import SharedShortTokens
from maskc.compiler.vocab import Vocabulary

RECURSIVE: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 6}, "data": {},
                   "tags": {"type": "array", "items": {"enum": ["red", "green"]}}},
    "required": ["name"],
}
# (no string or number: its lowering asks the vocabularies nothing, and they share its automaton)
REGULAR: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "boolean"}, "b": {"enum": ["ab", "ba", None]}},
    "required": ["b"],
}
# a counted loop planned for the longest token of the tokenizers compiled together
COUNTED: dict[str, Any] = {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 60}

# Two vocabularies with tokens the other lacks: ``"kind":"`` and a long run of spaces (a long
# token, over 16 bytes) only in the first, ``amma"`` and ``é`` split only in the second.
FIRST = ["{", "}", "[", "]", ":", ",", '"', "a", "b", "e", "d", "f", "g", "i", "k", "l", "m", "n", "r", "s", "t", "u",
         "1", "2", "-", " ", '"kind":"', "alpha", '"name"', " " * 20, "<eos>"]
SECOND = ["{", "}", "[", "]", ":", ",", '"', "a", "b", "e", "d", "f", "g", "i", "k", "l", "m", "n", "r", "s", "t", "u",
          "1", "2", "-", " ", "amma\"", '":', "ta", b"\xc3", b"\xa9", "<eos>", "<pad>"]


@pytest.fixture(scope="module")
def first() -> Vocabulary:
    return Vocabulary.from_tokens(FIRST, eos="<eos>", name="first", vocab_size=40)


@pytest.fixture(scope="module")
def second() -> Vocabulary:
    return Vocabulary.from_tokens(SECOND, eos="<eos>", special=["<pad>"], name="second", vocab_size=33)


def _sha(art: Any) -> str:
    return str(art.metadata["content_sha256"])


@pytest.fixture
def walked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the states whose short tokens are walked (one entry per walked batch's size)."""
    calls: list[int] = []
    real = align_mod._short_allowed

    def counting(dfa: Any, trie: Any, states: Any, *args: Any) -> Any:
        calls.append(int(states.shape[0]))
        return real(dfa, trie, states, *args)

    monkeypatch.setattr(align_mod, "_short_allowed", counting)
    return calls


@pytest.mark.parametrize("schema", [RECURSIVE, REGULAR, COUNTED], ids=["recursive", "regular", "counted"])
def test_shared_walks_give_the_artifacts_of_separate_compiles(
        schema: dict[str, Any], first: Vocabulary, second: Vocabulary, toy_vocab: Vocabulary,
        walked: list[int]) -> None:
    vocabs = [first, second, toy_vocab]
    alone = [_sha(maskc.compile_source("json_schema", schema, v)) for v in vocabs]
    assert len(set(alone)) == 3
    walked.clear()
    took: list[bool] = []  # whether each compile took the previous one's automaton
    walks: list[int] = []  # the states each compile walked
    with pipeline.sharing_automata(vocabs):
        shared = []
        for v in vocabs:
            before = sum(walked)
            art = maskc.compile_source("json_schema", schema, v)
            shared.append(_sha(art))
            took.append("shared_automaton" in art.timings)
            walks.append(sum(walked) - before)
    # a compile that took the automaton took its walks too; one that built its own walked it
    assert [w == 0 for w in walks] == took
    assert took == [False, True, True]
    if schema is COUNTED:
        # its counted loop is planned for the longest token of the three (20 bytes, against 5
        # and 5): the first tokenizer's own automaton; the others' keep more copies from the
        # bound than their own (the same masks: tests/compiler/test_counters.py)
        assert shared[0] == alone[0] and shared[1] != alone[1] and shared[2] != alone[2]
    else:
        assert shared == alone


def test_the_shared_table_maps_each_tokenizer_onto_its_strings(first: Vocabulary, second: Vocabulary) -> None:
    tables = [pipeline.token_table(first), pipeline.token_table(second)]
    shared = SharedShortTokens(tables)
    sl = shared.table.slices()[0]
    strings = [shared.table.flat[a : a + n].tobytes() for a, n in zip(sl.starts.tolist(), sl.lens.tolist())]
    assert len(strings) == len(set(strings))  # each distinct string once
    short = {b for v in (first, second) for i, b in enumerate(v.token_bytes)
             if b and len(b) <= 16 and i not in v.special_ids}
    assert set(strings) == short
    assert shared.max_len == 20
    for vocab, table in zip((first, second), tables):
        got = shared.view(table)
        assert got is not None
        positions, starts, ids = got
        for i, b in enumerate(vocab.token_bytes):
            if b and len(b) <= 16 and i not in vocab.special_ids:
                assert strings[positions[i]] == b
                assert i in ids[starts[positions[i]] : starts[positions[i] + 1]].tolist()
            else:
                assert positions[i] == len(strings)
    other = Vocabulary.from_tokens(["x", "<eos>"], eos="<eos>", name="other")
    assert shared.view(pipeline.token_table(other)) is None


def _table(tokens: list[bytes], walkable: list[bool]) -> align_mod.TokenTable:
    lens = np.asarray([len(t) for t in tokens], dtype=np.int64)
    offsets = np.zeros(len(tokens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    flat = np.frombuffer(b"".join(tokens), dtype=np.uint8)
    return align_mod.TokenTable(flat, offsets, np.asarray(walkable, dtype=np.bool_), (), len(tokens) + 2)


def test_the_shared_strings_are_numbered_by_first_occurrence_bytes_for_bytes() -> None:
    """Strings that differ only by trailing zero bytes, or by length, stay apart; a string in
    both tables, or twice in one, is one; the numbering follows the first table's short tokens,
    then the new ones of the next (each table's own order: by first byte, then by id)."""
    one = [b"a", b"a\x00", b"\x00", b"b", b"a", b"\x00\x00", b"", b"x" * 17, b"ab"]
    two = [b"\x00\x00", b"ab", b"c", b"a\x00\x00", b"a\x00", b"\xff" * 16, b"skip"]
    tables = [_table(one, [t != b"" for t in one]), _table(two, [True] * 6 + [False])]
    shared = SharedShortTokens(tables)
    flat, offsets = shared.table.flat.tobytes(), shared.table.offsets.tolist()
    strings = [flat[a:b] for a, b in zip(offsets, offsets[1:])]
    want: list[bytes] = []
    for tokens, table in zip((one, two), tables):
        for i in table.slices()[0].ids.tolist():
            if tokens[i] not in want:
                want.append(tokens[i])
    assert strings == want
    assert len(strings) == 9 and b"x" * 17 not in strings and b"skip" not in strings
    listed = shared.table.slices()[0]
    for tokens, table in zip((one, two), tables):
        got = shared.view(table)
        assert got is not None
        for i, b in enumerate(tokens):
            if table.walkable[i] and len(b) <= 16:
                at = int(listed.ids[got.positions[i]])  # the shared token at this position
                assert strings[at] == b
                assert i in got.token_ids(np.asarray([got.positions[i]])).tolist()
            else:
                assert got.positions[i] == shared.table.num_tokens


def test_real_tokenizers_share_walks_and_keep_their_masks(deepseek: Vocabulary, smollm2: Vocabulary,
                                                          walked: list[int]) -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "meta": {},
                                               "tags": {"type": "array", "items": {"type": "string"}}}}
    alone = [_sha(maskc.compile_source("json_schema", schema, v)) for v in (deepseek, smollm2)]
    walked.clear()
    with pipeline.sharing_automata([deepseek, smollm2]):
        a = maskc.compile_source("json_schema", schema, deepseek)
        after_first = sum(walked)
        b = maskc.compile_source("json_schema", schema, smollm2)
    assert [_sha(a), _sha(b)] == alone
    assert after_first > 0 and sum(walked) == after_first


def test_automata_over_a_limit_the_shorter_tokenizer_stays_under_are_built_for_it(
        first: Vocabulary, second: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    """Built for the longest token of both (20 bytes), the alignment automata hold more
    states than the second tokenizer's own (5 bytes): with a limit between the two, the
    shared ones lose inline depth that the second's own keep, so the second gets its own."""
    options = maskc.CompileOptions()
    rules = pipeline.resolve_rules(pipeline.frontend("json_schema").to_grammar(RECURSIVE, options)[0])
    pda = pipeline.build_pda(rules, options)
    sizes = {}
    for vocab in (first, second):
        built = pda_mod._local_automata(pda, pda_mod.INLINE_DEPTH, None, limit=10**9,
                                        horizon=pipeline.token_table(vocab).max_len,
                                        outer_horizon=pda_mod.OUTER_HORIZON)
        assert built is not None
        sizes[vocab.name] = built[1].num_states
    assert sizes["second"] < sizes["first"]
    limit = (sizes["first"] + sizes["second"]) // 2
    real = pda_mod._local_automata

    def capped(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("limit", limit)
        return real(*args, **kwargs)

    monkeypatch.setattr(pda_mod, "_local_automata", capped)
    built_for: list[int] = []
    real_automata = pda_mod._alignment_automata

    def recording(pda_: Any, longest: int, *args: Any) -> Any:
        built_for.append(longest)
        return real_automata(pda_, longest, *args)

    monkeypatch.setattr(pda_mod, "_alignment_automata", recording)
    alone = [maskc.compile_source("json_schema", RECURSIVE, v) for v in (first, second)]
    assert [a.inline_depth for a in alone] == [pda_mod.INLINE_DEPTH - 1, pda_mod.INLINE_DEPTH]
    built_for.clear()
    with pipeline.sharing_automata([first, second]):
        shared = [maskc.compile_source("json_schema", RECURSIVE, v) for v in (first, second)]
    assert [_sha(a) for a in shared] == [_sha(a) for a in alone]
    assert built_for == [20, pipeline.token_table(second).max_len]


def test_fits_reads_the_prefix_of_a_shorter_horizon() -> None:
    depth = [0, 0, 1, 1, 2, 2, 2, 3, 3, 3, 3]
    assert pda_mod._fits((3, depth, 7), 2)  # 7 subsets within 2 bytes: under a limit of 7
    assert not pda_mod._fits((3, depth, 6), 2)
    assert not pda_mod._fits((1, depth, 7), 2)  # stopped short of 2 bytes: the prefix was over already
    assert not pda_mod._fits((-1, [], 7), 2)  # the states alone were over
    assert np.searchsorted(depth, 2, side="right") == 7
