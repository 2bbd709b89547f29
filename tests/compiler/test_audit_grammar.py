"""The grammar audit: planted hazards on tiny vocabularies, near misses, and smugglers on a real
tokenizer checked against the runtime matcher."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from maskc.artifacts.artifact import Artifact
from maskc.compiler.audit.grammar import GrammarAudit, audit_grammar, smuggler_ids
from maskc.compiler.audit.states import forced_runs, state_kinds
from maskc.compiler.findings import rules
from maskc.compiler.pipeline import CompiledGrammar, compile_json_schema, compile_regex
from maskc.compiler.vocab import Vocabulary
from tests.conftest import REPO

OBJECT_A = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
            "additionalProperties": False}
PLANTED = ["{", '"', "a", ":", ",", "}", '",', '"}', '{"', '":"', "<eos>"]


def _vocab(tokens: list[str], name: str = "planted") -> Vocabulary:
    return Vocabulary.from_tokens(tokens, eos="<eos>", name=name)


def _state_after(g: CompiledGrammar, prefix: bytes) -> int:
    s = g.dfa.walk(0, prefix)
    assert s >= 0
    return s


def _pairs(g: CompiledGrammar, v: Vocabulary) -> set[tuple[int, bytes]]:
    return {(s, v.token_bytes[t]) for s in range(g.dfa.num_states) for t in smuggler_ids(g, v, s).tolist()}


def test_rules_are_registered_for_audit() -> None:
    ids = {r.id for r in rules("audit")}
    assert {"smuggler", "boundary-token", "whitespace-only-state", "noncanonical-forced", "eos-only-state",
            "unspellable-state"} <= ids


def test_planted_smugglers_exactly() -> None:
    # {"a":"<text>"} compact. By hand: after '{' only '"' may follow (then 'a'), so '",' '"}' '":"'
    # break at their second byte; after '{"a' the closing '"' must be followed by ':', so '",' '"}'
    # break; inside the value '"' closes it and only '}' may follow, so '",' and '":"' break.
    v = _vocab(PLANTED)
    g = compile_json_schema(OBJECT_A, v)
    expected = {
        (_state_after(g, b"{"), b'",'), (_state_after(g, b"{"), b'"}'), (_state_after(g, b"{"), b'":"'),
        (_state_after(g, b'{"a'), b'",'), (_state_after(g, b'{"a'), b'"}'),
        (_state_after(g, b'{"a":"'), b'",'), (_state_after(g, b'{"a":"'), b'":"'),
    }
    assert _pairs(g, v) == expected
    audit = audit_grammar(g, v, show=10)
    cat = audit.category("smuggler")
    assert (cat.total.states, cat.total.pairs, cat.total.tokens) == (3, 7, 3)
    assert (cat.by_kind["structural"].states, cat.by_kind["structural"].pairs) == (2, 5)
    assert (cat.by_kind["string"].states, cat.by_kind["string"].pairs) == (1, 2)
    shown = {(e.prefix, e.token) for e in cat.examples}
    assert (b'{"a":"', b'",') in shown and (b"{", b'"}') in shown
    for e in cat.examples:
        assert (g.dfa.walk(0, e.prefix), e.token) in expected
        assert e.detail == "rejected at byte 2 (" + repr(e.token[1:2].decode()) + ")"


def test_planted_boundary_tokens() -> None:
    # Allowed multi-byte tokens with a structural step: '{"' at the start; '":"' after '{"a';
    # '",' '"}' '":"' opening the value (quote + text); '"}' and '{"' inside it (closing quote);
    # '":"' after a backslash (escaped quote, text, closing quote).
    v = _vocab(PLANTED)
    g = compile_json_schema(OBJECT_A, v)
    cat = audit_grammar(g, v, show=10).category("boundary-token")
    assert cat.total.pairs == 8
    assert cat.total.tokens == 4  # '{"', '":"', '",', '"}'
    assert cat.by_kind["string"].pairs == 2


def test_no_smugglers_on_single_byte_tokens(byte_vocab: Vocabulary) -> None:
    g = compile_json_schema(OBJECT_A, byte_vocab)
    audit = audit_grammar(g, byte_vocab)
    assert audit.category("smuggler").total.pairs == 0
    assert audit.category("boundary-token").total.pairs == 0
    assert not [f for f in audit.findings if f.rule in ("smuggler", "boundary-token")]


def test_near_miss_only_valid_multibyte_tokens() -> None:
    # '"}' closes the value and the object: valid inside the value, a smuggler only where a
    # quote opens something else; without '",' and '":"' the value state has none.
    v = _vocab(["{", '"', "a", ":", "}", '"}', "<eos>"])
    g = compile_json_schema(OBJECT_A, v)
    inside = _state_after(g, b'{"a":"x')
    assert smuggler_ids(g, v, inside).size == 0
    assert {v.token_bytes[t] for t in smuggler_ids(g, v, _state_after(g, b"{"))} == {b'"}'}


@pytest.mark.parametrize(("tokens", "expected"), [
    (["a", "b", "c", "d", "e", "ab", "abc", "cde", "<eos>"], [("ab", "cde"), ("abc", "d", "e")]),
    (["a", "b", "c", "d", "e", "abc", "de", "<eos>"], None),  # near miss: both paths agree
])
def test_noncanonical_forced(tokens: list[str], expected: list[tuple[str, ...]] | None) -> None:
    # The toy encoder splits into the fewest tokens; the greedy path takes the longest first.
    v = _vocab(tokens)
    g = compile_regex("abcde", v)
    assert forced_runs(g.dfa) == {0: b"abcde"}
    cat = audit_grammar(g, v).category("noncanonical-forced")
    if expected is None:
        assert cat.total.states == 0 and not cat.examples
        return
    assert cat.total.states == 1
    (e,) = cat.examples
    canonical, greedy = (" ".join(repr(t) for t in part) for part in expected)
    assert (e.state, e.prefix, e.token) == (0, b"", b"abcde")
    assert e.detail == f"canonical {canonical}; greedy path {greedy}"


def test_whitespace_only_states() -> None:
    v = _vocab([" ", "  ", "x", "<eos>"])
    g = compile_regex("  x", v)
    assert audit_grammar(g, v).category("whitespace-only-state").total.states == 2
    near = _vocab([" ", "  ", "x", " x", "<eos>"])  # after one space, ' x' may end the run
    g = compile_regex("  x", near)
    cat = audit_grammar(g, near).category("whitespace-only-state")
    assert cat.total.states == 1 and cat.examples[0].prefix == b""


def test_eos_only_states() -> None:
    v = _vocab(["a", "b", "<eos>"])
    cat = audit_grammar(compile_regex("ab", v), v).category("eos-only-state")
    assert cat.total.states == 1 and cat.examples[0].prefix == b"ab"
    assert audit_grammar(compile_regex("ab?", v), v).category("eos-only-state").total.states == 1  # after 'ab' only
    assert audit_grammar(compile_regex("a(b|c)*", v), v).category("eos-only-state").total.states == 0


def test_unspellable_state() -> None:
    # 'ab' 'd' spells "abd", so the compile succeeds; after the token 'a' the grammar needs 'b'
    # or 'c' and no token begins with either.
    v = _vocab(["a", "ab", "d", "<eos>"])
    g = compile_regex("a[bc]d", v)
    audit = audit_grammar(g, v)
    cat = audit.category("unspellable-state")
    assert cat.total.states == 1 and cat.examples[0].prefix == b"a"
    assert [f.severity for f in audit.findings if f.rule == "unspellable-state"] == ["error"]
    fine = _vocab(["a", "ab", "c", "d", "<eos>"])
    assert audit_grammar(compile_regex("a[bc]d", fine), fine).category("unspellable-state").total.states == 0


def test_state_kinds_of_a_json_object() -> None:
    v = _vocab(PLANTED)
    g = compile_json_schema(OBJECT_A, v)
    kinds = state_kinds(g.dfa)
    assert kinds[0] == "structural" and kinds[_state_after(g, b'{"')] == "literal"
    assert kinds[_state_after(g, b'{"a":"')] == "string" and kinds[_state_after(g, b'{"a":"\\')] == "escape"
    assert kinds[_state_after(g, b'{"a":"\xc3')] == "utf8" and kinds[_state_after(g, b'{"a":""}')] == "end"


def test_findings_cap_with_more() -> None:
    v = _vocab(PLANTED)
    audit = audit_grammar(compile_json_schema(OBJECT_A, v), v, show=1)
    smug = [f for f in audit.findings if f.rule == "smuggler"]
    # one example per kind (string, structural), and a "more" finding for each
    assert len(smug) == 4
    more = sorted(f.data["more"] for f in smug if "more" in f.data)
    assert more == [1, 4]
    assert all(f.pointer.startswith("/states/") for f in smug if "more" not in f.data)
    json.dumps(audit.as_dict())


def test_pushdown_grammar_is_noted(deepseek: Vocabulary) -> None:
    schema = json.loads((REPO / "sample_schemas" / "comment_thread.json").read_text())
    audit = audit_grammar(compile_json_schema(schema, deepseek), deepseek)
    assert audit.pushdown and not audit.categories and "regular grammars only" in audit.note


def test_show_must_be_non_negative() -> None:
    v = _vocab(PLANTED)
    with pytest.raises(ValueError, match="show"):
        audit_grammar(compile_json_schema(OBJECT_A, v), v, show=-1)


# -- real tokenizer: every listed smuggler is rejected by the matcher and admitted by a first-byte mask


def _check_against_matcher(art: Artifact, audit: GrammarAudit, vocab: Vocabulary) -> int:
    checked = 0
    for e in audit.category("smuggler").examples:
        assert e.token_id is not None
        m = art.matcher()
        assert m.accept_string(e.prefix)
        assert m.state == e.state
        assert art.step(e.state, e.token[0]) >= 0  # a first-byte mask admits it
        assert not m.accept_token(e.token_id)  # maskc's mask rejects it
        assert not bool(np.isin(e.token_id, art.allowed_tokens(e.state)))
        # and so does every other smuggler of that state (a deterministic sample)
        ids = smuggler_ids(art, vocab, e.state)
        for t in ids[:: max(1, ids.size // 300)].tolist():
            assert art.step(e.state, vocab.token_bytes[t][0]) >= 0
            assert not m.accept_token(t)
        checked += 1
    for e in audit.category("boundary-token").examples:
        assert e.token_id is not None
        m = art.matcher()
        assert m.accept_string(e.prefix) and m.accept_token(e.token_id)
    return checked


@pytest.mark.parametrize("name", ["tool_call_get_weather", "support_ticket_triage"])
def test_sample_schema_smugglers_are_rejected(deepseek: Vocabulary, name: str) -> None:
    schema: Any = json.loads((REPO / "sample_schemas" / f"{name}.json").read_text())
    g = compile_json_schema(schema, deepseek)
    art = Artifact.from_compiled(g, deepseek)
    audit = audit_grammar(art, deepseek, show=8)
    assert audit.category("smuggler").total.pairs > 0
    assert _check_against_matcher(art, audit, deepseek) >= 8
    # the artifact and the compile give the same report
    assert audit_grammar(g, deepseek, show=8).as_dict() == audit.as_dict()
