"""The checks of a provider's strict mode, for the ``strict-mode`` rule of :mod:`.profiles`.

Reads the ``strict`` part of a validated profile (which keywords, annotations and formats
are accepted; whether the root must be an object, every object closed, every property
required) and its ``max_total_properties`` and ``max_total_string_chars`` limits. The
nesting and enum limits are the ``deep-nesting`` and ``large-enum`` rules' business.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from maskc.compiler.lint.walk import join

__all__ = ["StrictViolation", "schema_totals", "schema_types", "string_chars", "strict_findings"]

# (pointer, message, kind, data): kind is root | additional-properties | required | keyword |
# format | total-properties | total-chars.
StrictViolation = tuple[str, str, str, dict[str, Any]]

_OPTIONAL_HINT = 'keep it in required and make it optional as a union with null (type: [T, "null"])'


def string_chars(values: Iterable[Any], *, strings_only: bool) -> int:
    """Characters of ``values``: a string by its length, any other value by the length of its
    JSON text (or not at all when ``strings_only``)."""
    total = 0
    for v in values:
        if isinstance(v, str):
            total += len(v)
        elif not strings_only:
            total += len(orjson.dumps(v).decode())
    return total


def schema_types(schema: dict[str, Any]) -> set[str]:
    t = schema.get("type")
    if isinstance(t, str):
        return {t}
    if isinstance(t, list):
        return {x for x in t if isinstance(x, str)}
    return set()


def _is_object(schema: dict[str, Any]) -> bool:
    types = schema_types(schema)
    return "object" in types if types else "properties" in schema


def schema_totals(nodes: Iterable[tuple[str, Any]]) -> tuple[int, int]:
    """(object properties declared, characters of property names, definition names, enum
    values and const values) over every subschema."""
    properties = chars = 0
    for _, schema in nodes:
        if not isinstance(schema, dict):
            continue
        props = schema.get("properties")
        if isinstance(props, dict):
            properties += len(props)
            chars += sum(len(name) for name in props)
        for kw in ("$defs", "definitions"):
            defs = schema.get(kw)
            if isinstance(defs, dict):
                chars += sum(len(name) for name in defs)
        if isinstance(schema.get("enum"), list):
            chars += string_chars(schema["enum"], strings_only=False)
        if "const" in schema:
            chars += string_chars([schema["const"]], strings_only=False)
    return properties, chars


def _root(root: Any) -> Iterator[StrictViolation]:
    if not isinstance(root, dict):
        yield "", f"the root must be an object schema, not the boolean schema {str(root).lower()}", "root", {}
        return
    if "anyOf" in root:
        yield "/anyOf", "the root must be an object, not an anyOf (wrap the union in a property)", "root", {}
    types = schema_types(root)
    if types != {"object"}:
        got = f"type {root['type']!r}" if "type" in root else "no type"
        yield ("/type" if "type" in root else ""), f"the root must be type 'object', it has {got}", "root", {}


def _node(pointer: str, schema: dict[str, Any], strict: dict[str, Any], allowed: set[str],
          formats: set[str] | None, name: str) -> Iterator[StrictViolation]:
    for kw in schema:
        if kw not in allowed and not kw.startswith("x-"):
            yield (join(pointer, kw), f"keyword '{kw}' is not supported by profile '{name}' in strict mode",
                   "keyword", {"keyword": kw})
    fmt = schema.get("format")
    if formats is not None and "format" in allowed and isinstance(fmt, str) and fmt not in formats:
        yield (join(pointer, "format"), f"format '{fmt}' is not supported by profile '{name}' in strict "
               f"mode (supported: {', '.join(sorted(formats))})", "format", {"format": fmt})
    if not _is_object(schema):
        return
    if strict["additional_properties_false"] and schema.get("additionalProperties") is not False:
        if "additionalProperties" in schema:
            got = orjson.dumps(schema["additionalProperties"]).decode()
            yield (join(pointer, "additionalProperties"), f"this object sets additionalProperties to "
                   f"{got[:40]}; strict mode requires additionalProperties: false on every object",
                   "additional-properties", {})
        else:
            yield (pointer, "this object does not set additionalProperties: false, which strict mode "
                   "requires on every object", "additional-properties", {})
    props = schema.get("properties")
    if strict["all_required"] and isinstance(props, dict):
        required = schema.get("required")
        listed = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
        for prop in props:
            if prop not in listed:
                yield (join(pointer, "properties", prop), f"property '{prop}' is not in required; strict "
                       f"mode requires every property: {_OPTIONAL_HINT}", "required", {"property": prop})


def strict_findings(root: Any, nodes: list[tuple[str, Any]], profile: dict[str, Any]) -> Iterator[StrictViolation]:
    """Every violation of ``profile['strict']`` in the schema ``root`` (whose subschemas, with
    their pointers, are ``nodes``), in document order, then the totals."""
    strict: dict[str, Any] = profile["strict"]
    name: str = profile["name"]
    if strict["root_object"]:
        yield from _root(root)
    allowed = set(strict["keywords"]) | set(strict["annotations"])
    formats = None if strict["formats"] is None else set(strict["formats"])
    for pointer, schema in nodes:
        if isinstance(schema, dict):
            yield from _node(pointer, schema, strict, allowed, formats, name)
    limits = profile["limits"]
    properties, chars = schema_totals(nodes)
    if limits["max_total_properties"] is not None and properties > limits["max_total_properties"]:
        yield ("", f"the schema declares {properties} object properties in all, more than the "
               f"{limits['max_total_properties']} of profile '{name}'", "total-properties",
               {"count": properties, "limit": limits["max_total_properties"]})
    if limits["max_total_string_chars"] is not None and chars > limits["max_total_string_chars"]:
        yield ("", f"property names, definition names, enum and const values total {chars} characters, "
               f"more than the {limits['max_total_string_chars']} of profile '{name}'", "total-chars",
               {"chars": chars, "limit": limits["max_total_string_chars"]})
