"""``not`` and ``if``/``then``/``else``: exact byte-level verdicts in both semantics, refusals
by name, and a soundness property against jsonschema (any value, any spelling)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from maskc.compiler.errors import UnsupportedKeyword
from maskc.compiler.frontends.json_schema import schema_to_ir
from maskc.compiler.frontends.json_schema.conditionals import ConditionalsMixin
from maskc.compiler.options import CompileOptions
from tests.helpers import accepts
from tests.maskbench import serialize

_SEMANTICS = ("exact", "generation")


KIND = {
    "type": "object",
    "properties": {"kind": {"type": "string"}, "x": {"type": "integer"}, "y": {"type": "integer"}},
    "if": {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
    "then": {"required": ["x"]},
    "else": {"required": ["y"]},
}

# (schema, accepted texts, rejected texts): the same verdicts in both semantics
TABLE: list[tuple[Any, list[str], list[str]]] = [
    ({"not": {"type": "integer"}}, ["1.5", '"a"', "null", "true", "[]"], ["1", "-3", "0", "1.0", "-0", "1e2"]),
    ({"not": {"const": "a"}}, ['"b"', "1", '""'], ['"a"', '"\\u0061"']),
    ({"not": {"enum": [1, "x", None]}}, ["2", '"y"', "true", "1.5"], ["1", '"x"', "null", "1.0"]),
    ({"not": {"minimum": 5}}, ["4.9", "-1", "0"], ["5", "7", "100.5", "5.0"]),
    ({"type": "string", "not": {"minLength": 2}}, ['"a"', '""'], ['"ab"', '"abc"']),
    ({"type": "string", "not": {"pattern": "^a"}}, ['"ba"', '""'], ['"ab"', '"a"', '"\\u0061"']),
    ({"not": {"anyOf": [{"const": 1}, {"type": "string"}]}}, ["2", "null", "[1]"], ["1", '"a"', '""']),
    ({"type": "array", "not": {"items": {"type": "integer"}}}, ['[1.5]', '["a"]', '[1,"a"]'], ["[]", "[1,2]", "[1]"]),
    ({"type": "array", "not": {"maxItems": 1}}, ["[1,2]", "[[],{}]"], ["[]", "[1]"]),
    ({"type": "object", "not": {"type": "object", "properties": {"foo": {"type": "string"}}}},
     ['{"foo":1}', '{"foo":[]}'], ['{"foo":"x"}', "{}", "1"]),
    ({"type": "integer", "if": {"exclusiveMaximum": 0}, "then": {"minimum": -10}, "else": {"maximum": 5}},
     ["-1", "-10", "0", "5"], ["-11", "6", "1.5"]),
    (KIND, ['{"kind":"a","x":1}', '{"kind":"b","y":1}'], ['{"kind":"a","y":1}', '{"kind":"b","x":1}', "{}"]),
    ({"if": {"const": 1}, "then": False}, ["2", '"a"'], ["1"]),
    ({"if": {"type": "string"}, "else": {"type": "integer"}}, ['"a"', "3"], ["1.5", "null"]),
    ({"allOf": [{"if": {"minimum": 0}}, {"then": {"maximum": -5}}, {"else": {"const": 0}}], "type": "integer"},
     ["1", "-1"], ["1.5"]),
    # finitely many values beside a not: each is checked against every keyword
    ({"enum": ["a", "b", "c", 1], "not": {"enum": ["b"]}}, ['"a"', '"c"', "1"], ['"b"', '"d"', "2"]),
    ({"enum": ["a", "b", "c"], "allOf": [{"not": {"const": "b"}}, {"not": {"type": "string", "maxLength": 0}}],
      "not": {"const": "c"}}, ['"a"'], ['"b"', '"c"', '""']),
    ({"anyOf": [{"const": 1, "enum": [2]}, {"const": "z"}]}, ['"z"'], ["1", "2"]),  # the enum must list the const
    ({"const": 1, "enum": [1.0, 2], "not": {"type": "string"}}, ["1"], ["2", "1.0"]),
]


@pytest.mark.parametrize("semantics", _SEMANTICS)
@pytest.mark.parametrize(("schema", "ok", "bad"), TABLE)
def test_verdicts(schema: Any, ok: list[str], bad: list[str], semantics: str) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    for text in ok:
        assert validator.is_valid(json.loads(text)), text  # the table itself is right
        assert accepts(schema, text, semantics), (semantics, text)
    for text in bad:
        assert not accepts(schema, text, semantics), (semantics, text)


def _judged_as_jsonschema_does(schema: Any, ok: list[str], bad: list[str], semantics: str) -> None:
    """Each text of ``ok`` is valid and accepted, each of ``bad`` invalid and rejected."""
    validator = jsonschema.Draft202012Validator(schema)
    for text in ok:
        assert validator.is_valid(json.loads(text)), text
        assert accepts(schema, text, semantics), (semantics, text)
    for text in bad:
        assert not validator.is_valid(json.loads(text)), text
        assert not accepts(schema, text, semantics), (semantics, text)


def _discriminated(n: int) -> dict[str, Any]:
    """An object whose ``kind`` picks one of ``n`` shapes through sibling conditionals, none
    of whose ``if`` requires ``kind`` (so an object without it must meet every ``then``)."""
    kinds = [f"k{i}" for i in range(n)]
    return {
        "type": "object",
        "properties": {"kind": {"type": "string", "enum": kinds}, "name": {"type": "string"}},
        "allOf": [{"if": {"properties": {"kind": {"enum": [k]}}},
                   "then": {"required": ["kind", f"v{i}"], "properties": {"kind": {"type": "string"},
                                                                       f"v{i}": {"type": "integer"}}}}
                  for i, k in enumerate(kinds)],
    }


@pytest.mark.parametrize("semantics", _SEMANTICS)
def test_sibling_conditionals_on_a_discriminator_do_not_multiply(semantics: str) -> None:
    """Once the rest fixes ``kind``, no other sibling's condition can hold: its ``else``
    applies, without the combinations of every branch of every sibling (2**24 here). The
    verdicts are jsonschema's."""
    schema = _discriminated(24)
    ok = ['{"kind":"k0","v0":1}', '{"kind":"k23","name":"a","v23":5}']
    if semantics == "exact":
        ok.append('{"kind":"k7","v7":0,"v3":"x"}')  # (generation writes no undeclared key)
    bad = ['{"kind":"k0","v1":1}', '{"kind":"k5"}', '{"kind":"k24","v24":1}', '{"v0":1}', "{}",
           '{"kind":"k2","v2":"1"}']
    _judged_as_jsonschema_does(schema, ok, bad, semantics)


def _typed_discriminated(n: int, inner: Any) -> dict[str, Any]:
    """``name`` picks one of ``n`` shapes through sibling conditionals whose ``if`` is typed
    (``"type": "object"``): the negation of each has a not-an-object branch, which the rest
    (an object) leaves no type."""
    kinds = [f"k{i}" for i in range(n)]
    return {"allOf": [
        {"type": "object", "properties": {"name": {"type": "string", "enum": kinds}},
         "required": ["name"]},
        *({"if": {"type": "object", "properties": {"name": {"type": "string", "const": k}}},
           "then": {"type": "object", "properties": {"name": {"const": k}, "arg": inner},
                    "required": ["name"]}}
          for k in kinds),
    ]}


@pytest.mark.parametrize("semantics", _SEMANTICS)
def test_a_branch_with_no_type_left_builds_nothing(semantics: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A schema whose merged ``type`` is empty admits no value, and nothing inside it is
    built: the not-an-object branches of typed conditions nested three levels deep once
    expanded every remaining sibling conditional for nothing (a MaskBench schema's front end
    took 17 s, 0.5 s now). The verdicts are jsonschema's."""
    schema: Any = {"type": "string"}
    for _ in range(3):
        schema = _typed_discriminated(5, schema)
    seen: list[Any] = []
    original = ConditionalsMixin.conditional

    def conditional(self: ConditionalsMixin, sub: dict[str, Any], pointer: str, depth: int) -> Any:
        seen.append(sub.get("type"))
        return original(self, sub, pointer, depth)

    monkeypatch.setattr(ConditionalsMixin, "conditional", conditional)
    schema_to_ir(schema, CompileOptions(semantics=semantics))
    assert seen and [] not in seen
    ok = ['{"name":"k0","arg":{"name":"k4","arg":{"name":"k2","arg":"x"}}}', '{"name":"k3"}',
          '{"name":"k1","arg":{"name":"k1"}}']
    bad = ['{"name":"k5"}', '{"name":"k0","arg":{"name":"k4","arg":{"name":"k2","arg":1}}}',
           '{"name":"k0","arg":"x"}', '{"arg":{"name":"k1"}}', '"k0"', "{}"]
    _judged_as_jsonschema_does(schema, ok, bad, semantics)


def test_exact_admits_undeclared_keys_where_json_schema_does() -> None:
    schema = {"not": {"required": ["a"]}}
    assert accepts(schema, '{"b":1}') and accepts(schema, "{}")
    assert not accepts(schema, "1")  # a non-object has every required property
    assert not accepts(schema, '{"a":1}') and not accepts(schema, '{"b":1,"a":2}')
    assert not accepts(schema, '{"b":1}', "generation")  # generation: no undeclared keys
    assert accepts(schema, "{}", "generation")
    kind_ok = ['{"kind":"b","y":1,"z":[1]}', '{"y":1}', '{"kind":"a","x":1,"z":{}}']
    assert not accepts(KIND, '{"kind":"b","y":1,"z":[1]}', "generation")
    assert all(accepts(KIND, t) for t in kind_ok)
    assert not accepts(KIND, '{"x":1}')


def test_difference_spells_the_subjects_key_order_first() -> None:
    # the subject orders "a" first: the complement spells objects that way too, so no order
    # of a forbidden value slips through
    schema = {"not": {"properties": {"a": {"const": 1}}, "required": ["a"], "additionalProperties": {"type": "integer"}}}
    for text in ['{"a":1}', '{"a":1,"b":2}', '{"b":2,"a":1}', "[]", "1"]:
        assert not accepts(schema, text), text
    for text in ['{"a":2}', '{"a":1,"b":"x"}', '{"b":1}']:
        assert accepts(schema, text), text


def test_recursive_complement_by_de_morgan() -> None:
    schema = {"$defs": {"s": {"type": "object", "properties": {"c": {"$ref": "#/$defs/s"}}}}, "not": {"$ref": "#/$defs/s"}}
    grammar, _ = schema_to_ir(schema, CompileOptions(semantics="exact"))
    assert len(grammar.rules) > 1  # the complement recurses as a rule
    for text in ["1", '{"c":1}', '{"c":{"c":2}}', '{"c":"s","x":1}']:
        assert accepts(schema, text), text
    for text in ["{}", '{"c":{}}', '{"x":1}', '{"c":{"c":{}}}']:
        assert not accepts(schema, text), text


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ({"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "not": {"$ref": "#/$defs/n"}}, "recursion"),
        ({"type": "array", "items": {"$ref": "#"}, "not": {"const": []}}, "recursive reference"),
        ({"not": {"const": 1e-7}}, "exponent"),
        ({"not": {"const": {"a": 1, "b": 2}}}, "order of its keys"),
        ({"not": {"const": [1.0]}}, "fraction"),
        ({"not": {"format": "date"}}, "'format'"),
    ],
)
def test_refusals_name_not(schema: Any, fragment: str) -> None:
    for semantics in _SEMANTICS:
        with pytest.raises(UnsupportedKeyword) as info:
            schema_to_ir(schema, CompileOptions(semantics=semantics))  # type: ignore[arg-type]
        assert info.value.keyword == "not"
        assert fragment in str(info.value)
    _, dropped = schema_to_ir(schema, CompileOptions(lenient=True))
    assert any(d["keyword"] == "not" for d in dropped)


def test_then_else_without_if_are_annotations() -> None:
    schema = {"type": "integer", "then": {"const": 0}, "else": {"const": 1}}
    _, notes = schema_to_ir(schema, CompileOptions())
    assert {(n["keyword"], n.get("kind")) for n in notes} == {("then", "annotation"), ("else", "annotation")}
    assert accepts(schema, "5")


def test_whitespace_policies() -> None:
    schema = {"type": "array", "items": {"type": "integer"}, "not": {"const": [1, 2]}}
    assert not accepts(schema, json.dumps([1, 2], indent=2), whitespace="pretty")
    assert accepts(schema, json.dumps([1], indent=2), whitespace="pretty")
    assert not accepts(schema, "[1,2]", whitespace="flexible")
    assert not accepts(schema, "[1, 2]", whitespace="flexible")
    assert accepts(schema, "[2,1]", whitespace="flexible")


# -- soundness: any value, in any spelling, is accepted only if jsonschema says valid -----------

NOT_NOT = {"not": {"not": {"type": "object", "required": ["x"]}}}
NOT_NAMES = {"type": "object", "not": {"propertyNames": {"pattern": "^[ab]"}}}  # some key not starting with a or b
PROPERTY_SCHEMAS: list[Any] = [
    {"not": {"type": "integer"}},
    {"not": {"enum": [1, "x", None, [0]]}},
    {"not": {"anyOf": [{"const": 1}, {"type": "string", "maxLength": 1}]}},
    {"not": {"properties": {"a": {"const": 1}}, "required": ["a"], "additionalProperties": {"type": "integer"}}},
    {"not": {"type": "array", "items": {"type": "integer"}}},
    {"type": "object", "not": {"required": ["a", "b"]}},
    KIND,
    {"if": {"type": "integer"}, "then": {"minimum": 3}, "else": {"type": "array", "maxItems": 1}},
    NOT_NAMES,
    NOT_NOT,
    {"oneOf": [{"type": "object", "required": ["kind"], "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}},
               {"type": "object", "required": ["kind"], "additionalProperties": False,
                "properties": {"kind": {"const": "b"}, "y": {}}}]},  # disjoint by keywords
]

_KEYS = st.sampled_from(["a", "b", "x", "y", "kind", "é"])
_SCALARS = st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-10, 10, allow_nan=False) | st.sampled_from(["a", "x", "", "ab", "\n"])
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3), max_leaves=6)


def _spellings(value: Any) -> list[bytes]:
    texts = [json.dumps(value, separators=(",", ":"), ensure_ascii=False), json.dumps(value, separators=(",", ":"))]

    def reverse(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: reverse(v[k]) for k in reversed(list(v))}
        return [reverse(x) for x in v] if isinstance(v, list) else v

    texts.append(json.dumps(reverse(value), separators=(",", ":"), ensure_ascii=False))
    return [t.encode() for t in dict.fromkeys(texts)]


@pytest.mark.parametrize("semantics", _SEMANTICS)
@pytest.mark.parametrize("schema", PROPERTY_SCHEMAS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_VALUES)
def test_accepted_only_if_valid(schema: Any, semantics: str, value: Any) -> None:
    valid = jsonschema.Draft202012Validator(schema).is_valid(value)
    for text in _spellings(value):
        if accepts(schema, text, semantics):
            assert valid, (text, semantics)


# hypothesis-jsonschema cannot draw instances of these (KIND, the complement of propertyNames, not not)
@pytest.mark.parametrize("schema", [s for s in PROPERTY_SCHEMAS if all(s is not x for x in (KIND, NOT_NAMES, NOT_NOT))])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_generated_instances_accepted(schema: Any, data: st.DataObject) -> None:
    value = data.draw(from_schema(schema))
    text = serialize(value, schema)
    if any(isinstance(v, float) for v in _leaves(value)) or _has_object_with_keys(value) or _depth(value) > 3:
        return  # canonical spellings, key order and nesting are the grammar's own (see the module doc)
    assert accepts(schema, text), text


def _leaves(v: Any) -> list[Any]:
    if isinstance(v, dict):
        return [x for w in v.values() for x in _leaves(w)]
    if isinstance(v, list):
        return [x for w in v for x in _leaves(w)]
    return [v]


def _has_object_with_keys(v: Any) -> bool:
    if isinstance(v, dict):
        return len(v) > 1 or any(_has_object_with_keys(w) for w in v.values())
    return isinstance(v, list) and any(_has_object_with_keys(w) for w in v)


def _depth(v: Any) -> int:
    if isinstance(v, dict):
        return 1 + max((_depth(w) for w in v.values()), default=0)
    if isinstance(v, list):
        return 1 + max((_depth(w) for w in v), default=0)
    return 0
