"""Languages over an array's item sequence, for ``contains`` and ``uniqueItems``, and over
an object's member sequence, for keys that must exist (:func:`witness_language`).

The array languages are built over whole arrays (brackets and separators in one :class:`Layout`) and
meet the array's own language by a product construction, so the item sequence is parsed
once: a JSON array splits into its items in exactly one way. :func:`count_language`
counts the items in one language; :func:`duplicate_language` holds the arrays where one
value occurs twice; :func:`finite_values` lists a finite item language grouped by JSON
value (``1`` and ``1.0`` are one value, objects compare by content).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from itertools import combinations
from math import comb
from typing import Hashable

import numpy as np

from maskc.compiler.errors import StateLimitExceeded
from maskc.compiler.frontends.json_schema.base import JsonValue
from maskc.compiler.frontends.json_schema.refs import has_ref
from maskc.compiler.frontends.json_text import Layout
from maskc.compiler.ir import NOTHING, Node, alt, lit, rep, seq

__all__ = ["count_language", "duplicate_language", "finite_values", "json_key", "witness_cost", "witness_language"]

_MAX_LENGTH = 2_000  # bytes of one listed item (the walk recurses once per byte)


def count_language(layout: Layout, hit: Node, miss: Node, lo: int, hi: int | None) -> Node:
    """Arrays whose items are each in ``hit`` or ``miss``, with ``lo..hi`` of them in ``hit``.

    Each item is written with what follows it (a separator or the closing bracket), so the
    count is a bounded repetition of one hit and the misses after it: linear in ``hi``.
    """
    sep, close = layout.sep, layout.close("]")
    misses = rep(seq(miss, sep), 0, None)
    unit = seq(hit, sep, misses)
    ends: list[Node] = []
    if hi is None or hi >= lo:
        ends.append(seq(misses, rep(unit, lo, hi), miss, close))  # the last item misses
    if hi is None or hi >= max(lo, 1):
        ends.append(seq(misses, rep(unit, max(lo - 1, 0), None if hi is None else hi - 1), hit, close))
    opts: list[Node] = [seq(layout.first, alt(*ends))]
    if lo == 0:
        opts.insert(0, layout.close_empty("]"))
    return seq(lit("["), alt(*opts))


def duplicate_language(layout: Layout, groups: list[Node]) -> Node:
    """Arrays over the items of ``groups`` in which two items come from one group (the
    spellings of one JSON value)."""
    sep, item = layout.sep, alt(*groups)
    between = rep(seq(sep, item), 0, None)
    twice = alt(*(seq(g, between, sep, g) for g in groups))
    return seq(lit("["), layout.first, rep(seq(item, sep), 0, None), twice, between, layout.close("]"))


def witness_language(sep: Node, members: Callable[[frozenset[int], frozenset[int]], Node], need: frozenset[int],
                     most: int | None) -> Node:
    """Member sequences ``X (sep X)*`` of at most ``most`` members (None: any number) where,
    for each ``j`` of ``need``, some member is a witness of ``j``.

    ``members(S, T)`` gives the members that witness, of the constraints ``T`` still open,
    exactly those of ``S`` (``S`` empty: the members that witness none of ``T``; one key may
    satisfy several constraints at once). Each member thus closes one set of constraints,
    determined by its key, so every sequence takes one path through the expression (an
    automaton for it stays as small as the expression, where a free choice of witnesses
    would make subset construction track every order they could be picked in). The tree
    holds :func:`witness_cost` members.
    """
    subsets = {t: [frozenset(c) for r in range(1, len(t) + 1) for c in combinations(sorted(t), r)]
               for t in (frozenset(c) for r in range(len(need) + 1) for c in combinations(sorted(need), r))}
    memo: dict[tuple[frozenset[int], int | None], Node] = {}

    def tail(t: frozenset[int], b: int | None) -> Node:
        """Up to ``b`` members, each after a separator, covering ``t``."""
        key = (t, b)
        got = memo.get(key)
        if got is not None:
            return got
        if not t:
            out = rep(seq(sep, members(t, t)), 0, b)
        elif b == 0:
            out = NOTHING
        else:
            nb = None if b is None else b - 1
            found = [seq(sep, members(s, t), tail(t - s, nb)) for s in subsets[t]]
            miss = seq(sep, members(frozenset(), t))
            out = seq(rep(miss, 0, None), alt(*found)) if b is None else alt(seq(miss, tail(t, nb)), *found)
        memo[key] = out
        return out

    if most is not None and most < 1:
        return NOTHING
    rest = None if most is None else most - 1
    first = [seq(members(s, need), tail(need - s, rest)) for s in subsets[need]]
    return alt(seq(members(frozenset(), need), tail(need, rest)), *first)


def witness_cost(need: int, most: int | None) -> int:
    """Members in the tree of :func:`witness_language` for ``need`` constraints (every set of
    them witnessed by some key): what lowering it copies."""
    memo: dict[tuple[int, int | None], int] = {}

    def tail(t: int, b: int | None) -> int:
        key = (t, b)
        if key not in memo:
            if t == 0:
                memo[key] = 1 if b is None else b
            elif b == 0:
                memo[key] = 0
            else:
                nb = None if b is None else b - 1
                found = sum(comb(t, k) * (1 + tail(t - k, nb)) for k in range(1, t + 1))
                memo[key] = found + 1 + (tail(t, nb) if b is not None else 0)
        return memo[key]

    if most is not None and most < 1:
        return 0
    rest = None if most is None else most - 1
    return 1 + tail(need, rest) + sum(comb(need, k) * (1 + tail(need - k, rest)) for k in range(1, need + 1))


def json_key(v: JsonValue) -> Hashable:
    """A key equal for two JSON values exactly when JSON Schema calls them equal."""
    if isinstance(v, bool):
        return ("b", v)
    if v is None:
        return ("n",)
    if isinstance(v, (int, float, Decimal)):
        return ("x", Fraction(v))
    if isinstance(v, str):
        return ("s", v)
    if isinstance(v, list):
        return ("a", tuple(json_key(x) for x in v))
    return ("o", frozenset((k, json_key(x)) for k, x in v.items()))


def finite_values(node: Node, max_strings: int, max_states: int, deadline: float) -> list[list[bytes]] | None:
    """The strings of ``node`` grouped by JSON value (first appearance first), or ``None``
    when the language is infinite, holds more than ``max_strings`` strings, or is too large
    to determinize under ``max_states``."""
    strings = _finite_strings(node, max_strings, max_states, deadline)
    if strings is None:
        return None
    groups: dict[Hashable, list[bytes]] = {}
    for s in strings:
        try:
            value = json.loads(s.decode("utf-8"), parse_float=Decimal)
        except (UnicodeDecodeError, ValueError):
            return None  # not a JSON text: nothing to compare by value
        groups.setdefault(json_key(value), []).append(s)
    return list(groups.values())


def _finite_strings(node: Node, cap: int, max_states: int, deadline: float) -> list[bytes] | None:
    from maskc.compiler.dfa import coreachable, determinize
    from maskc.compiler.nfa import lower

    if has_ref(node):
        return None
    try:
        dfa = determinize(lower(node, max_states=4 * max_states, deadline=deadline), max_states=max_states, deadline=deadline)
    except StateLimitExceeded:
        return None
    live = coreachable(dfa.trans, dfa.accepting)
    if not live[0]:
        return []
    members: list[list[int]] = [[] for _ in range(dfa.trans.shape[1])]
    for b, c in enumerate(dfa.byte_class.tolist()):
        members[c].append(b)
    trans = np.where(dfa.trans >= 0, dfa.trans, -1).tolist()
    accepting = dfa.accepting.tolist()
    live_list = live.tolist()
    out: list[bytes] = []
    on_path = [False] * len(trans)

    def walk(state: int, prefix: bytes) -> bool:
        """Extend ``prefix`` from ``state``; False once the language is known to be too large."""
        if on_path[state] or len(prefix) > _MAX_LENGTH:
            return False  # a cycle through live states (infinitely many strings), or too long
        if accepting[state]:
            out.append(prefix)
            if len(out) > cap:
                return False
        on_path[state] = True
        for c, nxt in enumerate(trans[state]):
            if nxt < 0 or not live_list[nxt]:
                continue
            for b in members[c]:
                if not walk(nxt, prefix + bytes((b,))):
                    return False
        on_path[state] = False
        return True

    return out if walk(0, b"") else None
