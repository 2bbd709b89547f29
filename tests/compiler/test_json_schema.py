"""JSON Schema front end, keyword by keyword: accepted and rejected instances (byte level)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from maskc.compiler.errors import EmptyLanguage, RegexSyntaxError, SchemaError, UnsupportedKeyword
from maskc.compiler.frontends.json_schema import schema_to_ir
from maskc.compiler.options import CompileOptions
from tests.helpers import compact, schema_dfa

OBJ = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
    "required": ["b"],
    "additionalProperties": False,
}

# (schema, accepted values, rejected values) — values serialized compactly
TABLE: list[tuple[Any, list[Any], list[Any]]] = [
    ({"type": "null"}, [None], [0, "null", False]),
    ({"type": "boolean"}, [True, False], [None, 1]),
    ({"type": ["string", "null"]}, ["x", None], [1, True]),
    ({"type": "integer"}, [0, -5, 123456789012345678901234567890], [1.5, "1", True]),
    ({"type": "integer", "minimum": -3, "maximum": 12}, [-3, 0, 12], [-4, 13, 100]),
    ({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10}, [1, 9], [0, 10]),
    ({"type": "number"}, [0, -1.5, 1e-07, 3.25, 10], ["1", None]),
    ({"type": "number", "minimum": 0, "maximum": 1}, [0, 0.5, 1, 0.999], [-0.1, 1.01, 2]),
    ({"type": "number", "exclusiveMinimum": 0.5}, [0.51, 1, 100], [0.5, 0.1, -3]),
    ({"type": "string", "minLength": 2, "maxLength": 3}, ["ab", "abc", "é日", "a\n"], ["a", "abcd", ""]),
    ({"type": "string", "pattern": "^[a-z]+$"}, ["abc"], ["ab1", "", "ABC"]),
    ({"type": "string", "pattern": "b"}, ["abc", "b"], ["ac", ""]),
    ({"type": "string", "pattern": "^a", "maxLength": 2}, ["a", "ab", "a\""], ["ba", "abc"]),
    ({"type": "string", "format": "date"}, ["2024-02-29", "1999-12-31"], ["2024-13-01", "24-01-01", "x"]),
    ({"type": "string", "format": "date-time"}, ["2024-01-02T03:04:05Z", "2024-01-02T03:04:05.123+02:00"], ["2024-01-02 03:04"]),
    ({"type": "string", "format": "uuid"}, ["550e8400-e29b-41d4-a716-446655440000"], ["550e8400"]),
    ({"type": "string", "format": "ipv4"}, ["192.168.0.1"], ["256.1.1.1", "01.2.3.4"]),
    ({"type": "string", "format": "email"}, ["a.b+c@example.co.uk"], ["a@@b.com", "no-at"]),
    ({"enum": ["red", "green", 3, None]}, ["red", 3, None], ["blue", 4, "Red"]),
    ({"const": {"k": [1, 2]}}, [{"k": [1, 2]}], [{"k": [2, 1]}, {}]),
    ({"type": "string", "enum": ["a", 1]}, ["a"], [1]),
    (OBJ, [{"b": "x"}, {"a": 1, "b": "x"}, {"a": 1, "b": "x", "c": True}, {"b": "", "c": False}],
     [{}, {"a": 1}, {"b": "x", "d": 1}, {"b": "x", "a": 1}, {"b": 1}]),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
     [{}, {"a": 1}, {"a": 1, "z": "s"}, {"z": "s", "y": "t"}], [{"z": 1}, {"a": 1, "a2": 2}, {"a": "s"}]),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": True},
     [{"a": 1, "x": [1, {"y": None}]}], [{"a": "s"}]),
    ({"type": "object"}, [{}, {"k": 1}, {"k": {"n": [True]}}], [[], 1]),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}, [[1], [1, 2, 3]], [[], [1, 2, 3, 4], ["a"]]),
    ({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False}, [[], ["a"], ["a", 1]], [[1], ["a", 1, 2]]),
    ({"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}, "minItems": 2}, [["a", 1], ["a", 1, 2]], [["a"], ["a", "b"]]),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "array", "items": [{"type": "integer"}], "additionalItems": False}, [[1], []], [[1, 2]]),
    ({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]}, [1, "a"], ["ab", None]),
    ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, [1.5], [1, "x"]),
    ({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"properties": {"b": {"type": "string"}}, "required": ["b"]}]},
     [{"a": 1, "b": "x"}], [{"a": 1}, {"b": "x"}]),
    ({"$defs": {"p": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}},
      "type": "array", "items": {"$ref": "#/$defs/p"}}, [[{"x": 1}], []], [[{"y": 1}]]),
    ({"definitions": {"n": {"type": "integer"}}, "properties": {"a": {"$ref": "#/definitions/n"}}},
     [{"a": 1}, {}], [{"a": "x"}]),
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
      "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}, [{"a": 1}, {"b": 2}, {"a": 1, "b": 2}], [{}]),
    ({"type": "string"}, ["a\"b\\c", "tab\there", "\u0001", "😀", "日本語"], []),
]


def check_values(schema: Any, ok: list[Any], bad: list[Any]) -> None:
    """Valid values (checked with jsonschema) are accepted, the others rejected."""
    dfa = schema_dfa(schema)
    for v in ok:
        jsonschema.validate(v, schema, format_checker=jsonschema.FormatChecker())
        assert dfa.accepts(compact(v)), v
    for v in bad:
        assert not dfa.accepts(compact(v)), v


@pytest.mark.parametrize("schema,ok,bad", TABLE, ids=[json.dumps(t[0])[:60] for t in TABLE])
def test_schema_table(schema: Any, ok: list[Any], bad: list[Any]) -> None:
    check_values(schema, ok, bad)


def test_escapes_in_free_strings() -> None:
    dfa = schema_dfa({"type": "string", "maxLength": 2})
    assert dfa.accepts(b'"\\u0041\\n"')
    assert not dfa.accepts(b'"\\ud83d\\ude00"')  # a surrogate pair would miscount length
    assert not dfa.accepts(b'"\\x41"')
    assert not dfa.accepts(b'"\x01"')  # raw control characters are not JSON


def test_property_names_cannot_hide_behind_escapes() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}}
    dfa = schema_dfa(schema)
    assert not dfa.accepts(b'{"\\u0061":"s"}')  # would decode to the listed key "a"


@pytest.mark.parametrize("ws,text", [
    ("pretty", '{\n  "a": 1,\n  "b": [\n    true\n  ]\n}'),
    ("pretty:4", '{\n    "a": 1\n}'),
    ("flexible:2", '{ "a" :1 ,"b":[ true  ] }'),
])
def test_whitespace_policies(ws: str, text: str) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "boolean"}}}, "required": ["a"]}
    assert schema_dfa(schema, ws).accepts(text.encode())
    assert not schema_dfa(schema, "compact").accepts(text.encode())


def test_pretty_matches_json_dumps() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "object", "properties": {"x": {"enum": [[1, 2]]}}}, "e": {"type": "array"}}}
    value = {"a": {"x": [1, 2]}, "e": []}
    assert schema_dfa(schema, "pretty:2").accepts(json.dumps(value, indent=2).encode())


def test_flexible_runs_are_bounded() -> None:
    dfa = schema_dfa({"type": "array", "items": {"type": "integer"}}, "flexible:3")
    assert dfa.accepts(b"[   1]")
    assert not dfa.accepts(b"[    1]")


@pytest.mark.parametrize("schema,err,where", [
    ({"type": "integer", "multipleOf": 0.123456789}, UnsupportedKeyword, "/multipleOf"),
    ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, UnsupportedKeyword, "/uniqueItems"),
    ({"properties": {"a": {"not": {"format": "date"}}}}, UnsupportedKeyword, "/properties/a/not"),
    ({"type": "wat"}, SchemaError, "/type"),
    ({"$ref": "#/$defs/missing"}, SchemaError, "/"),
    ({"properties": {"a": {"$ref": "https://example.com/t.json"}}}, UnsupportedKeyword, "/properties/a"),
    ({"$defs": {"t": {"anyOf": [{"$ref": "#/$defs/t"}, {"type": "null"}]}}, "$ref": "#/$defs/t"}, UnsupportedKeyword, "/anyOf/0"),
    ({"type": "string", "pattern": "a(b"}, RegexSyntaxError, "/pattern"),
    ({"type": "string", "minLength": 3, "maxLength": 2}, EmptyLanguage, ""),
    ({"type": "integer", "minimum": 5, "maximum": 4}, EmptyLanguage, ""),
        ([1, 2], SchemaError, ""),
])
def test_errors_name_keyword_and_pointer(schema: Any, err: type[Exception], where: str) -> None:
    with pytest.raises(err) as e:
        schema_to_ir(schema, CompileOptions())
    assert where in str(e.value)


def test_lenient_records_not_enforced() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 0.123456789},
                                               "s": {"type": "array", "uniqueItems": True},
                                               "f": {"type": "string", "format": "credit-card"}}}
    _, dropped = schema_to_ir(schema, CompileOptions(lenient=True))
    assert {(d["keyword"], d["pointer"], d.get("kind")) for d in dropped} == {
        ("multipleOf", "/properties/n/multipleOf", None), ("uniqueItems", "/properties/s/uniqueItems", None),
        ("format", "/properties/f/format", "annotation")}


def test_unknown_format_is_an_annotation_in_strict_mode_too() -> None:
    _, notes = schema_to_ir({"type": "string", "format": "credit-card"}, CompileOptions())
    assert [(n["keyword"], n["pointer"], n["kind"]) for n in notes] == [("format", "/format", "annotation")]


PATTERN_PROPS = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "x-tag": {"type": "string"}},
    "patternProperties": {"^x-": {"type": "string", "maxLength": 3}, "_n$": {"type": "integer"}},
    "additionalProperties": {"type": "boolean"},
}


@pytest.mark.parametrize("value,ok", [
    ({"id": 1}, True),
    ({"id": 1, "x-tag": "abc"}, True),
    ({"id": 1, "x-tag": "abcd"}, False),  # listed and matching a pattern: both schemas apply
    ({"x-a": "s", "b_n": 2, "other": True}, True),
    ({"x-a": 1}, False),
    ({"b_n": "s"}, False),
    ({"other": "s"}, False),  # neither listed nor matching: additionalProperties
    ({"x-b_n": "s"}, False),  # matches two patterns: not generated (sound restriction)
    ({"id": 1, "\\u0078-a": "s"}, False),
])
def test_pattern_properties(value: Any, ok: bool) -> None:
    dfa = schema_dfa(PATTERN_PROPS)
    text = compact(value).replace(b"\\\\u", b"\\u")
    if ok:
        jsonschema.validate(value, PATTERN_PROPS)
    assert dfa.accepts(text) == ok, value


def test_required_property_no_schema_admits_is_empty() -> None:
    from maskc.compiler.errors import EmptyLanguage

    with pytest.raises(EmptyLanguage):
        schema_to_ir({"type": "object", "properties": {}, "required": ["a"], "additionalProperties": False}, CompileOptions())


@pytest.mark.parametrize("schema,ok,bad", [
    ({"not": {"type": "null"}, "type": ["string", "null"]}, ["s"], [None]),
    ({"type": "object", "properties": {"a": {"not": {}}}}, [{}], [{"a": 1}]),
    ({"anyOf": [{"type": "integer"}, {"not": {"type": ["number", "string", "object", "array", "null"]}}]}, [1, True], ["s", 1.5]),
])
def test_simple_not_forms(schema: Any, ok: list[Any], bad: list[Any]) -> None:
    check_values(schema, ok, bad)


@pytest.mark.parametrize("schema,ok,bad", [
    ({"enum": ["a", "bbbb"], "maxLength": 2}, ["a"], ["bbbb"]),
    ({"enum": [1, 50, "x"], "type": "integer", "maximum": 10}, [1], [50, "x"]),
    ({"$defs": {"short": {"maxLength": 1}}, "enum": ["a", "ab"], "allOf": [{"$ref": "#/$defs/short"}]}, ["a"], ["ab"]),
    ({"enum": [2.0, "x"]}, [2, 2.0], [3]),
    # a whole float at any depth is also spelled as the integer it equals
    ({"enum": [[2.0], {"a": [1.0, 0.5]}]}, [[2], [2.0], {"a": [1, 0.5]}, {"a": [1.0, 0.5]}], [[3], [True], {"a": [1]}]),
    # ... so a difference over canonical spellings keeps it ([1.0] alone was no value at all)
    ({"enum": [[1.0]], "not": {"enum": [[True]]}}, [[1]], [[True], [2]]),
])
def test_enum_values_obey_sibling_keywords(schema: Any, ok: list[Any], bad: list[Any]) -> None:
    check_values(schema, ok, bad)


@pytest.mark.parametrize("schema,accepted,rejected", [
    ({"minLength": 5, "maxLength": 2}, [b"3", b"null", b"[]"], [b'"ab"', b'"abcdef"']),
    ({"minimum": 5, "maximum": 2}, [b'"ab"', b"null"], [b"3", b"7"]),
    ({"type": ["string", "integer"], "maxLength": 1.0, "minLength": 1.0}, [b'"a"', b"12"], [b'""', b'"ab"']),
])
def test_bounds_no_value_of_one_type_meets_empty_that_type_only(schema: Any, accepted: list[bytes],
                                                                 rejected: list[bytes]) -> None:
    import maskc
    from maskc.compiler.vocab import byte_tokenizer

    art = maskc.compile_json_schema(schema, byte_tokenizer(), semantics="exact")
    for text in accepted + rejected:
        m = art.matcher()
        assert bool(m.accept_string(text) and m.can_terminate()) is (text in accepted), text
