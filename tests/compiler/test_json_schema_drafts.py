"""Drafts and base URIs: ``$schema`` picks the draft; references resolve against the
``$id`` in force where they stand; ``$dynamicRef``/``$recursiveRef`` compile where they
reduce to a static reference and are refused by name where they do not."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

import maskc
from maskc.compiler.errors import UnsupportedKeyword
from maskc.compiler.frontends.json_schema.drafts import draft_of
from maskc.compiler.vocab import byte_tokenizer
from tests.maskbench import serialize

D7 = "http://json-schema.org/draft-07/schema#"
D4 = "http://json-schema.org/draft-04/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"
D2020 = "https://json-schema.org/draft/2020-12/schema"


def accepts(schema: Any, value: Any, semantics: str = "exact") -> bool:
    art = maskc.compile_json_schema(schema, byte_tokenizer(), semantics=semantics)
    m = art.matcher()
    return bool(m.accept_string(serialize(value, schema)) and m.can_terminate())


@pytest.mark.parametrize("uri,draft", [
    (D4, "draft4"), ("http://json-schema.org/draft-06/schema#", "draft6"), (D7, "draft7"),
    ("http://json-schema.org/draft-07/schema", "draft7"), (D2019, "draft2019-09"), (D2020, "draft2020-12"),
    ("https://example.com/my-meta", "draft2020-12"), (None, "draft2020-12"),
])
def test_draft_of(uri: str | None, draft: str) -> None:
    assert draft_of({} if uri is None else {"$schema": uri}) == draft


def test_draft7_ref_ignores_its_siblings_and_2020_applies_them() -> None:
    body = {"definitions": {"a": {"type": "array"}}, "$ref": "#/definitions/a", "maxItems": 1}
    assert accepts({"$schema": D7, **body}, [1, 2, 3])
    assert not accepts({"$schema": D7, **body}, "x")
    assert not accepts({"$schema": D2020, **body}, [1, 2, 3])
    assert accepts({"$schema": D2020, **body}, [1])


def test_draft4_exclusive_minimum_boolean() -> None:
    s = {"$schema": D4, "type": "integer", "minimum": 3, "exclusiveMinimum": True}
    assert not accepts(s, 3)
    assert accepts(s, 4)


def test_ref_resolves_against_the_enclosing_id() -> None:
    schema = {
        "$id": "http://example.com/root.json",
        "properties": {
            "foo": {"$id": "foo/schema.json", "$defs": {"inner": {"type": "string"}}, "$ref": "#/$defs/inner"},
            "bar": {"$ref": "foo/schema.json"},
            "baz": {"$ref": "http://example.com/foo/schema.json#/$defs/inner"},
        },
    }
    for key in ("foo", "bar", "baz"):
        assert accepts(schema, {key: "s"}), key
        assert not accepts(schema, {key: 1}), key


def test_anchor_belongs_to_its_resource() -> None:
    schema = {
        "$id": "http://example.com/root",
        "$defs": {
            "A": {"$anchor": "x", "type": "integer"},
            "B": {"$id": "other", "$defs": {"x": {"$anchor": "x", "type": "string"}}},
        },
        "properties": {"i": {"$ref": "#x"}, "s": {"$ref": "other#x"}},
    }
    assert accepts(schema, {"i": 1, "s": "a"})
    assert not accepts(schema, {"i": "a"})
    assert not accepts(schema, {"s": 1})


def test_a_ref_merged_through_allof_keeps_its_base() -> None:
    # the target's own $ref is relative to the target's $id, not to the schema it is merged into
    schema = {
        "$schema": D2020,
        "$id": "http://example.com/a.json",
        "properties": {"foo": {"$id": "b.json", "$defs": {"inner": {"properties": {"bar": {"type": "string"}}}},
                               "$ref": "#/$defs/inner"}},
        "$ref": "b.json",
    }
    assert accepts(schema, {"bar": "a"})
    assert not accepts(schema, {"bar": 1})


def test_property_named_id_or_ref_is_not_a_keyword() -> None:
    schema = {"properties": {"$id": {"type": "integer"}, "$ref": {"type": "string"}}}
    assert accepts(schema, {"$id": 1, "$ref": "x"})
    assert not accepts(schema, {"$id": "x"})


def test_unknown_document_is_refused_by_name() -> None:
    with pytest.raises(UnsupportedKeyword) as e:
        maskc.compile_json_schema({"$ref": "http://example.com/elsewhere.json"}, byte_tokenizer())
    assert e.value.keyword == "$ref"


def test_dynamic_ref_with_one_anchor_is_static() -> None:
    schema = {
        "$schema": D2020,
        "$dynamicAnchor": "node",
        "type": "object",
        "properties": {"child": {"$dynamicRef": "#node"}, "v": {"type": "integer"}},
    }
    art = maskc.compile_json_schema(schema, byte_tokenizer(), semantics="exact")
    for text, ok in [(b'{"child":{"child":{},"v":2},"v":1}', True), (b'{"child":{"v":"x"}}', False)]:
        m = art.matcher()
        assert bool(m.accept_string(text) and m.can_terminate()) is ok, text


def test_dynamic_ref_with_two_anchors_is_refused() -> None:
    schema = {
        "$schema": D2020, "$dynamicAnchor": "node", "items": {"$dynamicRef": "#node"},
        "$defs": {"other": {"$id": "other", "$dynamicAnchor": "node", "type": "string"}},
    }
    with pytest.raises(UnsupportedKeyword) as e:
        maskc.compile_json_schema(schema, byte_tokenizer())
    assert e.value.keyword == "$dynamicRef"


def test_recursive_ref_to_the_root() -> None:
    schema = {"$schema": D2019, "$recursiveAnchor": True, "type": "array", "items": {"$recursiveRef": "#"}, "maxItems": 2}
    assert accepts(schema, [[], [[]]])
    assert not accepts(schema, [[1]])
    assert not accepts(schema, [[], [], []])


def test_recursive_ref_with_an_embedded_anchor_is_refused() -> None:
    schema = {"$schema": D2019, "$recursiveAnchor": True, "items": {"$recursiveRef": "#"},
              "$defs": {"x": {"$id": "x", "$recursiveAnchor": True, "type": "string"}}}
    with pytest.raises(UnsupportedKeyword) as e:
        maskc.compile_json_schema(schema, byte_tokenizer())
    assert e.value.keyword == "$recursiveRef"


D6 = "http://json-schema.org/draft-06/schema#"


def test_later_keywords_are_dropped_where_schemas_are_and_nowhere_else() -> None:
    from maskc.compiler.frontends.json_schema.drafts import later_keywords

    doc: dict[str, Any] = {
        "$schema": D4, "const": 1,
        "properties": {"const": {"type": "string", "contains": {}}, "if": {"enum": [{"if": 1}], "default": {"then": 2}}},
        "definitions": {"d": {"allOf": [{"if": {}, "then": {}, "minimum": 1}]}},
        "x-vendor": {"propertyNames": {}},  # (a reference may reach a schema under an unknown keyword)
    }
    out, dropped = later_keywords(doc, "draft4")
    assert sorted(dropped) == sorted([
        ("const", "/const"), ("contains", "/properties/const/contains"), ("if", "/definitions/d/allOf/0/if"),
        ("then", "/definitions/d/allOf/0/then"), ("propertyNames", "/x-vendor/propertyNames")])
    assert out["properties"]["const"] == {"type": "string"} and out["properties"]["if"] is doc["properties"]["if"]
    assert out["definitions"]["d"] == {"allOf": [{"minimum": 1}]}
    assert doc["const"] == 1 and "contains" in doc["properties"]["const"]  # (the input is not modified)
    assert later_keywords(doc, "draft7")[1] == [] and later_keywords(doc, "draft2020-12")[0] is doc
    assert [k for k, _ in later_keywords({"if": {}, "const": 1, "dependentRequired": {}}, "draft6")[1]] == [
        "if", "dependentRequired"]


@pytest.mark.parametrize("uri, enforced", [(D4, False), (D6, True), (D7, True), (None, True)])
def test_const_is_a_keyword_from_draft6_on(uri: str | None, enforced: bool) -> None:
    # Branches told apart by const: a draft-04 validator ignores const, so an object with
    # "n" meets both branches there (not valid); from draft-06 on, "kind" tells them apart.
    body: dict[str, Any] = {"type": "object", "required": ["kind"], "oneOf": [
        {"properties": {"kind": {"const": "a"}}}, {"properties": {"kind": {"type": "string"}, "n": {"const": 1}},
                                                   "required": ["n"]}]}
    schema = body if uri is None else {"$schema": uri, **body}
    validator = jsonschema.validators.validator_for(schema)(schema)
    values = [{"kind": "a"}, {"kind": "b", "n": 1}, {"kind": "b", "n": 2}, {"kind": "a", "n": 1}, {"kind": "b"}]
    got = [accepts(schema, v) for v in values]
    assert got == [validator.is_valid(v) for v in values]
    assert got == ([True, True, False, False, False] if enforced else [True, False, False, False, True])
    art = maskc.compile_json_schema(schema, byte_tokenizer())
    notes = [e for e in art.not_enforced if e.get("kind") == "annotation" and e["keyword"] == "const"]
    assert [e["pointer"] for e in notes] == ([] if enforced else ["/oneOf/0/properties/kind/const",
                                                                 "/oneOf/1/properties/n/const"])


@pytest.mark.parametrize("uri, enforced", [(D4, False), (D7, True)])
def test_a_subschema_compiled_in_place_is_read_in_the_documents_draft(uri: str, enforced: bool) -> None:
    from maskc.compiler.dfa import determinize
    from maskc.compiler.lint.languages import compile_subschema
    from maskc.compiler.nfa import lower
    from maskc.compiler.options import CompileOptions

    doc = {"$schema": uri, "oneOf": [{"type": "string", "const": "a"}, {"type": "integer"}]}
    for given in (None, {"type": "string", "const": "a"}):  # (the node at the pointer, or one in its place)
        dfa = determinize(lower(compile_subschema(doc, "/oneOf/0", CompileOptions(), given).grammar.body))
        state = dfa.walk(0, b'"b"')
        assert (state >= 0 and bool(dfa.accepting[state])) is not enforced
