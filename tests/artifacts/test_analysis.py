"""Worst-case length, token-level EOS reachability and the adversarial sampler, against
independent oracles (enumerated languages, hand-built token graphs)."""

from __future__ import annotations

import numpy as np
import pytest

import maskc
from maskc.artifacts.analysis import UNBOUNDED, Adversary, eos_reachability, worst_case_length
from maskc.compiler.dfa import Dfa
from maskc.compiler.vocab import Vocabulary
from tests.helpers import regex_dfa, schema_dfa


def _language(dfa: Dfa, limit: int = 20_000) -> list[bytes]:
    """Every accepted string of a finite language, by depth-first enumeration (the oracle)."""
    reps: dict[int, list[int]] = {}
    for b in range(256):
        reps.setdefault(int(dfa.byte_class[b]), []).append(b)
    found: list[bytes] = []
    stack: list[tuple[int, bytes]] = [(0, b"")]
    while stack:
        s, prefix = stack.pop()
        if dfa.accepting[s]:
            found.append(prefix)
        for c, t in enumerate(dfa.trans[s].tolist()):
            if t >= 0:
                for b in reps[c]:
                    stack.append((t, prefix + bytes([b])))
        assert len(stack) < limit, "language too large for the oracle"
    return found


@pytest.mark.parametrize("pattern", [
    "ab|abc", "a{2,5}", "[ab]{0,3}c?", "x(yz|w){1,3}", "(true|false|null)", "[0-9]{1,4}(\\.[0-9]{1,2})?",
])
def test_worst_case_length_matches_the_enumerated_language(pattern: str) -> None:
    dfa = regex_dfa(pattern)
    bound = worst_case_length(dfa)
    assert bound.bounded
    assert bound.max_bytes == max(map(len, _language(dfa)))
    assert bound.max_tokens == bound.max_bytes + 1
    assert int(bound.remaining[0]) == bound.max_bytes


def test_worst_case_length_of_schemas() -> None:
    assert worst_case_length(schema_dfa({"type": "boolean"})).max_bytes == len("false")
    assert worst_case_length(schema_dfa({"enum": ["a", "bcd"]})).max_bytes == len('"bcd"')
    # a character is at most 6 bytes (a \uXXXX escape); surrogate pairs are never generated
    assert worst_case_length(schema_dfa({"type": "string", "maxLength": 2})).max_bytes == 2 + 2 * 6
    pretty = schema_dfa({"type": "object", "properties": {"a": {"const": 1}}, "required": ["a"]}, "pretty")
    assert worst_case_length(pretty).max_bytes == len('{\n  "a": 1\n}')


@pytest.mark.parametrize(("pattern", "prefix", "loop"), [
    ("(ab)*c", b"", b"ab"),
    ("x(ab)*c", b"x", b"ab"),
    ("q[0-9]+", b"q0", b"0"),
])
def test_unbounded_grammars_name_a_loop(pattern: str, prefix: bytes, loop: bytes) -> None:
    dfa = regex_dfa(pattern)
    bound = worst_case_length(dfa)
    assert not bound.bounded and bound.max_tokens is None
    assert (bound.loop_prefix, bound.loop) == (prefix, loop)
    # the witness really is a loop: the prefix followed by any number of loops stays live
    for k in range(4):
        assert dfa.walk(0, bound.loop_prefix + bound.loop * k) >= 0
    assert int(bound.remaining[0]) == UNBOUNDED


def test_unbounded_schema_loop_is_an_unbounded_number() -> None:
    bound = worst_case_length(schema_dfa({"type": "object", "properties": {"x": {"type": "number"}}}))
    assert not bound.bounded
    assert bound.loop == b"0"


def test_byte_level_vocabularies_prove_eos_reachability(deepseek: Vocabulary) -> None:
    art = maskc.compile_json_schema({"type": "object", "properties": {"n": {"type": "integer"}}}, deepseek)
    r = eos_reachability(art, deepseek)
    assert r.proved and r.method == "single-byte tokens" and r.counterexample is None


def test_token_graph_proves_reachability_without_single_byte_tokens() -> None:
    vocab = Vocabulary.from_tokens(["ab", "c", "EOS"], eos="EOS")
    art = maskc.compile_regex("(ab)+c", vocab)
    r = eos_reachability(art, vocab)
    assert r.proved and r.method == "token graph"
    assert r.states == 3  # start, after some "ab"s, after "c"


@pytest.mark.parametrize(("tokens", "pattern", "witness"), [
    (["a", "ab", "b", "EOS"], "ab?c|b", ["a"]),  # no token carries the "c" the grammar needs
    (["aa", "b", "EOS"], "a(aa)*|b", ["aa"]),  # even counts of "a" only: the odd end is out of reach
    (["a", "ab", "EOS"], "ab?c", []),  # not even the start can finish: the empty prefix
])
def test_token_dead_ends_give_a_counterexample(tokens: list[str], pattern: str, witness: list[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    vocab = Vocabulary.from_tokens(tokens, eos="EOS")
    # compile now refuses a grammar whose start cannot reach EOS (the last row); the analysis
    # must still judge such an artifact (e.g. one written by an older compiler)
    monkeypatch.setattr("maskc.compiler.pipeline.prove_spellable", lambda *a, **k: None)
    art = maskc.compile_regex(pattern, vocab)
    r = eos_reachability(art, vocab)
    assert not r.proved and r.method == "token graph"
    assert r.counterexample == tuple(vocab.token_id(t) for t in witness)
    # the counterexample is a real dead end: accepted so far, and nothing leads to EOS
    m = art.matcher()
    assert all(m.accept_token(t) for t in r.counterexample)
    assert not m.can_terminate()


def test_adversary_prefers_the_longest_continuation_over_the_model() -> None:
    vocab = Vocabulary.from_tokens(["a", "b", "c", "cc", "EOS"], eos="EOS")
    art = maskc.compile_regex("a|bc{1,3}", vocab)
    adv = Adversary(art, vocab, worst_case_length(art.dfa))
    logits = np.array([9.0, 0.0, 5.0, 4.0, 8.0], dtype=np.float32)
    m = art.matcher()
    picks = []
    while not m.is_terminated():
        t = adv.choose(m.state, m.allowed_token_ids(), logits)
        picks.append(vocab.token_bytes[t].decode())
        assert m.accept_token(t)
    # "b" over the model's "a"; then single "c"s (more steps than "cc"); EOS only at the end
    assert picks == ["b", "c", "c", "c", "EOS"]
    assert len(picks) == worst_case_length(art.dfa).max_tokens


def test_adversary_breaks_ties_by_logit() -> None:
    vocab = Vocabulary.from_tokens(["x", "y", "EOS"], eos="EOS")
    art = maskc.compile_regex("[xy]", vocab)
    adv = Adversary(art, vocab, worst_case_length(art.dfa))
    assert adv.choose(0, art.matcher().allowed_token_ids(), np.array([1.0, 2.0, 0.0], dtype=np.float32)) == 1


def test_static_analyses_live_in_the_compiler() -> None:
    import maskc.artifacts.analysis as runtime_side
    import maskc.compiler.analysis as compiler_side

    assert runtime_side.worst_case_length is compiler_side.worst_case_length
    assert runtime_side.LengthBound is compiler_side.LengthBound
    with pytest.raises(ValueError, match="pushdown"):
        worst_case_length(regex_dfa("ab")).stack_remaining((0,))


def test_a_regular_adversary_takes_a_state() -> None:
    vocab = Vocabulary.from_tokens(["x", "y", "EOS"], eos="EOS")
    art = maskc.compile_regex("[xy]", vocab)
    adv = Adversary(art, vocab, worst_case_length(art.dfa))
    with pytest.raises(TypeError):
        adv.choose(((0,),), art.matcher().allowed_token_ids(), np.zeros(3, dtype=np.float32))
