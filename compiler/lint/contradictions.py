"""Keyword contradictions that make one schema node unsatisfiable, read off the node itself.

These checks need no automaton and give the clearest messages: bounds that cross
(``minLength > maxLength``, ``minimum > maximum`` and the exclusive forms), ``required``
names an object cannot hold, ``enum``/``const`` values outside the ``type``. A contradiction
empties one JSON type; the node is unsatisfiable when it empties every type the node admits
(its ``type``, or, without one, the types maskc infers from its keywords, as the compiler does).
"""

from __future__ import annotations

import math
import re
from typing import Any

from maskc.compiler.frontends.json_schema.base import ARRAY_KW, NUMBER_KW, OBJECT_KW, STRING_KW, is_type

__all__ = ["admitted_types", "contradictions"]

_ALL_TYPES = ("null", "boolean", "object", "array", "string", "number")


def admitted_types(schema: dict[str, Any]) -> tuple[list[str], bool]:
    """The JSON types ``schema`` admits, and whether they were inferred (no ``type``).

    ``integer`` stands alone only when ``number`` is absent. Without ``type`` the types
    are those whose keywords appear (maskc's inference), else all of them.
    """
    t = schema.get("type")
    if t is None:
        keys = set(schema)
        inferred = [name for name, kws in (("object", OBJECT_KW), ("array", ARRAY_KW), ("string", STRING_KW),
                                           ("number", NUMBER_KW)) if keys & kws]
        return (inferred, True) if inferred else (list(_ALL_TYPES), False)
    types = [t] if isinstance(t, str) else [x for x in t if isinstance(x, str)] if isinstance(t, list) else []
    if "number" in types:
        types = [x for x in types if x != "integer"]
    return list(dict.fromkeys(types)), False


def contradictions(schema: Any, *, closed_by_default: bool = True) -> tuple[str, dict[str, Any]] | None:
    """Why no value satisfies ``schema`` (a message and data), or None when no check applies.

    With ``closed_by_default`` a ``required`` name that ``properties`` does not declare is a
    contradiction where ``additionalProperties`` is absent too, as maskc generates no
    undeclared property then; turn it off for a node the compiler merges with other keywords.
    """
    if not isinstance(schema, dict):
        return None
    types, inferred = admitted_types(schema)
    if not types:
        return None
    values = _listed_values(schema)
    if values is not None:
        kept = [v for v in values if any(is_type(v, t) for t in types)]
        if not values:
            return "enum is empty: no value is listed", {"keywords": ["enum"]}
        if not kept:
            kw = "const" if "const" in schema else "enum"
            got = sorted({_type_name(v) for v in values})
            return (f"no {kw} value has the type {_types_text(types)} (the listed values are {', '.join(got)})",
                    {"keywords": [kw, "type"]})
        if "const" in schema and "enum" in schema and isinstance(schema["enum"], list) \
                and not any(_same(schema["const"], v) for v in schema["enum"]):
            return "const is not one of the enum values", {"keywords": ["const", "enum"]}
    reasons: dict[str, tuple[str, list[str]]] = {}
    for t in types:
        why = _empties(t, schema, closed_by_default)
        if why is None:
            return None
        reasons[t] = why
    message = "; ".join(dict.fromkeys(msg for msg, _ in reasons.values()))
    keywords = list(dict.fromkeys(k for _, kws in reasons.values() for k in kws))
    if inferred:
        message += f" (maskc reads the node as type {_types_text(types)} from these keywords)"
    # Inferred types and undeclared required keys are maskc's generation language: JSON Schema
    # itself would accept values of other types, or the undeclared key.
    generation_only = inferred or any(kws is _UNDECLARED for _, kws in reasons.values())
    return message, {"keywords": keywords, "types": types,
                     "semantics": "generation" if generation_only else "json-schema"}


# The keywords of the one generation-only object reason; recognized by identity, since a real
# contradiction (a required property whose schema is false) names the same keywords.
_UNDECLARED = ["required", "properties"]


def _empties(t: str, schema: dict[str, Any], closed: bool) -> tuple[str, list[str]] | None:
    if t == "string":
        return _crossed(schema, "minLength", "maxLength")
    if t == "array":
        return _crossed(schema, "minItems", "maxItems")
    if t == "object":
        return _crossed(schema, "minProperties", "maxProperties") or _object(schema, closed)
    if t in ("number", "integer"):
        return _numbers(schema, integer=t == "integer")
    return None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _crossed(schema: dict[str, Any], lo_kw: str, hi_kw: str) -> tuple[str, list[str]] | None:
    lo, hi = _num(schema.get(lo_kw)), _num(schema.get(hi_kw))
    if lo is not None and hi is not None and lo > hi:
        return f"{lo_kw} {schema[lo_kw]} > {hi_kw} {schema[hi_kw]}", [lo_kw, hi_kw]
    return None


def _numbers(schema: dict[str, Any], *, integer: bool) -> tuple[str, list[str]] | None:
    lo, lo_x, lo_kw = _bound(schema, "minimum", "exclusiveMinimum", max)
    hi, hi_x, hi_kw = _bound(schema, "maximum", "exclusiveMaximum", min)
    if lo is None or hi is None:
        return None
    kws = [lo_kw, hi_kw]
    text = f"{'>' if lo_x else '>='} {_fmt(lo)} and {'<' if hi_x else '<='} {_fmt(hi)} ({lo_kw}, {hi_kw})"
    if lo > hi or (lo == hi and (lo_x or hi_x)):
        return f"no number is {text}", kws
    if integer:
        first = math.floor(lo) + 1 if lo_x and lo == math.floor(lo) else math.ceil(lo)
        last = math.ceil(hi) - 1 if hi_x and hi == math.ceil(hi) else math.floor(hi)
        if first > last:
            return f"no integer is {text}", kws
    return None


def _bound(schema: dict[str, Any], kw: str, x_kw: str, pick: Any) -> tuple[float | None, bool, str]:
    """The tightest bound from ``kw`` and ``x_kw`` (a number, or draft 4's boolean flag)."""
    plain, x = _num(schema.get(kw)), schema.get(x_kw)
    if x is True and plain is not None:
        return plain, True, kw  # draft 4: exclusiveMinimum/exclusiveMaximum are flags
    xv = _num(x)
    if xv is None:
        return plain, False, kw
    if plain is None:
        return xv, True, x_kw
    best = pick(plain, xv)
    if best == xv:  # an exclusive bound at the same value is the tighter one
        return xv, True, x_kw
    return plain, False, kw


def _object(schema: dict[str, Any], closed: bool) -> tuple[str, list[str]] | None:
    required = schema.get("required")
    if not isinstance(required, list):
        return None
    names = list(dict.fromkeys(r for r in required if isinstance(r, str)))
    props = _dict_at(schema, "properties")
    patterns = _dict_at(schema, "patternProperties")
    cap = _num(schema.get("maxProperties"))
    if cap is not None and len(names) > cap:
        return f"{len(names)} properties are required but maxProperties is {schema['maxProperties']}", \
            ["required", "maxProperties"]
    addl = schema.get("additionalProperties", False if ("properties" in schema or patterns) else True)
    for name in names:
        if props.get(name) is False:
            return f"the required property {name!r} has the schema false", ["required", "properties"]
        if name in props or _pattern_may_match(patterns, name):
            continue
        if schema.get("additionalProperties") is False:
            return (f"the required property {name!r} is not in properties and additionalProperties is false",
                    ["required", "additionalProperties"])
        if addl is False and closed:
            return (f"the required property {name!r} is not declared in properties, and maskc generates no "
                    "undeclared property unless additionalProperties allows it", _UNDECLARED)
    return None


def _dict_at(schema: dict[str, Any], kw: str) -> dict[str, Any]:
    value = schema.get(kw)
    return value if isinstance(value, dict) else {}


def _pattern_may_match(patterns: dict[str, Any], name: str) -> bool:
    for pat, sub in patterns.items():
        if sub is False:
            continue
        try:
            if re.search(pat, name):
                return True
        except (re.error, TypeError):
            return True  # not a Python regex: assume it may match (unknown is not a contradiction)
    return False


def _listed_values(schema: dict[str, Any]) -> list[Any] | None:
    if "const" in schema:
        return [schema["const"]]
    enum = schema.get("enum")
    return list(enum) if isinstance(enum, list) else None


def _same(a: Any, b: Any) -> bool:
    return a == b and _type_name(a) == _type_name(b)


def _type_name(v: Any) -> str:
    for t in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if is_type(v, t):
            return t
    return type(v).__name__


def _types_text(types: list[str]) -> str:
    return " or ".join(types)


def _fmt(v: float) -> str:
    return str(int(v)) if v.is_integer() else str(v)
