"""``allOf``, ``anyOf``, ``oneOf`` and the forms of ``not`` a grammar can express.

``allOf`` is merged at the schema level (keyword by keyword) before compiling, so its
language is exact; a merge that loops back into the schema being merged before entering an
object or array is refused. ``oneOf`` removes the strings two branches share (a product
construction); when the branches hold rules, that difference is not regular: branches
proven disjoint (by their first bytes, or with references widened to any bytes) are a
plain union; otherwise free-form
values inside are bounded (:data:`ONEOF_ANY_DEPTH`, a sound restriction) to make the
branches regular again, and branches with recursion of their own are refused (lenient:
compiled as ``anyOf`` and recorded).
"""

from __future__ import annotations

import json

from maskc.compiler.errors import SchemaError, StateLimitExceeded, UnsupportedKeyword
from maskc.compiler.frontends.json_schema.base import ANNOTATIONS, TYPES, Base, JsonValue, ptr
from maskc.compiler.frontends.json_schema.refs import has_ref, map_refs
from maskc.compiler.ir import Alt, ByteSet, Node, Product, Repeat, RuleRef, Seq, alt, byte_range, rep

__all__ = ["CombinatorsMixin"]

_ANY_BYTES = rep(byte_range(0, 255), 0, None)
_DISJOINT_MAX_STATES = 2_000  # a disjointness proof is a convenience: give up early
_ALL = (1 << 256) - 1


class CombinatorsMixin(Base):
    """``allOf`` / ``anyOf`` / ``oneOf`` / ``not``."""

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
            key, lambda: self.value(self.merge_allof(schema, pointer), pointer, depth),
            depth, keyword, pointer, "#" + ptr(pointer, keyword),
        )

    def merge_allof(self, schema: dict[str, JsonValue], pointer: str) -> dict[str, JsonValue]:
        """One schema equivalent to ``schema``'s ``allOf`` and its other keywords.

        Raises:
            UnsupportedKeyword: a conjunct is (through ``$ref``) the schema being merged.
        """
        parts = schema["allOf"]
        if not isinstance(parts, list) or not parts:
            raise SchemaError("allOf must be a non-empty array", pointer=ptr(pointer, "allOf"))
        merged: dict[str, JsonValue] = {k: v for k, v in schema.items() if k != "allOf"}
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
                if "allOf" in sub:
                    sub = self.merge_allof(sub, sptr)
                merged = self.merge_two(merged, sub, sptr)
        finally:
            self.merging.pop()
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
            raise SchemaError(f"{kw} must be a non-empty array", pointer=ptr(pointer, kw))
        base = {k: v for k, v in schema.items() if k != kw}
        structural = set(base) - ANNOTATIONS
        subs: list[tuple[JsonValue, str]] = []
        for i, br in enumerate(branches):
            bptr = ptr(pointer, kw, i)
            if structural:
                br, _ = self.deref(br, bptr)
                sub = {"allOf": [base, br]} if isinstance(br, dict) else (base if br is True else False)
            else:
                sub = br
            subs.append((sub, bptr))
        nodes = [self.value(sub, bptr, depth) for sub, bptr in subs]
        if kw == "oneOf" and len(nodes) > 1:
            if self.recursive and any(has_ref(n) for n in nodes):
                if _first_bytes_disjoint(nodes):
                    return alt(*nodes)  # e.g. branches of different JSON types
                # Their difference needs regular languages: free-form values inside are
                # nested at most ONEOF_ANY_DEPTH deep here (a sound restriction).
                self.bounded_any += 1
                try:
                    nodes = [self.value(sub, bptr, depth) for sub, bptr in subs]
                finally:
                    self.bounded_any -= 1
                if any(has_ref(n) for n in nodes):
                    if self.pairwise_disjoint(nodes):
                        return alt(*nodes)
                    self.unsupported(
                        "oneOf", ptr(pointer, kw),
                        "branches may overlap and hold recursive references; exclusivity over "
                        "a recursive grammar cannot be enforced",
                    )
                    return alt(*nodes)
            # Exactly one branch must match: remove strings that two branches share.
            overlaps = [Product(x, y, "and") for i, x in enumerate(nodes) for y in nodes[i + 1 :]]
            return Product(alt(*nodes), alt(*overlaps), "minus")
        return alt(*nodes)

    def pairwise_disjoint(self, nodes: list[Node]) -> bool:
        """Whether no two branches share a string, each reference widened to any bytes."""
        wide = [map_refs(n, _widen) for n in nodes]
        limit = min(self.options.limits.max_states, _DISJOINT_MAX_STATES)
        return all(_disjoint(x, y, limit, self.deadline) for i, x in enumerate(wide) for y in wide[i + 1 :])


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
    from maskc.compiler.dfa import coreachable, determinize
    from maskc.compiler.nfa import lower

    try:
        nfa = lower(Product(a, b, "and"), max_states=limit * 4, deadline=deadline)
        dfa = determinize(nfa, max_states=limit, deadline=deadline)
    except StateLimitExceeded:
        return False
    return not bool(coreachable(dfa.trans, dfa.accepting)[0])
