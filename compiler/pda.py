"""The pushdown automaton of a recursive grammar: one minimized DFA per rule, plus call edges.

Input: the rules left by :func:`~maskc.compiler.rules.resolve_rules`. Output: a
:class:`Pda` whose states are numbered globally (every rule's states in one table, the
start rule's start state is 0). A state's byte transitions stay inside its rule; a *call
edge* ``(rule, return state)`` enters ``rule`` at its start and, once that rule reaches an
accepting state, continues the caller at ``return state``. An accepting state of the
start rule ends the output.

Construction: Thompson NFA of all rules, one subset construction with calls as extra
symbols, pruning of rules that can never finish and of states that cannot reach an
accepting state, Moore minimization over bytes and calls together, byte-class
compression. Left recursion (a rule that can call itself without consuming a byte) is
refused with the cycle named; :attr:`Pda.need` records how many more stack frames each
state needs to finish, so that a run-time depth bound never strands the output.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from maskc.compiler.dfa import (DEAD, Dfa, LazyRows, compress_classes, coreachable, determinize_rules, distinct_in_order,
                                SMALL_TABLE, first_seen, sorted_unique)
from maskc.compiler.errors import EmptyLanguage, GrammarError, StateLimitExceeded
from maskc.compiler.minimize import MAX_STATES, gather_rows, predecessors, refine
from maskc.compiler.nfa import lower_rules
from maskc.compiler.options import CompileOptions
from maskc.compiler.rules import ResolvedRules

__all__ = ["Pda", "build_pda", "NEED_INF", "LazyRows"]

NEED_INF = 1 << 30


@dataclass(frozen=True, slots=True)
class Pda:
    """Rules as one byte DFA over global states, with call edges in CSR form.

    ``dfa.accepting[q]``: the rule of ``q`` may return at ``q`` (for the start rule: the
    output may end). ``call_offsets[q]:call_offsets[q + 1]`` index the calls of ``q``
    (``call_rule``, ``call_return``). ``rule_start[r]`` is rule ``r``'s start state (-1 for
    a rule never called). ``need[q]``: the fewest stack frames above ``q``'s frame that
    finishing ``q``'s rule requires.
    """

    dfa: Dfa
    call_offsets: NDArray[np.int64]
    call_rule: NDArray[np.int32]
    call_return: NDArray[np.int32]
    rule_start: NDArray[np.int32]
    need: NDArray[np.int32]
    rule_names: tuple[str, ...]
    checked: bool = field(default=False, repr=False, compare=False)
    """The caller proved every call's rule and return state in range (an artifact's load)."""

    def __post_init__(self) -> None:
        n = self.dfa.num_states
        r = self.rule_start.shape[0]
        if self.call_offsets.shape != (n + 1,) or int(self.call_offsets[-1]) != self.call_rule.shape[0]:
            raise ValueError("call_offsets must be [states + 1] and end at the number of calls")
        if self.call_return.shape != self.call_rule.shape or self.need.shape != (n,):
            raise ValueError("call_return and need have the wrong shape")
        if len(self.rule_names) != r:
            raise ValueError("one name per rule")
        if not self.checked:
            if self.call_rule.size and (int(self.call_rule.min()) < 0 or int(self.call_rule.max()) >= r):
                raise ValueError("call to an unknown rule")
            if self.call_return.size and (int(self.call_return.min()) < 0 or int(self.call_return.max()) >= n):
                raise ValueError("call return state out of range")
        for arr in (self.call_offsets, self.call_rule, self.call_return, self.rule_start, self.need):
            arr.setflags(write=False)

    @property
    def num_states(self) -> int:
        return self.dfa.num_states

    @property
    def num_rules(self) -> int:
        return int(self.rule_start.shape[0])

    @property
    def num_calls(self) -> int:
        return int(self.call_rule.shape[0])

    def calls(self, state: int) -> list[tuple[int, int]]:
        """``(callee rule, return state)`` of every call edge of ``state``."""
        a, b = int(self.call_offsets[state]), int(self.call_offsets[state + 1])
        return list(zip(self.call_rule[a:b].tolist(), self.call_return[a:b].tolist()))

    def all_calls(self) -> list[list[tuple[int, int]]]:
        """:meth:`calls` of every state, at once (a state without calls shares one empty list)."""
        rules, rets, off = self.call_rule.tolist(), self.call_return.tolist(), self.call_offsets.tolist()
        none: list[tuple[int, int]] = []
        return [list(zip(rules[a:b], rets[a:b])) if a != b else none for a, b in zip(off, off[1:])]


def _live(byte_t: NDArray[np.int32], call_t: NDArray[np.int32], accepting: NDArray[np.bool_],
          starts: list[int]) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """(states that can finish their rule, rules that can finish): the least fixpoint of "a
    state is live where it accepts, moves on a byte to a live state, or calls a productive
    rule and returns to a live state" and "a rule is productive where its start is live"."""
    if byte_t.size + call_t.size <= SMALL_TABLE:
        return _live_rounds(byte_t, call_t, accepting, starts)
    # One backward search, in arrays: a rule's calls join it once the rule's start is found
    # live (where rounds of whole searches, one more per rule found productive, each
    # building the predecessors of the whole table again, took seconds on a large grammar).
    n, r = call_t.shape
    width = byte_t.shape[1]
    flat = byte_t.reshape(-1) if byte_t.flags.c_contiguous else np.ascontiguousarray(byte_t).reshape(-1)
    cells = np.flatnonzero(flat >= 0)
    byte_src, byte_at = predecessors((cells // width).astype(np.int32), flat[cells], n)
    del cells
    call_q, call_rule = np.nonzero(call_t >= 0)
    call_ret = call_t[call_q, call_rule].astype(np.int64)
    edge = np.arange(call_q.shape[0], dtype=np.int64)
    by_ret, ret_at = predecessors(edge, call_ret, n)  # call edges by return state
    by_rule, rule_at = predecessors(edge, call_rule, r)  # call edges by rule
    start_arr = np.asarray(starts, dtype=np.int64)
    live = accepting.copy()
    productive = np.zeros(r, dtype=np.bool_)
    frontier = np.flatnonzero(accepting)
    while frontier.size:
        newly = np.flatnonzero(~productive & live[start_arr])
        productive[newly] = True
        joined = gather_rows(rule_at, by_rule, newly)  # calls of the rules just found productive
        joined = joined[live[call_ret[joined]]]
        into = gather_rows(ret_at, by_ret, frontier)  # calls returning into the frontier
        into = into[productive[call_rule[into]]]
        cand = np.concatenate([gather_rows(byte_at, byte_src, frontier).astype(np.int64),
                               call_q[into], call_q[joined]])
        frontier = first_seen(cand[~live[cand]], n)
        live[frontier] = True
    return live, productive


def _live_rounds(byte_t: NDArray[np.int32], call_t: NDArray[np.int32], accepting: NDArray[np.bool_],
                 starts: list[int]) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """:func:`_live` by rounds of whole backward searches, the calls of the rules found
    productive in one round added in the next (a small table's)."""
    r = call_t.shape[1]
    productive = np.zeros(r, dtype=np.bool_)
    while True:
        usable = np.where(productive[None, :], call_t, DEAD).astype(np.int32)
        live = coreachable(np.concatenate([byte_t, usable], axis=1), accepting)
        now = live[np.asarray(starts, dtype=np.int64)]
        if np.array_equal(now, productive):
            return live, productive
        productive = now


def _reachable(byte_t: NDArray[np.int32], call_t: NDArray[np.int32], starts: list[int]) -> NDArray[np.bool_]:
    """States reachable from the start rule's start over bytes and calls (a call reaches both
    its return state and the callee's start), breadth first in arrays."""
    n = byte_t.shape[0]
    start_arr = np.asarray(starts, dtype=np.int64)
    seen = np.zeros(n, dtype=np.bool_)
    seen[starts[0]] = True
    frontier = np.asarray([starts[0]], dtype=np.int64)
    while frontier.size:
        nxt = byte_t[frontier].ravel()
        calls = call_t[frontier]
        q, rule = np.nonzero(calls >= 0)
        nxt = np.concatenate([nxt[nxt >= 0], calls[q, rule], start_arr[rule]]).astype(np.int64)
        frontier = first_seen(nxt[~seen[nxt]], n)
        seen[frontier] = True
    return seen


def _nullable_and_left_calls(pda_byte: NDArray[np.int32], call_t: NDArray[np.int32], accepting: NDArray[np.bool_],
                             starts: NDArray[np.int32], names: tuple[str, ...]) -> None:
    """Refuse left recursion: a cycle of rules each callable before any byte is consumed."""
    r = call_t.shape[1]
    nullable = np.zeros(r, dtype=np.bool_)

    def zero_byte_closure(q0: int) -> list[int]:
        seen = {q0}
        work = [q0]
        while work:
            q = work.pop()
            for rule, ret in enumerate(call_t[q].tolist()):
                if ret >= 0 and nullable[rule] and ret not in seen:
                    seen.add(ret)
                    work.append(ret)
        return list(seen)

    changed = True
    while changed:
        changed = False
        for rule in range(r):
            s = int(starts[rule])
            if s >= 0 and not nullable[rule] and any(accepting[q] for q in zero_byte_closure(s)):
                nullable[rule] = True
                changed = True
    left: dict[int, set[int]] = {}
    for rule in range(r):
        s = int(starts[rule])
        if s < 0:
            continue
        left[rule] = {callee for q in zero_byte_closure(s) for callee, ret in enumerate(call_t[q].tolist()) if ret >= 0}
    # a cycle in the left-call graph (depth-first search with colours)
    colour: dict[int, int] = {}
    path: list[int] = []

    def visit(v: int) -> list[int] | None:
        colour[v] = 1
        path.append(v)
        for w in sorted(left.get(v, ())):
            if colour.get(w) == 1:
                return path[path.index(w):] + [w]
            if w not in colour:
                got = visit(w)
                if got is not None:
                    return got
        colour[v] = 2
        path.pop()
        return None

    for v in sorted(left):
        if v not in colour:
            cycle = visit(v)
            if cycle is not None:
                named = " -> ".join(names[i] for i in cycle)
                raise GrammarError(
                    f"left recursion: {named} (a rule can reach itself before consuming any byte)",
                    hint="rewrite the rule with repetition (x ::= y z*) or as right recursion",
                )


def _need(byte_t: NDArray[np.int32], call_q: NDArray[np.int64], call_rule: NDArray[np.int32],
          call_ret: NDArray[np.int32], starts: NDArray[np.int32], accepting: NDArray[np.bool_]) -> NDArray[np.int32]:
    """Fewest extra frames each state needs to finish its rule.

    The least solution of ``need[q] = 0`` for accepting ``q``, else the minimum over byte edges
    ``q → t`` of ``need[t]`` and over call edges ``q —r→ ret`` of ``max(1 + need[start(r)],
    need[ret])``. Every candidate is at least the values it is built from, so Knuth's
    generalization of Dijkstra's algorithm settles states in increasing order of need, each
    edge looked at once: linear in the edges (up to the heap), where a Bellman–Ford fixpoint
    takes as many rounds as the longest chain of states.
    """
    n = byte_t.shape[0]
    need = np.full(n, NEED_INF, dtype=np.int64)
    # byte predecessors of each state, as CSR over the target
    src, cls = np.nonzero(byte_t >= 0)
    # the distinct edges (target, source), sorted, as one int64 key each (a 1-D sort: np.unique
    # over rows of pairs goes through a structured dtype, several times slower)
    keys = sorted_unique(byte_t[src, cls].astype(np.int64) * n + src)
    pred_off = np.searchsorted(keys, np.arange(n + 1, dtype=np.int64) * n).tolist()
    preds = (keys % n).tolist()
    # call edges that depend on each state (as the callee's start or as the return state)
    call_start = starts[call_rule].astype(np.int64).tolist() if call_q.size else []
    rets = call_ret.astype(np.int64).tolist()
    callers = call_q.astype(np.int64).tolist()
    deps: dict[int, list[int]] = {}
    for e, (a, b) in enumerate(zip(call_start, rets)):
        deps.setdefault(a, []).append(e)
        if b != a:
            deps.setdefault(b, []).append(e)
    best = [NEED_INF] * n
    done = [False] * n
    heap = [(0, int(q)) for q in np.flatnonzero(accepting).tolist()]
    for _, q in heap:
        best[q] = 0
    heapq.heapify(heap)
    while heap:
        v, q = heapq.heappop(heap)
        if done[q] or v != best[q]:
            continue
        done[q] = True
        for p in preds[pred_off[q]:pred_off[q + 1]]:
            if not done[p] and v < best[p]:
                best[p] = v
                heapq.heappush(heap, (v, p))
        for e in deps.get(q, ()):
            a, b, p = call_start[e], rets[e], callers[e]
            if done[p] or not (done[a] and done[b]):
                continue
            cost = max(1 + best[a], best[b])
            if cost < min(best[p], NEED_INF):
                best[p] = cost
                heapq.heappush(heap, (cost, p))
    need[:] = best
    return need.astype(np.int32)


def _canonical_blocks(full: NDArray[np.int32], c: int, block: NDArray[np.int64], keep: NDArray[np.bool_],
                      starts: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The canonical numbering of the blocks of the kept states: breadth first from the start
    rule's start, each block's columns in order, a callee's start right after its call
    column. Returns each number's representative (the block's first kept state) and block.

    The candidates of every representative (its live targets' blocks, callee starts' blocks)
    are listed once, in arrays, and the walk goes a level at a time: a level's new blocks,
    in the order of its representatives and their candidates, are exactly those a queue
    would number next, in that order.
    """
    kept = np.flatnonzero(keep)
    nblocks = int(block.max()) + 1
    rep_of = np.full(nblocks, -1, dtype=np.int64)
    rep_of[block[kept[::-1]]] = kept[::-1]  # the first kept state of each block
    reps = rep_of[rep_of >= 0]
    # per representative, a slot per byte column and two per call column (the return
    # state's block, then the callee start's), -1 where none: its candidates are its row's
    # slots that hold a block, in order
    dt = np.int32 if nblocks < 2**31 else np.int64
    block_or_none = np.append(block, -1).astype(dt)  # (a missing edge, -1, reads the last entry)
    rows = full[reps]
    r = rows.shape[1] - c
    slots = np.empty((reps.shape[0], c + 2 * r), dtype=dt)
    slots[:, :c] = block_or_none[rows[:, :c]]
    slots[:, c::2] = block_or_none[rows[:, c:]]
    slots[:, c + 1 :: 2] = np.where(rows[:, c:] >= 0, block_or_none[starts][None, :], -1)
    del rows
    live = slots >= 0
    per_rep = live.sum(axis=1)
    cand = slots[live]
    del slots, live
    # a block's candidates: cand[start[b]:start[b + 1]], its representative's (reps are in
    # block order; a block without one has none)
    count = np.zeros(nblocks, dtype=np.int64)
    count[block[reps]] = per_rep
    start = np.zeros(nblocks + 1, dtype=np.int64)
    np.cumsum(count, out=start[1:])
    seen = np.zeros(nblocks, dtype=np.bool_)
    first = int(block[starts[0]])
    seen[first] = True
    parts = [np.asarray([first], dtype=np.int64)]
    frontier = parts[0]
    while frontier.size:
        succ = gather_rows(start, cand, frontier)
        succ = succ[~seen[succ]]
        if not succ.size:
            break
        fresh = distinct_in_order(succ)
        seen[fresh] = True
        parts.append(fresh)
        frontier = fresh
    order_arr = np.concatenate(parts)
    return rep_of[order_arr], order_arr


def build_pda(rules: ResolvedRules, options: CompileOptions, timings: dict[str, float] | None = None,
              *, deadline: float | None = None, max_nfa_states: int | None = None) -> Pda:
    """Build the minimized pushdown automaton of ``rules``. ``max_nfa_states``: the NFA's
    limit where it is not ``options``' (a first try: see :mod:`maskc.compiler.pipeline`).

    Raises:
        EmptyLanguage: the start rule can never finish (or not within ``options.max_depth``).
        GrammarError: left recursion.
        StateLimitExceeded, TimeLimitExceeded: the limits of ``options``.
    """
    t = timings if timings is not None else {}
    lim = options.limits
    t0 = time.perf_counter()
    nfa_limit = lim.max_nfa_states if max_nfa_states is None else max_nfa_states
    nfa = lower_rules(list(zip(rules.names, rules.bodies)), max_states=nfa_limit, deadline=deadline)
    t1 = time.perf_counter()
    trans, byte_class, accepting, starts = determinize_rules(nfa, max_states=lim.max_states, deadline=deadline)
    del nfa  # (the largest structure of a large grammar: not held through the refinement)
    t2 = time.perf_counter()
    r = len(rules.names)
    c = trans.shape[1] - r
    # ``full`` is the table, trimmed in place (its byte and call columns are views of it)
    full = trans
    byte_t, call_t = full[:, :c], full[:, c:]
    live, productive = _live(byte_t, call_t, accepting, starts)
    if not productive[0]:
        raise EmptyLanguage(f"the start rule {rules.names[0]!r} can never finish")
    call_t[:, ~productive] = DEAD
    # drop edges into states that cannot finish (a missing edge, -1, reads the last entry: False)
    live_or_none = np.append(live, False)
    full[~live_or_none[full]] = DEAD
    del live_or_none
    keep = live & _reachable(byte_t, call_t, starts)
    called = np.zeros(r, dtype=np.bool_)
    called[0] = True
    called[np.flatnonzero((call_t[keep] >= 0).any(axis=0))] = True
    # Moore refinement over bytes and calls together: equal blocks have equal languages
    # over the extended alphabet, so merging them keeps every rule's language.
    if keep.sum() <= MAX_STATES:
        init = np.where(keep, accepting.astype(np.int64), 2)
        block = refine(full, init, deadline=deadline)
    else:
        block = np.arange(full.shape[0], dtype=np.int64)
    start_arr = np.asarray(starts, dtype=np.int64)
    reps, order_arr = _canonical_blocks(full, c, block, keep, start_arr)
    n = reps.shape[0]
    if n > lim.max_states:
        raise StateLimitExceeded("automaton states", limit=lim.max_states, got=n)
    remap = np.full(int(block.max()) + 1, DEAD, dtype=np.int64)
    remap[order_arr] = np.arange(n)
    sub = full[reps]
    del trans, full, byte_t, call_t
    # each old state's new number, and DEAD for a missing edge (-1 reads the last entry):
    # one lookup of int32 cells, where a chain of wheres held three tables of int64
    sub = np.append(remap[block], DEAD).astype(np.int32)[sub]
    acc = accepting[reps].copy()
    rule_start = np.where(called, remap[block[start_arr]], DEAD).astype(np.int32)
    compressed = compress_classes(Dfa(sub[:, :c], byte_class, acc))  # (a view: compressing copies)
    calls = sub[:, c:]
    call_q, call_rule = np.nonzero(calls >= 0)
    call_ret = calls[call_q, call_rule].astype(np.int32)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum((calls >= 0).sum(axis=1), out=offsets[1:])
    _nullable_and_left_calls(compressed.trans, calls, acc, rule_start, rules.names)
    need = _need(compressed.trans, call_q.astype(np.int64), call_rule.astype(np.int32), call_ret, rule_start, acc)
    if int(need[0]) + 1 > options.max_depth:
        raise EmptyLanguage(
            f"no output fits the nesting bound: the shortest one needs {int(need[0]) + 1} levels, "
            f"max_depth is {options.max_depth}"
        )
    t3 = time.perf_counter()
    t.update(nfa_ms=(t1 - t0) * 1e3, dfa_ms=(t2 - t1) * 1e3, minimize_ms=(t3 - t2) * 1e3)
    return Pda(compressed, offsets, call_rule.astype(np.int32), call_ret, rule_start, need, rules.names)
