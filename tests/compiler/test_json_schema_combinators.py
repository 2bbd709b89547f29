"""allOf merges of item keywords, anyOf/oneOf lists inside allOf, and oneOf as exactly one
branch by value (key order and number spelling do not let a shared value through)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis_jsonschema import from_schema

from tests.helpers import accepts as _accepts
from tests.helpers import assert_language
from tests.maskbench import serialize


@pytest.mark.parametrize(
    ("schema", "accepted", "rejected"),
    [
        # items applies after its own schema's prefixItems only
        ({"allOf": [{"prefixItems": [{"minimum": 3}]}], "items": {"minimum": 5}}, ["[5,5]", "[5]", "[]"], ["[3,5]", "[3]"]),
        ({"allOf": [{"prefixItems": [{"type": "integer"}]}, {"items": {"type": "string"}}]}, ["[]"], ["[1]", '["a"]', '["a",1]']),
        ({"allOf": [{"prefixItems": [{"type": "integer"}], "items": False}, {"prefixItems": [True, {"type": "string"}]}]},
         ["[1]", "[]"], ['[1,"a"]', '["a"]']),
        # draft 7: additionalItems after its own items list
        ({"allOf": [{"items": [{"type": "integer"}, {"type": "string"}]}], "items": [{"type": "integer"}],
          "additionalItems": {"type": "boolean"}}, ["[1]", "[]"], ['[1,"a"]', "[1,true]"]),
        # two anyOf lists in one allOf: both must hold
        ({"allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"anyOf": [{"type": "string"}, {"type": "null"}]}]},
         ['"a"'], ["1", "null"]),
    ],
)
@pytest.mark.parametrize("semantics", ["exact", "generation"])
def test_allof_merges(schema: Any, accepted: list[str], rejected: list[str], semantics: str) -> None:
    assert_language(schema, accepted, rejected, semantics)


@pytest.mark.parametrize(
    ("schema", "accepted", "rejected"),
    [
        ({"type": "object", "oneOf": [{"required": ["foo", "bar"]}, {"required": ["foo", "baz"]}]},
         ['{"foo":1,"bar":2}', '{"foo":1,"baz":3}'], ['{"foo":1,"bar":2,"baz":3}', '{"bar":2}']),
        ({"oneOf": [{"properties": {"bar": {"type": "integer"}}, "required": ["bar"]},
                    {"properties": {"foo": {"type": "string"}}, "required": ["foo"]}]},
         ['{"bar":2}', '{"foo":"baz"}'], ['{"bar":2,"foo":"baz"}', '{"foo":"baz","bar":2}']),
        # a number branch never spells an integer value another way ("1.0", "1e0")
        ({"oneOf": [{"type": "number"}, {"type": "integer"}]}, ["1.5", "-0.25"], ["1", "1.0", "1e0", "-0", "2.50"]),
        ({"oneOf": [{"type": "string"}, {"const": "a"}]}, ['"b"'], ['"a"', '"\\u0061"']),
    ],
)
def test_oneof_by_value(schema: Any, accepted: list[str], rejected: list[str]) -> None:
    assert_language(schema, accepted, rejected)


def test_oneof_generation_subtracts_undeclared_keys() -> None:
    # JSON Schema admits {"a": 1} under both branches (undeclared keys are allowed): no branch alone
    schema = {"type": "object", "oneOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                                          {"properties": {"b": {"type": "integer"}}, "required": ["b"]}]}
    assert _accepts(schema, '{"a":1}', "generation")
    assert not _accepts(schema, '{"a":1,"b":2}', "exact")


_PROPERTY_SCHEMA = {"oneOf": [{"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
                              {"type": "object", "properties": {"y": {"enum": [1, 2]}}, "required": ["y"]}]}


@pytest.mark.xfail(strict=False, reason="undeclared keys with free-form values are widened to any bytes "
                   "in the over-approximation, so some valid instances are subtracted")
@settings(max_examples=30, deadline=None)
@given(from_schema(_PROPERTY_SCHEMA))
def test_oneof_instances_accepted(value: Any) -> None:
    assert _accepts(_PROPERTY_SCHEMA, serialize(value, _PROPERTY_SCHEMA).decode())


@settings(max_examples=30, deadline=None)
@given(from_schema({"type": "object", "properties": {"x": {"type": "integer"}, "y": {"enum": [1, 2]}}}))
def test_oneof_mutations_get_the_validators_verdict(value: Any) -> None:
    ok = jsonschema.Draft202012Validator(_PROPERTY_SCHEMA).is_valid(value)
    if _accepts(_PROPERTY_SCHEMA, serialize(value, _PROPERTY_SCHEMA).decode()):
        assert ok, value


def test_serialize_canonical_numbers() -> None:
    assert serialize({"a": 1.0, "b": [1e-07, 2.5, -0.0]}, {}) == b'{"a":1,"b":[0.0000001,2.5,0]}'


_ABC = {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}}


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": _ABC, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
    {"type": "object", "properties": _ABC, "oneOf": [{"required": ["a", "b"]}, {"required": ["a", "c"]}]},
    {"type": "object", "properties": _ABC, "required": ["c"],
     "oneOf": [{"required": ["a"]}, {"required": ["b"]}, {"required": ["a", "b"]}]},
    {"type": "object", "properties": _ABC, "oneOf": [{}, {"required": ["a"], "description": "with a"}]},
    {"properties": _ABC, "oneOf": [{"required": ["a"]}, {"required": ["b", "c"]}]},  # no type: objects only
    {"type": ["object", "null"], "properties": _ABC, "additionalProperties": False,
     "oneOf": [{"required": ["a"]}, {"required": ["b"]}, {"required": ["c"]}]},
    {"$defs": {"ra": {"required": ["a"]}}, "type": "object", "properties": _ABC,
     "oneOf": [{"$ref": "#/$defs/ra"}, {"required": ["b"]}]},
    {"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["z"]}]},  # keys not declared
])
@pytest.mark.parametrize("semantics", ["exact", "generation"])
def test_oneof_over_required_keys_is_a_union_of_objects(schema: Any, semantics: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # "exactly one of these keys": object variants with keys required and forbidden, never
    # the product construction of the general oneOf
    from maskc.compiler.frontends.json_schema import combinators

    def no_product(*_: Any, **__: Any) -> Any:
        raise AssertionError("the general oneOf construction ran")

    if semantics == "exact" or "properties" in schema:
        monkeypatch.setattr(combinators.CombinatorsMixin, "exclusive", no_product)
    validator = jsonschema.Draft202012Validator(schema)
    keys = ["a", "b", "c", "z"]
    some_valid = 0
    for n in range(len(keys) + 1):
        for chosen in itertools.combinations(keys, n):
            value = {k: 1 for k in chosen}
            ok = validator.is_valid(value)
            got = _accepts(schema, serialize(value, schema).decode(), semantics)
            if semantics == "exact" or "z" not in chosen or "z" in schema.get("properties", {"z": 0}):
                assert got == ok, (value, ok)
            else:
                assert not got or ok, value
            some_valid += ok
    assert some_valid
    for text in ("1", "null", '"a"', "[]"):
        assert not _accepts(schema, text, semantics), text


def test_oneof_over_required_keys_that_all_hold_is_empty() -> None:
    # both keys are required, so both branches always hold: no value has exactly one
    from maskc.compiler.errors import EmptyLanguage
    from tests.helpers import byte_artifact

    schema = {"type": "object", "properties": _ABC, "required": ["a", "b"],
              "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}
    with pytest.raises(EmptyLanguage):
        byte_artifact(schema, "exact", "compact")


def test_overlapping_object_branches_beside_max_properties_get_the_validators_verdict() -> None:
    """``oneOf`` over object branches that declare overlapping keys and nothing else, beside
    ``maxProperties: 1``: the branches' over-approximations keep the bound (a loop of members
    each, their pairwise overlaps determinized together, took 800,000 states for seven
    branches). Every object of at most two members over the keys, with values of either
    type, gets jsonschema's verdict."""
    keys = ["a", "b", "c", "d", "e", "f"]
    branches = [{"properties": {k: {"type": "integer"} for k in keys if k != skip}} for skip in keys]
    schema = {"type": "object", "maxProperties": 1, "oneOf": branches}
    validator = jsonschema.Draft202012Validator(schema)
    values = [1, '"x"']
    texts = ["{}", "1", "[]"]
    texts += [f'{{"{k}":{v}}}' for k in [*keys, "z"] for v in values]
    texts += [f'{{"{k}":{v},"{j}":{w}}}' for k, j in itertools.combinations(keys[:3], 2) for v in values for w in values]
    valid = [t for t in texts if validator.is_valid(json.loads(t))]
    assert valid == [f'{{"{k}":"x"}}' for k in keys]  # a wrongly typed key fails all branches but its own
    for text in texts:
        assert _accepts(schema, text, "exact") == (text in valid), text


def test_an_over_approximated_object_keeps_a_small_bound_on_its_members() -> None:
    """The any-order superset of an object keeps ``max_count`` up to ``_OVER_MAX_COUNT``
    (members in any order and repeated, never more of them), and drops a larger one."""
    from maskc.compiler.dfa import determinize
    from maskc.compiler.frontends.json_schema.combinators import _OVER_MAX_COUNT, _member_loop
    from maskc.compiler.ir import Fields, lit
    from maskc.compiler.nfa import lower

    items = ((lit('"a":1'), False), (lit('"b":2'), True), (lit('"c":3'), False))
    for most in (1, 2, _OVER_MAX_COUNT + 1):
        f = Fields(items, lit("{"), lit(","), lit("}"), lit("{}"), max_count=most)
        d = determinize(lower(_member_loop(f)))
        assert d.accepts(b'{"b":2}') and not d.accepts(b"{}") and not d.accepts(b'{"a":1}')  # b required
        assert d.accepts(b'{"c":3,"b":2}') == (most >= 2)  # any order, within the bound
        assert d.accepts(b'{"b":2,"b":2,"a":1,"b":2,"c":3}') == (most > _OVER_MAX_COUNT)  # repeats
