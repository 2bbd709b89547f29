"""Exact masks: vectorized alignment against a brute-force oracle walking every token."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from maskc.compiler import pipeline
from maskc.compiler.pipeline import compile_json_schema, compile_regex
from maskc.compiler.options import CompileOptions
from maskc.compiler.vocab import Vocabulary

SCHEMAS = [
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 3}}, "required": ["a"]},
    {"type": "array", "items": {"enum": ["a", "b", 12]}, "maxItems": 3},
    {"anyOf": [{"type": "null"}, {"type": "boolean"}, {"type": "string", "pattern": "^é+$"}]},
    {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "object", "properties": {"b": {"const": 1}}, "required": ["b"]}}}},
]


def oracle(dfa, vocab: Vocabulary, state: int) -> set[int]:
    """Allowed ids by walking each token's bytes one at a time; EOS only where accepting."""
    out = set()
    for t, data in enumerate(vocab.token_bytes):
        if t in vocab.special_ids or not data:
            continue
        if dfa.walk(state, data) >= 0:
            out.add(t)
    if dfa.accepting[state]:
        out.update(vocab.eos_ids)
    return out


def check_exact(g, vocab: Vocabulary) -> None:
    for s in range(g.dfa.num_states):
        got = set(g.masks.allowed_ids(int(g.state_mask[s])).tolist())
        assert got == oracle(g.dfa, vocab, s), f"state {s}"


@pytest.mark.parametrize("schema", SCHEMAS)
def test_exact_masks_toy_bpe(schema: object, toy_vocab: Vocabulary) -> None:
    check_exact(compile_json_schema(schema, toy_vocab), toy_vocab)


@pytest.mark.parametrize("schema", SCHEMAS)
def test_exact_masks_byte_vocab(schema: object, byte_vocab: Vocabulary) -> None:
    check_exact(compile_json_schema(schema, byte_vocab), byte_vocab)


def test_boundary_tokens_admitted_exactly_where_all_bytes_fit(toy_vocab: Vocabulary) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "array", "items": {"type": "object"}}}, "required": ["a"]}
    g = compile_json_schema(schema, toy_vocab)
    ids = {t.decode("utf-8", "replace"): i for i, t in enumerate(toy_vocab.token_bytes)}

    def allowed_after(prefix: bytes) -> set[str]:
        s = g.dfa.walk(0, prefix)
        assert s >= 0, prefix
        return {toy_vocab.token_bytes[i].decode("utf-8", "replace") for i in g.masks.allowed_ids(int(g.state_mask[s]))}

    assert '{"' in allowed_after(b"")
    assert '"a"' in allowed_after(b"{")  # the whole key fits
    assert '"b' not in allowed_after(b"{")  # "a" is required and comes first
    after_a = allowed_after(b'{"a":"x')
    assert '",' in after_a and '"}' in after_a and '"' in after_a
    after_b = allowed_after(b'{"a":"x","b":[{}')
    assert "}]" not in after_b  # '}]' needs a '}' first; here the array must close with ']'
    assert "]" in after_b and "," in after_b
    nested = allowed_after(b'{"a":"x","b":[{')
    assert "}" in nested and "}]" in nested  # '}' closes the item, ']' the array
    assert '",' not in allowed_after(b'{"a":"x","b":[')
    assert ids["<pad>"] not in g.masks.allowed_ids(int(g.state_mask[0]))


def test_partial_utf8_tokens_walk_byte_by_byte(toy_vocab: Vocabulary) -> None:
    g = compile_regex("é+", toy_vocab)
    lead, cont = toy_vocab.token_id(b"\xc3"), toy_vocab.token_id(b"\xa9")
    start = set(g.masks.allowed_ids(int(g.state_mask[0])).tolist())
    assert lead in start and cont not in start
    mid = g.dfa.walk(0, b"\xc3")
    assert set(g.masks.allowed_ids(int(g.state_mask[mid])).tolist()) == {cont}


def test_specials_never_allowed_eos_only_at_end(toy_vocab: Vocabulary) -> None:
    g = compile_regex("a*", toy_vocab)
    eos = toy_vocab.eos_ids[0]
    pad = toy_vocab.token_id("<pad>")
    for s in range(g.dfa.num_states):
        ids = set(g.masks.allowed_ids(int(g.state_mask[s])).tolist())
        assert pad not in ids
        assert (eos in ids) == bool(g.dfa.accepting[s])
    # padding ids beyond the token count are never allowed
    assert max(g.masks.allowed_ids(int(g.state_mask[0]))) < len(toy_vocab.token_bytes)


def test_long_counted_runs_share_masks(byte_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    # Unrolled into copies: byte tokens are 1 byte long, so every position but the last
    # few share a mask.
    monkeypatch.setattr(pipeline, "COUNTED_LOOPS", False)
    g = compile_json_schema({"type": "string", "maxLength": 400}, byte_vocab)
    assert g.dfa.num_states > 400 and g.dfa.counters is None
    assert g.masks.num_masks < 40
    # As a counted loop: the positions that share a mask share states too.
    monkeypatch.setattr(pipeline, "COUNTED_LOOPS", True)
    c = compile_json_schema({"type": "string", "maxLength": 400}, byte_vocab)
    assert c.dfa.counters is not None and c.dfa.num_states < 60
    assert c.masks.num_masks <= g.masks.num_masks


def test_dense_and_sparse_forms_round_trip(deepseek: Vocabulary) -> None:
    g = compile_json_schema({"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]}, deepseek)
    kinds = set(g.masks.kinds.tolist())
    assert 0 in kinds  # literal positions: short allow lists
    assert kinds & {1, 2}  # string interiors: nearly everything allowed
    for m in range(g.masks.num_masks):
        row = g.masks.dense_row(m)
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")[: deepseek.vocab_size]
        assert np.array_equal(np.flatnonzero(bits), g.masks.allowed_ids(m))


def test_real_vocab_matches_oracle_on_sampled_states(deepseek: Vocabulary) -> None:
    schema = {"type": "object", "properties": {"id": {"type": "integer", "minimum": 0}, "tag": {"enum": ["x", "y"]}, "note": {"type": "string", "maxLength": 4}}, "required": ["id", "tag"]}
    g = compile_json_schema(schema, deepseek)
    rng = np.random.default_rng(0)
    states = sorted(set(rng.integers(0, g.dfa.num_states, size=12).tolist()) | {0})
    for s in states:
        got = set(g.masks.allowed_ids(int(g.state_mask[s])).tolist())
        assert got == oracle(g.dfa, deepseek, s), f"state {s}"


def test_long_tokens_that_begin_alike_match_the_oracle(deepseek: Vocabulary) -> None:
    # DeepSeek's runs of spaces longer than 16 bytes share their first 16 (walked once for
    # all of them, then each on its own): the pattern takes up to 24 spaces, so the runs
    # past 24 die after that beginning; a free string takes every one
    schema = {"type": "object", "properties": {"p": {"type": "string", "pattern": "^ {0,24}$"},
                                               "s": {"type": "string"}}, "required": ["p"]}
    g = compile_json_schema(schema, deepseek)
    runs = [t for t, b in enumerate(deepseek.token_bytes) if len(b) > 16 and b == b" " * len(b)]
    assert any(len(deepseek.token_bytes[t]) <= 24 for t in runs) and any(len(deepseek.token_bytes[t]) > 24 for t in runs)
    allowed = []
    for s in range(g.dfa.num_states):
        if g.dfa.walk(s, b" " * 16) < 0:
            continue  # only the states where the runs get past their shared beginning
        got = set(g.masks.allowed_ids(int(g.state_mask[s])).tolist())
        assert got == oracle(g.dfa, deepseek, s), f"state {s}"
        allowed.append(sum(t in got for t in runs))
    assert max(allowed) == len(runs) and any(0 < a < len(runs) for a in allowed)


def test_termination_proof_rejects_a_trap_state() -> None:
    import numpy as np

    from maskc.compiler.dfa import Dfa
    from maskc.compiler.errors import NonTerminating
    from maskc.compiler.pipeline import prove_termination

    # 0 -a-> 1 (accepting), 0 -b-> 2 (trap: loops on b forever)
    bc = np.zeros(256, dtype=np.uint8)
    bc[ord("a")], bc[ord("b")] = 1, 2
    trans = np.array([[-1, 1, 2], [-1, -1, -1], [-1, -1, 2]], dtype=np.int32)
    with pytest.raises(NonTerminating) as e:
        prove_termination(Dfa(trans, bc, np.array([False, True, False])))
    assert e.value.witness == b"b"


def test_artifact_size_limit(toy_vocab: Vocabulary) -> None:
    import maskc
    from maskc.compiler.errors import SizeLimitExceeded
    from maskc.compiler.options import Limits

    with pytest.raises(SizeLimitExceeded):
        maskc.compile_json_schema({"type": "string"}, toy_vocab, options=CompileOptions(limits=Limits(max_artifact_bytes=100)))


def test_state_limit_is_a_clear_error(byte_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    import maskc
    from maskc.compiler.errors import StateLimitExceeded
    from maskc.compiler.options import Limits

    monkeypatch.setattr(pipeline, "COUNTED_LOOPS", False)  # 5,000 copies of a character
    with pytest.raises(StateLimitExceeded, match="DFA states"):
        maskc.compile_json_schema({"type": "string", "maxLength": 5000}, byte_vocab, options=CompileOptions(limits=Limits(max_states=1000)))


def test_limits_are_written_as_a_user_types_them() -> None:
    # whole numbers in full (a --max-states takes 2000000, not 2e+06), others in short
    from maskc.compiler.errors import StateLimitExceeded, TimeLimitExceeded

    e = StateLimitExceeded("NFA states", limit=2_000_000, got=51_000_300.0, pointer="/a")
    assert e.message == "NFA states exceeds the limit of 2000000 (got 51000300) (at /a)"
    short = TimeLimitExceeded("compile (s)", limit=0.05)
    assert short.message == "compile (s) exceeds the limit of 0.05"
    slow = TimeLimitExceeded("compile time (s)", limit=300.0, got=300.5)
    assert "limit of 300 (got 300.5)" in slow.message


def test_time_limit_is_enforced_in_every_stage(byte_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    import maskc
    from maskc.compiler.errors import TimeLimitExceeded
    from maskc.compiler.options import Limits

    # a pattern with a length bound, unrolled: products of sub-automata during lowering
    monkeypatch.setattr(pipeline, "COUNTED_LOOPS", False)
    schema = {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+[0-9]*$", "maxLength": 3000}}
    t0 = time.monotonic()
    with pytest.raises(TimeLimitExceeded, match="limit of 0.05"):
        maskc.compile_json_schema(schema, byte_vocab, options=CompileOptions(limits=Limits(max_seconds=0.05)))
    assert time.monotonic() - t0 < 5


def test_a_short_partition_handed_in_gives_the_same_masks(byte_vocab: Vocabulary) -> None:
    """align's short_blocks: the partition of SHORT_TOKEN refinement rounds, in any numbering,
    gives what align computes itself."""
    from maskc.compiler.align import SHORT_TOKEN, align
    from maskc.compiler.minimize import refine
    from maskc.compiler.pipeline import token_table

    # (states along the long common run: no string of 16 bytes or fewer tells most apart)
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 5},
                                               "b": {"enum": ["q" * 30 + "x", "q" * 30 + "y"]}}, "required": ["b"]}
    dfa = compile_json_schema(schema, byte_vocab).dfa
    table = token_table(byte_vocab)

    def masks(**kw: Any) -> list[bytes]:
        store: list[bytes] = []

        def add(mask: np.ndarray) -> int:
            store.append(mask.tobytes())
            return len(store) - 1

        ids = align(dfa, table, add_mask=add, free_order=True, **kw)
        return [store[i] for i in ids.tolist()]

    blocks = refine(dfa.trans, dfa.accepting.astype(np.int64), max_rounds=SHORT_TOKEN)
    assert 1 < int(blocks.max()) + 1 < dfa.num_states  # states some short token tells apart, and some not
    renumbered = (int(blocks.max()) - blocks) * 7 + 3
    assert masks(short_blocks=renumbered) == masks()


def test_states_keeping_an_eighth_of_the_tokens_walk_as_wide_states(deepseek: Vocabulary,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # Inside a string of letters, about a sixth of DeepSeek's tokens survive the first byte:
    # such states walk the trie as wide states do (sharing walks past the first byte), and
    # their masks are the oracle's.
    from maskc.compiler import align

    widths: list[float] = []
    original = align._short_allowed

    def short_allowed(dfa: Any, trie: Any, states: Any, *args: Any) -> Any:
        widths.extend((align._width(dfa, trie, states) / trie.num_tokens).tolist())
        return original(dfa, trie, states, *args)

    wide_walks: list[int] = []
    original_memo = align.walk_memo

    def walk_memo(*args: Any) -> Any:
        wide_walks.append(int(args[4].shape[0]))
        return original_memo(*args)

    monkeypatch.setattr(align, "_short_allowed", short_allowed)
    monkeypatch.setattr(align, "walk_memo", walk_memo)
    schema = {"type": "object", "required": ["w", "v"],
              "properties": {"w": {"type": "string", "pattern": "^[a-zA-Z]{2,}$"},
                             "v": {"type": "string", "pattern": "^[a-z0-9_]*$"}}}
    g = compile_json_schema(schema, deepseek)
    assert any(1 / 8 < w <= 1 / 4 for w in widths) and wide_walks
    for s in range(g.dfa.num_states):
        if g.dfa.walk(s, b"a") >= 0:  # the states inside the strings (and before them)
            got = set(g.masks.allowed_ids(int(g.state_mask[s])).tolist())
            assert got == oracle(g.dfa, deepseek, s), f"state {s}"
