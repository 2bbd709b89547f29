"""``anyOf`` branches implied by another branch are not compiled (``subsume.implies``)."""

from __future__ import annotations

import itertools
from typing import Any

import jsonschema
import pytest

from maskc.compiler.errors import SchemaError
from maskc.compiler.frontends.json_schema.subsume import implies
from tests.helpers import accepts
from tests.maskbench import serialize

_DEFS: dict[str, Any] = {
    "common": {"type": "object", "required": ["name", "kind"],
               "properties": {"name": {"type": "string"}, "kind": {"enum": ["file", "dir", "link"]}}},
    "alias": {"allOf": [{"$ref": "#/definitions/common"}]},
    "strict": {"type": "object", "required": ["name", "kind", "size"],
               "properties": {"name": {"type": "string"}, "kind": {"enum": ["file"]},
                              "size": {"type": "integer", "minimum": 0}}},
}


def _resolve(ref: Any, _pointer: str) -> tuple[Any, str]:
    prefix = "#/definitions/"
    if not isinstance(ref, str) or not ref.startswith(prefix) or ref[len(prefix):] not in _DEFS:
        raise SchemaError(f"no target {ref!r}")
    return _DEFS[ref[len(prefix):]], ref[1:]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/definitions/{name}"}


@pytest.mark.parametrize("x, y, expected", [
    ({"type": "integer"}, {"type": "number"}, True),
    ({"type": "number"}, {"type": "integer"}, False),
    ({"enum": ["a", "b"]}, {"type": "string"}, True),
    ({"enum": ["a", "b"]}, {"enum": ["b", "a", "c"]}, True),
    ({"enum": ["a", 1]}, {"enum": ["a", True]}, False),  # 1 is not true
    ({"type": "string", "minLength": 1}, {"type": "string"}, True),
    ({"type": "string"}, {"type": "string", "minLength": 1}, False),
    ({"type": "string", "minLength": 2}, {"type": "string", "minLength": 1}, False),  # not read: unequal
    (False, {"type": "string"}, True),
    ({"type": "string"}, {"description": "anything"}, True),
    (_ref("strict"), _ref("common"), True),
    (_ref("strict"), _ref("alias"), True),
    (_ref("common"), _ref("strict"), False),
    ({"oneOf": [_ref("strict"), _ref("common")]}, _ref("alias"), True),  # every branch implies it
    ({"oneOf": [_ref("strict"), {"type": "object"}]}, _ref("common"), False),
    ({"anyOf": [_ref("strict")], "required": ["x"]}, _ref("common"), False),  # siblings: not read as branches
    # the names y lays out must open x's properties in y's order (maskc's layout)
    ({"properties": {"b": {}, "a": {}}}, {"properties": {"a": {}, "b": {}}}, False),
    ({"properties": {"a": {}, "b": {}, "c": {}}}, {"properties": {"a": {}, "b": {}}}, True),
    ({"properties": {"c": {}, "a": {}}, "required": ["a"]}, {"required": ["a"]}, False),
    ({"properties": {"a": {}, "c": {}}, "required": ["a"]}, {"required": ["a"]}, True),
    ({"properties": {"a": {}}, "additionalProperties": False},
     {"properties": {"a": {}}, "additionalProperties": {"type": "string"}}, False),
    ({"type": "object"}, {"not": {"type": "string"}}, False),  # not proven, not wrong
])
def test_implies(x: Any, y: Any, expected: bool) -> None:
    assert implies(x, "", y, "", _resolve, True) is expected


_FILES: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-04/schema#",
    "type": "array",
    "items": {"anyOf": [{"$ref": "#/definitions/file"}, {"$ref": "#/definitions/remote"}]},
    "definitions": {
        # overlapping branches: exactly one of them is an exclusive choice between objects
        "file": {"oneOf": [
            {"type": "object", "required": ["name", "kind", "user"],
             "properties": {"name": {"type": "string"}, "kind": {"enum": ["file", "dir"]},
                            "user": {"type": "string", "minLength": 1}},
             "oneOf": [{"required": ["size"], "properties": {"size": {"type": "integer"}}},
                       {"required": ["files"], "properties": {"files": {"type": "integer"}}}]},
            {"$ref": "#/definitions/common"}]},
        "common": {"type": "object", "required": ["name", "kind"],
                   "properties": {"name": {"type": "string"}, "kind": {"enum": ["file", "dir"]}}},
        "remote": {"allOf": [{"$ref": "#/definitions/common"}]},
    },
}


def test_anyof_branch_inside_another_is_not_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    # 'file' admits only what 'remote' (= 'common') admits: the union is 'common', and the
    # exclusive choice inside 'file' (a product of object grammars) is never built
    from maskc.compiler.frontends.json_schema import combinators

    def no_product(*_: Any, **__: Any) -> Any:
        raise AssertionError("the redundant branch was compiled")

    monkeypatch.setattr(combinators.CombinatorsMixin, "exclusive", no_product)
    validator = jsonschema.Draft4Validator(_FILES)
    fields = {"name": "n", "kind": "dir", "user": "u", "size": 3, "files": 2, "z": None}
    verdicts = set()
    for n in range(len(fields) + 1):
        for keys in itertools.combinations(fields, n):
            for value in ([{k: fields[k] for k in keys}], [{k: fields[k] for k in keys}, {"name": 1, "kind": "dir"}]):
                ok = validator.is_valid(value)
                assert accepts(_FILES, serialize(value, _FILES).decode()) == ok, value
                verdicts.add(ok)
    assert verdicts == {True, False}
    for text in ('[{"name":"n","kind":"link"}]', '[{"name":"n"}]', "[1]", "{}", '[{"kind":"dir","name":"n"}]'):
        assert not accepts(_FILES, text), text


def test_branch_spelled_in_another_order_is_kept() -> None:
    # the same instances, but maskc lays members out in definition order: the first
    # branch spells b before a, which the second's layout does not, so both are compiled
    schema = {"anyOf": [{"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}},
                         "required": ["a", "b"]},
                        {"type": "object", "properties": {"a": {}, "b": {}}}]}
    assert accepts(schema, '{"b":1,"a":2}')
    assert accepts(schema, '{"a":1,"b":"x"}')
    assert not accepts(schema, '1')
