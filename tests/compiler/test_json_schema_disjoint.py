"""oneOf branches proven disjoint from their keywords (discriminated unions), checked
against jsonschema: a proof is never wrong, and recursive discriminated unions compile."""

from __future__ import annotations

import itertools
import json
from typing import Any

import jsonschema
import pytest

from maskc.compiler.errors import SchemaError, UnsupportedKeyword
from maskc.compiler.frontends.json_schema.disjoint import disjoint, facts_of
from tests.helpers import assert_language

VALUES: list[Any] = [
    None, True, 0, 1, 1.0, 2.5, "", "a", "reference", "section", [], [1], {},
    {"type": "reference"}, {"type": "section"}, {"type": "reference", "referent": {}},
    {"type": "section", "version": "1"}, {"type": "x", "version": "1", "referent": 1},
    {"version": "1"}, {"referent": {}, "_id": "a"}, {"type": 1, "referent": {}},
    {"version": 3}, {"version": 1}, {"version": 1.0}, {"version": True}, {"version": None}, {"version": 1.5},
]

BRANCHES: list[Any] = [
    {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": ["object", "null"]},
    {"type": "object", "required": ["type", "referent"], "additionalProperties": False,
     "properties": {"type": {"enum": ["reference"]}, "referent": {}, "_id": {}}},
    {"type": "object", "required": ["type", "version"], "properties": {"type": {"type": "string"}}},
    {"type": "object", "required": ["type"], "properties": {"type": {"const": "section"}}},
    {"required": ["type"], "properties": {"type": {"const": "reference"}}},  # not object-only
    {"allOf": [{"type": "object"}, {"required": ["version"]}]},
    {"type": "object", "additionalProperties": False, "patternProperties": {"^v": {}}, "properties": {"type": {}}},
    {"enum": ["a", 1]}, {"const": {"type": "reference"}}, False, True, {},
    {"required": ["type"], "properties": {"type": {"const": "section"}}},  # not object-only either
    # values a property never takes, by a not of string constants
    {"type": "object", "properties": {"type": {"not": {"enum": ["section", 1]}}}},
    {"type": "object", "properties": {"type": {"not": {"enum": ["section"], "type": "string"}}}},  # not read
    {"type": "object", "properties": {"type": {"not": {"const": "reference"}}}},
    {"type": "object", "properties": {"type": {"type": "string", "not": {"const": 1}}}},  # excludes no string
    # constants of other scalar kinds: numbers by value, true is not 1
    {"type": "object", "required": ["version"], "properties": {"version": {"enum": [3]}}},
    {"type": "object", "required": ["version"], "properties": {"version": {"const": 1.0}}},
    {"type": "object", "required": ["version"], "properties": {"version": {"enum": [1, True, 1.5]}}},
    {"type": "object", "required": ["version"], "properties": {"version": {"enum": [None, "1", [1]]}}},  # not read
    {"type": "object", "required": ["version"], "properties": {"version": {"enum": [None, "1", 1.5]}}},
    # constants of a property one side does not require (they apply where it is present), and
    # constants a merged allOf leaves under a property
    {"type": "object", "properties": {"type": {"enum": ["section", "x"]}}},
    {"type": "object", "required": ["type"], "properties": {"type": {"allOf": [{"enum": ["reference", "section"]},
                                                                                {"$comment": "c", "const": "section"}]}}},
    {"properties": {"type": {"enum": ["reference"]}}},  # an if of a discriminated conditional
]


def _resolve(ref: Any, pointer: str) -> tuple[Any, str]:
    raise SchemaError(f"no references here: {ref}")


@pytest.mark.parametrize("a, b", list(itertools.combinations(range(len(BRANCHES)), 2)))
def test_a_disjointness_proof_is_never_wrong(a: int, b: int) -> None:
    x, y = BRANCHES[a], BRANCHES[b]
    if not disjoint(facts_of(x, "", _resolve, False), facts_of(y, "", _resolve, False)):
        return
    vx, vy = jsonschema.Draft202012Validator(x), jsonschema.Draft202012Validator(y)
    both = [v for v in VALUES if vx.is_valid(v) and vy.is_valid(v)]
    assert not both, (json.dumps(x), json.dumps(y), both)


def test_the_discriminators_are_recognized() -> None:
    f = [facts_of(b, "", _resolve, False) for b in BRANCHES]
    assert disjoint(f[0], f[1]) and disjoint(f[1], f[3])  # type sets
    assert not disjoint(f[1], f[2])  # an integer is a number
    assert disjoint(f[4], f[5])  # "version" required by one, forbidden by the other
    assert disjoint(f[4], f[6])  # required "type" with different string constants
    assert disjoint(f[6], f[7])  # one branch is object-only: the constants decide
    assert not disjoint(f[7], f[15])  # neither is: a string satisfies both
    assert not disjoint(f[5], f[6])  # {"type": "section", "version": "1"} is in both
    assert disjoint(f[4], f[8]) and not disjoint(f[5], f[8])  # allOf conjuncts count
    assert not disjoint(f[4], f[9])  # patternProperties may admit the key: no proof
    assert disjoint(f[12], f[0]) and not disjoint(f[13], f[0])  # false is empty, true is not
    # a required key's constants against the strings the other's value never is
    assert disjoint(f[6], f[16]) and disjoint(f[16], f[6]) and disjoint(f[4], f[18]) and disjoint(f[7], f[18])
    assert not disjoint(f[6], f[17])  # a not with other keywords may admit less: not read
    assert not disjoint(f[6], f[18]) and not disjoint(f[16], f[18])  # "section" meets 18; neither requires "type"
    assert not disjoint(f[6], f[19])
    assert disjoint(f[20], f[21]) and disjoint(f[20], f[22]) and not disjoint(f[21], f[22])  # 1.0 is 1
    assert not disjoint(f[20], f[23]) and disjoint(f[20], f[24]) and not disjoint(f[22], f[24])  # 1.5 in both
    assert not disjoint(f[5], f[20])  # "version" unconstrained in one
    # a key one side requires against the other's constants for it, required there or not
    assert disjoint(f[4], f[25]) and disjoint(f[25], f[4]) and disjoint(f[6], f[27]) and disjoint(f[26], f[27])
    assert not disjoint(f[6], f[25]) and not disjoint(f[26], f[25])  # "section" meets "section"
    assert not disjoint(f[25], f[27])  # neither requires "type": {} is in both
    assert disjoint(f[4], f[26])  # the conjuncts under the property meet in "section" alone


RECURSIVE = {
    "$defs": {
        "node": {"oneOf": [{"$ref": "#/$defs/content"}, {"$ref": "#/$defs/reference"}]},
        "content": {"type": "object", "required": ["type", "version"],
                    "properties": {"type": {"type": "string"}, "version": {"const": "1"},
                                   "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}},
        "reference": {"type": "object", "required": ["type", "referent"], "additionalProperties": False,
                      "properties": {"type": {"const": "reference"}, "referent": {"type": "string"}}},
    },
    "$ref": "#/$defs/node",
}


def test_a_recursive_discriminated_union_compiles_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    from maskc.compiler.frontends.json_schema.combinators import CombinatorsMixin

    def no_automaton_proof(*args: Any) -> None:
        raise AssertionError("the keywords prove these branches disjoint")

    monkeypatch.setattr(CombinatorsMixin, "over_approx", no_automaton_proof)
    accepted = ['{"type":"reference","referent":"x"}', '{"type":"a","version":"1"}',
                '{"type":"reference","version":"1","children":[{"type":"reference","referent":"y"}]}',
                '{"type":"a","version":"1","children":[{"type":"b","version":"1","children":[]}]}',
                '{"type":"reference","version":"1","referent":"x"}']  # content only (maskc's key order)
    rejected = ['{"type":"reference","referent":1}', '{"type":"a"}',
                '{"type":"a","version":"1","children":[{"type":"reference"}]}', '{"version":"1"}', '"a"']
    validator = jsonschema.Draft202012Validator(RECURSIVE)
    for text in accepted:
        assert validator.is_valid(json.loads(text)), text
    for text in rejected:
        assert not validator.is_valid(json.loads(text)), text
    assert_language(dict(RECURSIVE, title="not cached"), accepted, rejected)


def test_overlapping_recursive_branches_are_still_refused() -> None:
    from tests.helpers import byte_artifact

    schema = {"$defs": {"n": {"oneOf": [{"type": "object", "properties": {"c": {"$ref": "#/$defs/n"}}},
                                        {"type": "object", "required": ["c"]}]}}, "$ref": "#/$defs/n"}
    with pytest.raises(UnsupportedKeyword) as info:
        byte_artifact(schema)
    assert info.value.keyword == "oneOf"


_REF_DEFS: dict[str, Any] = {"s": {"type": "string"}, "kinds": {"enum": ["a", "b"]}, "not_a": {"not": {"const": "a"}}}


def _resolve_defs(ref: Any, _pointer: str) -> tuple[Any, str]:
    name = ref.removeprefix("#/$defs/")
    if name not in _REF_DEFS:
        raise SchemaError(f"no target {ref!r}")
    return _REF_DEFS[name], f"/$defs/{name}"


def _with_k(prop: Any, required: bool = True) -> dict[str, Any]:
    return {"type": "object", "properties": {"k": prop}, **({"required": ["k"]} if required else {})}


@pytest.mark.parametrize("overrides", [True, False], ids=["draft7", "draft2020"])
def test_a_property_reference_is_read_as_its_draft_reads_it(overrides: bool) -> None:
    branches = [
        _with_k({"$ref": "#/$defs/s", "enum": ["x"]}),  # draft 7 ignores the enum beside $ref
        _with_k({"const": "y"}), _with_k({"const": "a"}), _with_k({"$ref": "#/$defs/kinds"}),
        _with_k({"$ref": "#/$defs/not_a"}, required=False), _with_k({"$ref": "#/$defs/kinds", "const": "b"}),
    ]
    facts = [facts_of(b, "", _resolve_defs, overrides) for b in branches]
    validator = jsonschema.Draft7Validator if overrides else jsonschema.Draft202012Validator
    values = [{"k": v} for v in ("x", "y", "a", "b", 1)] + [{}]
    proven = set()
    for i, j in itertools.combinations(range(len(branches)), 2):
        if disjoint(facts[i], facts[j]):
            proven.add((i, j))
            vi, vj = (validator({"$defs": _REF_DEFS, **branches[n]}) for n in (i, j))
            assert not [v for v in values if vi.is_valid(v) and vj.is_valid(v)], (i, j)
    # {"k": "y"} meets 0 and 1 where the enum is ignored; apart where it applies
    assert ((0, 1) in proven) is not overrides
    assert {(1, 3), (2, 4), (1, 2)} <= proven and (2, 3) not in proven  # through the references
    assert ((2, 5) in proven) is not overrides  # "a": kinds alone in draft 7, kinds and "b" in 2020-12
