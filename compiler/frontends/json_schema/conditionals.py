"""``not`` of any regular schema, and ``if``/``then``/``else``.

``{"not": S, ...rest}`` is first rewritten by De Morgan where the negation of each keyword
of ``S`` is itself a schema (``type``, numeric and length bounds, ``minItems``/``maxItems``,
``required``, ``properties``, ``propertyNames``: the result is a union of exact branches,
recursion allowed; "some key fails ``propertyNames``" is an existence constraint the object
compiler enforces). A ``not`` inside ``S`` (``not not X`` is ``X``), and an ``anyOf`` or
``allOf`` of ``S`` where the difference below cannot be made exact, are split by De Morgan
too (:meth:`ConditionalsMixin.split_not`). Otherwise it is a difference of regular
languages, ``rest`` minus ``S`` (a product construction), which equals the difference of *values* only when both sides spell every
value the same way. So the minuend is cut down (a sound restriction) to one spelling per
value, the one ``S``'s grammar has: canonical strings and numbers (:func:`canonical_any`),
no insignificant whitespace (pretty: its one layout), object keys in ``S``'s declared order
first (:class:`_Shape`), and containers nested at most :data:`NOT_DEPTH` levels below the
negated value (more where ``S`` declares deeper structure). ``S`` itself is compiled in exact
semantics and never restricted: its free-form values reach every level the minuend can.

``if``/``then``/``else`` is the union of ``rest ∧ if ∧ then`` (an ``allOf`` merge) and
``rest ∧ else ∧ ¬if`` (through ``not``); ``then``/``else`` without ``if`` constrain nothing.
Where the keywords prove that no instance of ``rest`` meets ``if`` (:mod:`.disjoint`: the
rest fixes a discriminator the condition gives another value), it is ``rest ∧ else`` alone:
sibling conditionals on one discriminator then add up instead of multiplying.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from maskc.compiler.errors import EmptyLanguage, SchemaError, StateLimitExceeded, UnsupportedKeyword
from maskc.compiler.frontends.json_schema.base import ANNOTATIONS, TYPES, JsonValue, dumps_layout, ptr
from maskc.compiler.frontends.json_schema.combinators import CombinatorsMixin, _first
from maskc.compiler.frontends.json_schema.disjoint import disjoint, facts_of
from maskc.compiler.frontends.json_schema.drafts import ref_overrides_siblings
from maskc.compiler.frontends.json_schema.objects import KEY_EXISTS
from maskc.compiler.frontends.json_schema.refs import RefsMixin, has_ref
from maskc.compiler.frontends.json_text import CANONICAL_ANY_CHAR, Layout
from maskc.compiler.ir import NOTHING, Fields, Node, Product, alt, byte_range, lit, opt, rep, seq
from maskc.compiler.options import Whitespace

__all__ = ["ConditionalsMixin", "NOT_DEPTH", "CANONICAL_NUMBER", "CANONICAL_STRING"]

NOT_DEPTH = 3
"""Container levels a value under a complemented schema may nest (counted from the negated
value), unless the negated schema declares deeper structure: a sound restriction that keeps
both sides of the difference regular."""

_ITE = ("if", "then", "else")
_FIRST_BYTES = {"null": b"n", "boolean": b"tf", "number": b"-0123456789", "string": b'"', "array": b"[",
                "object": b"{"}
_DIGIT = byte_range(0x30, 0x39)
_NONZERO = byte_range(0x31, 0x39)
_INT_PART = alt(lit("0"), seq(_NONZERO, rep(_DIGIT, 0, None)))
CANONICAL_NUMBER: Node = alt(
    lit("0"),
    seq(opt(lit("-")), _NONZERO, rep(_DIGIT, 0, None)),
    seq(opt(lit("-")), _INT_PART, lit("."), rep(_DIGIT, 0, None), _NONZERO),
)
"""One spelling per JSON number: integers without ``-0``, fraction or exponent; other
numbers in decimal notation without trailing zeros (every number language of maskc holds
these spellings)."""
CANONICAL_STRING: Node = seq(lit('"'), rep(CANONICAL_ANY_CHAR, 0, None), lit('"'))
"""One spelling per JSON string (``json.dumps`` style escapes)."""

# De Morgan: keyword -> (the type it constrains, the keyword of its negation, how the bound moves)
_NUMBER_FLIP = {"minimum": "exclusiveMaximum", "maximum": "exclusiveMinimum",
                "exclusiveMinimum": "maximum", "exclusiveMaximum": "minimum"}
_COUNT_FLIP = {"minLength": ("string", "maxLength", -1), "maxLength": ("string", "minLength", 1),
               "minItems": ("array", "maxItems", -1), "maxItems": ("array", "minItems", 1)}
_DE_MORGAN = frozenset({"type", "required", "properties", "propertyNames", *_NUMBER_FLIP, *_COUNT_FLIP})
# split_not: keywords whose subschemas are conjuncts of their schema on their own
_SPLIT = frozenset({"not", "anyOf", "allOf"})
_SEES_SIBLINGS = frozenset({"unevaluatedProperties", "unevaluatedItems"})
_REFS = frozenset({"$ref", "$dynamicRef", "$recursiveRef"})
# Keywords whose exact-semantics grammar is known to hold every instance's canonical spelling
# (no sound restriction inside): only these may appear in the subject of a product difference.
_SUBJECT_KEYWORDS = frozenset({
    "type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties",
    "items", "prefixItems", "additionalItems", "minItems", "maxItems", "minLength", "maxLength",
    "pattern", "multipleOf", *_NUMBER_FLIP, "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref",
})
_SUBJECT_FREE = ("anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "contains",
                 "propertyNames", "unevaluatedProperties", "unevaluatedItems", "patternProperties")


class _Refuse(Exception):
    """The difference cannot be made exact; ``detail`` says why."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@dataclass(slots=True)
class _Shape:
    """Where a schema's grammar fixes the order of object keys: at each object position,
    the declared names (``properties``, then ``required`` names not among them) come first,
    in this order; every other key follows in any order."""

    props: dict[str, _Shape] = field(default_factory=dict)
    required: list[str] = field(default_factory=list)
    addl: _Shape | None = None
    prefix: list[_Shape] = field(default_factory=list)
    items: _Shape | None = None

    def names(self) -> list[str]:
        return list(self.props) + [r for r in self.required if r not in self.props]

    def sub(self, name: str) -> _Shape | None:
        return self.props.get(name, self.addl)

    def children(self) -> list[_Shape]:
        out = list(self.props.values()) + list(self.prefix)
        return out + [s for s in (self.addl, self.items) if s is not None]

    def height(self) -> int:
        """Container levels that fix an order (0: keys in any order everywhere)."""
        below = max((c.height() for c in self.children()), default=0)
        return below + 1 if below or self.names() else 0

    def then(self, other: _Shape) -> _Shape:
        """The shape of the ``allOf`` merge of this schema and then ``other`` (the merge keeps
        the first schema's names in place and appends the new ones)."""
        props = dict(self.props)
        for n, s in other.props.items():
            props[n] = props[n].then(s) if n in props else s
        prefix = [a.then(b) for a, b in zip(self.prefix, other.prefix)]
        longer = self.prefix if len(self.prefix) > len(other.prefix) else other.prefix
        prefix += longer[len(prefix):]
        return _Shape(props, list(dict.fromkeys(self.required + other.required)), _then(self.addl, other.addl),
                      prefix, _then(self.items, other.items))


def _then(a: _Shape | None, b: _Shape | None) -> _Shape | None:
    if a is None:
        return b
    return a if b is None else a.then(b)


class ConditionalsMixin(RefsMixin, CombinatorsMixin):
    """``not`` (De Morgan, else a product difference) and ``if``/``then``/``else``."""

    _any_limit: int | None = None  # free-form values: canonical, containers below this depth
    _in_subject = False  # compiling the subject of a product difference

    # -- if / then / else ----------------------------------------------------------------

    def conditional(self, schema: dict[str, JsonValue], pointer: str, depth: int) -> Node:
        """``rest ∧ if ∧ then`` or ``rest ∧ else ∧ ¬if``; ``if`` alone constrains nothing."""
        rest = {k: v for k, v in schema.items() if k not in _ITE}
        if "if" not in schema:
            for kw in ("then", "else"):
                if kw in schema:
                    self.annotation(kw, ptr(pointer, kw), f"'{kw}' without 'if' constrains nothing")
            return self.value(rest, pointer, depth)
        if "then" not in schema and "else" not in schema:
            return self.value(rest, pointer, depth)
        cond = schema["if"]
        then, els = schema.get("then", True), schema.get("else", True)
        c, cptr = self.deref(cond, ptr(pointer, "if"))
        if c is True or c == {}:
            return self.value(_conjunction([rest, then]), pointer, depth)
        if c is False:
            return self.value(_conjunction([rest, els]), pointer, depth)
        overrides = ref_overrides_siblings(self.draft)
        if disjoint(facts_of(rest, pointer, self.resolve, overrides), facts_of(c, cptr, self.resolve, overrides)):
            # No instance of the rest meets the condition (a discriminator the rest fixes to
            # another value: one of many sibling conditionals on it): the else applies, with
            # no difference to build, and the siblings do not multiply into combinations.
            return self.value(_conjunction([rest, els]), pointer, depth)
        positive = self.value(_conjunction([rest, cond, then]), pointer, depth)
        otherwise = _conjunction([rest, els])
        if otherwise is False:
            return positive
        negative: JsonValue = {"not": cond}
        if otherwise is not True:
            negative["allOf"] = [otherwise]
        return alt(positive, self.value(negative, pointer, depth))

    def merge_allof(self, schema: dict[str, JsonValue], pointer: str) -> dict[str, JsonValue]:
        """The ``allOf`` merge, where ``then``/``else`` of a conjunct without ``if`` are dropped
        first (they constrain nothing), so they never pair with another conjunct's ``if``."""
        parts = schema.get("allOf")
        if not isinstance(parts, list):
            return super().merge_allof(schema, pointer)
        base = _strip_orphans(self, schema, pointer)
        new_parts: list[JsonValue] = []
        for i, part in enumerate(parts):
            sub, sptr = self.deref(part, ptr(pointer, "allOf", i))
            stripped = _strip_orphans(self, sub, sptr) if isinstance(sub, dict) else sub
            new_parts.append(part if stripped is sub else stripped)
        if base is schema and all(a is b for a, b in zip(new_parts, parts)):
            return super().merge_allof(schema, pointer)
        return super().merge_allof({**base, "allOf": new_parts}, pointer)

    # -- not -----------------------------------------------------------------------------

    def negation(self, schema: dict[str, JsonValue], pointer: str, depth: int) -> Node:
        """``rest`` minus the subject of ``not`` (``schema`` has passed :meth:`simplify_not`)."""
        key = "not:" + json.dumps(schema, separators=(",", ":"), ensure_ascii=False, default=repr)
        return self.expand(key, lambda: self._negation(schema, pointer, depth), depth, "not",
                           pointer, "#" + ptr(pointer, "not"))

    def _negation(self, schema: dict[str, JsonValue], pointer: str, depth: int) -> Node:
        inner, iptr = self.deref(schema["not"], ptr(pointer, "not"))
        rest = {k: v for k, v in schema.items() if k != "not"}
        if inner is True or inner == {}:
            return NOTHING
        if inner is False:
            return self.value(rest, pointer, depth)
        if not isinstance(inner, dict):
            raise SchemaError(f"a schema must be an object or a boolean, got {type(inner).__name__}", pointer=iptr)
        branches = self.de_morgan(inner, iptr)
        if branches is not None:
            if not branches:
                return NOTHING
            if set(rest) - ANNOTATIONS:
                branches = [{"allOf": [rest, b]} for b in branches]
            return self.value({"anyOf": branches}, pointer, depth)
        split = self.split_not(rest, inner, iptr)
        if split is not None:
            if "not" in inner:
                return self.value(split, pointer, depth)  # a double negation: no difference needed
            # One difference is smaller than the split's nested ones; where it cannot be made
            # exact (a refusal anywhere inside, even one lenient mode would record), split.
            saved = self.options
            self.options = replace(saved, lenient=False)
            try:
                return self.difference(rest, inner, pointer, iptr, depth)
            except (_Refuse, UnsupportedKeyword):
                pass
            finally:
                self.options = saved
            return self.value(split, pointer, depth)
        try:
            return self.difference(rest, inner, pointer, iptr, depth)
        except _Refuse as e:
            self.unsupported("not", ptr(pointer, "not"), e.detail)
            return self.value(rest, pointer, depth)  # lenient: not enforced (recorded)

    def split_not(self, rest: dict[str, JsonValue], inner: dict[str, JsonValue], iptr: str) -> JsonValue | None:
        """``rest`` and not ``inner`` as a schema without this ``not``, where ``inner`` holds
        ``not``, ``anyOf`` or ``allOf``; None when it holds none of them, or when splitting it
        would change what a keyword sees.

        ``inner`` is the conjunction of its ``not``, its ``anyOf``, each part of its ``allOf``
        and its other keywords together (each of these is a subschema on its own, except for
        ``unevaluated*``, which see their siblings' annotations, and a ``$ref`` of a draft
        that ignores its siblings). Its complement is the union of the parts' complements
        (De Morgan): ``not not X`` is ``X``, ``not anyOf [A, B]`` is ``allOf [not A, not B]``.
        ``rest`` joins each branch as an ``allOf`` conjunct; ``not`` contributes no annotation,
        so a ``rest`` holding ``unevaluated*`` is not split either.
        """
        keys = set(inner) - ANNOTATIONS
        if not keys & _SPLIT:
            return None
        if (keys | set(rest)) & _SEES_SIBLINGS:
            return None
        if keys & _REFS and ref_overrides_siblings(self.draft):
            return None
        complements: list[JsonValue] = []
        others = {k: v for k, v in inner.items() if k not in _SPLIT and k not in ANNOTATIONS}
        if others:
            complements.append({"not": others})
        if "not" in inner:
            complements.append(inner["not"])
        if "anyOf" in inner:
            alts = inner["anyOf"]
            if not isinstance(alts, list) or not alts:
                raise SchemaError("anyOf must be a non-empty array", pointer=ptr(iptr, "anyOf"))
            complements.append({"allOf": [{"not": a} for a in alts]})
        if "allOf" in inner:
            parts = inner["allOf"]
            if not isinstance(parts, list) or not parts:
                raise SchemaError("allOf must be a non-empty array", pointer=ptr(iptr, "allOf"))
            complements += [{"not": p} for p in parts]
        branches = [_conjunction([rest, c]) for c in complements]
        kept = [b for b in branches if b is not False]
        if not kept:
            return False
        if any(b is True for b in kept):
            return True
        return kept[0] if len(kept) == 1 else {"anyOf": kept}

    def de_morgan(self, inner: dict[str, JsonValue], iptr: str) -> list[JsonValue] | None:
        """Schemas whose union is the complement of ``inner``, or None when some keyword of
        ``inner`` has no complement as a schema. ``type: integer`` (without ``number``) has
        none: "a number that is not an integer" is left to the product."""
        keys = set(inner) - ANNOTATIONS
        if not keys <= _DE_MORGAN:
            return None
        types: list[str] | None = None
        if "type" in inner:
            types = self.types_of({"type": inner["type"]}, iptr)
            if "integer" in types and "number" not in types:
                return None
        out: list[JsonValue] = []
        if types is not None:
            rest_types = [t for t in TYPES if t != "integer" and t not in types]
            if rest_types:
                out.append({"type": rest_types})

        def applies(t: str) -> bool:
            return types is None or t in types

        for kw in sorted(keys - {"type"}, key=list(inner).index):
            v = inner[kw]
            where = ptr(iptr, kw)
            if kw in _NUMBER_FLIP:
                if not isinstance(v, (int, float)) or isinstance(v, bool):
                    return None  # draft 4 booleans: not handled here
                if applies("number"):
                    out.append({"type": "number", _NUMBER_FLIP[kw]: v})
            elif kw in _COUNT_FLIP:
                t, flip, step = _COUNT_FLIP[kw]
                if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                    raise SchemaError(f"{kw} must be a non-negative integer", pointer=where)
                if applies(t) and v + step >= 0:
                    out.append({"type": t, flip: v + step})
            elif kw == "required":
                if not isinstance(v, list) or not all(isinstance(n, str) for n in v):
                    raise SchemaError("required must be an array of strings", pointer=where)
                if applies("object"):
                    out += [{"type": "object", "properties": {n: False}} for n in dict.fromkeys(v)]
            elif kw == "propertyNames":
                # an object with a key the name schema rejects (other values pass propertyNames)
                target, _ = self.deref(v, where)
                if applies("object") and target is not True and target != {}:
                    if target is False:
                        out.append({"type": "object", "minProperties": 1})
                    else:
                        out.append({"type": "object", KEY_EXISTS: [[{"not": v}, iptr]]})
            else:  # properties
                if not isinstance(v, dict):
                    raise SchemaError("properties must be an object", pointer=where)
                if applies("object"):
                    for n, sub in v.items():
                        target, _ = self.deref(sub, ptr(where, n))
                        if target is True or target == {}:
                            continue
                        out.append({"type": "object", "required": [n], "properties": {n: {"not": sub}}})
        return out

    def difference(self, rest: dict[str, JsonValue], inner: dict[str, JsonValue], pointer: str, iptr: str,
                   depth: int) -> Node:
        """``rest`` minus ``inner`` as a product of regular languages (see the module doc).

        Raises:
            _Refuse: a side holds recursion, the subject fixes key orders that cannot be
                matched, a subject literal has no canonical spelling, or the automata are too large.
        """
        if self._in_subject:
            raise _Refuse("a 'not' or 'if' inside the subject of another 'not' or 'if' needs a "
                          "complement of a complement, which is not built")
        shape = self.shape_of(inner, iptr, frozenset())
        limit = depth + max(NOT_DEPTH, shape.height() + 1)
        ws = self.options.whitespace if self.pretty else Whitespace()
        saved = (self._any_limit, self._in_subject, self.options)
        try:
            self._any_limit = limit
            self._in_subject = True
            self.options = replace(self.options, semantics="exact")  # the subject is never restricted
            try:
                subject = self.value(inner, iptr, depth)
            except EmptyLanguage as e:
                raise _Refuse(f"the subject's grammar could not be built exactly ({e})") from None
        finally:
            self._any_limit, self._in_subject, self.options = saved
        if has_ref(subject):
            raise _Refuse("the subject holds a recursive reference; a difference needs regular languages")
        # Values of a type the subject cannot start with are not in it: they pass unchanged.
        firsts, _ = _first(subject, {})
        hit = [t for t, bs in _FIRST_BYTES.items() if any(firsts >> b & 1 for b in bs)]
        if not hit:
            return self.value(rest, pointer, depth)
        keep = [t for t in _FIRST_BYTES if t not in hit]
        trivial = not set(rest) - ANNOTATIONS
        plain = NOTHING
        if keep:
            plain = self.value({"type": keep} if trivial else {"allOf": [rest, {"type": keep}]}, pointer, depth)
        saved = (self._any_limit, self._in_subject, self.options)
        try:
            self._any_limit = limit
            universe = self.ordered(shape, depth, limit, ws, hit)
            minuend = universe
            if not trivial:
                minuend = self.value({"allOf": [rest, {"type": hit}]}, pointer, depth)
                if minuend == NOTHING:
                    return plain
                if has_ref(minuend):
                    raise _Refuse("the schema beside 'not' holds a recursive reference; a difference "
                                  "needs regular languages on both sides")
                minuend = Product(minuend, universe, "and")
        finally:
            self._any_limit, self._in_subject, self.options = saved
        self.check_size(subject)
        return alt(plain, Product(minuend, subject, "minus"))

    def check_size(self, *nodes: Node) -> None:
        """Lower each node (the subject: a Thompson NFA, products inside it included) under the
        state limit, so that a subject too large to build is a refusal naming ``not``. The
        minuend and the difference itself are built once, by the pipeline, which reports a
        blow-up there as :class:`StateLimitExceeded` (building them here too would double
        the cost of every difference)."""
        from maskc.compiler.nfa import lower

        limit = self.options.limits.max_states
        for node in nodes:
            try:
                lower(node, max_states=4 * limit, deadline=self.deadline)
            except StateLimitExceeded as e:
                raise _Refuse(f"a side of the difference needs more than {4 * limit} automaton states ({e})") from None

    # -- free-form values, canonical and bounded -----------------------------------------

    def any_value(self, depth: int) -> Node:
        if self._any_limit is not None:
            ws = self.options.whitespace if self.pretty else Whitespace()
            return self.ordered(_Shape(), depth, self._any_limit, ws)
        return super().any_value(depth)

    def ordered(self, shape: _Shape, depth: int, limit: int, ws: Whitespace,
                types: list[str] | None = None) -> Node:
        """Any JSON value in canonical spelling whose containers lie above ``limit``, with the
        keys ``shape`` declares first at its object positions, in its order; at the top, of
        the JSON ``types`` only (None: all)."""
        memo: dict[tuple[int, int], Node] = {}

        def build(sh: _Shape | None, d: int, top: list[str] | None = None) -> Node:
            plain = top is None and (sh is None or not sh.children() and not sh.names())
            if plain and (d, 0) in memo:
                return memo[(d, 0)]
            scalars = [lit("null"), lit("true"), lit("false"), CANONICAL_NUMBER, CANONICAL_STRING]
            if d >= limit and top is None:
                return alt(*scalars)
            layout = Layout(ws, d)
            s = sh or _Shape()
            tail = build(s.items, d + 1)
            prefix = [build(p, d + 1) for p in s.prefix]

            def chain(i: int) -> Node:
                if i >= len(prefix):
                    return seq(tail, rep(seq(layout.sep, tail), 0, None), layout.close("]"))
                return seq(prefix[i], alt(layout.close("]"), seq(layout.sep, chain(i + 1))))

            arr = seq(lit("["), alt(layout.close_empty("]"), seq(layout.first, chain(0))))
            names = s.names()
            items = tuple(
                (seq(lit(dumps_layout(n, layout)), layout.colon, build(s.sub(n), d + 1)), False) for n in names
            )
            key = CANONICAL_STRING
            if names:
                key = Product(key, alt(*(lit(dumps_layout(n, layout)) for n in names)), "minus")
            member = seq(key, layout.colon, build(s.addl, d + 1))
            obj = seq(lit("{"), Fields(items, layout.first, layout.sep, layout.close("}"), layout.close_empty("}"), member))
            if top is None:
                out = alt(*scalars, arr, obj)
            else:
                parts = dict(zip(("null", "boolean", "number", "string"), (scalars[0], alt(*scalars[1:3]), *scalars[3:])))
                parts |= {"array": arr, "object": obj}
                out = alt(*(parts[t] for t in top))
            if plain:
                memo[(d, 0)] = out
            return out

        return build(shape, depth, types)

    # -- the key orders a subject's grammar fixes ----------------------------------------

    def shape_of(self, schema: JsonValue, pointer: str, seen: frozenset[str]) -> _Shape:
        """The key orders ``schema``'s grammar spells, following its ``allOf`` merges.

        Raises:
            _Refuse: the order depends on which branch of a union matches, a literal has no
                canonical spelling, or the schema recurses.
        """
        if not isinstance(schema, dict):
            return _Shape()
        for kw in schema:
            if kw not in _SUBJECT_KEYWORDS and kw not in ANNOTATIONS:
                raise _Refuse(f"'{kw}' at #{ptr(pointer, kw)} inside the subject: its grammar is not known to "
                              "hold every instance, so its complement could admit one")
        if "$ref" in schema:
            target, tptr = self.resolve(schema["$ref"], ptr(pointer, "$ref"))
            if tptr in seen:
                raise _Refuse(f"the subject refers back to #{tptr} (recursion)")
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            return self.shape_of(target, tptr, seen | {tptr}).then(self.shape_of(rest, pointer, seen))
        if "allOf" in schema and isinstance(schema["allOf"], list):
            base = {k: v for k, v in schema.items() if k != "allOf"}
            out = self.shape_of(base, pointer, seen)
            for i, part in enumerate(schema["allOf"]):
                out = out.then(self.shape_of(part, ptr(pointer, "allOf", i), seen))
            return out
        for kw in _SUBJECT_FREE:
            if kw in schema:
                for sub, sptr in _subschemas_of(schema[kw], ptr(pointer, kw), kw):
                    if self.shape_of(sub, sptr, seen).height():
                        raise _Refuse(f"#{sptr} declares properties whose key order depends on which "
                                      f"part of '{kw}' applies")
        for kw in ("enum", "const"):
            if kw in schema:
                values = schema[kw] if kw == "enum" and isinstance(schema[kw], list) else [schema[kw]]
                for v in values:
                    _check_literal(v, ptr(pointer, kw), top=True)
        out = _Shape()
        props = schema.get("properties")
        if isinstance(props, dict):
            out.props = {n: self.shape_of(s, ptr(pointer, "properties", n), seen) for n, s in props.items()}
        req = schema.get("required")
        if isinstance(req, list):
            out.required = [r for r in req if isinstance(r, str)]
        addl = schema.get("additionalProperties")
        if isinstance(addl, dict):
            out.addl = self.shape_of(addl, ptr(pointer, "additionalProperties"), seen)
            if out.addl.height() and "patternProperties" in schema:
                raise _Refuse(f"#{pointer} orders keys under both patternProperties and additionalProperties")
        items = schema.get("items")
        prefix = schema.get("prefixItems")
        tail: JsonValue = items
        if isinstance(items, list):  # draft 7 tuple form
            prefix, tail = items, schema.get("additionalItems")
        if isinstance(prefix, list):
            out.prefix = [self.shape_of(p, ptr(pointer, "prefixItems", i), seen) for i, p in enumerate(prefix)]
        if isinstance(tail, dict):
            out.items = self.shape_of(tail, ptr(pointer, "items"), seen)
        return out


def _subschemas_of(value: JsonValue, pointer: str, kw: str) -> list[tuple[JsonValue, str]]:
    if isinstance(value, list):
        return [(v, ptr(pointer, i)) for i, v in enumerate(value)]
    if isinstance(value, dict) and kw in ("dependentSchemas", "patternProperties"):
        return [(v, ptr(pointer, k)) for k, v in value.items()]
    return [(value, pointer)]


def _check_literal(v: JsonValue, pointer: str, top: bool) -> None:
    """Refuse a listed value whose ``json.dumps`` spelling is not the canonical one (so the
    minuend could spell the same value in a way the subject misses)."""
    if isinstance(v, float):
        if v.is_integer():
            if not (top and abs(v) < 2**53):  # the literal then also holds the integer spelling
                raise _Refuse(f"the listed number {v!r} at #{pointer} is spelled with a fraction")
        elif "e" in repr(v):
            raise _Refuse(f"the listed number {v!r} at #{pointer} is spelled with an exponent")
    elif isinstance(v, list):
        for x in v:
            _check_literal(x, pointer, False)
    elif isinstance(v, dict):
        if len(v) > 1:
            raise _Refuse(f"a listed object at #{pointer} fixes an order of its keys")
        for x in v.values():
            _check_literal(x, pointer, False)


def _strip_orphans(sc: ConditionalsMixin, schema: dict[str, JsonValue], pointer: str) -> dict[str, JsonValue]:
    """``schema`` without ``then``/``else`` when it has no ``if`` (recorded as annotations);
    ``schema`` itself when there is nothing to drop."""
    if "if" in schema or not any(k in schema for k in ("then", "else")):
        return schema
    for kw in ("then", "else"):
        if kw in schema:
            sc.annotation(kw, ptr(pointer, kw), f"'{kw}' without 'if' constrains nothing")
    return {k: v for k, v in schema.items() if k not in ("then", "else")}


def _conjunction(parts: list[JsonValue]) -> JsonValue:
    """The ``allOf`` of ``parts``: True when none constrains, False when one is false."""
    kept: list[JsonValue] = []
    for p in parts:
        if p is False:
            return False
        if p is True or (isinstance(p, dict) and not set(p) - ANNOTATIONS):
            continue
        kept.append(p)
    if not kept:
        return True
    return kept[0] if len(kept) == 1 else {"allOf": kept}
