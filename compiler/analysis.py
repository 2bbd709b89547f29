"""Worst-case output length of a compiled grammar: a byte DFA, or a pushdown automaton under
its nesting bound.

Input: a :class:`~maskc.compiler.dfa.Dfa` (regular grammar) or a
:class:`~maskc.compiler.pda.Pda` with ``max_depth``. Output: a :class:`LengthBound` — the
longest accepted output in bytes, or a loop the output can repeat without end. It bounds
every complete output, which is what ``maskc check --max-tokens auto`` budgets for and what
the adversarial sampler tries to reach. Tables only (numpy and Python ints): no runtime, no
torch, so lint and audit can use it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from maskc.compiler.dfa import Dfa, sorted_unique, stable_order
from maskc.compiler.graphs import strongly_connected
from maskc.compiler.pda import NEED_INF, Pda

__all__ = [
    "INFEASIBLE",
    "UNBOUNDED",
    "UNBOUNDED_FRAME",
    "LengthBound",
    "worst_case_length",
]

UNBOUNDED = np.iinfo(np.int64).max
"""``LengthBound.remaining`` of a state from which a loop is reachable."""

UNBOUNDED_FRAME = -2
"""``LengthBound.depth_remaining`` of a (state, depth) from which a loop is reachable."""

INFEASIBLE = -1
"""``LengthBound.depth_remaining`` of a state that cannot finish its rule at that depth."""

WITNESS_NODES = 200_000
"""Stacks a loop-witness search may visit before it names only the rule."""


@dataclass(frozen=True, slots=True)
class LengthBound:
    """The longest complete output in bytes, or where the grammar can repeat without end.

    Attributes:
        max_bytes: Bytes of the longest accepted output (an exact Python int: a recursive
            grammar's can be astronomically large); None when outputs are unbounded.
        remaining: Per state, the most bytes still to come before the grammar can end
            (``UNBOUNDED`` for states from which a loop is reachable). For a pushdown
            automaton: the state's own rule at depth 1, clipped to ``UNBOUNDED - 1``, and
            ``INFEASIBLE`` where a state cannot finish at depth 1.
        loop_prefix: For unbounded grammars, a shortest prefix reaching a state on a loop.
        loop: The bytes of that loop (the prefix followed by any number of them stays valid).
            Both are empty when a pushdown witness search ran out of budget; ``loop_rules``
            still names the rules of the loop.
        loop_rules: For an unbounded pushdown automaton, the rules whose automaton holds the
            loop (empty for a regular grammar).
        depth_remaining: Pushdown automata only: ``depth_remaining[d - 1][q]`` is the most
            bytes that finish ``q``'s rule from ``q`` on a frame at depth ``d``
            (``INFEASIBLE``, ``UNBOUNDED_FRAME``); see :meth:`stack_remaining`.
    """

    max_bytes: int | None
    remaining: NDArray[np.int64]
    loop_prefix: bytes = b""
    loop: bytes = b""
    loop_rules: tuple[str, ...] = ()
    depth_remaining: tuple[tuple[int, ...], ...] | None = None

    @property
    def bounded(self) -> bool:
        return self.max_bytes is not None

    @property
    def max_tokens(self) -> int | None:
        """A sound token budget: every non-EOS token carries at least one byte, then EOS."""
        return None if self.max_bytes is None else self.max_bytes + 1

    def stack_remaining(self, stack: Sequence[int]) -> int | None:
        """The most bytes that can still follow a pushdown stack (bottom first) before the
        output ends: the sum over its frames, each at its own depth. None: unbounded;
        ``INFEASIBLE``: some frame cannot finish within the nesting bound.

        Raises:
            ValueError: a regular grammar's bound (no per-depth table), or a stack deeper
                than the bound.
        """
        table = self.depth_remaining
        if table is None:
            raise ValueError("stack_remaining needs the bound of a pushdown automaton")
        if len(stack) > len(table):
            raise ValueError(f"stack of {len(stack)} frames exceeds max_depth {len(table)}")
        total = 0
        unbounded = False
        for d, q in enumerate(stack):
            w = table[d][q]
            if w == INFEASIBLE:
                return INFEASIBLE
            if w == UNBOUNDED_FRAME:
                unbounded = True
            else:
                total += w
        return None if unbounded else total


# -- regular grammars: one DFA ----------------------------------------------------------------


def _class_bytes(dfa: Dfa) -> dict[int, int]:
    """One representative byte per class, preferring printable ASCII."""
    rep: dict[int, int] = {}
    for b in [*range(0x20, 0x7F), *range(0x00, 0x20), *range(0x7F, 0x100)]:
        rep.setdefault(int(dfa.byte_class[b]), b)
    return rep


def _edges(dfa: Dfa) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Distinct (source, target) state pairs."""
    n = dfa.num_states
    src, cls = np.nonzero(dfa.trans >= 0)
    dst = dfa.trans[src, cls].astype(np.int64)
    pairs = sorted_unique(src.astype(np.int64) * n + dst)
    return pairs // n, pairs % n


def worst_case_length(automaton: Dfa | Pda, max_depth: int | None = None) -> LengthBound:
    """The longest accepted output, in bytes, or a loop that makes outputs unbounded.

    A DFA: the longest path to acceptance from every state (reverse topological order);
    states whose successors never all settle lie on, or lead to, a loop, and the witness
    names a prefix and the loop it can repeat.

    A pushdown automaton: outputs are unbounded iff a rule's automaton (byte edges and
    call edges ``q -> return state``) has a loop reachable within the nesting bound;
    otherwise a dynamic programme over depth, deepest first: ``W(q, d)`` is the longest
    way to finish ``q``'s rule at depth ``d``, a call edge costing the callee's
    ``W(start, d + 1)`` (impossible past ``max_depth``), and the answer is ``W(0, 1)``.
    Moves follow the runtime's depth guard (``Pda.need``), so the bound is exact.

    Args:
        automaton: The grammar's DFA or pushdown automaton.
        max_depth: The nesting bound (``Artifact.max_depth``); required for a Pda.

    Raises:
        ValueError: a Pda without a positive ``max_depth``.

    Example:
        >>> bound = worst_case_length(art.pda, art.max_depth) if art.pda else worst_case_length(art.dfa)
    """
    if isinstance(automaton, Pda):
        if max_depth is None or max_depth < 1:
            raise ValueError(f"a pushdown automaton needs max_depth >= 1, got {max_depth!r}")
        return _pda_worst_case(automaton, max_depth)
    return _dfa_worst_case(automaton)


def _dfa_worst_case(dfa: Dfa) -> LengthBound:
    if dfa.counters is not None:
        return _counted_worst_case(dfa)
    n = dfa.num_states
    src, dst = _edges(dfa)
    outdeg = np.bincount(src, minlength=n).astype(np.int64)
    order = stable_order(dst, n)
    preds_of = src[order]
    starts = np.searchsorted(dst[order], np.arange(n + 1))
    remaining = np.zeros(n, dtype=np.int64)
    done = outdeg == 0
    frontier = np.flatnonzero(done)
    while frontier.size:
        lo, hi = starts[frontier], starts[frontier + 1]
        counts = hi - lo
        if not counts.sum():
            break
        idx = np.repeat(lo - np.cumsum(np.r_[0, counts[:-1]]), counts) + np.arange(counts.sum())
        preds = preds_of[idx]
        vals = np.repeat(remaining[frontier] + 1, counts)
        np.maximum.at(remaining, preds, vals)
        np.subtract.at(outdeg, preds, 1)
        cand = sorted_unique(preds)
        new = cand[(outdeg[cand] == 0) & ~done[cand]]
        done[new] = True
        frontier = new
    if bool(done.all()):
        return LengthBound(int(remaining[0]), remaining)
    remaining[~done] = UNBOUNDED
    prefix, loop = _loop_witness(dfa, ~done)
    return LengthBound(None, remaining, prefix, loop)


def _counted_worst_case(dfa: Dfa) -> LengthBound:
    """:func:`_dfa_worst_case` of a DFA with counted loops (:mod:`maskc.compiler.counters`).

    A loop of ``span`` arrivals whose longest item has ``W`` bytes adds at most ``span * W``
    bytes before its exit, or ``(span - 1) * W`` before a way out of the loop taken from
    its head. Per state, ``remaining`` is that bound for a loop entered afresh (the most a
    count can leave); ``max_bytes`` is exact when every item can take its longest form
    (a string's characters can). A loop that is not counted makes outputs unbounded; the
    witness is then left empty.
    """
    c = dfa.counters
    assert c is not None
    n = dfa.num_states
    region: list[int] = c.region.tolist()
    exit_: list[int] = c.exit.tolist()
    span: list[int] = c.span.tolist()
    head = [e >= 0 for e in exit_]
    rows = [sorted({t for t in row if t >= 0}) for row in dfa.trans.tolist()]

    def arrival(s: int, t: int) -> bool:
        return region[s] >= 0 and region[s] == region[t] and head[t]

    # Longest item per loop: from a head to an arrival, inside the loop (arrivals cut, so acyclic
    # unless an item loops on itself).
    item: dict[int, int] = {}
    unbounded = False

    parent: list[int] = c.parent.tolist() if c.parent is not None else [-1] * len(span)
    exits_of: list[list[int]] = [[] for _ in span]
    for s in range(n):
        if head[s]:
            exits_of[region[s]].append(s)
    widest = [0] * len(span)

    def after(t: int, k: int, path: set[int]) -> int:
        """The most bytes from ``t`` (just reached inside loop ``k``'s item) to an arrival at
        ``k``'s head: 0 at the arrival, through an inner loop entered at its head counted
        in full (its span of its widest items); -1 where none is reached."""
        nonlocal unbounded
        if region[t] == k:
            return 0 if head[t] else item_len(t, k, path)
        j = region[t]
        if j < 0 or parent[j] != k or not head[t]:
            return -1
        best = -1  # inner loop j entered at its head: its items, then out of it
        for h in exits_of[j]:
            e = after(exit_[h], k, path)
            if e >= 0:
                best = max(best, span[j] * widest[j] + e)
            for u in rows[h]:
                if region[u] != j:
                    e = after(u, k, path)
                    if e >= 0:
                        best = max(best, (span[j] - 1) * widest[j] + 1 + e)
        return best

    def item_len(s: int, k: int, path: set[int]) -> int:
        nonlocal unbounded
        if s in item:
            return item[s]
        best = 0
        path.add(s)
        for t in rows[s]:
            if arrival(s, t):
                best = max(best, 1)
            elif region[t] == k and not head[t]:
                if t in path:
                    unbounded = True
                    continue
                best = max(best, 1 + item_len(t, k, path))
            elif region[t] != k:
                e = after(t, k, path)  # (an inner loop, entered)
                if e >= 0:
                    best = max(best, 1 + e)
        path.discard(s)
        item[s] = best
        return best

    for k in range(len(span) - 1, -1, -1):  # inner loops first (numbered after their parents)
        for s in exits_of[k]:
            widest[k] = max(widest[k], item_len(s, k, set()))
    rem: dict[int, int] = {}
    order: list[int] = []  # iterative post-order over the graph with arrivals cut and exits added
    state = [0] * n  # 0 new, 1 open, 2 done

    def succ(s: int) -> list[int]:
        if head[s]:
            k = region[s]
            return [t for h in exits_of[k] for t in rows[h] + [exit_[h]] if region[t] != k]
        return [t for t in rows[s] if not arrival(s, t)] + [h for h in exits_of[region[s]] if region[s] >= 0]

    for root in range(n):
        if state[root]:
            continue
        stack = [(root, iter(succ(root)))]
        state[root] = 1
        while stack:
            s, it = stack[-1]
            t = next(it, None)
            if t is None:
                state[s] = 2
                order.append(s)
                stack.pop()
            elif state[t] == 1:
                unbounded = True
            elif state[t] == 0:
                state[t] = 1
                stack.append((t, iter(succ(t))))
    if unbounded:
        remaining = np.full(n, UNBOUNDED, dtype=np.int64)
        return LengthBound(None, remaining)
    acc = dfa.accepting.tolist()
    for s in order:  # successors first
        if head[s]:
            k = region[s]
            w = widest[k]
            best = 0 if any(acc[h] for h in exits_of[k]) else -1
            for h in exits_of[k]:
                best = max(best, span[k] * w + rem[exit_[h]])
                for t in rows[h]:
                    if region[t] != k:
                        best = max(best, (span[k] - 1) * w + 1 + rem[t])
            rem[s] = best
        else:
            best = 0 if acc[s] else -1
            for t in succ(s):
                if t in rem and rem[t] >= 0:
                    best = max(best, (1 if t in rows[s] else 0) + rem[t])
            rem[s] = best
    remaining = np.asarray([max(0, rem[s]) for s in range(n)], dtype=np.int64)
    return LengthBound(int(remaining[0]), remaining)


def _loop_witness(dfa: Dfa, open_: NDArray[np.bool_]) -> tuple[bytes, bytes]:
    """A shortest prefix to a state on a loop, and the loop's bytes.

    ``open_`` marks states that reach a loop. Keep those also reachable *from* a loop (trim
    sources inside the set); every kept state has a kept successor, so walking kept states
    must repeat one.
    """
    n = dfa.num_states
    rep = _class_bytes(dfa)
    src, dst = _edges(dfa)
    inside = open_[src] & open_[dst]
    s_in, d_in = src[inside], dst[inside]
    indeg = np.bincount(d_in, minlength=n)
    keep = open_.copy()
    frontier = np.flatnonzero(keep & (indeg == 0))
    while frontier.size:
        keep[frontier] = False
        sel = np.isin(s_in, frontier)
        targets = d_in[sel]
        np.subtract.at(indeg, targets, 1)
        t = sorted_unique(targets)
        frontier = t[keep[t] & (indeg[t] == 0)]
    # shortest prefix to a kept state
    prev: dict[int, tuple[int, int]] = {0: (-1, -1)}
    queue, found = deque([0]), -1
    while queue:
        s = queue.popleft()
        if keep[s]:
            found = s
            break
        for c, t in enumerate(dfa.trans[s].tolist()):
            if t >= 0 and t not in prev:
                prev[t] = (s, c)
                queue.append(t)
    path: list[int] = []
    s = found
    while prev[s][0] >= 0:
        s, c = prev[s]
        path.append(rep[c])
    prefix = bytes(reversed(path))
    # walk kept states until one repeats
    seen: dict[int, int] = {found: 0}
    walk: list[int] = []
    s = found
    while True:
        row = dfa.trans[s]
        c = next(c for c, t in enumerate(row.tolist()) if t >= 0 and keep[t])
        walk.append(rep[c])
        s = int(row[c])
        if s in seen:
            cut = seen[s]
            return prefix + bytes(walk[:cut]), bytes(walk[cut:])
        seen[s] = len(walk)


# -- recursive grammars: a pushdown automaton under a nesting bound ---------------------------


class _PdaTables:
    """The Pda as Python lists, plus the byte-level moves of one stack under the depth guard.

    The guard is the runtime's (:mod:`maskc.artifacts.pushdown`): a frame at depth ``d``
    may hold ``q`` only if ``d + need[q] <= max_depth``; a call pushes only if the caller's
    return state and the callee's start both fit.
    """

    def __init__(self, pda: Pda, max_depth: int) -> None:
        self.pda = pda
        self.max_depth = max_depth
        self.n = pda.num_states
        self.trans: list[list[int]] = pda.dfa.trans.tolist()
        self.accepting: list[bool] = pda.dfa.accepting.tolist()
        self.calls = [pda.calls(q) for q in range(self.n)]
        self.starts: list[int] = pda.rule_start.tolist()
        self.need: list[int] = pda.need.tolist()
        self.byte_succ = [sorted({t for t in row if t >= 0}) for row in self.trans]
        finite = [x for x in self.need if x < NEED_INF]
        self.max_need = max(finite, default=0)
        self.rep = _class_bytes(pda.dfa)

    def fits(self, q: int, d: int) -> bool:
        return 1 <= d <= self.max_depth and d + self.need[q] <= self.max_depth

    def edges(self, q: int, d: int) -> list[int]:
        """Successors of ``q`` inside its rule at depth ``d``: byte steps and call returns."""
        out = [t for t in self.byte_succ[q] if self.fits(t, d)]
        for rule, ret in self.calls[q]:
            if self.fits(ret, d) and self.fits(self.starts[rule], d + 1):
                out.append(ret)
        return out

    def zero_moves(self, stack: tuple[int, ...]) -> list[tuple[int, ...]]:
        """Calls and returns from ``stack`` (no byte)."""
        d, q = len(stack), stack[-1]
        out = []
        for rule, ret in self.calls[q]:
            s0 = self.starts[rule]
            if self.fits(ret, d) and self.fits(s0, d + 1):
                out.append(stack[:-1] + (ret, s0))
        if self.accepting[q] and d > 1:
            out.append(stack[:-1])
        return out

    def byte_moves(self, stack: tuple[int, ...]) -> list[tuple[int, tuple[int, ...]]]:
        """``(byte, stack)`` for one representative byte per class that continues."""
        d, q = len(stack), stack[-1]
        out = []
        for c, t in enumerate(self.trans[q]):
            if t >= 0 and self.fits(t, d):
                out.append((self.rep[c], stack[:-1] + (t,)))
        return out


def _pda_worst_case(pda: Pda, max_depth: int) -> LengthBound:
    tb = _PdaTables(pda, max_depth)
    n = tb.n
    # The feasible graph at depth d depends on d only through the headroom, clipped.
    plans: dict[int, tuple[list[list[int]], set[int]]] = {}
    table: list[list[int]] = [[INFEASIBLE] * n for _ in range(max_depth + 1)]  # index 0 unused
    for d in range(max_depth, 0, -1):
        key = min(max_depth - d, tb.max_need + 1)
        plan = plans.get(key)
        if plan is None:
            nodes = [q for q in range(n) if tb.fits(q, d)]
            succ = {q: tb.edges(q, d) for q in nodes}
            comps = strongly_connected(nodes, succ)
            cyclic = {q for comp in comps for q in comp if len(comp) > 1 or q in succ[q]}
            plan = plans[key] = (comps, cyclic)
        comps, cyclic = plan
        w_d, w_deeper = table[d], table[d + 1] if d < max_depth else None
        for comp in comps:
            for q in comp:
                if q in cyclic:
                    w_d[q] = UNBOUNDED_FRAME
                    continue
                best = 0 if tb.accepting[q] else INFEASIBLE
                for t in tb.byte_succ[q]:
                    if not tb.fits(t, d):
                        continue
                    w = w_d[t]
                    if w == UNBOUNDED_FRAME:
                        best = UNBOUNDED_FRAME
                        break
                    if w >= 0 and w + 1 > best:
                        best = w + 1
                if best != UNBOUNDED_FRAME and w_deeper is not None:
                    for rule, ret in tb.calls[q]:
                        s0 = tb.starts[rule]
                        if not (tb.fits(ret, d) and tb.fits(s0, d + 1)):
                            continue
                        a, b = w_deeper[s0], w_d[ret]
                        if a == UNBOUNDED_FRAME or b == UNBOUNDED_FRAME:
                            best = UNBOUNDED_FRAME
                            break
                        if a >= 0 and b >= 0 and a + b > best:
                            best = a + b
                w_d[q] = best
    depth_remaining = tuple(tuple(row) for row in table[1:])
    top = table[1]
    clip = int(UNBOUNDED) - 1
    remaining = np.asarray([UNBOUNDED if w == UNBOUNDED_FRAME else min(w, clip) for w in top], dtype=np.int64)
    if top[0] != UNBOUNDED_FRAME:
        return LengthBound(top[0], remaining, depth_remaining=depth_remaining)
    cycles = {d: plans[min(max_depth - d, tb.max_need + 1)][1] for d in range(1, max_depth + 1)}
    prefix, loop, q = _pda_loop_witness(tb, cycles)
    return LengthBound(None, remaining, prefix, loop, _rules_of(tb, q), depth_remaining)


def _rules_of(tb: _PdaTables, q: int) -> tuple[str, ...]:
    """The rules whose automaton holds ``q`` (minimization may share a state between rules)."""
    out = []
    for r, s0 in enumerate(tb.starts):
        if s0 < 0:
            continue
        seen, work = {s0}, [s0]
        while work:
            v = work.pop()
            for t in [*tb.byte_succ[v], *(ret for _, ret in tb.calls[v])]:
                if t not in seen:
                    seen.add(t)
                    work.append(t)
        if q in seen:
            out.append(tb.pda.rule_names[r])
    return tuple(out)


Stack = tuple[int, ...]
_Node = tuple[Stack, bool]  # (stack, whether a byte was consumed)


def _search(tb: _PdaTables, start: Stack, goal: Callable[[Stack], bool], *,
            need_byte: bool) -> tuple[bytes, Stack] | None:
    """Fewest bytes from ``start`` to a stack ``goal(stack)`` accepts (0-1 breadth first).

    With ``need_byte`` the path consumes at least one byte (a loop back to ``start``).
    """
    root: _Node = (start, not need_byte)
    prev: dict[_Node, tuple[_Node, int] | None] = {root: None}
    queue: deque[_Node] = deque([root])
    settled: set[_Node] = set()
    while queue:
        node = queue.popleft()
        if node in settled:
            continue
        settled.add(node)
        stack, moved = node
        if moved and goal(stack):
            out = bytearray()
            cur: _Node = node
            while (link := prev[cur]) is not None:
                cur, b = link
                if b >= 0:
                    out.append(b)
            return bytes(reversed(out)), stack
        if len(settled) > WITNESS_NODES:
            return None
        for s2 in tb.zero_moves(stack):
            nxt = (s2, moved)
            if nxt not in settled and nxt not in prev:
                prev[nxt] = (node, -1)
                queue.appendleft(nxt)
        for b, s2 in tb.byte_moves(stack):
            nxt = (s2, True)
            if nxt not in settled and nxt not in prev:
                prev[nxt] = (node, b)
                queue.append(nxt)
    return None


def _pda_loop_witness(tb: _PdaTables, cycles: dict[int, set[int]]) -> tuple[bytes, bytes, int]:
    """A fewest-byte prefix to a stack whose top lies on a loop of its rule, the loop's bytes,
    and that state (empty bytes when the search exceeds ``WITNESS_NODES``)."""
    found = _search(tb, (0,), lambda s: s[-1] in cycles[len(s)], need_byte=False)
    if found is None:
        q = next(q for d in sorted(cycles) for q in sorted(cycles[d]))
        return b"", b"", q
    prefix, at = found
    again = _search(tb, at, lambda s: s == at, need_byte=True)
    loop = again[0] if again is not None else b""
    return (prefix, loop, at[-1]) if loop else (b"", b"", at[-1])

