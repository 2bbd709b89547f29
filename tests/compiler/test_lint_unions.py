"""``ambiguous-union`` and ``unsatisfiable``: schemas that must fire, near-misses that must not,
and witnesses checked by the compiled matchers of both branches and by jsonschema."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

import maskc
from maskc.compiler.dfa import Dfa
from maskc.compiler.errors import StateLimitExceeded
from maskc.compiler.findings import Finding
from maskc.compiler.frontends.json_schema.base import ANNOTATIONS
from maskc.compiler.lint import LintContext, lint_schema
from maskc.compiler.lint import unions
from maskc.compiler.lint.languages import compile_subschema, shortest_common
from maskc.compiler.options import CompileOptions
from maskc.compiler.pipeline import grammar_dfa
from maskc.compiler.vocab import Vocabulary

PRINTABLE = [chr(c) for c in range(0x20, 0x7F)]
VOCAB = Vocabulary.from_tokens([*PRINTABLE, "<eos>"], eos="<eos>", name="printable")


def lint(schema: Any, rule: str) -> list[Finding]:
    found: list[Finding] = lint_schema(LintContext(schema), select=[rule])
    return found


def accepts(schema: Any, text: str) -> bool:
    """Whether maskc's matcher for ``schema`` accepts ``text`` char by char and can then stop."""
    art = maskc.compile_json_schema(schema, VOCAB)
    m = art.matcher()
    for ch in text:
        if not m.accept_token(PRINTABLE.index(ch)):
            return False
    return bool(m.can_terminate())


def branch_schema(root: dict[str, Any], kw: str, i: int) -> dict[str, Any]:
    """Branch ``i`` of the root's union as a schema of its own: merged with the root's other
    keywords, the root's definitions kept in reach."""
    defs: dict[str, Any] = {k: root[k] for k in ("$defs", "definitions") if k in root}
    base = {k: v for k, v in root.items() if k != kw and k not in ANNOTATIONS}
    branch = root[kw][i]
    own = {"allOf": [base, branch]} if base else branch
    return {**defs, "allOf": [own]} if defs else own


def check_witness(root: dict[str, Any], f: Finding) -> None:
    """The witness is accepted by both branches' matchers and valid against both branches."""
    assert f.witness is not None
    kw = f.data["keyword"]
    for bptr in f.data["branches"]:
        i = int(bptr.rsplit("/", 1)[1])
        sub = branch_schema(root, kw, i)
        assert accepts(sub, f.witness), (bptr, f.witness)
        jsonschema.validate(json.loads(f.witness), sub)


# -- ambiguous-union: must fire -----------------------------------------------------------

FIRES: list[tuple[dict[str, Any], str, str]] = [
    # (schema, severity, witness computed by hand: a shortest text both branches accept)
    ({"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 5}]}, "error", '""'),
    ({"anyOf": [{"type": "number"}, {"type": "integer"}]}, "warning", "0"),
    ({"anyOf": [{"type": "string", "pattern": "^ab"}, {"type": "string", "pattern": "c$"}]}, "warning", '"abc"'),
    ({"oneOf": [{"enum": ["red", "green"]}, {"enum": ["green", "blue"]}]}, "error", '"green"'),
    # $ref into $defs: both objects admit the empty object
    ({"$defs": {"a": {"type": "object", "properties": {"x": {"type": "integer"}}},
                "b": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "string"}}}},
      "oneOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}]}, "error", "{}"),
    # a branch means its parent's keywords too: "kind" is required by the parent
    ({"type": "object", "properties": {"kind": {"type": "string"}, "n": {"type": "integer"}}, "required": ["kind"],
      "oneOf": [{"properties": {"kind": {"const": "a"}}}, {"properties": {"n": {"minimum": 0}}}]},
     "error", '{"kind":"a"}'),
]


@pytest.mark.parametrize("schema,severity,witness", FIRES)
def test_ambiguous_union_fires_with_a_witness_both_branches_accept(
        schema: dict[str, Any], severity: str, witness: str) -> None:
    found = lint(schema, "ambiguous-union")
    kw = "oneOf" if "oneOf" in schema else "anyOf"
    assert len(found) == 1
    f = found[0]
    assert (f.pointer, f.severity, f.witness) == (f"/{kw}", severity, witness)
    assert f.data["branches"] == [f"/{kw}/0", f"/{kw}/1"]
    assert f.data["approximation"] == "exact"
    check_witness(schema, f)


def test_recursive_branches_get_a_real_witness_from_an_unrolling() -> None:
    schema = {
        "$defs": {"t": {"type": "object", "properties": {
            "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/t"}}}}},
        "anyOf": [{"$ref": "#/$defs/t"}, {"type": "object", "properties": {"v": {"type": "number"}}}],
    }
    [f] = lint(schema, "ambiguous-union")
    assert (f.pointer, f.severity, f.witness, f.data["approximation"]) == ("/anyOf", "warning", "{}", "under")
    check_witness(schema, f)


def test_nested_union_pointer_and_cap_on_pairs() -> None:
    # five branches that all admit "" : 10 overlapping pairs, 3 reported, then one "7 more"
    schema = {"type": "object", "properties": {"s": {"anyOf": [{"type": "string", "maxLength": n} for n in range(1, 6)]}}}
    found = lint(schema, "ambiguous-union")
    assert [f.pointer for f in found] == ["/properties/s/anyOf"] * 4
    assert [f.data.get("branches") for f in found[:3]] == [
        ["/properties/s/anyOf/0", "/properties/s/anyOf/1"],
        ["/properties/s/anyOf/0", "/properties/s/anyOf/2"],
        ["/properties/s/anyOf/0", "/properties/s/anyOf/3"],
    ]
    assert found[3].message.startswith("7 more pairs") and len(found[3].data["pairs"]) == 7


def test_unenforced_keyword_lowers_the_severity_and_says_so() -> None:
    # steps whose divisibility automata pass the state cap: refused, so lint reads them leniently
    schema = {"oneOf": [{"type": "integer", "multipleOf": 0.123456789},
                        {"type": "integer", "multipleOf": 0.987654321}]}
    [f] = lint(schema, "ambiguous-union")
    assert (f.severity, f.witness) == ("warning", "0")
    assert "does not enforce multipleOf" in f.message
    assert [e["pointer"] for e in f.data["not_enforced"]] == ["/oneOf/0/multipleOf", "/oneOf/1/multipleOf"]


def test_an_annotation_does_not_lower_the_severity() -> None:
    # an unknown or annotation-only format constrains nothing in JSON Schema either: "" is
    # accepted by both branches, so the oneOf is a real error
    for fmt in ("password", "phone"):
        schema = {"oneOf": [{"type": "string", "format": fmt}, {"type": "string", "maxLength": 3}]}
        [f] = lint(schema, "ambiguous-union")
        assert (f.severity, f.witness) == ("error", '""')
        assert "does not enforce" not in f.message and "not_enforced" not in f.data
        assert "never generates it" in f.message
        check_witness(schema, f)


def test_an_annotation_does_not_hide_an_empty_union() -> None:
    schema = {"type": "string", "format": "password", "oneOf": [{"const": "a"}, {"enum": ["a"]}]}
    [f] = lint(schema, "unsatisfiable")
    assert f.pointer == "" and f.data["source"] == "automaton"


def test_enforced_multiple_of_makes_the_shared_value_an_error() -> None:
    schema = {"oneOf": [{"type": "integer", "multipleOf": 2}, {"type": "integer", "multipleOf": 3}]}
    [f] = lint(schema, "ambiguous-union")
    assert f.severity == "error" and int(f.witness) % 6 == 0


# -- ambiguous-union: near-misses ---------------------------------------------------------

QUIET: list[dict[str, Any]] = [
    {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    {"type": ["string", "number", "null"]},
    {"oneOf": [{"type": "string", "maxLength": 3}, {"type": "string", "minLength": 4}]},
    {"oneOf": [{"type": "object", "properties": {"k": {"const": "a"}}, "required": ["k"]},
               {"type": "object", "properties": {"k": {"const": "b"}}, "required": ["k"]}]},
    {"anyOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"}]},
    # recursive branch: disjoint from above (references widened to any bytes), no info either
    {"$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
     "oneOf": [{"$ref": "#/$defs/t"}, {"type": "string"}]},
    {"anyOf": [{"type": "string"}]},
]


@pytest.mark.parametrize("schema", QUIET)
def test_ambiguous_union_near_misses(schema: dict[str, Any]) -> None:
    assert lint(schema, "ambiguous-union") == []


def test_a_limit_is_never_read_as_disjoint(monkeypatch: pytest.MonkeyPatch) -> None:
    def give_up(a: Dfa, b: Dfa, **kw: Any) -> bytes | None:
        raise StateLimitExceeded("product states", limit=1)

    monkeypatch.setattr(unions, "shortest_common", give_up)
    [f] = lint({"anyOf": [{"type": "string"}, {"type": "integer"}]}, "ambiguous-union")
    assert (f.severity, f.pointer, f.data["pairs"]) == ("info", "/anyOf", [["/anyOf/0", "/anyOf/1"]])


def test_shortest_common_on_dfas() -> None:
    opts = CompileOptions(lenient=True)

    def dfa(schema: Any) -> Dfa:
        return grammar_dfa(compile_subschema(schema, "", opts).grammar.body, opts)

    digits = dfa({"type": "string", "pattern": "^[0-9]{3}$"})
    assert shortest_common(digits, dfa({"type": "string", "pattern": "7"})) == b'"007"'
    assert shortest_common(digits, dfa({"type": "string", "maxLength": 2})) is None
    assert shortest_common(dfa({"type": "boolean"}), dfa({"const": False})) == b"false"


# -- unsatisfiable: must fire -------------------------------------------------------------

DIRECT: list[tuple[dict[str, Any], list[str]]] = [
    ({"type": "string", "minLength": 5, "maxLength": 2}, ["minLength", "maxLength"]),
    ({"minLength": 5, "maxLength": 2}, ["minLength", "maxLength"]),  # maskc reads it as a string
    ({"type": "number", "minimum": 3, "maximum": 1}, ["minimum", "maximum"]),
    ({"type": "number", "exclusiveMinimum": 1, "maximum": 1}, ["exclusiveMinimum", "maximum"]),
    ({"type": "number", "minimum": 1, "maximum": 1, "exclusiveMaximum": True}, ["minimum", "maximum"]),  # draft 4
    ({"type": "integer", "minimum": 1.2, "maximum": 1.8}, ["minimum", "maximum"]),
    ({"type": "array", "minItems": 3, "maxItems": 2}, ["minItems", "maxItems"]),
    ({"type": "object", "minProperties": 2, "maxProperties": 1}, ["minProperties", "maxProperties"]),
    ({"type": "object", "required": ["a", "b"], "maxProperties": 1}, ["required", "maxProperties"]),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"], "additionalProperties": False},
     ["required", "additionalProperties"]),
    ({"type": "object", "properties": {"a": False}, "required": ["a"]}, ["required", "properties"]),
    ({"type": "string", "enum": [1, 2]}, ["enum", "type"]),
    ({"type": "integer", "const": "7"}, ["const", "type"]),
    ({"enum": [1, 2], "const": 3}, ["const", "enum"]),
    # maskc generates no undeclared property unless additionalProperties allows one
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}, ["required", "properties"]),
    # contains counts no array meets
    ({"type": "array", "contains": {"type": "integer"}, "minContains": 3, "maxContains": 2},
     ["contains", "minContains", "maxContains"]),
    ({"type": "array", "contains": {"type": "integer"}, "maxContains": 0}, ["contains", "maxContains"]),
    ({"type": "array", "contains": {"type": "integer"}, "maxItems": 0}, ["contains", "maxItems"]),
    ({"type": "array", "contains": {"type": "integer"}, "minContains": 3, "maxItems": 2},
     ["contains", "minContains", "maxItems"]),
    ({"type": "array", "contains": False}, ["contains"]),
    # a not that the node itself implies
    ({"type": "string", "not": {"type": "string"}}, ["not", "type"]),
    ({"type": "string", "maxLength": 3, "not": {"type": "string"}}, ["not", "type"]),
    ({"enum": ["a", "b"], "not": {"enum": ["a", "b"], "description": "an annotation is no constraint"}},
     ["not", "enum"]),
    ({"type": "integer", "not": {}}, ["not"]),
]


@pytest.mark.parametrize("schema,keywords", DIRECT)
def test_unsatisfiable_contradictions(schema: dict[str, Any], keywords: list[str]) -> None:
    [f] = lint(schema, "unsatisfiable")
    assert (f.pointer, f.severity, f.data["source"], f.data["keywords"]) == ("", "error", "keywords", keywords)


# Instances that JSON Schema would accept if the contradiction were not one: each is rejected.
PROBES: list[Any] = [[], [1], [1, 2], [1, 2, 3], ["a"], "", "a", "abcd", 0, 1, None, {}, True]


@pytest.mark.parametrize("schema,keywords", [row for row in DIRECT if row[1][0] in ("contains", "not")])
def test_new_contradictions_are_confirmed_by_a_validator(schema: dict[str, Any], keywords: list[str]) -> None:
    assert not any(jsonschema.Draft202012Validator(schema).is_valid(v) for v in PROBES)


def test_contradictions_in_exact_semantics_are_json_schemas_only() -> None:
    exact = CompileOptions(semantics="exact")
    # an undeclared required key is a JSON Schema instance's right
    undeclared = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}
    assert lint(undeclared, "unsatisfiable") != []
    assert lint_schema(LintContext(undeclared, options=exact), select=["unsatisfiable"]) == []
    # no types inferred: the crossed string bounds leave every other type
    untyped = {"minLength": 5, "maxLength": 2}
    found = lint_schema(LintContext(untyped, options=exact), select=["unsatisfiable"])
    assert all(f.data.get("source") != "keywords" for f in found)
    # JSON Schema's own contradictions stay
    typed = {"type": "array", "contains": {"type": "integer"}, "maxItems": 0}
    [f] = lint_schema(LintContext(typed, options=exact), select=["unsatisfiable"])
    assert f.data["semantics"] == "json-schema" and f.message.startswith("no value satisfies this schema")


def test_unsatisfiable_points_at_the_innermost_culprit() -> None:
    inner = {"type": "string", "pattern": "^[a-z]+$", "maxLength": 0}  # empty only on the automaton
    schema = {"type": "object", "required": ["a"], "properties": {
        "a": {"type": "object", "required": ["b"], "properties": {"b": inner}}}}
    [f] = lint(schema, "unsatisfiable")
    assert (f.pointer, f.data["source"]) == ("/properties/a/properties/b", "automaton")
    with pytest.raises(maskc.EmptyLanguage):
        maskc.compile_json_schema(inner, VOCAB)


def test_unsatisfiable_definition_reached_by_ref() -> None:
    schema = {"$defs": {"code": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 0}},
              "type": "object", "properties": {"x": {"$ref": "#/$defs/code"}}, "required": ["x"]}
    assert [f.pointer for f in lint(schema, "unsatisfiable")] == ["/$defs/code"]


def test_unsatisfiable_branch_in_the_context_of_its_parent() -> None:
    # the parent forbids every property, so the branch that requires one is dead
    schema = {"type": "object", "additionalProperties": False,
              "anyOf": [{"required": ["a"]}, {"type": "object"}]}
    [f] = lint(schema, "unsatisfiable")
    assert (f.pointer, f.data["in_context"]) == ("/anyOf/0", True)
    assert "parent's keywords" in f.message


# -- unsatisfiable: near-misses -----------------------------------------------------------

SATISFIABLE: list[dict[str, Any]] = [
    {"type": "string", "minLength": 2, "maxLength": 2},
    {"type": "number", "minimum": 1, "maximum": 1},
    {"type": "number", "minimum": 1.2, "maximum": 1.8},
    {"type": ["string", "null"], "minLength": 5, "maxLength": 2, "enum": [None]},
    {"type": "integer", "exclusiveMinimum": 1, "maximum": 2},
    {"type": "object", "patternProperties": {"^b": {"type": "string"}}, "required": ["b"],
     "additionalProperties": False},
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"],
     "additionalProperties": {"type": "string"}},
    {"type": "string", "enum": [1, "a"]},
    {"type": "object", "properties": {"a": False}},  # false on purpose: a may not appear
    {"anyOf": [False, {"type": "string"}]},
    # lenient mode drops multipleOf; reading oneOf exactly would then wrongly empty the union
    {"oneOf": [{"type": "integer", "multipleOf": 2}, {"type": "integer", "multipleOf": 3}]},
    # a branch's required name is declared by the parent, where the compiler merges them
    {"type": "object", "properties": {"url": {"type": "string"}, "c": {"enum": ["x", "y"]}},
     "oneOf": [{"properties": {"c": {"const": "x"}}, "required": ["url"]},
               {"properties": {"c": {"const": "y"}}, "required": ["url"]}]},
    {"$defs": {"base": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["url"]}},
     "type": "object", "properties": {"url": {"type": "string"}}, "allOf": [{"$ref": "#/$defs/base"}]},
    # contains counts that some array meets
    {"type": "array", "contains": {"type": "integer"}, "minContains": 0, "maxItems": 0},
    {"type": "array", "contains": {"type": "integer"}, "minContains": 2, "maxContains": 2, "maxItems": 2},
    {"type": "array", "contains": False, "minContains": 0},
    {"type": "array", "minContains": 2, "maxItems": 0},  # minContains without contains: no constraint
    {"type": ["array", "string"], "contains": {"type": "integer"}, "maxItems": 0},  # strings remain
    # a not stricter than its node, or whose keywords read differently beside other siblings
    {"type": "string", "not": {"type": "string", "maxLength": 3}},
    {"type": "object", "properties": {"a": {}}, "additionalProperties": False, "not": {"additionalProperties": False}},
    {"type": "array", "contains": {"type": "integer"}, "minContains": 0, "not": {"contains": {"type": "integer"}}},
    {"type": "string", "not": {"type": "integer"}},
]


@pytest.mark.parametrize("schema", SATISFIABLE)
def test_unsatisfiable_near_misses(schema: dict[str, Any]) -> None:
    assert lint(schema, "unsatisfiable") == []


def test_rules_are_registered_with_docs() -> None:
    ids = {r.id: r for r in unions.RULES}
    assert set(ids) == {"ambiguous-union", "unsatisfiable"}
    assert ids["unsatisfiable"].severity == "error" and ids["ambiguous-union"].fix


@pytest.mark.parametrize("schema", [
    {"anyOf": "not a list"},
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}, "anyOf": [{"type": "string"}, 3]},
    {"oneOf": [{"$ref": "https://example.com/remote.json"}, {"type": "string"}]},
    True,
])
def test_malformed_schemas_give_no_finding_and_no_crash(schema: Any) -> None:
    assert lint(schema, "ambiguous-union") == [] and lint(schema, "unsatisfiable") == []


def test_a_spent_budget_reports_what_was_not_analysed() -> None:
    # With no time left the automata rules say what they did not decide; they never read
    # "out of time" as "no overlap" and never run on past the budget.
    from maskc.compiler.lint import LintContext, lint_schema

    schema = {"type": "object", "required": ["a"],
              "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]}}}
    spent = lint_schema(LintContext(schema), budget_seconds=0.0, select=["ambiguous-union", "max-tokens-budget"])
    assert {(f.rule, f.severity) for f in spent} == {("ambiguous-union", "info"), ("max-tokens-budget", "info")}
    assert all(f.pointer == "" for f in spent)
    full = lint_schema(LintContext(schema), select=["ambiguous-union"])
    assert [(f.rule, f.pointer, f.witness) for f in full] == [("ambiguous-union", "/properties/a/anyOf", '""')]


@pytest.mark.parametrize(("schema", "lead"), [
    ({"type": "string", "minLength": 5, "maxLength": 2}, "no value satisfies this schema"),
    ({"type": "object", "properties": {"a": False}, "required": ["a"]}, "no value satisfies this schema"),
    # JSON Schema accepts a non-string here, and the undeclared key: maskc's language is empty
    ({"minLength": 5, "maxLength": 2}, "maskc can generate no value for this schema"),
    ({"type": "object", "properties": {"a": {}}, "required": ["b"]}, "maskc can generate no value for this schema"),
])
def test_unsatisfiable_says_whose_language_is_empty(schema: dict[str, Any], lead: str) -> None:
    from maskc.compiler.lint import LintContext, lint_schema

    found = lint_schema(LintContext(schema), select=["unsatisfiable"])
    assert len(found) == 1 and found[0].message.startswith(lead + ":")
