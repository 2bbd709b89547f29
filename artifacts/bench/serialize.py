"""Labelled instances as a grammar emits them: compact JSON, object keys in the schema's order.

:func:`serialize` turns a JSON value (a MaskBench instance, a test-suite instance) into the
bytes a compact-whitespace grammar of its schema produces, so a valid instance can be fed
token by token to any engine compiled with compact separators. Key order follows the
schema through local ``$ref``, ``allOf`` merges and the ``anyOf``/``oneOf`` branch the
instance matches.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, unquote

import jsonschema
import referencing
import referencing.exceptions
import referencing.jsonschema

__all__ = ["serialize"]

_ROOT_URI = "urn:maskbench:root"


def _pointer(base: str, *parts: str | int) -> str:
    for p in parts:
        base += "/" + str(p).replace("~", "~0").replace("/", "~1")
    return base


def _lookup(root: Any, pointer: str) -> Any:
    node = root
    for raw in pointer.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, list):
            node = node[int(part)]
        elif isinstance(node, dict):
            node = node[part]
        else:
            raise KeyError(pointer)
    return node


class _Walker:
    """Walks an instance and a schema together and reorders object keys like the grammar."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self._validators: dict[str, Any] = {}
        cls = jsonschema.validators.validator_for(root, default=jsonschema.Draft202012Validator) \
            if isinstance(root, dict) else jsonschema.Draft202012Validator
        self._cls = cls
        try:
            spec = referencing.jsonschema.specification_with(
                root.get("$schema", "") if isinstance(root, dict) else "",
                default=referencing.jsonschema.DRAFT202012,
            )
        except referencing.exceptions.CannotDetermineSpecification:
            spec = referencing.jsonschema.DRAFT202012
        self._registry = referencing.Registry().with_resource(_ROOT_URI, spec.create_resource(root))

    # -- schemas ------------------------------------------------------------------------

    def resolve(self, ref: Any) -> tuple[Any, str] | None:
        if not isinstance(ref, str) or not ref.startswith("#"):
            return None
        pointer = ref[1:]
        if pointer and not pointer.startswith("/"):
            return None
        try:
            return _lookup(self.root, unquote(pointer)), unquote(pointer)
        except (KeyError, IndexError, ValueError):
            return None

    def matches(self, instance: Any, pointer: str) -> bool:
        """Whether ``instance`` is valid against the subschema at ``pointer`` of the root."""
        v = self._validators.get(pointer)
        if v is None:
            frag = "/".join(quote(seg, safe="~!$&'()*+,;=:@") for seg in pointer.split("/"))
            v = self._cls({"$ref": f"{_ROOT_URI}#{frag}"}, registry=self._registry)
            self._validators[pointer] = v
        try:
            return bool(v.is_valid(instance))
        except (referencing.exceptions.Unresolvable, jsonschema.exceptions.SchemaError,
                jsonschema.exceptions.UnknownType, RecursionError, ValueError, TypeError):
            return False

    def flatten(self, instance: Any, schemas: Sequence[tuple[Any, str]], depth: int = 0) -> list[dict[str, Any]]:
        """The conjunction of object schemas that apply, in the order the compiler merges them.

        ``$ref`` with siblings: target, then the siblings; ``allOf``: the schema, then its
        parts; ``anyOf``/``oneOf``: the schema, then the first branch the instance matches.
        """
        out: list[dict[str, Any]] = []
        if depth > 64:
            return out
        for schema, ptr in schemas:
            if not isinstance(schema, dict):
                continue
            if "$ref" in schema:
                target = self.resolve(schema["$ref"])
                rest = {k: v for k, v in schema.items() if k != "$ref"}
                if target is not None:
                    out += self.flatten(instance, [target], depth + 1)
                out += self.flatten(instance, [(rest, ptr)], depth + 1)
                continue
            if "allOf" in schema and isinstance(schema["allOf"], list):
                base = {k: v for k, v in schema.items() if k != "allOf"}
                parts = [(p, _pointer(ptr, "allOf", i)) for i, p in enumerate(schema["allOf"])]
                out += self.flatten(instance, [(base, ptr), *parts], depth + 1)
                continue
            kw = next((k for k in ("anyOf", "oneOf") if isinstance(schema.get(k), list) and schema[k]), None)
            if kw is not None:
                base = {k: v for k, v in schema.items() if k != kw}
                branches = [(b, _pointer(ptr, kw, i)) for i, b in enumerate(schema[kw])]
                chosen = next((b for b in branches if self.matches(instance, b[1])), branches[0])
                out += self.flatten(instance, [(base, ptr), chosen], depth + 1)
                continue
            out.append(schema | {"$$ptr": ptr})
            if isinstance(instance, dict):
                # a dependent schema whose trigger is present is one more conjunct
                for kw in ("dependentSchemas", "dependencies"):
                    table = schema.get(kw)
                    if isinstance(table, dict):
                        deps = [(d, _pointer(ptr, kw, t)) for t, d in table.items() if t in instance and isinstance(d, dict)]
                        out += [c | {"$$dep": True} for c in self.flatten(instance, deps, depth + 1)]
        return out

    # -- values -------------------------------------------------------------------------

    def order(self, value: Any, schemas: Sequence[tuple[Any, str]]) -> Any:
        if not isinstance(value, (dict, list)):
            return value
        flat = self.flatten(value, schemas)
        for s in flat:
            # a listed value is emitted as listed: its own key order, its own number spellings
            listed = [s["const"]] if "const" in s else s["enum"] if isinstance(s.get("enum"), list) else []
            for v in listed:
                if _same(v, value):
                    return _Listed(v)
        if isinstance(value, dict):
            return self._object(value, flat)
        return self._array(value, flat)

    def _object(self, value: dict[str, Any], flat: list[dict[str, Any]]) -> dict[str, Any]:
        listed: list[str] = []
        for s in flat:
            props = s.get("properties")
            if isinstance(props, dict):
                listed += [k for k in props if k not in listed]
        for dependent in (False, True):
            # the required names of the object, then (below) the names its dependencies mention;
            # a dependent schema's required names come after both, as the compiler places them
            if dependent:
                for s in flat:
                    # in order of mention (trigger, then dependents)
                    for kw in ("dependentRequired", "dependentSchemas", "dependencies"):
                        table = s.get(kw)
                        if isinstance(table, dict):
                            for trigger, dep in table.items():
                                names = [trigger, *(dep if isinstance(dep, list) else ())]
                                listed += [k for k in names if isinstance(k, str) and k not in listed]
            for s in flat:
                req = s.get("required")
                if bool(s.get("$$dep")) is dependent and isinstance(req, list):
                    listed += [k for k in req if isinstance(k, str) and k not in listed]
        keys = [k for k in listed if k in value] + [k for k in value if k not in listed]
        out: dict[str, Any] = {}
        for k in keys:
            subs: list[tuple[Any, str]] = []
            for s in flat:
                props = s.get("properties")
                if isinstance(props, dict) and k in props:
                    subs.append((props[k], _pointer(s["$$ptr"], "properties", k)))
            if not subs:
                for s in flat:
                    pats = s.get("patternProperties")
                    if isinstance(pats, dict):
                        for pat, ps in pats.items():
                            try:
                                hit = re.search(pat, k) is not None
                            except re.error:
                                hit = False
                            if hit:
                                subs.append((ps, _pointer(s["$$ptr"], "patternProperties", pat)))
            if not subs:
                for s in flat:
                    if isinstance(s.get("additionalProperties"), dict):
                        subs.append((s["additionalProperties"], _pointer(s["$$ptr"], "additionalProperties")))
            out[k] = self.order(value[k], subs)
        return out

    def _array(self, value: list[Any], flat: list[dict[str, Any]]) -> list[Any]:
        out = []
        for i, item in enumerate(value):
            subs: list[tuple[Any, str]] = []
            for s in flat:
                ptr = s["$$ptr"]
                prefix, items, tail_kw = s.get("prefixItems"), s.get("items"), "items"
                if isinstance(items, list):  # draft 7 tuple form
                    prefix, items, tail_kw = items, s.get("additionalItems"), "additionalItems"
                    pre_kw = "items"
                else:
                    pre_kw = "prefixItems"
                if isinstance(prefix, list) and i < len(prefix):
                    subs.append((prefix[i], _pointer(ptr, pre_kw, i)))
                elif isinstance(items, dict):
                    subs.append((items, _pointer(ptr, tail_kw)))
            out.append(self.order(item, subs))
        return out


class _Listed:
    """A value spelled as the schema lists it (``json.dumps``, compact)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _same(x: Any, y: Any) -> bool:
    """JSON equality: numbers by value (``1 == 1.0``), booleans apart from numbers, objects
    whatever their key order."""
    if isinstance(x, bool) or isinstance(y, bool):
        return isinstance(x, bool) and isinstance(y, bool) and x == y
    if isinstance(x, (int, float)) and isinstance(y, (int, float)):
        return x == y
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    return type(x) is type(y) and x == y


def _static_root(schema: Any) -> Any:
    """``schema`` with its references rewritten as ``#<pointer>`` from the root, as the
    compiler reads them (``$id``-relative URIs, anchors, ``$dynamicRef``/``$recursiveRef``
    that reduce to a static target); ``schema`` itself when the compiler cannot read it."""
    from maskc.compiler.errors import MaskcError
    from maskc.compiler.frontends.json_schema import SchemaCompiler
    from maskc.compiler.options import CompileOptions

    try:
        return SchemaCompiler(schema, CompileOptions()).root
    except (MaskcError, TypeError, ValueError, KeyError, RecursionError):
        return schema


def serialize(instance: Any, schema: Any) -> bytes:
    """``instance`` as the grammar emits it: compact JSON, object keys in the schema's order.

    Keys listed in the applicable ``properties`` come first, in schema order (through local
    ``$ref`` — ``$dynamicRef``/``$recursiveRef`` too where the compiler reduces them to a
    static reference —, ``allOf`` merges and the first ``anyOf``/``oneOf`` branch the
    instance matches), then the required names the properties do not list, then the other
    keys in their original order. A value equal to an applicable ``const`` or ``enum``
    member is written as listed (its own key order and number spellings), as the grammar
    spells it.
    """
    walker = _Walker(schema)
    walker.root = _static_root(schema)
    ordered = walker.order(instance, [(walker.root, "")])
    return _dumps(ordered).encode("utf-8")


def _dumps(v: Any) -> str:
    """Compact JSON with maskc's canonical numbers: a float with an integral value as the
    integer (``1.0`` as ``1``), other floats in decimal notation (``1e-07`` as ``0.0000001``)."""
    if isinstance(v, _Listed):
        return json.dumps(v.value, separators=(",", ":"), ensure_ascii=False)
    if isinstance(v, float) and v == v and v not in (float("inf"), float("-inf")):
        if v.is_integer():
            return str(int(v))
        return format(Decimal(repr(v)), "f")
    if isinstance(v, list):
        return "[" + ",".join(_dumps(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + _dumps(x) for k, x in v.items()) + "}"
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)

