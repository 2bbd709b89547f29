"""JSON Schema (draft 2020-12, and draft 7's array forms) to Grammar IR, keyword by keyword.

Output follows the schema's property order; optional properties may be skipped. A keyword
that the grammar cannot enforce raises :class:`UnsupportedKeyword` naming it and its JSON
pointer, or, in lenient mode, is recorded in ``not_enforced`` and compiled without.
Recursive ``$ref`` is refused here (it needs the pushdown runtime).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import unquote

from maskc.compiler.errors import EmptyLanguage, RegexSyntaxError, SchemaError, UnsupportedKeyword
from maskc.compiler.frontends import formats, numeric
from maskc.compiler.frontends.json_text import (
    CANONICAL_ANY_CHAR,
    INTEGER,
    JSON_CHAR,
    NUMBER,
    Layout,
    canonical_chars,
)
from maskc.compiler.frontends.regex import regex_to_ir
from maskc.compiler.ir import NOTHING, Fields, Node, Product, alt, lit, rep, seq
from maskc.compiler.options import CompileOptions

__all__ = ["schema_to_ir", "SchemaCompiler", "ANNOTATIONS", "UNSUPPORTED"]

JsonValue = Any

ANNOTATIONS = frozenset(
    {
        "$schema", "$id", "$comment", "$anchor", "$vocabulary", "$defs", "definitions",
        "title", "description", "default", "examples", "example", "deprecated", "readOnly",
        "writeOnly", "contentEncoding", "contentMediaType", "contentSchema", "nullable",
        "discriminator", "xml", "externalDocs", "$dynamicAnchor",
    }
)
# Validation keywords the grammar does not enforce (yet): an error, or not_enforced.
UNSUPPORTED = frozenset(
    {
        "multipleOf", "uniqueItems", "not", "if", "then", "else", "dependentRequired",
        "dependentSchemas", "dependencies", "contains", "minContains", "maxContains",
        "propertyNames", "unevaluatedProperties", "unevaluatedItems",
        "minProperties", "maxProperties", "$dynamicRef", "$recursiveRef",
    }
)
_RECURSIVE_HINT = "recursion needs the pushdown runtime (not in this version); bound the depth by inlining the definition a fixed number of times"
_TYPES = ("null", "boolean", "object", "array", "string", "number", "integer")
_STRING_KW = {"minLength", "maxLength", "pattern", "format"}
_NUMBER_KW = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
_OBJECT_KW = {"properties", "required", "additionalProperties", "patternProperties"}
_ARRAY_KW = {"items", "prefixItems", "minItems", "maxItems", "additionalItems"}
_INT_FORMATS = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1), "uint8": (0, 2**8 - 1), "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1), "uint64": (0, 2**64 - 1),
}


def _ptr(base: str, *parts: str | int) -> str:
    out = base
    for p in parts:
        out += "/" + str(p).replace("~", "~0").replace("/", "~1")
    return out


def dumps_layout(value: JsonValue, layout: Layout) -> bytes:
    """``value`` as JSON text in the layout's whitespace policy (flexible: compact)."""
    ws = layout.ws
    if ws.mode == "pretty" and isinstance(value, (dict, list)) and value:
        text = json.dumps(value, indent=ws.n, ensure_ascii=False)
        pad = "\n" + " " * (ws.n * layout.depth)
        return text.replace("\n", pad).encode()
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


class SchemaCompiler:
    """Compiles one root schema; ``not_enforced`` collects what lenient mode dropped."""

    def __init__(self, root: JsonValue, options: CompileOptions) -> None:
        if not isinstance(root, (dict, bool)):
            raise SchemaError(f"a schema must be an object or a boolean, got {type(root).__name__}")
        self.root = root
        self.options = options
        self.not_enforced: list[dict[str, str]] = []
        self._ref_stack: list[str] = []

    # -- helpers -------------------------------------------------------------------------

    def unsupported(self, keyword: str, pointer: str, detail: str = "") -> None:
        if not self.options.lenient:
            raise UnsupportedKeyword(keyword, pointer=pointer, detail=detail)
        entry = {"keyword": keyword, "pointer": pointer}
        if detail:
            entry["detail"] = detail
        if entry not in self.not_enforced:
            self.not_enforced.append(entry)

    def resolve(self, ref: str, pointer: str) -> tuple[JsonValue, str]:
        if not isinstance(ref, str):
            raise SchemaError("$ref must be a string", pointer=pointer)
        if not ref.startswith("#"):
            raise UnsupportedKeyword("$ref", pointer=pointer, detail=f"only local references (#/...) are supported, got {ref!r}")
        target: JsonValue = self.root
        frag = unquote(ref[1:])
        if frag and not frag.startswith("/"):
            raise UnsupportedKeyword("$ref", pointer=pointer, detail=f"anchors are not supported: {ref!r}")
        for raw in frag.split("/")[1:] if frag else []:
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                raise SchemaError(f"$ref {ref!r} points nowhere", pointer=pointer)
        return target, frag or ""

    def deref(self, schema: JsonValue, pointer: str) -> tuple[JsonValue, str]:
        """Follow a schema made only of ``$ref`` (and annotations) to its target."""
        seen = 0
        while isinstance(schema, dict) and "$ref" in schema and set(schema) - ANNOTATIONS == {"$ref"}:
            here = pointer
            schema, pointer = self.resolve(schema["$ref"], pointer)
            if pointer in self._ref_stack:
                raise UnsupportedKeyword("$ref", pointer=here, detail="recursive schemas are not supported yet", hint=_RECURSIVE_HINT)
            seen += 1
            if seen > 64:
                raise SchemaError("$ref chain too long or cyclic", pointer=pointer)
        return schema, pointer

    # -- entry ---------------------------------------------------------------------------

    def compile(self) -> Node:
        node = self.value(self.root, "", 0)
        if node == NOTHING:
            raise EmptyLanguage("the schema admits no value")
        return node

    def value(self, schema: JsonValue, pointer: str, depth: int) -> Node:
        if schema is True or schema == {}:
            return self.any_value(depth, self.options.any_depth)
        if schema is False:
            return NOTHING
        if not isinstance(schema, dict):
            raise SchemaError(f"a schema must be an object or a boolean, got {type(schema).__name__}", pointer=pointer)
        if "$ref" in schema:
            ref = schema["$ref"]
            target, tptr = self.resolve(ref, pointer)
            if tptr in self._ref_stack:
                raise UnsupportedKeyword("$ref", pointer=pointer, detail="recursive schemas are not supported yet", hint=_RECURSIVE_HINT)
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            self._ref_stack.append(tptr)
            try:
                if set(rest) - ANNOTATIONS:
                    return self.value({"allOf": [target, rest]}, pointer, depth)
                return self.value(target, tptr or "#", depth)
            finally:
                self._ref_stack.pop()
        if "not" in schema:
            schema = self.simplify_not(schema, pointer)
            if schema is False:
                return NOTHING
        for kw in schema:
            if kw in UNSUPPORTED:
                if kw in ("minProperties",) and schema[kw] == 0:
                    continue
                self.unsupported(kw, _ptr(pointer, kw))
        if "allOf" in schema:
            return self.value(self.merge_allof(schema, pointer), pointer, depth)
        for kw in ("anyOf", "oneOf"):
            if kw in schema:
                return self.union(schema, kw, pointer, depth)
        if "const" in schema:
            return self.literals([schema["const"]], schema, pointer, depth)
        if "enum" in schema:
            if not isinstance(schema["enum"], list):
                raise SchemaError("enum must be an array", pointer=_ptr(pointer, "enum"))
            return self.literals(schema["enum"], schema, pointer, depth)
        types = self.types_of(schema, pointer)
        return alt(*(self.typed(t, schema, pointer, depth) for t in types))

    def simplify_not(self, schema: dict[str, JsonValue], pointer: str) -> JsonValue:
        """Rewrite the ``not`` forms the grammar can express exactly; leave the rest."""
        inner, iptr = self.deref(schema["not"], _ptr(pointer, "not"))
        rest = {k: v for k, v in schema.items() if k != "not"}
        if inner is True or inner == {}:
            return False  # not-anything: no value
        if inner is False:
            return rest
        if isinstance(inner, dict) and set(inner) - ANNOTATIONS == {"type"}:
            banned = inner["type"]
            banned_set = {banned} if isinstance(banned, str) else set(banned) if isinstance(banned, list) else None
            if banned_set is None or not banned_set <= set(_TYPES):
                raise SchemaError(f"bad type {banned!r}", pointer=_ptr(iptr, "type"))
            if "number" in banned_set:
                banned_set.add("integer")
            keep = [t for t in self.types_of(rest, pointer) if t not in banned_set]
            if "integer" in banned_set and "number" in keep:
                return schema  # "a number that is not an integer": not expressible here
            return {**rest, "type": keep} if keep else False
        return schema

    def types_of(self, schema: dict[str, JsonValue], pointer: str) -> list[str]:
        t = schema.get("type")
        if t is None:
            keys = set(schema)
            inferred = [
                name
                for name, kws in (("object", _OBJECT_KW), ("array", _ARRAY_KW), ("string", _STRING_KW), ("number", _NUMBER_KW))
                if keys & kws
            ]
            return inferred or list(_TYPES[:-1])
        types = [t] if isinstance(t, str) else t
        if not isinstance(types, list) or not all(isinstance(x, str) and x in _TYPES for x in types):
            raise SchemaError(f"bad type {t!r}", pointer=_ptr(pointer, "type"))
        if "number" in types and "integer" in types:
            types = [x for x in types if x != "integer"]
        return list(dict.fromkeys(types))

    # -- combinators ---------------------------------------------------------------------

    def merge_allof(self, schema: dict[str, JsonValue], pointer: str) -> dict[str, JsonValue]:
        parts = schema["allOf"]
        if not isinstance(parts, list) or not parts:
            raise SchemaError("allOf must be a non-empty array", pointer=_ptr(pointer, "allOf"))
        merged: dict[str, JsonValue] = {k: v for k, v in schema.items() if k != "allOf"}
        for i, part in enumerate(parts):
            sub, sptr = self.deref(part, _ptr(pointer, "allOf", i))
            if sub is True:
                continue
            if sub is False:
                return {"not": {}} if self.options.lenient else {"enum": []}
            if not isinstance(sub, dict):
                raise SchemaError("allOf items must be schemas", pointer=sptr)
            if "allOf" in sub:
                sub = self.merge_allof(sub, sptr)
            merged = self.merge_two(merged, sub, sptr)
        return merged

    def merge_two(self, a: dict[str, JsonValue], b: dict[str, JsonValue], pointer: str) -> dict[str, JsonValue]:
        out = dict(a)
        for k, v in b.items():
            if k not in out or k in ANNOTATIONS:
                out.setdefault(k, v)
                continue
            cur = out[k]
            if cur == v:
                continue
            if k == "properties":
                props = dict(cur)
                for name, ps in v.items():
                    props[name] = {"allOf": [props[name], ps]} if name in props else ps
                out[k] = props
            elif k == "required":
                out[k] = list(dict.fromkeys([*cur, *v]))
            elif k == "type":
                ta = {cur} if isinstance(cur, str) else set(cur)
                tb = {v} if isinstance(v, str) else set(v)
                both = ta & tb
                if "integer" in ta and "number" in tb or "number" in ta and "integer" in tb:
                    both.add("integer")
                out[k] = sorted(both) if both else []
            elif k in ("minimum", "minLength", "minItems", "exclusiveMinimum"):
                out[k] = max(cur, v)
            elif k in ("maximum", "maxLength", "maxItems", "exclusiveMaximum"):
                out[k] = min(cur, v)
            elif k == "additionalProperties" and (cur is False or v is False):
                out[k] = False
            elif k in ("anyOf", "oneOf"):
                out["allOf"] = [{k: cur}, {k: v}]
                self.unsupported("allOf", pointer, f"two '{k}' lists in one allOf")
            else:
                self.unsupported("allOf", pointer, f"conflicting '{k}' in allOf")
        return out

    def union(self, schema: dict[str, JsonValue], kw: str, pointer: str, depth: int) -> Node:
        branches = schema[kw]
        if not isinstance(branches, list) or not branches:
            raise SchemaError(f"{kw} must be a non-empty array", pointer=_ptr(pointer, kw))
        base = {k: v for k, v in schema.items() if k != kw}
        structural = set(base) - ANNOTATIONS
        nodes = []
        for i, br in enumerate(branches):
            bptr = _ptr(pointer, kw, i)
            if structural:
                br, _ = self.deref(br, bptr)
                sub = {"allOf": [base, br]} if isinstance(br, dict) else (base if br is True else False)
            else:
                sub = br
            nodes.append(self.value(sub, bptr, depth))
        if kw == "oneOf" and len(nodes) > 1:
            # Exactly one branch must match: remove strings that two branches share.
            overlaps = [Product(x, y, "and") for i, x in enumerate(nodes) for y in nodes[i + 1 :]]
            return Product(alt(*nodes), alt(*overlaps), "minus")
        return alt(*nodes)

    def literals(self, values: list[JsonValue], schema: dict[str, JsonValue], pointer: str, depth: int) -> Node:
        layout = Layout(self.options.whitespace, depth)
        siblings = {k: v for k, v in schema.items() if k not in ("enum", "const")}
        active = set(siblings) - ANNOTATIONS
        check: Callable[[JsonValue], bool] | None = None
        if active == {"type"}:  # the common case, without building a validator
            types = self.types_of(siblings, pointer)
            check = lambda v: any(_is_type(v, t) for t in types)  # noqa: E731
        elif active:
            check = self.value_checker(siblings, pointer)
        out = []
        for v in values:
            # every sibling keyword applies to the listed values too (type, maxLength, ...)
            if check is not None and not check(v):
                continue
            out.append(lit(dumps_layout(v, layout)))
            if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
                out.append(lit(dumps_layout(int(v), layout)))  # JSON Schema: 2.0 == 2
        return alt(*out)  # NOTHING when no listed value passes the sibling keywords

    def value_checker(self, schema: dict[str, JsonValue], pointer: str) -> Callable[[JsonValue], bool]:
        """A validator for ``schema`` (with the root's definitions in reach) as a predicate."""
        import jsonschema
        import referencing
        import referencing.jsonschema

        root = self.root if isinstance(self.root, dict) else {}
        try:
            cls = jsonschema.validators.validator_for(root, default=jsonschema.Draft202012Validator)
            spec = referencing.jsonschema.specification_with(
                cls.META_SCHEMA.get("$schema", "https://json-schema.org/draft/2020-12/schema")
            )
            registry: referencing.Registry[Any] = referencing.Registry().with_resource("", spec.create_resource(root))
            validator = cls(schema, registry=registry, format_checker=cls.FORMAT_CHECKER)
        except Exception as e:  # a schema jsonschema cannot load
            raise UnsupportedKeyword("enum", pointer=pointer, detail=f"cannot check the listed values ({e})") from e

        def check(value: JsonValue) -> bool:
            try:
                return bool(validator.is_valid(value))
            except Exception as e:  # e.g. an unresolvable reference inside the siblings
                raise UnsupportedKeyword("enum", pointer=pointer, detail=f"cannot check the listed values ({e})") from e

        return check

    # -- types ---------------------------------------------------------------------------

    def typed(self, t: str, schema: dict[str, JsonValue], pointer: str, depth: int) -> Node:
        if t == "null":
            return lit("null")
        if t == "boolean":
            return alt(lit("true"), lit("false"))
        if t == "string":
            return self.string(schema, pointer)
        if t in ("integer", "number"):
            return self.number(t, schema, pointer)
        if t == "object":
            return self.object(schema, pointer, depth)
        return self.array(schema, pointer, depth)

    def string(self, schema: dict[str, JsonValue], pointer: str) -> Node:
        lo = schema.get("minLength", 0)
        hi = schema.get("maxLength")
        for k, v in (("minLength", lo), ("maxLength", hi)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise SchemaError(f"{k} must be a non-negative integer", pointer=_ptr(pointer, k))
        if hi is not None and hi < lo:
            raise EmptyLanguage(f"minLength {lo} > maxLength {hi} (at {pointer or '/'})")
        constraints: list[Node] = []
        fmt = schema.get("format")
        if fmt is not None:
            rx = formats.format_regex(fmt) if isinstance(fmt, str) else None
            if rx is None:
                self.unsupported("format", _ptr(pointer, "format"), f"unknown format {fmt!r}")
            else:
                constraints.append(regex_to_ir(rx, canonical_chars))
        pat = schema.get("pattern")
        if pat is not None:
            if not isinstance(pat, str):
                raise SchemaError("pattern must be a string", pointer=_ptr(pointer, "pattern"))
            try:
                constraints.append(regex_to_ir(pat, canonical_chars, search=True))
            except RegexSyntaxError as e:
                if "unsupported" in e.message or "not supported" in e.message:
                    self.unsupported("pattern", _ptr(pointer, "pattern"), e.message)
                else:
                    raise RegexSyntaxError(e.message, pattern=pat, offset=e.offset, pointer=_ptr(pointer, "pattern")) from e
        if not constraints:
            return seq(lit('"'), rep(JSON_CHAR, lo, hi), lit('"'))
        body = constraints[0]
        for c in constraints[1:]:
            body = Product(body, c, "and")
        span = _byte_span(body)
        if span is not None:
            # Each character takes 1..6 bytes in canonical spelling (escapes included):
            # a bound already implied by the byte lengths needs no product.
            min_b, max_b = span
            if hi is not None and max_b is not None and max_b <= hi:
                hi = None
            if lo > 0 and (min_b + 5) // 6 >= lo:
                lo = 0
        if lo > 0 or hi is not None:
            body = Product(body, rep(CANONICAL_ANY_CHAR, lo, hi), "and")
        return seq(lit('"'), body, lit('"'))

    def number(self, t: str, schema: dict[str, JsonValue], pointer: str) -> Node:
        bounds: dict[str, Decimal] = {}
        for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            v = schema.get(k)
            if v is None:
                continue
            if isinstance(v, bool) and k.startswith("exclusive"):
                continue  # draft 4 booleans are read below
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise SchemaError(f"{k} must be a number", pointer=_ptr(pointer, k))
            try:
                bounds[k] = Decimal(str(v)) if isinstance(v, float) else Decimal(v)
            except InvalidOperation:
                raise SchemaError(f"{k} is not a finite number", pointer=_ptr(pointer, k)) from None
        # draft 4: exclusiveMinimum: true turns minimum exclusive
        if schema.get("exclusiveMinimum") is True and "minimum" in bounds:
            bounds["exclusiveMinimum"] = bounds.pop("minimum")
        if schema.get("exclusiveMaximum") is True and "maximum" in bounds:
            bounds["exclusiveMaximum"] = bounds.pop("maximum")
        lo, lo_ex = _tighter_low(bounds.get("minimum"), bounds.get("exclusiveMinimum"))
        hi, hi_ex = _tighter_high(bounds.get("maximum"), bounds.get("exclusiveMaximum"))
        fmt = schema.get("format")
        if t == "integer" and isinstance(fmt, str) and fmt in _INT_FORMATS:
            flo, fhi = _INT_FORMATS[fmt]
            if lo is None or lo < flo:
                lo, lo_ex = Decimal(flo), False
            if hi is None or hi > fhi:
                hi, hi_ex = Decimal(fhi), False
        if t == "integer":
            ilo = None if lo is None else _int_low(lo, lo_ex)
            ihi = None if hi is None else _int_high(hi, hi_ex)
            if ilo is None and ihi is None:
                return INTEGER
            if ilo is not None and ihi is not None and ilo > ihi:
                raise EmptyLanguage(f"no integer satisfies the bounds (at {pointer or '/'})")
            return regex_to_ir(numeric.integer_regex(ilo, ihi))
        if lo is None and hi is None:
            return NUMBER
        if lo is not None and hi is not None and (lo > hi or (lo == hi and (lo_ex or hi_ex))):
            raise EmptyLanguage(f"no number satisfies the bounds (at {pointer or '/'})")
        return regex_to_ir(
            numeric.number_regex(lo, hi, exclusive_minimum=lo_ex, exclusive_maximum=hi_ex)
        )

    def object(self, schema: dict[str, JsonValue], pointer: str, depth: int) -> Node:
        props = schema.get("properties", {})
        if not isinstance(props, dict):
            raise SchemaError("properties must be an object", pointer=_ptr(pointer, "properties"))
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise SchemaError("required must be an array of strings", pointer=_ptr(pointer, "required"))
        layout = Layout(self.options.whitespace, depth)
        pattern_props = schema.get("patternProperties", {})
        if not isinstance(pattern_props, dict):
            raise SchemaError("patternProperties must be an object", pointer=_ptr(pointer, "patternProperties"))
        declared = "properties" in schema or bool(pattern_props)
        addl = schema.get("additionalProperties", False if declared else True)
        # key content languages of the patterns (JSON Schema: a pattern matches anywhere)
        patterns: list[tuple[str, Node, Any]] = []
        for pat, psub in pattern_props.items():
            pptr = _ptr(pointer, "patternProperties", pat)
            try:
                content = regex_to_ir(pat, canonical_chars, search=True)
            except RegexSyntaxError as e:
                if "unsupported" in e.message or "not supported" in e.message:
                    self.unsupported("patternProperties", pptr, e.message)
                    continue
                raise RegexSyntaxError(e.message, pattern=pat, offset=e.offset, pointer=pptr) from e
            patterns.append((pat, content, psub))
        items: list[tuple[Node, bool]] = []
        names = list(props)
        for name in required:
            if name not in props:
                names.append(name)
        for name in names:
            key_bytes = dumps_layout(name, layout)
            matching = [psub for pat, content, psub in patterns if _content_matches(content, key_bytes)]
            if name in props:
                sub: JsonValue = props[name]
                if matching:
                    sub = {"allOf": [sub, *matching]}
            elif matching:
                sub = {"allOf": matching} if len(matching) > 1 else matching[0]
            elif addl is False:
                return NOTHING  # a required property that no schema admits
            else:
                sub = addl
            key = lit(key_bytes)
            vnode = self.value(sub, _ptr(pointer, "properties", name), depth + 1)
            req = name in required
            if vnode == NOTHING:
                if req:
                    return NOTHING
                continue
            items.append((seq(key, layout.colon, vnode), req))
        rest_parts: list[Node] = []
        listed = alt(*(lit(dumps_layout(n, layout)) for n in names)) if names else NOTHING
        pattern_keys = [seq(lit('"'), content, lit('"')) for _, content, _ in patterns]
        for i, (pat, _, psub) in enumerate(patterns):
            vnode = self.value(psub, _ptr(pointer, "patternProperties", pat), depth + 1)
            if vnode == NOTHING:
                continue
            # keys of this pattern only: a key two patterns match would need both schemas
            # at once, so it is not generated (a sound restriction)
            others = alt(listed, *(k for j, k in enumerate(pattern_keys) if j != i))
            key = pattern_keys[i] if others == NOTHING else Product(pattern_keys[i], others, "minus")
            rest_parts.append(seq(key, layout.colon, vnode))
        if addl is not False:
            vnode = self.value(addl, _ptr(pointer, "additionalProperties"), depth + 1)
            if vnode != NOTHING:
                any_key = seq(lit('"'), rep(CANONICAL_ANY_CHAR, 0, None), lit('"'))
                excluded = alt(listed, *pattern_keys)
                if excluded != NOTHING:
                    any_key = Product(any_key, excluded, "minus")
                rest_parts.append(seq(any_key, layout.colon, vnode))
        rest: Node | None = alt(*rest_parts) if rest_parts else None
        has_required = any(r for _, r in items)
        return seq(
            lit("{"),
            Fields(
                tuple(items),
                layout.first,
                layout.sep,
                layout.close("}"),
                None if has_required else layout.close_empty("}"),
                rest,
            ),
        )

    def array(self, schema: dict[str, JsonValue], pointer: str, depth: int) -> Node:
        layout = Layout(self.options.whitespace, depth)
        lo = schema.get("minItems", 0)
        hi = schema.get("maxItems")
        for k, v in (("minItems", lo), ("maxItems", hi)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise SchemaError(f"{k} must be a non-negative integer", pointer=_ptr(pointer, k))
        prefix = schema.get("prefixItems")
        items = schema.get("items", True)
        if isinstance(items, list):  # draft 7 tuple form
            prefix, items = items, schema.get("additionalItems", True)
        prefix = prefix or []
        nodes = [self.value(p, _ptr(pointer, "prefixItems", i), depth + 1) for i, p in enumerate(prefix)]
        tail = self.value(items, _ptr(pointer, "items"), depth + 1)
        counted = (hi if hi is not None else lo) - len(nodes)
        if counted > 1 and tail != NOTHING:
            # A DFA counts items by copying the item's automaton once per position.
            size = _dfa_size(tail, self.options.limits.max_states)
            if size * counted > self.options.limits.max_states // 4:
                kw = "maxItems" if hi is not None else "minItems"
                self.unsupported(
                    kw, _ptr(pointer, kw),
                    f"counting {counted} items of ~{size} states each needs ~{size * counted} states",
                )
                if hi is not None:
                    hi = None
                else:
                    lo = min(lo, len(nodes) + 1)
        # Sequences of length n in [lo, hi]: positions < len(prefix) use their own schema.
        max_len = hi
        if tail == NOTHING:
            max_len = len(nodes) if hi is None else min(hi, len(nodes))
        if max_len is not None and lo > max_len:
            raise EmptyLanguage(f"minItems {lo} cannot be met (at {pointer or '/'})")
        options: list[Node] = []
        if lo == 0:
            options.append(layout.close_empty("]"))
        close = layout.close("]")

        def chain(i: int) -> Node:
            """Item i (0-based) and everything after it, the closing bracket included."""
            if i >= len(nodes):
                need = max(0, lo - i - 1)
                more = None if max_len is None else max_len - i - 1
                if more is not None and more < need:
                    return NOTHING
                return seq(tail, rep(seq(layout.sep, tail), need, more), close)
            if nodes[i] == NOTHING:
                return NOTHING
            opts: list[Node] = []
            if i + 1 >= lo:
                opts.append(close)
            if max_len is None or i + 1 < max_len:
                nxt = chain(i + 1)
                if nxt != NOTHING:
                    opts.append(seq(layout.sep, nxt))
            return seq(nodes[i], alt(*opts))

        if max_len is None or max_len > 0:
            first = chain(0)
            if first != NOTHING:
                options.append(seq(layout.first, first))
        return seq(lit("["), alt(*options))

    def any_value(self, depth: int, budget: int) -> Node:
        """Any JSON value nested at most ``budget`` containers deep (a sound restriction)."""
        layout = Layout(self.options.whitespace, depth)
        scalars = [lit("null"), lit("true"), lit("false"), NUMBER, seq(lit('"'), rep(JSON_CHAR, 0, None), lit('"'))]
        if budget <= 0:
            return alt(*scalars)
        inner = self.any_value(depth + 1, budget - 1)
        key = seq(lit('"'), rep(CANONICAL_ANY_CHAR, 0, None), lit('"'))
        arr = seq(lit("["), alt(layout.close_empty("]"), seq(layout.first, inner, rep(seq(layout.sep, inner), 0, None), layout.close("]"))))
        obj = seq(
            lit("{"),
            Fields((), layout.first, layout.sep, layout.close("}"), layout.close_empty("}"), seq(key, layout.colon, inner)),
        )
        return alt(*scalars, arr, obj)


def _content_matches(content: Node, key_json: bytes) -> bool:
    """Whether a property name (as canonical JSON, quotes included) is in ``content``'s language."""
    from maskc.compiler.dfa import determinize
    from maskc.compiler.nfa import lower

    return determinize(lower(content)).accepts(key_json[1:-1])


def _byte_span(node: Node) -> tuple[int, int | None] | None:
    """Shortest and longest byte length of ``node``'s strings (longest None: unbounded)."""
    from maskc.compiler.ir import Alt, ByteSet, Fields, Repeat, Seq

    if isinstance(node, ByteSet):
        return 1, 1
    if isinstance(node, Seq):
        lo, hi_s = 0, 0
        hi: int | None = hi_s
        for it in node.items:
            sp = _byte_span(it)
            if sp is None:
                return None
            lo += sp[0]
            hi = None if hi is None or sp[1] is None else hi + sp[1]
        return lo, hi
    if isinstance(node, Alt):
        spans = [_byte_span(it) for it in node.items]
        if not spans or any(sp is None for sp in spans):
            return None
        los = [sp[0] for sp in spans if sp is not None]
        his = [sp[1] for sp in spans if sp is not None]
        return min(los), (None if any(h is None for h in his) else max(h for h in his if h is not None))
    if isinstance(node, Repeat):
        sp = _byte_span(node.item)
        if sp is None:
            return None
        hi_r = None if node.max is None or sp[1] is None else sp[1] * node.max
        return sp[0] * node.min, hi_r
    if isinstance(node, Fields):
        return None
    if isinstance(node, Product):
        a, b = _byte_span(node.a), _byte_span(node.b)
        if node.op == "minus" or a is None:
            return a
        if b is None:
            return a
        hi2 = a[1] if b[1] is None else (b[1] if a[1] is None else min(a[1], b[1]))
        return max(a[0], b[0]), hi2
    return None


def _dfa_size(node: Node, limit: int) -> int:
    """A cheap estimate of the DFA size of ``node`` (half its NFA states; the limit if larger)."""
    from maskc.compiler.errors import LimitExceeded
    from maskc.compiler.nfa import lower

    try:
        return lower(node, max_states=limit * 4).size // 2
    except LimitExceeded:
        return limit


def _is_type(v: JsonValue, t: str) -> bool:
    if t == "null":
        return v is None
    if t == "boolean":
        return isinstance(v, bool)
    if t == "string":
        return isinstance(v, str)
    if t == "integer":
        return (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer())
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if t == "object":
        return isinstance(v, dict)
    return isinstance(v, list)


def _tighter_low(inc: Decimal | None, exc: Decimal | None) -> tuple[Decimal | None, bool]:
    if exc is not None and (inc is None or exc >= inc):
        return exc, True
    return inc, False


def _tighter_high(inc: Decimal | None, exc: Decimal | None) -> tuple[Decimal | None, bool]:
    if exc is not None and (inc is None or exc <= inc):
        return exc, True
    return inc, False


def _int_low(v: Decimal, exclusive: bool) -> int:
    f = int(v.to_integral_value(rounding="ROUND_FLOOR"))
    return f + 1 if (exclusive or f < v) else f


def _int_high(v: Decimal, exclusive: bool) -> int:
    c = int(v.to_integral_value(rounding="ROUND_CEILING"))
    return c - 1 if (exclusive or c > v) else c


def schema_to_ir(schema: JsonValue, options: CompileOptions) -> tuple[Node, list[dict[str, str]]]:
    """Compile a JSON Schema into IR.

    Returns:
        The grammar and the list of keywords compiled without enforcement (lenient mode).

    Raises:
        SchemaError: the schema is malformed (``pointer`` says where).
        UnsupportedKeyword: a keyword cannot be enforced and ``lenient`` is off.
        EmptyLanguage: no value satisfies the schema.
    """
    sc = SchemaCompiler(schema, options)
    try:
        return sc.compile(), sc.not_enforced
    except RecursionError:
        raise SchemaError(
            "the schema nests too deeply (or its allOf/$ref chains loop)",
            hint="recursive schemas need the pushdown runtime, which is not supported yet",
        ) from None
