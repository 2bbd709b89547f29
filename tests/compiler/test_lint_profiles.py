"""Provider profiles and the rules that read them: deep-nesting, large-enum, strict-mode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from maskc.compiler.errors import InputError
from maskc.compiler.findings import Finding
from maskc.compiler.lint import LintContext, lint_schema
from maskc.compiler.lint.profiles import (
    available_profiles,
    check,
    load_profile,
    nesting_violations,
    validate_profile,
)
from maskc.compiler.lint.strict import schema_totals

OPENAI = "openai-strict"


def findings(schema: Any, profile: dict[str, Any] | None = None, rule: str | None = None) -> list[Finding]:
    found = list(check(LintContext(schema=schema, profile=profile)))
    return [f for f in found if rule is None or f.rule == rule]


def obj(props: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A strict-compliant object: closed, every property required."""
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False,
            **extra}


def chain(levels: int) -> dict[str, Any]:
    """An object nesting ``levels`` objects deep (the root is level 1), each under ``c``."""
    schema: dict[str, Any] = obj({"leaf": {"type": "string"}})
    for _ in range(levels - 1):
        schema = obj({"c": schema})
    return schema


def custom(tmp_path: Path, **limits: int | None) -> dict[str, Any]:
    data = {"name": "tiny", "description": "test limits", "limits": limits}
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(data))
    profile: dict[str, Any] = load_profile(str(path))
    return profile


# ---------------------------------------------------------------- loading

def test_builtin_profiles_load_and_validate() -> None:
    names = available_profiles()
    assert names == sorted(names)
    assert {"default", OPENAI} <= set(names)
    for name in names:
        profile = load_profile(name)
        assert profile["name"] == name
        assert set(profile["limits"]) >= {"max_nesting_depth", "max_enum_values"}
    openai = load_profile(OPENAI)
    assert openai["source"].startswith("https://platform.openai.com/")
    assert openai["limits"] == {
        "max_nesting_depth": 10, "max_enum_values": None, "max_total_enum_values": 1000,
        "large_enum_threshold": 250, "max_large_enum_chars": 15000, "max_total_properties": 5000,
        "max_total_string_chars": 120000,
    }
    assert openai["strict"]["formats"] == ["date-time", "time", "date", "duration", "email", "hostname",
                                           "ipv4", "ipv6", "uuid"]
    assert load_profile("default").get("strict") is None


def test_unknown_profile_names_the_available_ones() -> None:
    with pytest.raises(InputError) as e:
        load_profile("gemini-strict")
    assert "gemini-strict" in str(e.value)
    assert e.value.hint is not None and "default" in e.value.hint and OPENAI in e.value.hint


def test_profile_from_a_path(tmp_path: Path) -> None:
    profile = custom(tmp_path, max_nesting_depth=3)
    assert profile["name"] == "tiny"
    assert profile["limits"]["max_nesting_depth"] == 3
    assert profile["limits"]["max_enum_values"] is None  # completed with nulls
    with pytest.raises(InputError, match="cannot read"):
        load_profile(str(tmp_path / "missing.json"))
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        load_profile(str(tmp_path / "broken.json"))


GOOD: dict[str, Any] = {"name": "p", "description": "d", "limits": {"max_nesting_depth": 4}}


@pytest.mark.parametrize("change, message", [
    ({"name": ""}, "'name'"),
    ({"limits": {"max_depth": 3}}, "unknown limit"),
    ({"limits": {"max_nesting_depth": 0}}, "positive integer"),
    ({"limits": {"max_nesting_depth": True}}, "positive integer"),
    ({"limits": {"large_enum_threshold": 250}}, "set together"),
    ({"colour": "red"}, "unknown field"),
    ({"severity": {"deep-nesting": "fatal"}}, "severity"),
    ({"severity": {"unbounded-string": "error"}}, "severity"),
    ({"strict": {"root_object": True}}, "'strict'"),
    ({"notes": 3}, "'notes'"),
])
def test_malformed_profiles_are_refused(change: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        validate_profile({**GOOD, **change})
    validate_profile(GOOD)  # the near-miss passes


def test_loaded_profiles_are_copies() -> None:
    load_profile(OPENAI)["limits"]["max_nesting_depth"] = 1
    assert load_profile(OPENAI)["limits"]["max_nesting_depth"] == 10


# ---------------------------------------------------------------- deep-nesting

def test_deep_nesting_exactly_at_the_default_limit_is_clean() -> None:
    assert findings(chain(10), rule="deep-nesting") == []
    found = findings(chain(11), rule="deep-nesting")
    assert len(found) == 1
    f = found[0]
    assert f.severity == "warning"
    assert f.pointer == "/properties/c" * 10  # the 11th object, the first past the limit
    assert f.data["level"] == 11 and f.data["limit"] == 10 and f.data["profile"] == "default"
    assert f.data["instance_path"] == "/c" * 10


def test_deep_nesting_counts_arrays_not_unions(tmp_path: Path) -> None:
    tiny = custom(tmp_path, max_nesting_depth=3)
    # object > array > object: 3 levels; the anyOf and the strings add none
    three = obj({"xs": {"type": "array", "items": {"anyOf": [
        obj({"s": {"type": "string"}}), {"type": "null"}]}}})
    assert nesting_violations(three, 3) == []
    assert findings(three, tiny, "deep-nesting") == []
    four = obj({"xs": {"type": "array", "items": {"type": "array", "items": obj({})}}})
    (f,) = findings(four, tiny, "deep-nesting")
    assert f.pointer == "/properties/xs/items/items"
    assert f.data["instance_path"] == "/xs/*/*"


def test_deep_nesting_follows_refs_once_around_a_cycle(tmp_path: Path) -> None:
    tiny = custom(tmp_path, max_nesting_depth=2)
    via_ref = {"type": "object", "properties": {"a": {"$ref": "#/$defs/inner"}},
               "$defs": {"inner": obj({"b": obj({})})}}
    (f,) = findings(via_ref, tiny, "deep-nesting")
    assert f.pointer == "/$defs/inner/properties/b"  # the culprit lives in the definition
    assert f.data["instance_path"] == "/a/b"
    # a recursive tree: two levels per unrolling, followed once: no finding, no hang
    tree = {"$defs": {"node": obj({"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}})},
            "$ref": "#/$defs/node"}
    assert findings(tree, tiny, "deep-nesting") == []
    assert nesting_violations(tree, 1) == [("/$defs/node/properties/kids", 2, "/kids")]


def test_deep_nesting_is_an_error_under_openai_strict() -> None:
    (f,) = findings(chain(11), load_profile(OPENAI), "deep-nesting")
    assert f.severity == "error"
    assert findings(chain(10), load_profile(OPENAI), "deep-nesting") == []


# ---------------------------------------------------------------- large-enum

def enum_schema(*sizes: int) -> dict[str, Any]:
    return obj({f"e{k}": {"type": "string", "enum": [f"v{i}" for i in range(n)]} for k, n in enumerate(sizes)})


def test_large_enum_default_limit() -> None:
    assert findings(enum_schema(500), rule="large-enum") == []
    (f,) = findings(enum_schema(501), rule="large-enum")
    assert f.pointer == "/properties/e0/enum"
    assert f.severity == "warning"
    assert f.data["count"] == 501 and f.data["limit"] == 500


def test_large_enum_total_under_openai() -> None:
    openai = load_profile(OPENAI)
    assert findings(enum_schema(250, 250, 250, 250), openai, "large-enum") == []  # exactly 1,000
    (f,) = findings(enum_schema(250, 250, 250, 251), openai, "large-enum")
    assert f.pointer == "" and f.data["kind"] == "total" and f.data["count"] == 1001
    assert f.severity == "error"
    # no per-enum count limit of its own: 600 short values pass
    assert findings(enum_schema(600), openai, "large-enum") == []


def values_of_chars(n: int, total: int) -> list[str]:
    """``n`` distinct strings of ``total`` characters in all (each at least 4)."""
    base, extra = divmod(total, n)
    return [f"{i:03d}".ljust(base + (1 if i < extra else 0), "x") for i in range(n)]


def test_large_enum_characters_of_a_large_enum() -> None:
    openai = load_profile(OPENAI)
    at_limit = values_of_chars(251, 15000)
    assert len(set(at_limit)) == 251 and sum(map(len, at_limit)) == 15000
    assert findings(obj({"e": {"enum": at_limit}}), openai, "large-enum") == []
    over = values_of_chars(251, 15001)
    (f,) = findings(obj({"e": {"enum": over}}), openai, "large-enum")
    assert f.pointer == "/properties/e/enum" and f.data == {
        "profile": OPENAI, "kind": "chars", "count": 251, "chars": 15001, "limit": 15000}
    # 250 values may hold any number of characters
    assert findings(obj({"e": {"enum": values_of_chars(250, 30000)}}), openai, "large-enum") == []


# ---------------------------------------------------------------- strict-mode

COMPLIANT: dict[str, Any] = {
    "type": "object",
    "title": "Order",
    "description": "an order",
    "properties": {
        "id": {"type": "string", "format": "uuid"},
        "placed": {"type": "string", "format": "date-time"},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "status": {"type": "string", "enum": ["open", "closed"]},
        "kind": {"const": "order"},
        "qty": {"type": "integer", "minimum": 1, "maximum": 99, "multipleOf": 1},
        "price": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1e6},
        "note": {"type": ["string", "null"], "description": "optional, as a union with null"},
        "lines": {"type": "array", "minItems": 1, "maxItems": 10, "items": {"$ref": "#/$defs/line"}},
        "ship": {"anyOf": [{"$ref": "#/$defs/address"}, {"type": "null"}]},
    },
    "required": ["id", "placed", "code", "status", "kind", "qty", "price", "note", "lines", "ship"],
    "additionalProperties": False,
    "$defs": {
        "line": obj({"sku": {"type": "string"}, "n": {"type": "integer"}}),
        "address": obj({"city": {"type": "string"}, "zip": {"type": ["string", "null"]}}),
    },
    "x-maskc-ignore": [],
}


def test_a_compliant_schema_has_no_finding_at_all() -> None:
    assert findings(COMPLIANT, load_profile(OPENAI)) == []


def strict(schema: Any) -> list[tuple[str, str]]:
    return [(f.pointer, f.data["kind"]) for f in findings(schema, load_profile(OPENAI), "strict-mode")]


def test_strict_root_must_be_an_object() -> None:
    assert strict({"type": "array", "items": {"type": "string"}}) == [("/type", "root")]
    assert strict({"anyOf": [obj({}), obj({"a": {"type": "string"}})]}) == [("/anyOf", "root"), ("", "root")]
    assert strict(True) == [("", "root")]
    assert strict(obj({})) == []


def test_strict_every_object_closed() -> None:
    assert strict({"type": "object", "properties": {}}) == [("", "additional-properties")]
    assert strict(obj({}, additionalProperties=True)) == [("/additionalProperties", "additional-properties")]
    nested = obj({"inner": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
                            "additionalProperties": {"type": "string"}}})
    assert strict(nested) == [("/properties/inner/additionalProperties", "additional-properties")]


def test_strict_every_property_required() -> None:
    schema = obj({"a": {"type": "string"}, "b": {"type": ["string", "null"]}})
    schema["required"] = ["a"]
    found = findings(schema, load_profile(OPENAI), "strict-mode")
    assert [(f.pointer, f.data["kind"]) for f in found] == [("/properties/b", "required")]
    assert "'b'" in found[0].message and "null" in found[0].message


def test_strict_unsupported_keywords_and_formats() -> None:
    schema = obj({
        "name": {"type": "string", "minLength": 1, "x-vendor": 1},
        "site": {"type": "string", "format": "uri"},
        "when": {"type": "string", "format": "date"},
        "both": {"allOf": [{"type": "string"}], "default": "x"},
    })
    assert strict(schema) == [
        ("/properties/name/minLength", "keyword"),
        ("/properties/site/format", "format"),
        ("/properties/both/allOf", "keyword"),
        ("/properties/both/default", "keyword"),
    ]
    (f,) = [f for f in findings(schema, load_profile(OPENAI)) if f.pointer.endswith("/format")]
    assert "'uri'" in f.message and f.severity == "error"


# Keywords maskc compiles exactly that OpenAI's strict mode still rejects (not in its documented list).
ENFORCED_BUT_REJECTED: dict[str, dict[str, Any]] = {
    "neg": {"type": "string", "not": {"const": "x"}},
    "cond": {"type": "integer", "if": {"minimum": 0}, "then": {"maximum": 9}, "else": {"minimum": -9}},
    "one": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True, "maxItems": 2},
    "has": {"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 5}, "maxItems": 3},
    "counted": {"type": "object", "additionalProperties": False, "minProperties": 0, "maxProperties": 1,
                "propertyNames": {"enum": []}},
    "deps": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
             "additionalProperties": False, "dependentRequired": {"a": []}},
    "rest": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
             "additionalProperties": False, "unevaluatedProperties": False},
}


def test_strict_flags_keywords_maskc_enforces_but_the_provider_rejects() -> None:
    schema = obj(ENFORCED_BUT_REJECTED)
    flagged = [(p, k) for p, k in strict(schema) if k == "keyword"]
    assert flagged == [
        ("/properties/neg/not", "keyword"),
        ("/properties/cond/if", "keyword"), ("/properties/cond/then", "keyword"), ("/properties/cond/else", "keyword"),
        ("/properties/one/oneOf", "keyword"),
        ("/properties/tags/uniqueItems", "keyword"),
        ("/properties/has/contains", "keyword"),
        ("/properties/counted/minProperties", "keyword"), ("/properties/counted/maxProperties", "keyword"),
        ("/properties/counted/propertyNames", "keyword"),
        ("/properties/deps/dependentRequired", "keyword"),
        ("/properties/rest/unevaluatedProperties", "keyword"),
    ]
    # maskc itself compiles every one of them: nothing is unenforced
    found = lint_schema(LintContext(schema), select=["unenforced-keyword"])
    assert found == []


def test_strict_keeps_quiet_on_enforced_keywords_the_provider_documents() -> None:
    schema = obj({"n": {"type": "integer", "multipleOf": 3, "minimum": 0, "exclusiveMaximum": 100},
                  "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
                  "xs": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}})
    assert strict(schema) == []


def test_strict_total_properties_limit() -> None:
    def wide(n: int) -> dict[str, Any]:
        return obj({f"p{i:04d}": {"type": "string"} for i in range(n)})
    assert schema_totals([("", wide(5000))]) == (5000, 25000)
    assert strict(wide(5000)) == []
    assert strict(wide(5001)) == [("", "total-properties")]


def test_strict_total_characters_limit() -> None:
    # names: "a" (1) + "defs_b" (6); enum: "yes" (3) + "no" (2) + 7 (1: JSON text); const: rest
    def sized(const_chars: int) -> dict[str, Any]:
        return obj({"a": {"const": "c" * const_chars}},
                   **{"$defs": {"defs_b": {"enum": ["yes", "no", 7]}}})
    fixed = 1 + 6 + 3 + 2 + 1
    assert schema_totals([("", sized(10)), ("/$defs/defs_b", {"enum": ["yes", "no", 7]}),
                          ("/properties/a", {"const": "c" * 10})]) == (1, fixed + 10)
    assert strict(sized(120000 - fixed)) == []
    (f,) = findings(sized(120001 - fixed), load_profile(OPENAI), "strict-mode")
    assert f.pointer == "" and f.data["chars"] == 120001 and f.data["limit"] == 120000


def test_strict_mode_is_silent_without_a_strict_profile(tmp_path: Path) -> None:
    loose = {"type": "array", "items": {"type": "string", "minLength": 3}}
    assert findings(loose, None, "strict-mode") == []
    assert findings(loose, load_profile("default"), "strict-mode") == []
    assert findings(loose, custom(tmp_path, max_nesting_depth=5), "strict-mode") == []


def test_repeats_are_capped() -> None:
    schema = obj({f"p{i}": {"type": "string", "minLength": 1} for i in range(60)})
    found = findings(schema, load_profile(OPENAI), "strict-mode")
    assert len(found) == 51
    assert found[-1].pointer == "" and found[-1].data == {"more": 10, "kind": "keyword"}


def test_through_lint_schema_with_ignore_and_select() -> None:
    schema = obj({"a": {"type": "string", "minLength": 1, "x-maskc-ignore": ["strict-mode"]},
                  "b": {"type": "string", "maxLength": 3}})
    ctx = LintContext(schema=schema, profile=load_profile(OPENAI), base_pointer="/function/parameters")
    found = lint_schema(ctx, select=["strict-mode"])
    assert [f.pointer for f in found] == ["/function/parameters/properties/b/maxLength"]
