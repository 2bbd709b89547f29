"""Keyword contradictions that make one schema node unsatisfiable, read off the node itself.

These checks need no automaton and give the clearest messages: bounds that cross
(``minLength > maxLength``, ``minimum > maximum`` and the exclusive forms,
``minProperties > maxProperties``, ``minContains > maxContains``, more ``contains`` matches
than ``maxItems`` allows), ``required`` names an object cannot hold, ``enum``/``const``
values outside the ``type``, and a ``not`` that its own node implies (``{"type": "string",
"not": {"type": "string"}}``). A contradiction empties one JSON type; the node is
unsatisfiable when it empties every type the node admits (its ``type``, or, without one
and in generation semantics, the types maskc infers from its keywords, as the compiler does).
"""

from __future__ import annotations

import math
import re
from typing import Any

import orjson

from maskc.compiler.frontends.json_schema.base import ANNOTATIONS, ARRAY_KW, NUMBER_KW, OBJECT_KW, STRING_KW, is_type

__all__ = ["admitted_types", "contradictions"]

_ALL_TYPES = ("null", "boolean", "object", "array", "string", "number")


def admitted_types(schema: dict[str, Any], *, exact: bool = False) -> tuple[list[str], bool]:
    """The JSON types ``schema`` admits, and whether they were inferred (no ``type``).

    ``integer`` stands alone only when ``number`` is absent. Without ``type`` the types
    are those whose keywords appear (maskc's inference in generation semantics), else all
    of them (always, with ``exact``).
    """
    t = schema.get("type")
    if t is None:
        keys = set(schema)
        inferred = [] if exact else [
            name for name, kws in (("object", OBJECT_KW), ("array", ARRAY_KW), ("string", STRING_KW),
                                   ("number", NUMBER_KW)) if keys & kws]
        return (inferred, True) if inferred else (list(_ALL_TYPES), False)
    types = [t] if isinstance(t, str) else [x for x in t if isinstance(x, str)] if isinstance(t, list) else []
    if "number" in types:
        types = [x for x in types if x != "integer"]
    return list(dict.fromkeys(types)), False


def contradictions(schema: Any, *, closed_by_default: bool = True,
                   exact: bool = False) -> tuple[str, dict[str, Any]] | None:
    """Why no value satisfies ``schema`` (a message and data), or None when no check applies.

    With ``closed_by_default`` a ``required`` name that ``properties`` does not declare is a
    contradiction where ``additionalProperties`` is absent too, as maskc generates no
    undeclared property then; turn it off for a node the compiler merges with other keywords.
    ``exact``: the compile's semantics is exact (no inferred types, undeclared keys allowed),
    so only JSON Schema's own contradictions are reported.
    """
    if not isinstance(schema, dict):
        return None
    negated = _negated(schema)
    if negated is not None:
        return negated
    types, inferred = admitted_types(schema, exact=exact)
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
        why = _empties(t, schema, closed_by_default and not exact)
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


# Keywords whose meaning depends on their siblings (which properties or items are evaluated,
# which bound a draft-4 flag makes exclusive, which branch a condition picks): a ``not`` that
# holds one is implied by its node only when both have the same siblings.
_CONTEXTUAL = frozenset({
    "additionalProperties", "unevaluatedProperties", "additionalItems", "items", "unevaluatedItems",
    "contains", "if", "then", "else", "minContains", "maxContains", "exclusiveMinimum", "exclusiveMaximum",
})


def _constraints(schema: dict[str, Any]) -> dict[str, bytes]:
    """The keywords that constrain an instance, each with its canonical JSON text."""
    out = {}
    for k, v in schema.items():
        if k in ANNOTATIONS or k.startswith("x-"):
            continue
        try:
            out[k] = orjson.dumps(v, option=orjson.OPT_SORT_KEYS)
        except (TypeError, orjson.JSONEncodeError):
            out[k] = repr(v).encode()
    return out


def _negated(schema: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """A ``not`` whose subschema every value of its node satisfies: the node's own keywords
    include the subschema's, with the same values (so the node implies it)."""
    inner = schema.get("not")
    if inner is True or inner == {}:
        return "'not' is true (or {}): it rejects every value", {"keywords": ["not"], "semantics": "json-schema"}
    if not isinstance(inner, dict) or "$ref" in schema or "$id" in inner or "id" in inner:
        return None  # up to draft 7 a $ref hides its siblings; an $id moves the references inside
    own = _constraints({k: v for k, v in schema.items() if k != "not"})
    neg = _constraints(inner)
    if not neg or any(own.get(k) != v for k, v in neg.items()):
        return None
    if set(neg) & _CONTEXTUAL and own != neg:
        return None
    shown = ", ".join(sorted(neg))
    what = "the same keywords as the schema itself" if own == neg else f"only keywords the schema has too ({shown})"
    return (f"'not' holds {what}, with the same values: every value the schema admits is one that not rejects",
            {"keywords": ["not", *sorted(neg)], "semantics": "json-schema"})


# The keywords of the one generation-only object reason; recognized by identity, since a real
# contradiction (a required property whose schema is false) names the same keywords.
_UNDECLARED = ["required", "properties"]


def _empties(t: str, schema: dict[str, Any], closed: bool) -> tuple[str, list[str]] | None:
    if t == "string":
        return _crossed(schema, "minLength", "maxLength")
    if t == "array":
        return _crossed(schema, "minItems", "maxItems") or _contains(schema)
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


def _contains(schema: dict[str, Any]) -> tuple[str, list[str]] | None:
    """``contains`` counts that no array meets: ``minContains`` (1 by default) over
    ``maxContains`` or ``maxItems``, or a ``contains: false`` that must match."""
    if "contains" not in schema:
        return None  # minContains and maxContains alone constrain nothing
    least = _num(schema.get("minContains"))
    least = 1.0 if least is None else least
    own = "minContains" in schema
    kws = ["contains", *(["minContains"] if own else [])]
    if schema["contains"] is False and least > 0:
        need = f"minContains {schema['minContains']} requires a match" if own else "at least one item must match it"
        return f"contains is false: no item matches it, yet {need}", kws
    for kw in ("maxContains", "maxItems"):
        most = _num(schema.get(kw))
        if most is not None and least > most:
            if own:
                return f"minContains {schema['minContains']} > {kw} {schema[kw]}", [*kws, kw]
            return f"contains needs at least one matching item but {kw} is {schema[kw]}", [*kws, kw]
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
