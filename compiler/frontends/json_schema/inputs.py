"""The schema inside the inputs people already have: wrapper documents and pydantic types.

:func:`schema_from` turns a MaskBench case, an OpenAI or Anthropic tool definition, an
OpenAI ``response_format``, a pydantic model class or a ``pydantic.TypeAdapter`` into the
JSON Schema it holds; a plain schema passes through. :func:`canonical_schema` is the
schema's canonical text, the grammar's identity, so a wrapped schema and the bare one share
an artifact. pydantic is never imported here: an object can only be a pydantic type when
pydantic is already loaded.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import orjson

from maskc.compiler.errors import SchemaError
from maskc.compiler.frontends.json_schema.base import JsonValue, ptr
from maskc.compiler.frontends.json_schema.validate import check_nesting

__all__ = ["EXPECTED", "schema_from", "unwrap", "canonical_schema", "pydantic_schema"]

EXPECTED = (
    "a JSON Schema (a dict or a bool) or its JSON text, a pydantic model class or TypeAdapter, "
    "or a tool definition ({'type': 'function', 'function': {'parameters': ...}}, "
    "{'name': ..., 'input_schema': ...})"
)

# An OpenAI function tool without "parameters" takes no arguments.
_NO_ARGUMENTS: dict[str, JsonValue] = {"type": "object", "properties": {}}


def schema_from(value: Any) -> JsonValue:
    """The JSON Schema ``value`` is or holds.

    Args:
        value: a schema (dict or bool), a wrapper document (see :func:`unwrap`), a pydantic
            model class or a ``pydantic.TypeAdapter``.

    Returns:
        The schema, a dict or a bool.

    Raises:
        SchemaError: ``value`` is JSON but holds no schema (a list, a number, a string).
        TypeError: ``value`` is neither JSON nor a pydantic type.

    Example:
        >>> schema_from({"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}})
        {'type': 'object'}
    """
    if isinstance(value, dict):
        return unwrap(value)
    if isinstance(value, bool):
        return value
    got = pydantic_schema(value)
    if got is not None:
        return got
    if value is None or isinstance(value, (list, str, int, float)):
        raise SchemaError(f"a schema must be an object or a boolean, got {_json_type(value)}")
    raise TypeError(f"expected {EXPECTED}; got {type(value).__name__}")


def unwrap(doc: dict[str, Any]) -> JsonValue:
    """The schema a wrapper document holds, or ``doc`` itself when it is no wrapper.

    Wrappers: a MaskBench case ``{"schema": ..., "tests": [...]}``; an OpenAI tool
    ``{"type": "function", "function": {"name": ..., "parameters": ...}}`` (or the flat
    form with ``name`` and ``parameters`` beside ``type``); an Anthropic tool
    ``{"name": ..., "input_schema": ...}``; an OpenAI ``response_format``
    ``{"type": "json_schema", "json_schema": {"name": ..., "schema": ...}}``. None of
    these is a JSON Schema itself (``function`` and ``json_schema`` are no types).

    Raises:
        SchemaError: the wrapper holds something else than a schema where the schema goes.
    """
    found = _wrapped(doc)
    if found is None:
        return doc
    schema, where = found
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(f"a schema must be an object or a boolean, got {_json_type(schema)}", pointer=where)
    return schema


def _wrapped(doc: dict[str, Any]) -> tuple[Any, str] | None:
    kind = doc.get("type")
    if "schema" in doc and "tests" in doc:
        return doc["schema"], "/schema"
    if kind == "function" and isinstance(doc.get("function"), dict):
        fn = doc["function"]
        return fn.get("parameters", _NO_ARGUMENTS), ptr("/function", "parameters")
    if kind == "function" and isinstance(doc.get("name"), str):
        return doc.get("parameters", _NO_ARGUMENTS), "/parameters"
    if kind == "json_schema" and isinstance(doc.get("json_schema"), dict) and "schema" in doc["json_schema"]:
        return doc["json_schema"]["schema"], ptr("/json_schema", "schema")
    if isinstance(doc.get("name"), str) and "input_schema" in doc:
        return doc["input_schema"], "/input_schema"
    return None


def pydantic_schema(value: Any) -> JsonValue | None:
    """The JSON Schema of a pydantic model class or ``TypeAdapter``, else None.

    Raises:
        TypeError: a pydantic model instance (its class is what describes the outputs).
    """
    pydantic = sys.modules.get("pydantic")
    if pydantic is None:
        return None
    model = getattr(pydantic, "BaseModel", None)
    adapter = getattr(pydantic, "TypeAdapter", None)
    if model is not None and isinstance(value, type) and issubclass(value, model):
        cls: Any = value
        schema: JsonValue = cls.model_json_schema()
        return schema
    if adapter is not None and isinstance(value, adapter):
        schema = value.json_schema()
        return schema
    if model is not None and isinstance(value, model):
        raise TypeError(f"expected a pydantic model class, got an instance of {type(value).__name__}; "
                        f"pass the class {type(value).__name__} itself")
    return None


def canonical_schema(value: Any) -> str:
    """Canonical text of the schema ``value`` is or holds (key order kept: property order
    is part of a schema's meaning here).

    Raises:
        SchemaError: no schema in ``value``, or one nested too deeply to serialize.
        TypeError: as :func:`schema_from`, or a value JSON cannot hold (a set, a 65-bit int).
    """
    schema = schema_from(value)
    try:
        return orjson.dumps(schema).decode()
    except orjson.JSONEncodeError as e:
        check_nesting(schema)  # orjson refuses 255 levels: say where, as a SchemaError
        try:  # integers past 64 bits are JSON (a bignum bound, say), orjson cannot write them
            return json.dumps(schema, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError):
            raise TypeError(f"the schema holds a value JSON cannot represent: {e}") from e


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return type(value).__name__
