"""Counted loops: bounded repetitions whose size does not grow with the bound.

``maxLength: 100000`` unrolled is 100,000 copies of a JSON string character. But a token
completes at most as many items as it has bytes, so a token walked from position ``p``
of ``item{lo,hi}`` can only tell ``p`` apart from ``p + 1`` when a bound is within reach
(``lo - p`` or ``hi - p`` at most the longest token). Positions farther from both bounds
share one copy of the item, a *counted loop*: its masks are those of an endless loop, and
the runtime counts arrivals at the loop's head beside the DFA state, leaving the loop at
its ``span``-th arrival for the copies before the bound, which are exact.

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
    """Per DFA state: ``region`` (the counted loop it is in, -1: none) and ``exit`` (for a
    loop's head: the state its ``span``-th arrival moves to; -1 elsewhere); per loop, its
    ``span``. A state is a head exactly when ``exit >= 0``."""

    region: NDArray[np.int32]  # [states]
    exit: NDArray[np.int32]  # [states]
    span: NDArray[np.int32]  # [loops]

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
        for arr in (self.region, self.exit, self.span):
            arr.setflags(write=False)

    @property
    def num_loops(self) -> int:
        return int(self.span.shape[0])

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

    def renumbered(self, old: NDArray[np.int64], new_id: NDArray[np.int32]) -> Counters:
        """The counters of the states ``old`` (in their new order), exits mapped by ``new_id``."""
        ex = self.exit[old]
        ex = np.where(ex >= 0, new_id[np.where(ex >= 0, ex, 0)], DEAD).astype(np.int32)
        return Counters(self.region[old].astype(np.int32), ex, self.span.copy())


def with_exits(dfa: Dfa) -> NDArray[np.int32]:
    """``dfa.trans`` with the loop exits as one more column (the table itself without loops):
    what reachability over the whole automaton reads."""
    if dfa.counters is None:
        return dfa.trans
    return np.concatenate([dfa.trans, dfa.counters.exit.reshape(-1, 1)], axis=1)


def finish(
    trans: NDArray[np.int32], byte_class: NDArray[np.uint8], accepting: NDArray[np.bool_],
    region: NDArray[np.int32], head: NDArray[np.bool_], span: list[int], *, deadline: float | None = None,
) -> Dfa:
    """Prune, minimize and number canonically a counted subset construction (its last
    column is the exit); the DFA with its :class:`Counters`.

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
    counters = Counters(np.where(reg >= 0, reg, -1).astype(np.int32), exit_, np.asarray(span, dtype=np.int32))
    return Dfa(np.ascontiguousarray(t[:, :-1]), byte_class.copy(), acc.copy(), counters)
