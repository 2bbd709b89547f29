"""``not`` forms enforced exactly by rewriting: double negation (and ``not`` of ``anyOf``/``allOf``
by De Morgan), and ``not`` of ``propertyNames`` (an object holding a key the name schema
rejects). Verdicts are checked against jsonschema: no invalid instance is ever accepted, and
the valid instances listed (or all, where maskc's key-order and duplicate-key policies do
not apply) are accepted."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from maskc.compiler.errors import UnsupportedKeyword
from maskc.compiler.frontends.json_schema import schema_to_ir
from maskc.compiler.options import CompileOptions
from tests.helpers import accepts
from tests.maskbench import MASKBENCH_DIR, serialize


def _valid(schema: Any, instance: Any) -> bool:
    return bool(jsonschema.validators.validator_for(schema)(schema).is_valid(instance))


def _text(schema: Any, instance: Any) -> str:
    return serialize(instance, schema).decode()


def _verdicts(schema: Any, instances: list[Any], complete: bool = True) -> None:
    """No instance jsonschema rejects is accepted; with ``complete``, every valid one is."""
    for inst in instances:
        got, want = accepts(schema, _text(schema, inst)), _valid(schema, inst)
        if complete:
            assert got == want, (_text(schema, inst), want)
        else:
            assert not got or want, _text(schema, inst)


# objects over a pool of keys (in every order) and a few non-objects
_POOL = ["a1", "b2", "a1b2", "x", "1", "2", "3", "zzzz"]
_OBJECTS: list[Any] = [
    dict(zip(keys, vals))
    for n in range(4)
    for keys in itertools.permutations(_POOL, n)
    for vals in ([tuple(0 for _ in keys), tuple("s" for _ in keys)] if n <= 2 else [tuple(0 for _ in keys)])
]
_OTHERS: list[Any] = [None, True, 0, 1.5, "", "a1", [], ["a1"]]

# -- double negation, and De Morgan through anyOf / allOf ---------------------------------

_VALUES: list[Any] = [None, True, 0, 1, 2, 1.5, "", "a", "ab", "abc", [], [1], [1, 2], {}, {"foo": 1}, {"foo": 2},
                      {"bar": 1}, {"bar": True, "foo": 1}, {"a": 1}, {"b": 1}, {"a": 1, "b": 2}]

NEGATIONS: list[Any] = [
    {"not": {"not": {"properties": {"bar": False, "foo": True}}}},
    {"not": {"not": {"not": {"not": {"type": "string"}}}}},
    {"not": {"not": {"not": {"const": 1}}}},
    {"type": ["string", "integer"], "not": {"not": {"minLength": 2}}},
    {"not": {"not": {"type": "string"}, "minLength": 3}},  # anyOf [string, not minLength 3]
    {"not": {"not": {"type": "object"}, "required": ["a"]}},
    {"not": {"const": 1, "not": {"const": 2}}},
    {"not": {"anyOf": [{"properties": {"a": {"const": 1}}}, {"properties": {"b": {"const": 1}}}]}},
    {"not": {"anyOf": [{"type": "integer"}, {"not": {"type": "object"}}]}},
    {"not": {"allOf": [{"type": "integer"}, {"not": {"const": 2}}]}},
    {"not": {"type": "object", "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}},
    {"$defs": {"s": {"type": "string"}}, "not": {"$ref": "#/$defs/s", "not": {"minLength": 2}}},
    {"not": {"not": True}},
]


@pytest.mark.parametrize("schema", NEGATIONS)
def test_negations_match_jsonschema(schema: Any) -> None:
    _verdicts(schema, _VALUES)


def test_double_negation_inside_allof() -> None:
    schema = {"allOf": [{"enum": [{"foo": 1}]}, {"not": {"not": {"properties": {"bar": False, "foo": True}}}}]}
    assert accepts(schema, '{"foo":1}')
    for text in ('{"foo":1,"bar":true}', '{"bar":true}', "{}", '{"foo":2}', "1"):
        assert not accepts(schema, text), text


def test_draft7_ref_ignores_its_siblings_under_not() -> None:
    # {"$ref": S, "not": X} is S alone in draft 7: its complement is "not a string"
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"s": {"type": "string"}},
              "not": {"$ref": "#/definitions/s", "not": {"type": "string"}}}
    _verdicts(schema, _VALUES)
    assert not accepts(schema, '"a"') and accepts(schema, "1")


@pytest.mark.parametrize(
    "schema",
    [
        # X's evaluated items must not count for the sibling unevaluatedItems (not drops annotations)
        {"type": "array", "prefixItems": [{"type": "integer"}], "unevaluatedItems": False,
         "not": {"not": {"prefixItems": [True, True]}}},
        {"not": {"not": {"prefixItems": [True, True]}, "unevaluatedItems": False}},
    ],
)
def test_negations_next_to_unevaluated_still_refuse(schema: Any) -> None:
    with pytest.raises(UnsupportedKeyword) as info:
        schema_to_ir(schema, CompileOptions(semantics="exact"))
    assert info.value.keyword == "not"


# -- not propertyNames: keys that must exist ---------------------------------------------

A1 = {"not": {"propertyNames": {"not": {"pattern": "a1"}}}}  # some key contains "a1"
B2 = {"not": {"propertyNames": {"not": {"pattern": "b2"}}}}  # some key contains "b2"

# schemas where maskc accepts exactly the valid instances of the pool
EXACT: list[Any] = [
    {"not": {"propertyNames": {"pattern": "^a"}}},
    {"type": "object", **A1},
    {"type": "object", "allOf": [A1, B2]},
    {"type": "object", "allOf": [A1, B2], "maxProperties": 2},
    {"type": "object", "allOf": [A1, B2], "maxProperties": 3, "minProperties": 1},
    {"type": "object", "allOf": [A1, B2, {"not": {"propertyNames": {"not": {"pattern": "^[0-9]"}}}}]},
    {"type": "object", "not": {"anyOf": [{"propertyNames": {"not": {"enum": ["1", "3"]}}},
                                         {"propertyNames": {"not": {"enum": ["2", "3"]}}}]}},
    {"properties": {"a1": {"type": "integer"}, "x": {"type": "string"}}, **A1},
    {"properties": {"a1": {"type": "integer"}, "x": {"type": "string"}}, "additionalProperties": False,
     "not": {"propertyNames": {"not": {"pattern": "a"}}}},
    {"properties": {"a1": {"type": "integer"}, "x": {"type": "string"}}, "maxProperties": 2,
     "not": {"propertyNames": {"not": {"pattern": "a"}}}},
    {"properties": {"a1": {"type": "integer"}}, "required": ["a1"], "maxProperties": 2,
     "not": {"propertyNames": {"not": {"pattern": "2"}}}},
    {"patternProperties": {"^a": {"type": "integer"}, "2$": {"type": "string"}},
     "not": {"propertyNames": {"not": {"pattern": "b"}}}},
    {"patternProperties": {"^a": {"type": "integer"}}, "additionalProperties": False,
     "not": {"propertyNames": {"maxLength": 2}}},
    {"propertyNames": {"maxLength": 2}, "not": {"propertyNames": {"pattern": "^[0-9]"}}},
    {"not": {"propertyNames": False}},
    {"not": {"propertyNames": {"pattern": "^a"}, "required": ["x"]}},
    {"not": {"type": "object", "propertyNames": {"pattern": "^a"}}},
    {"dependentRequired": {"x": ["3"]}, "not": {"propertyNames": {"pattern": "^[a-z]"}}},
    {"enum": [{"a1": 1}, {"x": 1}, {"x": 1, "b2": 2}, 3], "not": {"propertyNames": {"not": {"pattern": "a"}}}},
    {"allOf": [{"enum": [{"a1": 0}, {"a1b2": 0}, {"b2": 0, "a1": 0}, {"x": 0}]}, A1, B2]},
    {"anyOf": [{"not": {"propertyNames": {"not": {"const": "x"}}}}, {"type": "integer"}]},
    {"oneOf": [{"not": {"propertyNames": {"not": {"const": "x"}}}}, {"required": ["a1"]}]},
    {"properties": {"a1": {"not": {"propertyNames": {"not": {"const": "x"}}}}}},
    {"type": "object", "unevaluatedProperties": False, "properties": {"a1": True},
     "not": {"propertyNames": {"not": {"const": "a1"}}}},
    {"$schema": "http://json-schema.org/draft-07/schema#",
     "dependencies": {"a1": {"not": {"propertyNames": {"not": {"const": "x"}}}}}},
]


@pytest.mark.parametrize("schema", EXACT)
def test_key_existence_matches_jsonschema(schema: Any) -> None:
    _verdicts(schema, _OBJECTS + _OTHERS + [{"a1": {"x": 0}}, {"y": {"a1": 0}}, {"a1": [], "b2": {}}])


@pytest.mark.parametrize(
    ("schema", "text", "valid"),
    [
        # maskc's policies: undeclared keys may repeat, so minProperties counts one of them
        ({"not": {"propertyNames": {"pattern": "^a"}}, "minProperties": 2, "properties": {"x": {}}},
         '{"x":0,"b2":0}', True),
        ({"not": {"propertyNames": {"pattern": "^a"}}, "minProperties": 2, "properties": {"x": {}}},
         '{"a1":0,"a2":0}', False),
        # a key nested in a value is no witness; duplicate keys witness once
        ({"type": "object", **A1}, '{"x":{"a1":0}}', False),
        ({"type": "object", **A1}, '{"xa1":0,"xa1":1}', True),
        ({"type": "object", "allOf": [A1, B2], "maxProperties": 2}, '{"a1":0,"z":0,"b2":0}', False),
        ({"type": "object", "allOf": [A1, B2], "maxProperties": 2}, '{"z":0,"a1b2":0}', True),
        # escapes: keys are spelled canonically, so an escaped "a1" is no key of the grammar
        ({"type": "object", **A1}, '{"\\u0061\\u0031":0}', False),
    ],
)
def test_key_existence_texts(schema: Any, text: str, valid: bool) -> None:
    assert accepts(schema, text) is valid


def test_generation_semantics_keeps_witnesses() -> None:
    schema = {"type": "object", "allOf": [A1, B2]}
    assert accepts(schema, '{"a1":0,"b2":1}', "generation")
    assert accepts(schema, '{"a1b2":0}', "generation")
    assert not accepts(schema, '{"a1":0}', "generation")


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ({"type": "object", "allOf": [{"not": {"propertyNames": {"not": {"pattern": p}}}} for p in "abcd"]},
         "more than 3 keys"),
        ({"type": "object", "allOf": [A1, B2], "maxProperties": 40}, "maxProperties 40"),
        ({"properties": {f"a{i}": {} for i in range(5)}, "allOf": [{"not": {"propertyNames": {"not": {"pattern": "a"}}}},
                                                                     {"not": {"propertyNames": {"maxLength": 1}}}]},
         "ways to pick"),
    ],
)
def test_refusals_name_not(schema: Any, fragment: str) -> None:
    with pytest.raises(UnsupportedKeyword) as info:
        schema_to_ir(schema, CompileOptions(semantics="exact"))
    assert info.value.keyword == "not" and fragment in str(info.value)
    _, dropped = schema_to_ir(schema, CompileOptions(lenient=True, semantics="exact"))
    assert any(d["keyword"] == "not" for d in dropped)


# -- MaskBench -------------------------------------------------------------------------

_MB = Path(MASKBENCH_DIR)
needs_maskbench = pytest.mark.skipif(not _MB.is_dir(), reason="MaskBench files not found")


def _case(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((_MB / name).read_text(encoding="utf-8"))
    return data


@needs_maskbench
def test_maskbench_double_negation() -> None:
    case = _case("Synthesized---draft2019_09_nonvalid_properties_id10_subschema1_not_2.json")
    schema = case["schema"]
    for t in case["tests"]:
        assert accepts(schema, _text(schema, t["data"])) is t["valid"], t["description"]


@needs_maskbench
def test_maskbench_object4() -> None:
    schema = _case("Handwritten---object4.json")["schema"]
    ok = [{"a1b2": 0}, {"b2a1": "x"}, {"a1b2": {"a": [1]}}]
    bad = [{"a1xx": 0}, {"xxb2": 0}, {"a1b2x": 0}, {}, {"a1b2": 0, "b2a1": 0}, {"a1": 0, "b2": 0}, [], "a1b2", 1]
    for inst in ok + bad:
        assert _valid(schema, inst) is (inst in ok)
    _verdicts(schema, ok + bad + _OBJECTS)


@needs_maskbench
def test_maskbench_pnmp1_not_is_enforced_but_min_properties_refuses() -> None:
    # "not" compiles; minProperties 3 needs undeclared keys that differ (a duplicate-key policy)
    schema = _case("Handwritten---pnmp1.json")["schema"]
    with pytest.raises(UnsupportedKeyword) as info:
        schema_to_ir(schema, CompileOptions(semantics="exact"))
    assert info.value.keyword == "minProperties"
    looser = {**schema, "minProperties": 1}
    ok = [{"1": 0, "2": 0}, {"3": 0}, {"x": 0, "2": 0, "1": 0}]
    bad = [{"1": 0}, {"2": 0, "x": 0}, {}, {"12": 0, "3x": 0}]
    for inst in ok + bad:
        assert _valid(looser, inst) is (inst in ok)
    _verdicts(looser, ok + bad + _OBJECTS)
