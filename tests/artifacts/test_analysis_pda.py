"""Worst-case length, EOS reachability, the adversary, trace and check on recursive
(pushdown) artifacts, against an enumerating oracle and hand-checked counterexamples."""

from __future__ import annotations

import functools
import json
from typing import Union

import numpy as np
import pytest

from maskc.artifacts.analysis import Adversary, eos_reachability, length_bound, worst_case_length
from maskc.artifacts.artifact import Artifact
from maskc.artifacts.check import AUTO_TOKEN_CAP, Judge, resolve_budget, run_check
from maskc.artifacts.decode import FixedLogits, Output, decode
from maskc.artifacts.pushdown import PushdownMatcher
from maskc.artifacts.trace import trace_decode, trace_text
from maskc.compiler.analysis import LengthBound
from maskc.compiler.ir import Grammar, RuleRef, alt, lit, opt, seq, star
from maskc.compiler.options import CompileOptions
from maskc.compiler.pipeline import compile_grammar
from maskc.compiler.vocab import Vocabulary

# -- the oracle: rule -> alternatives; an item is bytes, ("ref", rule) or ("opt", [items]).
Item = Union[bytes, tuple[str, object]]
Cfg = dict[str, list[list[Item]]]


def language(cfg: Cfg, start: str, max_depth: int) -> set[bytes]:
    """Every string of a finite grammar (no repetition), rule nesting at most ``max_depth``."""

    @functools.lru_cache(maxsize=None)
    def rule(name: str, depth: int) -> frozenset[bytes]:
        if depth > max_depth:
            return frozenset()
        out: set[bytes] = set()
        for alternative in cfg[name]:
            out |= items(tuple(alternative), depth)
        return frozenset(out)

    def items(its: tuple[Item, ...], depth: int) -> set[bytes]:
        if not its:
            return {b""}
        head = its[0]
        if isinstance(head, bytes):
            firsts = {head}
        elif head[0] == "ref":
            firsts = set(rule(str(head[1]), depth + 1))
        else:
            firsts = {b""} | items(tuple(head[1]), depth)  # type: ignore[arg-type]
        rest = items(its[1:], depth)
        return {a + b for a in firsts for b in rest}

    return set(rule(start, 1))


V, A, B = RuleRef("v"), RuleRef("a"), RuleRef("b")

# pairs: the worst case doubles with every level
PAIR_IR = Grammar("v", (("v", alt(seq(lit("["), V, lit(","), V, lit("]")), lit("1"))),))
PAIR_CFG: Cfg = {"v": [[b"[", ("ref", "v"), b",", ("ref", "v"), b"]"], [b"1"]]}
# nested lists of at most two items, or a two-byte atom
LIST_IR = Grammar("v", (("v", alt(seq(lit("["), opt(seq(V, opt(seq(lit(","), V)))), lit("]")), lit("1"),
                                  lit("ab"))),))
LIST_CFG: Cfg = {"v": [[b"[", ("opt", [("ref", "v"), ("opt", [b",", ("ref", "v")])]), b"]"], [b"1"], [b"ab"]]}
# mutual recursion through a nullable call
MUT_IR = Grammar("a", (("a", seq(lit("("), opt(B), lit(")"))),
                       ("b", alt(seq(lit("<"), A, opt(A), lit(">")), lit("x")))))
MUT_CFG: Cfg = {"a": [[b"(", ("opt", [("ref", "b")]), b")"]],
                "b": [[b"<", ("ref", "a"), ("opt", [("ref", "a")]), b">"], [b"x"]]}
# unbounded: a list of any length
STAR_IR = Grammar("v", (("v", alt(seq(lit("["), opt(seq(V, star(seq(lit(","), V)))), lit("]")), lit("1"))),))
# unbounded through a call: the loop repeats a whole callee
CALL_LOOP_IR = Grammar("a", (("a", seq(lit("("), star(B), lit(")"))), ("b", seq(lit("<"), opt(A), lit(">")))))
# bounded, one level: a ::= "(" a? ")"
PAREN_IR = Grammar("a", (("a", seq(lit("("), opt(A), lit(")"))),))


def _matcher(art: Artifact) -> PushdownMatcher:
    m = art.matcher()
    assert isinstance(m, PushdownMatcher)
    return m


def _art(grammar: Grammar, vocab: Vocabulary, max_depth: int) -> Artifact:
    g = compile_grammar("test", repr(grammar), grammar, vocab, CompileOptions(max_depth=max_depth))
    assert g.pda is not None
    return Artifact.from_compiled(g, vocab)


@pytest.mark.parametrize(("grammar", "cfg", "start", "max_depth"), [
    (PAIR_IR, PAIR_CFG, "v", 1), (PAIR_IR, PAIR_CFG, "v", 2), (PAIR_IR, PAIR_CFG, "v", 3),
    (LIST_IR, LIST_CFG, "v", 2), (LIST_IR, LIST_CFG, "v", 3), (LIST_IR, LIST_CFG, "v", 4),
    (MUT_IR, MUT_CFG, "a", 3), (MUT_IR, MUT_CFG, "a", 5),
], ids=lambda x: x if isinstance(x, (int, str)) else None)
def test_worst_case_length_matches_the_enumerated_language(grammar: Grammar, cfg: Cfg, start: str, max_depth: int,
                                                          byte_vocab: Vocabulary) -> None:
    art = _art(grammar, byte_vocab, max_depth)
    words = language(cfg, start, max_depth)
    assert art.pda is not None
    bound = worst_case_length(art.pda, max_depth)
    assert bound.bounded and bound.max_bytes == max(map(len, words))
    assert bound.max_tokens == bound.max_bytes + 1
    assert bound.stack_remaining((0,)) == bound.max_bytes
    assert length_bound(art).max_bytes == bound.max_bytes
    # the matcher agrees with the oracle on the longest words (the bound is a real output)
    for w in (x for x in words if len(x) == bound.max_bytes):
        m = _matcher(art)
        assert m.accept_string(w) and m.can_terminate()
        assert bound.stack_remaining(m.config[0]) == 0


def test_worst_case_of_deep_pairs_is_exact_and_budget_is_capped(byte_vocab: Vocabulary) -> None:
    art = _art(PAIR_IR, byte_vocab, 300)
    bound = length_bound(art)
    expected = 1
    for _ in range(299):  # W(d) = 2 W(d + 1) + 3, W(max_depth) = 1
        expected = 2 * expected + 3
    assert bound.max_bytes == expected and expected > 2**256
    budget, reason = resolve_budget("auto", bound)
    assert budget == AUTO_TOKEN_CAP and "about" in reason and "e90" in reason


def test_worst_case_of_a_pda_needs_its_depth(byte_vocab: Vocabulary) -> None:
    art = _art(PAIR_IR, byte_vocab, 3)
    assert art.pda is not None
    with pytest.raises(ValueError, match="max_depth"):
        worst_case_length(art.pda)


@pytest.mark.parametrize(("grammar", "max_depth", "rules"), [
    (STAR_IR, 3, ("v",)),
    (CALL_LOOP_IR, 3, ("a",)),
    (CALL_LOOP_IR, 1, None),  # at depth 1 "b" cannot be called: "()" only
])
def test_unbounded_recursive_grammars_name_the_loop(grammar: Grammar, max_depth: int, rules: tuple[str, ...] | None,
                                                     byte_vocab: Vocabulary) -> None:
    art = _art(grammar, byte_vocab, max_depth)
    bound = length_bound(art)
    if rules is None:
        assert bound.max_bytes == 2
        return
    assert not bound.bounded and bound.max_tokens is None
    assert bound.loop and bound.loop_rules == rules
    assert bound.stack_remaining((0,)) is None
    # the witness is a loop: the prefix followed by any number of loops stays a valid prefix
    for k in range(5):
        m = _matcher(art)
        assert m.accept_string(bound.loop_prefix + bound.loop * k), (bound.loop_prefix, bound.loop, k)
    assert "unbounded" in resolve_budget("auto", bound)[1]


def test_call_loop_witness_repeats_a_whole_callee(byte_vocab: Vocabulary) -> None:
    bound = length_bound(_art(CALL_LOOP_IR, byte_vocab, 3))
    assert (bound.loop_prefix, bound.loop) == (b"(", b"<>")


def test_byte_vocabulary_proves_eos_reachability(byte_vocab: Vocabulary) -> None:
    for grammar in (PAIR_IR, STAR_IR, MUT_IR):
        r = eos_reachability(_art(grammar, byte_vocab, 4), byte_vocab)
        assert r.proved and r.method == "single-byte tokens" and r.counterexample is None


def test_configuration_graph_proves_reachability_without_every_byte() -> None:
    # no token spells "x" alone, but "(x)" does, and "x" is never needed to finish
    vocab = Vocabulary.from_tokens(["(", ")", "<", ">", "(x)", "EOS"], eos="EOS")
    r = eos_reachability(_art(MUT_IR, vocab, 4), vocab)
    assert r.proved and r.method == "configuration graph" and r.counterexample is None
    assert r.states > 3


def test_configuration_graph_finds_a_stack_that_tokens_cannot_close() -> None:
    # "]" only comes inside "[1]": after a lone "[" no token can ever close it
    vocab = Vocabulary.from_tokens(["[", "1", "[1]", "EOS"], eos="EOS")
    art = _art(Grammar("v", (("v", alt(seq(lit("["), opt(V), lit("]")), lit("1"))),)), vocab, 3)
    r = eos_reachability(art, vocab)
    assert not r.proved and r.method == "configuration graph"
    assert r.counterexample == (vocab.token_id("["),)
    m = _matcher(art)
    assert all(m.accept_token(t) for t in r.counterexample)
    assert not m.can_terminate()


def test_configuration_graph_budget_is_not_a_proof() -> None:
    vocab = Vocabulary.from_tokens(["(", ")", "<", ">", "(x)", "EOS"], eos="EOS")
    r = eos_reachability(_art(MUT_IR, vocab, 6), vocab, max_configs=3)
    assert not r.proved and r.counterexample is None and r.detail.startswith("undecided")


@pytest.mark.parametrize("max_depth", [2, 3, 4])
def test_adversary_ends_with_eos_exactly_at_the_worst_case(max_depth: int, byte_vocab: Vocabulary) -> None:
    art = _art(PAIR_IR, byte_vocab, max_depth)
    bound = length_bound(art)
    adv = Adversary(art, byte_vocab, bound)
    logits = np.zeros(byte_vocab.vocab_size, dtype=np.float32)
    logits[byte_vocab.eos_ids[0]] = 10.0  # the model wants to stop at once
    m = _matcher(art)
    picks: list[int] = []
    while not m.is_terminated():
        t = adv.choose(m.config, m.allowed_token_ids(), logits)
        assert t >= 0 and m.accept_token(t)
        picks.append(t)
    assert picks[-1] in byte_vocab.eos_ids and len(picks) == bound.max_tokens
    words = language(PAIR_CFG, "v", max_depth)
    assert byte_vocab.decode(picks[:-1]) in words


def test_adversary_decode_on_a_recursive_artifact(byte_vocab: Vocabulary) -> None:
    art = _art(MUT_IR, byte_vocab, 4)
    bound = length_bound(art)
    assert bound.max_tokens is not None
    logits = np.random.default_rng(0).normal(size=byte_vocab.vocab_size).astype(np.float32)
    run = decode(FixedLogits(logits), [[]], artifact=art, eos_ids=art.eos_token_ids,
                 token_bytes=byte_vocab.token_bytes, max_tokens=bound.max_tokens + 5,
                 adversary=Adversary(art, byte_vocab, bound))
    out = run.outputs[0]
    assert out.finish == "eos" and out.num_tokens == bound.max_tokens


def test_trace_rows_carry_the_stack_depth(byte_vocab: Vocabulary) -> None:
    art = _art(PAIR_IR, byte_vocab, 3)
    t = trace_text(art, byte_vocab, "[[1,1],1]")
    assert t.finish == "eos"
    m = _matcher(art)
    expected = []
    for tok in [*byte_vocab.encode("[[1,1],1]"), byte_vocab.eos_ids[0]]:
        expected.append(m.depth)
        assert m.accept_token(tok)
    assert [r.depth for r in t.rows] == expected
    assert max(expected) == 3 and expected[0] == 1
    doc = t.to_json()
    assert [s["depth"] for s in doc["steps"]] == expected
    # greedy decoding records depth too
    logits = np.zeros(byte_vocab.vocab_size, dtype=np.float32)
    logits[ord("[")] = 3.0
    logits[ord("1")] = 2.0
    logits[ord(",")] = 1.0
    d = trace_decode(art, byte_vocab, FixedLogits(logits), [], max_tokens=40)
    assert d.finish == "eos" and d.output == b"[[1,1],[1,1]]"
    assert max(r.depth for r in d.rows) == 3 and d.rows[0].depth == 1


def test_trace_of_a_rejected_token_in_a_recursive_grammar(byte_vocab: Vocabulary) -> None:
    art = _art(PAIR_IR, byte_vocab, 2)
    t = trace_text(art, byte_vocab, "[[")
    assert t.finish == "rejected" and t.prefix == b"["
    assert sorted(c.text for c in t.allowed_there) == ["1"]


def test_run_check_on_a_recursive_grammar_ends_every_output_with_eos(byte_vocab: Vocabulary) -> None:
    art = _art(MUT_IR, byte_vocab, 4)
    bound = length_bound(art)
    report = run_check(art, byte_vocab,
                       lambda: FixedLogits(np.random.default_rng(5).normal(size=byte_vocab.vocab_size)
                                           .astype(np.float32)),
                       ["give me one"], lambda p: [], eos_ids=byte_vocab.eos_ids, samples=4, temperature=1.0,
                       adversarial=True, baseline=False)
    assert report.passed, report.to_json(byte_vocab)
    doc = report.to_json(byte_vocab)
    assert doc["budget"]["max_tokens"] == bound.max_tokens and doc["budget"]["worst_case_bytes"] == bound.max_bytes
    assert doc["eos_reachability"]["proved"]
    c, a = doc["modes"]["constrained"], doc["modes"]["adversarial"]
    assert c["finish"] == {"eos": 4} and c["grammar_failures"] == 0
    assert a["finish"] == {"eos": 1} and a["tokens_max"] == bound.max_tokens
    json.dumps(doc)


def test_judge_walks_recursive_outputs_through_a_matcher(byte_vocab: Vocabulary) -> None:
    art = _art(PAIR_IR, byte_vocab, 3)
    judge = Judge(art, byte_vocab)
    assert judge(Output(byte_vocab.encode("[[1,1],1]"), "eos")).grammar_ok is True
    assert judge(Output(byte_vocab.encode("[[1,1],1"), "length")).grammar_ok is False  # not complete
    assert judge(Output(byte_vocab.encode("[[1,1],[1,1]]"), "eos")).grammar_ok is True
    assert judge(Output(byte_vocab.encode("[[[1,1],1],1]"), "eos")).grammar_ok is False  # four levels


def test_huge_worst_cases_stay_exact_in_json(byte_vocab: Vocabulary) -> None:
    from maskc.artifacts.check import CheckReport

    art = _art(PAIR_IR, byte_vocab, 80)
    bound = length_bound(art)
    assert bound.max_bytes is not None and bound.max_bytes > 2**63
    reach = eos_reachability(art, byte_vocab)
    report = CheckReport(AUTO_TOKEN_CAP, "x", bound, reach, [], [])
    assert report.to_json(byte_vocab)["budget"]["worst_case_bytes"] == str(bound.max_bytes)
    assert isinstance(bound, LengthBound)
