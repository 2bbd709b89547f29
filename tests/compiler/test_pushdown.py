"""Exact masks of recursive grammars against a brute-force oracle.

The oracle knows nothing of automata: it enumerates every string of a small context-free
grammar (written here as plain alternatives) up to a length, with rule nesting bounded
like ``max_depth``, and derives the allowed tokens after a prefix from that set. The
vocabulary has tokens that open or close several levels at once, cross from a string into
structure, and split UTF-8 sequences.
"""

from __future__ import annotations

import functools
from typing import Any, Union

import numpy as np
import pytest

from maskc.artifacts.artifact import Artifact
from maskc.compiler.errors import EmptyLanguage, GrammarError
from maskc.compiler.ir import Grammar, RuleRef, alt, lit, opt, seq, star, byte_set
from maskc.compiler.options import CompileOptions
from maskc.compiler.pipeline import compile_grammar
from maskc.compiler.vocab import Vocabulary

# -- the oracle's grammar form: rule -> alternatives; an item is a byte string, a rule
# reference ("ref", name), a repetition ("star", [items]) or an option ("opt", [items]).
Item = Union[bytes, tuple[str, object]]
Cfg = dict[str, list[list[Item]]]


def _freeze(x: object) -> object:
    if isinstance(x, list):
        return tuple(_freeze(y) for y in x)
    if isinstance(x, tuple):
        return tuple(_freeze(y) for y in x)
    return x


def enumerate_language(cfg: Cfg, start: str, max_depth: int, max_len: int) -> set[bytes]:
    """Every string of ``cfg`` of at most ``max_len`` bytes, rule nesting at most ``max_depth``."""
    rules = {name: _freeze(alts) for name, alts in cfg.items()}

    @functools.lru_cache(maxsize=None)
    def rule(name: str, depth: int, n: int) -> frozenset[bytes]:
        if depth > max_depth:
            return frozenset()
        out: set[bytes] = set()
        for alt_ in rules[name]:  # type: ignore[union-attr]
            out |= items(alt_, depth, n)
        return frozenset(out)

    @functools.lru_cache(maxsize=None)
    def items(its: tuple[object, ...], depth: int, n: int) -> frozenset[bytes]:
        if not its:
            return frozenset({b""})
        out: set[bytes] = set()
        for a in item(its[0], depth, n):
            for b in items(its[1:], depth, n - len(a)):
                out.add(a + b)
        return frozenset(out)

    @functools.lru_cache(maxsize=None)
    def item(it: object, depth: int, n: int) -> frozenset[bytes]:
        if isinstance(it, bytes):
            return frozenset({it}) if len(it) <= n else frozenset()
        kind, arg = it  # type: ignore[misc]
        if kind == "ref":
            return rule(arg, depth + 1, n)
        if kind == "opt":
            return frozenset({b""}) | items(arg, depth, n)
        out = {b""}  # star: one non-empty repetition, then the rest
        for a in items(arg, depth, n):
            if a:
                out |= {a + b for b in item(it, depth, n - len(a))}
        return frozenset(out)

    return set(rule(start, 1, max_len))


def R(name: str) -> tuple[str, object]:
    return ("ref", name)


# Nested arrays with numbers and short strings (a string's bytes cross into structure).
ARR_CFG: Cfg = {
    "v": [
        [b"[", ("opt", [R("v"), ("star", [b",", R("v")])]), b"]"],
        [b"1"],
        [b'"', ("opt", [b"\xc3\xa9"]), ("opt", [b"a"]), b'"'],
    ],
}
V = RuleRef("v")
ARR_IR = Grammar("v", (("v", alt(
    seq(lit("["), opt(seq(V, star(seq(lit(","), V)))), lit("]")),
    lit("1"),
    seq(lit('"'), opt(lit("é")), opt(lit("a")), lit('"')),
)),))

# Objects whose values recurse: tokens such as '"}]},' close several levels.
OBJ_CFG: Cfg = {
    "o": [[b"{", ("opt", [b'"k":', R("o"), ("star", [b',"k":', R("o")])]), b"}"], [b"[", ("opt", [R("o")]), b"]"], [b"0"]],
}
O = RuleRef("o")
OBJ_IR = Grammar("o", (("o", alt(
    seq(lit("{"), opt(seq(lit('"k":'), O, star(seq(lit(',"k":'), O)))), lit("}")),
    seq(lit("["), opt(O), lit("]")),
    lit("0"),
)),))

# Mutual recursion through two rules, one of them nullable inside.
MUT_CFG: Cfg = {
    "a": [[b"(", ("opt", [R("b")]), b")"]],
    "b": [[b"<", ("star", [R("a")]), b">"], [b"x"]],
}
MUT_IR = Grammar("a", (
    ("a", seq(lit("("), opt(RuleRef("b")), lit(")"))),
    ("b", alt(seq(lit("<"), star(RuleRef("a")), lit(">")), lit("x"))),
))

# Ambiguous: "a" may open a frame that needs a "b" or one that does not (several stacks).
AMB_CFG: Cfg = {"s": [[b"a", R("s"), b"b"], [b"a", R("s")], [b"c"]]}
S = RuleRef("s")
AMB_IR = Grammar("s", (("s", alt(seq(lit("a"), S, lit("b")), seq(lit("a"), S), lit("c"))),))

TOKENS = [
    "[", "]", ",", "1", '"', "a", "é", b"\xc3", b"\xa9", "{", "}", ":", "k", "0", "(", ")", "<", ">", "x", "b", "c",
    "[[", "[[[", "]]", "]]]", "],", "],[", "[1", "1]", "1]]", "1,", '"]', '",', '"a', 'a"', '"é', "é\"", '"]]',
    '{"', '"k', '":', '"k":', '"k":{', '"k":[', '}]', "}}", '},"', '}]},', "]}", '"}', "{}", "[]", ",\"k\":",
    "((", "))", "(<", ">)", "<(", ")>", "(x)", "aa", "ab", "bb", "ac", "cb", "abb",
    "<eos>",
]


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return Vocabulary.from_tokens(TOKENS, eos="<eos>", name="pda-toy", vocab_size=len(TOKENS) + 3)


def _art(grammar: Grammar, vocab: Vocabulary, max_depth: int) -> Artifact:
    g = compile_grammar("test", repr(grammar), grammar, vocab, CompileOptions(max_depth=max_depth))
    assert g.pda is not None
    art = Artifact.from_bytes(Artifact.from_compiled(g, vocab).to_bytes())  # through the file format
    art.tokenizer = vocab
    return art


CASES = [
    ("arrays", ARR_IR, ARR_CFG, "v", 3, 7),
    ("objects", OBJ_IR, OBJ_CFG, "o", 3, 9),
    ("mutual", MUT_IR, MUT_CFG, "a", 4, 8),
    ("ambiguous", AMB_IR, AMB_CFG, "s", 4, 7),
]


ALIGNMENT_MODES = ["union", "shared-union", "one-by-one", "one-by-one-refined-apart"]


def _alignment_mode(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the alignment automata take one of align_pda's paths, whatever their size: one
    union (small automata), one union because they share their futures (large ones), one by
    one with the partitions of their union handed in (large ones sharing too little), or one
    by one, each refined apart (too large to look)."""
    from maskc.compiler import align_pda

    if mode == "union":
        return
    monkeypatch.setattr(align_pda, "UNION_MAX_STATES", 0)
    if mode == "shared-union":
        monkeypatch.setattr(align_pda, "SHARED_UNION_BLOCKS", 1.0)
    elif mode == "one-by-one":
        monkeypatch.setattr(align_pda, "SHARED_UNION_BLOCKS", 0.0)
    else:
        monkeypatch.setattr(align_pda, "SHARED_UNION_MAX_STATES", 0)


@pytest.mark.parametrize("mode", ALIGNMENT_MODES)
@pytest.mark.parametrize("name,grammar,cfg,start,max_depth,prefix_len", CASES, ids=[c[0] for c in CASES])
def test_masks_match_the_oracle(name: str, grammar: Grammar, cfg: Cfg, start: str, max_depth: int, prefix_len: int,
                                mode: str, vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    _alignment_mode(mode, monkeypatch)
    _check_against_oracle(_art(grammar, vocab, max_depth), cfg, start, max_depth, prefix_len, vocab)


def _check_against_oracle(art: Artifact, cfg: Cfg, start: str, max_depth: int, prefix_len: int,
                          vocab: Vocabulary) -> None:
    """After every prefix of the language up to ``prefix_len`` bytes, the allowed tokens are
    exactly those that extend it inside the language (EOS where it is complete)."""
    longest = max(len(b) for b in vocab.token_bytes)
    # Every viable string here completes within 2 * max_depth + 1 more bytes: the
    # enumeration bound leaves room for the prefix, the longest token and a completion.
    bound = prefix_len + longest + 2 * max_depth + 1
    language = enumerate_language(cfg, start, max_depth, bound)
    prefixes = {w[:i] for w in language for i in range(len(w) + 1)}
    checked = 0
    for p in sorted(x for x in prefixes if len(x) <= prefix_len):
        m = art.matcher()
        assert m.accept_string(p), p
        expected = {t for t, b in enumerate(vocab.token_bytes) if b and t not in vocab.special_ids and p + b in prefixes}
        if p in language:
            expected |= set(vocab.eos_ids)
        got = set(m.allowed_token_ids().tolist())
        assert got == expected, (p, sorted(vocab.token_bytes[t] for t in got ^ expected))
        # the bitmask agrees with the id list
        bm = np.zeros((1, (art.vocab_size + 31) // 32), dtype=np.int32)
        m.fill_next_token_bitmask(bm)
        bits = np.unpackbits(bm[0].view(np.uint8), bitorder="little")[: art.vocab_size]
        assert set(np.flatnonzero(bits).tolist()) == expected
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize("extra", [1, 6])
def test_masks_match_the_oracle_on_a_vocabulary_that_ends_inside_a_word(extra: int) -> None:
    """The pushdown alignment holds its masks as bitmask rows, and adds them so: where the
    vocabulary's size is not a multiple of 32, the bits past its end stay clear (the
    uncertain masks are complements within the allowed ones)."""
    odd = Vocabulary.from_tokens(TOKENS, eos="<eos>", name="pda-toy-odd",
                                 vocab_size=len(TOKENS) + extra)
    assert odd.vocab_size % 32
    _, grammar, cfg, start, max_depth, prefix_len = CASES[1]
    _check_against_oracle(_art(grammar, odd, max_depth), cfg, start, max_depth, prefix_len, odd)


def _ids(art: Artifact, masks: Any) -> list[set[int]]:
    return [set(art.masks.allowed_ids(int(m)).tolist()) for m in masks]


@pytest.mark.parametrize("name,grammar,cfg,start,max_depth,prefix_len", CASES, ids=[c[0] for c in CASES])
def test_walks_past_the_frame_cut_loose_early_keep_the_masks_exact(
        name: str, grammar: Grammar, cfg: Cfg, start: str, max_depth: int, prefix_len: int, vocab: Vocabulary,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A walk that left its frame goes loose after ``OUTER_HORIZON`` bytes of its token: its
    token is uncertain rather than decided at compile time, and the runtime settles it on
    the live stack. At the loosest cut (every walk loose as soon as it leaves its frame),
    the accepted masks are unchanged, the uncertain ones only grow, and every mask the
    matcher gives is still exactly the oracle's."""
    from maskc.compiler import align_pda

    monkeypatch.setattr(align_pda, "OUTER_HORIZON", None)
    followed = _art(grammar, vocab, max_depth)
    monkeypatch.setattr(align_pda, "OUTER_HORIZON", 1)
    loose = _art(grammar, vocab, max_depth)
    assert loose.inline_depth == followed.inline_depth
    assert _ids(loose, loose.state_mask) == _ids(followed, followed.state_mask)
    assert _ids(loose, loose.flat_mask) == _ids(followed, followed.flat_mask)
    pairs = list(zip(_ids(loose, loose.uncertain_mask), _ids(followed, followed.uncertain_mask)))
    assert all(b <= a for a, b in pairs)
    grown = [a - b for a, b in pairs]
    if name in ("arrays", "objects"):  # tokens that close a frame and go on ("],[", "}]},")
        assert any(grown), "the loose cut changed nothing: it was not applied"
    _check_against_oracle(loose, cfg, start, max_depth, prefix_len, vocab)


@pytest.mark.parametrize("name,grammar,cfg,start,max_depth,prefix_len", CASES[:3], ids=[c[0] for c in CASES[:3]])
def test_token_paths_accept_exactly_the_language(name: str, grammar: Grammar, cfg: Cfg, start: str, max_depth: int,
                                                 prefix_len: int, vocab: Vocabulary) -> None:
    """Greedy longest-token paths through every string: accepted, ended; rollback restores."""
    language = enumerate_language(cfg, start, max_depth, 12)
    art = _art(grammar, vocab, max_depth)
    by_bytes = {b: t for t, b in enumerate(vocab.token_bytes) if b}
    for w in sorted(language)[:300]:
        m = art.matcher()
        i = 0
        while i < len(w):
            j = max(k for k in range(i + 1, len(w) + 1) if w[i:k] in by_bytes)
            assert m.accept_token(by_bytes[w[i:j]]), (w, w[i:j])
            i = j
        assert m.can_terminate(), w
        n = m.num_accepted
        m.rollback(n)
        assert m.num_accepted == 0 and m.depth == 1
        assert m.accept_string(w) and m.can_terminate()
        assert m.accept_token(vocab.eos_ids[0]) and m.is_terminated()


def test_depth_limit_accepts_n_and_rejects_the_token_that_makes_n_plus_one(vocab: Vocabulary) -> None:
    art = _art(ARR_IR, vocab, 4)
    m = art.matcher()
    assert m.accept_token(vocab.token_bytes.index(b"[["))
    assert m.accept_token(vocab.token_bytes.index(b"[["))  # four frames: the bottom one and three calls
    assert m.depth == 4
    assert not m.accept_token(vocab.token_bytes.index(b"["))  # a fifth frame
    assert not m.accept_token(vocab.token_bytes.index(b"1]]"))  # an item in there is a fifth
    allowed = {vocab.token_bytes[t] for t in m.allowed_token_ids().tolist()}
    assert allowed == {b"]", b"]]", b"]]]", b"],", b"],["}
    assert m.accept_token(vocab.token_bytes.index(b"],"))
    assert not m.accept_token(vocab.token_bytes.index(b"[1"))  # the fourth level again: no item inside
    assert m.accept_token(vocab.token_bytes.index(b"[]"))
    assert m.accept_token(vocab.token_bytes.index(b"]]"))
    assert not m.can_terminate()
    assert m.accept_token(vocab.token_bytes.index(b"]"))
    assert m.can_terminate()


def test_left_recursion_is_refused_with_the_cycle(vocab: Vocabulary) -> None:
    g = Grammar("e", (("e", alt(seq(RuleRef("t"), lit("+"), lit("1")), lit("1"))), ("t", alt(seq(RuleRef("e"), lit("*")), lit("2")))))
    with pytest.raises(GrammarError, match=r"left recursion: e -> t -> e|left recursion: t -> e -> t"):
        compile_grammar("test", "x", g, vocab, CompileOptions())


def test_rule_with_no_finite_string_is_empty(vocab: Vocabulary) -> None:
    g = Grammar("a", (("a", seq(lit("("), RuleRef("a"), lit(")"))),))
    with pytest.raises(EmptyLanguage):
        compile_grammar("test", "x", g, vocab, CompileOptions())


def test_nesting_bound_too_small_for_any_output(vocab: Vocabulary) -> None:
    g = Grammar("a", (("a", seq(lit("("), alt(RuleRef("b"), lit("x")), lit(")"))), ("b", seq(lit("<"), RuleRef("a"), lit(">")))))
    _art(g, vocab, 3)  # a-b-a fits in three frames; x needs only one
    g2 = Grammar("a", (("a", seq(lit("("), RuleRef("b"), lit(")"))), ("b", alt(seq(lit("<"), RuleRef("a"), lit(">")), lit("x")))))
    with pytest.raises(EmptyLanguage, match="nesting bound"):
        compile_grammar("test", "x", g2, vocab, CompileOptions(max_depth=1))


def test_non_recursive_rules_are_inlined_into_one_dfa(vocab: Vocabulary) -> None:
    g = Grammar("r", (("r", seq(RuleRef("x"), RuleRef("x"))), ("x", alt(lit("a"), lit("b")))))
    cg = compile_grammar("test", "x", g, vocab, CompileOptions())
    assert cg.pda is None
    assert cg.dfa.accepts(b"ab") and not cg.dfa.accepts(b"a")


def test_byte_sets_and_utf8_inside_recursion(byte_vocab: Vocabulary) -> None:
    # a string of any byte but '"' inside nested lists: every byte token is exact
    s = seq(lit('"'), star(byte_set(b"abc")), lit('"'))
    g = Grammar("l", (("l", alt(seq(lit("("), star(RuleRef("l")), lit(")")), s)),))
    art = _art(g, byte_vocab, 5)
    m = art.matcher()
    assert m.accept_string('(("ab")"c"(')
    allowed = set(m.allowed_token_ids().tolist())
    assert allowed == {ord("("), ord(")"), ord('"')}
    assert not m.accept_string(')))')
    assert m.accept_string('))') and m.can_terminate()
    assert m.find_jump_forward_bytes() == b""
    m2 = art.matcher()
    assert m2.accept_string('("a')
    assert set(m2.allowed_token_ids().tolist()) == {ord("a"), ord("b"), ord("c"), ord('"')}



def test_direct_left_and_tail_recursion_become_loops(byte_vocab: Vocabulary) -> None:
    digit = byte_set(b"0123456789")
    left = Grammar("e", (("e", alt(seq(RuleRef("e"), lit("+"), digit), digit)),))  # e ::= e "+" d | d
    cg = compile_grammar("test", "x", left, byte_vocab, CompileOptions())
    assert cg.pda is None  # a regular loop, no stack
    assert cg.dfa.accepts(b"1+2+3") and cg.dfa.accepts(b"7") and not cg.dfa.accepts(b"1+") and not cg.dfa.accepts(b"+1")
    ws = Grammar("w", (("w", opt(seq(byte_set(b" \n"), RuleRef("w")))),))  # w ::= ([ \n] w)?
    cg = compile_grammar("test", "x", ws, byte_vocab, CompileOptions())
    assert cg.pda is None and cg.dfa.accepts(b"") and cg.dfa.accepts(b" \n ") and not cg.dfa.accepts(b"x")


def _need_by_rounds(byte_t: Any, call_q: Any, call_rule: Any, call_ret: Any, starts: Any, acc: Any) -> list[int]:
    """The definition of ``need``, iterated to its fixpoint (the reference)."""
    from maskc.compiler.pda import NEED_INF

    n = len(acc)
    need = [0 if a else NEED_INF for a in acc]
    while True:
        new = list(need)
        for q in range(n):
            for t in byte_t[q]:
                if t >= 0:
                    new[q] = min(new[q], need[t])
        for q, r, ret in zip(call_q, call_rule, call_ret):
            if need[starts[r]] < NEED_INF and need[ret] < NEED_INF:
                new[q] = min(new[q], max(1 + need[starts[r]], need[ret]))
        if new == need:
            return need
        need = new


def test_need_is_the_least_fixpoint_on_random_automata() -> None:
    import numpy as np

    from maskc.compiler.pda import _need

    rng = np.random.default_rng(7)
    for _ in range(500):
        n, c, k, nr = int(rng.integers(1, 12)), int(rng.integers(0, 4)), int(rng.integers(0, 6)), int(rng.integers(1, 4))
        byte_t = rng.integers(-1, n, size=(n, c)).astype(np.int32)
        call_q = np.sort(rng.integers(0, n, size=k)).astype(np.int64)
        call_rule = rng.integers(0, nr, size=k).astype(np.int32)
        call_ret = rng.integers(0, n, size=k).astype(np.int32)
        starts = rng.integers(0, n, size=nr).astype(np.int32)
        acc = rng.random(n) < 0.3
        got = _need(byte_t, call_q, call_rule, call_ret, starts, acc).tolist()
        assert got == _need_by_rounds(byte_t.tolist(), call_q.tolist(), call_rule.tolist(), call_ret.tolist(),
                                      starts.tolist(), acc.tolist())


def test_alignment_stops_at_the_longest_token(toy_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    """Subsets past the longest token's length are not expanded: same masks, fewer states.

    After the free-form value of "d" returns, a walk would go on through the long string
    of "u"; no token is that long, so those configurations never matter."""
    import maskc
    from maskc.compiler import align_pda

    schema = {"type": "object", "additionalProperties": False, "required": ["d", "u"],
              "properties": {"d": {"type": "object"}, "u": {"type": "string", "maxLength": 40}}}
    opts = CompileOptions(semantics="exact")
    sizes: dict[str, list[int]] = {"bounded": [], "unbounded": []}
    real = align_pda._local_automata

    def spy(kind: str, bound: bool):  # type: ignore[no-untyped-def]
        def run(pda, k, deadline, limit=align_pda.MAX_LOCAL_STATES, horizon=None, frames=None,  # type: ignore[no-untyped-def]
                outer_horizon=None, aborts=None):
            got = real(pda, k, deadline, limit=limit, horizon=horizon if bound else None, frames=frames,
                       outer_horizon=outer_horizon, aborts=aborts)
            if got is not None:
                sizes[kind].append(got[1].num_states)
            return got
        return run

    monkeypatch.setattr(align_pda, "_local_automata", spy("bounded", True))
    bounded = maskc.compile_json_schema(schema, toy_vocab, options=opts)
    monkeypatch.setattr(align_pda, "_local_automata", spy("unbounded", False))
    unbounded = maskc.compile_json_schema(schema, toy_vocab, options=opts)
    for a, b in ((bounded.state_mask, unbounded.state_mask), (bounded.uncertain_mask, unbounded.uncertain_mask),
                 (bounded.flat_mask, unbounded.flat_mask)):
        assert a is not None and b is not None
        assert [bounded.mask_row_of(int(m)).tobytes() for m in a] == [unbounded.mask_row_of(int(m)).tobytes() for m in b]
    assert max(sizes["bounded"]) < max(sizes["unbounded"])
    m = bounded.matcher()
    assert m.accept_string(b'{"d":{"x":[1,{}]},"u":"' + b"ab" * 20 + b'"}') and m.can_terminate()


def test_walks_past_a_frame_go_loose_after_a_few_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a nested value returns, the 'accepted or uncertain' automaton stops following
    the walk through the callers' long keys a few bytes into the token: far fewer states,
    the same masks (no token here returns and then spells 6 more bytes; the long ones make
    walks of up to 29 bytes worth following otherwise)."""
    import maskc
    from maskc.compiler import align_pda

    vocab = Vocabulary.from_tokens(
        TOKENS + ['"a_rather_long_key_name":', '"another_long_key_name_here":', "long_key", "},", "}}"],
        eos="<eos>", name="pda-long", vocab_size=len(TOKENS) + 8)

    schema = {"type": "object", "properties": {
        "child": {"$ref": "#"}, "list": {"type": "array", "items": {"$ref": "#"}},
        "a_rather_long_key_name": {"type": "integer"}, "another_long_key_name_here": {"type": "boolean"}}}
    opts = CompileOptions(semantics="exact")
    sizes: dict[str, list[int]] = {"cut": [], "followed": []}
    real = align_pda._local_automata

    def spy(kind: str):  # type: ignore[no-untyped-def]
        def run(pda, k, deadline, limit=align_pda.MAX_LOCAL_STATES, horizon=None, frames=None,  # type: ignore[no-untyped-def]
                outer_horizon=None, aborts=None):
            got = real(pda, k, deadline, limit=limit, horizon=horizon, frames=frames, outer_horizon=outer_horizon,
                       aborts=aborts)
            if got is not None:
                sizes[kind].append(got[1].num_states)
            return got
        return run

    monkeypatch.setattr(align_pda, "_local_automata", spy("cut"))
    cut = maskc.compile_json_schema(schema, vocab, options=opts, cache=False)
    monkeypatch.setattr(align_pda, "OUTER_HORIZON", None)
    monkeypatch.setattr(align_pda, "_local_automata", spy("followed"))
    followed = maskc.compile_json_schema(schema, vocab, options=opts, cache=False)
    assert cut.is_pushdown and cut.inline_depth == followed.inline_depth > 0
    assert cut.to_bytes() == followed.to_bytes()
    assert max(sizes["cut"]) < 0.6 * max(sizes["followed"]), sizes
    m = cut.matcher()
    assert m.accept_string(b'{"list":[{"child":{}},{}],"a_rather_long_key_name":1}') and m.can_terminate()
    assert not cut.matcher().accept_string(b'{"list":[{}],"a_rather_long_key_name":true')


def test_alignment_automata_give_one_artifact_aligned_as_one_or_one_by_one(
        toy_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    import maskc

    schema = {"type": "object", "properties": {"a": {"$ref": "#"}, "b": {"type": "array", "items": {"$ref": "#"}},
                                               "c": {"type": "string", "maxLength": 12}}}
    opts = CompileOptions(semantics="exact")
    union = maskc.compile_json_schema(schema, toy_vocab, options=opts, cache=False)
    assert union.is_pushdown and union.inline_depth > 0  # three automata: accepted, any, flat
    for mode in ALIGNMENT_MODES[1:]:
        with monkeypatch.context() as m:
            _alignment_mode(mode, m)
            other = maskc.compile_json_schema(schema, toy_vocab, options=opts, cache=False)
        assert other.to_bytes() == union.to_bytes(), mode
