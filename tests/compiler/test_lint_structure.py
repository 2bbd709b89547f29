"""The structural lint rules (compiler/lint/structure.py, fields.py): schemas that must fire
each rule, at an exact pointer, and near-misses that must not."""

from __future__ import annotations

from typing import Any

import pytest

from maskc.compiler.findings import Finding
from maskc.compiler.lint import LintContext, all_rules, lint_schema
from maskc.compiler.lint.fields import closed_set_word, name_tokens
from maskc.compiler.lint.structure import RULES as STRUCTURE_RULES
from maskc.compiler.lint.structure import string_bound
from maskc.compiler.options import CompileOptions

MINE = ("unbounded-string", "unbounded-array", "unbounded-object", "nullable-union", "mixed-type-union",
        "optional-field", "free-text-enum", "schema-error")


def lint(schema: Any, *rules: str) -> list[Finding]:
    found: list[Finding] = lint_schema(LintContext(schema), select=list(rules or MINE))
    return found


def hits(schema: Any, rule: str) -> list[str]:
    """The pointers where ``rule`` fires."""
    return [f.pointer for f in lint(schema, rule)]


def obj(**props: Any) -> dict[str, Any]:
    """An object whose properties are all required (so optional-field stays quiet)."""
    return {"type": "object", "properties": props, "required": list(props)}


# -- registry ----------------------------------------------------------------------------------


def test_rules_are_registered_with_docs() -> None:
    known = {r.id: r for r in all_rules()}
    for rule in MINE:
        info = known[rule]
        assert info.summary and info.why and info.example and info.fix
    assert {r.id: r.severity for r in STRUCTURE_RULES} == {
        "unbounded-string": "warning", "unbounded-array": "warning", "unbounded-object": "warning",
        "nullable-union": "info", "mixed-type-union": "warning"}


# -- unbounded-string --------------------------------------------------------------------------


@pytest.mark.parametrize("schema, pointers", [
    (obj(a={"type": "string"}), ["/properties/a"]),
    (obj(a={"type": ["string", "null"]}), ["/properties/a"]),
    (obj(a={"minLength": 3}), ["/properties/a"]),  # inferred string: what maskc generates
    (obj(a={"type": "string", "pattern": "^[a-z]+$"}), ["/properties/a"]),
    (obj(a={"type": "string", "pattern": "[a-z]{1,5}"}), ["/properties/a"]),  # unanchored: any text around
    (obj(a={"type": "string", "format": "uri"}), ["/properties/a"]),
    (obj(a={"type": "string", "format": "date-time"}), ["/properties/a"]),  # fraction digits repeat
    (obj(a={"type": "string", "format": "no-such-format"}), ["/properties/a"]),
    (obj(a={"type": "string", "pattern": "(?<=a)b"}), ["/properties/a"]),  # not compiled: bounds nothing
    ({"type": "array", "items": {"type": "string"}, "maxItems": 2}, ["/items"]),
    ({"$defs": {"s": {"type": "string"}}, **obj(a={"$ref": "#/$defs/s"}, b={"$ref": "#/$defs/s"})},
     ["/$defs/s"]),  # reported once, at the definition, not at each reference
    ({"type": "string", "anyOf": [{"maxLength": 3}, {"pattern": "^a+$"}]}, ["/anyOf/1"]),
    ({"allOf": [{"type": "string"}, {"minLength": 2}]}, [""]),  # the merged view, at the allOf
])
def test_unbounded_string_fires(schema: Any, pointers: list[str]) -> None:
    assert hits(schema, "unbounded-string") == pointers


@pytest.mark.parametrize("schema", [
    obj(a={"type": "string", "maxLength": 20}),
    obj(a={"type": "string", "enum": ["x", "y"]}),
    obj(a={"type": "string", "const": "x"}),
    obj(a={"type": "string", "pattern": "^[a-z]{1,5}$"}),
    obj(a={"type": "string", "pattern": "^(?:yes|no)$"}),
    obj(a={"type": "string", "format": "date"}),
    obj(a={"type": "string", "format": "uuid"}),
    obj(a={"type": "string", "format": "email"}),
    obj(a={"type": "string", "format": "ipv6"}),
    obj(a={"type": "string", "format": "date-time", "pattern": "^.{0,40}$"}),  # bounded together
    obj(a={"type": "string", "format": "uri", "maxLength": 200}),
    obj(a={}),  # any JSON value: the termination rules' business
    obj(a=True),
    {"allOf": [{"type": "string"}, {"maxLength": 9}]},
    {"$defs": {"s": {"type": "string"}}, **obj(a={"$ref": "#/$defs/s", "maxLength": 4})},
    {"type": "string", "anyOf": [{"maxLength": 3}, {"format": "date"}]},
    {"$defs": {"unused": {"type": "string"}}, **obj(a={"type": "integer"})},  # never generated
    obj(a={"type": "integer", "not": {"type": "string"}}),  # nothing under not is generated
    obj(a={"type": "integer", "if": {"type": "string"}, "then": {"type": "string"}}),
])
def test_unbounded_string_near_misses(schema: Any) -> None:
    assert hits(schema, "unbounded-string") == []


def test_unbounded_string_names_the_loop_of_its_pattern() -> None:
    [f] = lint(obj(code={"type": "string", "pattern": "^A-[0-9]+$"}), "unbounded-string")
    assert "'^A-[0-9]+$'" in f.message and "repeat '0'" in f.message
    assert f.witness == "A-0000"


def test_string_bound_is_decided_on_the_automaton() -> None:
    assert string_bound(None, "^[a-z]{1,5}$")[:2] == ("bounded", "at most 5 bytes")
    assert string_bound("ipv4", None)[:2] == ("bounded", "at most 15 bytes")  # 255.255.255.255
    assert string_bound("uuid", None)[:2] == ("bounded", "at most 36 bytes")
    assert string_bound(None, "^a+$")[0] == "unbounded"
    assert string_bound(None, "^a$|b")[0] == "unbounded"  # the second branch is unanchored
    assert string_bound("date-time", "^.{0,30}$")[:2] == ("bounded", "at most 30 bytes")
    assert string_bound(None, "^[a-z]+$(")[0] == "unknown"  # a syntax error bounds nothing


# -- unbounded-array ---------------------------------------------------------------------------


@pytest.mark.parametrize("schema, pointers", [
    ({"type": "array", "items": {"type": "integer"}}, [""]),
    ({"type": "array"}, [""]),
    ({"type": "array", "prefixItems": [{"type": "integer"}]}, [""]),
    ({"type": "array", "items": [{"type": "integer"}]}, [""]),  # draft 7 tuple, additionalItems open
    ({"type": "array", "minItems": 2, "items": {"type": "integer"}}, [""]),
    (obj(xs={"type": ["array", "null"], "items": {"type": "integer"}}), ["/properties/xs"]),
])
def test_unbounded_array_fires(schema: Any, pointers: list[str]) -> None:
    assert hits(schema, "unbounded-array") == pointers


@pytest.mark.parametrize("schema", [
    {"type": "array", "items": {"type": "integer"}, "maxItems": 10},
    {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string", "maxLength": 1}], "items": False},
    {"type": "array", "items": [{"type": "integer"}], "additionalItems": False},
    {"type": "array", "items": False},
    {"type": "array", "enum": [[1], [2]]},
])
def test_unbounded_array_near_misses(schema: Any) -> None:
    assert hits(schema, "unbounded-array") == []


def test_unbounded_array_explains_an_open_tuple() -> None:
    [f] = lint({"type": "array", "prefixItems": [{"type": "integer"}]}, "unbounded-array")
    assert "prefixItems fixes the first 1 items" in f.message


# -- unbounded-object --------------------------------------------------------------------------


@pytest.mark.parametrize("schema, pointers", [
    ({"type": "object"}, [""]),  # no properties: any key
    ({"type": "object", "required": ["a"]}, [""]),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": True}, [""]),
    ({"type": "object", "additionalProperties": {"type": "integer"}}, [""]),
    ({"type": "object", "patternProperties": {"^x-": {"type": "integer"}}}, [""]),
    ({"type": "object", "unevaluatedProperties": True}, [""]),
    (obj(meta={"type": "object"}), ["/properties/meta"]),
])
def test_unbounded_object_fires(schema: Any, pointers: list[str]) -> None:
    assert hits(schema, "unbounded-object") == pointers


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "integer"}}},  # maskc: no extra keys
    {"type": "object", "properties": {}},
    {"type": "object", "additionalProperties": False},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "patternProperties": {"^x-": False}},
    {"properties": {"a": {"type": "integer"}}},  # untyped, inferred object
    {},
    {"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 3},  # enforced
    {"type": "object", "unevaluatedProperties": False},  # enforced: {} only
])
def test_unbounded_object_near_misses(schema: Any) -> None:
    assert hits(schema, "unbounded-object") == []


def test_unbounded_object_is_bounded_by_max_properties() -> None:
    assert lint({"type": "object", "additionalProperties": True, "maxProperties": 3}, "unbounded-object") == []


P_A = {"a": {"type": "integer"}}


def exact_hits(schema: Any, rule: str) -> list[str]:
    """The pointers where ``rule`` fires when the schema is linted in exact semantics."""
    ctx = LintContext(schema, options=CompileOptions(semantics="exact"))
    return [f.pointer for f in lint_schema(ctx, select=[rule])]


@pytest.mark.parametrize("schema", [
    # unevaluatedProperties: false reduces to additionalProperties: false (no applicator beside it)
    {"type": "object", "properties": P_A, "unevaluatedProperties": False},
    {"type": "object", "allOf": [{"properties": P_A}], "unevaluatedProperties": False},
    # no key at all, or only declared names
    {"type": "object", "propertyNames": False},
    {"type": "object", "properties": P_A, "propertyNames": {"enum": ["a"]}},
    {"type": "object", "properties": P_A, "propertyNames": {"const": "a"}, "additionalProperties": True},
    # a count the grammar enforces (integral floats read as counts)
    {"type": "object", "maxProperties": 3},
    {"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 2.0},
])
def test_unbounded_object_is_closed_by_the_keywords_maskc_now_enforces(schema: Any) -> None:
    assert hits(schema, "unbounded-object") == []
    assert exact_hits(schema, "unbounded-object") == []


@pytest.mark.parametrize("schema,needle", [
    ({"type": "object", "properties": P_A, "unevaluatedProperties": True}, "unevaluatedProperties is true"),
    ({"type": "object", "properties": P_A, "unevaluatedProperties": {"type": "string"}},
     "unevaluatedProperties is a schema"),
    # a finite set of undeclared names still lets a key repeat
    ({"type": "object", "propertyNames": {"enum": ["a", "b"]}}, "propertyNames lists 2 names"),
    ({"type": "object", "properties": P_A, "propertyNames": {"enum": ["a", "b"]}, "additionalProperties": True},
     "propertyNames lists 2 names"),
    # past the compiled bound, maxProperties is not enforced
    ({"type": "object", "maxProperties": 100}, "maxProperties 100 is over maskc's bound of 64"),
])
def test_unbounded_object_near_misses_of_the_closing_keywords(schema: Any, needle: str) -> None:
    [f] = lint(schema, "unbounded-object")
    assert f.pointer == "" and needle in f.message


def test_unbounded_object_reads_the_semantics() -> None:
    declared = {"type": "object", "properties": P_A, "required": ["a"]}
    assert hits(declared, "unbounded-object") == []  # generation: declared keys only
    assert exact_hits(declared, "unbounded-object") == [""]  # JSON Schema admits other keys
    [f] = lint_schema(LintContext(declared, options=CompileOptions(semantics="exact")), select=["unbounded-object"])
    assert "exact semantics" in f.message
    closed = {**declared, "additionalProperties": False}
    assert exact_hits(closed, "unbounded-object") == []


def test_unevaluated_properties_beside_a_union_is_not_read_as_closing() -> None:
    # the compiler refuses unevaluatedProperties next to anyOf / if (the evaluated keys depend on
    # the branch) and compiles without it: open in exact semantics, closed in generation
    for extra in ({"anyOf": [{"required": ["a"]}, {}]}, {"if": {"required": ["a"]}, "then": {}}):
        schema = {"type": "object", "properties": P_A, "unevaluatedProperties": False, **extra}
        assert hits(schema, "unbounded-object") == []
        found = lint_schema(LintContext(schema, options=CompileOptions(semantics="exact")),
                            select=["unbounded-object"])
        assert [f.pointer for f in found] == [""]
        assert "unevaluatedProperties next to" in found[0].message


def test_union_branches_sharing_a_problem_report_it_once() -> None:
    schema = {"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}
    assert hits(schema, "unbounded-object") == [""]
    partly = {"type": "object", "anyOf": [{"required": ["a"]}, {"properties": {"b": {"const": 1}}}]}
    assert hits(partly, "unbounded-object") == ["/anyOf/0"]


# -- nullable-union and mixed-type-union --------------------------------------------------------


@pytest.mark.parametrize("schema, pointers", [
    ({"type": ["integer", "null"]}, [""]),
    ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, [""]),
    ({"oneOf": [{"type": "boolean"}, {"const": None}]}, [""]),
    ({"anyOf": [{"type": "boolean"}, {"enum": [None]}]}, [""]),
    ({"enum": ["a", "b", None]}, [""]),
    ({"$defs": {"n": {"type": "null"}}, "anyOf": [{"type": "integer"}, {"$ref": "#/$defs/n"}]}, [""]),
])
def test_nullable_union_fires(schema: Any, pointers: list[str]) -> None:
    assert hits(schema, "nullable-union") == pointers


@pytest.mark.parametrize("schema", [
    {"type": "integer"},
    {"type": "null"},
    {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]},
    {"type": "integer", "anyOf": [{"minimum": 1}, {"type": "null"}]},  # the null branch is empty
    {"enum": ["a", "b"]},
    {"type": ["integer", "null"], "not": {"type": "null"}},  # not removes null
])
def test_nullable_union_near_misses(schema: Any) -> None:
    assert hits(schema, "nullable-union") == []


@pytest.mark.parametrize("schema, pointers", [
    ({"type": ["string", "number"]}, [""]),
    ({"type": ["string", "integer", "null"]}, [""]),
    ({"anyOf": [{"type": "string"}, {"type": "object"}]}, [""]),
    ({"oneOf": [{"const": "auto"}, {"type": "integer"}]}, [""]),
    ({"anyOf": [{"type": "boolean"}, {"anyOf": [{"type": "null"}, {"type": "array"}]}]}, [""]),
])
def test_mixed_type_union_fires(schema: Any, pointers: list[str]) -> None:
    assert hits(schema, "mixed-type-union") == pointers


@pytest.mark.parametrize("schema", [
    {"type": ["integer", "number"]},  # related
    {"type": ["string", "null"]},  # nullable-union's
    {"anyOf": [{"type": "integer"}, {"type": "number", "minimum": 0.5}]},
    {"anyOf": [{"type": "string", "format": "date"}, {"type": "string", "format": "email"}]},
    {"anyOf": [{"type": "string"}, {}]},  # an untyped branch: any value, not a type union
    {"enum": ["a", 1]},  # listed values
    {"type": "string", "anyOf": [{"maxLength": 2}, {"type": "integer"}]},  # the integer branch is empty
])
def test_mixed_type_union_near_misses(schema: Any) -> None:
    assert hits(schema, "mixed-type-union") == []


def test_union_messages_name_the_types() -> None:
    [f] = lint({"type": ["string", "integer", "object"]}, "mixed-type-union")
    assert "number | object | string" in f.message


# -- optional-field ----------------------------------------------------------------------------


def test_optional_field_fires_once_per_property() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b/c": {"type": "integer"},
                                               "d": {"type": "integer"}}, "required": ["d"]}
    assert hits(schema, "optional-field") == ["/properties/a", "/properties/b~1c"]


@pytest.mark.parametrize("schema", [
    obj(a={"type": "integer"}),
    {"type": "object", "properties": {"a": False}},  # cannot appear at all
    {"allOf": [{"properties": {"a": {"type": "integer"}}}, {"required": ["a"]}]},
    {"properties": {"a": {"type": "integer"}}, "allOf": [{"required": ["a"]}]},
    {"$defs": {"o": {"properties": {"a": {"type": "integer"}}}}, "type": "integer"},  # unused
])
def test_optional_field_near_misses(schema: Any) -> None:
    assert hits(schema, "optional-field") == []


def test_optional_field_in_an_allof_conjunct_sees_the_parent_required() -> None:
    schema = {"required": ["a"], "allOf": [{"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}]}
    assert hits(schema, "optional-field") == ["/allOf/0/properties/b"]


# -- free-text-enum ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["status", "ticket_status", "paymentMethod", "PriorityLevel", "currency",
                                  "country-code", "type", "logLevel", "LANGUAGE"])
def test_free_text_enum_fires_on_closed_set_names(name: str) -> None:
    assert hits(obj(**{name: {"type": "string"}}), "free-text-enum") == ["/properties/" + name]


@pytest.mark.parametrize("name", ["statusMessage", "description", "type_description", "stateReason", "name",
                                  "typeface", "unitPrice", "label", "status_code_text", "comment"])
def test_free_text_enum_ignores_other_names(name: str) -> None:
    assert hits(obj(**{name: {"type": "string"}}), "free-text-enum") == []


@pytest.mark.parametrize("prop", [
    {"type": "string", "enum": ["open", "closed"]},
    {"type": "string", "const": "open"},
    {"type": "string", "pattern": "^[A-Z]{3}$"},
    {"type": "string", "format": "date"},
    {"type": "integer"},  # a status code
    {"anyOf": [{"const": "open"}, {"const": "closed"}]},
])
def test_free_text_enum_near_misses(prop: Any) -> None:
    assert hits(obj(status=prop), "free-text-enum") == []


def test_free_text_enum_reads_descriptions_and_plural_arrays() -> None:
    by_desc = obj(sort={"type": "string", "description": "Sort order: 'asc' or 'desc'."},
                  shade={"type": "string", "description": "Must be one of red, green, blue"},
                  note={"type": "string", "description": "One of the notes the user wrote."})
    assert hits(by_desc, "free-text-enum") == ["/properties/sort", "/properties/shade"]
    arrays = obj(categories={"type": "array", "items": {"type": "string"}, "maxItems": 3},
                 tags={"type": "array", "items": {"type": "string"}, "maxItems": 3},
                 roles={"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3})
    assert hits(arrays, "free-text-enum") == ["/properties/categories"]


def test_free_text_enum_follows_references() -> None:
    schema = {"$defs": {"S": {"type": "string", "enum": ["a"]}, "T": {"type": "string"}},
              **obj(status={"$ref": "#/$defs/S"}, kind={"$ref": "#/$defs/T"})}
    assert hits(schema, "free-text-enum") == ["/properties/kind"]


def test_name_tokens() -> None:
    assert name_tokens("paymentMethod") == ["payment", "method"]
    assert name_tokens("HTTPStatus_code") == ["http", "status", "code"]
    assert closed_set_word("categories", plural=True) == "categories"
    assert closed_set_word("categories") is None


# -- schema-error ------------------------------------------------------------------------------


@pytest.mark.parametrize("schema, pointers", [
    ({"type": "strng"}, ["/type"]),
    ({"type": "object", "properties": {"a": {"maxLength": -1}}}, ["/properties/a/maxLength"]),
    ({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}, ["/properties/a/$ref"]),
    ({"items": {"$ref": "#nowhere"}}, ["/items/$ref"]),
    ({"items": {"$ref": "https://example.com/s.json"}}, ["/items/$ref"]),
    ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "items": {"$ref": "#/$defs/a"}},
     ["/$defs/a/$ref", "/$defs/b/$ref", "/items/$ref"]),
    ({"definitions": {"x": 3}, "items": {"$ref": "#/definitions/x"}}, ["/definitions/x", "/items/$ref"]),
])
def test_schema_error_fires(schema: Any, pointers: list[str]) -> None:
    assert sorted(hits(schema, "schema-error")) == sorted(pointers)


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/b"}}, "$defs": {"b": {"type": "integer"}}},
    {"items": {"$ref": "#"}, "type": "array", "maxItems": 2},
    {"$defs": {"b": {"$anchor": "bee", "type": "integer"}}, "items": {"$ref": "#bee"}},
    True,
])
def test_schema_error_near_misses(schema: Any) -> None:
    assert hits(schema, "schema-error") == []


def test_schema_error_does_not_stop_the_other_rules() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": "ten"},
                                               "b": {"type": "array"}}, "required": ["a", "b"]}
    got = {(f.rule, f.pointer) for f in lint(schema)}
    assert ("schema-error", "/properties/a/maxLength") in got
    assert ("unbounded-array", "/properties/b") in got
    assert ("unbounded-string", "/properties/a") in got  # a non-integer maxLength bounds nothing


@pytest.mark.parametrize("schema", [
    {"type": 3, "properties": [], "required": "a", "items": 7, "anyOf": {}, "enum": 1},
    {"properties": {"a": {"type": ["string", 5], "pattern": 3, "format": None, "maxLength": True}}},
    {"allOf": [{"$ref": 5}, {"type": "string"}], "oneOf": [], "additionalProperties": "x"},
    {"allOf": [{"$ref": "#"}]},
    {"anyOf": [{"type": "string"}, {"type": "string"}], "allOf": [{"anyOf": [{"type": "null"}]}]},
    {"properties": {"a": {"$ref": "#/properties/a"}}},
    [1, 2], "text", None, 3, False,
])
def test_rules_do_not_crash_on_invalid_schemas(schema: Any) -> None:
    lint(schema)  # no exception; schema-error reports what is wrong


# -- x-maskc-ignore ----------------------------------------------------------------------------


def test_ignore_suppresses_at_a_node_and_its_descendants() -> None:
    schema = {"type": "object", "properties": {
        "a": {"type": "string", "x-maskc-ignore": ["unbounded-string"]},
        "b": {"type": "object", "x-maskc-ignore": "unbounded-string", "required": ["c"],
              "properties": {"c": {"type": "string"}}, "additionalProperties": {"type": "string"}},
        "d": {"type": "string"},
    }, "required": ["a", "b", "d"]}
    assert hits(schema, "unbounded-string") == ["/properties/d"]
    assert hits(schema, "unbounded-object") == ["/properties/b"]  # other rules still fire there
    root_ignored = {**schema, "x-maskc-ignore": ["unbounded-string", "unbounded-object"]}
    assert hits(root_ignored, "unbounded-string") == [] and hits(root_ignored, "unbounded-object") == []


def test_optional_field_of_a_merged_definition_follows_its_uses() -> None:
    base = {"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    merged = {"$defs": {"Base": base}, "type": "object",
              "allOf": [{"$ref": "#/$defs/Base"}, {"required": ["a"]}]}
    assert hits(merged, "optional-field") == ["/$defs/Base/properties/b"]
    both = {"$defs": {"Base": base}, "type": "array", "maxItems": 2, "prefixItems": [
        {"allOf": [{"$ref": "#/$defs/Base"}, {"required": ["a", "b"]}]},
        {"$ref": "#/$defs/Base", "required": ["a"]}], "items": False}
    assert hits(both, "optional-field") == ["/$defs/Base/properties/b"]
    everywhere = {"$defs": {"Base": base}, "allOf": [{"$ref": "#/$defs/Base"}, {"required": ["a", "b"]}]}
    assert hits(everywhere, "optional-field") == []
