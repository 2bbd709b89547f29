"""Operand automata of :class:`~maskc.compiler.ir.Product` nodes, memoized per node.

A product (intersection or difference) is lowered through a DFA of each side. The front
end nests products (a key that must match one pattern, not another, and no declared
name) and shares operands between them, so each operand is determinized once per node
(equal nodes are one: a ``$ref`` expanded at many places builds equal subtrees that are
different objects), then pruned and minimized: the product walks only pairs of minimal states. A
product's own DFA is those pairs (:func:`_pair_dfa`: two DFAs side by side are
deterministic, so no subset construction), minimized too, and the NFA of a grammar holds
that DFA rather than the raw pairs. A union with two products or more among its items is
built the same way, its items' DFAs united pair by pair (:func:`_union_dfa`). Languages are
unchanged, so the compiled grammar is too (its DFA is minimized and numbered canonically at
the end whatever the shape of the NFA).
"""

from __future__ import annotations

import threading
import time
from array import array
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np
from numpy.typing import NDArray

from maskc.compiler.dfa import DEAD, Dfa, LazyRows, coreachable, determinize, prune
from maskc.compiler.errors import EmptyLanguage, GrammarError, StateLimitExceeded, TimeLimitExceeded
from maskc.compiler.ir import Alt, Node, Product, alt
from maskc.compiler.minimize import minimize
from maskc.compiler.nfa import _has_ref, _pair_classes, lower

__all__ = ["OPERAND_STATES", "OperandStateLimit", "operand_dfa", "operand_state_cap", "proven_empty"]

_CACHE_SIZE = 1024
_CACHE_CELLS = 1 << 24
"""The operand cache keeps this many DFAs at most, and this many cells (states x classes)
of their tables in all (64 MiB of int32): the least recently used leave first."""
_PAIR_CELLS = 1 << 20
"""A product's batch of pairs holds this many cells (pairs x classes) of its table at most."""
_PAIR_BATCH = 8
"""From this many waiting pairs on, a product expands them as a batch in array code."""

# node -> dfa, by value: equal nodes (their hashes are cached, and equal subtrees are
# mostly the same objects, so a comparison is short) denote one language. One MaskBench
# schema built its 234 distinct operands 11,328 times under a cache of 64 by identity;
# by value, once each, and its compile took a third less time.
_cache: OrderedDict[Node, Dfa] = OrderedDict()
_cells = [0]  # the cells of the cached tables
_lock = threading.Lock()

_CAP: ContextVar[int | None] = ContextVar("maskc_operand_state_cap", default=None)


OPERAND_STATES = "DFA states of a part of the grammar (an intersection, difference or union of schemas)"
"""What :class:`OperandStateLimit` reports over (the part a user's schema can point to)."""


class OperandStateLimit(StateLimitExceeded):
    """An operand's DFA (a side of a product, or a union of products) grew past the cap of
    :func:`operand_state_cap`, below the state budget the caller gave."""


@contextmanager
def operand_state_cap(cap: int | None) -> Iterator[None]:
    """Operand DFAs built in this block keep to ``cap`` states (the compile's DFA limit) as
    well as to the budget each call is given (what is left of the NFA's).

    An operand's DFA becomes that many states of the grammar's NFA, whose budget is ten times
    the DFA's, and a subset construction runs one subset at a time in Python: an operand of
    300,000 to 1,000,000 states took 25 to 100 s to build (MaskBench's ``pyrseas-0.8``,
    ``oneofanyofitc6``), for a grammar that then went over the limit or the time all the same.
    A cap makes such a compile stop at the same limit a user sets and can raise
    (``--max-states``), in seconds.
    """
    token = _CAP.set(cap)
    try:
        yield
    finally:
        _CAP.reset(token)


class _PairSide:
    """One operand of a product as its expansion reads it: the table and accepting flags for
    a batch of pairs; for a single pair, rows as Python lists converted as the pairs reach
    them (an operand of 800,000 states x 87 classes took seconds and gigabytes to convert
    whole, for pairs that may visit a fraction of it) and the flags as a list."""

    __slots__ = ("rows", "acc", "table", "table_acc")

    def __init__(self, table: NDArray[np.int32], acc: NDArray[np.bool_]) -> None:
        self.rows: dict[int, list[int]] = LazyRows(table)
        self.acc: list[bool] = acc.tolist()
        self.table = table
        self.table_acc = acc


def _empty_dfa() -> Dfa:
    return Dfa(np.full((1, 1), DEAD, dtype=np.int32), np.zeros(256, dtype=np.uint8), np.zeros(1, dtype=np.bool_))


def proven_empty(node: Node, *, max_states: int, deadline: float | None) -> bool:
    """Whether the regular language of ``node`` is proven empty: False when it is not, and
    when ``max_states`` leaves the question open (callers then keep what they would keep for
    a non-empty language, which is sound either way).

    Raises:
        TimeLimitExceeded: ``deadline`` passed.
    """
    try:
        dfa = determinize(lower(node, max_states=4 * max_states, deadline=deadline),
                          max_states=max_states, deadline=deadline)
    except StateLimitExceeded:
        return False
    return not bool(coreachable(dfa.trans, dfa.accepting)[0])


def _over(dmax: int, max_states: int) -> StateLimitExceeded:
    """The error of an operand DFA over ``dmax`` states: :class:`OperandStateLimit` where the
    cap set it (below ``max_states``, the budget of the call)."""
    if dmax < max_states:
        return OperandStateLimit(OPERAND_STATES, limit=dmax)
    return StateLimitExceeded("DFA states", limit=dmax)


def _check(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise TimeLimitExceeded("compile time (s)", limit=0)


def operand_dfa(node: Node, *, max_states: int, deadline: float | None) -> Dfa:
    """A DFA of ``node``'s language: pruned and minimized (one dead-end start state if empty).

    ``max_states`` bounds the NFAs lowered on the way and, with the cap of
    :func:`operand_state_cap` where one is set, the DFAs.

    Raises:
        StateLimitExceeded: the determinization needs more than ``max_states`` states
            (:class:`OperandStateLimit`: more than the cap).
        TimeLimitExceeded: ``deadline`` passed.
    """
    cap = _CAP.get()
    dmax = max_states if cap is None else min(max_states, cap)  # (the DFA's limit; the NFA's stays)
    with _lock:
        got = _cache.get(node)
        if got is not None:
            _cache.move_to_end(node)
    if got is not None:
        dfa = got
        if dfa.num_states > dmax:
            raise _over(dmax, max_states)
        return dfa
    union = node if isinstance(node, Alt) and sum(isinstance(x, Product) for x in node.items) >= 2 \
        and not _has_ref(node) else None
    try:
        if union is not None:
            raw = _union_dfa(union, max_states=max_states, max_dfa=dmax, deadline=deadline)  # (minimized)
        elif isinstance(node, Product):
            raw = _pair_dfa(node, max_states=max_states, max_dfa=dmax, deadline=deadline)
        else:
            raw = determinize(lower(node, max_states=max_states, deadline=deadline, direct=True),
                              max_states=dmax, deadline=deadline)
    except OperandStateLimit:
        raise
    except StateLimitExceeded as e:
        if dmax < max_states and e.limit == dmax:  # (this DFA went over the cap, not a nested NFA)
            raise _over(dmax, max_states) from None
        raise
    if union is not None:
        dfa = raw
    else:
        _check(deadline)  # (the construction may end at the limit: what follows is a pass or more over it)
        try:
            pruned = prune(raw)  # (one backward search, which also says whether the language is empty)
        except EmptyLanguage:
            dfa = _empty_dfa()
        else:
            _check(deadline)
            dfa = minimize(pruned, deadline=deadline)
    with _lock:
        if node not in _cache:
            _cache[node] = dfa
            _cells[0] += dfa.trans.size
        while len(_cache) > _CACHE_SIZE or (_cells[0] > _CACHE_CELLS and len(_cache) > 1):
            _cells[0] -= _cache.popitem(last=False)[1].trans.size
    return dfa


def _pair_dfa(node: Product, *, max_states: int, deadline: float | None, max_dfa: int | None = None) -> Dfa:
    """The product of ``node``'s operand DFAs, built as a DFA of pairs of their states.

    Run side by side, two DFAs give a deterministic automaton: built as NFA pairs and
    determinized again, a product that is itself an operand (nested differences: a key that
    matches one pattern, not another, and no declared name) paid a subset construction that
    found nothing to merge, and one inside a grammar left its raw pairs in the grammar's
    NFA. The language is the same, so the minimal DFA is too.

    ``max_states`` is the operands' budget (:func:`operand_dfa`), ``max_dfa`` the pairs' (by
    default the same).

    Raises:
        GrammarError: an operand refers to a rule. StateLimitExceeded: more than
            ``max_dfa`` pairs. TimeLimitExceeded: ``deadline`` passed.
    """
    if _has_ref(node.a) or _has_ref(node.b):
        raise GrammarError("an intersection or difference of languages cannot involve a recursive rule")
    da = operand_dfa(node.a, max_states=max_states, deadline=deadline)
    db = operand_dfa(node.b, max_states=max_states, deadline=deadline)
    _check(deadline)  # (an operand may finish at the limit)
    return pair_dfa(da, db, node.op, max_states=max_states if max_dfa is None else max_dfa, deadline=deadline)


def _union_dfa(node: Alt, *, max_states: int, deadline: float | None, max_dfa: int | None = None) -> Dfa:
    """The DFA of a union with two products or more among its items: the products' DFAs
    (and one of the other items together) united pair by pair, each union minimized before
    the next.

    A subset construction of such a union meets the same tuples of the items' states as
    pairs do (a subset holds one state of each item's DFA at most), one subset at a time in
    Python; pairs go in batches of array code, and a union minimized before the next item
    joins it has no more states than the tuples it merges, often far fewer (three
    differences of 8,000 states each, under one length bound, ran past a minute as
    subsets).
    """
    products = [x for x in node.items if isinstance(x, Product)]
    rest = [x for x in node.items if not isinstance(x, Product)]
    parts = [operand_dfa(x, max_states=max_states, deadline=deadline) for x in products]
    if rest:
        parts.append(operand_dfa(alt(*rest), max_states=max_states, deadline=deadline))
    parts.sort(key=lambda d: d.num_states)  # (small ones first: the unions grow as late as they can)
    out = parts[0]
    for d in parts[1:]:
        _check(deadline)
        raw = pair_dfa(out, d, "or", max_states=max_states if max_dfa is None else max_dfa, deadline=deadline)
        _check(deadline)
        try:
            pruned = prune(raw)
        except EmptyLanguage:  # (every item so far is empty)
            out = _empty_dfa()
            continue
        _check(deadline)
        out = minimize(pruned, deadline=deadline)
    return out


def pair_dfa(da: Dfa, db: Dfa, op: str, *, max_states: int, deadline: float | None) -> Dfa:
    """The DFA of pairs of ``da``'s and ``db``'s states: their intersection (``op="and"``),
    difference (``"minus"``) or union (``"or"``), neither pruned nor minimized. A side may be
    dead in a pair where the other goes on alone: ``b`` in a difference, either in a union.

    Raises:
        StateLimitExceeded: more than ``max_states`` pairs. TimeLimitExceeded: ``deadline`` passed.
    """
    byte_class, classes = _pair_classes(da, db)
    c = len(classes)
    want_b = op == "and"
    union = op == "or"
    span = db.num_states + 1  # a pair's key: (a + 1) * span + (b + 1), with -1 (dead) on either side
    a, b = _PairSide(da.trans, da.accepting), _PairSide(db.trans, db.accepting)
    dead_a = [DEAD] * da.num_classes  # a side's row once it is dead: the other goes on alone
    dead_b = [DEAD] * db.num_classes
    xa = [x for x, _ in classes]
    xb = [x for _, x in classes]
    xa_arr, xb_arr = np.array(xa, dtype=np.intp), np.array(xb, dtype=np.intp)
    ids: dict[int, int] = {span + 1: 0}  # key -> pair number; the pair (0, 0) is 0
    pa, pb = [0], [0]  # each pair's states, by number
    rows = array("i")  # the rows, concatenated (4 bytes a cell)
    accepting = bytearray()
    chunk = max(_PAIR_BATCH, _PAIR_CELLS // c)
    i = 0
    # A queue of pairs, numbered in the order they are first met. Where many pairs wait,
    # a batch of them is expanded in array code, its new pairs numbered in the order a scan
    # of its rows meets them: the same numbers as one pair at a time, which is how a narrow
    # queue (a chain of single pairs, as a counted run gives) is expanded, since a batch
    # costs tens of microseconds whatever its size.
    while i < len(pa):
        waiting = len(pa) - i
        if deadline is not None and (waiting >= _PAIR_BATCH or (i & 255) == 0) and time.monotonic() > deadline:
            raise TimeLimitExceeded("compile time (s)", limit=0)
        if waiting < _PAIR_BATCH:
            sa, sb = pa[i], pb[i]
            in_a = sa >= 0 and a.acc[sa]
            in_b = sb >= 0 and b.acc[sb]
            accepting.append((in_a or in_b) if union else (in_a and in_b == want_b))
            ra = a.rows[sa] if sa >= 0 else dead_a
            rb = b.rows[sb] if sb >= 0 else dead_b
            row: list[int] = []
            for ca, cb in zip(xa, xb):
                na, nb = ra[ca], rb[cb]
                if (na < 0 and nb < 0) if union else (na < 0 or (want_b and nb < 0)):
                    row.append(DEAD)
                    continue
                key = (na + 1) * span + nb + 1
                j = ids.get(key)
                if j is None:
                    j = len(pa)
                    if j >= max_states:
                        raise StateLimitExceeded("DFA states", limit=max_states)
                    ids[key] = j
                    pa.append(na)
                    pb.append(nb)
                row.append(j)
            rows.extend(row)
            i += 1
            continue
        take = min(waiting, chunk)
        fa = np.array(pa[i : i + take], dtype=np.intp)
        fb = np.array(pb[i : i + take], dtype=np.intp)
        alive_a = fa >= 0  # (all of them but in a union)
        alive_b = fb >= 0  # (all of them in an intersection)
        fa = np.where(alive_a, fa, 0)
        fb = np.where(alive_b, fb, 0)
        acc_a = a.table_acc[fa] & alive_a
        acc_b = b.table_acc[fb] & alive_b
        accepting += ((acc_a | acc_b) if union else (acc_a & (acc_b == want_b))).tobytes()
        nxa = np.where(alive_a[:, None], a.table[fa[:, None], xa_arr], DEAD).astype(np.int64).ravel()
        nxb = np.where(alive_b[:, None], b.table[fb[:, None], xb_arr], DEAD).astype(np.int64).ravel()
        if union:
            live = (nxa >= 0) | (nxb >= 0)
        else:
            live = (nxa >= 0) & (nxb >= 0) if want_b else nxa >= 0
        out = np.full(nxa.shape[0], DEAD, dtype=np.int32)
        where = np.flatnonzero(live)
        if where.shape[0]:
            keys = (nxa[where] + 1) * span + (nxb[where] + 1)
            uniq, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
            got = np.array([ids.get(k, -1) for k in uniq.tolist()], dtype=np.int64)
            fresh = np.flatnonzero(got < 0)
            if fresh.shape[0]:
                fresh = fresh[np.argsort(first[fresh], kind="stable")]  # in the scan's order
                start = len(pa)
                if start + fresh.shape[0] > max_states:
                    raise StateLimitExceeded("DFA states", limit=max_states)
                got[fresh] = np.arange(start, start + fresh.shape[0])
                new_keys = uniq[fresh]
                ids.update(zip(new_keys.tolist(), range(start, start + fresh.shape[0])))
                pa += (new_keys // span - 1).tolist()
                pb += (new_keys % span - 1).tolist()
            out[where] = got[inverse.reshape(-1)]
        rows.frombytes(out.tobytes())
        i += take
    trans = np.frombuffer(rows, dtype=np.int32).reshape(len(pa), c)
    return Dfa(trans, np.asarray(byte_class, dtype=np.uint8), np.frombuffer(accepting, dtype=np.bool_).copy())
