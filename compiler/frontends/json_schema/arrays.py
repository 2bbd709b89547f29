"""Arrays: ``items``, ``prefixItems`` (draft 7: ``items`` as a list, ``additionalItems``),
``minItems``, ``maxItems``.

A DFA counts items by copying the item's automaton once per position, so a large count
of large items exceeds the state budget (:class:`StateLimitExceeded`, raised by
``--max-states``; lenient: the bound is dropped and recorded). A recursive item is one
call edge per position, so only the rest of the item is counted.
"""

from __future__ import annotations

from maskc.compiler.errors import EmptyLanguage, SchemaError, StateLimitExceeded
from maskc.compiler.frontends.json_schema.base import Base, JsonValue
from maskc.compiler.frontends.json_schema.base import ptr as _ptr
from maskc.compiler.frontends.json_schema.refs import map_refs
from maskc.compiler.frontends.json_text import Layout
from maskc.compiler.ir import NOTHING, Node, RuleRef, alt, lit, rep, seq

__all__ = ["ArraysMixin"]


class ArraysMixin(Base):
    """The ``array`` type."""

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
            max_states = self.options.limits.max_states
            # Lowering stops as soon as the item is too large to count: the estimate only has to
            # tell whether size * counted exceeds the budget, so a huge item costs no more.
            cap = max_states // 4 // counted + 1
            size = _dfa_size(map_refs(tail, _call_edge) if self.recursive else tail, cap, self.deadline)
            if size * counted > max_states // 4:
                kw = "maxItems" if hi is not None else "minItems"
                each = f"~{size}" if size <= cap else f"over {cap}"
                total = f"~{size * counted}" if size <= cap else f"over {cap * counted}"
                need = f"counting {counted} items of {each} states each needs {total} states"
                if not self.options.lenient:
                    raise StateLimitExceeded(
                        f"{kw} {hi if hi is not None else lo} counts items of {each} states each; the "
                        f"repeat (at most a quarter of max_states {max_states})", limit=max_states // 4,
                        got=size * counted, pointer=_ptr(pointer, kw),
                        hint=f"a counted repeat may take a quarter of max_states ({max_states}): raise "
                        f"--max-states to {4 * size * counted} or more, lower {kw}, or compile with "
                        "--lenient to drop the bound (recorded as not enforced)",
                    )
                self.unsupported(kw, _ptr(pointer, kw), f"{need}, over a quarter of max_states ({max_states})")
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


def _call_edge(_ref: RuleRef) -> Node:
    return lit(b"\x00")  # a call is one edge: count it as one byte


def _dfa_size(node: Node, cap: int, deadline: float) -> int:
    """A cheap estimate of the DFA size of ``node``: half its NFA states, or ``cap + 1`` when
    that is more than ``cap`` (lowering stops there)."""
    from maskc.compiler.errors import StateLimitExceeded
    from maskc.compiler.nfa import lower

    try:
        size = lower(node, max_states=2 * cap + 2, deadline=deadline).size // 2
    except StateLimitExceeded:
        return cap + 1
    return min(size, cap + 1)
