"""The DFA type, subset construction from a byte NFA, dead-state pruning and byte classes.

A :class:`Dfa` is struct-of-arrays: ``trans[state, class]`` (``-1`` = no transition),
``byte_class[byte]`` and ``accepting[state]``; state 0 is the start. Every state of a
pruned DFA can reach an accepting state, so a missing transition is the only way to fail.
"""

from __future__ import annotations

import hashlib
import time
from array import array
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any, NewType

import numpy as np
from numpy.typing import NDArray

from maskc.compiler.errors import EmptyLanguage, StateLimitExceeded, TimeLimitExceeded
from maskc.compiler.nfa import CALL_BASE, Nfa

if TYPE_CHECKING:
    from maskc.compiler.counters import Counters

__all__ = ["Dfa", "SparseTable", "LazyRows", "StateId", "ClassId", "CounterConflict", "determinize", "determinize_counted", "determinize_rules", "stable_order", "RADIX_KEYS",
           "prune", "compress_classes", "coreachable", "reachable", "first_seen", "distinct_in_order",
           "sorted_unique"]

StateId = NewType("StateId", int)
ClassId = NewType("ClassId", int)

DEAD = -1


class SparseTable:
    """A transition table as each row's default target plus its exceptions (CSR): row ``q``
    sends every class to ``default[q]`` but ``exc_class[offsets[q]:offsets[q + 1]]``, which go
    to the matching ``exc_target``. The caller has checked every index (an artifact's load)."""

    __slots__ = ("num_states", "num_classes", "default", "offsets", "exc_class", "exc_target", "_views")

    def __init__(self, num_classes: int, default: NDArray[Any], offsets: NDArray[Any], exc_class: NDArray[Any],
                 exc_target: NDArray[Any]) -> None:
        self.num_states = int(default.shape[0])
        self.num_classes = int(num_classes)
        self.default, self.offsets, self.exc_class, self.exc_target = default, offsets, exc_class, exc_target
        self._views: tuple[memoryview, ...] | None = None  # made by the first row read (a decode needs none)

    def __reduce__(self) -> tuple[type[SparseTable], tuple[int, NDArray[Any], NDArray[Any], NDArray[Any], NDArray[Any]]]:
        return SparseTable, (self.num_classes, self.default, self.offsets, self.exc_class, self.exc_target)

    def row(self, q: int) -> list[int]:
        """Row ``q`` (``0 <= q < num_states``) as Python ints."""
        views = self._views
        if views is None:
            # native-order memoryviews (no copy on a little-endian machine): indexing and
            # slicing one costs a third of a numpy array's
            views = self._views = tuple(np.ascontiguousarray(a, dtype=dt).data for a, dt in (
                (self.default, "=i4"), (self.offsets, "=i8"), (self.exc_class, np.uint8), (self.exc_target, "=i4")))
        default, offsets, exc_class, exc_target = views
        r = [default[q]] * self.num_classes
        a, b = offsets[q], offsets[q + 1]
        for k, t in zip(exc_class[a:b], exc_target[a:b]):
            r[k] = t
        return r

    def decode(self) -> NDArray[np.int32]:
        """The dense ``[states, classes]`` int32 table."""
        n, c = self.num_states, self.num_classes
        trans = np.repeat(np.asarray(self.default, dtype=np.int32)[:, None], c, axis=1)
        if self.exc_target.size:
            # the exceptions by flat index (row * c + class): one index array, not two
            lens = self.offsets[1:] - self.offsets[:-1]
            at = np.repeat(np.arange(0, n * c, c, dtype=np.int64), lens)
            at += self.exc_class.astype(np.int64, copy=False)
            trans.reshape(-1)[at] = self.exc_target
        return trans


class LazyRows(dict[int, Any]):
    """``table[q]`` as a Python list (or scalar), converted on first use: whoever reads a
    large automaton row by row pays for the states it reads, not for the whole table."""

    def __init__(self, table: Any) -> None:
        super().__init__()
        self.table = table  # an array (its rows converted by tolist), or a SparseTable (_SparseRows)

    def __missing__(self, q: int) -> Any:
        value = self.table[q].tolist()
        self[q] = value
        return value


class _SparseRows(LazyRows):
    """:class:`LazyRows` of a :class:`SparseTable`."""

    def __missing__(self, q: int) -> list[int]:
        value: list[int] = self.table.row(q)
        self[q] = value
        return value


class Dfa:
    """A deterministic automaton over byte classes; immutable once built.

    The table is dense (``trans``), or, for a large table read from an artifact, kept as
    its rows' default targets and exceptions and decoded only when a caller asks for the
    whole of ``trans``: a matcher reads the rows it visits (:attr:`rows`, :meth:`stepper`),
    so loading a large artifact builds nothing proportional to its states x classes.
    """

    __slots__ = ("_trans", "_sparse", "rows", "byte_class", "accepting", "counters", "class_table", "num_states",
                 "num_classes")

    def __init__(self, trans: NDArray[np.int32] | None, byte_class: NDArray[np.uint8], accepting: NDArray[np.bool_],
                 counters: Counters | None = None, targets_checked: bool = False, *,
                 sparse: SparseTable | None = None) -> None:
        """``trans``: ``[states, classes]`` int32, ``-1`` = reject; or None with ``sparse``
        (the table's rows as default + exceptions, targets already checked).
        ``targets_checked``: the caller proved every target in ``[-1, states)`` and every
        byte class below the class count (a load)."""
        if trans is not None:
            if trans.ndim != 2 or trans.dtype != np.int32:
                raise ValueError(f"trans must be int32 [states, classes], got {trans.dtype} {trans.shape}")
            n, c = trans.shape
        elif sparse is not None:
            n, c = sparse.num_states, sparse.num_classes
        else:
            raise ValueError("a DFA needs its table, dense or sparse")
        if byte_class.shape != (256,) or byte_class.dtype != np.uint8:
            raise ValueError("byte_class must be uint8 [256]")
        if accepting.shape != (n,) or accepting.dtype != np.bool_:
            raise ValueError("accepting must be bool [states]")
        if n == 0:
            raise ValueError("a DFA needs at least its start state")
        if trans is not None and not targets_checked and trans.size and (trans.min() < DEAD or trans.max() >= n):
            raise ValueError("transition target out of range")
        if not targets_checked and int(byte_class.max()) >= c:
            raise ValueError("byte class out of range")
        if counters is not None and counters.region.shape[0] != n:
            raise ValueError("counters need one entry per state")
        for arr in (trans, byte_class, accepting):
            if arr is not None:
                arr.setflags(write=False)
        self._trans = trans
        self._sparse = sparse if trans is None else None
        self.byte_class = byte_class
        self.accepting = accepting
        self.counters = counters
        self.class_table: bytes = byte_class.tobytes()  # byte_class as a bytes.translate table
        self.num_states = int(n)
        self.num_classes = int(c)
        #: ``rows[q]``: state ``q``'s row as a list of Python ints, converted on first use
        #: (shared: never modify one)
        self.rows: dict[int, list[int]] = LazyRows(trans) if trans is not None else _SparseRows(sparse)

    @property
    def trans(self) -> NDArray[np.int32]:
        """The dense table ``[states, classes]`` (decoded on first use where it was sparse)."""
        t = self._trans
        if t is None:
            assert self._sparse is not None
            t = self._sparse.decode()
            t.setflags(write=False)
            self._trans = t
        return t

    @property
    def is_sparse(self) -> bool:
        """Whether the dense table has not been built (rows are read from the sparse form)."""
        return self._trans is None

    def stepper(self) -> Callable[[int, int], int]:
        """``step(state, class) -> state or -1`` over Python ints, the fastest this table
        allows: the dense table's ``item``, else a look-up of the converted rows."""
        if self._trans is not None:
            return self._trans.item
        rows = self.rows

        def step(state: int, klass: int) -> int:
            return rows[state][klass]

        return step

    def __setattr__(self, name: str, value: object) -> None:
        if name == "_trans" or not hasattr(self, name):  # set once, by __init__ (the table also by its decode)
            object.__setattr__(self, name, value)
        else:
            raise AttributeError(f"Dfa is immutable: cannot set {name!r}")

    def __repr__(self) -> str:
        return f"Dfa(states={self.num_states}, classes={self.num_classes}, sparse={self.is_sparse})"

    def step(self, state: int, byte: int) -> int:
        """The state after ``byte``, or -1."""
        return self.rows[state][int(self.byte_class[byte])] if self._trans is None else int(
            self._trans[state, self.byte_class[byte]])

    def walk(self, state: int, data: bytes, step: Callable[[int, int], int] | None = None) -> int:
        """The state after all of ``data``, or -1 as soon as a byte is rejected.

        Byte transitions only: a counted loop (:attr:`counters`) is walked as an endless
        loop, which is what a token's mask needs (no token can reach a loop's exit); the
        exact walk, with counts, is :meth:`maskc.compiler.counters.Counters.walk`.
        ``step``: this automaton's :meth:`stepper`, kept by a caller that walks often."""
        if step is None:
            step = self.stepper()  # Python ints: no numpy scalar per byte
        for c in data.translate(self.class_table):
            state = step(state, c)
            if state < 0:
                return DEAD
        return state

    def accepts(self, data: bytes) -> bool:
        """Whether ``data`` is in the language (counted loops counted)."""
        if self.counters is not None and self.counters.nested:
            s, _ = self.counters.walk_stack(self, 0, self.counters.zeros(0), data)
        elif self.counters is not None:
            s, _ = self.counters.walk(self, 0, 0, data)
        else:
            s = self.walk(0, data)
        return s >= 0 and bool(self.accepting[s])


def _interval_classes(nfa: Nfa) -> tuple[NDArray[np.uint8], list[int]]:
    # (set comprehensions over every edge: a large NFA has millions; a block's rows once)
    rows: list[Sequence[tuple[int, int, int]]] = [out for out in nfa.edges if type(out) is list]
    rows += [out for block in nfa.blocks.values() for out in block]
    los = {lo for edges in rows for lo, _, _ in edges}
    his = {hi for edges in rows for _, hi, _ in edges}
    cuts = {lo for lo in los if lo < CALL_BASE} | {hi + 1 for hi in his if hi < CALL_BASE} | {0, 256}
    bounds = sorted(cuts)
    byte_class = np.zeros(256, dtype=np.uint8)
    for c, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        byte_class[lo:hi] = c
    return byte_class, bounds[:-1]


def determinize(
    nfa: Nfa, *, max_states: int = 200_000, deadline: float | None = None
) -> Dfa:
    """Subset construction over interval byte classes (Rabin–Scott).

    Raises:
        StateLimitExceeded: more than ``max_states`` DFA states.
        TimeLimitExceeded: ``deadline`` (a ``time.monotonic()`` value) passed.
    """
    trans, byte_class, accepting, _, _, _ = _subsets(nfa, [0], {nfa.final}, 0, max_states, deadline)
    return Dfa(trans, byte_class, accepting)


class CounterConflict(Exception):
    """A counted loop's count would be ambiguous (two live copies of one loop, two loops
    live at once, or a loop entered while it runs): the caller lowers again with copies.
    ``regions`` are the loops involved (indices into ``nfa.regions``; empty: unknown)."""

    def __init__(self, message: str, regions: frozenset[int] = frozenset()) -> None:
        super().__init__(message)
        self.regions = regions


def determinize_counted(
    nfa: Nfa, *, max_states: int = 200_000, deadline: float | None = None
) -> tuple[NDArray[np.int32], NDArray[np.uint8], NDArray[np.bool_], NDArray[np.int32], NDArray[np.bool_]]:
    """Subset construction of an NFA with counted loops (``nfa.regions``).

    Returns:
        ``(trans, byte_class, accepting, region, head)``: ``trans`` is ``[states, classes
        + 1]``, its last column the loop exit (taken by the runtime at a loop's
        ``span``-th arrival); ``region[s]`` is the loop whose item ``s`` is inside (-1:
        none) and ``head[s]`` whether ``s`` holds that loop's head (an arrival).

    Raises:
        CounterConflict: some subset would hold a count that is not one number (see the
            class); nothing is wrong with the grammar, only with counting it.
        StateLimitExceeded, TimeLimitExceeded: as :func:`determinize`.
    """
    for k, r in enumerate(nfa.regions):
        for s0 in (r.end, *r.afters):
            if not _eps_reach(nfa, s0).isdisjoint(r.heads):
                raise CounterConflict("a counted loop can be re-entered without consuming a byte", frozenset([k]))
    trans, byte_class, accepting, _, region, head = _subsets(
        nfa, [0], {nfa.final}, 1, max_states, deadline, counted=True)
    assert region is not None and head is not None
    return trans, byte_class, accepting, region, head


def _eps_reach(nfa: Nfa, s0: int) -> set[int]:
    seen = {s0}
    stack = [s0]
    while stack:
        for t in nfa.eps[stack.pop()]:
            if t not in seen:
                seen.add(t)
                stack.append(t)
    return seen


def determinize_rules(
    nfa: Nfa, *, max_states: int = 200_000, deadline: float | None = None
) -> tuple[NDArray[np.int32], NDArray[np.uint8], NDArray[np.bool_], list[int]]:
    """Subset construction of the rules of :func:`~maskc.compiler.nfa.lower_rules`, call edges kept.

    Returns:
        ``(trans, byte_class, accepting, starts)``: ``trans`` is ``[states, classes + rules]``,
        byte classes first, then column ``classes + i`` holds the state after a call to rule
        ``i`` (``-1``: no such call); ``accepting`` marks where a rule may return; ``starts``
        is each rule's start state. The rules' subgraphs are disjoint, so no subset mixes two.

    The NFA's byte edges are consumed: each state's are dropped once its moves are built
    (the caller's NFA is transient, and the two would be a large grammar's peak together).
    """
    trans, byte_class, accepting, starts, _, _ = _subsets(
        nfa, nfa.starts, set(nfa.finals), len(nfa.starts), max_states, deadline, consume=True)
    return trans, byte_class, accepting, starts


Subset = frozenset[int]


def _disjoint(spans: list[tuple[int, int, Subset]]) -> list[tuple[int, int, Subset]]:
    """Class spans ``(lo, hi, targets)`` -> disjoint spans in class order, targets united where they overlap."""
    spans = sorted(spans, key=itemgetter(0))
    end = 0
    for lo, hi, _ in spans:
        if lo < end:
            break
        end = hi
    else:
        return spans  # (the common case: the members of a subset move on different classes)
    # The pieces are those of cutting at the ends of groups of spans, each group added to the
    # pieces it covers at once. Where targets repeat (a few targets on many spans each, as in
    # the subsets of a wide union), a group is one target's spans merged: a cut that only one
    # target's spans meet at changes no union. Where they hardly repeat (dozens of small
    # targets on the same few ranges, such as a quote and the bytes of a string), a group is
    # the targets of one range.
    sample = spans[::4] if len(spans) > 32 else spans  # (every fourth span's target tells)
    if 2 * len(set(map(itemgetter(2), sample))) > len(sample):
        by_range: dict[tuple[int, int], list[Subset]] = {}
        for lo, hi, ts in spans:
            got = by_range.get((lo, hi))
            if got is None:
                by_range[lo, hi] = [ts]
            else:
                got.append(ts)
        cuts = sorted({p for r in by_range for p in r})
        at = {p: k for k, p in enumerate(cuts)}
        acc: list[list[Subset]] = [[] for _ in range(len(cuts) - 1)]
        for (lo, hi), tss in by_range.items():
            for k in range(at[lo], at[hi]):
                acc[k].extend(tss)
    else:
        by_target: dict[Subset, list[list[int]]] = {}
        for lo, hi, ts in spans:  # (in order of lo)
            rs = by_target.get(ts)
            if rs is None:
                by_target[ts] = [[lo, hi]]
            elif lo <= rs[-1][1]:
                if hi > rs[-1][1]:
                    rs[-1][1] = hi
            else:
                rs.append([lo, hi])
        cuts = sorted({p for rs in by_target.values() for r in rs for p in r})
        at = {p: k for k, p in enumerate(cuts)}
        acc = [[] for _ in range(len(cuts) - 1)]
        for ts, rs in by_target.items():
            for lo, hi in rs:
                for k in range(at[lo], at[hi]):
                    acc[k].append(ts)
    return [(cuts[k], cuts[k + 1], parts[0] if len(parts) == 1 else _NONE.union(*parts))
            for k, parts in enumerate(acc) if parts]


_NONE: Subset = frozenset()


def _subsets(
    nfa: Nfa, seeds: list[int], finals: set[int], num_calls: int, max_states: int, deadline: float | None,
    *, counted: bool = False, consume: bool = False,
) -> tuple[NDArray[np.int32], NDArray[np.uint8], NDArray[np.bool_], list[int],
           NDArray[np.int32] | None, NDArray[np.bool_] | None]:
    """Subset construction over spans of byte classes.

    Subsets hold only "useful" NFA states (with a move, or final). Each move is stored as a
    span of classes with its target already epsilon-closed, so a DFA row is the union of
    its members' spans, cut where they overlap, and a span of classes with one target is
    interned once. DFA states are numbered in discovery order, classes visited in order.

    ``consume``: each state's byte edges are dropped from ``nfa`` once read.

    ``counted``: the NFA's counted loops are kept (:func:`determinize_counted`). A subset
    may hold one member of one loop at most, and while it does, no other member may move
    into that loop: then the loop's member is one thread whose count is one number. The
    exit column moves that member to the loop's ``after`` and keeps the other members (the
    exit is the loop's own step, not a byte).
    """
    byte_class, class_lo = _interval_classes(nfa)
    num_bytes = len(class_lo)
    num_classes = num_bytes + num_calls
    useful = [bool(edges) or i in finals for i, edges in enumerate(nfa.edges)]
    eps = nfa.eps
    single: list[Subset | None] = [None] * nfa.size

    def closure_of(s0: int) -> Subset:
        """Useful states epsilon-reachable from one NFA state (memoized)."""
        got = single[s0]
        if got is None:
            stack = [s0]
            seen = {s0}
            while stack:
                s = stack.pop()
                for t in eps[s]:
                    if t not in seen:
                        seen.add(t)
                        stack.append(t)
            got = frozenset(x for x in seen if useful[x])
            single[s0] = got
        return got

    # Per useful NFA state: (first class, past-the-last class, closed targets).
    moves: dict[int, list[tuple[int, int, Subset]]] = {}
    bc = byte_class.tolist()
    edges = nfa.edges
    shift = nfa.shift

    def moves_of(s: int) -> list[tuple[int, int, Subset]]:
        got = moves.get(s)
        if got is None:
            got = []
            off = shift[s] if s < len(shift) else 0
            for lo, hi, tgt in edges[s]:
                tgt += off
                ts = single[tgt]
                if ts is None:
                    ts = closure_of(tgt)
                if not ts:
                    continue
                if lo >= CALL_BASE:
                    c = num_bytes + lo - CALL_BASE
                    got.append((c, c + 1, ts))
                else:
                    got.append((bc[lo], bc[hi] + 1, ts))
            moves[s] = got
            if consume:
                edges[s] = ()
        return got

    tag = nfa.tag
    heads = {h for r in nfa.regions for h in r.heads}
    region_of: list[int] = []
    head_of: list[bool] = []
    exit_col = num_bytes  # counted NFAs have no calls: the one extra column is the exit
    enters: dict[int, set[int]] = {}
    chains: list[frozenset[int]] = []
    for r in nfa.regions:
        chains.append(chains[r.parent] | {len(chains)} if r.parent >= 0 else frozenset([len(chains)]))

    def entered(x: int) -> set[int]:
        got = enters.get(x)
        if got is None:
            got = enters[x] = {tag[y] for _, _, ts in moves_of(x) for y in ts if y in tag}
        return got

    def check(cur: Subset) -> int:
        """The loop ``cur`` is in (-1: none), after checking that its count is one number."""
        mine = [x for x in cur if x in tag]
        if not mine:
            return -1
        k = tag[mine[0]]
        if len(mine) > 1:
            raise CounterConflict("two copies of a counted loop would be live at once", frozenset(tag[x] for x in mine))
        running = chains[k]  # (the loop and those whose items hold it)
        if any(not running.isdisjoint(entered(x)) for x in cur if x not in tag):
            raise CounterConflict("a counted loop could be entered while it runs", frozenset([k]))
        return k

    index: dict[Subset, int] = {}
    order: list[Subset] = []
    starts: list[int] = []
    for seed in seeds:
        first = closure_of(seed)
        if first not in index:
            index[first] = len(order)
            order.append(first)
        starts.append(index[first])
    rows = array("i")  # the rows, concatenated (4 bytes a cell, not a list of ints per row)
    dead_row = array("i", [DEAD] * num_classes)
    accepting: list[bool] = []
    i = 0
    while i < len(order):
        if deadline is not None and (i & 15) == 0 and time.monotonic() > deadline:
            raise TimeLimitExceeded("compile time (s)", limit=0)
        cur = order[i]
        accepting.append(not finals.isdisjoint(cur))
        spans: list[tuple[int, int, Subset]] = []
        if counted:
            k = check(cur)
            region_of.append(k)
            head_of.append(k >= 0 and not heads.isdisjoint(cur))
            for x in cur:
                if x in tag or k < 0:
                    spans.extend(moves_of(x))
                else:  # other threads: their bytes, and they stay put when the loop exits
                    spans.extend(m for m in moves_of(x) if m[0] < exit_col)
            if head_of[-1]:
                stay = frozenset(x for x in cur if x not in tag)
                spans = [(lo, hi, ts | stay if lo == exit_col else ts) for lo, hi, ts in spans]
        elif len(cur) == 1:  # (the common case: the spans of one state, read as they are)
            (x,) = cur
            got = moves.get(x)
            spans = got if got is not None else moves_of(x)
        else:
            for x in cur:
                got = moves.get(x)
                spans.extend(got if got is not None else moves_of(x))
        if len(spans) > 1:
            spans = _disjoint(spans)
        row = dead_row[:]  # (an array: the table extends by a copy, not an int conversion per cell)
        for lo, hi, nxt in spans:
            j = index.get(nxt)
            if j is None:
                j = len(order)
                if j >= max_states:
                    raise StateLimitExceeded("DFA states", limit=max_states)
                index[nxt] = j
                order.append(nxt)
            if hi - lo == 1:
                row[lo] = j
            else:
                row[lo:hi] = array("i", [j]) * (hi - lo)
        rows.extend(row)
        i += 1
    # (writable, over the array's own buffer: no copy)
    trans = np.frombuffer(rows, dtype=np.int32).reshape(len(order), num_classes)
    if not counted:
        return trans, byte_class, np.asarray(accepting, dtype=np.bool_), starts, None, None
    return (trans, byte_class, np.asarray(accepting, dtype=np.bool_), starts,
            np.asarray(region_of, dtype=np.int32), np.asarray(head_of, dtype=np.bool_))


SMALL_TABLE = 16_384  # transition tables up to this size are searched in plain Python


def coreachable(trans: NDArray[np.int32], accepting: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """States from which some accepting state is reachable (backward search)."""
    n = trans.shape[0]
    if trans.size <= SMALL_TABLE:
        preds: list[list[int]] = [[] for _ in range(n)]
        for s, row in enumerate(trans.tolist()):
            for t in row:
                if t >= 0:
                    preds[t].append(s)
        seen = accepting.tolist()
        stack = [i for i, a in enumerate(seen) if a]
        while stack:
            for s in preds[stack.pop()]:
                if not seen[s]:
                    seen[s] = True
                    stack.append(s)
        return np.asarray(seen, dtype=np.bool_).reshape(n)
    # Predecessor lists as one array sorted by target. Built from the flat indices of the
    # transitions (no column array), the sources kept as int32 and the temporaries dropped as
    # they are used: 24 bytes a transition at the peak where it took 40 (a product operand of
    # 800,000 states x 87 classes has tens of millions).
    width = trans.shape[1]
    flat = trans.reshape(-1)
    cells = np.flatnonzero(flat >= 0)
    dst = flat[cells]
    order = stable_order(dst, n)
    src_sorted = (cells[order] // width).astype(np.int32)
    del cells
    starts = np.searchsorted(dst[order], np.arange(n + 1))
    del order, dst
    live = accepting.copy()
    frontier = np.flatnonzero(accepting)
    while frontier.size:
        lo, hi = starts[frontier], starts[frontier + 1]
        cnt = hi - lo
        total = int(cnt.sum())
        if not total:
            break
        pred = src_sorted[np.repeat(lo - (np.cumsum(cnt) - cnt), cnt) + np.arange(total)]
        frontier = first_seen(pred[~live[pred]], n)
        live[frontier] = True
    return live


def reachable(trans: NDArray[np.int32]) -> NDArray[np.bool_]:
    """States reachable from the start state 0."""
    n = trans.shape[0]
    if trans.size <= SMALL_TABLE:
        rows = trans.tolist()
        got = [False] * n
        got[0] = True
        stack = [0]
        while stack:
            for t in rows[stack.pop()]:
                if t >= 0 and not got[t]:
                    got[t] = True
                    stack.append(t)
        return np.asarray(got, dtype=np.bool_)
    seen = np.zeros(n, dtype=np.bool_)
    seen[0] = True
    frontier = np.array([0])
    while frontier.size:
        nxt = trans[frontier].ravel()
        nxt = nxt[nxt >= 0]
        frontier = first_seen(nxt[~seen[nxt]], n)
        seen[frontier] = True
    return seen


def distinct_in_order(ids: NDArray[np.int64] | NDArray[np.int32]) -> NDArray[np.int64]:
    """``ids`` without repeats, in the order of their first occurrence (a breadth-first
    level's new states, numbered as a queue would number them)."""
    _, first = np.unique(ids, return_index=True)
    out: NDArray[np.int64] = ids[np.sort(first)].astype(np.int64)
    return out


RADIX_KEYS = 1 << 21
"""Up to this many keys, :func:`stable_order` sorts keys under 2**32 in two 16-bit passes;
more take numpy's stable sort: the passes hold three index arrays at once (24 bytes a key,
where the sort holds its result's 8: 480 against 160 MB for 20 million keys, which a
product's predecessor lists can have) for a third less time."""


def stable_order(keys: NDArray[Any], bound: int) -> NDArray[np.intp]:
    """``np.argsort(keys, kind="stable")`` for integer keys in ``[0, bound)``, by 16-bit
    digits: numpy sorts 16-bit keys by counting, where a stable sort of wider integers
    merges (0.6 against 8.1 ms for 127,000 keys under 65,536; a second digit up to 2**32
    costs one more pass, least significant first, up to :data:`RADIX_KEYS` keys)."""
    if bound <= 1 << 16:
        return np.argsort(keys.astype(np.uint16), kind="stable")
    if bound <= 1 << 32 and keys.shape[0] <= RADIX_KEYS:
        order = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
        high: NDArray[np.intp] = order[np.argsort((keys[order] >> 16).astype(np.uint16), kind="stable")]
        return high
    return np.argsort(keys, kind="stable")


def sorted_unique(ids: NDArray[Any], bound: int | None = None) -> NDArray[Any]:
    """``np.unique(ids)`` for a 1-d integer array, by one sort: numpy 2.3 and later answer a
    bare ``np.unique`` of integers through a hash table that is many times slower than a sort
    (33 against 0.5 ms for 100,000 distinct int64s), and the compiler calls it in loops.

    With ``bound`` (every id in ``[0, bound)``), ids that number a sixteenth of the bound or
    more are marked in a table of ``bound`` flags and read back in order, with no sort: the
    refinement's first rounds ask for the distinct predecessors of every state: millions of
    ids with many repeats, whose sort took a quarter of the refinement's time."""
    if bound is not None and ids.shape[0] * 16 >= bound and ids.shape[0] >= 2:
        seen = np.zeros(bound, dtype=np.bool_)
        seen[ids] = True
        out: NDArray[Any] = np.flatnonzero(seen).astype(ids.dtype, copy=False)
        return out
    if ids.shape[0] < 2:
        return ids.copy()
    s = np.sort(ids)
    keep = np.empty(s.shape[0], dtype=np.bool_)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def first_seen(ids: NDArray[np.int64] | NDArray[np.int32], n: int) -> NDArray[np.int64]:
    """``ids`` (each in ``[0, n)``) without repeats (in no particular order)."""
    if ids.shape[0] * 16 < n:
        small: NDArray[np.int64] = sorted_unique(ids).astype(np.int64)
        return small
    pos = np.arange(ids.shape[0], dtype=np.int64)
    stamp = np.empty(n, dtype=np.int64)
    stamp[ids[::-1]] = pos[::-1]
    out: NDArray[np.int64] = ids[stamp[ids] == pos].astype(np.int64)
    return out


def prune(dfa: Dfa) -> Dfa:
    """Drop states that are unreachable or cannot reach acceptance; renumber densely.

    Raises:
        EmptyLanguage: the start state cannot reach acceptance.
    """
    live = coreachable(dfa.trans, dfa.accepting)
    if not live[0]:
        raise EmptyLanguage("the grammar accepts no string at all")
    trans = np.where(dfa.trans >= 0, dfa.trans, 0)
    trans = np.where((dfa.trans >= 0) & live[trans], dfa.trans, DEAD).astype(np.int32)
    keep = live & reachable(trans)
    new_id = np.full(dfa.num_states, DEAD, dtype=np.int32)
    new_id[keep] = np.arange(int(keep.sum()), dtype=np.int32)
    t = trans[keep]
    t = np.where(t >= 0, new_id[np.where(t >= 0, t, 0)], DEAD).astype(np.int32)
    return Dfa(t, dfa.byte_class.copy(), dfa.accepting[keep].copy())


def _column_digest(column: NDArray[np.int32]) -> bytes:
    return hashlib.blake2b(column.data, digest_size=16).digest()


def compress_classes(dfa: Dfa) -> Dfa:
    """Merge byte classes whose columns are identical in every state (greenery's repartition)."""
    # Columns compared by a digest of their bytes, equal digests checked cell by cell (np.unique
    # over axis 0 would build a structured dtype of one field per state: a second for a
    # hundred thousand states; a transposed copy keyed by its bytes held the table twice
    # over); classes numbered by first occurrence.
    trans = dfa.trans
    seen: dict[bytes, list[int]] = {}
    firsts: list[int] = []
    inverse = np.empty(trans.shape[1], dtype=np.int64)
    for k in range(trans.shape[1]):
        column = np.ascontiguousarray(trans[:, k])
        same = seen.setdefault(_column_digest(column), [])
        for j in same:
            if np.array_equal(column, trans[:, firsts[j]]):
                break
        else:
            j = len(firsts)
            firsts.append(k)
            same.append(j)
        inverse[k] = j
    new_trans = np.ascontiguousarray(dfa.trans[:, firsts])
    byte_class = inverse[dfa.byte_class.astype(np.int64)].astype(np.uint8)
    return Dfa(new_trans, byte_class, dfa.accepting.copy(), dfa.counters)
