"""Array keywords: ``contains``/``minContains``/``maxContains``, ``uniqueItems``,
``unevaluatedItems`` and the draft-7 tuple form, judged byte by byte in both semantics."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

import maskc
from maskc.compiler.errors import EmptyLanguage, StateLimitExceeded, UnsupportedKeyword
from maskc.compiler.frontends.json_schema import schema_to_ir
from maskc.compiler.frontends.json_schema.sequences import finite_values
from maskc.compiler.options import DEFAULT_MAX_DEPTH, CompileOptions, parse_whitespace
from maskc.compiler.vocab import byte_tokenizer
from tests.helpers import compact
from tests.maskbench import serialize

SEMANTICS = ("generation", "exact")
VOCAB = byte_tokenizer()


def _opts(semantics: str, whitespace: str = "compact", lenient: bool = False) -> CompileOptions:
    return CompileOptions(parse_whitespace(whitespace), lenient, semantics=semantics)


class _Judge:
    """A compiled schema on the byte tokenizer: ``accepts(text)`` walks a fresh matcher."""

    def __init__(self, schema: Any, semantics: str, whitespace: str = "compact") -> None:
        self.art = maskc.compile_json_schema(schema, VOCAB, options=_opts(semantics, whitespace))

    def accepts(self, text: bytes) -> bool:
        m = self.art.matcher()
        return bool(m.accept_string(text) and m.can_terminate())


def _dfa(schema: Any, semantics: str, whitespace: str = "compact") -> _Judge:
    return _Judge(schema, semantics, whitespace)


def _check(schema: Any, ok: list[Any], bad: list[Any], semantics: str) -> None:
    """``ok`` values are valid (jsonschema agrees) and accepted; ``bad`` ones are invalid
    and rejected. A ``bytes`` entry is a raw text (a spelling ``json.dumps`` would not write)."""
    dfa = _dfa(schema, semantics)
    validator = jsonschema.Draft202012Validator(schema)
    for v in ok:
        text = v if isinstance(v, bytes) else compact(v)
        assert validator.is_valid(json.loads(text)), v
        assert dfa.accepts(text), v
    for v in bad:
        text = v if isinstance(v, bytes) else compact(v)
        assert not validator.is_valid(json.loads(text)), v
        assert not dfa.accepts(text), v


CONTAINS = [
    ({"type": "array", "contains": {"const": 5}}, [[5], [1, 5], [5, 5, "x"]], [[], [1, 2]]),
    ({"type": "array", "contains": {"const": 1}, "minContains": 2}, [[1, 1], [1, 2, 1]], [[1], [1, 2]]),
    ({"type": "array", "contains": {"const": 1}, "minContains": 2.0}, [[1, 1]], [[1]]),
    ({"type": "array", "contains": {"const": 1}, "maxContains": 1}, [[1], [1, 2], [2, 1, 3]], [[], [1, 1], [1, 2, 1]]),
    ({"type": "array", "contains": {"const": 1}, "minContains": 2, "maxContains": 2}, [[1, 1], [1, 3, 1]], [[1], [1, 1, 1]]),
    ({"type": "array", "contains": {"const": 1}, "minContains": 0, "maxContains": 1}, [[], [2], [1]], [[1, 1]]),
    ({"type": "array", "contains": {"const": 1}, "minContains": 0, "maxContains": 0}, [[], [2, 3]], [[1], [2, 1]]),
    ({"contains": {"const": 1}, "minContains": 3, "maxContains": 1}, ["x", 3], [[], [1], [1, 1, 1]]),
    # spellings: "\u0061" is "a", 2.0 is 2: both count as matches
    ({"type": "array", "contains": {"const": "a"}, "maxContains": 1}, [["a", "b"], b'["a","\\u0062"]'],
     [["a", "a"], b'["a","\\u0061"]', b'["\\u0041","a","\\u0061"]']),
    ({"type": "array", "contains": {"enum": [1, 2]}, "maxContains": 1}, [[1, 3], [2, "x"]], [[1, 2], b"[1,2.0]"]),
    ({"type": "array", "contains": {"type": "integer"}, "maxContains": 1}, [[1, 2.5, "x"]], [[1, 2], b"[1,2.0]"]),
    ({"type": "array", "contains": {"type": "string", "minLength": 2}, "maxContains": 1},
     [["ab", "c", 1]], [["ab", "cd"]]),
    ({"type": "array", "contains": {"minimum": 5}, "maxContains": 1}, [[5, 4]], [[5, 6], [5, 4, "x"]]),
    # items and contains together: merged, or met in a product
    ({"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 5}}, [[5], [1, 7]], [[1, 2], [5, "a"]]),
    ({"type": "array", "items": {"enum": ["a", "b", 1]}, "contains": {"type": "string"}, "maxContains": 1},
     [["a", 1], [1, 1, "b"]], [[1], ["a", "b"], ["c"]]),
    ({"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "string"},
      "contains": {"const": "a"}, "maxContains": 1}, [[1, "a"], [1, "a", "b"]], [[1], [1, "a", "a"], ["a"]]),
    ({"type": "array", "items": {"enum": [1, 2, 3]}, "contains": {"const": 1}, "minItems": 3, "maxItems": 4},
     [[1, 2, 3], [2, 2, 1, 2]], [[1, 1], [1, 2, 3, 4, 5], [2, 2, 2]]),
    ({"type": "array", "contains": {"type": "null"}}, [[None]], [[]]),
    ({"type": "array", "contains": True}, [["x"]], [[]]),
    ({"type": "array", "minContains": 2, "maxContains": 0}, [[], [1, 1]], []),  # ignored without contains
]


@pytest.mark.parametrize("semantics", SEMANTICS)
@pytest.mark.parametrize("schema,ok,bad", CONTAINS, ids=[json.dumps(c[0])[:70] for c in CONTAINS])
def test_contains(schema: Any, ok: list[Any], bad: list[Any], semantics: str) -> None:
    _check(schema, ok, bad, semantics)


def test_contains_in_exact_semantics_leaves_other_types_alone() -> None:
    dfa = _dfa({"contains": {"const": 1}, "maxContains": 1}, "exact")
    assert dfa.accepts(b'"not an array"') and dfa.accepts(b"{}") and dfa.accepts(b"[1]")
    assert not dfa.accepts(b"[1,1]") and not dfa.accepts(b"[]")


def test_contains_false_admits_no_array() -> None:
    with pytest.raises(EmptyLanguage):
        schema_to_ir({"type": "array", "contains": False}, _opts("exact"))


@pytest.mark.parametrize("schema,keyword,where", [
    ({"type": "array", "contains": {"type": "object", "required": ["a"]}, "maxContains": 1}, "maxContains", "/maxContains"),
    ({"type": "array", "contains": {"const": 1}, "minContains": 500}, "minContains", "/minContains"),
    ({"$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}, "contains": {"type": "array"}, "maxContains": 1}},
      "$ref": "#/$defs/t"}, "contains", "/$defs/t/contains"),
])
def test_contains_refusals_name_the_keyword(schema: Any, keyword: str, where: str) -> None:
    for semantics in SEMANTICS:
        with pytest.raises(UnsupportedKeyword) as info:
            schema_to_ir(schema, _opts(semantics))
        assert info.value.keyword == keyword and where in str(info.value)
        _, dropped = schema_to_ir(schema, _opts(semantics, lenient=True))
        assert any(d["keyword"] == keyword for d in dropped)


UNIQUE = [
    ({"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True},
     [[], ["a"], ["c", "a"], ["b", "a", "c"]], [["a", "a"], ["a", "b", "a"], ["d"]]),
    ({"type": "array", "items": {"enum": [1, 1.0, 2]}, "uniqueItems": True}, [[1, 2], b"[1.0,2]"], [b"[1,1.0]", [2, 2]]),
    ({"type": "array", "items": {"type": ["boolean", "null"]}, "uniqueItems": True},
     [[True, False, None], [None]], [[True, True], [None, False, None]]),
    ({"type": "array", "prefixItems": [{"type": "boolean"}, {"type": "boolean"}], "items": False, "uniqueItems": True},
     [[False, True], [True]], [[False, False], [True, False, None]]),
    ({"type": "array", "items": {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"],
                                 "additionalProperties": False}, "uniqueItems": True},
     [[{"a": True}, {"a": False}]], [[{"a": True}, {"a": True}]]),
    ({"type": "array", "items": {"type": "string"}, "maxItems": 1, "uniqueItems": True}, [["x"], []], [["x", "y"]]),
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": False}, [[1, 1]], [["x"]]),
    ({"type": "array", "items": {"enum": [0, False]}, "uniqueItems": True}, [[0, False]], [[0, 0]]),
]


@pytest.mark.parametrize("semantics", SEMANTICS)
@pytest.mark.parametrize("schema,ok,bad", UNIQUE, ids=[json.dumps(c[0])[:70] for c in UNIQUE])
def test_unique_items(schema: Any, ok: list[Any], bad: list[Any], semantics: str) -> None:
    _check(schema, ok, bad, semantics)


def test_unique_items_language_is_every_arrangement_of_distinct_values() -> None:
    # 3 values: 1 empty + 3 + 6 + 6 arrangements; no other string
    grammar, _ = schema_to_ir({"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True}, _opts("exact"))
    groups = finite_values(grammar.body, 100, 10_000, float("inf"))
    assert groups is not None and len(groups) == 16


def test_unique_items_under_pretty_whitespace() -> None:
    schema = {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True}
    dfa = _dfa(schema, "exact", "pretty:2")
    assert dfa.accepts(json.dumps(["b", "a"], indent=2).encode())
    assert not dfa.accepts(json.dumps(["a", "a"], indent=2).encode())


@pytest.mark.parametrize("schema,detail", [
    ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "finite"),
    ({"type": "array", "items": {"enum": list(range(9))}, "uniqueItems": True}, "9 values"),
    ({"type": "array", "uniqueItems": True}, "finite"),
])
def test_unique_items_refusals(schema: Any, detail: str) -> None:
    with pytest.raises(UnsupportedKeyword, match=detail) as info:
        schema_to_ir(schema, _opts("exact"))
    assert info.value.keyword == "uniqueItems" and "/uniqueItems" in str(info.value)


UNEVALUATED = [
    ({"type": "array", "prefixItems": [{"type": "string"}], "unevaluatedItems": False}, [[], ["a"]], [["a", "b"], [1]]),
    ({"type": "array", "unevaluatedItems": {"type": "integer"}}, [[1, 2], []], [["x"]]),
    ({"type": "array", "items": {"type": "string"}, "unevaluatedItems": False}, [["a", "b"]], [[1]]),
    ({"type": "array", "prefixItems": [True], "contains": {"type": "string"}, "unevaluatedItems": False},
     [[1, "foo"], ["x", "y"]], [[1, 2], [1, 2, "foo"]]),
    ({"type": "array", "contains": {"type": "string"}, "minContains": 0, "unevaluatedItems": False},
     [[], ["foo", "bar"]], [[0], ["foo", 0]]),
]


@pytest.mark.parametrize("semantics", SEMANTICS)
@pytest.mark.parametrize("schema,ok,bad", UNEVALUATED, ids=[json.dumps(c[0])[:70] for c in UNEVALUATED])
def test_unevaluated_items(schema: Any, ok: list[Any], bad: list[Any], semantics: str) -> None:
    _check(schema, ok, bad, semantics)


@pytest.mark.parametrize("schema", [
    {"type": "array", "prefixItems": [{"const": "foo"}], "anyOf": [{"prefixItems": [True, {"const": "bar"}]}],
     "unevaluatedItems": False},
    {"type": "array", "$ref": "#/$defs/b", "unevaluatedItems": False, "$defs": {"b": {"prefixItems": [True]}}},
])
def test_unevaluated_items_next_to_applicators_is_refused(schema: Any) -> None:
    with pytest.raises(UnsupportedKeyword):
        schema_to_ir(schema, _opts("exact"))


DRAFT7 = [
    ({"type": "array", "items": [{"type": "integer"}], "additionalItems": False}, [[], [1]], [[1, 2], ["a"]]),
    ({"type": "array", "items": [{"type": "integer"}], "additionalItems": {"type": "string"}}, [[1, "a", "b"]], [[1, 2]]),
    ({"type": "array", "items": {"type": "integer"}, "additionalItems": False}, [[1, 2, 3]], [["a"]]),  # ignored
    ({"type": "array", "minItems": 2.0, "maxItems": 3.0}, [[1, 2], [1, 2, 3]], [[1], [1, 2, 3, 4]]),
]


@pytest.mark.parametrize("semantics", SEMANTICS)
@pytest.mark.parametrize("schema,ok,bad", DRAFT7, ids=[json.dumps(c[0])[:70] for c in DRAFT7])
def test_draft7_tuple_form(schema: Any, ok: list[Any], bad: list[Any], semantics: str) -> None:
    dfa = _dfa({"$schema": "http://json-schema.org/draft-07/schema#", **schema}, semantics)
    validator = jsonschema.Draft7Validator(schema)
    for v in ok:
        assert validator.is_valid(v) and dfa.accepts(compact(v)), v
    for v in bad:
        assert not validator.is_valid(v) and not dfa.accepts(compact(v)), v


def test_matcher_on_a_byte_tokenizer() -> None:
    schema = {"type": "array", "items": {"enum": ["x", "y"]}, "uniqueItems": True, "contains": {"const": "y"}}
    art = maskc.compile_json_schema(schema, byte_tokenizer(), options=_opts("exact"))
    for text, ok in ((b'["y"]', True), (b'["x","y"]', True), (b'["x"]', False), (b'["y","y"]', False)):
        m = art.matcher()
        assert bool(m.accept_string(text) and m.can_terminate()) == ok, text


# -- properties: generated instances are accepted; mutated ones get jsonschema's verdict ------

PROPERTY_SCHEMAS = [
    {"type": "array", "items": {"enum": ["a", "b", 1, None]}, "contains": {"type": "string"}, "maxContains": 1},
    {"type": "array", "items": {"enum": ["a", "b", "c", True]}, "uniqueItems": True},
    {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "contains": {"minimum": 5}, "minContains": 2},
    {"type": "array", "prefixItems": [{"type": "boolean"}], "unevaluatedItems": {"enum": [1, 2]},
     "contains": {"const": 2}, "maxContains": 2},
]
_ITEM = st.one_of(st.sampled_from(["a", "b", "c", 1, 2, 5, 7, True, None]), st.integers(-3, 12))


@pytest.mark.parametrize("semantics", SEMANTICS)
@pytest.mark.parametrize("schema", PROPERTY_SCHEMAS, ids=[json.dumps(s)[:60] for s in PROPERTY_SCHEMAS])
def test_generated_and_mutated_instances(schema: Any, semantics: str) -> None:
    dfa = _dfa(schema, semantics)
    validator = jsonschema.Draft202012Validator(schema)

    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
    @given(value=from_schema(schema), extra=_ITEM, data=st.data())
    def run(value: Any, extra: Any, data: st.DataObject) -> None:
        # hypothesis-jsonschema may not know every keyword here: judge by jsonschema's verdict
        assert dfa.accepts(serialize(value, schema)) == validator.is_valid(value), value
        mutated = list(value)
        where = data.draw(st.integers(0, len(mutated)))
        op = data.draw(st.sampled_from(["insert", "duplicate", "drop"]))
        if op == "insert":
            mutated.insert(where, extra)
        elif op == "duplicate" and mutated:
            mutated.insert(where, mutated[min(where, len(mutated) - 1)])
        elif mutated:
            mutated.pop(min(where, len(mutated) - 1))
        assert dfa.accepts(serialize(mutated, schema)) <= validator.is_valid(mutated), mutated

    run()


# -- a large item counted in a grammar with rules is one call edge per position ----------------

_TREE_ITEM = {"type": "object",
              "properties": {f"k{i}": {"enum": ["ab", "cd", 5]} for i in range(6)},
              "required": ["k0"], "additionalProperties": False}
_TREE = {"$defs": {"node": {"type": "object", "properties": {
    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
    "data": {"type": "array", "items": _TREE_ITEM, "minItems": 1, "maxItems": 40}},
    "additionalProperties": False}}, "$ref": "#/$defs/node"}


def _small_budget(max_states: int, whitespace: str = "compact") -> CompileOptions:
    """A small state budget; under pretty, rules are made per depth: three levels of them."""
    from maskc.compiler.options import Limits

    return CompileOptions(parse_whitespace(whitespace), limits=Limits(max_states=max_states),
                          max_depth=3 if whitespace.startswith("pretty") else DEFAULT_MAX_DEPTH)


@pytest.mark.parametrize("whitespace", ["compact", "pretty:2"])
def test_counted_large_item_in_a_recursive_grammar_becomes_a_called_rule(whitespace: str) -> None:
    # 40 copies of the item (about 70 states each) exceed a quarter of 3,000 states; as a
    # rule, each position is one call edge and the bounds stay exact
    opts = _small_budget(3_000, whitespace=whitespace)
    grammar, skipped = schema_to_ir(_TREE, opts)
    assert not skipped
    assert grammar.calls
    assert all(name.startswith("#/$defs/node/properties/data/items") for name in grammar.calls)
    art = maskc.compile_json_schema(_TREE, VOCAB, options=opts)
    item = {"k0": "ab", "k3": 5}
    validator = jsonschema.Draft202012Validator(_TREE)

    def accepts(value: Any) -> bool:
        text = json.dumps(value, indent=2).encode() if whitespace != "compact" else compact(value)
        m = art.matcher()
        return bool(m.accept_string(text) and m.can_terminate())

    for n in (1, 7, 40):
        value = {"kids": [{"data": [item] * n}], "data": [item] * (41 - n)}
        assert validator.is_valid(value) and accepts(value), n
    for bad in ({"data": [item] * 41}, {"kids": [{"data": [item] * 41}]}, {"data": []},
                {"data": [{"k3": 5}]}, {"data": [item, {"k0": "ab", "k9": 5}]}):
        assert not validator.is_valid(bad) and not accepts(bad), bad


def test_counted_large_item_before_the_recursion_is_met_becomes_a_called_rule() -> None:
    # "data" is compiled before "kids" reaches the cycle: the references' cycle is known up front
    node = _TREE["$defs"]["node"]
    schema = {"$defs": {"node": dict(node, properties={"data": node["properties"]["data"],
                                                       "kids": node["properties"]["kids"]})},
              "$ref": "#/$defs/node"}
    grammar, _ = schema_to_ir(schema, _small_budget(3_000))
    assert grammar.calls == {"#/$defs/node/properties/data/items"}
    art = maskc.compile_json_schema(schema, VOCAB, options=_small_budget(3_000))
    item = {"k0": "cd"}
    for n, ok in ((40, True), (41, False)):
        m = art.matcher()
        assert bool(m.accept_string(compact({"data": [item] * n, "kids": [{"data": [item]}]}))
                    and m.can_terminate()) == ok, n


def test_counted_large_item_in_a_regular_grammar_stays_inline() -> None:
    # without rules, counted loops count the items (200 copies would be over a quarter of
    # 20,000 states): the grammar stays one regular rule
    schema = {"type": "array", "items": _TREE_ITEM, "maxItems": 200}
    grammar, _ = schema_to_ir(schema, _small_budget(20_000))
    assert len(grammar.rules) == 1 and not grammar.calls


def test_counted_calls_over_the_budget_are_still_refused() -> None:
    # one call edge per position still counts positions: a million of them is over budget
    node = _TREE["$defs"]["node"]
    data = {"type": "array", "items": _TREE_ITEM, "maxItems": 10**6}
    schema = {"$defs": {"node": dict(node, properties=dict(node["properties"], data=data))},
              "$ref": "#/$defs/node"}
    with pytest.raises(StateLimitExceeded) as e:
        schema_to_ir(schema, _small_budget(3_000))
    assert e.value.pointer == "/$defs/node/properties/data/maxItems"
