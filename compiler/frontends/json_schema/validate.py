"""Checks a schema document passes before it is compiled: its nesting depth, then its draft's metaschema.

The compiler reads keywords leniently (a ``null`` ``maxLength`` would read as absent), so
a schema is first validated as an instance of the metaschema its ``$schema`` names, by
jsonschema's bundled metaschemas (never fetched over the network). A schema without a known
``$schema`` is held to draft 2020-12, and accepted when an older draft (7, 6, 4) finds it
valid, as schemas written for draft 4 or 7 seldom say so (the older drafts are checked first:
they are faster, and any one passing is enough). ``format`` is an annotation here:
a ``pattern`` is checked by the regex front end (ECMA-262), not by Python's ``re``.
"""

from __future__ import annotations

import functools
from typing import Any

import orjson

from maskc.compiler.errors import SchemaError
from maskc.compiler.frontends.json_schema.base import TYPES, JsonValue, ptr

__all__ = ["MAX_SCHEMA_NESTING", "check_schema", "check_nesting", "check_metaschema"]

MAX_SCHEMA_NESTING = 64
"""Deepest nesting of objects and arrays a schema document may have. Real schemas stay far
below it (MaskBench's deepest is 34); past it, the recursive metaschema validation and the
compiler would exhaust Python's stack, and orjson refuses 255 levels."""

_NESTING_HINT = "define the repeated structure once in $defs and refer to it with $ref"
_OLDER_DRAFTS = ("Draft7Validator", "Draft6Validator", "Draft4Validator")


def check_schema(schema: JsonValue) -> None:
    """Raise :class:`SchemaError` if ``schema`` nests too deeply or breaks its metaschema."""
    check_nesting(schema)
    check_metaschema(schema)


def check_nesting(doc: Any, limit: int = MAX_SCHEMA_NESTING) -> None:
    """Raise :class:`SchemaError` at the first object or array nested deeper than ``limit``.

    Iterative, so it cannot itself run out of stack however deep ``doc`` is.
    """
    parents: list[tuple[int, str | int]] = []  # node index -> (parent index, key)
    stack: list[tuple[Any, int, int]] = [(doc, 1, -1)]  # (value, its depth, its node index)
    while stack:
        value, depth, node = stack.pop()
        if depth > limit:
            keys: list[str | int] = []
            while node >= 0:
                node, key = parents[node]
                keys.append(key)
            raise SchemaError(f"the schema nests deeper than {limit} levels", pointer=ptr("", *reversed(keys)),
                              hint=_NESTING_HINT)
        children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, child in children:
            if isinstance(child, (dict, list)):
                parents.append((node, key))
                stack.append((child, depth + 1, len(parents) - 1))


def check_metaschema(schema: JsonValue) -> None:
    """Raise :class:`SchemaError` with the JSON pointer and message of the most relevant
    metaschema violation (jsonschema's ``best_match``)."""
    from jsonschema import validators
    from jsonschema.exceptions import best_match

    declared = schema.get("$schema") if isinstance(schema, dict) else None
    found = None
    if isinstance(declared, str):
        try:
            # default=None: None for an unknown $schema (not a warning and the latest draft)
            found = validators.validator_for(schema, default=None)
        except ValueError:  # not even a URI ("http://[x"): the metaschema says so below
            found = None
    cls = found or validators.Draft202012Validator
    try:
        if found is None:
            # Valid under any of the drafts is enough, so the older ones go first: their
            # metaschemas validate about 5x faster than 2020-12's, whose $dynamicRef lookups
            # took 170 ms of a Kubernetes schema's compile (all 1,550 MaskBench schemas of
            # the slice without a $schema pass draft 7). 2020-12 is checked last, and names
            # the violation where none passes.
            for name in _OLDER_DRAFTS:
                if next(_meta_validator(getattr(validators, name)).iter_errors(schema), None) is None:
                    return
        error = best_match(_meta_validator(cls).iter_errors(schema))
    except RecursionError:
        raise SchemaError("the schema nests too deeply to validate", hint=_NESTING_HINT) from None
    if error is None:
        return
    raise SchemaError(f"invalid schema ({_draft_name(cls)}): {_reason(error)}",
                      pointer=ptr("", *error.absolute_path),
                      hint="fix the keyword's value (see the JSON Schema specification of the draft)")


@functools.cache
def _meta_validator(cls: Any) -> Any:
    # No format checker: "format": "regex" would judge patterns by Python's re, not ECMA-262.
    return cls(cls.META_SCHEMA)


def _draft_name(cls: Any) -> str:
    name = str(cls.__name__).removeprefix("Draft").removesuffix("Validator")
    return f"draft {name[:4]}-{name[4:]}" if len(name) == 6 else f"draft {name}"


def _reason(error: Any) -> str:
    """jsonschema's message, with the instance as JSON text (``null``, not ``None``), cut short."""
    message, instance = str(error.message), error.instance
    path = list(error.absolute_path)
    if error.validator == "anyOf" and path and path[-1] == "type" and not isinstance(instance, dict):
        message = f"{repr(instance)} is not a type name ({', '.join(TYPES)}) nor a list of them"
    shown = repr(instance)
    if message.startswith(shown):
        try:
            text = orjson.dumps(instance).decode()
        except (TypeError, orjson.JSONEncodeError):
            text = shown
        message = (text if len(text) <= 60 else text[:57] + "...") + message[len(shown):]
    return message if len(message) <= 300 else message[:297] + "..."
