"""The values a schema rejects, for the forms whose complement a grammar can spell.

``maxContains`` must tell an item that fails ``contains`` from one that passes, so it needs
the complement of the ``contains`` schema. :func:`complement` gives a language of JSON
texts whose every value fails the schema (an under-approximation of the complement: it
may miss some spellings, never admit a value the schema accepts), or ``None`` when the
schema holds a keyword whose complement is not expressible here. Each keyword of the
schema is negated on its own and the results are joined: not (A and B) = not A or not B.
"""

from __future__ import annotations

from fractions import Fraction

from maskc.compiler.frontends.json_schema.base import ANNOTATIONS, TYPES, Base, JsonValue
from maskc.compiler.frontends.json_text import CANONICAL_ANY_CHAR, INTEGER
from maskc.compiler.ir import NOTHING, Node, Product, alt, byte_range, byte_set, lit, rep, seq

__all__ = ["complement", "string_spellings"]

_NEGATABLE = frozenset({
    "type", "const", "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "minLength", "maxLength", "minItems", "maxItems", "pattern",
})
_DIGIT = byte_range(0x30, 0x39)
# A number with a non-zero fractional digit and no exponent: never an integer value.
_NON_INTEGER = seq(INTEGER, lit("."), rep(_DIGIT, 0, None), byte_range(0x31, 0x39), rep(_DIGIT, 0, None))
_CANONICAL_STRING = seq(lit('"'), rep(CANONICAL_ANY_CHAR, 0, None), lit('"'))
_SHORT = {0x08: "b", 0x09: "t", 0x0A: "n", 0x0C: "f", 0x0D: "r", 0x22: '"', 0x5C: "\\", 0x2F: "/"}


def _hex_unit(code: int) -> Node:
    """``\\uXXXX`` for a UTF-16 code unit, hex letters in either case."""
    return seq(lit("\\u"), *(byte_set((d.lower() + d.upper()).encode()) if d.isalpha() else lit(d) for d in f"{code:04x}"))


def string_spellings(s: str) -> Node | None:
    """Every JSON spelling of the string ``s`` (raw or escaped, character by character);
    ``None`` for a string with a lone surrogate (no UTF-8 spelling)."""
    chars: list[Node] = []
    for ch in s:
        c = ord(ch)
        if 0xD800 <= c <= 0xDFFF:
            return None
        opts: list[Node] = []
        if c >= 0x20 and c not in (0x22, 0x5C):
            opts.append(lit(ch))
        if c in _SHORT:
            opts.append(lit("\\" + _SHORT[c]))
        if c <= 0xFFFF:
            opts.append(_hex_unit(c))
        else:
            v = c - 0x10000
            opts.append(seq(_hex_unit(0xD800 + (v >> 10)), _hex_unit(0xDC00 + (v & 0x3FF))))
        chars.append(alt(*opts))
    return seq(lit('"'), *chars, lit('"'))


def _is_number(v: JsonValue) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def complement(sc: Base, schema: JsonValue, pointer: str, depth: int,
               types: frozenset[str] = frozenset(TYPES)) -> Node | None:
    """JSON texts (at nesting ``depth``) whose values all fail ``schema``; ``None`` when a
    keyword of ``schema`` has no expressible complement.

    Every string of the result is a value ``schema`` rejects; the result may leave out
    some spellings of rejected values (a sound restriction of whatever uses it), and
    values of JSON types outside ``types`` (those the caller has no use for).
    """
    schema, pointer = sc.deref(schema, pointer)
    if schema is True or schema == {}:
        return NOTHING
    if schema is False:
        return alt(*(sc.value({"type": t}, pointer, depth) for t in TYPES[:-1] if t in types))
    if not isinstance(schema, dict) or set(schema) - ANNOTATIONS - _NEGATABLE:
        return None
    parts: list[Node] = []
    wanted = set(types) | ({"integer"} if "number" in types else set())

    def of(sub: dict[str, JsonValue]) -> None:
        if sub["type"] in wanted:
            parts.append(sc.value(sub, pointer, depth))

    def add(typ: str, node: Node) -> None:
        if typ in wanted:
            parts.append(node)

    if "type" in schema:
        t = schema["type"]
        named = {t} if isinstance(t, str) else set(t) if isinstance(t, list) else set()
        if not named or not named <= set(TYPES):
            return None
        for other in ("null", "boolean", "string", "object", "array"):
            if other not in named:
                of({"type": other})
        if "number" not in named:
            if "integer" in named:
                add("number", _NON_INTEGER)
            else:
                of({"type": "number"})
    for kw in ("const", "enum"):
        if kw not in schema:
            continue
        values = [schema[kw]] if kw == "const" else schema[kw]
        if not isinstance(values, list) or any(isinstance(v, (dict, list)) for v in values):
            return None
        present = {"null" if v is None else "boolean" if isinstance(v, bool) else "string" if isinstance(v, str)
                   else "number" for v in values}
        for other in ("null", "boolean", "string", "number", "object", "array"):
            if other not in present:
                of({"type": other})
        if "boolean" in present:
            for b, w in ((True, "true"), (False, "false")):
                if not any(v is b for v in values):
                    add("boolean", lit(w))
        if "string" in present:
            spelled = [string_spellings(v) for v in values if isinstance(v, str)]
            if any(x is None for x in spelled):
                return None
            banned = alt(*(x for x in spelled if x is not None))
            if "string" in wanted:
                parts.append(Product(sc.value({"type": "string"}, pointer, depth), banned, "minus"))
        if "number" in present:
            xs = sorted({Fraction(v) for v in values if _is_number(v)})
            bounds = [_plain(x) for x in xs]
            of({"type": "number", "exclusiveMaximum": bounds[0]})
            for below, above in zip(bounds, bounds[1:]):
                of({"type": "number", "exclusiveMinimum": below, "exclusiveMaximum": above})
            of({"type": "number", "exclusiveMinimum": bounds[-1]})
    for kw, flip in (("minimum", "exclusiveMaximum"), ("exclusiveMinimum", "maximum"),
                     ("maximum", "exclusiveMinimum"), ("exclusiveMaximum", "minimum")):
        if kw in schema:
            if not _is_number(schema[kw]):
                return None
            of({"type": "number", flip: schema[kw]})
    for typ, lo_kw, hi_kw in (("string", "minLength", "maxLength"), ("array", "minItems", "maxItems")):
        for kw in (lo_kw, hi_kw):
            if kw not in schema:
                continue
            n = schema[kw]
            if not _is_number(n) or n != int(n):
                return None
            if kw == hi_kw:
                of({"type": typ, lo_kw: int(n) + 1})
            elif n >= 1:
                of({"type": typ, hi_kw: int(n) - 1})
    if "pattern" in schema:
        # Pattern languages spell each matching string canonically, so canonical strings
        # outside it are exactly the non-matching strings (in canonical spelling).
        if "string" in wanted:
            matching = sc.value({"type": "string", "pattern": schema["pattern"]}, pointer, depth)
            parts.append(Product(_CANONICAL_STRING, matching, "minus"))
    return alt(*parts)


def _plain(x: Fraction) -> int | float:
    """A schema number for ``x`` (an ``int`` when whole, so no precision is lost there)."""
    return int(x) if x.denominator == 1 else float(x)
