"""allOf conjuncts that do not merge keyword by keyword: multipleOf by least common multiple,
two patterns / formats / contains as a product of languages, several ``not`` and
``if``/``then``/``else`` as nested conjuncts, listed values checked against every conjunct,
``unevaluatedItems`` across own conjuncts; refusals by name where the product would lose
values; the serializer's key order for listed values, dependencies and dynamic references."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

import maskc
from maskc.compiler.errors import UnsupportedKeyword
from maskc.compiler.frontends.json_schema.combinators import _common_multiple
from maskc.compiler.vocab import byte_tokenizer
from tests.helpers import accepts as _accepts
from tests.helpers import assert_language
from tests.helpers import byte_artifact, ecma_schema
from tests.maskbench import serialize

_VOCAB = byte_tokenizer()
_2020 = "https://json-schema.org/draft/2020-12/schema"


BOTH = [
    # two multipleOf: their least common multiple (integers, then decimals)
    ({"type": "integer", "allOf": [{"multipleOf": 4}, {"multipleOf": 6}]}, ["0", "12", "-24", "36"], ["4", "6", "18", "8"]),
    ({"type": "number", "allOf": [{"multipleOf": 0.5}, {"multipleOf": 0.75}]}, ["0", "1.5", "3", "-4.5"],
     ["0.5", "0.75", "1", "2.25"]),
    ({"type": "integer", "allOf": [{"multipleOf": 2}], "anyOf": [{"multipleOf": 3}], "oneOf": [{"multipleOf": 5}]},
     ["30", "0", "-60"], ["15", "10", "6", "2", "5"]),
    # two patterns (and a format): the product of the string languages
    ({"type": "string", "allOf": [{"pattern": "^a"}, {"pattern": "b$"}]}, ['"ab"', '"axxb"'], ['"a"', '"b"', '"ba"']),
    ({"type": "string", "allOf": [{"format": "date"}, {"pattern": "-01$"}, {"pattern": "^2024"}]},
     ['"2024-03-01"'], ['"2023-03-01"', '"2024-03-02"', '"2024-13-01"']),
    # two contains: each needs a match of its own
    ({"type": "array", "items": {"type": "integer"}, "allOf": [{"contains": {"const": 1}}, {"contains": {"const": 2}}]},
     ["[1,2]", "[2,1]", "[3,1,4,2]"], ["[1]", "[2]", "[]", "[1,1]", "[1,3]"]),
    # several not: each stays a not
    ({"type": "integer", "allOf": [{"not": {"const": 1}}, {"not": {"const": 2}}]}, ["0", "3"], ["1", "2"]),
    # several if/then/else: successive conditionals
    ({"type": "integer", "allOf": [{"if": {"minimum": 10}, "then": {"multipleOf": 2}},
                                   {"if": {"maximum": 0}, "then": {"multipleOf": 3}}]},
     ["12", "5", "7", "-3", "0"], ["11", "13", "-1", "-2"]),
    ({"allOf": [{"if": {"type": "integer"}, "then": {"minimum": 0}, "else": {"type": "string"}},
                {"if": {"type": "string"}, "then": {"maxLength": 2}, "else": {"maximum": 9}}]},
     ["0", "9", '"ab"'], ["10", "-1", '"abc"', "null", "[]"]),
    # one condition in two conjuncts: then and else merge
    ({"type": "integer", "allOf": [{"if": {"minimum": 0}, "then": {"maximum": 9}},
                                   {"if": {"minimum": 0}, "then": {"multipleOf": 3}, "else": {"minimum": -5}}]},
     ["0", "3", "9", "-5", "-1"], ["12", "4", "-6"]),
    # listed values checked against every conjunct
    ({"allOf": [{"enum": [1, 2, 3, "a"]}, {"enum": [2, 3, 4, "a"]}, {"type": "integer"}]}, ["2", "3"], ["1", "4", '"a"']),
    ({"allOf": [{"const": {"a": 1, "b": [2]}}, {"enum": [{"b": [2], "a": 1}, 5]}]}, ['{"a":1,"b":[2]}'], ["5"]),
    # minContains/maxContains without contains in their schema constrain nothing
    ({"type": "array", "allOf": [{"contains": {"const": 1}}, {"maxContains": 1}]}, ["[1,1]", "[1]"], ["[]", "[2]"]),
    # keywords maskc does not know are annotations: two values of one are no conflict
    ({"type": "integer", "allOf": [{"help": "a", "maximum": 3}, {"help": "b", "minimum": 1}]}, ["1", "3"], ["0", "4"]),
    # a union branch that no value satisfies is no error
    ({"anyOf": [{"type": "integer", "minimum": 5, "maximum": 4}, {"type": "string"}]}, ['"x"'], ["5", "4"]),
]


@pytest.mark.parametrize(("schema", "accepted", "rejected"), BOTH, ids=[json.dumps(c[0])[:60] for c in BOTH])
@pytest.mark.parametrize("semantics", ["exact", "generation"])
def test_conjuncts_that_do_not_merge(schema: Any, accepted: list[str], rejected: list[str], semantics: str) -> None:
    assert_language(schema, accepted, rejected, semantics)


@pytest.mark.parametrize(
    ("schema", "accepted", "rejected"),
    [
        # values of the types the conjuncts do not constrain pass unchanged
        ({"allOf": [{"pattern": "^a"}, {"pattern": "b$"}]}, ['"ab"', "1", "null", "[1]", '{"x":[]}'], ['"a"', '"b"']),
        ({"allOf": [{"contains": {"const": 1}}, {"contains": {"const": 2}}]}, ["[1,2]", '"s"', "{}"], ["[1]", "[]"]),
        # unevaluatedItems sees the items the document's own conjuncts evaluate by position
        ({"$schema": _2020, "prefixItems": [{"type": "string"}], "allOf": [{"prefixItems": [True, {"type": "number"}]}],
          "unevaluatedItems": False}, ['["a",1]', '["a"]', "[]"], ['["a",1,null]', "[1]"]),
        ({"$schema": _2020, "allOf": [{"prefixItems": [{"type": "string"}], "items": True}], "unevaluatedItems": False},
         ['["a",1,2]'], ["[1]"]),
        ({"$schema": _2020, "allOf": [{"prefixItems": [{"type": "string"}]}, {"unevaluatedItems": True}],
          "unevaluatedItems": False}, ['["a"]', '["a",1,true]'], ["[1]"]),
        ({"$schema": _2020, "allOf": [{"prefixItems": [True]}, {"unevaluatedItems": False}]}, ["[]"], ["[1]", "[1,2]"]),
        ({"$schema": _2020, "allOf": [True], "unevaluatedItems": False}, ["[]", "1"], ["[1]"]),
    ],
)
def test_exact_semantics(schema: Any, accepted: list[str], rejected: list[str]) -> None:
    assert_language(schema, accepted, rejected)


@pytest.mark.parametrize(
    ("schema", "detail"),
    [
        # both sides fix an order of object keys: the product would lose values
        ({"type": "array", "allOf": [{"contains": {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a"]}},
                                     {"contains": {"type": "object", "properties": {"b": {}, "a": {}}, "required": ["b"]}}]},
         "order of object keys"),
        # recursion inside the conjuncts: not regular
        ({"$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
          "allOf": [{"$ref": "#/$defs/t", "contains": {"type": "array"}}, {"contains": {"const": []}}]},
         "recursive references"),
        # unevaluatedItems next to conjuncts kept apart: which one evaluated an item is lost
        ({"$schema": _2020, "allOf": [{"contains": {"multipleOf": 2}}, {"contains": {"multipleOf": 3}}],
          "unevaluatedItems": {"multipleOf": 5}}, "unevaluatedItems"),
    ],
)
def test_refusals_name_allof(schema: Any, detail: str) -> None:
    for semantics in ("exact", "generation"):
        with pytest.raises(UnsupportedKeyword) as info:
            byte_artifact(schema, semantics)
        assert info.value.keyword == "allOf" and detail in str(info.value)
    opts = maskc.CompileOptions(lenient=True)
    art = maskc.compile_json_schema(schema, _VOCAB, options=opts)
    assert any(d["keyword"] == "allOf" for d in json.loads(art.metadata["not_enforced"]))


def test_common_multiple() -> None:
    assert _common_multiple(4, 6) == 12
    assert _common_multiple(0.5, 0.75) == 1.5
    assert _common_multiple(0.1, 0.25) == 0.5
    assert _common_multiple(2, 0.4) == 2
    assert _common_multiple(0, 3) is None and _common_multiple(True, 3) is None


_PROPERTY_SCHEMAS = [
    {"type": "integer", "minimum": -200, "maximum": 200, "allOf": [{"multipleOf": 4}, {"multipleOf": 6}]},
    {"type": "string", "maxLength": 6, "allOf": [{"pattern": "^[ab]"}, {"pattern": "[0-9]$"}]},
    {"type": "array", "maxItems": 4, "items": {"type": "integer", "minimum": 0, "maximum": 3},
     "allOf": [{"contains": {"const": 1}}, {"contains": {"const": 2}}]},
    {"type": "integer", "minimum": -20, "maximum": 20,
     "allOf": [{"if": {"minimum": 10}, "then": {"multipleOf": 2}}, {"if": {"maximum": 0}, "then": {"multipleOf": 3}},
               {"not": {"const": 4}}]},
]
_WIDER = [
    {"type": "integer", "minimum": -200, "maximum": 200},
    {"type": "string", "maxLength": 6, "pattern": "^[ab0-9]*$"},
    {"type": "array", "maxItems": 4, "items": {"type": "integer", "minimum": 0, "maximum": 3}},
    {"type": "integer", "minimum": -20, "maximum": 20},
]


@pytest.mark.parametrize("semantics", ["exact", "generation"])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_generated_instances_accepted(semantics: str, data: st.DataObject) -> None:
    i = data.draw(st.integers(0, len(_PROPERTY_SCHEMAS) - 1))
    schema = _PROPERTY_SCHEMAS[i]
    value = data.draw(from_schema(ecma_schema(schema)))
    assert _accepts(schema, serialize(value, schema), semantics), value


@pytest.mark.parametrize("semantics", ["exact", "generation"])
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_mutated_instances_get_the_validators_verdict(semantics: str, data: st.DataObject) -> None:
    i = data.draw(st.integers(0, len(_PROPERTY_SCHEMAS) - 1))
    schema = _PROPERTY_SCHEMAS[i]
    value = data.draw(from_schema(ecma_schema(_WIDER[i])))
    ok = jsonschema.Draft202012Validator(ecma_schema(schema)).is_valid(value)
    if _accepts(schema, serialize(value, schema), semantics):
        assert ok, value
    elif semantics == "exact":
        assert not ok, value


# -- the serializer ----------------------------------------------------------------------


def test_serialize_listed_values_keep_their_own_spelling() -> None:
    schema = {"const": {"a": False, "b": 1}}
    assert serialize({"b": 1, "a": False}, schema) == b'{"a":false,"b":1}'
    assert _accepts(schema, serialize({"b": 1, "a": False}, schema))
    assert serialize([{"b": 1, "a": 2.0}], {"items": {"enum": [{"a": 2.0, "b": 1}]}}) == b'[{"a":2.0,"b":1}]'
    assert serialize(True, {"enum": [1, True]}) == b"true"
    assert serialize(1.0, {"enum": [1, True]}) == b"1"


def test_serialize_dependency_names_follow_the_grammar() -> None:
    required = {"$schema": _2020, "dependentRequired": {"bar": ["foo"]}}
    assert serialize({"foo": 1, "bar": 2}, required) == b'{"bar":2,"foo":1}'
    assert _accepts(required, serialize({"foo": 1, "bar": 2}, required))
    schemas = {"$schema": _2020,
               "dependentSchemas": {"bar": {"properties": {"foo": {"type": "integer"}, "bar": {"type": "integer"}}}}}
    assert serialize({"bar": 2, "foo": 1}, schemas) == b'{"foo":1,"bar":2}'
    assert _accepts(schemas, serialize({"bar": 2, "foo": 1}, schemas))


def test_serialize_follows_references_the_compiler_resolves() -> None:
    schema = {"$schema": _2020, "$id": "https://example.com/root",
              "$defs": {"node": {"$dynamicAnchor": "node", "type": "object",
                                 "properties": {"b": {"type": "integer"}, "a": {"$dynamicRef": "#node"}}},
                        "rel": {"$id": "rel.json", "type": "object", "properties": {"y": {}, "x": {}}}},
              "type": "object", "properties": {"n": {"$dynamicRef": "#node"}, "r": {"$ref": "rel.json"}}}
    value = {"n": {"a": {"b": 1}, "b": 2}, "r": {"x": 1, "y": 2}}
    assert serialize(value, schema) == b'{"n":{"b":2,"a":{"b":1}},"r":{"y":2,"x":1}}'
    assert _accepts(schema, serialize(value, schema))
