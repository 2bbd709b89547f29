"""Counted loops: bounded repetitions whose size does not grow with the bound.

``maxLength: 100000`` unrolled is 100,000 copies of a JSON string character. But a token
completes at most as many items as it has bytes, so a token walked from position ``p``
of ``item{lo,hi}`` can only tell ``p`` apart from ``p + 1`` when a bound is within reach
(``lo - p`` or ``hi - p`` at most the longest token). Positions farther from both bounds
share one copy of the item, a *counted loop*: its masks are those of an endless loop, and
the runtime counts arrivals at the loop's head beside the DFA state, leaving the loop at
its ``span``-th arrival for the copies before the bound, which are exact.

Loops nest: the item of a counted loop may hold counted loops of its own (``maxItems:
100`` over objects with a ``maxLength: 5000`` string), each with its ``parent`` loop. The
runtime then keeps a stack of counts, one per loop the state is inside, outermost first:
leaving an inner loop drops its count and keeps the outer one, entering pushes a zero.

The lowering (:func:`maskc.compiler.nfa.lower` with a ``horizon``) builds the loops, the
subset construction (:func:`maskc.compiler.dfa.determinize_counted`) keeps them and proves
that every count is one number (or gives up, and the grammar is lowered with copies), and
:func:`finish` prunes and minimizes with the loop exit as one more column, never merging
states of different loops or a head with a non-head. :class:`Counters` is what the
artifact stores and the runtime reads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from maskc.compiler.dfa import DEAD, CounterConflict, Dfa, coreachable, reachable
from maskc.compiler.errors import EmptyLanguage
from maskc.compiler.minimize import canonical_order, minimal_blocks

__all__ = ["Counters", "finish", "with_exits"]


@dataclass(frozen=True, slots=True)
class Counters:
    """Per DFA state: ``region`` (the innermost counted loop it is in, -1: none) and
    ``exit`` (for a loop's head: the state its ``span``-th arrival moves to; -1 elsewhere);
    per loop, its ``span`` and, where loops nest, its ``parent`` (the loop whose item holds
    it, always numbered before it; -1: none; None: no loop nests). A state is a head
    exactly when ``exit >= 0``."""

    region: NDArray[np.int32]  # [states]
    exit: NDArray[np.int32]  # [states]
    span: NDArray[np.int32]  # [loops]
    parent: NDArray[np.int32] | None = None  # [loops]

    def __post_init__(self) -> None:
        n = self.region.shape[0]
        if self.region.shape != (n,) or self.exit.shape != (n,) or self.span.ndim != 1:
            raise ValueError("counters: region and exit need one entry per state, span one per loop")
        loops = self.span.shape[0]
        if n and (int(self.region.min()) < -1 or int(self.region.max()) >= loops
                  or int(self.exit.min()) < DEAD or int(self.exit.max()) >= n):
            raise ValueError("counters: a region or exit out of range")
        if bool(((self.exit >= 0) & (self.region < 0)).any()):
            raise ValueError("counters: a loop head outside every loop")
        if loops and int(self.span.min()) < 1:
            raise ValueError("counters: a loop spans no position")
        if self.parent is not None:
            if self.parent.shape != (loops,):
                raise ValueError("counters: parent needs one entry per loop")
            if loops and (int(self.parent.min()) < -1
                          or bool((self.parent >= np.arange(loops, dtype=np.int64)).any())):
                raise ValueError("counters: a loop's parent must be numbered before it")
            self.parent.setflags(write=False)
        for arr in (self.region, self.exit, self.span):
            arr.setflags(write=False)

    @property
    def num_loops(self) -> int:
        return int(self.span.shape[0])

    @property
    def nested(self) -> bool:
        """Whether some loop is inside another (counts are then a stack: :meth:`walk_stack`)."""
        return self.parent is not None and bool((self.parent >= 0).any())

    def chains(self) -> list[tuple[int, ...]]:
        """Per loop, the loops it is inside and itself, outermost first."""
        par = self.parent.tolist() if self.parent is not None else [-1] * self.num_loops
        out: list[tuple[int, ...]] = []
        for k, p in enumerate(par):
            out.append((*out[p], k) if p >= 0 else (k,))
        return out

    def walk(self, dfa: Dfa, state: int, count: int, data: bytes) -> tuple[int, int]:
        """The exact walk of ``data`` from ``(state, count)``: ``(state, count)`` after it,
        ``(-1, 0)`` when a byte is rejected. ``count`` is the arrivals at the head of
        ``state``'s loop since it was entered (0 outside loops)."""
        step, klass = dfa.stepper(), dfa.byte_class.item
        region, exit_, span = self.region.item, self.exit.item, self.span.item
        r = region(state)
        for b in data:
            nxt = step(state, klass(b))
            if nxt < 0:
                return DEAD, 0
            k = region(nxt)
            if k < 0:
                count = 0
            elif k != r:
                count = 0  # entered
            elif exit_(nxt) >= 0:
                count += 1  # an arrival: one more item
                if count == span(k):
                    nxt = exit_(nxt)
                    k = region(nxt)
                    count = 0
            state, r = nxt, k
        return state, count

    def zeros(self, state: int, chains: list[tuple[int, ...]] | None = None) -> tuple[int, ...]:
        """The counts a walk from ``state`` starts with: 0 for each loop ``state`` is inside
        (a grammar may begin inside a loop: ``(-a{3,30}:){5,40}``, whose first copies are one)."""
        r = int(self.region[state])
        if r < 0:
            return ()
        return (0,) * len((chains if chains is not None else self.chains())[r])

    def walk_stack(self, dfa: Dfa, state: int, counts: tuple[int, ...], data: bytes,
                   chains: list[tuple[int, ...]] | None = None) -> tuple[int, tuple[int, ...]]:
        """As :meth:`walk`, with a count per loop ``state`` is inside, outermost first:
        ``(state, counts)`` after ``data``, ``(-1, ())`` when a byte is rejected. Entering
        a loop pushes 0, leaving one drops its count; an arrival at the head of a loop the
        walk was inside adds 1, and the ``span``-th takes the exit, which counts nothing."""
        got, cnt, _ = self.walk_kept(dfa, state, counts, data, chains)
        return got, cnt

    def walk_kept(self, dfa: Dfa, state: int, counts: tuple[int, ...], data: bytes,
                  chains: list[tuple[int, ...]] | None = None) -> tuple[int, tuple[int, ...], int]:
        """:meth:`walk_stack`, and how many of the first counts were never dropped on the
        way (their loops stayed entered throughout: what arrived there adds to the count
        before)."""
        if chains is None:
            chains = self.chains()
        step, klass = dfa.stepper(), dfa.byte_class.item
        region, exit_, span = self.region.item, self.exit.item, self.span.item
        cnt = list(counts)
        kept = len(cnt)
        r = region(state)
        if len(cnt) != (len(chains[r]) if r >= 0 else 0):
            raise ValueError(f"counts: one per loop state {state} is inside, got {counts}")
        for b in data:
            nxt = step(state, klass(b))
            if nxt < 0:
                return DEAD, (), 0
            k = region(nxt)
            arrive = False
            if k != r:
                ck = chains[k] if k >= 0 else ()
                d = _shared(ck, chains[r] if r >= 0 else ())
                del cnt[d:]
                kept = min(kept, d)
                if k >= 0 and d == len(ck):
                    arrive = exit_(nxt) >= 0  # back in a loop it was inside: at its head, an arrival
                else:
                    cnt.extend([0] * (len(ck) - d))  # entered
            elif k >= 0 and exit_(nxt) >= 0:
                arrive = True
            if arrive:
                cnt[-1] += 1
                if cnt[-1] == span(k):
                    nxt = exit_(nxt)
                    cr = chains[k][:-1]
                    k = region(nxt)
                    ck = chains[k] if k >= 0 else ()
                    d = _shared(ck, cr)
                    del cnt[d:]
                    kept = min(kept, d)
                    cnt.extend([0] * (len(ck) - d))
            state, r = nxt, k
        return state, tuple(cnt), kept

    def renumbered(self, old: NDArray[np.int64], new_id: NDArray[np.int32]) -> Counters:
        """The counters of the states ``old`` (in their new order), exits mapped by ``new_id``."""
        ex = self.exit[old]
        ex = np.where(ex >= 0, new_id[np.where(ex >= 0, ex, 0)], DEAD).astype(np.int32)
        return Counters(self.region[old].astype(np.int32), ex, self.span.copy(),
                        None if self.parent is None else self.parent.copy())


def _shared(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """How many loops two chains (outermost first) share."""
    d = 0
    while d < len(a) and d < len(b) and a[d] == b[d]:
        d += 1
    return d


def with_exits(dfa: Dfa) -> NDArray[np.int32]:
    """``dfa.trans`` with the loop exits as one more column (the table itself without loops):
    what reachability over the whole automaton reads."""
    if dfa.counters is None:
        return dfa.trans
    return np.concatenate([dfa.trans, dfa.counters.exit.reshape(-1, 1)], axis=1)


def finish(
    trans: NDArray[np.int32], byte_class: NDArray[np.uint8], accepting: NDArray[np.bool_],
    region: NDArray[np.int32], head: NDArray[np.bool_], span: list[int], *, deadline: float | None = None,
    parent: list[int] | None = None,
) -> Dfa:
    """Prune, minimize and number canonically a counted subset construction (its last
    column is the exit); the DFA with its :class:`Counters` (``parent``: per loop, the loop
    it is inside, -1: none; kept only where some loop nests).

    Raises:
        EmptyLanguage: the start state cannot reach acceptance.
        TimeLimitExceeded: ``deadline`` passed.
    """
    live = coreachable(trans, accepting)
    if not live[0]:
        raise EmptyLanguage("the grammar accepts no string at all")
    t = np.where(trans >= 0, trans, 0)
    t = np.where((trans >= 0) & live[t], trans, DEAD).astype(np.int32)
    keep = np.flatnonzero(live & reachable(t))
    new_id = np.full(trans.shape[0], DEAD, dtype=np.int32)
    new_id[keep] = np.arange(keep.shape[0], dtype=np.int32)
    t = t[keep]
    t = np.where(t >= 0, new_id[np.where(t >= 0, t, 0)], DEAD).astype(np.int32)
    acc, reg, hd = accepting[keep], region[keep], head[keep]
    # States of different loops, or a head and a non-head, never merge: the runtime reads both.
    color = acc.astype(np.int64) + 2 * hd.astype(np.int64) + 4 * (reg.astype(np.int64) + 1)
    block = minimal_blocks(t, color, deadline=deadline)
    if block is not None:
        nblocks = int(block.max()) + 1
        rep = np.zeros(nblocks, dtype=np.int64)
        rep[block[::-1]] = np.arange(t.shape[0] - 1, -1, -1)
        q = t[rep]
        t = np.where(q >= 0, block[np.where(q >= 0, q, 0)], DEAD).astype(np.int32)
        acc, reg, hd = acc[rep], reg[rep], hd[rep]
        if block[0] != 0:  # the start state first
            perm = np.arange(nblocks)
            perm[[0, block[0]]] = perm[[block[0], 0]]
            inv = np.argsort(perm).astype(np.int32)
            q = t[perm]
            t = np.where(q >= 0, inv[np.where(q >= 0, q, 0)], DEAD).astype(np.int32)
            acc, reg, hd = acc[perm], reg[perm], hd[perm]
    whole = Dfa(t, byte_class.copy(), acc.copy())
    old, ids = canonical_order(whole)
    q = t[old]
    t = np.where(q >= 0, ids[np.where(q >= 0, q, 0)], DEAD).astype(np.int32)
    acc, reg, hd = acc[old], reg[old], hd[old]
    exit_ = np.where(hd, t[:, -1], DEAD).astype(np.int32)
    lost = (hd & (exit_ < 0)) | ((t[:, -1] >= 0) & ~hd)
    if bool(lost.any()):
        raise CounterConflict("a counted loop's head lost its exit", frozenset(int(r) for r in reg[lost] if r >= 0))
    nests = parent is not None and any(p >= 0 for p in parent)
    counters = Counters(np.where(reg >= 0, reg, -1).astype(np.int32), exit_, np.asarray(span, dtype=np.int32),
                        np.asarray(parent, dtype=np.int32) if nests else None)
    return Dfa(np.ascontiguousarray(t[:, :-1]), byte_class.copy(), acc.copy(), counters)
