"""Keys an object must hold: ``not`` of ``propertyNames`` means some key lies outside the
names (:data:`KEY_EXISTS`, set by :mod:`.conditionals`). Each such key is witnessed by a
declared property whose name is in its language (that property becomes required) or by an
undeclared member (:func:`.sequences.witness_language`); :class:`WitnessesMixin` builds
the object for every choice of witnesses.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import product

from maskc.compiler.errors import EmptyLanguage
from maskc.compiler.frontends.json_schema.base import Base, JsonValue
from maskc.compiler.frontends.json_schema.refs import has_ref
from maskc.compiler.frontends.json_schema.sequences import witness_cost, witness_language
from maskc.compiler.frontends.json_text import Layout
from maskc.compiler.ir import NOTHING, Fields, Node, Product, alt, lit, seq
from maskc.compiler.product import proven_empty

__all__ = ["WitnessesMixin", "KEY_EXISTS", "MAX_KEY_WITNESSES", "MAX_WITNESS_CHOICES", "MAX_WITNESS_COPIES",
           "accepts_bytes"]

MAX_KEY_WITNESSES = 3
"""Most keys one object must hold (existence constraints): one member may witness any set of them."""
MAX_WITNESS_CHOICES = 16
"""Most ways to pick, per existence constraint, a declared property or an undeclared member as witness."""
MAX_WITNESS_COPIES = 1024
"""Most member copies the undeclared members that witness existence constraints may cost (a
``maxProperties`` bound copies them per count)."""

KEY_EXISTS = "$$keyExists"
"""Internal keyword (from ``not`` of ``propertyNames``): a list of ``[schema, pointer]``; for
each, the object (other values pass) has a key that ``schema`` accepts."""


def accepts_bytes(content: Node, data: bytes) -> bool:
    """Whether ``data`` is in ``content``'s (regular) language."""
    from maskc.compiler.dfa import determinize
    from maskc.compiler.nfa import lower

    return determinize(lower(content)).accepts(data)


class WitnessesMixin(Base):
    """Objects whose members must include keys of given languages."""

    def _key_needs(self, schema: dict[str, JsonValue], depth: int) -> list[tuple[Node, str]] | None:
        """The key languages of :data:`KEY_EXISTS` (JSON strings, one per distinct constraint,
        with the pointer of its ``not``); None when one admits no key (no object has it)."""
        raw = schema.get(KEY_EXISTS, [])
        out: list[tuple[Node, str]] = []
        for entry in raw if isinstance(raw, list) else []:
            kschema, kptr = entry[0], str(entry[1])
            self.bounded_any += 1  # only strings can be keys: the string language, made regular
            try:
                node = self.value({"allOf": [{"type": "string"}, kschema]}, kptr, depth + 1)
            except EmptyLanguage:
                node = NOTHING
            finally:
                self.bounded_any -= 1
            if node == NOTHING:
                return None
            if has_ref(node):
                self.unsupported("not", kptr, "the name schema is recursive")
                continue
            if all(node != n for n, _ in out):
                out.append((node, kptr))
        if len(out) > MAX_KEY_WITNESSES:
            self.unsupported("not", out[MAX_KEY_WITNESSES][1],
                             f"more than {MAX_KEY_WITNESSES} keys that one object must hold")
            out = out[:MAX_KEY_WITNESSES]  # lenient: the others are not enforced (recorded)
        return out

    def _witnessed(
        self, items: list[tuple[Node, bool]], item_keys: list[bytes], rest_parts: list[tuple[Node, Node]],
        layout: Layout, bounds: tuple[int, int | None], needs: list[tuple[Node, str]],
    ) -> Node:
        """The object whose members include, for each key language of ``needs``, a key in it.

        Each constraint picks its witness: a declared property whose name is in the language
        (that property becomes required) or an undeclared member. Declared members come
        first in their order, so the undeclared ones form one run that must cover what the
        declared picks left (:func:`witness_language`), emitted as one last required item of
        the :class:`Fields`. That item counts as one member towards ``minProperties`` (two
        undeclared keys may be one key repeated, as for any undeclared members) and its
        members count one by one towards ``maxProperties``: with a maximum, the object is
        split by the number of declared members emitted.
        """
        lo, hi = bounds
        limit = self.options.limits.max_states
        where = needs[0][1] if needs else ""
        choices: list[list[int]] = []  # per constraint: item indices, -1 for an undeclared member
        for lang, _ in needs:
            declared = [i for i, kb in enumerate(item_keys) if accepts_bytes(lang, kb)]
            choices.append(declared + ([-1] if rest_parts else []))
        variants: set[tuple[frozenset[int], frozenset[int]]] = set()
        count = 1
        for c in choices:
            count *= len(c)
        if count > MAX_WITNESS_CHOICES:
            self.unsupported("not", where, f"more than {MAX_WITNESS_CHOICES} ways to pick the members whose keys "
                             "must exist (declared properties whose names could be one)")
            return self._witnessed(items, item_keys, rest_parts, layout, bounds, [])  # lenient: without them
        for pick in product(*choices):
            variants.add((frozenset(i for i in pick if i >= 0), frozenset(j for j, i in enumerate(pick) if i < 0)))
        # a variant needing more than another (a superset of both sets) adds no object
        kept = [v for v in variants if not any(w != v and w[0] <= v[0] and w[1] <= v[1] for w in variants)]
        kept.sort(key=lambda v: (sorted(v[0]), sorted(v[1])))
        keys: dict[tuple[frozenset[int], frozenset[int]], Node] = {}

        def witnesses(s: frozenset[int], t: frozenset[int]) -> Node:
            """The undeclared members whose key is in the languages of ``s`` and in none of
            the other languages of ``t``."""
            got = keys.get((s, t))
            if got is not None:
                return got
            inside = [needs[j][0] for j in sorted(s)]
            outside = alt(*(needs[j][0] for j in sorted(t - s)))
            found = []
            for key, vnode in rest_parts:
                k = key
                for lang in inside:
                    k = Product(k, lang, "and")
                if outside != NOTHING:
                    k = Product(k, outside, "minus")
                if k is key or not proven_empty(k, max_states=limit, deadline=self.deadline):
                    found.append(seq(k, layout.colon, vnode))
            keys[(s, t)] = out = alt(*found)
            return out

        rest = alt(*(seq(k, layout.colon, v) for k, v in rest_parts)) if rest_parts else None
        n = len(items)
        cost = 0
        plans: list[tuple[list[tuple[Node, bool]], frozenset[int], int | None, int, int | None]] = []
        for chosen, undeclared in kept:
            vitems = [(node, req or i in chosen) for i, (node, req) in enumerate(items)]
            if not undeclared:
                plans.append((vitems, undeclared, None, lo, hi))
                continue
            if hi is None:
                plans.append((vitems, undeclared, None, lo, None))
                cost += witness_cost(len(undeclared), None)
                continue
            n_req = sum(1 for _, r in vitems if r)
            for e in range(max(n_req, lo - 1), min(n, hi - 1) + 1):
                plans.append((vitems, undeclared, hi - e, e + 1, e + 1))
                cost += witness_cost(len(undeclared), hi - e)
        if cost > MAX_WITNESS_COPIES:
            under = "" if hi is None else f" under maxProperties {hi}"
            self.unsupported("not", where, f"the undeclared members that must hold keys the object needs{under} "
                             f"cost more than {MAX_WITNESS_COPIES} member copies")
            return self._witnessed(items, item_keys, rest_parts, layout, bounds, [])  # lenient: without them
        close, empty = layout.close("}"), layout.close_empty("}")
        out: list[Node] = []
        for vitems, undeclared, most, vlo, vhi in plans:
            if not undeclared:
                has_required = any(r for _, r in vitems)
                out.append(Fields(tuple(vitems), layout.first, layout.sep, close, None if has_required else empty,
                                  rest, vlo, vhi))
                continue
            run = witness_language(layout.sep, witnesses, undeclared, most)
            if run != NOTHING:
                out.append(Fields((*vitems, (run, True)), layout.first, layout.sep, close, None, None, vlo, vhi))
        return seq(lit("{"), alt(*out))

    def literals(self, values: list[JsonValue], schema: dict[str, JsonValue], pointer: str, depth: int) -> Node:
        """Listed values, checked against :data:`KEY_EXISTS` here (a JSON Schema validator
        does not know that keyword) and against the other keywords by the next class."""
        raw = schema.get(KEY_EXISTS)
        if isinstance(raw, list):
            schema = {k: v for k, v in schema.items() if k != KEY_EXISTS}
            checker: Callable[[dict[str, JsonValue], str], Callable[[JsonValue], bool]] = \
                self.value_checker  # type: ignore[attr-defined]
            checks = [checker({"allOf": [{"type": "string"}, e[0]]}, str(e[1])) for e in raw]
            values = [v for v in values if not isinstance(v, dict) or all(any(c(k) for k in v) for c in checks)]
        node: Node = super().literals(values, schema, pointer, depth)  # type: ignore[misc]
        return node
