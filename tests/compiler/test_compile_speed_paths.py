"""The fast paths of compile (trie walks, bitset subset construction, array searches,
memoized product operands) give exactly what the plain definitions give."""

from __future__ import annotations

import random

import numpy as np
import pytest

from maskc.compiler import dfa as dfa_mod
from maskc.compiler import minimize as minimize_mod
from maskc.compiler import trie as trie_mod
from maskc.compiler.dfa import DEAD, Dfa, coreachable, determinize, prune, reachable
from maskc.compiler.ir import Alt, ByteSet, Node, Product, Repeat, Seq
from maskc.compiler.minimize import canonical, minimize
from maskc.compiler.nfa import lower
from maskc.compiler.product import operand_dfa
from maskc.compiler.minimize import refine
from maskc.compiler.trie import (PairMemo, build_trie, byte_class_trie, class_trie, first_node, loop_region, sink_table,
                                 walk_dense, walk_loops, walk_memo, walk_sparse)


def _random_dfa(rng: random.Random, states: int, classes: int, fill: float) -> Dfa:
    trans = np.full((states, classes), DEAD, dtype=np.int32)
    for s in range(states):
        for c in range(classes):
            if rng.random() < fill:
                trans[s, c] = rng.randrange(states)
    byte_class = np.asarray([rng.randrange(classes) for _ in range(256)], dtype=np.uint8)
    byte_class[:classes] = np.arange(classes)  # every class used
    accepting = np.asarray([rng.random() < 0.3 for _ in range(states)], dtype=np.bool_)
    return Dfa(trans, byte_class, accepting)


def _random_tokens(rng: random.Random, n: int, alphabet: bytes, max_len: int) -> list[bytes]:
    out = [bytes([rng.choice(alphabet) for _ in range(rng.randint(1, max_len))]) for _ in range(n)]
    return out + out[:5]  # repeated byte strings (distinct ids with equal bytes)


def _trie_of(tokens: list[bytes]):  # type: ignore[no-untyped-def]
    flat = np.frombuffer(b"".join(tokens), dtype=np.uint8)
    lens = np.asarray([len(t) for t in tokens], dtype=np.int64)
    starts = np.cumsum(lens) - lens
    return build_trie(starts, lens, flat)


@pytest.mark.parametrize("seed", range(6))
def test_trie_walks_match_a_byte_by_byte_walk(seed: int) -> None:
    rng = random.Random(seed)
    d = _random_dfa(rng, states=rng.randint(1, 12), classes=rng.randint(1, 6), fill=rng.choice([0.4, 0.8, 1.0]))
    alphabet = bytes(rng.sample(range(256), 12))
    tokens = _random_tokens(rng, 300, alphabet, 6)
    trie = _trie_of(tokens)
    node_class = d.byte_class.astype(np.int64)[trie.byte]
    flat = sink_table(d.trans)
    states = np.arange(d.num_states, dtype=np.int64)
    want = np.asarray([[d.walk(s, t) >= 0 for t in tokens] for s in range(d.num_states)])
    ct = class_trie(trie, node_class, d.num_classes)
    for labelled in (byte_class_trie(trie, node_class), ct):
        sparse = walk_sparse(labelled, flat, d.num_classes, d.num_states, states)
        for s in range(d.num_states):
            assert sorted(sparse[s].tolist()) == np.flatnonzero(want[s]).tolist()
        assert np.array_equal(walk_dense(labelled, flat, d.num_classes, d.num_states, states), want)


@pytest.mark.parametrize("seed", range(16))
def test_memoized_walks_match_the_dense_walk(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Walks per (first node, successor) pair, kept across calls, give every state's row,
    whatever the number of whole-trie walks allowed (the rest are followed alone), on states
    that mostly share a successor (a looping string state with literal exits) and on
    unrelated ones; with successors replaced by representatives alike to the trie's depth;
    and after the memo outgrows its budget and starts over. (Half the seeds turn the dense
    walk's token-major table in blocks of a few rows, a last one shorter.)"""
    if seed % 4 >= 2:
        monkeypatch.setattr(trie_mod, "TRANSPOSE_ROWS", 7)
    rng = random.Random(seed)
    d = _random_dfa(rng, states=rng.randint(2, 12), classes=rng.randint(2, 6), fill=rng.choice([0.5, 1.0]))
    if seed % 2:  # many states whose byte steps mostly lead to one state, as keys inside a string do
        trans = np.array(d.trans)
        trans[:, :-1] = 0
        d = Dfa(trans, d.byte_class, d.accepting)
    alphabet = bytes(rng.sample(range(256), 12))
    tokens = sorted(_random_tokens(rng, 300, alphabet, 6), key=lambda t: t[0])  # grouped by first byte
    byte_trie = _trie_of(tokens)
    trie = class_trie(byte_trie, d.byte_class.astype(np.int64)[byte_trie.byte], d.num_classes)
    firsts = np.frombuffer(bytes(t[0] for t in tokens), dtype=np.uint8)
    blocks = np.searchsorted(firsts, np.arange(257), side="left").astype(np.int64)
    flat = sink_table(d.trans)
    states = np.arange(d.num_states, dtype=np.int64)
    want = np.asarray([[d.walk(s, t) >= 0 for t in tokens] for s in range(d.num_states)])
    assert np.array_equal(walk_dense(trie, flat, d.num_classes, d.num_states, states), want)
    block = refine(d.trans, d.accepting.astype(np.int64), max_rounds=5)  # tokens have at most 6 bytes
    rep = np.full(int(block.max()) + 1, -1, dtype=np.int64)
    rep[block[::-1]] = np.arange(d.num_states - 1, -1, -1)
    canons = [None, np.append(rep[block], d.num_states)]
    walks = 0
    for canon in canons:
        for max_walks in (0, 1, 3, 1 << 20):
            memo = PairMemo(trie, first_node(trie), blocks, canon)
            for _ in range(3):  # calls on overlapping batches: later ones read earlier walks
                part = np.asarray(sorted(rng.sample(range(d.num_states), rng.randint(1, d.num_states))), dtype=np.int64)
                got = walk_memo(trie, flat, d.num_classes, d.num_states, part, memo, max_walks)
                if got is not None:
                    walks += 1
                    assert np.array_equal(got, want[part]), max_walks
    memo = PairMemo(trie, first_node(trie), blocks, canons[1], budget=0)  # starts over on every call
    for _ in range(2):
        assert np.array_equal(walk_memo(trie, flat, d.num_classes, d.num_states, states, memo, 1 << 20), want)
    assert walks  # an unbounded number of walks always answers


@pytest.mark.parametrize("seed", range(6))
def test_loop_walk_matches_a_byte_by_byte_walk(seed: int) -> None:
    rng = random.Random(50 + seed)
    d = _random_dfa(rng, states=rng.randint(2, 10), classes=rng.randint(2, 6), fill=0.7)
    trans = np.array(d.trans)
    loop_classes = rng.sample(range(d.num_classes), rng.randint(1, d.num_classes - 1))
    looping = [0, 1]
    for s in looping:  # states 0 and 1 both loop on loop_classes
        trans[s, loop_classes] = s
    d = Dfa(trans, d.byte_class, d.accepting)
    tokens = _random_tokens(rng, 300, bytes(rng.sample(range(256), 10)), 6)
    trie = _trie_of(tokens)
    node_class = d.byte_class.astype(np.int64)[trie.byte]
    loops = np.zeros(d.num_classes, dtype=np.bool_)
    loops[loop_classes] = True
    plain = np.where(loops, 0, -1)[None, :].astype(np.int64)  # the loop as a one-state automaton
    for labelled in (byte_class_trie(trie, node_class), class_trie(trie, node_class, d.num_classes)):
        region = loop_region(labelled, plain)
        past = walk_loops(labelled, sink_table(d.trans), d.num_classes, d.num_states,
                          np.asarray(looping, dtype=np.int64)[:, None], region)
        for s, p in zip(looping, past):
            g = np.concatenate([region[2], p])
            assert sorted(g.tolist()) == [i for i, t in enumerate(tokens) if d.walk(s, t) >= 0]
            assert len(set(g.tolist())) == g.shape[0]


_CHARS = ["a", "b", "k", "x", "0", " ", "ä", "é", "中", "語", "😀", "ß"]


def _utf8_tokens(rng: random.Random, n: int) -> list[bytes]:
    """Tokens of JSON text: letters and multi-byte characters, quotes, punctuation, cut
    characters (a lone lead byte, a lone continuation byte) and broken ones (a lead byte
    followed by a letter or a quote, a continuation byte too many)."""
    extra = [b'"', b'",', b'":', b'{"', b'"}', b",", b"}", b"\\", b"\xe4", b"\xb8\xad", b"\xf0\x9f",
             b"\xe4a", b'\xc3"', b"\xe4\xb8a", b"a\xc3\xa4\xa4", b"\xf0\x9f\x98"]
    out = [t for t in extra]
    while len(out) < n:
        text = "".join(rng.choice(_CHARS) for _ in range(rng.randint(1, 4)))
        data = text.encode()
        if rng.random() < 0.15:
            data = data + rng.choice([b'"', b'",', b'":'])
        out.append(data)
    return out


def _string_dfa() -> Dfa:
    """The automaton of an object with three free string values (string interiors that loop
    on ASCII and take UTF-8 characters through states of their own)."""
    import maskc
    from maskc.compiler.pipeline import compile_source

    vocab = maskc.Vocabulary.from_tokens([c for c in "abkx0 {}\",:"] + ["<eos>"], eos="<eos>", name="chars")
    schema = {"type": "object", "properties": {k: {"type": "string"} for k in ("ab", "kx", "x")},
              "required": ["ab", "kx", "x"], "additionalProperties": False}
    return compile_source("json_schema", schema, vocab).dfa


def test_detour_walk_matches_a_byte_by_byte_walk() -> None:
    """String interiors walked over their loop and its UTF-8 detours (the tokens that stay
    inside, then each walk from the boundary on) allow exactly the tokens a byte-by-byte
    walk allows, on the byte trie and the class-merged one."""
    from maskc.compiler.align import _detours

    d = _string_dfa()
    a = int(d.byte_class[ord("a")])
    looping = [s for s in range(d.num_states) if int(d.trans[s, a]) == s]
    assert len(looping) >= 3  # one per string value
    got = _detours(d, looping)
    assert got is not None
    rel, places = got
    assert rel.shape[0] > 1  # a detour: the middle of a multi-byte character
    follow = [j for j in range(len(looping)) if places[j, 0] >= 0]
    assert len(follow) == len(looping)  # every string interior has the same detours
    rng = random.Random(5)
    tokens = _utf8_tokens(rng, 400)
    trie = _trie_of(tokens)
    node_class = d.byte_class.astype(np.int64)[trie.byte]
    for labelled in (byte_class_trie(trie, node_class), class_trie(trie, node_class, d.num_classes)):
        region = loop_region(labelled, rel)
        assert 0 < region[2].shape[0] < len(tokens)
        moved = walk_loops(labelled, sink_table(d.trans), d.num_classes, d.num_states, places, region)
        for j, s in enumerate(looping):
            allowed = np.concatenate([region[2], moved[j]]).tolist()
            assert len(set(allowed)) == len(allowed)
            assert sorted(allowed) == [i for i, t in enumerate(tokens) if d.walk(s, t) >= 0]


def test_detours_refuse_states_whose_detours_differ() -> None:
    """A looping state whose multi-byte detour leads elsewhere than the first state's is not
    given the first one's places (it is walked node by node)."""
    from maskc.compiler.align import _detours

    d = _string_dfa()
    a = int(d.byte_class[ord("a")])
    looping = [s for s in range(d.num_states) if int(d.trans[s, a]) == s]
    trans = np.array(d.trans)
    lead = int(d.byte_class[0xC3])  # the lead byte of "ä"
    mid = int(trans[looping[1], lead])
    cont = int(d.byte_class[0xA4])
    trans = np.vstack([trans, trans[mid]])  # a copy of the detour state that returns elsewhere
    trans[-1, cont] = looping[2]
    trans[looping[1], lead] = trans.shape[0] - 1
    changed = Dfa(trans.astype(np.int32), d.byte_class, np.append(d.accepting, False))
    got = _detours(changed, looping)
    assert got is not None
    _, places = got
    assert places[0, 0] == looping[0] and places[2, 0] == looping[2]
    assert (places[1] == -1).all()


def test_trie_shares_prefixes_and_keeps_every_token() -> None:
    trie = _trie_of([b"ab", b"abc", b"a", b"b", b"ab"])
    assert trie.num_nodes == 4  # a, b, ab, abc
    ends = [bytes(_spell(trie, int(n))) for n in trie.end]
    assert ends == [b"ab", b"abc", b"a", b"b", b"ab"]


@pytest.mark.parametrize("seed", range(6))
def test_a_trie_built_at_once_is_the_level_by_level_one(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Few deep tokens are numbered at once (:data:`~maskc.compiler.trie.FEW_DEEP_CELLS`),
    many level by level: the same trie, array for array, whatever the tokens (byte 0 among
    them, which a token's end must not be taken for; prefixes of one another; repeats)."""
    rng = random.Random(300 + seed)
    alphabet = [0, 1, 2, 255][: rng.randint(1, 4)]
    tokens = [bytes(rng.choice(alphabet) for _ in range(rng.randint(1, rng.choice([3, 9, 40]))))
              for _ in range(rng.randint(1, 80))]
    tokens += rng.sample(tokens, min(3, len(tokens)))  # (repeats)
    at_once = _trie_of(tokens)
    monkeypatch.setattr(trie_mod, "FEW_DEEP_CELLS", 0)
    by_level = _trie_of(tokens)
    for field in ("byte", "parent", "level", "child_start", "end", "tok_order", "tok_start", "first_count"):
        a, b = getattr(at_once, field), getattr(by_level, field)
        assert a.dtype == b.dtype and np.array_equal(a, b), field
    assert [bytes(_spell(at_once, int(n))) for n in at_once.end] == tokens


@pytest.mark.parametrize("at_once", [True, False])
def test_a_trie_indexes_each_nodes_children_and_tokens(at_once: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """``child_start`` holds exactly each node's children (the root's before node 0's),
    ``tok_order``/``tok_start`` exactly the tokens ending at each node, in id order, built
    at once and level by level, with tokens of equal bytes (ordered by a sort) and without
    (placed by counting)."""
    if not at_once:
        monkeypatch.setattr(trie_mod, "FEW_DEEP_CELLS", 0)
    rng = random.Random(77)
    for repeats in (0, 3):
        tokens = list({bytes(rng.choice(b"\x00ab") for _ in range(rng.randint(1, 5))) for _ in range(60)})
        tokens += tokens[:repeats]
        trie = _trie_of(tokens)
        parent = trie.parent.tolist()
        roots = [v for v in range(trie.num_nodes) if parent[v] == -1]
        assert trie.child_start[0] == len(roots) == roots[-1] + 1
        for v in range(trie.num_nodes):
            kids = list(range(int(trie.child_start[v]), int(trie.child_start[v + 1])))
            assert kids == [c for c in range(trie.num_nodes) if parent[c] == v]
            ends = trie.tok_order[trie.tok_start[v] : trie.tok_start[v + 1]].tolist()
            assert ends == [i for i in range(len(tokens)) if trie.end[i] == v]
        assert trie.tok_start[-1] == len(tokens) and trie.child_start[-1] == trie.num_nodes


def _spell(trie, node: int) -> bytes:  # type: ignore[no-untyped-def]
    out = bytearray()
    while node >= 0:
        out.append(int(trie.byte[node]))
        node = int(trie.parent[node])
    return bytes(reversed(out))


@pytest.mark.parametrize("seed", range(8))
def test_searches_agree_on_small_and_large_tables(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(100 + seed)
    d = _random_dfa(rng, states=rng.randint(2, 40), classes=rng.randint(1, 5), fill=rng.choice([0.2, 0.5]))
    small = (coreachable(d.trans, d.accepting), reachable(d.trans), canonical(d))
    monkeypatch.setattr(dfa_mod, "SMALL_TABLE", -1)
    monkeypatch.setattr(minimize_mod, "SMALL_TABLE", -1)
    large = (coreachable(d.trans, d.accepting), reachable(d.trans), canonical(d))
    assert np.array_equal(small[0], large[0])
    assert np.array_equal(small[1], large[1])
    assert np.array_equal(small[2].trans, large[2].trans)
    assert np.array_equal(small[2].accepting, large[2].accepting)


def _lit(text: bytes) -> Seq:
    return Seq(tuple(ByteSet(((b, b),)) for b in text))


def test_subset_construction_keeps_the_language() -> None:
    digit = ByteSet(((0x30, 0x39),))
    node = Alt((Seq((Repeat(digit, 1, 3), _lit(b"x"))), Seq((Repeat(ByteSet(((0x30, 0x35),)), 0, None), _lit(b"xy")))))
    d = determinize(lower(node))
    for text, ok in [(b"1x", True), (b"123x", True), (b"1234x", False), (b"xy", True), (b"555xy", True),
                     (b"9xy", False), (b"", False), (b"12", False)]:
        assert d.accepts(text) == ok, text


def test_product_operands_are_memoized_and_exact() -> None:
    key = Repeat(ByteSet(((0x61, 0x63),)), 1, 4)
    names = Alt((_lit(b"ab"), _lit(b"ca")))
    node = Product(key, names, "minus")
    a1 = operand_dfa(key, max_states=1000, deadline=None)
    assert operand_dfa(key, max_states=1000, deadline=None) is a1
    d = minimize(prune(determinize(lower(node))))
    for text, ok in [(b"a", True), (b"ab", False), (b"ca", False), (b"abc", True), (b"abcab", False), (b"", False)]:
        assert d.accepts(text) == ok, text
    empty = operand_dfa(Product(names, _lit(b"zz"), "and"), max_states=1000, deadline=None)
    assert not empty.accepting.any()


def test_equal_operands_share_one_dfa() -> None:
    """A ``$ref`` expanded at many places builds equal subtrees that are distinct objects:
    the operand cache answers by value, so the second is not built again."""
    def key() -> Repeat:
        return Repeat(ByteSet(((0x61, 0x63),)), 2, 5)

    first, second = key(), key()
    assert first is not second and first == second
    d = operand_dfa(first, max_states=1000, deadline=None)
    assert operand_dfa(second, max_states=1000, deadline=None) is d
    longer = operand_dfa(Repeat(ByteSet(((0x61, 0x63),)), 2, 6), max_states=1000, deadline=None)
    assert longer is not d
    assert _dfa_accepts(longer, b"abcabc") and _dfa_accepts(d, b"abcab")
    assert not _dfa_accepts(d, b"abcabc")


def test_the_operand_cache_keeps_to_its_cell_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    from collections import OrderedDict

    from maskc.compiler import product as product_mod

    monkeypatch.setattr(product_mod, "_cache", OrderedDict())
    monkeypatch.setattr(product_mod, "_cells", [0])
    monkeypatch.setattr(product_mod, "_CACHE_CELLS", 300)
    nodes = [Repeat(ByteSet(((0x61, 0x62),)), n, n) for n in range(1, 30)]
    built = [operand_dfa(x, max_states=1000, deadline=None) for x in nodes]
    kept = product_mod._cache
    assert product_mod._cells[0] == sum(d.trans.size for d in kept.values()) <= 300
    assert nodes[-1] in kept and nodes[0] not in kept  # the least recently used left first
    assert list(kept) == nodes[-len(kept):]
    assert operand_dfa(nodes[-1], max_states=1000, deadline=None) is built[-1]
    again = operand_dfa(Repeat(ByteSet(((0x61, 0x62),)), 1, 1), max_states=1000, deadline=None)
    assert again is not built[0] and _dfa_accepts(again, b"a") and not _dfa_accepts(again, b"ab")


def test_item_facts_are_read_once_per_equal_item(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every lowering of a subtree asks about the repeats inside it again: an item's
    shortest length and last bytes are read once, whatever object holds the item."""
    from maskc.compiler import nfa as nfa_mod

    nfa_mod._shortest_item.cache_clear()
    nfa_mod._item_last_bytes.cache_clear()
    walks: list[str] = []  # (walks of a whole item: last_bytes reads its parts' lengths too)
    real_min, real_last = nfa_mod.min_bytes, nfa_mod.last_bytes

    def min_bytes(n: Node, budget: int = 10_000) -> int:
        walks.extend(["min"] if isinstance(n, Seq) else [])
        return real_min(n, budget)

    def last_bytes(n: Node, budget: int = 10_000) -> bytes:
        walks.append("last")
        return real_last(n, budget)

    monkeypatch.setattr(nfa_mod, "min_bytes", min_bytes)
    monkeypatch.setattr(nfa_mod, "last_bytes", last_bytes)

    def item() -> Seq:  # a letter, then a digit: 2 bytes, ending on a digit
        return Seq((ByteSet(((0x61, 0x7A),)), ByteSet(((0x30, 0x39),))))

    assert [nfa_mod._widest_gap(item(), 16) for _ in range(3)] == [1 + 1 + 15 // 2] * 3
    assert walks == ["min"]
    asked: list[bytes] = []

    def reach(last: bytes, shortest: int) -> int:
        asked.append(last)
        return 3

    with nfa_mod.item_reach(reach):
        assert [nfa_mod._widest_gap(item(), 16) for _ in range(3)] == [1 + 3] * 3
    assert asked == [b"0123456789"] * 3 and walks == ["min", "last"]


def _dfa_accepts(d: Dfa, data: bytes) -> bool:
    s = d.walk(0, data)
    return s >= 0 and bool(d.accepting[s])


@pytest.mark.parametrize("lo, hi", [(0, 9), (3, 12), (2, None), (10, None)])
def test_long_repetitions_lower_each_copy_from_the_item_dfa(lo: int, hi: int | None) -> None:
    # An item with overlapping alternatives: its Thompson NFA is not deterministic.
    item = Alt((Seq((ByteSet(((0x61, 0x61),)), ByteSet(((0x62, 0x62),)))),
                Seq((ByteSet(((0x61, 0x61),)), ByteSet(((0x63, 0x63),)))),
                ByteSet(((0x61, 0x61),))))
    node = Repeat(item, lo, hi)
    got = minimize(prune(determinize(lower(node))))
    words = [b"ab", b"ac", b"a"]
    rng = random.Random(lo * 31 + (hi or 0))
    for _ in range(300):
        n = rng.randint(0, (hi or lo + 4) + 2)
        text = b"".join(rng.choice(words) for _ in range(n))
        # the language: some split of the text into lo..hi items
        reach = {0: {0}}
        for i in range(1, len(text) + 1):
            reach[i] = {c + 1 for w in words if text[:i].endswith(w) and i - len(w) in reach
                        for c in reach[i - len(w)]}
        counts = reach[len(text)]
        want = any(c >= lo and (hi is None or c <= hi) for c in counts)
        assert _dfa_accepts(got, text) == want, text
    # Built from the item's minimal DFA, a bounded run needs no minimization to be small:
    # the raw subset construction has at most one state per copy and item state, plus one.
    if hi is not None:
        raw = prune(determinize(lower(node)))
        assert raw.num_states <= hi * operand_dfa(item, max_states=100, deadline=None).num_states + 1


def test_a_long_max_length_compiles_to_the_minimal_chain() -> None:
    from tests.helpers import schema_dfa

    short, long_ = schema_dfa({"type": "string", "maxLength": 20}), schema_dfa({"type": "string", "maxLength": 300})
    per_char = (short.num_states - schema_dfa({"type": "string", "maxLength": 19}).num_states)
    assert long_.num_states == short.num_states + 280 * per_char  # linear: no copies left unmerged
    assert _dfa_accepts(long_, ('"' + "é" * 300 + '"').encode())
    assert not _dfa_accepts(long_, ('"' + "\\n" * 301 + '"').encode())


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("dense_cells,chunk,small", [
    (0, minimize_mod._CHUNK_CELLS, False), (0, 7, False), (minimize_mod.DENSE_HASH_CELLS, 7, False),
    (0, minimize_mod._CHUNK_CELLS, True), (minimize_mod.DENSE_HASH_CELLS, 7, True)],
    ids=["sparse", "sparse-chunked", "dense", "small-rounds", "small-rounds-dense"])
def test_incremental_refinement_matches_full_moore_rounds(seed: int, dense_cells: int, chunk: int, small: bool,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # (both ways of hashing a round's rows: over the live transitions, in one pass or in
    # chunks of a few transitions (the table read in chunks of rows too), and whole rows;
    # a round's grouping in arrays, or in Python for a few dirty states, whose rows are
    # then hashed whole)
    monkeypatch.setattr(minimize_mod, "DENSE_HASH_CELLS", dense_cells)
    monkeypatch.setattr(minimize_mod, "_CHUNK_CELLS", chunk)
    monkeypatch.setattr(minimize_mod, "SMALL_ROUND", 64 if small else 0)
    monkeypatch.setattr(minimize_mod, "SMALL_ROUND_CELLS", 1 << 14 if small else 0)
    rng = random.Random(seed)
    for _ in range(60):
        d = _random_dfa(rng, rng.randint(1, 50), rng.randint(1, 5), rng.choice([0.3, 0.6, 0.9]))
        init, _ = minimize_mod.row_ids(d.accepting.astype(np.int64).reshape(-1, 1))
        for rounds in (None, 1, 2, 4, 50):
            full, full_stable = minimize_mod._rounds(d.trans, init, rounds, None)
            got, got_stable = minimize_mod._incremental_rounds(d.trans, init, rounds, None)
            pairs = set(zip(full.tolist(), got.tolist()))
            assert len(pairs) == len(set(full.tolist())) == len(set(got.tolist()))  # the same partition
            if rounds is None:
                assert full_stable and got_stable


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("dense_cells", [0, minimize_mod.DENSE_HASH_CELLS], ids=["sparse", "dense"])
@pytest.mark.parametrize("small", [0, 64], ids=["array-rounds", "small-rounds"])
@pytest.mark.parametrize("chunk", [3, minimize_mod._CHUNK_CELLS], ids=["chunks-of-3", "one-chunk"])
def test_refinement_stays_exact_when_signatures_collide(seed: int, dense_cells: int, small: int,
                                                        chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Multipliers of 1 make a signature the sum of the successors' blocks: rows such as
    # (0, 2) and (1, 1) collide, the hashed rounds merge states they should not, and the
    # congruence check must catch it and rerun exactly (over the transitions in chunks, or
    # all at once).
    monkeypatch.setattr(minimize_mod, "_MULT", np.ones_like(minimize_mod._MULT))
    monkeypatch.setattr(minimize_mod, "_CHUNK_CELLS", chunk)
    monkeypatch.setattr(minimize_mod, "DENSE_HASH_CELLS", dense_cells)
    monkeypatch.setattr(minimize_mod, "SMALL_ROUND", small)
    exact = minimize_mod._rounds
    reruns: list[int] = []
    monkeypatch.setattr(minimize_mod, "_rounds", lambda *a: reruns.append(1) or exact(*a))
    rng = random.Random(100 + seed)
    caught = 0
    for _ in range(80):
        d = _random_dfa(rng, rng.randint(2, 40), rng.randint(2, 5), rng.choice([0.6, 0.9]))
        init, _ = minimize_mod.row_ids(d.accepting.astype(np.int64).reshape(-1, 1))
        full, _ = exact(d.trans, init, None, None)
        got, stable = minimize_mod._incremental_rounds(d.trans, init, None, None)
        assert stable and len(set(zip(full.tolist(), got.tolist()))) == len(set(full.tolist())) == len(set(got.tolist()))
        ls, lc = np.nonzero(d.trans >= 0)
        out = np.zeros(d.num_states + 1, dtype=np.int64)
        np.cumsum(np.bincount(ls, minlength=d.num_states), out=out[1:])
        coarse = np.zeros(d.num_states, dtype=np.int64)  # one block: a congruence only if all rows agree
        caught += not minimize_mod._is_congruence(coarse, init, out, lc.astype(np.int64),
                                                  d.trans[ls, lc].astype(np.int64))
    assert reruns  # some collision was caught and refined exactly
    assert caught  # the check rejects a partition that is not a congruence


def test_a_long_enum_shares_suffixes_before_minimization() -> None:
    words = [f"{a:03d}-{b:03d}".encode() for a in range(5, 8) for b in range(40)]
    node = Alt(tuple(Seq(tuple(ByteSet(((x, x),)) for x in w)) for w in words))
    raw = prune(determinize(lower(Seq((node, ByteSet(((0x21, 0x21),)))))))
    assert raw.num_states == minimize(raw).num_states  # lowered from the enum's minimal DFA
    assert all(_dfa_accepts(raw, w + b"!") for w in words)
    assert not _dfa_accepts(raw, b"008-000!") and not _dfa_accepts(raw, b"005-040!")


def test_the_merged_trie_is_built_once_per_byte_classes() -> None:
    import maskc
    from maskc.compiler.pipeline import token_table
    from maskc.compiler.vocab import byte_tokenizer

    vocab = byte_tokenizer()
    table = token_table(vocab)
    props = {k: {"type": "string", "maxLength": 3} for k in "abcdefgh"}
    schema = {"type": "object", "properties": props, "additionalProperties": False}
    first = maskc.compile_json_schema(schema, vocab)
    cached = dict(table.class_tries())
    assert cached  # many wide states: the walks ran over the merged trie, kept for the next compile
    again = maskc.compile_json_schema(schema, vocab)
    assert first.to_bytes() == again.to_bytes()
    assert all(table.class_tries()[k] is v for k, v in cached.items())  # reused, not rebuilt


def test_a_loop_region_is_kept_by_its_bytes_across_grammars(monkeypatch: pytest.MonkeyPatch) -> None:
    """A string's interior is the same loop on the same bytes in grammars whose byte classes
    differ: its region of the byte trie is built by the first alignment that meets it and read
    by the later ones, with the artifacts of compiles that keep nothing."""
    import maskc
    from maskc.compiler import align as align_mod
    from maskc.compiler.pipeline import token_table

    words = ["ab", "abc", "xy", "xyz", "k", "hello", "world", " the", "a b", "zz", "q", "12", "3"]
    chars = [chr(c) for c in range(0x20, 0x7F) if chr(c) not in words]

    def vocab() -> maskc.Vocabulary:
        return maskc.Vocabulary.from_tokens(chars + words + ['{"', '":"', '"}', '","', "<eos>"], eos="<eos>",
                                            name="loops")

    schemas = [
        {"type": "object", "properties": {"ab": {"type": "string"}}, "required": ["ab"], "additionalProperties": False},
        {"type": "object", "properties": {"xyz": {"type": "string"}, "k": {"type": "string"}},
         "required": ["xyz", "k"], "additionalProperties": False},
    ]
    built: list[int] = []
    real = align_mod.loop_region
    monkeypatch.setattr(align_mod, "loop_region", lambda *a: built.append(1) or real(*a))
    v = vocab()
    kept = []
    for schema in schemas:
        before = len(built)
        kept.append(maskc.compile_json_schema(schema, v).to_bytes())
        if schema is schemas[0]:
            assert len(built) > before  # the first grammar builds the string's region
        else:
            assert len(built) == before  # other byte classes, the same loop on bytes: read back
    assert token_table(v).loop_regions()
    monkeypatch.setattr(align_mod, "LOOP_REGIONS", 0)  # a table that keeps nothing
    w = vocab()
    fresh = [maskc.compile_json_schema(schema, w).to_bytes() for schema in schemas]
    assert not token_table(w).loop_regions()
    assert fresh == kept


@pytest.mark.parametrize("radix_keys", [None, 100])
@pytest.mark.parametrize("seed", range(8))
def test_unique_by_marking_matches_numpy_unique(seed: int, radix_keys: int | None,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The class trie's per-level grouping (a marked table when the key range is short, a
    sort in 16-bit digits up to 2**32 and ``RADIX_KEYS`` keys, numpy's sort past that) gives
    numpy's sorted keys and inverse on every path."""
    from maskc.compiler.trie import unique_inverse

    if radix_keys is not None:
        monkeypatch.setattr(trie_mod, "RADIX_KEYS", radix_keys)

    rng = np.random.default_rng(seed)
    for n, bound in ((0, 5), (1, 1), (50, 60), (5000, 20000), (0, 1 << 20), (200, 10**6), (3000, 40000),
                     (3000, 1 << 32), (100, 1 << 40)):
        key = rng.integers(0, bound, size=n).astype(np.int64)
        uniq, inv = unique_inverse(key, bound)
        want_u, want_i = np.unique(key, return_inverse=True)
        assert uniq.tolist() == want_u.tolist()
        assert inv.tolist() == want_i.reshape(-1).tolist()


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
def test_sorted_unique_matches_numpy_unique(dtype: type) -> None:
    """The one-sort distinct values give numpy's sorted values and dtype, empty and single
    arrays included, and never return the caller's array itself."""
    from maskc.compiler.dfa import sorted_unique

    rng = np.random.default_rng(7)
    for n, bound in ((0, 5), (1, 3), (2, 1), (50, 60), (3000, 100), (20000, 250), (30, 2000), (200, 250)):
        ids = rng.integers(0, bound, size=n).astype(dtype)
        want = np.unique(ids)
        # without a bound (one sort), and with one: marked in a table where the ids are many
        for got in (sorted_unique(ids), sorted_unique(ids, bound)):
            assert got.dtype == want.dtype
            assert got.tolist() == want.tolist()
            assert not np.shares_memory(got, ids) or n == 0


@pytest.mark.parametrize("seed", range(8))
def test_long_sequence_walks_memoized_across_batches_match_a_byte_by_byte_walk(seed: int) -> None:
    """Long tokens' sequences walked once per (first class, representative of the state it
    leads to), kept across batches of states, give each state exactly the tokens whose bytes
    it can walk: from a fresh memo, from one filled by earlier batches, with and without
    representatives (states alike up to the longest token share one walk), and from one
    filled ahead for every state."""
    from maskc.compiler.align import _batch_allowed, _SeqMemo
    from maskc.compiler.pipeline import token_table
    from maskc.compiler.vocab import Vocabulary

    rng = random.Random(300 + seed)
    d = _random_dfa(rng, states=rng.randint(3, 24), classes=rng.randint(2, 5), fill=rng.choice([0.6, 0.9]))
    if seed % 2:  # states that mostly step to one looping state, as keys inside a string do
        trans = np.array(d.trans)
        trans[:, :-1] = 0
        d = Dfa(trans, d.byte_class, d.accepting)
    alphabet = bytes(range(8))
    tokens = sorted({bytes(rng.choice(alphabet) for _ in range(rng.randint(17, 30))) for _ in range(200)})
    vocab = Vocabulary.from_tokens([*tokens, "<eos>"], eos="<eos>", name="long", vocab_size=len(tokens) + 1)
    seqs = token_table(vocab).long_sequences(d.byte_class, d.num_classes)
    assert seqs.lengths.size
    want = [{t for t, b in enumerate(tokens) if d.walk(s, b) >= 0} for s in range(d.num_states)]
    block = refine(d.trans, d.accepting.astype(np.int64), max_rounds=30)
    rep = np.full(int(block.max()) + 1, -1, dtype=np.int64)
    rep[block[::-1]] = np.arange(d.num_states - 1, -1, -1)
    for canon in (np.append(np.arange(d.num_states), -1), np.append(rep[block], -1)):
        memo = _SeqMemo(canon)
        for budget in (1 << 21, 7, 1):
            part = np.asarray(rng.sample(range(d.num_states), rng.randint(1, d.num_states)), dtype=np.int64)
            got = _batch_allowed(d, seqs, part, memo, budget=budget)
            for s, g in zip(part.tolist(), got):
                assert {int(t) for t in seqs.token_ids[np.isin(seqs.token_seq, g)]} == want[s], s
    memo = _SeqMemo(np.append(rep[block], -1), budget=0)  # starts over on every call
    for _ in range(2):
        got = _batch_allowed(d, seqs, np.arange(d.num_states, dtype=np.int64), memo)
        for s, g in enumerate(got):
            assert {int(t) for t in seqs.token_ids[np.isin(seqs.token_seq, g)]} == want[s], s
    # walked ahead for every state (nothing read), then read back batch by batch: no new walk
    memo = _SeqMemo(np.append(rep[block], -1))
    assert _batch_allowed(d, seqs, np.arange(d.num_states, dtype=np.int64), memo, read=False) == []
    walked = memo.pairs
    for s in rng.sample(range(d.num_states), d.num_states):
        (g,) = _batch_allowed(d, seqs, np.asarray([s], dtype=np.int64), memo)
        assert {int(t) for t in seqs.token_ids[np.isin(seqs.token_seq, g)]} == want[s], s
    assert memo.pairs == walked


@pytest.mark.parametrize("seed", range(6))
def test_overlapping_spans_are_cut_into_the_same_row(seed: int) -> None:
    """``_disjoint`` (a subset's moves, grouped per target or per range before cutting) gives
    every class the union of the targets of the spans over it, in class order, with no two
    neighbouring pieces of one union left apart where a single target's spans meet; on spans
    whose targets repeat (grouped per target) and spans whose targets hardly do (per range,
    some on equal ranges, some with a target twice)."""
    rng = random.Random(seed)
    kinds = set()
    for case in range(40):
        n = rng.randint(2, 60)
        distinct = case % 2 == 1
        pool = [frozenset(rng.sample(range(40), rng.randint(1, 4)))
                for _ in range(n if distinct else rng.randint(1, 8))]
        ranges = [(lo, rng.randint(lo + 1, 31)) for lo in (rng.randrange(30) for _ in range(rng.randint(1, 6)))]
        spans = []
        for _ in range(n):
            if rng.random() < 0.5:
                lo, hi = rng.choice(ranges)  # (equal ranges, as a wide union's small targets have)
            else:
                lo = rng.randrange(30)
                hi = rng.randint(lo + 1, 31)
            spans.append((lo, hi, rng.choice(pool)))
        sample = sorted(spans, key=lambda x: x[0])  # (what _disjoint reads to choose)
        sample = sample[::4] if len(sample) > 32 else sample
        kinds.add(2 * len({ts for _, _, ts in sample}) > len(sample))
        got = dfa_mod._disjoint(spans)
        want: dict[int, frozenset[int]] = {}
        for lo, hi, ts in spans:
            for c in range(lo, hi):
                want[c] = want.get(c, frozenset()) | ts
        seen: dict[int, frozenset[int]] = {}
        for lo, hi, ts in got:
            assert lo < hi
            for c in range(lo, hi):
                assert c not in seen
                seen[c] = ts
        assert seen == want
        assert [lo for lo, _, _ in got] == sorted(lo for lo, _, _ in got)
    assert kinds == {True, False}
    # a cut inside one target's merged spans that no other span meets is not kept
    one = frozenset([1, 2])
    assert dfa_mod._disjoint([(0, 4, one), (2, 8, one), (8, 9, one), (5, 6, one)]) == [(0, 9, one)]
    # targets on the same ranges are cut only where the ranges end
    a, b, c = frozenset([1]), frozenset([2]), frozenset([3])
    assert dfa_mod._disjoint([(0, 4, a), (0, 4, b), (2, 6, c)]) == [(0, 2, a | b), (2, 4, a | b | c), (4, 6, c)]


def test_an_automaton_leaf_is_added_in_one_block_of_states() -> None:
    """``Nfa.add_block``: an automaton leaf's states are numbered in one block, its language
    kept, and the NFA bound still refuses a leaf that would pass it."""
    from maskc.compiler.errors import StateLimitExceeded
    from maskc.compiler.ir import Automaton

    # a{2,}b | c: states 0 -a-> 1 -a-> 2 (-a-> 2) -b-> 3 (accepting); 0 -c-> 3
    auto = Automaton((((0x61, 0x61, 1), (0x63, 0x63, 3)), ((0x61, 0x61, 2),), ((0x61, 0x61, 2), (0x62, 0x62, 3)), ()),
                     frozenset({3}))
    d = minimize(prune(determinize(lower(Seq((ByteSet(((0x78, 0x78),)), auto))))))
    for text, ok in [(b"xaab", True), (b"xaaaab", True), (b"xc", True), (b"xab", False), (b"aab", False), (b"x", False)]:
        assert d.accepts(text) == ok, text
    assert lower(auto, max_states=6).size == 6  # the start, the end and the leaf's 4 states
    with pytest.raises(StateLimitExceeded):
        lower(auto, max_states=5)


@pytest.mark.parametrize("seed", range(6))
def test_copies_of_an_automaton_share_its_rows(seed: int) -> None:
    """``Nfa.add_block``: every copy of an automaton leaf (the copies of a long repetition,
    a long enum, a rule's product) moves on the leaf's own rows, shifted to its block; the
    subset construction reads them as it reads edges copied state by state (the same table,
    numbered alike), and lowering by the rules (which consumes the edges) leaves the leaf's
    rows as they were."""
    from maskc.compiler.dfa import determinize_rules
    from maskc.compiler.nfa import Nfa, lower_rules

    rng = random.Random(seed)
    words = [bytes(rng.choice(b"abcd") for _ in range(rng.randint(1, 3))) for _ in range(20)]
    enum = Alt(tuple(_lit(w) for w in words))
    item = _small_language(rng)
    node = Seq((Repeat(item, rng.randint(0, 3), rng.randint(9, 14)), enum,
                Repeat(Alt((_lit(b"ab"), _lit(b"c"))), 8, None), _lit(b"z")))
    nfa = lower(node)
    assert nfa.blocks and len(nfa.shift) > len(nfa.blocks)
    shift = [nfa.shift[s] if s < len(nfa.shift) else 0 for s in range(nfa.size)]
    flat = Nfa(eps=[list(e) for e in nfa.eps], final=nfa.final,
               edges=[[(lo, hi, t + shift[s]) for lo, hi, t in out]
                      for s, out in enumerate(nfa.edges)])
    got, want = determinize(nfa), determinize(flat)
    assert np.array_equal(got.trans, want.trans) and np.array_equal(got.accepting, want.accepting)
    assert np.array_equal(got.byte_class, want.byte_class)
    rows = {id(r): r for r in nfa.blocks.values()}
    before = {k: [list(row) for row in r] for k, r in rows.items()}
    rules = lower_rules([("root", node), ("other", Seq((enum, enum)))])
    kept = {k: [list(row) for row in r] for k, r in rules.blocks.items()}
    trans, byte_class, accepting, starts = determinize_rules(rules)
    assert all(not out for out in rules.edges)  # (consumed)
    assert {k: [list(row) for row in r] for k, r in rules.blocks.items()} == kept
    assert {k: [list(row) for row in r] for k, r in rows.items()} == before
    # the root rule's automaton has the language of the lowering above: pairs of states
    # reached on the same bytes agree on acceptance
    seen = {(0, starts[0])}
    todo = [(0, starts[0])]
    while todo:
        a, b = todo.pop()
        assert bool(got.accepting[a]) == bool(accepting[b])
        for byte in range(256):
            na, nb = got.trans[a, got.byte_class[byte]], trans[b, byte_class[byte]]
            assert (na < 0) == (nb < 0)
            if na >= 0 and nb >= 0 and (int(na), int(nb)) not in seen:
                seen.add((int(na), int(nb)))
                todo.append((int(na), int(nb)))


@pytest.mark.parametrize("seed", range(8))
def test_live_states_in_one_search_are_those_of_rounds(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pda._live`` in one backward search (a rule's calls joining it once its start is
    live) finds the states and rules of rounds of whole searches, on random tables with byte
    and call columns (views of one table, as the pushdown build passes them)."""
    from maskc.compiler import pda as pda_mod

    monkeypatch.setattr(pda_mod, "SMALL_TABLE", -1)
    rng = np.random.default_rng(seed)
    rounds = set()
    for _ in range(40):
        n, c, r = int(rng.integers(1, 300)), int(rng.integers(1, 6)), int(rng.integers(1, 8))
        byte = np.where(rng.random((n, c)) < rng.random() * 0.5, rng.integers(0, n, (n, c)), DEAD)
        call = np.where(rng.random((n, r)) < rng.random() * 0.3, rng.integers(0, n, (n, r)), DEAD)
        full = np.concatenate([byte, call], axis=1).astype(np.int32)
        accepting = rng.random(n) < 0.05
        starts = [int(x) for x in rng.integers(0, n, r)]
        live, productive = pda_mod._live(full[:, :c], full[:, c:], accepting, starts)
        want_live, want_productive = pda_mod._live_rounds(full[:, :c], full[:, c:], accepting, starts)
        assert np.array_equal(live, want_live) and np.array_equal(productive, want_productive)
        # how many rounds the reference took: rules found productive only through others
        found = np.zeros(r, dtype=np.bool_)
        k = 0
        while True:
            usable = np.where(found[None, :], full[:, c:], DEAD).astype(np.int32)
            now = coreachable(np.concatenate([full[:, :c], usable], axis=1), accepting)[starts]
            if np.array_equal(now, found):
                break
            found, k = now, k + 1
        rounds.add(min(k, 3))
    assert {2, 3} <= rounds  # (some tables need rules found productive in later rounds)


def _small_language(rng: random.Random) -> Alt | Repeat | Seq:
    """A random small language of short literals over a, b, c: their union, a repetition of
    it (bounded or not), or their sequence."""
    parts = [_lit(bytes(rng.choice(b"abc") for _ in range(rng.randint(1, 2)))) for _ in range(rng.randint(1, 3))]
    pick = rng.randrange(3)
    if pick == 0:
        return Alt(tuple(parts))
    if pick == 1:
        return Repeat(Alt(tuple(parts)), rng.randint(0, 1), rng.choice([None, 3]))
    return Seq(tuple(parts))


def _member(node: object, text: bytes) -> bool:
    """Whether ``text`` is in ``node``'s language, a product or a union of products judged
    by its operands' verdicts, anything else by its own automaton."""
    if isinstance(node, Product):
        x, y = _member(node.a, text), _member(node.b, text)
        return x and (y if node.op == "and" else not y)
    if isinstance(node, Alt) and any(isinstance(x, Product) for x in node.items):
        return any(_member(x, text) for x in node.items)
    return determinize(lower(node)).accepts(text)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(4))
def test_a_product_is_built_as_a_dfa_of_pairs_with_its_language(seed: int) -> None:
    """A product's DFA is built from its operands' as pairs of states (``_pair_dfa``), and
    a product inside a grammar is lowered through it: intersections, differences and
    nested ones accept exactly the strings their operands say, up to length 5 over a, b, c."""
    from itertools import product as strings

    from maskc.compiler.errors import EmptyLanguage
    from maskc.compiler.product import _pair_dfa

    rng = random.Random(seed)

    a, b, c = _small_language(rng), _small_language(rng), _small_language(rng)
    inner = Product(a, b, rng.choice(["and", "minus"]))
    outer = Product(Repeat(ByteSet(((0x61, 0x63),)), 0, None), inner, "minus")
    nested = Product(inner, c, rng.choice(["and", "minus"]))

    texts = [bytes(t) for n in range(6) for t in strings(b"abc", repeat=n)]
    for node in (inner, outer, nested):
        pairs = _pair_dfa(node, max_states=10_000, deadline=None)
        try:
            lowered: Dfa | None = minimize(prune(determinize(lower(Seq((_lit(b"x"), node))))))
        except EmptyLanguage:
            lowered = None  # (then no string may be a member)
        for text in texts:
            want = _member(node, text)
            assert pairs.accepts(text) == want, (node, text)
            assert (lowered is not None and lowered.accepts(b"x" + text)) == want, (node, text)


@pytest.mark.parametrize("seed", range(4))
def test_a_product_in_batches_numbers_its_pairs_as_one_at_a_time(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where many pairs wait, a product expands them as a batch in array code: its table,
    flags and pair numbers are exactly those of expanding one pair at a time, a state limit
    refuses the same products, and batches cut short by the cell budget change nothing."""
    from maskc.compiler import product as product_mod
    from maskc.compiler.errors import StateLimitExceeded

    rng = random.Random(seed)

    def leaf() -> Alt | Repeat | Seq:
        parts = [_lit(bytes(rng.choice(b"abcd") for _ in range(rng.randint(1, 4)))) for _ in range(rng.randint(2, 5))]
        loop = Repeat(Alt(tuple(parts)), rng.randint(0, 2), rng.choice([None, 6]))
        return Seq((loop, Repeat(ByteSet(((0x61, 0x64),)), 0, rng.choice([None, 3])), Alt(tuple(parts))))

    nodes = [Product(leaf(), leaf(), op) for op in ("and", "minus") for _ in range(3)]
    nodes.append(Product(nodes[0], leaf(), "minus"))  # a difference whose b side dies: pairs go on with a alone
    sizes = []
    limited = 0
    for node in nodes:
        results = []
        for batch, cells in ((10**9, 1 << 20), (1, 1 << 20), (1, 1), (3, 7)):
            monkeypatch.setattr(product_mod, "_PAIR_BATCH", batch)
            monkeypatch.setattr(product_mod, "_PAIR_CELLS", cells)
            got = product_mod._pair_dfa(node, max_states=100_000, deadline=None)
            n = got.num_states
            sides = max(operand_dfa(x, max_states=100_000, deadline=None).num_states for x in (node.a, node.b))
            if n > sides:  # (an operand over the limit is refused first)
                limited += 1
                with pytest.raises(StateLimitExceeded):
                    product_mod._pair_dfa(node, max_states=n - 1, deadline=None)
                assert product_mod._pair_dfa(node, max_states=n, deadline=None).num_states == n
            results.append(got)
        first = results[0]
        sizes.append(first.num_states)
        for got in results[1:]:
            assert np.array_equal(got.trans, first.trans) and np.array_equal(got.accepting, first.accepting)
            assert np.array_equal(got.byte_class, first.byte_class)
    assert max(sizes) >= 40 and limited  # some product wide enough for batches; some limit checked


@pytest.mark.parametrize("seed", range(4))
def test_a_union_of_products_is_built_from_pairs_with_its_language(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A union with two products or more among its items is built by uniting the items'
    DFAs pair by pair (``_union_dfa``), each union minimized before the next: it accepts
    exactly the strings some item accepts, as the union lowered through an NFA does, up to
    length 5 over a, b, c, with an empty product and items that are not products among them."""
    from itertools import product as strings

    from maskc.compiler import product as product_mod

    rng = random.Random(100 + seed)

    texts = [bytes(t) for n in range(6) for t in strings(b"abc", repeat=n)]
    empty = Product(_lit(b"ab"), _lit(b"ab"), "minus")
    items: list[object] = [Product(_small_language(rng), _small_language(rng), rng.choice(["and", "minus"]))
                           for _ in range(rng.randint(2, 4))]
    unions = [Alt(tuple(items)), Alt((*items, _small_language(rng), _small_language(rng))), Alt((empty, items[0])),
              Alt((empty, empty))]
    for node in unions:
        got = operand_dfa(node, max_states=10_000, deadline=None)
        via_nfa = determinize(lower(Seq((_lit(b"x"), node))))
        for text in texts:
            want = _member(node, text)
            assert got.accepts(text) == want, (node, text)
            assert via_nfa.accepts(b"x" + text) == want, (node, text)
    # the pairs are built by pair_dfa: a union's expanded in batches equals one pair at a time
    da, db = (operand_dfa(x, max_states=10_000, deadline=None) for x in items[:2])  # type: ignore[arg-type]
    tables = []
    for batch in (10**9, 1, 3):
        monkeypatch.setattr(product_mod, "_PAIR_BATCH", batch)
        tables.append(product_mod.pair_dfa(da, db, "or", max_states=10_000, deadline=None))
    for t in tables[1:]:
        assert np.array_equal(t.trans, tables[0].trans) and np.array_equal(t.accepting, tables[0].accepting)


def test_a_product_over_a_rule_reference_is_refused() -> None:
    """A product is built from its operands' DFAs, so an operand that calls a rule (a
    recursive language) is refused by name, whether the product is lowered in a grammar or
    asked for as an operand itself."""
    from maskc.compiler.errors import GrammarError
    from maskc.compiler.ir import RuleRef

    node = Product(Seq((_lit(b"a"), RuleRef("value"))), _lit(b"ab"), "minus")
    with pytest.raises(GrammarError, match="recursive rule"):
        lower(Seq((_lit(b"x"), node)))
    with pytest.raises(GrammarError, match="recursive rule"):
        operand_dfa(node, max_states=1000, deadline=None)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("digests", ["distinct", "all equal"])
def test_byte_classes_merge_exactly_the_equal_columns(seed: int, digests: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Columns are told apart by a digest, and equal digests are compared cell by cell: with
    every digest the same, the classes are still exactly those of the equal columns. The
    table may be a view (the pushdown automaton hands in its byte columns)."""
    if digests == "all equal":
        monkeypatch.setattr(dfa_mod, "_column_digest", lambda column: b"")
    rng = np.random.default_rng(seed)
    for _ in range(100):
        n, distinct = int(rng.integers(1, 30)), int(rng.integers(1, 8))
        base = rng.integers(-1, n, size=(n, distinct)).astype(np.int32)
        c = int(rng.integers(distinct, 20))
        trans = base[:, rng.integers(0, distinct, size=c + 2)]  # columns repeated at random
        byte_class = rng.integers(0, c, size=256).astype(np.uint8)
        byte_class[:c] = np.arange(c)
        table = trans[:, :c] if rng.random() < 0.5 else np.ascontiguousarray(trans[:, :c])
        d = Dfa(table, byte_class, rng.random(n) < 0.5)
        got = dfa_mod.compress_classes(d)
        # every byte goes where it went; two bytes share a class exactly when their columns agree
        assert np.array_equal(got.trans[:, got.byte_class], d.trans[:, d.byte_class])
        cols = [d.trans[:, k].tobytes() for k in d.byte_class.tolist()]
        same = np.equal.outer(got.byte_class, got.byte_class)
        assert same.tolist() == [[a == b for b in cols] for a in cols]
        # classes numbered by the first column (old class) that has them
        firsts = [int(got.byte_class[np.flatnonzero(d.byte_class == k)[0]]) for k in range(c)]
        assert list(dict.fromkeys(firsts)) == list(range(got.num_classes))


def test_block_ids_renumbered_densely_keep_their_order() -> None:
    # (a refinement's result: ids ranked among those used, the smallest 0)
    rng = np.random.default_rng(3)
    for n in (0, 1, 2, 9, 500):
        for spread in (1, 2 * n + 1):
            block = rng.integers(0, spread, size=n).astype(np.int64)
            want = np.asarray(np.unique(block, return_inverse=True)[1], dtype=np.int64).reshape(-1)
            got = minimize_mod._dense(block)
            assert got.dtype == np.int64 and got.tolist() == want.tolist()


@pytest.mark.parametrize("columns", [1, 2, 3, 5])
def test_row_ids_number_rows_in_the_order_of_their_bytes(columns: int) -> None:
    # Rows of a few columns sort as integer keys: the ids must be those of a sort of the
    # rows as raw records (the order the block ids of a refinement follow), negative values,
    # repeats and rows that differ only in a later column included.
    rng = np.random.default_rng(columns)
    for m in (1, 2, 7, 300, 5000):
        for card in (1, 3, m):
            pool = rng.integers(-2**63, 2**63 - 1, size=(card, columns), dtype=np.int64, endpoint=True)
            pool[: card // 2, :-1] = pool[0, :-1]  # (rows alike but in the last column)
            rows = pool[rng.integers(0, card, size=m)]
            flat = np.ascontiguousarray(rows)
            records = flat.view(np.dtype((np.void, 8 * columns))).ravel()
            _, want = np.unique(records, return_inverse=True)
            got, count = minimize_mod.row_ids(rows)
            assert got.tolist() == np.asarray(want).reshape(-1).tolist()
            assert count == len(set(records.tolist()))


@pytest.mark.parametrize("chunk", [1, 5, minimize_mod._CHUNK_CELLS], ids=["chunks-of-1", "chunks-of-5", "one-chunk"])
def test_runs_of_one_target_sum_to_the_signatures_of_the_transitions(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # A run's multiplier sum stands for its columns: every state's signature from its runs is
    # the wrapping sum over its live transitions one by one; runs stay within a state's row
    # and are maximal (two runs of a row that meet have different targets); the run sources
    # and targets are the distinct pairs of each stretch.
    monkeypatch.setattr(minimize_mod, "_CHUNK_CELLS", chunk)
    rng = random.Random(7)
    wrap = lambda x: (x + 2**63) % 2**64 - 2**63  # noqa: E731
    for _ in range(40):
        n, c = rng.randint(1, 30), rng.randint(1, 9)
        trans = np.full((n, c), DEAD, dtype=np.int32)
        for s in range(n):  # runs of one target, as a string's classes have
            for col in range(c):
                r = rng.random()
                trans[s, col] = DEAD if r < 0.3 else trans[s, col - 1] if col and r < 0.7 else rng.randrange(n)
        src_, col_ = np.nonzero(trans >= 0)
        out = np.zeros(n + 1, dtype=np.int64)
        np.cumsum((trans >= 0).sum(axis=1), out=out[1:])
        mult = minimize_mod._MULT[:, :c]
        run_out, run_src, run_tgt, run_mult = minimize_mod._runs(
            out, src_.astype(np.int32), col_.astype(np.int32), trans[src_, col_].astype(np.int32), mult)
        assert run_mult is not None
        block = np.asarray([rng.randrange(4) for _ in range(n)], dtype=np.int64)
        base = [wrap(-sum(int(x) for x in mult[k])) for k in (0, 1)]
        h = minimize_mod._sparse_hashes(np.arange(n, dtype=np.int64), run_out, run_tgt, run_mult, block,
                                        np.asarray(base, dtype=np.int64))
        for s in range(n):
            want = [wrap(base[k] + sum((int(block[t]) + 1) * int(mult[k][col]) for col, t in enumerate(trans[s].tolist())
                                       if t >= 0)) for k in (0, 1)]
            assert h[s].tolist() == want
            a, b = int(run_out[s]), int(run_out[s + 1])
            assert run_src[a:b].tolist() == [s] * (b - a)
            tg = run_tgt[a:b].tolist()
            assert all(x != y for x, y in zip(tg, tg[1:]))  # maximal runs
            live = [t for t in trans[s].tolist() if t >= 0]
            assert tg == [t for i, t in enumerate(live) if i == 0 or live[i - 1] != t]
        assert int(run_out[-1]) == run_tgt.shape[0]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("dense_cells", [0, minimize_mod.DENSE_HASH_CELLS], ids=["sparse", "dense"])
def test_small_rounds_number_blocks_as_the_array_rounds(seed: int, dense_cells: int,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Not only the same partition: the same block ids, so that whatever reads them (a
    refinement stopped after a few rounds, the alignment's grouping) sees the same numbers."""
    monkeypatch.setattr(minimize_mod, "DENSE_HASH_CELLS", dense_cells)
    rng = random.Random(200 + seed)
    for _ in range(60):
        d = _random_dfa(rng, rng.randint(1, 60), rng.randint(1, 5), rng.choice([0.3, 0.6, 0.9]))
        init, _ = minimize_mod.row_ids(d.accepting.astype(np.int64).reshape(-1, 1))
        for rounds in (None, 1, 3):
            got = []
            for small in (0, 64):
                monkeypatch.setattr(minimize_mod, "SMALL_ROUND", small)
                got.append(minimize_mod._incremental_rounds(d.trans, init, rounds, None))
            assert np.array_equal(got[0][0], got[1][0]) and got[0][1] == got[1][1]


def test_an_operand_finished_at_the_limit_stops_before_its_next_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A subset construction may end just before the deadline: pruning and minimizing a large
    operand then took seconds past it (a compile reported 74 s against 60)."""
    import time
    import types

    from maskc.compiler import product as product_mod
    from maskc.compiler.errors import TimeLimitExceeded
    from maskc.compiler.frontends.regex import regex_to_ir

    deadline = time.monotonic() + 1000.0
    clock = [0.0]
    monkeypatch.setattr(product_mod, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    real = product_mod.determinize

    def at_the_limit(*args: object, **kwargs: object) -> Dfa:
        got = real(*args, **kwargs)  # type: ignore[arg-type]
        clock[0] = deadline + 1.0
        return got

    pruned: list[Dfa] = []
    monkeypatch.setattr(product_mod, "determinize", at_the_limit)
    monkeypatch.setattr(product_mod, "prune", lambda d: pruned.append(d) or d)
    with pytest.raises(TimeLimitExceeded):
        product_mod.operand_dfa(regex_to_ir("a[bc]{2,5}d"), max_states=1000, deadline=deadline)
    assert not pruned
    clock[0] = 0.0
    got = product_mod.operand_dfa(regex_to_ir("x[yz]{2,5}"), max_states=1000, deadline=deadline + 10.0)
    assert pruned and got.accepts(b"xyzy")


def test_an_operand_dfa_keeps_to_the_cap_of_the_compile() -> None:
    """Inside a compile an operand's DFA keeps to the DFA limit (not to the NFA budget, ten
    times larger): a subset construction of hundreds of thousands of states, one at a time in
    Python, ran for a minute or more before the grammar went over the limit all the same."""
    from maskc.compiler.errors import StateLimitExceeded
    from maskc.compiler.product import OperandStateLimit, operand_state_cap

    ab = ByteSet(((0x61, 0x62),))

    def wide() -> Seq:  # the 7th byte from the end is an "a": 2**7 minimal states (equal: one DFA)
        return Seq((Repeat(ab, 0, None), _lit(b"a"), Repeat(ab, 6, 6)))

    size = operand_dfa(wide(), max_states=10_000, deadline=None).num_states
    assert size >= 128
    with operand_state_cap(size):  # (a cap the operand fits: the same DFA)
        assert operand_dfa(wide(), max_states=10_000, deadline=None).num_states == size
    short = Seq((_lit(b"a"), Repeat(ab, 7, 7)))
    united = Alt((Product(wide(), short, "and"), Product(short, wide(), "minus")))
    for node in (wide(), Product(wide(), short, "and"), united):
        with operand_state_cap(100), pytest.raises(OperandStateLimit) as err:
            operand_dfa(node, max_states=10_000, deadline=None)
        assert err.value.limit == 100 and "part of the grammar" in str(err.value)
    built = wide()
    operand_dfa(built, max_states=10_000, deadline=None)  # memoized: still over the cap
    with operand_state_cap(100), pytest.raises(OperandStateLimit):
        operand_dfa(built, max_states=10_000, deadline=None)
    with operand_state_cap(100_000), pytest.raises(StateLimitExceeded) as over:  # the budget binds first
        operand_dfa(wide(), max_states=100, deadline=None)
    assert not isinstance(over.value, OperandStateLimit) and over.value.limit == 100
    both = operand_dfa(Product(wide(), short, "and"), max_states=10_000, deadline=None)
    assert both.num_states < 20 and _dfa_accepts(both, b"aaaaaaaa") and not _dfa_accepts(both, b"abaaaaaa")


def test_a_compile_refuses_an_operand_over_its_state_limit(byte_vocab: object) -> None:
    """A pattern of 2**7 states under a length bound: the grammar's own DFA has 11 states, but
    its pattern's is built first and keeps to ``max_states`` like every DFA of the compile."""
    from maskc.artifacts.api import compile_json_schema
    from maskc.compiler.errors import StateLimitExceeded
    from maskc.compiler.options import CompileOptions, Limits

    schema = {"type": "string", "pattern": "^[ab]*a[ab]{6}$", "minLength": 8, "maxLength": 8}
    def compiled(max_states: int):  # type: ignore[no-untyped-def]
        options = CompileOptions(limits=Limits.scaled(max_states=max_states))
        return compile_json_schema(schema, byte_vocab, options=options)  # type: ignore[arg-type]

    with pytest.raises(StateLimitExceeded) as err:
        compiled(100)
    assert err.value.limit == 100 and "part of the grammar" in str(err.value)
    assert "--max-states" in (err.value.hint or "")
    art = compiled(1000)
    for text, ok in [('"aaaaaaab"', True), ('"babbbbbb"', True), ('"abbbbbbb"', False), ('"aaaaaab"', False)]:
        m = art.matcher()
        assert (m.accept_string(text) and m.can_terminate()) == ok, text


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("collide", [False, True], ids=["hashed", "colliding"])
@pytest.mark.parametrize("small", [0, 64], ids=["array-rounds", "small-rounds"])
def test_a_pair_of_refinements_from_one_run_is_the_two_runs(
        seed: int, collide: bool, small: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # The short and long partitions of an alignment come from one run of rounds: the first
    # is the run's blocks after its first rounds, numbered as a run of that many rounds
    # numbers them, exactly (ids and all), whether the run stops first, stabilizes before
    # them, or a collision makes it rerun exactly.
    if collide:
        monkeypatch.setattr(minimize_mod, "_MULT", np.ones_like(minimize_mod._MULT))
    monkeypatch.setattr(minimize_mod, "SMALL_ROUND", small)
    rng = random.Random(200 + seed)
    stops = set()
    for _ in range(60):
        d = _random_dfa(rng, rng.randint(1, 40), rng.randint(1, 5), rng.choice([0.3, 0.6, 0.9]))
        acc = d.accepting.astype(np.int64)
        for first, last in ((0, 3), (1, 1), (1, 4), (2, 50), (3, 6)):
            got_first, got_last = minimize_mod.refine_pair(d.trans, acc, first, last)
            want_first = minimize_mod.refine(d.trans, acc, max_rounds=first)
            want_last = minimize_mod.refine(d.trans, acc, max_rounds=last)
            assert got_first.tolist() == want_first.tolist()
            assert got_last.tolist() == want_last.tolist()
            stops.add(len(set(want_first.tolist())) == len(set(want_last.tolist())))
    assert stops == {False, True}  # runs refined past the first rounds, and runs stable by then


@pytest.mark.parametrize("radix_keys", [None, 100])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint32])
def test_stable_order_is_numpys_stable_argsort(dtype: type, radix_keys: int | None,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys under 2**16 sort in one counting pass, up to 2**32 in two (low digit first), and
    past that, or past ``RADIX_KEYS`` keys, as numpy does: the same permutation as a stable
    argsort in every case (ties in input order), on empty, single, all-equal and repeated keys
    and keys at the bound."""
    from maskc.compiler import dfa as dfa_mod
    from maskc.compiler.dfa import stable_order

    if radix_keys is not None:
        monkeypatch.setattr(dfa_mod, "RADIX_KEYS", radix_keys)

    rng = np.random.default_rng(11)
    cases = [(0, 1), (1, 1), (5, 1), (1000, 7), (3000, 1 << 16), (3000, (1 << 16) + 1), (5000, 1 << 20),
             (5000, 1 << 32)]
    if np.dtype(dtype).itemsize == 8:
        cases.append((2000, 1 << 40))
    for n, bound in cases:
        bound = min(bound, int(np.iinfo(dtype).max) + 1)  # (keys the dtype holds)
        keys = rng.integers(0, bound, size=n, dtype=np.int64)
        if n:
            keys[rng.integers(0, n, size=max(1, n // 10))] = bound - 1  # (the largest key, repeated)
        keys = keys.astype(dtype)
        got = stable_order(keys, bound)
        assert got.tolist() == np.argsort(keys, kind="stable").tolist(), (n, bound)
