"""Lower a Grammar IR tree into a byte-level Thompson NFA.

The NFA is built in plain lists (it is transient): epsilon edges and byte-range edges per
state. :func:`lower` builds one expression, :func:`lower_rules` the rules of a pushdown
grammar side by side, where a :class:`RuleRef` becomes a *call edge* labelled
``CALL_BASE + rule index`` (above every byte). A ``max_states`` limit turns a grammar that
would explode (large bounded repetitions of large items) into a clear error.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

import threading
import time

from maskc.compiler.errors import StateLimitExceeded, TimeLimitExceeded
from maskc.compiler.errors import GrammarError
from maskc.compiler.ir import (Alt, Automaton, ByteSet, Fields, Node, Product, Repeat, RuleRef, Seq,
                               children)

if TYPE_CHECKING:  # dfa.py imports this module
    from maskc.compiler.dfa import Dfa

__all__ = ["Nfa", "Region", "lower", "lower_rules", "CALL_BASE", "COUNT_EXIT", "ItemReach", "item_reach"]

CALL_BASE = 256  # edge label of a call to rule i: CALL_BASE + i
COUNT_EXIT = CALL_BASE  # edge label of a counted loop's exit (only in :func:`lower`'s NFAs, which have no calls)


ItemReach = Callable[[bytes, int], int]
"""``reach(completing, shortest)``: the most items one token of the vocabulary can complete,
for items at least ``shortest`` bytes long whose last byte is one of ``completing``."""

_ITEM_REACH: ContextVar[ItemReach | None] = ContextVar("maskc_item_reach", default=None)


@contextmanager
def item_reach(reach: ItemReach | None) -> Iterator[None]:
    """Counted loops planned in this block keep ``reach`` items from a bound (what the
    vocabulary's tokens can complete) where that is fewer than what the horizon's bytes
    allow; outside, the horizon alone bounds them (no vocabulary: lint, a bare lowering)."""
    token = _ITEM_REACH.set(reach)
    try:
        yield
    finally:
        _ITEM_REACH.reset(token)


HorizonQuestion = tuple[int, Callable[[], bytes], int]
"""``(shortest, last, most)``: one :func:`_most_items` answer of a lowering, with what it was
asked (the items' shortest length and, lazily, their last bytes)."""

_HORIZON_ASKED: ContextVar[list[HorizonQuestion] | None] = ContextVar("maskc_horizon_asked", default=None)


@contextmanager
def recording_horizon(asked: list[HorizonQuestion]) -> Iterator[None]:
    """Lowerings in this block append to ``asked`` every question they put to the horizon
    and the vocabulary (how many items one token completes) with its answer: the only way
    a vocabulary shapes a lowering, so another vocabulary that answers them alike
    (:func:`same_horizon_answers`) would lower the same IR to the same automaton."""
    token = _HORIZON_ASKED.set(asked)
    try:
        yield
    finally:
        _HORIZON_ASKED.reset(token)


def same_horizon_answers(asked: Sequence[HorizonQuestion], horizon: int | None) -> bool:
    """Whether ``horizon`` (with the :func:`item_reach` in force) answers every one of
    ``asked`` as it was answered when recorded."""
    if horizon is None or horizon <= 0:
        return not asked
    return all(_most_items(horizon, shortest, last) == most for shortest, last, most in asked)


@dataclass(slots=True)
class Region:
    """A counted loop of the NFA: one copy of a prefix-free item whose completions return to
    a head, standing for ``span`` consecutive positions of a bounded repetition. The
    runtime counts arrivals at a head and takes its ``COUNT_EXIT`` edge (to the matching
    state of ``afters``, the position past the loop) at the ``span``-th; ``end`` is the
    repetition's end. A plain repetition has one head; its product with another
    automaton (a pattern under ``maxLength``) has one per state of the other. ``node`` is
    the repetition (or product) it counts; ``parent`` the loop whose item holds this one
    (numbered before it; -1: none), where a counted item is copied with its own loops."""

    heads: tuple[int, ...]
    afters: tuple[int, ...]
    end: int
    span: int
    node: Node
    parent: int = -1


Edge = tuple[int, int, int]  # (lo, hi, target)
Rows = tuple[tuple[Edge, ...], ...]  # an automaton's edges per state, targets numbered within it


@dataclass(slots=True)
class Nfa:
    """Thompson NFA over bytes: state 0 is the start, ``final`` the single accepting state.

    State ``s`` moves on ``edges[s]`` with each target shifted by ``shift[s]`` (0 past the
    end of ``shift``): a state of :meth:`new` has a list of its own (shift 0); a state of a
    block (:meth:`add_block`) has its automaton's row, shared by every copy of that
    automaton (shift: the block's first state), so copying an automaton costs no edge."""

    eps: list[list[int]] = field(default_factory=list)
    edges: list[Sequence[Edge]] = field(default_factory=list)
    shift: array[int] = field(default_factory=lambda: array("i"))
    blocks: dict[int, Rows] = field(default_factory=dict)  # id -> the rows shared by blocks
    automata: dict[int, tuple[Dfa, Automaton]] = field(default_factory=dict)  # id(dfa) -> its leaf
    final: int = -1
    max_states: int = 1_000_000
    deadline: float | None = None  # time.monotonic() value
    rule_index: dict[str, int] = field(default_factory=dict)  # callable rules (lower_rules)
    direct: Node | None = None  # the node being determinized itself: never lowered through its own DFA
    starts: list[int] = field(default_factory=list)  # per rule (lower_rules)
    finals: list[int] = field(default_factory=list)
    horizon: int | None = None  # counted loops: at most this many items per token (None: unroll)
    regions: list[Region] = field(default_factory=list)
    uncounted: frozenset[int] = frozenset()  # ids of nodes lowered with copies only
    tag: dict[int, int] = field(default_factory=dict)  # NFA state -> its counted loop (region index)
    counted_rows: dict[int, tuple[Dfa, Rows]] = field(default_factory=dict)  # by id(its DFA)

    def new(self) -> int:
        if len(self.eps) >= self.max_states:
            raise StateLimitExceeded("NFA states", limit=self.max_states)
        if self.deadline is not None and (len(self.eps) & 1023) == 0 and time.monotonic() > self.deadline:
            raise TimeLimitExceeded("compile time (s)", limit=0)
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def add_block(self, rows: Rows) -> int:
        """``len(rows)`` new states numbered from the one returned, ``base + s`` moving on
        ``rows[s]`` shifted by ``base`` (the checks of :meth:`new` made once for all of them:
        an automaton leaf adds thousands at a time, and may be copied thousands of times)."""
        k = len(rows)
        base = len(self.eps)
        if base + k > self.max_states:
            raise StateLimitExceeded("NFA states", limit=self.max_states)
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise TimeLimitExceeded("compile time (s)", limit=0)
        self.eps.extend([[] for _ in range(k)])
        self.edges.extend(rows)
        if len(self.shift) < base:
            self.shift.extend(array("i", [0]) * (base - len(self.shift)))
        self.shift.extend(array("i", [base]) * k)
        self.blocks[id(rows)] = rows
        return base

    def own(self, s: int) -> list[Edge]:
        """The edges of state ``s`` (made by :meth:`new`), to add to."""
        out = self.edges[s]
        assert type(out) is list, "a state of a block has its automaton's edges"
        return out

    @property
    def size(self) -> int:
        return len(self.eps)


def _build(nfa: Nfa, node: Node, start: int, end: int) -> None:
    """Add ``node`` between the existing states ``start`` and ``end``."""
    if isinstance(node, ByteSet):
        out = nfa.edges[start]
        assert type(out) is list  # (a state of :meth:`Nfa.new`; inline: the commonest node)
        for lo, hi in node.ranges:
            out.append((lo, hi, end))
    elif isinstance(node, Seq):
        if not node.items:
            nfa.eps[start].append(end)
            return
        cur = start
        for i, item in enumerate(node.items):
            nxt = end if i == len(node.items) - 1 else nfa.new()
            _build(nfa, item, cur, nxt)
            cur = nxt
    elif isinstance(node, Alt):
        if len(node.items) >= ALT_AS_DFA and node is not nfa.direct and not _has_ref(node):
            _build_dfa(nfa, _item_dfa(nfa, node), start, end)
            return
        for item in node.items:
            _build(nfa, item, start, end)
    elif isinstance(node, Repeat):
        if nfa.horizon is not None and _build_counted(nfa, node, start, end):
            return
        item = node.item
        copies = node.min + (node.max - node.min if node.max is not None else 1)
        if copies >= COPY_AS_DFA and node is not nfa.direct and not _has_ref(item):
            item = _as_automaton(_item_dfa(nfa, item))
        cur = start
        for _ in range(node.min):
            nxt = nfa.new()
            _build(nfa, item, cur, nxt)
            cur = nxt
        if node.max is None:
            _build_star(nfa, item, cur, end)
        else:
            # Optional copies nest as (x(x(x)?)?)? so subsets stay small.
            for _ in range(node.max - node.min):
                nfa.eps[cur].append(end)
                nxt = nfa.new()
                _build(nfa, item, cur, nxt)
                cur = nxt
            nfa.eps[cur].append(end)
    elif isinstance(node, Fields):
        _build_fields(nfa, node, start, end)
    elif isinstance(node, Product):
        _build_product(nfa, node, start, end)
    elif isinstance(node, Automaton):
        _build_block(nfa, node.edges, node.accepting, start, end)
    elif isinstance(node, RuleRef):
        idx = nfa.rule_index.get(node.name)
        if idx is None:
            raise GrammarError(f"reference to an undefined or non-callable rule {node.name!r}")
        label = CALL_BASE + idx
        nfa.own(start).append((label, label, end))
    else:  # pragma: no cover - the IR is closed
        raise TypeError(f"not an IR node: {node!r}")


def _build_star(nfa: Nfa, item: Node, start: int, end: int) -> None:
    """``item*`` between ``start`` and ``end``: a loop state the item returns to."""
    loop = nfa.new()
    nfa.eps[start].append(loop)
    body_end = nfa.new()
    _build(nfa, item, loop, body_end)
    nfa.eps[body_end].append(loop)
    nfa.eps[loop].append(end)


COPY_AS_DFA = 8
"""A repetition with this many copies of its item or more lowers each copy from the item's
minimal DFA (built once): the Thompson NFA of a rich item (a JSON string character, with
its escapes and UTF-8 forms) makes subset construction emit several equivalent states per
copy, which minimization would then have to merge, one round per copy."""

ALT_AS_DFA = 16
"""An alternation of this many branches (a long enum) lowers from its minimal DFA, so the
branches share their suffixes before subset construction, not after minimization."""


MIN_SPAN = 2
"""The fewest positions a counted loop takes in place of copies: a loop of two saves a copy
of the item. Exactness needs no more: the ``gap`` copies after a loop hold more items than
any token completes, so a token walked from a loop's state, or one entering it, ends before
the bound, even where it passes the loop's exit (a loop shorter than a token, which the
runtime walks exactly; see :class:`~maskc.artifacts.matcher.CountingMatcher`)."""


def _loop_plan(lo: int, hi: int | None, gap: int) -> list[tuple[str, int]] | None:
    """Positions ``0..`` of ``item{lo,hi}`` as runs: ``("loop", span)`` where no token can
    tell the positions apart, ``("copies", n)`` elsewhere; None when no loop pays.

    ``gap`` items separate a loop from a bound (more than a token can complete), so a
    token walked from any position of a loop ends before the bound exactly as it would in
    an endless loop. A loop spans :data:`MIN_SPAN` positions or more: ``maxLength: 200``
    under a gap of 129 is a loop of 71 and 129 copies, not 200 copies."""
    plan: list[tuple[str, int]] = []
    if lo - gap >= MIN_SPAN:
        plan += [("loop", lo - gap), ("copies", gap)]
    elif lo:
        plan.append(("copies", lo))
    if hi is not None:
        rest = hi - lo
        if rest - gap >= MIN_SPAN:
            plan += [("loop", rest - gap), ("copies", gap)]
        elif rest:
            plan.append(("copies", rest))
    return plan if any(kind == "loop" for kind, _ in plan) else None


@dataclass(frozen=True, slots=True)
class CountedItem:
    """An item's minimal DFA with counted loops of its own (:attr:`Dfa.counters`), and the
    loops of the NFA it was built from (their nodes and parents, by the DFA's loop numbers)."""

    dfa: Dfa
    regions: tuple[Region, ...]


def _counted_item(nfa: Nfa, node: Node) -> CountedItem | None:
    """``node``'s minimal DFA with its own repetitions counted, where one of them counts
    (:func:`holds_counted_loop`) and the counts are sound to nest: the item begins outside
    its loops and no loop's exit completes it. None otherwise (the item is then copied from
    its DFA with every repetition unrolled, :func:`_item_dfa`)."""
    assert nfa.horizon is not None
    from maskc.compiler.product import _CAP

    budget = max(1, nfa.max_states - nfa.size)
    cap = _CAP.get()
    key = (node, nfa.horizon, nfa.uncounted, _ITEM_REACH.get(), cap)
    with _COUNTED_LOCK:
        known = _COUNTED.get(key)
        if known is not None:
            _COUNTED.move_to_end(key)
    if known is not None and (not isinstance(known, int) or budget <= known):
        return None if isinstance(known, int) else known.item
    out: CountedItem | None = None
    over: int | None = None
    if holds_counted_loop(node, nfa.horizon):
        from maskc.compiler.counters import finish
        from maskc.compiler.dfa import CounterConflict, determinize_counted

        try:
            sub = lower(node, max_states=budget, deadline=nfa.deadline, direct=True, horizon=nfa.horizon,
                        uncounted=nfa.uncounted)
            if sub.regions:
                parts = determinize_counted(sub, max_states=budget if cap is None else min(budget, cap),
                                            deadline=nfa.deadline)
                d = finish(*parts, [r.span for r in sub.regions], deadline=nfa.deadline,
                           parent=[r.parent for r in sub.regions])
                c = d.counters
                if c is not None and int(c.region[0]) < 0 and not bool(
                        d.accepting[c.exit[c.exit >= 0]].any()):
                    out = CountedItem(d, tuple(sub.regions))
        except CounterConflict:
            out = None  # (the item unrolled: _item_dfa says whether it fits)
        except StateLimitExceeded:
            over = budget  # (known over this budget, and so over any smaller one)
    global _COUNTED_HELD
    with _COUNTED_LOCK:
        _COUNTED_HELD -= _held(_COUNTED.pop(key, None))
        _COUNTED[key] = over if over is not None else _Known(out)
        _COUNTED_HELD += _held(_COUNTED[key])
        while len(_COUNTED) > 1 and (len(_COUNTED) > _COUNTED_SIZE or _COUNTED_HELD > _COUNTED_STATES):
            _COUNTED_HELD -= _held(_COUNTED.popitem(last=False)[1])
    return out


def _held(entry: _Known | int | None) -> int:
    """The DFA states a cache entry holds."""
    return entry.item.dfa.num_states if isinstance(entry, _Known) and entry.item is not None else 0


@dataclass(frozen=True, slots=True)
class _Known:
    item: CountedItem | None  # (None: the item does not count inside, or its counts conflict)


# Counted items by value, across lowerings (a front end sizes the same item for every count
# over it, and a compile lowers again after a conflict): (item, horizon, uncounted, item
# reach, operand cap) -> what was found, or the budget the item went over.
_COUNTED: OrderedDict[tuple[object, ...], _Known | int] = OrderedDict()
_COUNTED_SIZE = 256
_COUNTED_STATES = 200_000  # (the states they hold in all: a few tens of MB of tables)
_COUNTED_HELD = 0
_COUNTED_LOCK = threading.Lock()


def _lay_counted(nfa: Nfa, item: CountedItem, start: int, end: int, outer: int, loop: bool) -> int:
    """One copy of a counted item's DFA from ``start``, its loops new regions (numbered in
    the item's order, after ``outer``, the loop that holds the copy; -1: none), each state
    outside them tagged ``outer``. ``loop``: the copy is ``outer``'s own item, whose
    completions return to its first state (the head, returned, with edges of its own);
    otherwise a completion moves on to ``end``, and the copy is one block."""
    d = item.dfa
    c = d.counters
    assert c is not None
    acc = d.accepting.tolist()
    ex = c.exit.tolist()
    if loop:
        runs = _class_runs(d.byte_class.tolist(), d.num_classes)
        ids = {s: nfa.new() for s in range(d.num_states) if not acc[s]}
        for s, row in enumerate(d.trans.tolist()):
            if not acc[s]:
                out = nfa.own(ids[s])
                out.extend((lo, hi, ids[0] if acc[t] else ids[t]) for k, t in enumerate(row) if t >= 0
                           for lo, hi in runs[k])
                if ex[s] >= 0:
                    out.append((COUNT_EXIT, COUNT_EXIT, ids[ex[s]]))
        at = ids.__getitem__
    else:
        rows = nfa.counted_rows.get(id(d))
        if rows is None or rows[0] is not d:
            runs = _class_runs(d.byte_class.tolist(), d.num_classes)
            rows = nfa.counted_rows[id(d)] = (d, tuple(
                tuple((lo, hi, t) for k, t in enumerate(row) if t >= 0 for lo, hi in runs[k])
                + (((COUNT_EXIT, COUNT_EXIT, ex[s]),) if ex[s] >= 0 else ())
                for s, row in enumerate(d.trans.tolist())))
        at = nfa.add_block(rows[1]).__add__
    head = at(0)
    nfa.eps[start].append(head)
    region = c.region.tolist()
    par = c.parent.tolist() if c.parent is not None else [-1] * c.num_loops
    first = len(nfa.regions)
    for s, r in enumerate(region):
        if loop and acc[s]:
            continue
        if r >= 0:
            nfa.tag[at(s)] = first + r
        elif outer >= 0:
            nfa.tag[at(s)] = outer
        if acc[s]:
            nfa.eps[at(s)].append(end)
    heads: list[list[int]] = [[] for _ in range(c.num_loops)]
    for s, e in enumerate(ex):
        if e >= 0:
            heads[region[s]].append(s)
    for j, inner in enumerate(item.regions):
        hs = heads[j]
        afters = tuple(at(ex[h]) for h in hs)
        nfa.regions.append(Region(tuple(at(h) for h in hs), afters, afters[0] if afters else head,
                                  int(c.span[j]), inner.node, first + par[j] if par[j] >= 0 else outer))
    return head


def _build_counted(nfa: Nfa, node: Repeat, start: int, end: int) -> bool:
    """Lower ``node`` with counted loops (:class:`Region`) where its bounds are far apart
    from each other and from zero; False (nothing built) when it does not qualify: no
    loop pays, the item refers to a rule, or its DFA is not prefix-free (an item must end
    where it completes, so that an arrival at the head is one more item). An item with
    counted loops of its own (:func:`_counted_item`) is copied with them, nested in the
    loop that copies it."""
    assert nfa.horizon is not None
    if id(node) in nfa.uncounted or _loop_plan(node.min, node.max, _widest_gap(node.item, nfa.horizon)) is None \
            or _has_ref(node.item):
        return False  # no loop pays even for the item's shortest bound (before its DFA is built)
    nested = _counted_item(nfa, node.item)
    if nested is not None:
        return _build_counted_nested(nfa, node, nested, start, end)
    d = _item_dfa(nfa, node.item)
    plan = _count_plan(d, node.min, node.max, nfa.horizon)
    if plan is None:
        return False
    rows = d.trans.tolist()
    acc = d.accepting.tolist()
    runs = _class_runs(d.byte_class.tolist(), d.num_classes)
    item = _as_automaton(d)

    def loop_item(cur: int, k: int) -> int:
        ids = {s: nfa.new() for s in range(len(rows)) if not acc[s]}
        head = ids[0]
        for s, here in ids.items():
            nfa.tag[here] = k
            for c, t in enumerate(rows[s]):
                if t >= 0:
                    tgt = head if acc[t] else ids[t]
                    nfa.own(here).extend((b, e, tgt) for b, e in runs[c])
        nfa.eps[cur].append(head)
        return head

    _lay_plan(nfa, node, plan, start, end, lambda cur, nxt: _build(nfa, item, cur, nxt), loop_item,
              lambda cur: _build_star(nfa, item, cur, end))
    return True


def _build_counted_nested(nfa: Nfa, node: Repeat, item: CountedItem, start: int, end: int) -> bool:
    """:func:`_build_counted` for an item with counted loops of its own: each copy lays
    them out afresh (:func:`_lay_counted`), the loop's copy inside the new loop."""
    assert nfa.horizon is not None
    plan = _count_plan(item.dfa, node.min, node.max, nfa.horizon)
    if plan is None:
        return False

    def loop_item(cur: int, k: int) -> int:
        head = _lay_counted(nfa, item, cur, end, k, True)
        nfa.tag[head] = k
        return head

    def star(cur: int) -> None:  # (an endless loop: its copy's own loops still count)
        loop = nfa.new()
        nfa.eps[cur].append(loop)
        body_end = nfa.new()
        _lay_counted(nfa, item, loop, body_end, -1, False)
        nfa.eps[body_end].append(loop)
        nfa.eps[loop].append(end)

    _lay_plan(nfa, node, plan, start, end, lambda cur, nxt: _lay_counted(nfa, item, cur, nxt, -1, False),
              loop_item, star)
    return True


def _lay_plan(nfa: Nfa, node: Repeat, plan: list[tuple[str, int]], start: int, end: int,
              copy: Callable[[int, int], object], loop_item: Callable[[int, int], int],
              star: Callable[[int], None]) -> None:
    """The positions of ``node`` as ``plan`` lays them out, from ``start`` to ``end``:
    ``copy(cur, nxt)`` one item between two states, ``loop_item(cur, k)`` the item of
    counted loop ``k`` entered from ``cur`` (its head returned, every state of it tagged
    ``k``), ``star(cur)`` the endless rest of a repetition without a maximum."""
    lo = node.min
    cur, pos = start, 0
    for kind, n in plan:
        if kind == "copies":
            for _ in range(n):
                if pos >= lo:
                    nfa.eps[cur].append(end)
                nxt = nfa.new()
                copy(cur, nxt)
                cur, pos = nxt, pos + 1
            continue
        k = len(nfa.regions)
        nfa.regions.append(Region((), (), end, n, node))  # (its head is known once laid out)
        head = loop_item(cur, k)
        if pos >= lo:
            nfa.eps[head].append(end)
        after = nfa.new()
        nfa.own(head).append((COUNT_EXIT, COUNT_EXIT, after))
        nfa.regions[k] = Region((head,), (after,), end, n, node)
        cur, pos = after, pos + n
    if node.max is None:
        star(cur)
    else:
        nfa.eps[cur].append(end)


def _count_plan(d: Dfa, lo: int, hi: int | None, horizon: int, room: int = 0) -> list[tuple[str, int]] | None:
    """:func:`_loop_plan` for ``item{lo,hi}`` with the item's minimal DFA ``d``; None when
    the item is not prefix-free or no loop pays. A token of ``horizon`` bytes ends at most
    ``1 + (horizon - 1) // shortest`` items (the first may have begun before it), and,
    inside :func:`item_reach`, at most as many as the vocabulary's tokens can (an item ends
    on one of its completing bytes, a shortest item after the last); ``room`` more items
    are kept between a loop and a bound (see :func:`_finish_room`)."""
    rows = d.trans.tolist()
    if d.counters is not None:  # (an item's own loops: an exit is a step too, of at least one byte)
        rows = [row + [e] for row, e in zip(rows, d.counters.exit.tolist())]
    acc = d.accepting.tolist()
    if acc[0] or any(acc[s] and any(t >= 0 for t in row) for s, row in enumerate(rows)):
        return None
    most = _most_items(horizon, _shortest(rows, acc), lambda: _completing_bytes(d)) if horizon > 0 else 0
    return _loop_plan(lo, hi, most + 1 + room)


def _most_items(horizon: int, shortest: int, last: Callable[[], bytes]) -> int:
    """The most items of ``shortest`` bytes or more one token completes: what ``horizon``
    bytes hold, and, inside :func:`item_reach`, no more than the vocabulary's tokens can
    complete of items ending on one of ``last()``."""
    most = 1 + (horizon - 1) // shortest
    reach = _ITEM_REACH.get()
    if reach is not None and most > 1:
        most = min(most, reach(last(), shortest))
    asked = _HORIZON_ASKED.get()
    if asked is not None:
        asked.append((shortest, last, most))
    return most


def _completing_bytes(d: Dfa) -> bytes:
    """The bytes on which some state of ``d`` moves into an accepting state: an item's last byte."""
    acc = d.accepting.tolist()
    classes = {c for row in d.trans.tolist() for c, t in enumerate(row) if t >= 0 and acc[t]}
    return bytes(b for b, c in enumerate(d.byte_class.tolist()) if c in classes)


def counted_copies(item: Node, lo: int, hi: int | None, horizon: int, *, max_states: int,
                   deadline: float | None, nested: bool = True) -> tuple[int, int] | None:
    """``(copies, states)``: how many copies of ``item`` a counted lowering of
    ``item{lo,hi}`` builds for tokens of at most ``horizon`` bytes (a loop is one copy), and
    the states of each (the item's minimal DFA, its own loops counted where they nest, and
    unrolled without ``nested``); None where it would unroll (the subset construction may
    still fall back to copies: see :func:`maskc.compiler.dfa.determinize_counted`)."""
    if _loop_plan(lo, hi, _widest_gap(item, horizon)) is None or _has_ref(item):
        return None
    from maskc.compiler.product import operand_dfa

    inner = _counted_item(Nfa(max_states=max_states, deadline=deadline, horizon=horizon), item) if nested else None
    d = inner.dfa if inner is not None else operand_dfa(item, max_states=max_states, deadline=deadline)
    plan = _count_plan(d, lo, hi, horizon)
    return None if plan is None else (sum(1 if kind == "loop" else n for kind, n in plan), d.num_states)


def holds_counted_loop(node: Node, horizon: int, budget: int = 10_000,
                       item_states: int = 10_000) -> bool:
    """Whether a counted lowering of ``node`` alone (for tokens of at most ``horizon``
    bytes) would make one of its bounded repeats a counted loop: one whose bounds are far
    enough apart, over a prefix-free item (a ``maxLength: 5000`` string), as
    :func:`counted_copies` plans it (an item over ``item_states`` states is taken as not
    counted). Such a node compiles alone with a loop, and as the item of another count it
    keeps it, nested (:func:`_counted_item`), where the counts can nest; otherwise it is
    copied whole at each position with the repeats unrolled. Repeats inside a :class:`Product`
    (always unrolled) are not read; False once ``budget`` distinct nodes are read without
    finding one."""
    seen: set[int] = set()
    stack = [node]
    while stack and len(seen) < budget:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, Repeat):
            try:
                if counted_copies(n.item, n.min, n.max, horizon, max_states=item_states,
                                  deadline=None, nested=False) is not None:
                    return True
            except StateLimitExceeded:
                pass
        if not isinstance(n, Product):
            stack.extend(children(n))
    return False


def _widest_gap(item: Node, horizon: int) -> int:
    """The gap :func:`_count_plan` keeps between a loop and a bound (finishing room aside)
    for items of :func:`min_bytes` bytes ending on one of :func:`last_bytes`: where no loop
    pays with it, the item's DFA is not built. Exact where both are; wider where they fall
    short, which can only miss a loop (the repeat is then copied), never make a wrong one."""
    if horizon <= 0:
        return 1
    return 1 + _most_items(horizon, _shortest_item(item), lambda: _item_last_bytes(item))


# What _widest_gap asks about an item, recalled by value: every lowering of a subtree asks
# again about the repeats inside it (one MaskBench schema asked 234,756 times about 17
# distinct items, 7.6 s of walks over the same subtrees).
@lru_cache(maxsize=1 << 12)
def _shortest_item(item: Node) -> int:
    return max(1, min_bytes(item))


@lru_cache(maxsize=1 << 12)
def _item_last_bytes(item: Node) -> bytes:
    return last_bytes(item)


_ANY_BYTE = bytes(range(256))


def last_bytes(node: Node, budget: int = 10_000) -> bytes:
    """The bytes a non-empty string of ``node`` may end with, sorted: a superset (every
    byte once ``budget`` nodes are read or a reference is met)."""
    left = [budget]

    def union(nodes: list[Node]) -> set[int] | None:
        out: set[int] = set()
        for x in nodes:
            got = go(x)
            if got is None:
                return None
            out |= got
        return out

    def go(n: Node) -> set[int] | None:  # None: any byte
        left[0] -= 1
        if left[0] < 0:
            return None
        if isinstance(n, ByteSet):
            return {b for lo, hi in n.ranges for b in range(lo, hi + 1)}
        if isinstance(n, Seq):  # back to the last item that cannot be empty
            tail: list[Node] = []
            for x in reversed(n.items):
                tail.append(x)
                if min_bytes(x, 1_000):
                    break
            return union(tail)
        if isinstance(n, Alt):
            return union(list(n.items))
        if isinstance(n, Repeat):
            return go(n.item)
        if isinstance(n, Product):
            a = go(n.a)
            if n.op == "and":
                b = go(n.b)
                return b if a is None else a if b is None else a & b
            return a
        if isinstance(n, Automaton):
            return {b for out in n.edges for lo, hi, t in out if t in n.accepting for b in range(lo, hi + 1)}
        if isinstance(n, Fields):
            closes = [x for x in (n.close_nonempty, n.close_empty) if x is not None]
            if not all(min_bytes(x, 1_000) for x in closes):
                return None  # an empty close: any member's end
            return union(closes)
        return None  # a reference: any byte

    got = go(node)
    return _ANY_BYTE if got is None else bytes(sorted(got))


def min_bytes(node: Node, budget: int = 10_000) -> int:
    """A lower bound on the length of the shortest string of ``node`` (exact where no
    intersection, difference or reference is met; 0 once ``budget`` nodes are read)."""
    left = [budget]

    def go(n: Node) -> int:
        left[0] -= 1
        if left[0] < 0:
            return 0
        if isinstance(n, ByteSet):
            return 1
        if isinstance(n, Seq):
            return sum(go(x) for x in n.items)
        if isinstance(n, Alt):
            return min((go(x) for x in n.items), default=0)
        if isinstance(n, Repeat):
            return n.min * go(n.item) if n.min else 0
        if isinstance(n, Product):
            return max(go(n.a), go(n.b)) if n.op == "and" else go(n.a)
        if isinstance(n, Automaton):
            return _shortest([[t for _, _, t in out] for out in n.edges], [s in n.accepting for s in range(len(n.edges))])
        if isinstance(n, Fields):
            required = [go(x) for x, req in n.items if req]
            sep = go(n.sep) if len(required) > 1 else 0
            members = sum(required) + sep * (len(required) - 1) if required else min(
                [go(x) for x, _ in n.items] + ([go(n.rest)] if n.rest is not None else []), default=0)
            some = go(n.first) + members + go(n.close_nonempty)
            if n.close_empty is not None and not required and n.min_count == 0:
                return min(some, go(n.close_empty))
            return some
        return 0  # a reference: nothing known

    return go(node)


def _shortest(rows: list[list[int]], acc: list[bool]) -> int:
    """The length of a shortest accepted string of a DFA (rows of targets; state 0 starts)."""
    depth = {0: 0}
    frontier = [0]
    while frontier:
        nxt = []
        for s in frontier:
            if acc[s]:
                return depth[s]
            for t in rows[s]:
                if t >= 0 and t not in depth:
                    depth[t] = depth[s] + 1
                    nxt.append(t)
        frontier = nxt
    return 1  # no accepted string: pruned away before this is asked


def _item_dfa(nfa: Nfa, node: Node) -> Dfa:
    """The minimal DFA of ``node``, built within what is left of ``nfa``'s state budget.

    Raises:
        StateLimitExceeded: past that budget, reported against the whole budget (the limit a
            user set and can raise), not against the part of it that was left; or past the
            cap on operand DFAs (:func:`maskc.compiler.product.operand_state_cap`).
    """
    # Local import: product.py depends on this module for the NFA construction.
    from maskc.compiler.product import OPERAND_STATES, OperandStateLimit, operand_dfa

    try:
        return operand_dfa(node, max_states=max(1, nfa.max_states - nfa.size), deadline=nfa.deadline)
    except OperandStateLimit as e:  # (against the compile's DFA limit: see operand_state_cap)
        raise StateLimitExceeded(OPERAND_STATES, limit=e.limit, pointer=e.pointer or "") from None
    except StateLimitExceeded as e:
        raise StateLimitExceeded("NFA states", limit=nfa.max_states, pointer=e.pointer or "") from None


def _as_automaton(dfa: Dfa) -> Automaton:
    """``dfa`` as an :class:`Automaton` leaf (its classes spelled as byte ranges)."""
    runs = _class_runs(dfa.byte_class.tolist(), dfa.num_classes)
    edges = tuple(tuple((lo, hi, t) for c, t in enumerate(row) if t >= 0 for lo, hi in runs[c])
                  for row in dfa.trans.tolist())
    return Automaton(edges, frozenset(int(x) for x in dfa.accepting.nonzero()[0]))


def _build_fields(nfa: Nfa, node: Fields, start: int, end: int) -> None:
    if node.min_count > 0 or node.max_count is not None:
        _build_counted_fields(nfa, node, start, end)
        return
    # Two chains: a_i = nothing emitted before item i, b_i = something emitted.
    # Each item is built once, entered from a_i through `first` or from b_i through `sep`.
    n = len(node.items)
    a = [start] + [nfa.new() for _ in range(n)]
    b = [nfa.new() for _ in range(n + 1)]
    for i, (item, required) in enumerate(node.items):
        entry, exit_ = nfa.new(), nfa.new()
        _build(nfa, node.first, a[i], entry)
        _build(nfa, node.sep, b[i], entry)
        _build(nfa, item, entry, exit_)
        nfa.eps[exit_].append(b[i + 1])
        if not required:
            nfa.eps[a[i]].append(a[i + 1])
            nfa.eps[b[i]].append(b[i + 1])
        else:
            # A required item cannot be skipped: nothing-emitted past it is impossible.
            pass
    if node.rest is not None:
        entry, exit_ = nfa.new(), nfa.new()
        _build(nfa, node.first, a[n], entry)
        _build(nfa, node.sep, b[n], entry)
        _build(nfa, node.rest, entry, exit_)
        nfa.eps[exit_].append(b[n])
    _build(nfa, node.close_nonempty, b[n], end)
    if node.close_empty is not None:
        _build(nfa, node.close_empty, a[n], end)


def _build_counted_fields(nfa: Nfa, node: Fields, start: int, end: int) -> None:
    # Items: states (i, c) before item i with c items emitted. Rest: states (c, need) with
    # c members emitted and need = 1 while the minimum still waits for its one rest member
    # (see Fields). Counts saturate at min_count when there is no maximum (every count past
    # the minimum behaves alike) and stop at max_count otherwise. A member is lowered once
    # per state it can be emitted from.
    n = len(node.items)
    lo, hi = node.min_count, node.max_count
    top = lo if hi is None else hi

    def bump(c: int) -> int | None:
        if c < top:
            return c + 1
        return c if hi is None else None

    items: dict[tuple[int, int], int] = {(0, 0): start}
    rest: dict[tuple[int, int], int] = {}

    def state(table: dict[tuple[int, int], int], key: tuple[int, int]) -> int:
        got = table.get(key)
        if got is None:
            got = table[key] = nfa.new()
        return got

    def member(body: Node, src: int, c: int, dst: int) -> None:
        entry, exit_ = nfa.new(), nfa.new()
        _build(nfa, node.first if c == 0 else node.sep, src, entry)
        _build(nfa, body, entry, exit_)
        nfa.eps[exit_].append(dst)

    for i, (item, required) in enumerate(node.items):
        for c in range(min(i, top) + 1):
            here = items.get((i, c))
            if here is None:
                continue
            nxt = bump(c)
            if nxt is not None:
                member(item, here, c, state(items, (i + 1, nxt)))
            if not required:
                nfa.eps[here].append(state(items, (i + 1, c)))
    for c in range(top + 1):
        here = items.get((n, c))
        if here is None:
            continue
        if c >= lo:
            nfa.eps[here].append(state(rest, (c, 0)))
        elif c == lo - 1 and node.rest is not None:
            nfa.eps[here].append(state(rest, (c, 1)))
    if node.rest is not None:
        for c in range(top + 1):
            for need in (1, 0):
                here = rest.get((c, need))
                nxt = bump(c)
                if here is not None and nxt is not None:
                    member(node.rest, here, c, state(rest, (nxt, 0)))
    for (c, need), here in rest.items():
        if need:
            continue
        if c > 0:
            _build(nfa, node.close_nonempty, here, end)
        elif node.close_empty is not None:
            _build(nfa, node.close_empty, here, end)


def _class_runs(byte_class: list[int], num_classes: int) -> list[list[tuple[int, int]]]:
    runs: list[list[tuple[int, int]]] = [[] for _ in range(num_classes)]
    b = 0
    while b < 256:
        c = byte_class[b]
        e = b
        while e + 1 < 256 and byte_class[e + 1] == c:
            e += 1
        runs[c].append((b, e))
        b = e + 1
    return runs


def _pair_classes(da: Dfa, db: Dfa) -> tuple[list[int], list[tuple[int, int]]]:
    """The byte classes of two automata run side by side: each byte's class, and each
    class's pair of classes (one per automaton)."""
    ca, cb = da.byte_class.tolist(), db.byte_class.tolist()
    pair_class: dict[tuple[int, int], int] = {}
    byte_class = [pair_class.setdefault((ca[b], cb[b]), len(pair_class)) for b in range(256)]
    return byte_class, list(pair_class)


def _finish_room(da: Dfa, di: Dfa, classes: list[tuple[int, int]], deadline: float | None = None) -> int | None:
    """The items a string of ``da`` (a pattern) cut into items of ``di`` may need to be
    finished, from anywhere, at whatever length: the largest distance, in items, from a
    live pair (pattern state, place in an item) to a *pumpable* end (an accepting pattern
    state at an item boundary with a one-item loop back to itself). From a pair at that
    distance ``d`` or less, every length of ``d`` items or more finishes the pattern.
    None when some live pair cannot reach a pumpable end (only some lengths finish it).

    A counted loop keeps this many more items from a bound: a token walked inside the loop
    then ends with room to finish the pattern under the bound, so the loop's masks (those
    of an endless loop) are exact. Without it, ``.+@.+[.]com`` under ``maxLength`` would
    allow a long token that leaves too few characters for the ``.com``.
    """
    ta, ti = da.trans.tolist(), di.trans.tolist()
    acc_a, acc_i = da.accepting.tolist(), di.accepting.tolist()
    # the pairs (pattern state, item state; 0 = an item boundary) and their moves,
    # with whether the move ends an item (and so lands on a boundary)
    index: dict[tuple[int, int], int] = {(0, 0): 0}
    order: list[tuple[int, int]] = [(0, 0)]
    moves: list[list[tuple[int, bool]]] = []
    i = 0
    while i < len(order):
        if deadline is not None and (i & 1023) == 0 and time.monotonic() > deadline:
            raise TimeLimitExceeded("compile time (s)", limit=0)
        qa, qi = order[i]
        out: list[tuple[int, bool]] = []
        for xa, xi in classes:
            na, ni = ta[qa][xa], ti[qi][xi]
            if na < 0 or ni < 0:
                continue
            ends = bool(acc_i[ni])
            key = (na, 0) if ends else (na, ni)
            j = index.get(key)
            if j is None:
                j = index[key] = len(order)
                order.append(key)
            out.append((j, ends))
        moves.append(out)
        i += 1
    n = len(order)
    back: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for j, out in enumerate(moves):
        for t, ends in out:
            back[t].append((j, int(ends)))

    def distances(targets: list[int]) -> list[int]:
        # items to some target, backwards (0-1 breadth first: a move costs an item where it ends one)
        dist = [-1] * n
        work = deque((t, 0) for t in targets)
        while work:
            j, d = work.popleft()
            if dist[j] >= 0:
                continue
            dist[j] = d
            for s, w in back[j]:
                if dist[s] < 0:
                    if w:
                        work.append((s, d + 1))
                    else:
                        work.appendleft((s, d))
        return dist

    finals = [j for j, (qa, qi) in enumerate(order) if qi == 0 and acc_a[qa]]
    live = [d >= 0 for d in distances(finals)]
    pumpable: list[int] = []
    for j in finals:  # a one-item loop: through pairs inside an item, back to this boundary
        seen = {j}
        work = [j]
        found = False
        while work and not found:
            s = work.pop()
            for t, item_ends in moves[s]:
                if item_ends:
                    found = found or t == j
                elif t not in seen:
                    seen.add(t)
                    work.append(t)
        if found:
            pumpable.append(j)
    dist = distances(pumpable)
    if any(ok and d < 0 for ok, d in zip(live, dist)):
        return None
    return max((d for ok, d in zip(live, dist) if ok), default=0)


def _build_counted_product(nfa: Nfa, node: Product, start: int, end: int) -> bool:
    """Lower ``a and item{lo,hi}`` (a pattern or format under a length bound) with counted
    loops: the product of ``a``'s DFA with the repetition laid out as :func:`_build_counted`
    lays it out, each loop one region with a head per state of ``a``, kept the pattern's
    finishing room (:func:`_finish_room`) farther from the bounds. False (nothing built)
    where the repetition would not count, or where the pattern has no finishing room."""
    rep = node.b
    if node.op != "and" or not isinstance(rep, Repeat) or id(node) in nfa.uncounted or _has_ref(node.a) \
            or _has_ref(rep.item):
        return False
    assert nfa.horizon is not None
    if _loop_plan(rep.min, rep.max, _widest_gap(rep.item, nfa.horizon)) is None:
        return False
    di = _item_dfa(nfa, rep.item)
    if _count_plan(di, rep.min, rep.max, nfa.horizon) is None or bool((di.trans == 0).any()):
        return False  # (an item state 0 is re-entered within: a pair (state, 0) would not be a boundary)
    da = _item_dfa(nfa, node.a)
    byte_class, classes = _pair_classes(da, di)
    room = _finish_room(da, di, classes, nfa.deadline)
    plan = None if room is None else _count_plan(di, rep.min, rep.max, nfa.horizon, room)
    if plan is None:
        return False
    # Segments: one per item copy (from position p), one per loop, and a trailing star when
    # the repetition has no maximum; boundary i is the position before segment i.
    segs: list[tuple[str, int, int]] = []  # (kind, position at its start, span)
    pos = 0
    for kind, n in plan:
        if kind == "loop":
            segs.append(("loop", pos, n))
        else:
            segs.extend(("copy", pos + j, 1) for j in range(n))
        pos += n
    if rep.max is None:
        segs.append(("star", pos, 0))
    final = len(segs)
    lo = rep.min
    runs = _class_runs(byte_class, len(classes))
    ta, ti = da.trans.tolist(), di.trans.tolist()
    acc_a, acc_i = da.accepting.tolist(), di.accepting.tolist()
    region_of = {i: len(nfa.regions) + j for j, i in enumerate(i for i, sg in enumerate(segs) if sg[0] == "loop")}
    ids: dict[tuple[int, int, int], int] = {}
    order: list[tuple[int, int, int]] = []

    def state(key: tuple[int, int, int]) -> int:
        got = ids.get(key)
        if got is None:
            got = ids[key] = nfa.new()
            order.append(key)
            k = region_of.get(key[0])
            if k is not None:
                nfa.tag[got] = k
        return got

    nfa.eps[start].append(state((0, 0, 0)))
    heads: dict[int, list[tuple[int, int]]] = {k: [] for k in region_of.values()}
    i = 0
    while i < len(order):
        seg, qa, qi = key = order[i]
        here = ids[key]
        i += 1
        kind, p, _ = segs[seg] if seg < final else ("end", rep.max if rep.max is not None else 0, 0)
        if qi == 0:  # a boundary (a loop's head): the output may end here, and a loop may exit
            if acc_a[qa] and (kind == "end" or p >= lo):
                nfa.eps[here].append(end)
            if kind == "loop":
                after = state((seg + 1, qa, 0))
                nfa.own(here).append((COUNT_EXIT, COUNT_EXIT, after))
                heads[region_of[seg]].append((here, after))
        if kind == "end":
            continue
        for k, (xa, xi) in enumerate(classes):
            na, ni = ta[qa][xa], ti[qi][xi]
            if na < 0 or ni < 0:
                continue
            if acc_i[ni]:  # an item ends: the next position (a loop's or star's own head)
                key2 = (seg + 1, na, 0) if kind == "copy" else (seg, na, 0)
            else:
                key2 = (seg, na, ni)
            tgt = state(key2)
            nfa.own(here).extend((b, e, tgt) for b, e in runs[k])
    for seg, k in region_of.items():
        pairs = heads[k]
        nfa.regions.append(Region(tuple(h for h, _ in pairs), tuple(a for _, a in pairs), end, segs[seg][2], node))
    return True


def _build_product(nfa: Nfa, node: Product, start: int, end: int) -> None:
    if nfa.horizon is not None and _build_counted_product(nfa, node, start, end):
        return
    # The minimal DFA of the product (built from its operands' as pairs of their states,
    # memoized per node, a recursive operand refused: maskc.compiler.product), not the raw
    # pairs: they would be as many NFA states, determinized again with the grammar around them.
    _build_dfa(nfa, _item_dfa(nfa, node), start, end)


def _build_dfa(nfa: Nfa, dfa: Dfa, start: int, end: int) -> None:
    """``dfa`` between ``start`` and ``end``, state for state (its :func:`_as_automaton`
    leaf, made once per lowering)."""
    got = nfa.automata.get(id(dfa))
    if got is None or got[0] is not dfa:
        got = nfa.automata[id(dfa)] = (dfa, _as_automaton(dfa))
    auto = got[1]
    _build_block(nfa, auto.edges, auto.accepting, start, end)


def _build_block(nfa: Nfa, rows: Rows, accepting: Iterable[int], start: int, end: int) -> None:
    """An automaton between ``start`` and ``end``: a block of new states (a fresh entry: the
    automaton may loop back to its start), state ``s``'s edges ``rows[s]`` (targets numbered
    within the automaton), an epsilon to ``end`` from each accepting one."""
    base = nfa.add_block(rows)  # state s of the automaton is base + s
    nfa.eps[start].append(base)
    for s in accepting:
        nfa.eps[base + s].append(end)


_REFS: dict[int, tuple[Node, bool]] = {}  # id -> (node, whether it holds a RuleRef)
_REFS_SIZE = 1 << 16


def _has_ref(node: Node) -> bool:
    """Whether ``node`` holds a :class:`RuleRef` (memoized per compound node: a large
    grammar asks about its shared subtrees many times over)."""
    if isinstance(node, RuleRef):
        return True
    if not isinstance(node, (Seq, Alt, Repeat, Fields, Product)):
        return False
    got = _REFS.get(id(node))
    if got is not None and got[0] is node:
        return got[1]
    if isinstance(node, (Seq, Alt)):
        value = any(_has_ref(x) for x in node.items)
    elif isinstance(node, Repeat):
        value = _has_ref(node.item)
    elif isinstance(node, Fields):
        parts = [x for x, _ in node.items] + [node.first, node.sep, node.close_nonempty]
        parts += [x for x in (node.close_empty, node.rest) if x is not None]
        value = any(_has_ref(x) for x in parts)
    else:
        value = _has_ref(node.a) or _has_ref(node.b)
    if len(_REFS) >= _REFS_SIZE:
        _REFS.clear()
    _REFS[id(node)] = (node, value)
    return value


def lower(node: Node, *, max_states: int = 1_000_000, deadline: float | None = None, direct: bool = False,
          horizon: int | None = None, uncounted: frozenset[int] = frozenset()) -> Nfa:
    """Thompson construction of ``node``.

    Args:
        node: the grammar.
        max_states: refuse to build more NFA states than this.
        deadline: a ``time.monotonic()`` value after which the build stops.
        direct: build ``node`` itself by Thompson's rules (its parts may still be lowered
            through their minimal DFAs); what the construction of that DFA needs.
        horizon: the most items a token can complete (the vocabulary's longest token, in
            bytes): bounded repetitions far longer than this become counted loops
            (:class:`Region`, ``nfa.regions``) instead of copies. None: copies only.
        uncounted: the ``id`` of each repetition (or product) of ``node`` to lower with copies
            all the same (their counts were found ambiguous).

    Returns:
        The NFA; state 0 is the start state.

    Raises:
        StateLimitExceeded: the NFA would exceed ``max_states``.
        TimeLimitExceeded: ``deadline`` passed.
    """
    nfa = Nfa(max_states=max_states, deadline=deadline, direct=node if direct else None, horizon=horizon,
              uncounted=uncounted)
    start = nfa.new()
    nfa.final = nfa.new()
    _build(nfa, node, start, nfa.final)
    return nfa


def lower_rules(
    rules: list[tuple[str, Node]], *, max_states: int = 1_000_000, deadline: float | None = None
) -> Nfa:
    """Thompson construction of every rule, side by side in one NFA.

    Rule ``i`` starts at ``nfa.starts[i]`` and ends at ``nfa.finals[i]``; a reference to it
    is an edge labelled ``CALL_BASE + i`` (the caller's state after the call is its target).
    The rules' subgraphs are disjoint. ``nfa.final`` is the first rule's final state.

    Raises:
        GrammarError: a reference names no rule of ``rules``.
        StateLimitExceeded, TimeLimitExceeded: as :func:`lower`.
    """
    nfa = Nfa(max_states=max_states, deadline=deadline)
    nfa.rule_index = {name: i for i, (name, _) in enumerate(rules)}
    for _name, _ in rules:
        nfa.starts.append(nfa.new())
        nfa.finals.append(nfa.new())
    for i, (_name, body) in enumerate(rules):
        _build(nfa, body, nfa.starts[i], nfa.finals[i])
    nfa.final = nfa.finals[0]
    return nfa
