"""The termination and budget lint rules: unbounded-recursion, no-base-case, whitespace-runaway,
max-tokens-budget, unenforced-keyword, unknown-format.

Every rule has schemas that must fire it and near-misses that must not; budgets are checked
against numbers computed by hand, and against real maximal instances tokenized by a real
tokenizer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from maskc.compiler.dfa import Dfa
from maskc.compiler.findings import Finding, rule_info
from maskc.compiler.frontends.json_schema import schema_to_ir
from maskc.compiler.lint import LintContext, all_rules, lint_schema
from maskc.compiler.lint import termination
from maskc.compiler.lint.budget import compile_automaton, longest_output, token_path_bound
from maskc.compiler.lint.walk import resolve_local
from maskc.compiler.options import CompileOptions, Limits, parse_whitespace
from maskc.compiler.pipeline import grammar_dfa
from maskc.compiler.vocab import Vocabulary

SAMPLES = Path(__file__).resolve().parent.parent.parent / "sample_schemas"


def run(schema: Any, *, tokenizer: Vocabulary | None = None, **options: Any) -> list[Finding]:
    ws = options.pop("whitespace", "compact")
    opts = CompileOptions(parse_whitespace(ws), **options)
    return list(termination.check(LintContext(schema, options=opts, tokenizer=tokenizer)))


def of(findings: list[Finding], rule: str) -> list[Finding]:
    return [f for f in findings if f.rule == rule]


def budget(schema: Any, **kw: Any) -> Finding:
    got = of(run(schema, **kw), "max-tokens-budget")
    assert len(got) == 1, got
    return got[0]


# -- recursion --------------------------------------------------------------------------------

LINKED_REQUIRED = {"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}},
                                   "required": ["next"]}}, "$ref": "#/$defs/n"}
LINKED_OPTIONAL = {"$defs": {"n": {"type": "object", "properties": {"v": {"type": "boolean"},
                                                                    "next": {"$ref": "#/$defs/n"}},
                                   "additionalProperties": False}}, "$ref": "#/$defs/n"}
MUTUAL_DEAD = {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}},
               "$defs": {"A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}, "required": ["b"]},
                         "B": {"type": "array", "items": {"$ref": "#/$defs/A"}, "minItems": 1}}}
TREE = {"$defs": {"node": {"type": "object", "properties": {
    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}, "$ref": "#/$defs/node"}


def assert_real_cycle(schema: Any, f: Finding) -> None:
    """The cycle named is one of the schema's references, followed $ref by $ref."""
    targets, sites = f.data["cycle"], f.data["ref_sites"]
    assert targets[0] == targets[-1] and len(sites) == len(targets) - 1 >= 1
    for i, site in enumerate(sites):
        here = targets[i][1:]  # "#/$defs/n" -> "/$defs/n"
        assert site == here or site.startswith(here + "/"), (site, here)
        holder = resolve_local(schema, "#" + site)
        assert holder is not None and isinstance(holder[1], dict), site
        ref = holder[1]["$ref"]
        resolved = resolve_local(schema, ref)
        assert resolved is not None and "#" + resolved[0] == targets[i + 1], (ref, targets[i + 1])
    assert f.witness == " -> ".join(targets)


@pytest.mark.parametrize("schema", [LINKED_REQUIRED, MUTUAL_DEAD])
def test_no_base_case_names_a_real_cycle(schema: Any) -> None:
    got = of(run(schema), "no-base-case")
    assert len(got) == 1
    f = got[0]
    assert f.severity == "error"
    assert_real_cycle(schema, f)
    assert not of(run(schema), "unbounded-recursion")


def test_no_base_case_cycle_through_two_definitions() -> None:
    f = of(run(MUTUAL_DEAD), "no-base-case")[0]
    assert f.pointer == "/$defs/A"
    assert f.data["cycle"] == ["#/$defs/A", "#/$defs/B", "#/$defs/A"]
    assert f.data["ref_sites"] == ["/$defs/A/properties/b", "/$defs/B/items"]
    # the root does not need the cycle ("a" is optional): the schema has values
    assert "admits no value" not in f.message


def test_no_base_case_on_the_root_says_the_schema_is_empty() -> None:
    f = of(run(LINKED_REQUIRED), "no-base-case")[0]
    assert f.pointer == "/$defs/n" and "admits no value" in f.message
    root = {"type": "object", "properties": {"self": {"$ref": "#"}}, "required": ["self"]}
    g = of(run(root), "no-base-case")
    assert len(g) == 1 and g[0].pointer == "" and g[0].data["cycle"] == ["#", "#"]
    assert_real_cycle(root, g[0])


@pytest.mark.parametrize("schema", [
    LINKED_OPTIONAL,  # next is optional: {} finishes
    TREE,  # an empty children array finishes
    {"$defs": {"n": {"anyOf": [{"type": "null"}, {"type": "array", "items": {"$ref": "#/$defs/n"}, "minItems": 1}]}},
     "$ref": "#/$defs/n"},  # null is the base case
    {"$defs": {"n": {"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "null"}]}},
                     "required": ["next"]}}, "$ref": "#/$defs/n"},
])
def test_no_base_case_near_misses(schema: Any) -> None:
    found = run(schema)
    assert not of(found, "no-base-case")
    assert len(of(found, "unbounded-recursion")) == 1


def test_unbounded_recursion_names_the_cycle_and_the_depth() -> None:
    found = of(run(TREE, max_depth=7), "unbounded-recursion")
    assert len(found) == 1
    f = found[0]
    assert f.severity == "warning" and f.pointer == "/$defs/node"
    assert f.data["max_depth"] == 7 and "max_depth=7" in f.message
    assert f.data["cycle"] == ["#/$defs/node", "#/$defs/node"]
    assert_real_cycle(TREE, f)


def test_unbounded_recursion_once_per_cycle() -> None:
    mutual: dict[str, Any] = {
        "$defs": {"A": {"type": "array", "items": {"$ref": "#/$defs/B"}},
                  "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}},
                  "C": {"type": "array", "items": {"$ref": "#/$defs/C"}}},
        "type": "object", "properties": {"x": {"$ref": "#/$defs/A"}, "y": {"$ref": "#/$defs/B"},
                                         "z": {"$ref": "#/$defs/C"}}}
    found = of(run(mutual), "unbounded-recursion")
    assert len(found) == 2
    for f in found:
        assert_real_cycle(mutual, f)
    cycles = sorted(len(f.data["cycle"]) for f in found)
    assert cycles == [2, 3]  # C -> C, and A -> B -> A (or B -> A -> B)


@pytest.mark.parametrize("schema", [
    {"$defs": {"s": {"type": "string", "maxLength": 3}},
     "type": "object", "properties": {"a": {"$ref": "#/$defs/s"}, "b": {"$ref": "#/$defs/s"}}},  # reuse, no cycle
    {"type": "object", "properties": {"anything": {}}},  # free-form values recurse inside maskc, not in the schema
    {"$defs": {"unused": {"type": "array", "items": {"$ref": "#/$defs/unused"}}}, "type": "boolean"},
])
def test_unbounded_recursion_near_misses(schema: Any) -> None:
    assert not of(run(schema), "unbounded-recursion")


# -- whitespace-runaway -------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", [r"^\s*[A-Z]{3}\s*$", r"^\s+$", r"^x\s*$", r"^[A-Z]{2}( +[A-Z]{2})?$"])
def test_whitespace_runaway_fires_on_whitespace_only_loops(pattern: str) -> None:
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": pattern}}}
    found = of(run(schema), "whitespace-runaway")
    assert len(found) == 1
    f = found[0]
    assert f.severity == "warning" and f.pointer == "/properties/code"
    # the witness is a real prefix of the string's language, and the loop repeats in it
    g, _ = schema_to_ir({"type": "string", "pattern": pattern}, CompileOptions())
    dfa = grammar_dfa(g.body, CompileOptions())
    prefix, loop = f.data["prefix"].encode(), f.data["loop"].encode()
    assert loop.strip() == b"" and loop
    for k in (1, 2, 50):
        assert dfa.walk(0, prefix + loop * k) >= 0


@pytest.mark.parametrize("pattern", [
    r"^[A-Z]{3}$",  # bounded
    r"^\s{0,2}[A-Z]{3}\s{0,2}$",  # whitespace, bounded
    r"^[a-z ]*$",  # unbounded through letters too: unbounded-string's business
    r"^(\sx)*$",  # every loop needs a letter: no whitespace run longer than one
    r"\s+x",  # unanchored: searched for, so any character repeats
])
def test_whitespace_runaway_near_misses(pattern: str) -> None:
    assert not of(run({"type": "string", "pattern": pattern}), "whitespace-runaway")


def test_whitespace_runaway_bounded_by_max_length_and_enum() -> None:
    assert not of(run({"type": "string", "pattern": r"^\s*x$", "maxLength": 10}), "whitespace-runaway")
    assert not of(run({"type": "string", "pattern": r"^\s*x$", "enum": [" x"]}), "whitespace-runaway")


def test_wide_flexible_policy_is_info() -> None:
    schema = {"type": "boolean"}
    found = of(run(schema, whitespace="flexible:32"), "whitespace-runaway")
    assert [(f.severity, f.pointer) for f in found] == [("info", "")]
    assert not of(run(schema, whitespace="flexible:16"), "whitespace-runaway")
    assert not of(run(schema, whitespace="pretty:8"), "whitespace-runaway")


# -- max-tokens-budget --------------------------------------------------------------------------


@pytest.mark.parametrize(("schema", "nbytes"), [
    # '"' + 3 characters at their longest spelling, the 6-byte escape \u0000, + '"'
    ({"type": "string", "maxLength": 3}, 1 + 3 * 6 + 1),
    ({"type": "boolean"}, len("false")),
    ({"type": "integer", "minimum": 0, "maximum": 100}, len("100")),
    ({"enum": ["ab", "abcd", 12]}, len('"abcd"')),
    ({"type": "object", "properties": {"a": {"type": "boolean"}}, "additionalProperties": False}, len('{"a":false}')),
    ({"type": "array", "items": {"type": "boolean"}, "maxItems": 2}, len("[false,false]")),
])
def test_budget_by_hand(schema: Any, nbytes: int) -> None:
    f = budget(schema)
    assert f.severity == "info" and f.pointer == ""
    assert f.data["max_bytes"] == nbytes and f.data["max_tokens"] == nbytes + 1
    assert f.witness is not None and len(f.witness.encode()) == nbytes


def test_budget_in_pretty_layout() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"],
              "additionalProperties": False}
    assert budget(schema, whitespace="pretty:2").data["max_bytes"] == len('{\n  "a": false\n}')
    assert budget(schema, whitespace="flexible:3").data["max_bytes"] == len('{   "a"   :   false   }')


def test_budget_of_a_recursive_schema_follows_max_depth() -> None:
    # each level but the last: {"v":false,"next": ... } = 18 + 1 bytes; the last: {"v":false}
    level, last = len('{"v":false,"next":') + len("}"), len('{"v":false}')
    for depth in (1, 2, 32):
        f = budget(LINKED_OPTIONAL, max_depth=depth)
        assert f.data["max_bytes"] == (depth - 1) * level + last
        assert f.data["max_depth"] == depth


def test_no_budget_for_unbounded_or_empty_schemas() -> None:
    for schema in ({"type": "string"}, TREE, {"type": "array", "items": {"type": "boolean"}}, LINKED_REQUIRED):
        assert not of(run(schema), "max-tokens-budget")


def test_budget_skipped_past_the_limits_is_one_info() -> None:
    schema = {"type": "string", "maxLength": 40}
    found = compile_automaton(schema, CompileOptions(), limits=Limits(max_states=10))
    assert found.automaton is None and found.error is not None
    from maskc.compiler.lint.budget import budget_findings

    got = budget_findings(found, None)
    assert [(f.rule, f.severity, f.data) for f in got] == [("max-tokens-budget", "info", {"skipped": True})]


def test_token_path_with_a_vocabulary_missing_single_bytes() -> None:
    # Longest output "abab" (6 bytes with the quotes). Without a one-byte 'b', the longest
    # token path is 4 ('"' 'ab' 'a' 'b"' or '"' 'ab' 'ab' '"'), the fewest tokens 3 ('"ab' 'ab' '"').
    vocab = Vocabulary.from_tokens(['"', "ab", "a", '"ab', 'b"', "<eos>"], eos="<eos>", name="mini")
    schema = {"enum": ["ab", "abab"]}
    f = budget(schema, tokenizer=vocab)
    assert f.data["max_bytes"] == 6
    assert f.data["token_path"] == 4 and f.data["max_tokens"] == 5
    assert f.data["best_tokens"] == 3
    assert budget(schema).data["max_tokens"] == 7


def test_token_path_equals_bytes_for_a_byte_vocabulary(byte_vocab: Vocabulary) -> None:
    f = budget({"type": "string", "maxLength": 3}, tokenizer=byte_vocab)
    assert f.data["token_path"] == 20 and f.data["max_tokens"] == 21 and f.data["best_tokens"] == 20


def _automaton(schema: Any) -> tuple[Dfa, Any]:
    found = compile_automaton(schema, CompileOptions())
    assert isinstance(found.automaton, Dfa) and found.bound is not None
    return found.automaton, found.bound


@pytest.mark.parametrize("name", ["tool_call_get_weather", "support_ticket_triage"])
def test_budget_covers_real_maximal_instances(deepseek: Vocabulary, name: str) -> None:
    schema = json.loads((SAMPLES / f"{name}.json").read_text())
    f = budget(schema, tokenizer=deepseek)
    dfa, bound = _automaton(schema)
    text = longest_output(dfa, bound).decode()
    instance = json.loads(text)
    jsonschema.validate(instance, schema)
    assert len(text.encode()) == f.data["max_bytes"]
    tokens = len(deepseek.encode(text))
    assert f.data["best_tokens"] <= tokens <= f.data["max_tokens"] - 1
    # another maximal instance: other six-byte escapes (tokenized differently)
    other = json.dumps(_vary(instance), separators=(",", ":"))
    assert len(other.encode()) == f.data["max_bytes"]
    jsonschema.validate(json.loads(other), schema)
    assert len(deepseek.encode(other)) <= f.data["max_tokens"] - 1


_CONTROLS = [c for c in range(1, 0x20) if c not in (0x08, 0x09, 0x0A, 0x0C, 0x0D)]  # \u00XX, 6 bytes


def _vary(value: Any) -> Any:
    """Strings of NULs (the witness's longest spelling) as strings of other \\u00XX controls."""
    if isinstance(value, str) and value and set(value) == {"\x00"}:
        return "".join(chr(_CONTROLS[i % len(_CONTROLS)]) for i in range(len(value)))
    if isinstance(value, dict):
        return {k: _vary(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_vary(v) for v in value]
    return value


def test_tool_call_budget_by_hand() -> None:
    # {"location":" + 100 six-byte escapes + ","unit":"fahrenheit"}
    schema = json.loads((SAMPLES / "tool_call_get_weather.json").read_text())
    assert budget(schema).data["max_bytes"] == len('{"location":"') + 100 * 6 + len('","unit":"fahrenheit"}')


def test_recursive_budget_covers_a_real_maximal_instance(deepseek: Vocabulary) -> None:
    f = budget(LINKED_OPTIONAL, tokenizer=deepseek)
    value: dict[str, Any] = {"v": False}
    for _ in range(31):
        value = {"v": False, "next": value}
    text = json.dumps(value, separators=(",", ":"))
    assert len(text) == f.data["max_bytes"] == 600
    assert len(deepseek.encode(text)) <= f.data["max_tokens"] - 1


def test_token_path_bound_refuses_unbounded() -> None:
    loose = compile_automaton({"type": "string"}, CompileOptions())
    assert isinstance(loose.automaton, Dfa) and loose.bound is not None and not loose.bound.bounded
    with pytest.raises(ValueError):
        token_path_bound(loose.automaton, loose.bound, Vocabulary.from_tokens(["a", "<e>"], eos="<e>"))
    with pytest.raises(ValueError):
        longest_output(loose.automaton, loose.bound)


# -- unenforced-keyword, unknown-format ---------------------------------------------------------


def test_unenforced_keywords_are_reported_where_they_are() -> None:
    schema = {"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "maxItems": 3},
        "n": {"type": "integer", "multipleOf": 0.123456789}}}
    found = of(run(schema), "unenforced-keyword")
    assert sorted((f.pointer, f.data["keyword"]) for f in found) == [
        ("/properties/n/multipleOf", "multipleOf"), ("/properties/tags/uniqueItems", "uniqueItems")]
    assert all(f.severity == "warning" and "validate" in f.message for f in found)
    assert "refuses" in found[0].message
    assert "--lenient" in of(run(schema, lenient=True), "unenforced-keyword")[0].message


def test_unknown_format_is_its_own_rule() -> None:
    schema = {"type": "object", "properties": {"phone": {"type": "string", "format": "phone"},
                                               "at": {"type": "string", "format": "date-time"}}}
    found = run(schema)
    assert [(f.pointer, f.severity) for f in of(found, "unknown-format")] == [("/properties/phone/format", "warning")]
    assert not of(found, "unenforced-keyword")


@pytest.mark.parametrize("fmt,detail", [
    ("phone", "unknown format 'phone'"),
    ("password", "format 'password' on a string"),  # a known annotation-only format
    ("int32", "format 'int32' on a string"),
])
def test_annotation_formats_are_unknown_format_in_strict_mode_too(fmt: str, detail: str) -> None:
    schema = {"type": "object", "properties": {"p": {"type": "string", "format": fmt}}, "required": ["p"]}
    for lenient in (False, True):
        found = run(schema, lenient=lenient)
        [f] = of(found, "unknown-format")
        assert (f.pointer, f.severity, f.data["kind"]) == ("/properties/p/format", "warning", "annotation")
        assert f.message.startswith(detail) and "not checked" in f.message
        assert "--lenient" not in f.message  # an annotation compiles in strict mode too
        assert not of(found, "unenforced-keyword")


def test_a_format_on_a_number_is_an_unchecked_format() -> None:
    found = run({"type": "number", "format": "float"})
    assert [(f.rule, f.pointer) for f in found if f.rule in ("unknown-format", "unenforced-keyword")] == [
        ("unknown-format", "/format")]
    # an integer format on an integer is a range: enforced, nothing to report
    found = run({"type": "integer", "format": "int32"})
    assert not of(found, "unknown-format") and not of(found, "unenforced-keyword")


@pytest.mark.parametrize("schema", [
    {"then": {"type": "string"}},  # then without if constrains nothing: JSON Schema agrees
    {"type": "array", "maxContains": 2},  # maxContains without contains
])
def test_other_annotations_are_neither_rule(schema: Any) -> None:
    found = run(schema)
    assert not of(found, "unknown-format") and not of(found, "unenforced-keyword")


def test_refused_keywords_stay_unenforced_keyword_beside_annotations() -> None:
    schema = {"type": "object", "properties": {
        "p": {"type": "string", "format": "phone"},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}}
    found = run(schema)
    assert [f.pointer for f in of(found, "unenforced-keyword")] == ["/properties/tags/uniqueItems"]
    assert [f.pointer for f in of(found, "unknown-format")] == ["/properties/p/format"]


@pytest.mark.parametrize("schema", [
    {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
    {"type": "string", "format": "email"},
    {"type": "string", "format": "duration"},
    {"type": "string", "format": "uri-reference"},
    # keywords maskc now enforces
    {"type": "integer", "multipleOf": 3},
    {"type": "string", "not": {"const": "x"}},
    {"type": "array", "items": {"enum": [1, 2, 3]}, "uniqueItems": True},
    {"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 5}, "maxContains": 2, "maxItems": 4},
    {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}, "maxProperties": 3},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "dependentRequired": {"a": ["b"]}},
    {"type": "object", "properties": {"a": {"type": "string", "description": "multipleOf"}}},
])
def test_unenforced_near_misses(schema: Any) -> None:
    found = run(schema)
    assert not of(found, "unenforced-keyword") and not of(found, "unknown-format")


def test_unenforced_inside_a_reference_to_the_root() -> None:
    schema = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}},
                                               "tags": {"type": "array", "items": {"type": "string"},
                                                        "uniqueItems": True}}}
    pointers = {f.pointer for f in of(run(schema), "unenforced-keyword")}
    assert pointers == {"/properties/tags/uniqueItems"}


# -- through lint_schema ------------------------------------------------------------------------


def test_rules_are_registered_and_selectable() -> None:
    all_rules()
    for info in termination.RULES:
        assert rule_info(info.id) is info or rule_info(info.id) == info
    ctx = LintContext(LINKED_REQUIRED)
    got = lint_schema(ctx, select=["no-base-case"])
    assert [f.rule for f in got] == ["no-base-case"]
    ignored = dict(LINKED_REQUIRED, **{"x-maskc-ignore": ["no-base-case"]})
    assert not lint_schema(LintContext(ignored), select=["no-base-case"])


def test_recursion_through_an_allof_merge_names_the_enclosing_definition() -> None:
    # the allOf merges Foo into its own property: the front end makes the allOf the rule
    schema = {"definitions": {"ChildFoo": {"type": "object"},
                              "Foo": {"type": "object", "required": ["childFoos"], "properties": {
                                  "childFoos": {"allOf": [{"$ref": "#/definitions/Foo"},
                                                          {"$ref": "#/definitions/ChildFoo"}]}}}},
              "type": "object", "properties": {"Foo": {"$ref": "#/definitions/Foo"}}}
    found = of(run(schema), "no-base-case")
    assert len(found) == 1
    f = found[0]
    assert f.pointer == "/definitions/Foo/properties/childFoos"
    assert f.data["cycle"] == ["#/definitions/Foo", "#/definitions/Foo"]
    assert_real_cycle(schema, f)
    optional = json.loads(json.dumps(schema))
    optional["definitions"]["Foo"]["required"] = []
    assert not of(run(optional), "no-base-case")
    assert len(of(run(optional), "unbounded-recursion")) == 1


# -- later-draft-keyword -------------------------------------------------------------------------


@pytest.mark.parametrize("uri, found_at", [
    ("http://json-schema.org/draft-04/schema#", ["/properties/kind/const", "/properties/kind/if"]),
    ("http://json-schema.org/draft-06/schema#", ["/properties/kind/if"]),
    ("http://json-schema.org/draft-07/schema#", []), (None, []),
])
def test_later_draft_keywords_are_reported_by_the_draft_the_document_names(uri: str | None,
                                                                          found_at: list[str]) -> None:
    body = {"type": "object", "properties": {"kind": {"const": "a", "if": {}, "then": {}},
                                             "const": {"enum": [{"const": 1}]}}}  # (a property named const)
    schema = body if uri is None else {"$schema": uri, **body}
    found = of(run(schema), "later-draft-keyword")
    assert [f.pointer for f in found if f.data["keyword"] != "then"] == found_at
    assert all(f.severity == "warning" and "ignored" in f.message for f in found)
    assert not of(run(schema), "unenforced-keyword")  # (ignored, not a keyword the grammar cannot enforce)
