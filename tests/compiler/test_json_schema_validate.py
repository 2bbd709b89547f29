"""Schemas are checked before they compile: against their draft's metaschema, for nesting
depth, and for the state budget of counted repeats."""

from __future__ import annotations

import json
import socket
from typing import Any

import orjson
import pytest

import maskc
from maskc.compiler.errors import SchemaError, StateLimitExceeded, UnsupportedKeyword
from maskc.compiler.frontends.json_schema import schema_to_ir
from maskc.compiler.frontends.json_schema import arrays
from maskc.compiler.frontends.json_schema.validate import MAX_SCHEMA_NESTING, check_schema
from maskc.compiler.options import CompileOptions, Limits
from maskc.compiler.pipeline import source_of
from maskc.compiler.vocab import Vocabulary
from tests.helpers import accepts, compact, schema_dfa

# -- the metaschema ----------------------------------------------------------------------------

NULL_KEYWORDS = [
    ({"type": "string", "maxLength": None}, "/maxLength"),
    ({"type": "string", "minLength": None}, "/minLength"),
    ({"type": "number", "minimum": None}, "/minimum"),
    ({"type": "string", "pattern": None}, "/pattern"),
    ({"type": "string", "format": None}, "/format"),
    ({"type": None}, "/type"),
    ({"type": "array", "maxItems": None}, "/maxItems"),
    ({"type": "array", "minItems": None}, "/minItems"),
    ({"properties": {"a": {"type": "array", "items": {"maxLength": None}}}}, "/properties/a/items/maxLength"),
]


@pytest.mark.parametrize(("schema", "pointer"), NULL_KEYWORDS)
def test_null_keyword_is_refused_with_its_pointer(schema: Any, pointer: str) -> None:
    with pytest.raises(SchemaError) as e:
        schema_to_ir(schema, CompileOptions())
    assert not isinstance(e.value, UnsupportedKeyword)
    assert e.value.pointer == pointer
    assert "null" in e.value.reason and "draft 2020-12" in e.value.reason


@pytest.mark.parametrize(("schema", "pointer", "words"), [
    ({"properties": {"a": {"type": "strin"}}}, "/properties/a/type", "not a type name"),
    ({"type": "string", "maxLength": -1}, "/maxLength", "minimum"),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "maxLength": 1.5}, "/maxLength", "draft 7"),
    ({"required": "a"}, "/required", "array"),
    ({"$schema": None}, "/$schema", "string"),
])
def test_metaschema_message_names_the_keyword_and_draft(schema: Any, pointer: str, words: str) -> None:
    with pytest.raises(SchemaError) as e:
        check_schema(schema)
    assert e.value.pointer == pointer
    assert words in e.value.reason


def test_valid_schema_still_compiles_and_accepts_its_values() -> None:
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
              "properties": {"s": {"type": "string", "maxLength": 3, "pattern": "^[a-z]*$"},
                             "n": {"type": "integer", "minimum": 0}}, "required": ["s", "n"]}
    dfa = schema_dfa(schema)
    assert dfa.accepts(compact({"s": "ab", "n": 3}))
    assert not dfa.accepts(compact({"s": "abcd", "n": 3}))


@pytest.mark.parametrize(("schema", "accepted", "rejected"), [
    # draft 4, declared: exclusiveMinimum is a boolean there
    ({"$schema": "http://json-schema.org/draft-04/schema#", "type": "number", "minimum": 0,
      "exclusiveMinimum": True}, [1, 0.5], [0, -1]),
    # undeclared, valid in draft 4 only: accepted, as most such schemas never say their draft
    ({"type": "integer", "maximum": 10, "exclusiveMaximum": True}, [9], [10]),
    # undeclared, draft 7's tuple form of items
    ({"type": "array", "items": [{"type": "integer"}], "additionalItems": False}, [[1], []], [[1, 2]]),
    ({"$schema": "http://json-schema.org/draft-07/schema", "type": "string", "maxLength": 1}, ["a"], ["ab"]),
])
def test_schemas_valid_in_their_own_draft_compile(schema: Any, accepted: list[Any], rejected: list[Any]) -> None:
    dfa = schema_dfa(schema)
    assert all(dfa.accepts(compact(v)) for v in accepted)
    assert not any(dfa.accepts(compact(v)) for v in rejected)


def test_draft_2020_12_declared_refuses_a_boolean_exclusive_minimum() -> None:
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "number", "minimum": 0,
              "exclusiveMinimum": True}
    with pytest.raises(SchemaError) as e:
        schema_to_ir(schema, CompileOptions())
    assert e.value.pointer == "/exclusiveMinimum"


@pytest.mark.parametrize(("schema", "drafts"), [
    # undeclared and valid in draft 7: one fast check, 2020-12's never runs
    ({"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}}, "$defs": {"b": {}}}, ["7"]),
    # valid in draft 4 only: 7 and 6 fail first
    ({"type": "integer", "maximum": 10, "exclusiveMaximum": True}, ["7", "6", "4"]),
    # declared: its own draft alone
    ({"$schema": "http://json-schema.org/draft-06/schema#", "type": "string"}, ["6"]),
    # valid in none: 2020-12 names the violation
    ({"type": "string", "maxLength": None}, ["7", "6", "4", "202012"]),
])
def test_an_undeclared_schema_is_checked_against_the_faster_drafts_first(
        schema: Any, drafts: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from maskc.compiler.frontends.json_schema import validate

    used: list[str] = []
    real = validate._meta_validator

    def recording(cls: Any) -> Any:
        used.append(cls.__name__.removeprefix("Draft").removesuffix("Validator"))
        return real(cls)

    monkeypatch.setattr(validate, "_meta_validator", recording)
    try:
        check_schema(schema)
    except SchemaError as e:
        assert drafts[-1] == "202012" and "draft 2020-12" in e.reason
    else:
        assert drafts[-1] != "202012"
    assert used == drafts


@pytest.mark.parametrize("uri", ["http://[bad", "", "https://example.com/my-dialect"])
def test_unknown_schema_uri_falls_back_to_draft_2020_12(uri: str) -> None:
    check_schema({"$schema": uri, "type": "string"})
    with pytest.raises(SchemaError, match="draft 2020-12"):
        check_schema({"$schema": uri, "type": "string", "maxLength": None})


def test_pattern_is_not_judged_by_python_re() -> None:
    # \p{L} is ECMA-262 (with the u flag), not Python re: the metaschema's "format": "regex"
    # must stay an annotation
    check_schema({"type": "string", "pattern": "^\\p{L}+$"})


def test_metaschema_validation_makes_no_network_access(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    for schema in ({"$schema": "http://json-schema.org/draft-04/schema#", "type": "string"},
                   {"$schema": "https://json-schema.org/draft/2019-09/schema", "type": "string"},
                   {"$schema": "https://example.com/my-dialect", "type": "string"},
                   {"$ref": "https://example.com/remote.json", "$defs": {"a": {"type": "string"}}},
                   {"maxLength": None}):
        try:
            check_schema(schema)
        except SchemaError:
            pass


# -- nesting -----------------------------------------------------------------------------------


def _items_nest(n: int) -> Any:
    s: Any = {"type": "string"}
    for _ in range(n):
        s = {"type": "array", "items": s}
    return s


def _properties_nest(n: int, leaf: Any = "string") -> Any:
    s: Any = {"type": leaf}
    for _ in range(n):
        s = {"type": "object", "properties": {"x": s}, "required": ["x"]}
    return s


@pytest.mark.parametrize(("schema", "step"), [(_items_nest(300), "/items"), (_properties_nest(300), "/properties/x")])
def test_deep_nesting_is_a_schema_error_with_its_pointer(schema: Any, step: str) -> None:
    with pytest.raises(SchemaError) as e:
        schema_to_ir(schema, CompileOptions())
    assert f"deeper than {MAX_SCHEMA_NESTING} levels" in e.value.reason
    assert e.value.pointer.startswith(step * 3)
    # the canonical source (the artifact's grammar identity) refuses it the same way,
    # rather than with orjson's recursion limit
    with pytest.raises(SchemaError, match="deeper than"):
        source_of("json_schema", schema)


def test_nesting_at_the_limit_compiles() -> None:
    # n nested objects put the innermost schema at level 2n + 1 and its "type" list one below
    n = (MAX_SCHEMA_NESTING - 2) // 2
    schema = _properties_nest(n, ["string"])
    value: Any = "a"
    for _ in range(n):
        value = {"x": value}
    assert schema_dfa(schema).accepts(compact(value))
    with pytest.raises(SchemaError, match="deeper than"):
        check_schema({"wrapped": schema})


# -- the state budget of counted repeats -------------------------------------------------------

_ITEM = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 20}, "b": {"type": "integer"}},
         "required": ["a", "b"]}


def test_counted_max_items_over_budget_is_a_state_limit_with_numbers() -> None:
    schema = {"type": "array", "items": _ITEM, "maxItems": 10}
    with pytest.raises(StateLimitExceeded) as e:
        schema_to_ir(schema, CompileOptions(limits=Limits(max_states=4000)))
    assert not isinstance(e.value, UnsupportedKeyword)
    assert e.value.pointer == "/maxItems"
    assert e.value.limit == 1000 and e.value.got is not None and e.value.got > 1000
    assert "maxItems 10" in e.value.message and "--max-states" in (e.value.hint or "")
    # a larger budget compiles it, and lenient mode drops the bound and records it
    schema_to_ir(schema, CompileOptions(limits=Limits(max_states=50_000)))
    _, dropped = schema_to_ir(schema, CompileOptions(lenient=True, limits=Limits(max_states=4000)))
    assert [d["keyword"] for d in dropped] == ["maxItems"]


def test_counted_max_items_message_gives_the_item_size_not_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    # a long bound makes the first estimate's cap tiny (a quarter of the budget per item):
    # the refusal still names the item's real size and a budget that would compile it
    item = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 60}, "b": {"type": "integer"}},
            "required": ["a", "b"]}
    schema = {"type": "array", "items": item, "maxItems": 50}
    with pytest.raises(StateLimitExceeded) as e:
        schema_to_ir(schema, CompileOptions(limits=Limits(max_states=2000)))
    each = int(e.value.message.split("items of ~")[1].split()[0])
    assert each > 2000 // 4 // 49 + 1  # more than the cap the over-budget test used
    needed = int((e.value.hint or "").split("--max-states to ")[1].split()[0])
    schema_to_ir(schema, CompileOptions(limits=Limits(max_states=needed)))
    # an item over the whole budget: no number that would not compile is promised
    with pytest.raises(StateLimitExceeded) as e:
        schema_to_ir(schema, CompileOptions(limits=Limits(max_states=40)))
    assert "over 40 states each" in e.value.message
    assert "item alone is over max_states (40)" in (e.value.hint or "") and "--max-states to" not in (e.value.hint or "")
    # no time to size it: the hint says what is known, a lower bound (items of three bytes,
    # 44 of which a long token may span: 46 are copied, not counted)
    schema = {"type": "array", "items": {"type": "string", "maxLength": 60}, "maxItems": 46}
    monkeypatch.setattr(arrays, "ITEM_SIZE_SECONDS", 0.0)
    with pytest.raises(StateLimitExceeded) as e:
        schema_to_ir(schema, CompileOptions(limits=Limits(max_states=2000)))
    assert "items of over 11 states each" in e.value.message
    assert "--max-states to over 2024 (the item is over 11 states)" in (e.value.hint or "")


def test_max_items_over_long_items_counts() -> None:
    # An item of at least 23 bytes: a token of 128 bytes ends at most 6 of them, so 100
    # items are a counted loop and copies near the bound, not 100 copies of the item (over
    # a quarter of the default state budget)
    item = {"type": "object", "properties": {"key": {"type": "string", "pattern": "^[a-z]{1,60}$"},
                                             "value": {"type": "string", "minLength": 1, "maxLength": 60}},
            "required": ["key", "value"], "additionalProperties": False}
    schema = {"type": "array", "items": item, "maxItems": 100}
    one = '{"key":"k","value":"v"}'
    assert accepts(schema, "[" + ",".join([one] * 100) + "]")
    assert not accepts(schema, "[" + ",".join([one] * 101) + "]")


def test_a_count_over_items_with_counted_loops_of_their_own_nests_them(byte_vocab: Vocabulary) -> None:
    # The item compiles alone with its maxLength a counted loop (a few hundred states); as
    # the item of maxItems it keeps that loop, nested in the loop that counts the items,
    # where copying the item with its string unrolled was over the budget.
    item = {"type": "object", "properties": {"text": {"type": "string", "maxLength": 5000}},
            "required": ["text"], "additionalProperties": False}
    alone = maskc.compile_json_schema(item, byte_vocab)
    assert alone.num_states < 1000
    art = maskc.compile_json_schema({"type": "array", "items": item, "maxItems": 100}, byte_vocab)
    c = art.dfa.counters
    assert c is not None and c.nested and art.num_states < 20 * alone.num_states

    def accepts(texts: list[str]) -> bool:
        m = art.matcher()
        return m.accept_string(orjson.dumps([{"text": t} for t in texts])) and m.can_terminate()

    assert accepts(["a"] * 100) and not accepts(["a"] * 101) and accepts([])
    assert accepts(["b"] * 50 + ["x" * 5000] + ["c"] * 49) and not accepts(["b"] * 50 + ["x" * 5001])
    assert accepts(["é" * 5000, "y"]) and not accepts(["y", "é" * 5001])
    # an item whose repeats are all short (copied alone too) keeps the budget hint
    short = {"type": "array", "items": {"type": "string", "maxLength": 60}, "maxItems": 50}
    with pytest.raises(StateLimitExceeded) as e:
        schema_to_ir(short, CompileOptions(limits=Limits(max_states=2000)))
    hint = e.value.hint or ""
    assert "could not nest" not in hint and "--max-states to" in hint
    needed = int(hint.split("--max-states to ")[1].split()[0])
    schema_to_ir(short, CompileOptions(limits=Limits(max_states=needed)))


def test_limits_are_part_of_the_options_and_the_artifact(byte_vocab: Vocabulary) -> None:
    small = maskc.Limits(max_states=5000, max_seconds=60)
    art = maskc.compile_json_schema({"type": "boolean"}, byte_vocab,
                                    options=maskc.CompileOptions(limits=small))
    assert art.options["limits"]["max_states"] == 5000
    assert art.options["limits"]["max_seconds"] == 60.0
    assert CompileOptions(limits=small).canonical_json() != CompileOptions().canonical_json()
    json.dumps(art.options)


@pytest.mark.parametrize("bad", [dict(max_states=0), dict(max_seconds=-1.0), dict(max_seconds=float("inf")),
                                 dict(max_states=True)])
def test_limits_refuse_non_positive_values(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Limits(**bad)


def test_scaled_limits_grow_the_nfa_bound_with_max_states() -> None:
    assert Limits.scaled() == Limits()
    big = Limits.scaled(max_states=1_000_000, max_seconds=10)
    assert big.max_nfa_states == 10_000_000 and big.max_seconds == 10
    assert Limits.scaled(max_states=100).max_nfa_states == Limits().max_nfa_states


def test_the_front_end_stops_at_the_compile_deadline() -> None:
    # Recursive oneOf branches whose disjointness needs a large product automaton: the proof
    # runs under the compile's deadline, and running out is a time limit, not a hang.
    from maskc.compiler.errors import TimeLimitExceeded
    from maskc.compiler.frontends.json_schema import schema_to_ir
    from maskc.compiler.options import CompileOptions, Limits

    schema = {"$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
              "oneOf": [{"$ref": "#/$defs/t"},
                        {"type": "array", "items": {"type": "string", "pattern": "^(a|b){300}$"}}]}
    with pytest.raises(TimeLimitExceeded) as e:
        schema_to_ir(schema, CompileOptions(limits=Limits(max_seconds=1e-6)))
    assert e.value.limit == pytest.approx(1e-6)


def test_every_subschema_is_compiled_under_the_deadline() -> None:
    # Merges and negations can multiply without any automaton being built (JSON Schema
    # Store's jfrog-pipelines.json ran for minutes): each subschema checks the deadline.
    from maskc.compiler.errors import TimeLimitExceeded
    from maskc.compiler.frontends.json_schema import schema_to_ir
    from maskc.compiler.options import CompileOptions, Limits

    schema = {"type": "object", "properties": {"a": {"allOf": [{"type": "integer"}, {"minimum": 3}]}}}
    schema_to_ir(schema, CompileOptions())
    with pytest.raises(TimeLimitExceeded) as e:
        schema_to_ir(schema, CompileOptions(limits=Limits(max_seconds=1e-9)))
    assert e.value.limit == pytest.approx(1e-9)


def test_one_deadline_covers_every_stage(monkeypatch: pytest.MonkeyPatch, byte_vocab: maskc.Vocabulary) -> None:
    # The front end, rule inlining, automata and alignment share the compile's one limit: a
    # front end that used it up leaves no fresh allowance to the stages after it.
    import time

    from maskc.compiler import pipeline
    from maskc.compiler.errors import TimeLimitExceeded
    from maskc.compiler.frontends.registry import frontend
    from maskc.compiler.options import CompileOptions, Limits

    fe = frontend("regex")

    class Slow:
        def __getattr__(self, name: str) -> Any:
            return getattr(fe, name)

        def to_grammar(self, source: Any, options: CompileOptions) -> Any:
            got = fe.to_grammar(source, options)
            time.sleep(0.3)
            return got

    monkeypatch.setattr(pipeline, "frontend", lambda kind: Slow())
    vocab = byte_vocab
    options = CompileOptions(limits=Limits(max_seconds=0.25))
    with pytest.raises(TimeLimitExceeded) as e:
        pipeline.compile_source("regex", "ab+c", vocab, options)
    assert e.value.limit == pytest.approx(0.25)
    pipeline.compile_source("regex", "ab+c", vocab, CompileOptions(limits=Limits(max_seconds=30)))


def test_rule_inlining_stops_at_the_deadline() -> None:
    import time

    from maskc.compiler.errors import TimeLimitExceeded
    from maskc.compiler.ir import Grammar, lit, rep, seq
    from maskc.compiler.rules import resolve_rules

    grammar = Grammar("s", (("s", seq(*[rep(lit(f"k{i}"), 0, 2) for i in range(3000)])),))
    assert resolve_rules(grammar, deadline=time.monotonic() + 60).regular
    with pytest.raises(TimeLimitExceeded):
        resolve_rules(grammar, deadline=time.monotonic() - 1)
