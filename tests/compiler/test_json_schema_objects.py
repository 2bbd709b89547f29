"""Object keywords: ``minProperties``/``maxProperties``, ``propertyNames``, the dependency
keywords, overlapping ``patternProperties``, ``unevaluatedProperties`` and object keywords
across ``allOf``, judged byte by byte in both semantics; the counted Fields lowering
against a brute-force oracle."""

from __future__ import annotations

import itertools
import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

import maskc
from maskc.compiler.errors import EmptyLanguage, UnsupportedKeyword
from maskc.compiler.ir import Fields, lit
from maskc.compiler.options import CompileOptions
from maskc.compiler.vocab import byte_tokenizer
from tests.helpers import accepts as _accepts
from tests.helpers import compact, dfa_of, ecma_schema
from tests.maskbench import serialize

SEMANTICS = ("generation", "exact")
VOCAB = byte_tokenizer()
DRAFT7 = "http://json-schema.org/draft-07/schema#"


def _opts(semantics: Any, lenient: bool = False) -> CompileOptions:
    return CompileOptions(lenient=lenient, semantics=semantics)


def _validator(schema: Any) -> Any:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema)


def _check(schema: Any, ok: list[Any], bad: list[Any], semantics: str) -> None:
    """``ok`` values are valid (jsonschema agrees) and accepted as written; ``bad`` ones are
    invalid and rejected. A ``bytes`` entry is a raw text."""
    validator = _validator(schema)
    for v in ok:
        text = v if isinstance(v, bytes) else compact(v)
        assert validator.is_valid(json.loads(text)), v
        assert _accepts(schema, text, semantics), v
    for v in bad:
        text = v if isinstance(v, bytes) else compact(v)
        assert not validator.is_valid(json.loads(text)), v
        assert not _accepts(schema, text, semantics), v


def _refuses(schema: Any, keyword: str, semantics: str = "exact") -> None:
    with pytest.raises(UnsupportedKeyword) as e:
        maskc.compile_json_schema(schema, VOCAB, options=_opts(semantics))
    assert e.value.keyword == keyword


# -- the counted Fields lowering -----------------------------------------------------------


def _fields_oracle(items: list[tuple[str, bool]], rest: str | None, lo: int, hi: int | None,
                   max_rest: int) -> set[bytes]:
    """Every string of the Fields below, built from its definition (rest members at most ``max_rest``)."""
    out: set[bytes] = set()
    for mask in itertools.product((False, True), repeat=len(items)):
        if any(req and not on for (_, req), on in zip(items, mask)):
            continue
        chosen = [name for (name, _), on in zip(items, mask) if on]
        for r in range(max_rest + 1 if rest is not None else 1):
            members = chosen + [rest or ""] * r
            distinct_min = len(chosen) + (1 if r else 0)
            if distinct_min < lo or (hi is not None and len(members) > hi):
                continue
            out.add(("{" + ",".join(members) + "}").encode())
    return out


@pytest.mark.parametrize("lo,hi", [(0, 0), (1, None), (2, None), (0, 1), (1, 2), (2, 3), (3, 3), (4, None)])
@pytest.mark.parametrize("with_rest", [False, True])
def test_counted_fields_match_the_definition(lo: int, hi: int | None, with_rest: bool) -> None:
    items = [("a", False), ("b", True), ("c", False)]
    node = Fields(
        tuple((lit(n), r) for n, r in items), lit(""), lit(","), lit("}"), None,
        lit("x") if with_rest else None, lo, hi,
    )
    want = _fields_oracle(items, "x" if with_rest else None, lo, hi, max_rest=4)
    if not want:
        with pytest.raises(EmptyLanguage):
            dfa_of(node)
        return
    dfa = dfa_of(node)
    # every string up to 4 rest members, in order: the language restricted to them
    universe = _fields_oracle(items, "x" if with_rest else None, 0, None, max_rest=4)
    for s in universe:
        assert dfa.accepts(s[1:]) == (s in want), (s, lo, hi)


def test_counted_fields_bounds_are_checked() -> None:
    with pytest.raises(ValueError):
        Fields((), lit(""), lit(","), lit("}"), lit("}"), None, 3, 2)


# -- minProperties / maxProperties ---------------------------------------------------------


@pytest.mark.parametrize("semantics", SEMANTICS)
def test_property_counts_over_declared_properties(semantics: str) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                                               "c": {"type": "integer"}},
              "additionalProperties": False, "minProperties": 1, "maxProperties": 2}
    _check(schema, [{"a": 1}, {"c": 3}, {"a": 1, "b": 2}, {"b": 2, "c": 3}],
           [{}, {"a": 1, "b": 2, "c": 3}], semantics)


@pytest.mark.parametrize("semantics", SEMANTICS)
def test_required_properties_count_toward_the_minimum(semantics: str) -> None:
    schema = {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a"],
              "additionalProperties": False, "minProperties": 2}
    _check(schema, [{"a": 1, "b": 2}], [{"a": 1}, {"b": 1}], semantics)
    empty = {"type": "object", "properties": {"a": {}}, "required": ["a"], "maxProperties": 0}
    with pytest.raises(EmptyLanguage):
        maskc.compile_json_schema(empty, VOCAB, options=_opts(semantics))


def test_property_counts_over_undeclared_keys_exact() -> None:
    schema = {"minProperties": 1, "maxProperties": 2}
    _check(schema, [{"a": 1}, {"a": 1, "b": 2}, 7, "x"], [{}, {"a": 1, "b": 2, "c": 3}], "exact")
    _check({"maxProperties": 0}, [{}, []], [{"a": 1}], "exact")
    # a repeated key is one property: it cannot make up a minimum
    assert not _accepts({"type": "object", "minProperties": 1}, b"{}", "exact")
    assert _accepts({"type": "object", "minProperties": 1}, b'{"a":1}', "exact")


def test_minimum_needing_distinct_undeclared_keys_is_refused_in_exact() -> None:
    _refuses({"type": "object", "minProperties": 2}, "minProperties")
    _refuses({"type": "object", "maxProperties": 1000}, "maxProperties")


# -- propertyNames -------------------------------------------------------------------------


@pytest.mark.parametrize("semantics", SEMANTICS)
def test_property_names_restrict_declared_and_pattern_keys(semantics: str) -> None:
    schema = {"type": "object", "properties": {"abc": {}, "abcdef": {}},
              "patternProperties": {"^x": {"type": "integer"}},
              "propertyNames": {"maxLength": 3}}
    _check(schema, [{"abc": 1}, {"xy": 2}, {}], [{"abcdef": 1}, {"xyzw": 2}], semantics)
    required = {**schema, "required": ["abcdef"]}
    with pytest.raises(EmptyLanguage):
        maskc.compile_json_schema(required, VOCAB, options=_opts(semantics))


def test_property_names_exact_forms() -> None:
    _check({"type": "object", "propertyNames": {"pattern": "^a+$"}},
           [{"a": 1, "aa": {}}, {}], [{"aaA": 1}, {"b": 1}], "exact")
    _check({"type": "object", "propertyNames": {"enum": ["foo", "bar"]}},
           [{"foo": 1}, {"foo": 1, "bar": 2}], [{"baz": 1}], "exact")
    _check({"type": "object", "propertyNames": {"const": "foo"}}, [{"foo": 1}], [{"bar": 1}], "exact")
    _check({"type": "object", "propertyNames": False}, [{}], [{"a": 1}], "exact")
    # names are strings: a number schema admits no key
    _check({"type": "object", "propertyNames": {"type": "integer"}}, [{}], [{"1": 1}], "exact")
    # a key spelled with an escape is the same name: canonical spelling only
    assert not _accepts({"type": "object", "propertyNames": {"maxLength": 1}}, b'{"\\u0061b":1}', "exact")


# -- dependencies ----------------------------------------------------------------------------


@pytest.mark.parametrize("semantics", SEMANTICS)
def test_dependent_required_over_declared_properties(semantics: str) -> None:
    schema = {"type": "object", "properties": {"a": {}, "b": {}, "c": {}},
              "additionalProperties": False, "dependentRequired": {"a": ["b"], "c": ["a"]}}
    _check(schema, [{}, {"b": 1}, {"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3}],
           [{"a": 1}, {"c": 1}, {"b": 1, "c": 1}, {"a": 1, "c": 1}], semantics)


def test_dependent_required_keys_cannot_slip_in_undeclared() -> None:
    schema = {"type": "object", "dependentRequired": {"bar": ["foo"]}}
    # the dependency names have fixed places: trigger first, then its dependents
    _check(schema, [{}, {"foo": 1}, {"bar": 2, "foo": 1}, {"x": 0}, {"foo": 1, "x": 2}],
           [{"bar": 2}, {"bar": 2, "x": 1}], "exact")
    assert not _accepts(schema, b'{"x":1,"bar":2}', "exact")


def test_draft7_dependencies_both_forms() -> None:
    schema = {"$schema": DRAFT7, "type": "object",
              "properties": {"a": {}, "b": {}, "c": {"type": "integer"}},
              "dependencies": {"a": ["b"], "b": {"properties": {"c": {"minimum": 5}}}}}
    _check(schema, [{}, {"b": 1}, {"b": 1, "c": 6}, {"a": 1, "b": 2}, {"c": 1}],
           [{"a": 1}, {"b": 1, "c": 4}, {"a": 1, "b": 1, "c": 1}], "exact")


@pytest.mark.parametrize("semantics", SEMANTICS)
def test_dependent_schemas_merge_soundly(semantics: str) -> None:
    # additionalProperties of the object applies to names only the dependent schema declares
    schema = {"type": "object", "properties": {"foo2": {}},
              "dependentSchemas": {"foo2": {"properties": {"bar": {}}}}, "additionalProperties": False}
    _check(schema, [{}, {"foo2": 1}], [{"foo2": 1, "bar": 2}, {"bar": 2}], semantics)
    schema2 = {"type": "object", "properties": {"foo": {}, "bar": {"type": "integer"}},
               "dependentSchemas": {"foo": {"properties": {"bar": {"minimum": 3}}, "required": ["bar"]},
                                    "never": False}}
    _check(schema2, [{}, {"bar": 1}, {"foo": 1, "bar": 3}],
           [{"foo": 1}, {"foo": 1, "bar": 2}, {"never": 1}], semantics)


def test_too_many_dependencies_are_refused_by_name() -> None:
    deps = {f"k{i}": [f"d{i}"] for i in range(8)}
    _refuses({"type": "object", "dependentRequired": deps}, "dependentRequired")


# -- patternProperties ---------------------------------------------------------------------


def test_keys_matching_several_patterns_satisfy_all_in_exact() -> None:
    schema = {"type": "object", "patternProperties": {"a": {"type": "integer"}, "b": {"minimum": 20}},
              "additionalProperties": False}
    _check(schema, [{"a": 1}, {"ab": 25}, {"b": "x"}, {"ba": 30, "a": 2}], [{"ab": 5}, {"ab": "x"}, {"c": 1}], "exact")
    # generation: such keys are not generated (a sound restriction)
    assert not _accepts(schema, b'{"ab":25}', "generation")
    assert _accepts(schema, b'{"a":25}', "generation")


@pytest.mark.parametrize("semantics", SEMANTICS)
def test_additional_properties_schema_next_to_patterns_and_properties(semantics: str) -> None:
    schema = {"type": "object", "properties": {"p": {"type": "string"}},
              "patternProperties": {"^x": {"type": "integer"}}, "additionalProperties": {"type": "boolean"}}
    _check(schema, [{"p": "s", "xa": 1, "zz": True}], [{"p": 1}, {"xa": True}, {"zz": 1}], semantics)


# -- unevaluatedProperties and allOf -------------------------------------------------------


def test_unevaluated_properties_reduced_to_additional_properties() -> None:
    schema = {"type": "object", "properties": {"foo": {}}, "unevaluatedProperties": {"type": "integer"}}
    _check(schema, [{"foo": "x"}, {"foo": "x", "bar": 1}], [{"bar": "x"}], "exact")
    merged = {"type": "object", "allOf": [{"properties": {"foo": {}}}], "properties": {"bar": {}},
              "unevaluatedProperties": False}
    _check(merged, [{"bar": 1, "foo": 2}], [{"bar": 1, "foo": 2, "baz": 3}], "exact")
    by_ref = {"$defs": {"d": {"properties": {"bar": {"type": "string"}}}}, "$ref": "#/$defs/d",
              "properties": {"foo": {"type": "string"}}, "unevaluatedProperties": False}
    _check(by_ref, [{"bar": "a", "foo": "b"}], [{"bar": "a", "foo": "b", "baz": "c"}], "exact")


def test_unevaluated_properties_inside_a_conjunct_sees_only_its_own() -> None:
    schema = {"type": "object", "allOf": [{"properties": {"a": {}}, "unevaluatedProperties": False}],
              "properties": {"b": {}}}
    _check(schema, [{"a": 1}, {}], [{"a": 1, "b": 2}, {"b": 2}], "exact")


def test_unevaluated_properties_with_a_branching_applicator_is_refused() -> None:
    _refuses({"type": "object", "anyOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}],
              "unevaluatedProperties": False}, "unevaluatedProperties")


def test_additional_properties_does_not_see_properties_of_a_conjunct() -> None:
    schema = {"allOf": [{"properties": {"foo": {}}}], "additionalProperties": {"type": "boolean"}}
    _check(schema, [{"foo": True, "bar": False}], [{"foo": 1, "bar": True}], "exact")


# -- properties: generated and mutated instances --------------------------------------------

PROPERTY_SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}, "c": {"enum": ["x", "y"]}},
     "minProperties": 1, "maxProperties": 2, "additionalProperties": False},
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "null"}},
     "dependentRequired": {"a": ["b"]}, "dependentSchemas": {"c": {"required": ["a"]}}, "additionalProperties": False},
    {"type": "object", "propertyNames": {"pattern": "^[a-c]{1,2}$"},
     "patternProperties": {"^a": {"type": "integer"}, "b$": {"type": "integer", "minimum": 3}},
     "additionalProperties": {"type": "boolean"}, "maxProperties": 3},
]


def _mutations(value: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k in value:
        out.append({x: v for x, v in value.items() if x != k})
        out.append({**value, k: "s" if not isinstance(value[k], str) else 0})
    for extra in ("a", "b", "c", "ab", "zz"):
        if extra not in value:
            out.append({**value, extra: 1})
    return out


@pytest.mark.parametrize("idx", range(len(PROPERTY_SCHEMAS)))
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_generated_and_mutated_instances(idx: int, data: st.DataObject) -> None:
    schema = PROPERTY_SCHEMAS[idx]
    validator = jsonschema.Draft202012Validator(ecma_schema(schema))
    value = data.draw(from_schema(ecma_schema(schema)))
    assert isinstance(value, dict)
    # hypothesis-jsonschema does not know every keyword here: its value gets the verdict too
    assert _accepts(schema, serialize(value, schema), "exact") == validator.is_valid(value), value
    for mutated in _mutations(value):
        ok = _accepts(schema, _in_property_order(mutated, schema), "exact")
        assert ok == validator.is_valid(mutated), mutated


def _in_property_order(value: dict[str, Any], schema: dict[str, Any]) -> bytes:
    """``value`` as the grammar of a schema without applicators orders it (what ``serialize`` does)."""
    listed = [k for k in schema.get("properties", {}) if k in value]
    return compact({k: value[k] for k in [*listed, *(k for k in value if k not in listed)]})


def test_generation_writes_a_required_name_it_does_not_declare() -> None:
    # generation closes an object to its keys, and a required name is one of them even when
    # 'properties' leaves it out: it takes any value, as the absent additionalProperties says
    # (it used to close the object to nothing)
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a", "b"]}
    validator = jsonschema.Draft202012Validator(schema)
    for text, written in (('{"a":1,"b":true}', True), ('{"a":1,"b":{"x":[1,"y"]}}', True), ('{"a":1,"b":null}', True),
                          ('{"a":1}', False), ('{"a":1,"b":1,"c":1}', False), ('{"a":"1","b":1}', False)):
        assert _accepts(schema, text, "generation") == written, text
        assert not written or validator.is_valid(json.loads(text)), text
    # said outright, additionalProperties: false leaves no object at all
    with pytest.raises(EmptyLanguage):
        _accepts({**schema, "additionalProperties": False}, "{}", "generation")
