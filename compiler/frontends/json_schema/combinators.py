"""``allOf``, ``anyOf``, ``oneOf`` and the forms of ``not`` a grammar can express.

``allOf`` is merged at the schema level (keyword by keyword) before compiling, so its
language is exact; a merge that loops back into the schema being merged before entering an
object or array is refused. Two values of one keyword that do not merge (two ``pattern``s,
``contains``, ``not``s, ``if``s, listed values; ``multipleOf`` merges to the least common
multiple) stay apart as nested conjuncts: ``not``/``if``/``$ref`` ones are taken one per
level by the keyword's own construction, listed values are checked against all of them, and
the others are a product of regular languages (:meth:`CombinatorsMixin.intersection`).
``oneOf`` removes the strings two branches share (a product
construction); when the branches hold rules, that difference is not regular: branches
proven disjoint (by their keywords, as in a discriminated union, see :mod:`.disjoint`; by
their first bytes; or with references widened to any bytes) are a plain union; otherwise free-form
values inside are bounded (:data:`ONEOF_ANY_DEPTH`, a sound restriction) to make the
branches regular again, and branches with recursion of their own are refused (lenient:
compiled as ``anyOf`` and recorded).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from itertools import permutations, product
from math import gcd, lcm

from maskc.compiler.errors import EmptyLanguage, SchemaError, UnsupportedKeyword
from maskc.compiler.frontends.json_schema.base import ANNOTATIONS, TYPES, Base, JsonValue, dumps_layout, ptr
from maskc.compiler.frontends.json_schema.disjoint import (ALL, SCALAR_KINDS, Facts, admits_kind, declared_properties,
                                                          declares_keys, disjoint, facts_of, generation_facts,
                                                          on_objects, required_alternatives)
from maskc.compiler.frontends.json_schema.drafts import ref_overrides_siblings
from maskc.compiler.frontends.json_schema.refs import has_ref, map_refs
from maskc.compiler.frontends.json_schema.subsume import implies
from maskc.compiler.frontends.json_text import CANONICAL_ANY_CHAR, Layout
from maskc.compiler.ir import (
    NOTHING,
    Alt,
    ByteSet,
    Fields,
    Node,
    Product,
    Repeat,
    RuleRef,
    Seq,
    alt,
    byte_range,
    byte_set,
    lit,
    map_nodes,
    opt,
    rep,
    seq,
)
from maskc.compiler.options import Whitespace
from maskc.compiler.product import proven_empty

__all__ = ["CombinatorsMixin", "CANONICAL_TEXT"]

_ANY_BYTES = rep(byte_range(0, 255), 0, None)
_DISJOINT_MAX_STATES = 2_000  # a disjointness proof is a convenience: give up early
_ALL = (1 << 256) - 1
_OVER_REQUIRED = 4  # required names an over-approximated object still demands (2**n states)
_OVER_ORDERS = 4  # a listed object of at most this many keys is spelled in every order
_OVER_MAX_COUNT = 4  # an over-approximated object keeps a bound on its members up to this many
_PRESENCE_VARIANTS = 64  # object variants a oneOf over required keys may become (see _presence_variants)

_DIGIT = byte_range(0x30, 0x39)
_NONZERO = byte_range(0x31, 0x39)
_NUMBER = alt(
    lit("0"),
    seq(opt(lit("-")), _NONZERO, rep(_DIGIT, 0, None)),
    seq(opt(lit("-")), alt(lit("0"), seq(_NONZERO, rep(_DIGIT, 0, None))), lit("."), rep(_DIGIT, 0, None), _NONZERO),
)
_STRING = seq(lit('"'), rep(CANONICAL_ANY_CHAR, 0, None), lit('"'))
_PUNCT = byte_set(b"{}[]:, \t\n\r")
CANONICAL_TEXT: Node = seq(
    rep(alt(_PUNCT, lit("true"), lit("false"), lit("null"), _STRING, seq(_NUMBER, _PUNCT)), 0, None), opt(_NUMBER)
)
"""JSON texts whose every string and number has its one canonical spelling: ``json.dumps``
string escapes; integers without ``-0``, fraction or exponent; other numbers in decimal
notation without trailing zeros. A lexical language (no nesting), so a valid JSON text
meets it exactly when its tokens are canonical: a number must end at punctuation,
whitespace or the end, and a string only at an unescaped quote."""

"""A regular superset of the JSON values in any spelling and layout: a container is its
brackets around any JSON tokens (strings stay whole, so their bytes never close it)."""


def _separator(mine: Facts, other: Facts, my_keys: list[frozenset[str]],
               other_keys: list[frozenset[str]]) -> dict[str, JsonValue] | None:
    """Property constraints that no object instance of ``other`` meets (see
    :meth:`CombinatorsMixin._generation_separated`), chosen to keep what ``mine`` writes
    where a choice does: a key ``other`` requires whose string constants ``mine`` does not
    confine itself to; else one absent key per set of ``other_keys``, preferring keys that
    none of ``my_keys`` names. None where some set is all required by ``mine`` (its
    ``required``, or keys every set of ``my_keys`` holds)."""
    for k in sorted(other.required):
        vals = other.strings(k)
        theirs = mine.strings(k)
        if vals is not None and (k not in mine.required or theirs is None or theirs - vals):
            return {k: {"not": {"enum": sorted(vals)}}}
    named = frozenset().union(*my_keys) if my_keys else frozenset()
    always = mine.required | (frozenset.intersection(*my_keys) if my_keys else frozenset())
    absent: list[str] = []
    for need in other_keys:
        if any(k in absent for k in need):
            continue
        free = sorted(k for k in need if k not in always)
        if not free:
            return None
        absent.append(min(free, key=lambda k: (k in named, k)))
    return {k: False for k in absent}


def _declared_apart(mine: Facts, other: Facts) -> str | None:
    """A key both schemas confine to scalar constants, none in common, that ``mine`` admits
    a value for: an object of ``mine`` that has the key is no instance of ``other`` (a
    discriminator that neither requires). None where there is none."""
    for k in sorted(mine.scalars.keys() & other.scalars.keys()):
        if mine.scalars[k] and not mine.scalars[k] & other.scalars[k]:
            return k
    return None


def _forbidden_key(declared: dict[str, list[tuple[JsonValue, str]]], mine: Facts, other: Facts) -> str | None:
    """A key ``mine`` declares with a schema other than ``false`` and admits that ``other``
    forbids (a closed object without it): an object of ``mine`` that has the key is no
    instance of ``other``. None where there is none."""
    if not other.closed:
        return None
    for k, decls in sorted(declared.items()):
        if all(d is not False for d, _ in decls) and all(k in names for names in mine.closed) and any(
                k not in names for names in other.closed):
            return k
    return None


class CombinatorsMixin(Base):
    """``allOf`` / ``anyOf`` / ``oneOf`` / ``not``."""

    _over = 0  # > 0: compiling an over-approximation (:meth:`over_approx`)

    def simplify_not(self, schema: dict[str, JsonValue], pointer: str) -> JsonValue:
        """Rewrite the ``not`` forms the grammar can express exactly; leave the rest."""
        inner, iptr = self.deref(schema["not"], ptr(pointer, "not"))
        rest = {k: v for k, v in schema.items() if k != "not"}
        if inner is True or inner == {}:
            return False  # not-anything: no value
        if inner is False:
            return rest
        if isinstance(inner, dict) and set(inner) - ANNOTATIONS == {"type"}:
            banned = inner["type"]
            banned_set = {banned} if isinstance(banned, str) else set(banned) if isinstance(banned, list) else None
            if banned_set is None or not banned_set <= set(TYPES):
                raise SchemaError(f"bad type {banned!r}", pointer=ptr(iptr, "type"))
            if "number" in banned_set:
                banned_set.add("integer")
            keep = [t for t in self.types_of(rest, pointer) if t not in banned_set]
            if "integer" in banned_set and "number" in keep:
                return schema  # "a number that is not an integer": not expressible here
            return {**rest, "type": keep} if keep else False
        return schema

    def merged(self, schema: dict[str, JsonValue], pointer: str, depth: int, keyword: str) -> Node:
        # The merge of an allOf is identified by its content (every $ref in it is absolute),
        # so an allOf met again inside its own expansion becomes a rule like a $ref does.
        key = "allOf:" + json.dumps(schema, separators=(",", ":"), ensure_ascii=False, default=repr)
        return self.expand(
            key, lambda: self.or_nothing(lambda: self._merged_value(self.merge_allof(schema, pointer), pointer, depth)),
            depth, keyword, pointer, "#" + ptr(pointer, keyword),
        )

    def or_nothing(self, build: Callable[[], Node]) -> Node:
        """``build()``, or the empty language where it finds that no value satisfies a
        conjunction (contradictory bounds, say): an empty union branch or conjunct is no
        error. The subject of a difference keeps the error (:meth:`negation` refuses it)."""
        try:
            return build()
        except EmptyLanguage:
            if getattr(self, "_in_subject", False):
                raise
            return NOTHING

    def _merged_value(self, merged: dict[str, JsonValue], pointer: str, depth: int) -> Node:
        """The language of a merged ``allOf``, whose own ``allOf`` (if any) holds the
        conjuncts the merge kept apart (see :meth:`merge_two`)."""
        rest = merged.get("allOf")
        if not isinstance(rest, list) or set(merged) & _BEFORE_ALLOF:
            # value() meets these keywords first and merges the kept conjuncts one level
            # down, once the keyword is out of the way
            return self.value(merged, pointer, depth)
        base = {k: v for k, v in merged.items() if k != "allOf"}
        blocking = [k for k in ("unevaluatedProperties", "unevaluatedItems") if k in base]
        if blocking:
            self.unsupported("allOf", pointer, f"conjuncts that cannot be merged next to {blocking[0]}: which "
                             "subschema evaluated a member is lost")
            return self.value(base, pointer, depth)
        if "const" in base or "enum" in base:
            # every listed value is checked against the kept conjuncts too (exact)
            values = [base["const"]] if "const" in base else base["enum"]
            if not isinstance(values, list):
                raise SchemaError("enum must be an array", pointer=ptr(pointer, "enum"))
            return self.literals(values, merged, pointer, depth)
        if any(c is False for c in rest):
            return NOTHING
        return self.intersection(base, [c for c in rest if isinstance(c, dict)], pointer, depth)

    def intersection(self, base: dict[str, JsonValue], parts: list[dict[str, JsonValue]], pointer: str,
                     depth: int) -> Node:
        """``base`` and every schema of ``parts`` as a product of their languages.

        Only the JSON types the parts constrain go through the product; the other values of
        ``base`` pass unchanged. Every string in both languages spells a value both schemas
        admit (each grammar is sound), so the product is sound whatever the spellings; it is
        also complete when both sides spell each value alike: numbers and strings are spelled
        by the same scalar languages on both sides, and object keys are refused by name where
        both sides fix an order. Free-form values inside are bounded
        (:data:`~.refs.ONEOF_ANY_DEPTH`), which only removes strings from one side, so the
        product stays a subset of the intersection (sound); recursion of its own is refused.
        Where a refusal is lenient, ``base`` alone is kept (a superset, recorded), which is
        also what a superset or the subject of a ``not`` may hold.
        """
        kinds: set[str] = set()
        for part in parts:
            kinds |= _kinds(part)
        types = self.types_of(base, pointer)
        if "number" in types and "integer" in kinds:
            kinds.add("number")
        hit = [t for t in types if t in kinds]
        free = [t for t in types if t not in kinds]
        plain = self.value({**base, "type": free}, pointer, depth) if free else NOTHING
        if not hit:
            return plain
        schemas = [{**base, "type": hit}, *({**p, "type": hit} for p in parts)]
        if self._over:
            # a superset (see over_approx): object members in any order and references widened
            # to any bytes there, so the product needs neither an order check nor bounds
            return alt(plain, _product([self.value(s, pointer, depth) for s in schemas]))
        if _fixes_order(base) and any(_fixes_order(p) for p in parts):
            self.unsupported("allOf", pointer, "conjuncts that cannot be merged both fix an order of object keys "
                             "(properties, required or a listed object): their intersection would lose values")
            return alt(plain, self.value({**base, "type": hit}, pointer, depth))
        nodes = [self.value(s, pointer, depth) for s in schemas]
        if any(has_ref(n) for n in nodes):
            self.bounded_any += 1
            try:
                nodes = [self.value(s, pointer, depth) for s in schemas]
            finally:
                self.bounded_any -= 1
            if any(has_ref(n) for n in nodes):
                self.unsupported("allOf", pointer, "conjuncts that cannot be merged hold recursive references; "
                                 "their intersection is not regular")
                return alt(plain, nodes[0])
        return alt(plain, _product(nodes))

    def merge_allof(self, schema: dict[str, JsonValue], pointer: str) -> dict[str, JsonValue]:
        """One schema equivalent to ``schema``'s ``allOf`` and its other keywords.

        Raises:
            UnsupportedKeyword: a conjunct is (through ``$ref``) the schema being merged.
        """
        parts = schema["allOf"]
        if not isinstance(parts, list) or not parts:
            raise SchemaError("allOf must be a non-empty array", pointer=ptr(pointer, "allOf"))
        merged: dict[str, JsonValue] = {k: v for k, v in schema.items() if k != "allOf"}
        # unevaluatedItems of this schema sees the items its conjuncts evaluate: known exactly
        # when they are the document's own schemas and evaluate by position only
        unevaluated = self._own_items_scope(schema) and not _IN_PLACE & (set(schema) - {"allOf", "unevaluatedItems"})
        evaluated_all = _has_tail(schema)
        if unevaluated:
            merged.pop("unevaluatedItems")
        self.merging.append(id(schema))
        try:
            for i, part in enumerate(parts):
                sub, sptr = self.deref(part, ptr(pointer, "allOf", i))
                if sub is True:
                    continue
                if sub is False:
                    return {"not": {}} if self.options.lenient else {"enum": []}
                if not isinstance(sub, dict):
                    raise SchemaError("allOf items must be schemas", pointer=sptr)
                if id(sub) in self.merging:
                    raise UnsupportedKeyword(
                        "allOf", pointer=ptr(pointer, "allOf", i),
                        detail=f"the conjunct at #{sptr} is the schema being merged: a recursive $ref "
                        "inside allOf must sit below properties or items, not at the same level",
                    )
                if "unevaluatedItems" in sub and self._own_items_scope(sub) and not _IN_PLACE & set(sub):
                    sub = _localize_items(sub)  # it sees this conjunct's own item keywords only
                if unevaluated and (_IN_PLACE & set(sub) or "unevaluatedItems" in sub):
                    unevaluated = False
                    merged["unevaluatedItems"] = schema["unevaluatedItems"]  # left to the array compiler
                evaluated_all = evaluated_all or _has_tail(sub)
                if "allOf" in sub:
                    sub = self.merge_allof(sub, sptr)
                merged = self.merge_two(merged, sub, sptr)
        finally:
            self.merging.pop()
        if unevaluated and not evaluated_all:
            # the items after every conjunct's positions are evaluated by no one else
            tail = "additionalItems" if isinstance(merged.get("items"), list) else "items"
            merged[tail] = _both(merged.get(tail, True), schema["unevaluatedItems"])
        return merged

    def _own_items_scope(self, schema: JsonValue) -> bool:
        """Whether ``schema`` is one of the document's own objects (not one the compiler made
        by merging), so the items its ``unevaluatedItems`` sees are its own keywords'."""
        own = getattr(self, "_own", None)
        return isinstance(schema, dict) and "unevaluatedItems" in schema and own is not None and bool(own(schema))

    def merge_two(self, a: dict[str, JsonValue], b: dict[str, JsonValue], pointer: str) -> dict[str, JsonValue]:
        """The conjunction of ``a`` and ``b`` as one schema.

        Keywords merge one by one where the merge is exact; two keywords that do not merge
        keep ``b``'s in a conjunct of their own, under the result's ``allOf`` (an
        ``if``/``then``/``else`` or a ``contains`` with its counts travel as a group), which
        :meth:`merged` compiles as an intersection.
        """
        a, b = self.fold_objects(a, b, pointer)
        a, b = _fold_arrays(a, b)
        kept: list[JsonValue] = []
        for group in _GROUPS:
            ga = {k: a[k] for k in group if k in a}
            gb = {k: b[k] for k in group if k in b}
            if not gb or ga == gb:
                continue
            if group[0] == "if" and "if" in ga and ga["if"] == gb.get("if"):
                # one condition: (C -> Ta) and (C -> Tb) is C -> (Ta and Tb), the same for else
                a = {**a, **{k: _both(ga.get(k, True), gb.get(k, True)) for k in ("then", "else") if k in ga or k in gb}}
                b = {k: v for k, v in b.items() if k not in group}
            elif group[0] == "contains" and "contains" not in gb:
                for k in gb:  # minContains/maxContains count their own conjunct's contains only
                    self.annotation(k, ptr(pointer, k), f"'{k}' without 'contains' in its schema constrains nothing")
                b = {k: v for k, v in b.items() if k not in group}
            elif ga:
                kept.append(gb)
                b = {k: v for k, v in b.items() if k not in group}
        out = dict(a)
        if kept:
            out["allOf"] = [*_list(out.get("allOf")), *kept]
        for k, v in b.items():
            if k not in out or k in ANNOTATIONS or k not in _VALIDATION:
                out.setdefault(k, v)  # a keyword maskc does not know is an annotation: it constrains nothing
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
            elif k in ("anyOf", "oneOf") and isinstance(cur, list) and isinstance(v, list):
                # allOf [anyOf A, X] = anyOf [a ∧ X for a in A], and the same for oneOf
                out[k] = [{"allOf": [br, {k: v}]} for br in cur]
            elif k == "allOf":
                out[k] = [*_list(cur), *_list(v)]
            elif k == "multipleOf" and (step := _common_multiple(cur, v)) is not None:
                out[k] = step
            elif k == "uniqueItems" and isinstance(cur, bool) and isinstance(v, bool):
                out[k] = cur or v
            elif k in _APART:
                out["allOf"] = [*_list(out.get("allOf")), {k: v}]
            else:
                self.unsupported("allOf", pointer, f"conflicting '{k}' in allOf")
        return out

    def union(self, schema: dict[str, JsonValue], kw: str, pointer: str, depth: int) -> Node:
        branches = schema[kw]
        if not isinstance(branches, list) or not branches:
            raise SchemaError(f"{kw} must be a non-empty array", pointer=ptr(pointer, kw))
        base = {k: v for k, v in schema.items() if k != kw}
        structural = set(base) - ANNOTATIONS
        if kw == "oneOf" and not self._over:
            variants = self._presence_variants(base, branches, pointer)
            if variants is not None:
                return alt(*[self.or_nothing(lambda: self.value(sub, bptr, depth)) for sub, bptr in variants])
        subs: list[tuple[JsonValue, str]] = []
        for i, br in enumerate(branches):
            bptr = ptr(pointer, kw, i)
            if structural:
                br, _ = self.deref(br, bptr)
                sub = {"allOf": [base, br]} if isinstance(br, dict) else (base if br is True else False)
            else:
                sub = br
            subs.append((sub, bptr))
        if kw == "anyOf" and not structural and len(subs) > 1 and (self.exact or self._over):
            subs = self._without_implied(subs)
        nodes = [self.or_nothing(lambda: self.value(sub, bptr, depth)) for sub, bptr in subs]
        if kw == "oneOf" and len(nodes) > 1:
            if self._over:
                return alt(*nodes)  # a superset: at least one branch
            return self.exclusive(nodes, subs, pointer, kw, depth)
        return alt(*nodes)

    def _without_implied(self, subs: list[tuple[JsonValue, str]]) -> list[tuple[JsonValue, str]]:
        """``anyOf`` branches less those whose language another kept branch's holds (proven
        from keywords, :func:`.subsume.implies`): the union is the same, and a redundant
        branch, often the costly one (an exclusive choice of overlapping objects), is never
        compiled. Of branches that hold each other, the last is kept."""
        overrides = ref_overrides_siblings(self.draft)
        kept = list(range(len(subs)))
        for i in range(len(subs)):
            x, xp = subs[i]
            if any(j != i and implies(x, xp, subs[j][0], subs[j][1], self.resolve, overrides) for j in kept):
                kept.remove(i)
        return [subs[i] for i in kept]

    def _presence_variants(self, base: dict[str, JsonValue], branches: list[JsonValue],
                           pointer: str) -> list[tuple[JsonValue, str]] | None:
        """``oneOf`` over branches that only require keys (``oneOf: [{required: [a]},
        {required: [b]}]``, "exactly one of a and b") as a plain union of object schemas,
        each ``base`` with one branch's keys required and, for every other branch, one of
        its keys that branch ``i`` does not require forbidden (``properties: {k: false}``),
        in every such choice. Exactly one branch holds exactly where some variant does, so
        the union is exact, and no product of object grammars is built. A value that is not
        an object meets every branch, so no variant admits one (``type: object``).

        None where a branch constrains more than presence, where the choices exceed
        :data:`_PRESENCE_VARIANTS`, or in generation semantics where ``base`` declares no
        keys (the general construction applies).
        """
        keys: list[list[str]] = []
        where: list[str] = []
        for i, br in enumerate(branches):
            bptr = ptr(pointer, "oneOf", i)
            br, _ = self.deref(br, bptr)
            if not isinstance(br, dict) or set(br) - ANNOTATIONS - {"required"}:
                return None
            req = br.get("required", [])
            if not isinstance(req, list) or not all(isinstance(k, str) for k in req):
                return None
            keys.append(list(dict.fromkeys(req)))
            where.append(bptr)
        if len(keys) < 2 or not (self.exact or "properties" in base or "patternProperties" in base):
            return None  # (generation: an object that declares no keys admits others; forbidding one declares it)
        base_req = base.get("required", [])
        always = set(base_req) if isinstance(base_req, list) else set()
        variants: list[tuple[JsonValue, str]] = []
        for i, mine in enumerate(keys):
            held = always | set(mine)
            # per other branch: the keys whose absence makes it fail while branch i holds
            options = [[k for k in other if k not in held] for j, other in enumerate(keys) if j != i]
            if any(not o for o in options):
                continue  # another branch holds whenever this one does
            count = 1
            for o in options:
                count *= len(o)
            if len(variants) + count > _PRESENCE_VARIANTS:
                return None
            for absent in product(*options):
                part: dict[str, JsonValue] = {"type": "object", "required": mine,
                                              "properties": {k: False for k in dict.fromkeys(absent)}}
                variants.append(({"allOf": [base, part]} if base else part, where[i]))
        return variants  # (none: no object holds exactly one branch, and no other value does)

    def exclusive(self, nodes: list[Node], subs: list[tuple[JsonValue, str]], pointer: str, kw: str,
                  depth: int) -> Node:
        """The strings of exactly one branch, as values (see the module doc).

        ``nodes`` are the branches as compiled (sound, in this compile's semantics); each
        is also compiled as a regular superset of its values' spellings (:meth:`over_approx`).
        Branches whose supersets share no string share no value: their union is exact.
        Otherwise the branches are cut down to canonical spellings and the strings two
        supersets share are removed.
        """
        overrides = ref_overrides_siblings(self.draft)
        facts = [facts_of(sub, bptr, self.resolve, overrides) for sub, bptr in subs]
        if all(disjoint(x, y) for i, x in enumerate(facts) for y in facts[i + 1 :]):
            return alt(*nodes)  # a discriminated union (see .disjoint)
        if self.exact:
            split = self._apart_on_objects(subs, facts, depth)
            if split is not None:
                return split
        elif not self._over:
            live = self._not_implied(subs)
            writes = {i: generation_facts(subs[i][0], subs[i][1], self.resolve, overrides, facts[i]) for i in live}
            got = self._generation_exclusive(nodes, live, writes, facts)
            if got is None:
                got = self._generation_separated(nodes, subs, live, writes, facts, depth)
            if got is not None:
                return got
        overs = [self.over_approx(sub, bptr, depth) for sub, bptr in subs]
        limit = min(self.options.limits.max_states, _DISJOINT_MAX_STATES)
        if all(_disjoint(x, y, limit, self.deadline) for i, x in enumerate(overs) for y in overs[i + 1 :]):
            return alt(*nodes)
        if self.with_rules and any(has_ref(n) for n in nodes):
            # The difference needs regular languages: free-form values inside are
            # nested at most ONEOF_ANY_DEPTH deep here (a sound restriction).
            self.bounded_any += 1
            try:
                nodes = [self.or_nothing(lambda: self.value(sub, bptr, depth)) for sub, bptr in subs]
            finally:
                self.bounded_any -= 1
            if any(has_ref(n) for n in nodes):
                self.unsupported(
                    "oneOf", ptr(pointer, kw),
                    "branches may overlap and hold recursive references; exclusivity over "
                    "a recursive grammar cannot be enforced",
                )
                return alt(*nodes)
        canonical = [Product(n, CANONICAL_TEXT, "and") for n in nodes]
        overlaps = [Product(x, y, "and") for i, x in enumerate(overs) for y in overs[i + 1 :]]
        return Product(alt(*canonical), alt(*overlaps), "minus")

    def _generation_exclusive(self, nodes: list[Node], live: list[int], writes: dict[int, Facts],
                              facts: list[Facts]) -> Node | None:
        """``oneOf`` in ``generation`` semantics, where a branch's language is a part of its
        instances. ``live`` are the branches no other provably holds (:meth:`_not_implied`:
        an instance of one left out meets two branches), ``writes`` their generation facts
        (objects closed to the keys they declare). Each branch kept is exact where its
        language provably shares no value with any other branch's instances. None where one
        is not proven (the general construction applies)."""
        for i in live:
            if not all(disjoint(writes[i], facts[k]) for k in range(len(facts)) if k != i):
                return None
        return alt(*[nodes[i] for i in live]) if live else NOTHING

    def _not_implied(self, subs: list[tuple[JsonValue, str]]) -> list[int]:
        """The branches no other branch provably holds (:func:`.subsume.implies`)."""
        overrides = ref_overrides_siblings(self.draft)
        n = len(subs)
        return [i for i in range(n)
                if not any(j != i and implies(subs[i][0], subs[i][1], subs[j][0], subs[j][1], self.resolve, overrides)
                           for j in range(n))]

    def _generation_separated(self, nodes: list[Node], subs: list[tuple[JsonValue, str]], live: list[int],
                              writes: dict[int, Facts], facts: list[Facts], depth: int) -> Node | None:
        """``oneOf`` in ``generation`` semantics over branches whose objects overlap (open
        objects, a union inside a branch): each branch that writes objects alone, cut down by
        keywords to objects that no other branch admits. Against another branch that
        requires a key with string constants, the key takes none of them (or is absent);
        else where both confine a key to scalar constants, none shared, or where this branch
        declares a key the other's closed objects forbid, the key is required; otherwise,
        for each set of keys one of which that branch requires
        (:func:`.disjoint.required_alternatives`), a key of the set that this branch does
        not require is forbidden (``properties: {k: false}``). Every object written then
        meets its own branch alone (a part of the instances, as generation allows). A branch
        whose writes meet no other branch (a string among objects) is kept whole. ``live``
        and ``writes`` as in :meth:`_generation_exclusive`.

        None where another branch may write other values, or a set of the other branch's
        keys is all required here (the general construction applies)."""
        overrides = ref_overrides_siblings(self.draft)
        n = len(subs)
        keys = [required_alternatives(sub, bptr, self.resolve, overrides) for sub, bptr in subs]
        parts: list[Node] = []
        for i in live:
            mine = writes[i]
            if all(j == i or disjoint(mine, facts[j]) for j in range(n)):
                parts.append(nodes[i])  # (what it writes meets no other branch: kept whole)
                continue
            if mine.types is None or not mine.types <= {"object"}:
                return None
            if not declares_keys(subs[i][0], subs[i][1], self.resolve, overrides):
                return None  # (generation: an object that declares no keys admits others; a cut would declare them)
            props: dict[str, JsonValue] = {}
            need: set[str] = set()
            declared: dict[str, list[tuple[JsonValue, str]]] | None = None  # (read on first need)
            for j in range(n):
                if j == i or disjoint(mine, facts[j]):
                    continue
                cut = _separator(facts[i], facts[j], keys[i], keys[j])
                if cut is None:
                    key = _declared_apart(facts[i], facts[j])
                    if key is None:
                        if declared is None:
                            declared = declared_properties(subs[i][0], subs[i][1], self.resolve, overrides)
                        key = _forbidden_key(declared, facts[i], facts[j])
                    if key is not None:
                        # (its value is one the other branch never admits there, or the other
                        # branch admits no such key)
                        need.add(key)
                        continue
                    nested = self._nested_separator(subs[i], subs[j], overrides)
                    if nested is None:
                        return None
                    key, inner = nested
                    need.add(key)
                    cut = {key: {"properties": inner}}
                for k, v in cut.items():
                    props[k] = {"allOf": [props[k], v]} if k in props else v
            extra: dict[str, JsonValue] = {"properties": props}
            if need:
                extra["required"] = sorted(need)
            sub: JsonValue = {"allOf": [subs[i][0], extra]} if props or need else subs[i][0]
            parts.append(self.or_nothing(lambda: self.value(sub, subs[i][1], depth)))
        return alt(*parts) if parts else NOTHING

    def _nested_separator(self, mine: tuple[JsonValue, str], other: tuple[JsonValue, str],
                          overrides: bool) -> tuple[str, dict[str, JsonValue]] | None:
        """A key both branches declare whose values ``mine`` can keep apart from ``other``'s
        (a discriminator one level down, in an optional member): the key and property
        constraints on its value (:func:`_separator` over the two declarations, or none where
        their facts share no instance) that no value ``other`` declares for it meets. ``mine``'s
        declaration admits objects alone, so an object written with the key present and
        those constraints met is no instance of ``other``. None where no declared key gives
        one."""
        theirs = declared_properties(other[0], other[1], self.resolve, overrides)
        for key, decls in sorted(declared_properties(mine[0], mine[1], self.resolve, overrides).items()):
            for m_sub, m_ptr in decls:
                m_facts = facts_of(m_sub, m_ptr, self.resolve, overrides)
                if m_facts.empty or m_facts.types is None or not m_facts.types <= {"object"}:
                    continue
                if not declares_keys(m_sub, m_ptr, self.resolve, overrides):
                    continue  # (generation: see :meth:`_generation_separated`)
                m_keys = required_alternatives(m_sub, m_ptr, self.resolve, overrides)
                for o_sub, o_ptr in theirs.get(key, []):
                    o_facts = facts_of(o_sub, o_ptr, self.resolve, overrides)
                    if disjoint(m_facts, o_facts):
                        return key, {}
                    o_keys = required_alternatives(o_sub, o_ptr, self.resolve, overrides)
                    inner = _separator(m_facts, o_facts, m_keys, o_keys)
                    if inner is not None:
                        return key, inner
        return None

    def _apart_on_objects(self, subs: list[tuple[JsonValue, str]], facts: list[Facts], depth: int) -> Node | None:
        """``oneOf`` branches that are disjoint on objects (a discriminated union whose schemas
        leave ``type`` out): the objects of each branch, and the kinds of non-object value
        exactly one branch admits in full (object keywords constrain no other value, so each
        branch admits all or none of a kind, when its other keywords say which). None where
        the objects are not proven apart or some branch admits part of a kind."""
        objects = [on_objects(f) for f in facts]
        if not all(disjoint(x, y) for i, x in enumerate(objects) for y in objects[i + 1 :]):
            return None
        overrides = ref_overrides_siblings(self.draft)
        kinds = []
        for kind in SCALAR_KINDS:
            got = [admits_kind(sub, bptr, kind, self.resolve, overrides) for sub, bptr in subs]
            if None in got:
                return None
            if got.count(ALL) == 1:
                kinds.append(kind)
        if ("integer" in kinds) != ("fraction" in kinds):
            return None  # (whole numbers apart from the others: no type keyword says it)
        types = ["number" if k == "integer" else k for k in kinds if k != "fraction"]
        parts = [self.or_nothing(lambda: self.value({"allOf": [sub, {"type": "object"}]}, bptr, depth))
                 for sub, bptr in subs]
        if types:
            parts.append(self.value({"type": types}, subs[0][1], depth))
        return alt(*parts)

    def over_approx(self, schema: JsonValue, pointer: str, depth: int) -> Node:
        """A regular language holding every canonical spelling (:data:`CANONICAL_TEXT`, object
        keys in any order, this compile's whitespace) of every value ``schema`` admits.

        Compiled in exact semantics; references and free-form values become any bytes, object
        members any order (at most :data:`_OVER_REQUIRED` required names kept), listed values
        every key order, ``oneOf`` a union, and what lenient mode would drop is dropped (a
        dropped keyword only widens). The compile's rules are left as they were.
        """
        saved = (self.options, dict(self.rules), dict(self.rule_names), set(self.taken_names),
                 dict(self.name_numbers), set(self.recursive), set(self.shared), list(self.not_enforced),
                 getattr(self, "_in_subject", False))
        self.options = replace(self.options, semantics="exact", lenient=True)
        self._over += 1
        # a superset: free-form values become references (widened below), never bounded
        bounded, self.bounded_any = self.bounded_any, 0
        # a difference inside ('not', 'if') is refused there and its minuend kept: a superset
        self._in_subject = True
        try:
            node = self.value(schema, pointer, depth)
        finally:
            self._over -= 1
            self.bounded_any = bounded
            (self.options, self.rules, self.rule_names, self.taken_names, self.name_numbers, self.recursive,
             self.shared, self.not_enforced, self._in_subject) = saved
        return _any_order(map_refs(node, _widen))

    def literals(self, values: list[JsonValue], schema: dict[str, JsonValue], pointer: str, depth: int) -> Node:
        node: Node = super().literals(values, schema, pointer, depth)  # type: ignore[misc]
        if not self._over:
            return node
        return alt(node, *(_over_literal(v, self.options.whitespace, depth) for v in values))

    def pairwise_disjoint(self, nodes: list[Node]) -> bool:
        """Whether no two branches share a string, each reference widened to any bytes."""
        wide = [map_refs(n, _widen) for n in nodes]
        limit = min(self.options.limits.max_states, _DISJOINT_MAX_STATES)
        return all(_disjoint(x, y, limit, self.deadline) for i, x in enumerate(wide) for y in wide[i + 1 :])


_GROUPS = (("if", "then", "else"), ("contains", "minContains", "maxContains"))
"""Keywords that mean something only together: two conjuncts' groups are never mixed."""
_BEFORE_ALLOF = frozenset({"not", "if", "then", "else", "$ref", "$dynamicRef", "$recursiveRef"})
"""Keywords :meth:`~.SchemaCompiler.value` handles before ``allOf``."""
_APART = frozenset({
    "pattern", "format", "multipleOf", "const", "enum", "not", "$ref", "$dynamicRef", "$recursiveRef",
    "propertyNames", "minContains", "maxContains", "contentMediaType", "contentEncoding",
})
"""Keywords whose meaning needs no sibling: two different values of one of them are kept as
two conjuncts (an intersection) instead of being merged."""
_KINDS: dict[str, frozenset[str]] = {
    **{k: frozenset({"string"}) for k in ("minLength", "maxLength", "pattern", "format", "contentMediaType",
                                           "contentEncoding")},
    **{k: frozenset({"number", "integer"}) for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                                      "multipleOf")},
    **{k: frozenset({"array"}) for k in ("items", "prefixItems", "additionalItems", "minItems", "maxItems",
                                          "contains", "minContains", "maxContains", "uniqueItems",
                                          "unevaluatedItems")},
    **{k: frozenset({"object"}) for k in ("properties", "patternProperties", "additionalProperties", "required",
                                           "minProperties", "maxProperties", "propertyNames", "dependentRequired",
                                           "dependentSchemas", "dependencies", "unevaluatedProperties")},
}
_VALIDATION = frozenset({
    *_KINDS, "type", "enum", "const", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref",
    "$dynamicRef", "$recursiveRef", "$$order",
})
"""The keywords the compiler reads (any other is an annotation)."""
_ORDERING = frozenset({"properties", "required", "dependentRequired", "dependentSchemas", "dependencies",
                       "$ref", "$dynamicRef", "$recursiveRef"})
_DATA = frozenset({"const", "enum", "default", "examples", "example"})


_IN_PLACE = frozenset({
    "allOf", "anyOf", "oneOf", "if", "then", "else", "$ref", "$dynamicRef", "$recursiveRef", "contains",
    "dependentSchemas", "dependencies",
})
"""Keywords that may evaluate items other than by position (``not`` evaluates none)."""


def _has_tail(s: dict[str, JsonValue]) -> bool:
    """Whether ``s`` evaluates every item after its positional ones (``items`` as a schema;
    draft 2019-09's tuple form: ``additionalItems``)."""
    items = s.get("items")
    return items is not None and not isinstance(items, list) or isinstance(items, list) and "additionalItems" in s


def _localize_items(s: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """``s``'s ``unevaluatedItems`` as the schema of the items after its own positions."""
    rest = {k: v for k, v in s.items() if k != "unevaluatedItems"}
    if not _has_tail(rest):
        rest["additionalItems" if isinstance(rest.get("items"), list) else "items"] = s["unevaluatedItems"]
    return rest


def _product(nodes: list[Node]) -> Node:
    out = nodes[0]
    for n in nodes[1:]:
        out = Product(out, n, "and")
    return out


def _list(v: JsonValue) -> list[JsonValue]:
    return list(v) if isinstance(v, list) else []


def _kinds(schema: dict[str, JsonValue]) -> set[str]:
    """The JSON types whose values ``schema`` constrains (every type for ``const``, ``not``, ...)."""
    out: set[str] = set()
    for k in schema:
        if k in ANNOTATIONS or k == "type":
            continue
        out |= _KINDS.get(k, frozenset(TYPES))
    return out


def _fixes_order(schema: JsonValue) -> bool:
    """Whether ``schema``'s grammar may fix the order of some object's keys (declared names,
    a reference whose target could, a listed object of two keys or more); conservative."""
    if isinstance(schema, list):
        return any(_fixes_order(x) for x in schema)
    if not isinstance(schema, dict):
        return False
    for k, v in schema.items():
        if k in _ORDERING and v:
            return True
        if k in _DATA:
            if _multi_key(v):
                return True
        elif k not in ANNOTATIONS and _fixes_order(v):
            return True
    return False


def _multi_key(v: JsonValue) -> bool:
    if isinstance(v, dict):
        return len(v) > 1 or any(_multi_key(x) for x in v.values())
    if isinstance(v, list):
        return any(_multi_key(x) for x in v)
    return False


def _common_multiple(x: JsonValue, y: JsonValue) -> int | float | None:
    """The least common multiple of two ``multipleOf`` values (of rationals: a value is a
    multiple of both exactly when it is a multiple of it), or None when either is not a
    positive number or the result has no exact JSON spelling here."""
    fs: list[Fraction] = []
    for v in (x, y):
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
            return None
        try:
            fs.append(Fraction(Decimal(repr(v))) if isinstance(v, float) else Fraction(v))
        except (InvalidOperation, ValueError, OverflowError):
            return None
    a, b = fs
    step = Fraction(lcm(a.numerator, b.numerator), gcd(a.denominator, b.denominator))
    if step.denominator == 1:
        return step.numerator
    try:
        spelled = float(step)
    except OverflowError:
        return None
    return spelled if Fraction(Decimal(repr(spelled))) == step else None


def _first_bytes_disjoint(nodes: list[Node]) -> bool:
    """Whether no two branches can start with the same byte (so they share no string)."""
    memo: dict[int, tuple[int, bool]] = {}
    firsts = [_first(n, memo) for n in nodes]
    if any(nullable for _, nullable in firsts):
        return False
    seen = 0
    for mask, _ in firsts:
        if seen & mask:
            return False
        seen |= mask
    return True


def _first(node: Node, memo: dict[int, tuple[int, bool]]) -> tuple[int, bool]:
    """The bytes ``node``'s strings may start with (a 256-bit mask), and whether it is nullable.

    An over-approximation: a reference may start with any byte and be empty.
    """
    got = memo.get(id(node))
    if got is not None:
        return got
    out: tuple[int, bool]
    if isinstance(node, ByteSet):
        mask = 0
        for lo, hi in node.ranges:
            mask |= ((1 << (hi - lo + 1)) - 1) << lo
        out = (mask, False)
    elif isinstance(node, Seq):
        mask, nullable = 0, True
        for item in node.items:
            m, n = _first(item, memo)
            mask |= m
            if not n:
                nullable = False
                break
        out = (mask, nullable)
    elif isinstance(node, Alt):
        parts = [_first(x, memo) for x in node.items]
        mask = 0
        for m, _ in parts:
            mask |= m
        out = (mask, any(n for _, n in parts))
    elif isinstance(node, Repeat):
        m, n = _first(node.item, memo)
        out = (m, n or node.min == 0)
    elif isinstance(node, Product) and node.op == "minus":
        out = _first(node.a, memo)
    else:  # references, Fields, intersections: anything
        out = (_ALL, True)
    memo[id(node)] = out
    return out


def _widen(_ref: RuleRef) -> Node:
    return _ANY_BYTES



def _disjoint(a: Node, b: Node, limit: int, deadline: float) -> bool:
    """Whether two regular languages share no string (False when a state limit leaves it open).

    Raises:
        TimeLimitExceeded: past the compile's deadline.
    """
    return proven_empty(Product(a, b, "and"), max_states=limit, deadline=deadline)


def _any_order(node: Node) -> Node:
    """``node`` with the members of every object in any order (a superset)."""
    return map_nodes(node, lambda n: isinstance(n, Fields), _member_loop)  # type: ignore[arg-type]


def _member_loop(f: Fields) -> Node:
    """The members of ``f`` in any order, repeats allowed, the first :data:`_OVER_REQUIRED`
    required members at least once each, and at most as many members as ``f`` emits where
    that is :data:`_OVER_MAX_COUNT` or fewer (``maxProperties: 1`` beside overlapping
    ``oneOf`` branches: unbounded, each branch's members loop, and the union of the
    branches' pairwise overlaps took a subset construction of 800,000 states)."""
    items = [(_any_order(x), r) for x, r in f.items]
    member = alt(*(x for x, _ in items), *(() if f.rest is None else (_any_order(f.rest),)))
    required = [x for x, r in items if r][:_OVER_REQUIRED]
    most = f.max_count if f.max_count is not None and f.max_count <= _OVER_MAX_COUNT else None
    if not required:
        return Fields((), f.first, f.sep, f.close_nonempty, f.close_empty, member, max_count=most)
    out: Node | None = None
    for x in required:
        once = seq(f.first, rep(seq(member, f.sep), 0, None), x, rep(seq(f.sep, member), 0, None), f.close_nonempty)
        out = once if out is None else Product(out, once, "and")
    assert out is not None
    if most is not None:
        out = Product(out, Fields((), f.first, f.sep, f.close_nonempty, f.close_empty, member, max_count=most), "and")
    return out


def _canonical_number(v: int | float) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, float):
        return format(Decimal(repr(v)), "f")
    return str(v)


def _over_literal(v: JsonValue, ws: Whitespace, depth: int) -> Node:
    """Every spelling of the listed value ``v`` an over-approximation must hold: canonical
    numbers too, object keys in every order (in any order, repeats allowed, past
    :data:`_OVER_ORDERS` keys)."""
    layout = Layout(ws, depth)
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return lit(dumps_layout(v, layout))
    if isinstance(v, (int, float)):
        return alt(lit(dumps_layout(v, layout)), lit(_canonical_number(v)))
    if isinstance(v, list):
        if not v:
            return lit(dumps_layout(v, layout))
        parts: list[Node] = [lit("["), layout.first]
        for i, x in enumerate(v):
            if i:
                parts.append(layout.sep)
            parts.append(_over_literal(x, ws, depth + 1))
        return seq(*parts, layout.close("]"))
    if isinstance(v, dict):
        if not v:
            return lit(dumps_layout(v, layout))
        members = [seq(lit(dumps_layout(k, layout)), layout.colon, _over_literal(x, ws, depth + 1)) for k, x in v.items()]
        if len(members) > _OVER_ORDERS:
            return seq(lit("{"), Fields((), layout.first, layout.sep, layout.close("}"), None, alt(*members)))
        orders = []
        for perm in permutations(members):
            body: list[Node] = [lit("{"), layout.first]
            for i, m in enumerate(perm):
                if i:
                    body.append(layout.sep)
                body.append(m)
            orders.append(seq(*body, layout.close("}")))
        return alt(*orders)
    return lit(dumps_layout(v, layout))


def _item_form(s: dict[str, JsonValue]) -> tuple[list[JsonValue], JsonValue] | None:
    """The positional item schemas and the schema of the items after them (None: no array
    keyword, or a malformed one left to the array compiler)."""
    if "prefixItems" in s:
        prefix = s["prefixItems"]
        return (list(prefix), s.get("items", True)) if isinstance(prefix, list) else None
    items = s.get("items")
    if isinstance(items, list):
        return list(items), s.get("additionalItems", True)
    if "items" in s:
        return [], items
    return None


def _both(x: JsonValue, y: JsonValue) -> JsonValue:
    if x is True or x == {} or x == y:
        return y
    if y is True or y == {}:
        return x
    if x is False or y is False:
        return False
    return {"allOf": [x, y]}


def _fold_arrays(a: dict[str, JsonValue], b: dict[str, JsonValue]) -> tuple[dict[str, JsonValue], dict[str, JsonValue]]:
    """``a`` and ``b`` rewritten so that merging their item keywords one by one is exact.

    ``items`` (draft 7: ``additionalItems``) applies after its own schema's positional
    items only, so each position takes the schema each conjunct gives it, and the tail the
    conjunction of both tails; both conjuncts then carry the same ``prefixItems``/``items``.
    """
    fa, fb = _item_form(a), _item_form(b)
    if fa is None or fb is None or fa == fb:
        return a, b
    (pa, ta), (pb, tb) = fa, fb
    prefix = [_both(pa[k] if k < len(pa) else ta, pb[k] if k < len(pb) else tb) for k in range(max(len(pa), len(pb)))]
    tail = _both(ta, tb)
    out = []
    for s in (a, b):
        s = {k: v for k, v in s.items() if k not in ("prefixItems", "items", "additionalItems")}
        if prefix:
            s["prefixItems"] = prefix
        s["items"] = tail
        out.append(s)
    return out[0], out[1]
