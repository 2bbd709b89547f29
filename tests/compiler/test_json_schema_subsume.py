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


# -- oneOf branches apart on objects, with non-objects counted per kind ----------------------

def test_admits_kind() -> None:
    from maskc.compiler.frontends.json_schema.disjoint import ALL, NONE, admits_kind

    def kind_of(schema: Any, kind: str) -> str | None:
        return admits_kind(schema, "", kind, _resolve, True)

    assert kind_of({"required": ["a"], "properties": {"a": {"type": "string"}}}, "string") == ALL
    assert kind_of({"type": "object", "required": ["a"]}, "null") == NONE
    assert kind_of({"type": "integer"}, "integer") == ALL
    assert kind_of({"type": "integer"}, "fraction") == NONE
    assert kind_of({"type": "number"}, "fraction") == ALL
    assert kind_of({"minLength": 2}, "string") is None  # some strings
    assert kind_of({"minLength": 2}, "array") == ALL
    assert kind_of({"enum": ["a"]}, "string") is None
    # both inner branches hold for every non-object: exactly one never does
    assert kind_of({"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}, "boolean") == NONE
    assert kind_of({"anyOf": [{"required": ["a"]}, {"type": "object"}]}, "boolean") == ALL
    assert kind_of({"not": {"type": "string"}}, "string") == NONE
    assert kind_of({"if": {"type": "string"}, "then": {"maxLength": 3}}, "null") == ALL
    assert kind_of({"if": {"type": "string"}, "then": {"maxLength": 3}}, "string") is None
    assert kind_of(_ref("common"), "array") == NONE


_ENVIRONMENTS: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-04/schema#",
    "definitions": {
        # no 'type': the branches are apart on objects only (by the constant of 'kind')
        "config": {"required": ["name", "kind"], "properties": {"name": {"type": "string", "minLength": 1}},
                   "oneOf": [{"$ref": "#/definitions/docker"}, {"$ref": "#/definitions/ssh"},
                             {"$ref": "#/definitions/local"}]},
        "docker": {"properties": {"kind": {"enum": ["docker"]}, "image": {"type": "string"},
                                  "file": {"type": "string"}},
                   "oneOf": [{"required": ["image"]}, {"required": ["file"]}]},
        "ssh": {"required": ["uri"], "properties": {"kind": {"enum": ["ssh"]}, "uri": {"type": "string"}}},
        "local": {"properties": {"kind": {"enum": ["local"]}}},
    },
    "type": "array",
    "items": {"$ref": "#/definitions/config"},
}

_PICKY: dict[str, Any] = {
    # strings: both branches admit every one (none is valid); null and arrays: the first
    # alone; objects: apart by 'kind'
    "oneOf": [{"required": ["kind"], "properties": {"kind": {"const": "x"}}},
              {"type": ["object", "string"], "required": ["kind"], "properties": {"kind": {"const": "y"}}}],
}


@pytest.mark.parametrize("schema", [_ENVIRONMENTS, _PICKY], ids=["environments", "kinds"])
def test_oneof_apart_on_objects_gets_the_validators_verdict(schema: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from maskc.compiler.frontends.json_schema import combinators

    def no_automata(*_: Any, **__: Any) -> Any:
        raise AssertionError("the automaton construction of oneOf ran")

    monkeypatch.setattr(combinators.CombinatorsMixin, "over_approx", no_automata)
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema)
    fields = {"name": "n", "kind": "docker", "image": "i", "file": "f", "uri": "u", "z": 1}
    values: list[Any] = [None, True, "s", 1, 1.5, [], [1]]
    for n in range(len(fields) + 1):
        for keys in itertools.combinations(fields, n):
            obj = {k: fields[k] for k in keys}
            values += [obj, {**obj, "kind": "ssh"}, {**obj, "kind": "local"}, {**obj, "kind": "x"},
                       {**obj, "kind": "y"}]
    seen = set()
    for v in values:
        value = [v] if schema is _ENVIRONMENTS else v
        ok = validator.is_valid(value)
        assert accepts(schema, serialize(value, schema).decode()) == ok, value
        seen.add(ok)
    assert seen == {True, False}


# -- oneOf in generation semantics ------------------------------------------------------------

def _no_general_oneof(monkeypatch: pytest.MonkeyPatch) -> None:
    from maskc.compiler.frontends.json_schema import combinators

    def no_automata(*_: Any, **__: Any) -> Any:
        raise AssertionError("the automaton construction of oneOf ran")

    monkeypatch.setattr(combinators.CombinatorsMixin, "over_approx", no_automata)


def _objects(fields: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: fields[k] for k in keys} for n in range(len(fields) + 1) for keys in itertools.combinations(fields, n)]


def test_generation_oneof_drops_a_branch_another_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    # 'file' is oneOf [A, common] with A inside common: no instance of A meets exactly one,
    # and common's generation language (objects of its declared keys) meets A nowhere
    _no_general_oneof(monkeypatch)
    validator = jsonschema.Draft4Validator(_FILES)
    accepted = 0
    for obj in _objects({"name": "n", "kind": "dir", "user": "u", "size": 3, "files": 2}):
        value = [obj]
        if accepts(_FILES, serialize(value, _FILES).decode(), "generation"):
            assert validator.is_valid(value), value  # sound
            accepted += 1
    assert accepts(_FILES, '[{"name":"n","kind":"dir"}]', "generation")
    assert not accepts(_FILES, '[{"name":"n","kind":"dir","user":"u","size":3}]', "generation")  # meets A and common
    assert accepted == 1


_CLOSED = {"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                     {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}]}
_UNTYPED = {"oneOf": [{"properties": {"a": {"type": "string"}}, "required": ["a"]}, {"type": "string"}]}


def test_generation_oneof_apart_by_declared_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    # {a, b} meets both branches, but neither branch's generation language writes it
    _no_general_oneof(monkeypatch)
    validator = jsonschema.Draft202012Validator(_CLOSED)
    for obj in _objects({"a": 1, "b": 2, "c": 3}):
        got = accepts(_CLOSED, serialize(obj, _CLOSED).decode(), "generation")
        assert not got or validator.is_valid(obj), obj
        assert got == (obj in ({"a": 1}, {"b": 2})), obj


def test_generation_oneof_untyped_branch_keeps_its_non_objects() -> None:
    # a string meets both branches (the first constrains objects only): its generation
    # language is objects alone, but the second branch's strings are still invalid
    validator = jsonschema.Draft202012Validator(_UNTYPED)
    for text, value in (('"x"', "x"), ('{"a":"x"}', {"a": "x"}), ('{"a":1}', {"a": 1})):
        assert not accepts(_UNTYPED, text, "generation") or validator.is_valid(value), text
    assert not accepts(_UNTYPED, '"x"', "generation")
    assert accepts(_UNTYPED, '{"a":"x"}', "generation")


def test_generation_object_without_properties_stays_open() -> None:
    # without 'properties' a generation object admits any key: {a, z} meets both branches
    schema = {"type": "object", "oneOf": [{"type": "object", "required": ["a"]},
                                          {"type": "object", "required": ["z"]}]}
    assert accepts(schema, '{"a":1}', "generation")
    assert not accepts(schema, '{"a":1,"z":1}', "generation")
    assert not accepts(schema, '{"z":1,"a":1}', "generation")


def test_generation_oneof_infers_objects_only_from_what_every_alternative_holds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The environments: a branch with a oneOf of its own writes objects only (its object
    # keywords merge into each alternative), so the branches are apart by 'kind'
    from maskc.compiler.frontends.json_schema import combinators

    calls: list[str] = []
    over = combinators.CombinatorsMixin.over_approx

    def counted(self: Any, schema: Any, pointer: str, depth: int) -> Any:
        calls.append(pointer)
        return over(self, schema, pointer, depth)

    monkeypatch.setattr(combinators.CombinatorsMixin, "over_approx", counted)
    validator = jsonschema.Draft4Validator(_ENVIRONMENTS)
    accepted = 0
    for obj in _objects({"name": "n", "kind": "docker", "image": "i", "file": "f", "uri": "u"}):
        for value in ([obj], [{**obj, "kind": "ssh"}], [{**obj, "kind": "local"}]):
            if accepts(_ENVIRONMENTS, serialize(value, _ENVIRONMENTS).decode(), "generation"):
                assert validator.is_valid(value), value
                accepted += 1
    assert accepted and not [p for p in calls if p.startswith("/definitions/config/oneOf")]
    # an alternative with no object keyword ({}) writes any value: a string meets both
    # branches here, and is not written
    schema = {"oneOf": [{"anyOf": [{"properties": {"a": {}}, "required": ["a"]}, {}]}, {"type": "string"}]}
    assert not accepts(schema, '"s"', "generation")
    assert accepts(schema, '{"a":1}', "generation") == jsonschema.Draft202012Validator(schema).is_valid({"a": 1})


# -- oneOf in generation semantics: branches cut apart by keywords -----------------------------

_PACKAGES: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-04/schema#",
    "definitions": {
        "base": {"properties": {"name": {"type": "string"}, "type": {"type": "string"},
                                "version": {"type": "string"}}, "additionalProperties": True},
        # a package has exactly one of source and dist; a metapackage is typed so
        "package": {"allOf": [{"$ref": "#/definitions/base"},
                              {"properties": {"dist": {"type": "object"}, "source": {"type": "object"}}},
                              {"oneOf": [{"required": ["name", "version", "source"]},
                                         {"required": ["name", "version", "dist"]}]}]},
        "meta": {"allOf": [{"$ref": "#/definitions/base"},
                           {"properties": {"type": {"type": "string", "enum": ["metapackage"]}},
                            "required": ["name", "version", "type"]}]},
    },
    "type": "object",
    "oneOf": [{"$ref": "#/definitions/package"}, {"$ref": "#/definitions/meta"}],
}


def test_generation_oneof_cuts_open_branches_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    # Both branches admit any key: a metapackage with a source meets both. The package
    # takes a type other than "metapackage" (or none), the metapackage neither source nor
    # dist (one of which every package requires): each writes objects of its own alone.
    _no_general_oneof(monkeypatch)
    validator = jsonschema.Draft4Validator(_PACKAGES)
    seen = {True: 0, False: 0}
    for obj in _objects({"name": "n", "version": "1", "source": {}, "dist": {}, "extra": 1}):
        for typed in ({}, {"type": "metapackage"}, {"type": "library"}):
            value = {**obj, **typed}
            got = accepts(_PACKAGES, serialize(value, _PACKAGES).decode(), "generation")
            assert not got or validator.is_valid(value), value  # sound
            seen[got] += 1
    for value in ({"name": "n", "version": "1", "source": {}}, {"name": "n", "type": "library", "version": "1", "dist": {}},
                  {"name": "n", "type": "metapackage", "version": "1"}):
        assert accepts(_PACKAGES, serialize(value, _PACKAGES).decode(), "generation"), value
    # a metapackage with a source is a package too
    assert validator.is_valid({"name": "n", "type": "metapackage", "version": "1", "extra": 1})
    assert not validator.is_valid({"name": "n", "type": "metapackage", "version": "1", "source": {}})
    assert seen[True] and seen[False]


@pytest.mark.parametrize("schema, expected", [
    ({"required": ["a", "b"]}, [{"a", "b"}]),
    ({"oneOf": [{"required": ["a"]}, {"required": ["b"]}], "required": ["c"]}, [{"a", "c"}, {"b", "c"}]),
    ({"allOf": [{"anyOf": [{"required": ["a"]}, {"required": ["b"]}]}, {"anyOf": [{"required": ["c"]}, {}]}]},
     [{"a", "c"}, {"a"}, {"b", "c"}, {"b"}]),
    ({"anyOf": [{"required": ["a"]}, False]}, [{"a"}]),  # false: no instance, no set
    (_ref("strict"), [{"name", "kind", "size"}]),
    ({"not": {"required": ["a"]}}, [set()]),  # not read: nothing known
])
def test_required_alternatives(schema: Any, expected: list[set[str]]) -> None:
    from maskc.compiler.frontends.json_schema.disjoint import required_alternatives

    assert required_alternatives(schema, "", _resolve, False) == [frozenset(x) for x in expected]


def test_required_alternatives_past_the_cap_keep_the_shared_keys() -> None:
    from maskc.compiler.frontends.json_schema.disjoint import required_alternatives

    many = {"allOf": [{"oneOf": [{"required": ["x", f"a{i}"]}, {"required": ["x", f"b{i}"]}]} for i in range(6)]}
    assert required_alternatives(many, "", _resolve, False) == [frozenset({"x"})]  # 64 sets past 32


def test_separator_never_forbids_a_key_every_alternative_of_the_branch_requires() -> None:
    # a branch that requires "a" through a union (not in its 'required'), against one that
    # requires "a": forbidding "a" would empty the branch, so no cut is offered
    from maskc.compiler.frontends.json_schema.combinators import _separator
    from maskc.compiler.frontends.json_schema.disjoint import Facts

    mine, other = Facts(), Facts(required={"a"})
    assert _separator(mine, other, [frozenset({"a"}), frozenset({"a", "b"})], [frozenset({"a"})]) is None
    assert _separator(mine, other, [frozenset({"b"})], [frozenset({"a"})]) == {"a": False}
    # a required key with string constants: the values, not the key, are cut
    other = Facts(required={"kind"}, scalars={"kind": frozenset({("string", "x")})})
    assert _separator(mine, other, [frozenset()], [frozenset({"kind"})]) == {"kind": {"not": {"enum": ["x"]}}}


# A discriminator one level down, in an optional member: "init" is "upstart" in one branch and
# anything else in the other, and without "attrs" an item with "legacy" meets both branches.
_SERVICES: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-04/schema#",
    "type": "object",
    "required": ["items"],
    "oneOf": [
        {"properties": {"attrs": {"type": "object", "required": ["init"],
                                  "properties": {"init": {"type": "string", "not": {"enum": ["upstart"]}}}},
                        "items": {"type": "array", "items": {"type": "object", "required": ["name"],
                                                             "properties": {"name": {"type": "string"}}}}}},
        {"properties": {"attrs": {"type": "object", "required": ["init"], "properties": {"init": {"enum": ["upstart"]}}},
                        "items": {"type": "array", "items": {"type": "object", "required": ["name", "legacy"],
                                                             "properties": {"name": {"type": "string"},
                                                                            "legacy": {"type": "boolean"}}}}}},
    ],
}


def test_generation_oneof_cuts_branches_apart_by_a_nested_discriminator(monkeypatch: pytest.MonkeyPatch) -> None:
    # No top-level key tells the branches apart (both declare the same optional keys), but
    # the values of "attrs" do: each branch writes objects with "attrs" present, whose "init"
    # the other branch's "attrs" does not admit.
    _no_general_oneof(monkeypatch)
    validator = jsonschema.Draft4Validator(_SERVICES)
    seen = {True: 0, False: 0}
    for attrs in ({}, {"attrs": {"init": "upstart"}}, {"attrs": {"init": "systemd"}}, {"attrs": {}}):
        for item in ({"name": "a"}, {"name": "a", "legacy": True}):
            value = {**attrs, "items": [item]}
            got = accepts(_SERVICES, serialize(value, _SERVICES).decode(), "generation")
            assert not got or validator.is_valid(value), value  # sound
            seen[got] += 1
    # each branch still writes its own objects
    assert accepts(_SERVICES, '{"attrs":{"init":"systemd"},"items":[{"name":"a"}]}', "generation")
    assert accepts(_SERVICES, '{"attrs":{"init":"upstart"},"items":[{"name":"a","legacy":true}]}', "generation")
    # without "attrs", an item with "legacy" meets both branches: not written
    assert not validator.is_valid({"items": [{"name": "a", "legacy": True}]})
    assert not accepts(_SERVICES, '{"items":[{"name":"a","legacy":true}]}', "generation")
    assert seen[True] == 2 and seen[False] == 6


def test_declared_properties_read_through_references_and_allof() -> None:
    from maskc.compiler.frontends.json_schema.disjoint import declared_properties

    schema = {"allOf": [{"properties": {"a": {"type": "string"}}}, _ref("strict")], "properties": {"a/b": True}}
    got = declared_properties(schema, "", _resolve, False)
    assert got["a"] == [({"type": "string"}, "/allOf/0/properties/a")]
    assert got["a/b"] == [(True, "/properties/a~1b")]
    assert set(got) >= {"a", "a/b", "name", "kind", "size"}
    # draft 4 to 7: the siblings of $ref are ignored, so they declare nothing
    assert "x" not in declared_properties({**_ref("strict"), "properties": {"x": {}}}, "", _resolve, True)


# Branches that differ only by an optional "protocol" (both extend one base through allOf):
# an object without it meets every branch, one with it meets the branch of its constant.
_METERS: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "definitions": {"meter": {"type": "object", "required": ["enabled"],
                              "properties": {"enabled": {"type": "boolean"}, "port": {"type": "integer"}}},
                    "kind": {"enum": ["file"]}},
    "oneOf": [
        {"allOf": [{"$ref": "#/definitions/meter"}, {"properties": {"protocol": {"enum": ["s0"]}}}]},
        {"allOf": [{"$ref": "#/definitions/meter"}, {"properties": {"protocol": {"enum": ["d0", "sml"]}}}]},
        {"allOf": [{"$ref": "#/definitions/meter"}, {"properties": {"protocol": {"$ref": "#/definitions/kind"}}}]},
        {"allOf": [{"$ref": "#/definitions/meter"}, {"properties": {"protocol": {"const": 7}}}]},
    ],
}


def test_generation_oneof_requires_a_key_both_branches_confine_to_other_constants(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # No branch requires "protocol", but each confines it to its own constants (one of them
    # through a reference, one a number): each branch writes its objects with "protocol".
    _no_general_oneof(monkeypatch)
    validator = jsonschema.Draft7Validator(_METERS)
    written = []
    for protocol in ({}, {"protocol": "s0"}, {"protocol": "sml"}, {"protocol": "file"}, {"protocol": "x"},
                     {"protocol": 7}, {"protocol": 7.0}, {"protocol": 8}):
        for rest in ({"enabled": True}, {"enabled": False, "port": 1}, {"port": 1}):
            value = {**rest, **protocol}
            got = accepts(_METERS, serialize(value, _METERS).decode(), "generation")
            assert not got or validator.is_valid(value), value  # sound
            if got:
                written.append(value)
    assert len(written) == 10 and all(v["protocol"] in ("s0", "sml", "file", 7) and "enabled" in v for v in written)
    # without "protocol", an object meets all three branches: not valid, never written
    assert not validator.is_valid({"enabled": True})


# A privilege: a name, or an object closed to one name (the empty object meets every object branch).
_PRIVILEGE: dict[str, Any] = {
    "oneOf": [
        {"type": "string", "enum": ["all", "insert"]},
        {"type": "object", "additionalProperties": False,
         "properties": {"all": {"type": "object", "properties": {"grantable": {"type": "boolean"}}}}},
        {"type": "object", "additionalProperties": False, "properties": {"insert": {"type": "boolean"}}},
    ],
}


def test_generation_oneof_requires_a_key_the_other_branches_forbid(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each object branch writes its objects with its one key, which the other's closed
    # objects forbid; the string branch meets no object branch and is kept whole.
    _no_general_oneof(monkeypatch)
    validator = jsonschema.Draft202012Validator(_PRIVILEGE)
    written = []
    for value in ("all", "insert", "x", {}, {"all": {}}, {"all": {"grantable": True}}, {"insert": False},
                  {"insert": {}}, {"all": {}, "insert": True}):
        got = accepts(_PRIVILEGE, serialize(value, _PRIVILEGE).decode(), "generation")
        assert not got or validator.is_valid(value), value  # sound
        if got:
            written.append(value)
    assert written == ["all", "insert", {"all": {}}, {"all": {"grantable": True}}, {"insert": False}]
    assert not validator.is_valid({})  # in both object branches: never written
