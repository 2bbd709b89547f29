"""Arrays: ``items``, ``prefixItems`` (draft 7 and 2019-09: ``items`` as a list and
``additionalItems``), ``minItems``, ``maxItems``, ``contains`` with ``minContains`` and
``maxContains``, ``uniqueItems`` and ``unevaluatedItems``.

A DFA counts items by copying the item's automaton once per position, so a large count
of large items exceeds the state budget (:class:`StateLimitExceeded`, raised by
``--max-states``; lenient: the bound is dropped and recorded), unless counted loops
(:mod:`maskc.compiler.counters`) count them. A recursive item is one call edge per
position, so only the rest of the item is counted; and in a grammar with rules (or whose
references can cycle), where counted loops do not count, an item too large to copy becomes
a rule of its own (:attr:`~maskc.compiler.ir.Grammar.calls`), one call edge per position.

``contains`` counts the items in its language (:func:`.sequences.count_language`); with
``maxContains`` the other items must fail it, so they come from :func:`.complement.complement`.
When the items are plain (no ``prefixItems``, ``items`` absent, no ``maxItems``) the count
is the array itself; otherwise it meets the array by a product construction, which needs
regular items: free-form values inside are bounded as in ``oneOf``, and recursion is
refused. ``uniqueItems`` takes items from a short finite list of values and removes the
arrays that repeat one (:func:`.sequences.duplicate_language`). ``unevaluatedItems`` is
read in the schema that holds it: the items that ``prefixItems``, ``items`` (or
``additionalItems``) and ``contains`` leave unevaluated; it is refused where other
applicators could evaluate items (a schema merged from ``allOf``, ``$ref`` siblings or
union branches, or one with ``not``/``if``/``dependentSchemas``).
"""

from __future__ import annotations

import time

from maskc.compiler.errors import EmptyLanguage, SchemaError, StateLimitExceeded, TimeLimitExceeded, UnsupportedKeyword
from maskc.compiler.frontends.json_schema.base import TYPES, Base, JsonValue
from maskc.compiler.frontends.json_schema.base import ptr as _ptr
from maskc.compiler.frontends.json_schema.complement import complement
from maskc.compiler.frontends.json_schema.refs import has_ref, map_refs
from maskc.compiler.frontends.json_schema.sequences import count_language, duplicate_language, finite_values
from maskc.compiler.frontends.json_text import Layout
from maskc.compiler.ir import NOTHING, Alt, ByteSet, Node, Product, Repeat, RuleRef, Seq, alt, lit, rep, seq

__all__ = ["ArraysMixin"]

CONTAINS_CAP = 64
"""``minContains``/``maxContains`` above this are refused (the count is copied per match)."""
UNIQUE_VALUES = 8
"""``uniqueItems`` over at most this many distinct item values (the product tracks subsets)."""
_UNIQUE_STRINGS = 64  # spellings of those values, listed
_UNIQUE_MAX_STATES = 2_000  # the item language is determinized to list it
# A product whose sides' sizes multiply past this many times max_states is refused up front:
# the two sides of an array product mostly move in step, so the real product is far smaller.
_PRODUCT_FACTOR = 250
# Keywords that may evaluate items in place: unevaluatedItems next to them is refused.
_IN_PLACE = frozenset({
    "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref", "$dynamicRef", "$recursiveRef",
    "dependentSchemas", "dependencies",
})


class ArraysMixin(Base):
    """The ``array`` type."""

    _document_ids: frozenset[int] | None = None

    def array(self, schema: dict[str, JsonValue], pointer: str, depth: int) -> Node:
        layout = Layout(self.options.whitespace, depth)
        lo = _whole(schema, "minItems", pointer) or 0
        hi = _whole(schema, "maxItems", pointer)
        prefix, tail, unevaluated = self._item_schemas(schema, pointer)
        contains = self._contains(schema, pointer)
        counted = contains is not None and (contains[2] > 0 or contains[3] is not None)
        plain_tail = tail[0] is True or tail[0] == {}
        direct = counted and not prefix and plain_tail and hi is None and contains is not None and lo <= contains[2]
        if counted and contains is not None and not direct and not prefix and hi is None and lo <= contains[2] \
                and contains[3] is None and not unevaluated and schema.get("uniqueItems") is not True:
            # Items that match contains are the items schema and contains merged (allOf): the
            # count needs no product and no regular items.
            try:
                hit = self.value({"allOf": [tail[0], contains[0]]}, contains[1], depth + 1)
            except UnsupportedKeyword:
                pass  # the two schemas do not merge: count over the product below
            else:
                return count_language(layout, hit, self.value(tail[0], tail[1], depth + 1), contains[2], None)
        at_most_one = hi is not None and hi <= 1 or tail[0] is False and len(prefix) <= 1
        unique = schema.get("uniqueItems") is True and not at_most_one
        regular = unique or (counted and not direct)
        if regular:
            self.bounded_any += 1  # free-form values inside become regular (a sound restriction)
        try:
            nodes = [self.value(s, p, depth + 1) for s, p in prefix]
            tail_node = self.value(tail[0], tail[1], depth + 1)
            hit = miss = NOTHING
            least, most = 0, None
            if contains is not None:
                hit = self.value(contains[0], contains[1], depth + 1)
                if unevaluated:
                    tail_node = alt(hit, tail_node)  # the items contains matches are evaluated
                least = contains[2]
                kinds = frozenset(TYPES) if direct else _json_types(alt(*nodes, tail_node))
                other, most = self._misses(contains, depth, kinds)
                if other is not None:
                    miss = other
                else:  # any item may go uncounted
                    miss = self.any_value(depth + 1) if direct else alt(*nodes, tail_node)
            if direct:
                return count_language(layout, hit, miss, least, most)  # minItems <= minContains
            out = self._sequence(layout, nodes, tail_node, lo, hi, pointer, tail[1], depth + 1)
            if counted and contains is not None:
                if any(has_ref(x) for x in (out, hit, miss)):
                    self.unsupported("contains", contains[1], "the items or the contains schema hold recursion: "
                                     "counting matches needs regular item languages")
                else:
                    counts = count_language(layout, hit, miss, least, most)
                    if self._product_fits(out, counts, contains[1], "contains"):
                        out = Product(out, counts, "and")
            if unique:
                out = self._unique(layout, out, nodes, tail_node, hi, pointer)
            return out
        finally:
            if regular:
                self.bounded_any -= 1

    def _item_schemas(self, schema: dict[str, JsonValue], pointer: str
                      ) -> tuple[list[tuple[JsonValue, str]], tuple[JsonValue, str], bool]:
        """The positional item schemas, the schema of the items after them, and whether
        that schema is ``unevaluatedItems`` (so items ``contains`` matches are exempt).

        The form follows the keywords: ``prefixItems`` with ``items`` (2020-12), or ``items``
        as a list with ``additionalItems`` (draft 7, 2019-09)."""
        if "prefixItems" in schema:
            prefix, pkw, tkw = schema["prefixItems"], "prefixItems", "items"
        elif isinstance(schema.get("items"), list):
            prefix, pkw, tkw = schema["items"], "items", "additionalItems"
        else:
            prefix, pkw, tkw = [], "prefixItems", "items"
        if not isinstance(prefix, list):
            raise SchemaError(f"{pkw} must be an array of schemas", pointer=_ptr(pointer, pkw))
        positions = [(s, _ptr(pointer, pkw, i)) for i, s in enumerate(prefix)]
        rest = schema.get("unevaluatedItems", True)
        if rest is True or rest == {}:
            return positions, (schema.get(tkw, True), _ptr(pointer, tkw)), False
        uptr = _ptr(pointer, "unevaluatedItems")
        if not self._own(schema):
            self.unsupported("unevaluatedItems", uptr, "in a schema merged from allOf, $ref siblings or union "
                             "branches: which subschema evaluated an item is lost in the merge")
        elif _IN_PLACE & set(schema):
            names = ", ".join(sorted(_IN_PLACE & set(schema)))
            self.unsupported("unevaluatedItems", uptr, f"next to {names}, which may evaluate items in place")
        elif tkw in schema:
            return positions, (schema[tkw], _ptr(pointer, tkw)), False  # every item is evaluated
        else:
            evaluates = "contains" in schema and "2019-09" not in str(self._schema_uri())
            return positions, (rest, uptr), evaluates
        return positions, (schema.get(tkw, True), _ptr(pointer, tkw)), False

    def _contains(self, schema: dict[str, JsonValue], pointer: str) -> tuple[JsonValue, str, int, int | None] | None:
        """``contains`` with its bounds (``minContains`` defaults to 1), or None when absent."""
        if "contains" not in schema:
            return None  # minContains and maxContains without contains are ignored
        least = _whole(schema, "minContains", pointer)
        most = _whole(schema, "maxContains", pointer)
        for kw, v in (("minContains", least), ("maxContains", most)):
            if v is not None and not self._own(schema):
                self.unsupported(kw, _ptr(pointer, kw), "in a schema merged from allOf, $ref siblings or union "
                                 "branches: the contains it counts may come from another subschema")
                least, most = (None, most) if kw == "minContains" else (least, None)
            elif v is not None and v > CONTAINS_CAP:
                self.unsupported(kw, _ptr(pointer, kw), f"{kw} {v} is over {CONTAINS_CAP}: each match is a copy "
                                 "of the item automaton")
                least, most = (None, most) if kw == "minContains" else (least, None)
        return schema["contains"], _ptr(pointer, "contains"), 1 if least is None else least, most

    def _misses(self, contains: tuple[JsonValue, str, int, int | None], depth: int,
                kinds: frozenset[str]) -> tuple[Node | None, int | None]:
        """The items ``contains`` must not count, and the bound on the count: the schema's
        complement when ``maxContains`` bounds the count, else None (any item may go
        uncounted) and no bound."""
        schema, cptr, _, most = contains
        if most is None:
            return None, None
        other = complement(self, schema, cptr, depth + 1, kinds)
        if other is None:
            self.unsupported("maxContains", cptr.rsplit("/", 1)[0] + "/maxContains",
                             "the complement of this contains schema is not expressible: only type, const, "
                             "enum of scalars, numeric bounds, length bounds and pattern are")
            return None, None
        return other, most

    def _unique(self, layout: Layout, out: Node, nodes: list[Node], tail: Node, hi: int | None, pointer: str) -> Node:
        """``out`` without the arrays that repeat a value, when the items are a short list."""
        used = [n for i, n in enumerate(nodes) if hi is None or i < hi]
        if hi is None or hi > len(nodes):
            used.append(tail)
        groups = finite_values(alt(*used), _UNIQUE_STRINGS, _UNIQUE_MAX_STATES, self.deadline)
        uptr = _ptr(pointer, "uniqueItems")
        if groups is None:
            self.unsupported("uniqueItems", uptr, "the items are not a short finite list of values (const, enum, "
                             "boolean, null); distinct values of an infinite item language are not regular")
            return out
        if len(groups) > UNIQUE_VALUES:
            self.unsupported("uniqueItems", uptr, f"the items hold {len(groups)} values; distinct arrays over more "
                             f"than {UNIQUE_VALUES} values need too many states")
            return out
        if len(groups) < 1:
            return out
        repeats = duplicate_language(layout, [alt(*(lit(s) for s in g)) for g in groups])
        if not self._product_fits(out, repeats, uptr, "uniqueItems"):
            return out
        return Product(out, repeats, "minus")

    def _product_fits(self, a: Node, b: Node, pointer: str, keyword: str) -> bool:
        """Whether the product of ``a`` and ``b`` stays within the state budget by a cheap
        bound (the product of their sizes); refuses ``keyword`` where it does not."""
        budget = self.options.limits.max_states
        sa = _dfa_size(a, budget, self.deadline)
        sb = _dfa_size(b, budget, self.deadline)
        if sa * sb <= _PRODUCT_FACTOR * budget:
            return True
        self.unsupported(keyword, pointer, f"the array (~{sa} states) and the {keyword} constraint (~{sb} "
                         f"states) meet in a product of up to ~{sa * sb} states, over the budget "
                         f"({_PRODUCT_FACTOR} x max_states {budget}); give the items a type or a smaller schema")
        return False

    def _may_call(self) -> bool:
        """Whether a counted item may become a rule here: in a grammar that has rules, or
        will (its references can cycle), where counted loops, which the pushdown path has
        not, do not count; and not where the array must stay a regular language (free-form
        values bounded for a product or a difference, an over-approximation)."""
        if self.bounded_any or getattr(self, "_over", 0):
            return False
        return self.with_rules or self.refs_may_cycle()

    def _own(self, schema: dict[str, JsonValue]) -> bool:
        """Whether ``schema`` is an object of the document (not one merged by the compiler)."""
        if self._document_ids is None:
            found: set[int] = set()
            stack: list[JsonValue] = [self.root]
            while stack:
                node = stack.pop()
                if isinstance(node, dict):
                    found.add(id(node))
                    stack.extend(node.values())
                elif isinstance(node, list):
                    stack.extend(node)
            self._document_ids = frozenset(found)
        return id(schema) in self._document_ids

    def _schema_uri(self) -> JsonValue:
        return self.root.get("$schema", "") if isinstance(self.root, dict) else ""

    def _sequence(self, layout: Layout, nodes: list[Node], tail: Node, lo: int, hi: int | None,
                  pointer: str, tail_pointer: str = "", depth: int = 0) -> Node:
        """Arrays of ``lo..hi`` items: ``nodes`` at their positions, ``tail`` (the schema at
        ``tail_pointer``, at ``depth``) after them."""
        counted = (hi if hi is not None else lo) - len(nodes)
        if counted > 1 and tail != NOTHING:
            # A DFA counts items by copying the item's automaton once per position.
            max_states = self.options.limits.max_states
            # Lowering stops as soon as the item is too large to count: the estimate only has to
            # tell whether size * counted exceeds the budget, so a huge item costs no more.
            cap = max_states // 4 // counted + 1
            size = _dfa_size(map_refs(tail, _call_edge) if self.with_rules else tail, cap,
                             self.deadline)
            planned = False  # (counted loops size the item, with its own loops nested where it has some)
            if size * counted > max_states // 4 and not self.with_rules:
                # Counted loops (maskc.compiler.counters) build copies only near the bounds.
                plan = _counted_copies(seq(layout.sep, tail), lo, hi, len(nodes), max_states, self.deadline)
                if plan is not None and plan[0] < counted:
                    counted, size = plan
                    cap = size  # the item's exact size
                    planned = True
            if size * counted > max_states // 4 and self._may_call():
                # Still too many copies: the item becomes a rule, each position one call edge.
                tail = self.call_rule(tail, tail_pointer or _ptr(pointer, "items"), depth)
                size = cap = 1  # (a call is one edge: see _call_edge)
            if size * counted > max_states // 4 and size > cap:
                # The cap only told that the repeat is over budget; the message and its hint
                # need the item's own size (on this path only, for a second at most).
                size, cap = _item_size(map_refs(tail, _call_edge) if self.with_rules else tail, cap,
                                       max_states, self.deadline)
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
                        hint=_budget_hint(size, cap, counted, max_states, nested=not self.with_rules and not planned
                                          and _holds_counted_loop(tail))
                        + f", lower {kw}, or compile with --lenient to drop the bound (recorded as not enforced)",
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


def _whole(schema: dict[str, JsonValue], kw: str, pointer: str) -> int | None:
    """The non-negative integer ``schema[kw]`` (``2.0`` reads as 2), None when absent."""
    v = schema.get(kw)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v != int(v):
        raise SchemaError(f"{kw} must be a non-negative integer", pointer=_ptr(pointer, kw))
    return int(v)


_TYPE_OF_BYTE = {ord('"'): "string", ord("-"): "number", ord("t"): "boolean", ord("f"): "boolean",
                 ord("n"): "null", ord("{"): "object", ord("["): "array", **{b: "number" for b in range(0x30, 0x3A)}}


def _json_types(node: Node) -> frozenset[str]:
    """The JSON types of the values ``node`` spells, read off its first bytes (every type
    where a first byte is unknown: a reference, a product, a wide byte range)."""
    firsts = _first_bytes(node, {})
    kinds = {"?"} if firsts is None else {_TYPE_OF_BYTE.get(b, "?") for b in firsts[0]}
    return frozenset(TYPES) if "?" in kinds else frozenset(kinds)


def _first_bytes(node: Node, memo: dict[int, tuple[frozenset[int], bool] | None]) -> tuple[frozenset[int], bool] | None:
    """The bytes ``node``'s strings start with and whether it holds the empty string; None
    where unknown."""
    if id(node) in memo:
        return memo[id(node)]
    out: tuple[frozenset[int], bool] | None = None
    if isinstance(node, ByteSet):
        if sum(hi - lo + 1 for lo, hi in node.ranges) <= 64:
            out = (frozenset(b for lo, hi in node.ranges for b in range(lo, hi + 1)), False)
    elif isinstance(node, (Seq, Alt)):
        acc: set[int] = set()
        known, nullable = True, isinstance(node, Seq)
        for item in node.items:
            got = _first_bytes(item, memo)
            if got is None:
                known = False
                break
            acc.update(got[0])
            if isinstance(node, Alt):
                nullable = nullable or got[1]
            elif not got[1]:
                nullable = False
                break
        out = (frozenset(acc), nullable) if known else None
    elif isinstance(node, Repeat):
        got = _first_bytes(node.item, memo)
        if got is not None:
            out = (got[0], got[1] or node.min == 0)
    memo[id(node)] = out
    return out


def _call_edge(_ref: RuleRef) -> Node:
    return lit(b"\x00")  # a call is one edge: count it as one byte


ASSUMED_HORIZON = 128
"""The longest token the front end plans counted loops for (its grammar is the same for
every tokenizer; 128 bytes is DeepSeek's longest token, and the usual cap of byte-level BPE
merges). Compiling for a vocabulary, the plan also keeps to the items its tokens can
complete (:func:`maskc.compiler.nfa.item_reach`). A tokenizer with longer tokens gets
more copies, which the compile's own state limits still bound."""


def _counted_copies(unit: Node, lo: int, hi: int | None, fixed: int, max_states: int,
                    deadline: float) -> tuple[int, int] | None:
    """Copies of ``unit`` (a separator and an item) that counted loops would build for the
    items after the ``fixed`` positional ones, and the states of each; None where they
    would not count."""
    from maskc.compiler.nfa import counted_copies

    need = max(0, lo - fixed - 1)
    more = None if hi is None else hi - fixed - 1
    if more is not None and more < need:
        return None
    try:
        return counted_copies(unit, need, more, ASSUMED_HORIZON, max_states=max_states, deadline=deadline)
    except StateLimitExceeded:
        return None


def _holds_counted_loop(item: Node) -> bool:
    from maskc.compiler.nfa import holds_counted_loop

    return holds_counted_loop(item, ASSUMED_HORIZON)


def _budget_hint(size: int, cap: int, counted: int, max_states: int, *,
                 nested: bool = False) -> str:
    """What budget would count ``counted`` items of ``size`` states (``size > cap``: over
    ``cap``). ``nested``: the item holds a counted loop of its own that could not nest in
    this count (its count ambiguous, or the item beginning inside it), so ``size`` is its
    states with that loop unrolled, not what the item takes alone: lowering that repeat's
    bound comes first, and a budget is offered only where the unrolled item fits ``max_states``."""
    over = size > cap >= max_states  # the item, as copied, is over the whole budget
    need = None if over else (f"{4 * size * counted} or more" if size <= cap
                              else f"over {4 * cap * counted} (the item is over {cap} states)")
    if nested:
        states = f"over {cap}" if size > cap else f"~{size}"
        return ("the item holds a bounded repeat of its own (a maxLength, maxItems or {m,n} with "
                "bounds far apart): alone it compiles as a counted loop, but its count could not "
                "nest in this one, so this count copies the item whole with that repeat unrolled "
                f"({states} states): lower the item's own bound"
                + (f", raise --max-states to {need}" if need is not None else ""))
    if need is None:
        return f"the item alone is over max_states ({max_states}): simplify the item"
    return f"a counted repeat may take a quarter of max_states ({max_states}): raise --max-states to {need}"


ITEM_SIZE_SECONDS = 1.0
"""How long a refusal may spend sizing an item for its message (caps grow 8x a round)."""


def _item_size(node: Node, cap: int, max_states: int, deadline: float) -> tuple[int, int]:
    """``(size, cap)`` of an item known to be over ``cap`` states: lowered again with caps
    8x larger, up to ``max_states``, for :data:`ITEM_SIZE_SECONDS` at most; ``size > cap``
    still means only "over ``cap``"."""
    stop = time.monotonic() + ITEM_SIZE_SECONDS
    size = cap + 1
    while size > cap and cap < max_states:
        wider = min(max_states, cap * 8)
        try:
            size = _dfa_size(node, wider, min(deadline, stop))
        except TimeLimitExceeded:
            break
        cap = wider
    return size, cap


def _dfa_size(node: Node, cap: int, deadline: float) -> int:
    """A cheap estimate of the DFA size of ``node``: half its NFA states, or ``cap + 1`` when
    that is more than ``cap`` (lowering stops there)."""
    from maskc.compiler.nfa import lower

    try:
        size = lower(node, max_states=2 * cap + 2, deadline=deadline).size // 2
    except StateLimitExceeded:
        return cap + 1
    return min(size, cap + 1)
