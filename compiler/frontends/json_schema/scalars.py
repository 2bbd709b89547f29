"""Scalars: ``enum``/``const``, strings (``minLength``, ``maxLength``, ``pattern``,
``format``) and numbers (bounds, integer ``format``s).

Listed values obey their sibling keywords (checked with a validator), and are emitted in
the layout's spelling; string constraints meet by intersection (a product construction)
only when their byte lengths do not already imply them.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from maskc.compiler.errors import EmptyLanguage, RegexSyntaxError, SchemaError, UnsupportedKeyword, UnsupportedRegex
from maskc.compiler.frontends import formats, numeric
from maskc.compiler.frontends.json_schema.base import ANNOTATIONS, Base, JsonValue, dumps_layout, is_type
from maskc.compiler.frontends.json_schema.base import ptr as _ptr
from maskc.compiler.frontends.json_text import CANONICAL_ANY_CHAR, INTEGER, JSON_CHAR, NUMBER, Layout, canonical_chars
from maskc.compiler.frontends.regex import regex_to_ir
from maskc.compiler.ir import Alt, ByteSet, Fields, Node, Product, Repeat, Seq, alt, lit, rep, seq

__all__ = ["ScalarsMixin", "MAX_MULTIPLE_OF_STATES"]

MAX_MULTIPLE_OF_STATES = 4096
"""The largest ``multipleOf`` automaton built (about ``K * (fraction digits + 2)`` states
for ``multipleOf = K * 10**-digits``); a larger one is refused by name."""

_INT_FORMATS = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1), "uint8": (0, 2**8 - 1), "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1), "uint64": (0, 2**64 - 1),
}


class ScalarsMixin(Base):
    """``enum``/``const``, ``string``, ``number`` and ``integer``."""

    def literals(self, values: list[JsonValue], schema: dict[str, JsonValue], pointer: str, depth: int) -> Node:
        layout = Layout(self.options.whitespace, depth)
        siblings = {k: v for k, v in schema.items() if k not in ("enum", "const")}
        if "const" in schema and "enum" in schema:
            siblings["enum"] = schema["enum"]  # (the values are the const: the enum checks it too)
        active = set(siblings) - ANNOTATIONS
        check: Callable[[JsonValue], bool] | None = None
        if active == {"type"}:  # the common case, without building a validator
            types = self.types_of(siblings, pointer)
            check = lambda v: any(is_type(v, t) for t in types)  # noqa: E731
        elif active:
            check = self.value_checker(siblings, pointer)
        out = []
        for v in values:
            # every sibling keyword applies to the listed values too (type, maxLength, ...)
            if check is not None and not check(v):
                continue
            out.append(lit(dumps_layout(v, layout)))
            whole = _whole_numbers(v)
            if whole is not v:
                out.append(lit(dumps_layout(whole, layout)))  # JSON Schema: 2.0 == 2, [2.0] == [2]
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

    def string(self, schema: dict[str, JsonValue], pointer: str) -> Node:
        lo = schema.get("minLength", 0)
        hi = schema.get("maxLength")
        for k, v in (("minLength", lo), ("maxLength", hi)):
            if isinstance(v, float) and v.is_integer():  # draft 6 on: 2.0 is the integer 2
                v = int(v)
                lo, hi = (v, hi) if k == "minLength" else (lo, v)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise SchemaError(f"{k} must be a non-negative integer", pointer=_ptr(pointer, k))
        if hi is not None and hi < lo:
            raise EmptyLanguage(f"minLength {lo} > maxLength {hi} (at {pointer or '/'})")
        constraints: list[Node] = []
        fmt = schema.get("format")
        if fmt is not None:
            node = formats.format_node(fmt) if isinstance(fmt, str) else None
            if node is not None:
                constraints.append(node)
            elif not isinstance(fmt, str):
                raise SchemaError("format must be a string", pointer=_ptr(pointer, "format"))
            elif fmt in formats.ANNOTATION_FORMATS:
                self.annotation("format", _ptr(pointer, "format"),
                                f"format {fmt!r} on a string: {formats.ANNOTATION_FORMATS[fmt]}")
            else:
                self.annotation("format", _ptr(pointer, "format"), f"unknown format {fmt!r}: an annotation, not asserted")
        pat = schema.get("pattern")
        if pat is not None:
            if not isinstance(pat, str):
                raise SchemaError("pattern must be a string", pointer=_ptr(pointer, "pattern"))
            try:
                constraints.append(regex_to_ir(pat, canonical_chars, search=True))
            except UnsupportedRegex as e:
                self.unsupported("pattern", _ptr(pointer, "pattern"), e.reason)
            except RegexSyntaxError as e:
                raise RegexSyntaxError(e.reason, pattern=pat, offset=e.offset, pointer=_ptr(pointer, "pattern")) from e
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
        if isinstance(fmt, str) and fmt in formats.ANNOTATION_FORMATS and not (t == "integer" and fmt in _INT_FORMATS):
            # float, double (and an integer format on a number): a precision, not a range
            self.annotation("format", _ptr(pointer, "format"), f"format {fmt!r} on a number constrains nothing")
        if t == "integer" and isinstance(fmt, str) and fmt in _INT_FORMATS:
            flo, fhi = _INT_FORMATS[fmt]
            if lo is None or lo < flo:
                lo, lo_ex = Decimal(flo), False
            if hi is None or hi > fhi:
                hi, hi_ex = Decimal(fhi), False
        step = self.multiple_of(t, schema, pointer)
        if t == "integer":
            ilo = None if lo is None else _int_low(lo, lo_ex)
            ihi = None if hi is None else _int_high(hi, hi_ex)
            if ilo is None and ihi is None:
                return INTEGER if step is None else step
            if ilo is not None and ihi is not None and ilo > ihi:
                raise EmptyLanguage(f"no integer satisfies the bounds (at {pointer or '/'})")
            ranged = regex_to_ir(numeric.integer_regex(ilo, ihi))
            return ranged if step is None else Product(ranged, step, "and")
        if lo is None and hi is None:
            return NUMBER if step is None else step
        if lo is not None and hi is not None and (lo > hi or (lo == hi and (lo_ex or hi_ex))):
            raise EmptyLanguage(f"no number satisfies the bounds (at {pointer or '/'})")
        ranged = regex_to_ir(
            numeric.number_regex(lo, hi, exclusive_minimum=lo_ex, exclusive_maximum=hi_ex)
        )
        return ranged if step is None else Product(ranged, step, "and")

    def multiple_of(self, t: str, schema: dict[str, JsonValue], pointer: str) -> Node | None:
        """The numbers of type ``t`` that ``multipleOf`` admits (decimal notation, see
        :func:`~maskc.compiler.frontends.numeric.multiple_of`), or None when it is absent
        or refused (a step whose automaton would exceed ``MAX_MULTIPLE_OF_STATES``)."""
        v = schema.get("multipleOf")
        if v is None:
            return None
        where = _ptr(pointer, "multipleOf")
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
            raise SchemaError("multipleOf must be a number greater than 0", pointer=where)
        try:
            k = Decimal(repr(v)) if isinstance(v, float) else Decimal(v)
        except InvalidOperation:
            raise SchemaError("multipleOf is not a finite number", pointer=where) from None
        if not k.is_finite():
            raise SchemaError("multipleOf is not a finite number", pointer=where)
        size = numeric.multiple_of_size(k, integer=t == "integer")
        if size > MAX_MULTIPLE_OF_STATES:
            self.unsupported(
                "multipleOf", where,
                f"multipleOf {v}: its divisibility automaton needs {size} states"
                f" (at most {MAX_MULTIPLE_OF_STATES} are built)",
            )
            return None
        return numeric.multiple_of(k, integer=t == "integer")

def _byte_span(node: Node) -> tuple[int, int | None] | None:
    """Shortest and longest byte length of ``node``'s strings (longest None: unbounded)."""
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


def _whole_numbers(v: JsonValue) -> JsonValue:
    """``v`` with every whole float (``2.0``) written as an integer, at any depth (``v`` itself
    where none is): the same JSON Schema value, in the spelling integers get."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        return int(v)
    if isinstance(v, list):
        items = [_whole_numbers(x) for x in v]
        return items if any(a is not b for a, b in zip(items, v)) else v
    if isinstance(v, dict):
        members = {k: _whole_numbers(x) for k, x in v.items()}
        return members if any(members[k] is not v[k] for k in v) else v
    return v
