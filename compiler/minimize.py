"""DFA minimization and canonical state numbering.

Moore's partition refinement, vectorized: each round splits blocks by the tuple
(block, block of each successor). The result is numbered canonically (BFS from the start
in class order), so equal languages over equal classes give identical arrays.
"""

from __future__ import annotations

import struct
import sys
import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from maskc.compiler.dfa import DEAD, SMALL_TABLE, Dfa, distinct_in_order, sorted_unique, stable_order
from maskc.compiler.errors import TimeLimitExceeded
from maskc.compiler.trie import unique_inverse

__all__ = ["minimize", "minimal_blocks", "refine", "refine_pair", "canonical", "canonical_order", "row_ids"]


_RNG = np.random.default_rng(0x6D61736B63)
_MULT = _RNG.integers(1, 2**62, size=(2, 4096), dtype=np.int64) | 1


def row_ids(rows: NDArray[np.int64]) -> tuple[NDArray[np.int64], int]:
    """Dense ids for identical rows, exactly (sorting whole rows), numbered in the order of
    the rows' bytes: a row's native int64s compared byte by byte, as a sort of the rows as
    raw records orders them. Rows of up to :data:`_KEY_COLUMNS` columns sort as that many
    integer keys (each column's bytes read as an unsigned integer, first byte highest: the
    same order), which is several times faster than a sort of records."""
    m, k = rows.shape
    if k > _KEY_COLUMNS or not m:
        contiguous = np.ascontiguousarray(rows)
        view = contiguous.view(np.dtype((np.void, contiguous.dtype.itemsize * contiguous.shape[1])))
        _, inverse = np.unique(view.ravel(), return_inverse=True)
        inv = np.asarray(inverse, dtype=np.int64).reshape(-1)
        return inv, int(inv.max()) + 1 if inv.size else 0
    keys = []
    for j in range(k):
        col = np.ascontiguousarray(rows[:, j], dtype=np.int64).view(np.uint64)
        keys.append(col.byteswap() if _LITTLE else col)
    order = np.argsort(keys[0], kind="stable") if k == 1 else np.lexsort(keys[::-1])
    first = np.zeros(m, dtype=np.bool_)  # where a sorted row differs from the one before
    first[0] = True
    for key in keys:
        s = key[order]
        first[1:] |= s[1:] != s[:-1]
    ids = np.cumsum(first, dtype=np.int64)
    ids -= 1
    inv = np.empty(m, dtype=np.int64)
    inv[order] = ids
    return inv, int(ids[-1]) + 1


_KEY_COLUMNS = 3
_LITTLE = sys.byteorder == "little"


def _is_congruence(block: NDArray[np.int64], initial: NDArray[np.int64], out: NDArray[np.int64],
                   live_col: NDArray[Any], live_tgt: NDArray[Any]) -> bool:
    """Whether every block agrees on ``initial`` and on the blocks of its successors: each
    state has its block's first state's live columns, with successors in the same blocks
    (the live transitions of state ``s``: ``live_col``/``live_tgt[out[s]:out[s + 1]]``)."""
    n = block.shape[0]
    rep = np.zeros(int(block.max()) + 1, dtype=np.int64)
    rep[block[::-1]] = np.arange(n - 1, -1, -1)
    r = rep[block]
    if not np.array_equal(initial, initial[r]):
        return False
    cnt = out[1:] - out[:-1]
    if not np.array_equal(cnt, cnt[r]):
        return False
    shift = out[r] - out[:-1]  # from a state's transitions to its block's first state's
    a = 0
    while a < n:  # states a..b - 1, about _CHUNK_CELLS transitions (bounds the int64 temporaries)
        b = min(n, max(a + 1, int(np.searchsorted(out, out[a] + _CHUNK_CELLS, side="right")) - 1))
        lo, hi = int(out[a]), int(out[b])
        # the same transitions of each state's block's first state
        twin = np.arange(lo, hi, dtype=np.int64) + np.repeat(shift[a:b], cnt[a:b])
        if not (np.array_equal(live_col[lo:hi], live_col[twin])
                and np.array_equal(block[live_tgt[lo:hi]], block[live_tgt[twin]])):
            return False
        a = b
    return True


def _rounds(
    trans: NDArray[np.int32], init: NDArray[np.int64], max_rounds: int | None, deadline: float | None
) -> tuple[NDArray[np.int64], bool]:
    """Full Moore rounds from the partition ``init``, rows grouped exactly: (blocks,
    whether they stabilized). The reference :func:`_incremental_rounds` falls back to."""
    block, count = init, int(init.max()) + 1 if init.size else 0
    n = trans.shape[0]
    tz = np.where(trans >= 0, trans, n).astype(np.int64)
    sig = np.empty((n, trans.shape[1] + 1), dtype=np.int64)
    ext = np.full(n + 1, -1, dtype=np.int64)
    rounds = 0
    while max_rounds is None or rounds < max_rounds:
        if deadline is not None and time.monotonic() > deadline:
            raise TimeLimitExceeded("compile time (s)", limit=0)
        ext[:n] = block
        sig[:, 0] = block
        sig[:, 1:] = ext[tz]
        block, new_count = row_ids(sig)
        rounds += 1
        if new_count == count:
            return block, True
        count = new_count
    return block, False


def predecessors(src: NDArray[Any], dst: NDArray[Any], n: int) -> tuple[NDArray[Any], NDArray[np.int64]]:
    """CSR of the states with a transition into each state, from the transitions
    ``src -> dst``: ``pred[start[t]:start[t + 1]]`` (``pred`` of ``src``'s integer type)."""
    order = stable_order(dst, n)
    start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=start[1:])
    return src[order], start


def _positions(starts: NDArray[np.int64], ids: NDArray[Any]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The positions ``starts[i]:starts[i + 1]`` of every ``i`` in ``ids``, concatenated, and
    how many each ``i`` has."""
    lo = starts[ids]
    cnt = starts[ids + 1] - lo
    total = int(cnt.sum())
    if not total:
        return np.zeros(0, dtype=np.int64), cnt
    return np.repeat(lo - (np.cumsum(cnt) - cnt), cnt) + np.arange(total, dtype=np.int64), cnt


def gather_rows(starts: NDArray[np.int64], flat: NDArray[Any], ids: NDArray[Any]) -> NDArray[Any]:
    """``flat[starts[i]:starts[i + 1]]`` for every ``i`` in ``ids``, concatenated."""
    return flat[_positions(starts, ids)[0]]


_CHUNK_CELLS = 1 << 20  # transitions handled per array pass (bounds the temporaries of a large table)


def _runs(out: NDArray[np.int64], live_src: NDArray[Any], live_col: NDArray[Any], live_tgt: NDArray[Any],
          mult: NDArray[np.int64] | None) -> tuple[NDArray[np.int64], NDArray[Any], NDArray[Any], NDArray[np.int64] | None]:
    """The live transitions in runs: consecutive columns of one state with one target.

    Returns ``(run_out, run_src, run_tgt, run_mult)``: state ``s`` has the runs
    ``run_out[s]:run_out[s + 1]``, each with its source, its target and the sum of its
    columns' multipliers (``[2, runs]``, wrapping; None without ``mult``, for a table whose
    rows are hashed whole). A state's signature sums ``(block + 1) * mult`` over its live
    transitions, so a run's term is ``(block + 1)`` times its sum: the same value from fewer
    terms (a string's state sends most of its classes to one state)."""
    t = live_tgt.shape[0]
    brk = np.empty(t, dtype=np.bool_)
    brk[:1] = True
    np.not_equal(live_tgt[1:], live_tgt[:-1], out=brk[1:])
    rows = out[1:-1]
    brk[rows[rows < t]] = True  # (a run never crosses into the next state's row)
    starts = np.flatnonzero(brk)
    del brk
    run_mult = None if mult is None else _run_sums(starts, live_col, mult)
    return np.searchsorted(starts, out).astype(np.int64), live_src[starts], live_tgt[starts], run_mult


def _run_sums(starts: NDArray[np.int64], live_col: NDArray[Any], mult: NDArray[np.int64]) -> NDArray[np.int64]:
    """Each run's sum of its columns' multipliers (``[2, runs]``, wrapping), the runs starting
    at ``starts`` of the live transitions; in chunks of about :data:`_CHUNK_CELLS`
    transitions (the int64 temporaries of a large table stay bounded)."""
    t = live_col.shape[0]
    run_mult = np.empty((2, starts.shape[0]), dtype=np.int64)
    i = 0
    with np.errstate(over="ignore"):
        while i < starts.shape[0]:
            j = max(i + 1, int(np.searchsorted(starts, int(starts[i]) + _CHUNK_CELLS, side="left")))
            lo, hi = int(starts[i]), int(starts[j]) if j < starts.shape[0] else t
            for k in (0, 1):
                run_mult[k, i:j] = np.add.reduceat(mult[k][live_col[lo:hi]], starts[i:j] - lo)
            i = j
    return run_mult


def _sparse_hashes(dirty: NDArray[Any], out: NDArray[np.int64], run_tgt: NDArray[Any], run_mult: NDArray[np.int64],
                   block: NDArray[np.int64], base: NDArray[np.int64]) -> NDArray[np.int64]:
    """The signatures of the ``dirty`` states (``[dirty, 2]``), from their runs of live
    transitions (:func:`_runs`; state ``s`` has ``out[s]:out[s + 1]``): ``base + sum((block
    + 1) * run_mult)`` over each state's, wrapping. In chunks of about :data:`_CHUNK_CELLS`
    runs (a first round hashes every state); each state's sum lies within one chunk, so the
    values do not depend on the chunking."""
    h = np.empty((dirty.shape[0], 2), dtype=np.int64)
    ends_all = np.cumsum(out[dirty + 1] - out[dirty])
    a = 0
    while a < dirty.shape[0]:
        done = int(ends_all[a - 1]) if a else 0
        b = max(a + 1, int(np.searchsorted(ends_all, done + _CHUNK_CELLS, side="right")))
        pos, cnt = _positions(out, dirty[a:b])
        succ = block[run_tgt[pos]] + 1
        ends = np.cumsum(cnt)
        with np.errstate(over="ignore"):
            for k in (0, 1):
                acc = np.zeros(pos.shape[0] + 1, dtype=np.int64)
                np.cumsum(succ * run_mult[k][pos], out=acc[1:])
                h[a:b, k] = base[k] + acc[ends] - acc[ends - cnt]
        a = b
    return h


def _incremental_rounds(
    trans: NDArray[np.int32], init: NDArray[np.int64], max_rounds: int | None,
    deadline: float | None, *, early: list[NDArray[np.int64]] | None = None, early_at: int = 0,
) -> tuple[NDArray[np.int64], bool]:
    """Moore rounds that re-examine only the states whose successors changed block.

    Invariant: after each round, every member of a block that is not a predecessor of a
    state moved in that round has the block's recorded signature (the 128-bit hash of its
    successors' blocks). A round therefore hashes only those predecessors ("dirty"): a
    dirty state whose signature matches its block's stays; the others group by signature,
    and each group moves to a fresh block, except that a block with no clean member and
    no match keeps one group (so a block that does not split never moves). A round costs
    the number of dirty states, not the automaton's size: long counted runs, which need
    as many rounds as they are long, refine in time near their size. Returns (blocks,
    whether stable); ids are dense. ``early``: a list that gets the blocks after the first
    ``early_at`` rounds, as a run of ``early_at`` rounds returns them.
    """
    n, c = trans.shape
    if not n:
        if early is not None:
            early.append(init.astype(np.int64).copy())
        return init.astype(np.int64).copy(), True
    ext = np.empty(n + 1, dtype=np.int64)  # the blocks, then -1 (a missing transition's)
    ext[n] = -1
    block = ext[:n]  # (a view: moving a state updates both)
    block[:] = init
    count = int(block.max()) + 1
    cap = count + n + 1
    size = np.zeros(cap, dtype=np.int64)
    size[:count] = np.bincount(block, minlength=count)
    has_sig = np.zeros(cap, dtype=np.bool_)
    sig1 = np.zeros(cap, dtype=np.int64)
    sig2 = np.zeros(cap, dtype=np.int64)
    # the live transitions, by source state: state s has live_col/live_tgt[out[s]:out[s + 1]]
    # (int32 where every value fits: a large table has millions of them)
    idx = np.int32 if max(n, c) < 2**31 else np.int64
    out = np.zeros(n + 1, dtype=np.int64)
    np.cumsum((trans >= 0).sum(axis=1), out=out[1:])
    live_src = np.empty(int(out[-1]), dtype=idx)
    live_col: NDArray[Any] = np.empty(int(out[-1]), dtype=idx)
    live_tgt: NDArray[Any] = np.empty(int(out[-1]), dtype=idx)
    step = max(1, _CHUNK_CELLS // max(c, 1))
    for lo in range(0, n, step):  # (row-major: by source state, then column; in chunks of rows)
        part = trans[lo : lo + step]
        s_, c_ = np.nonzero(part >= 0)
        at, end = int(out[lo]), int(out[min(lo + step, n)])
        live_src[at:end] = s_ + lo
        live_col[at:end] = c_
        live_tgt[at:end] = part[s_, c_]
    # random odd multipliers, one pair per column (more drawn, fixed seed, for a wide table)
    mult = (_MULT if c <= _MULT.shape[1] else np.random.default_rng(c).integers(1, 2**62, size=(2, c)) | 1)[:, :c]
    # A small table hashes its dirty rows whole, which is faster there (the same values).
    dense = n * c <= DENSE_HASH_CELLS
    # the transitions in runs of one target (the predecessors of a state once per run: the
    # same distinct ones, fewer repeats), hashed by their runs where the table is not small
    run_out, run_src, run_tgt, run_mult = _runs(out, live_src, live_col, live_tgt, None if dense else mult)
    del live_src
    src, pstart = predecessors(run_src, run_tgt, n)
    del run_src
    # A signature hashes a state's row of successor blocks (-1 where a transition is
    # missing): sum over the columns of block * mult, wrapping. The missing columns' -mult
    # is the all-missing row's hash less the live columns' share, so the sum runs over the
    # live transitions only (a fraction of the table): base + (block + 1) * mult over them.
    with np.errstate(over="ignore"):
        base = -mult.sum(axis=1)
    mult_t = np.ascontiguousarray(mult.T)
    dirty = np.arange(n, dtype=np.int64)
    rounds = 0
    stable = True
    taken: NDArray[np.int64] | None = None  # the blocks after early_at rounds
    while dirty.size:
        if early is not None and taken is None and rounds == early_at:
            taken = block.copy()
        if max_rounds is not None and rounds >= max_rounds:
            stable = False
            break
        if deadline is not None and time.monotonic() > deadline:
            raise TimeLimitExceeded("compile time (s)", limit=0)
        rounds += 1
        if dense or dirty.shape[0] * c <= SMALL_ROUND_CELLS:  # rows hashed whole (the same values)
            with np.errstate(over="ignore"):  # wrapping int64 arithmetic
                h = ext[trans[dirty]] @ mult_t  # [dirty, 2] (a missing transition, -1, reads ext[n]: -1)
        else:
            assert run_mult is not None  # (not dense)
            h = _sparse_hashes(dirty, run_out, run_tgt, run_mult, block, base)
        if dirty.shape[0] <= SMALL_ROUND:
            moved_list, count = _small_round(dirty, h, block, size, has_sig, sig1, sig2, count)
            if moved_list is None:
                break
            # their predecessors, a few slices of the list (no array pass over offsets)
            got: set[int] = set()
            for s in moved_list:
                got.update(src[pstart.item(s) : pstart.item(s + 1)].tolist())
            dirty = np.asarray(sorted(got), dtype=np.int64)
            continue
        b = block[dirty]
        match = has_sig[b] & (h[:, 0] == sig1[b]) & (h[:, 1] == sig2[b])
        # the blocks met this round, numbered locally where they are few among many (a round
        # then costs its dirty count, not the number of blocks)
        if count <= 8 * b.shape[0]:
            local, nmet = b, count
        else:
            met, inv = np.unique(b, return_inverse=True)
            local, nmet = np.asarray(inv, dtype=np.int64).reshape(-1), met.shape[0]
        dcount = np.bincount(local, minlength=nmet)
        settled = np.zeros(nmet, dtype=np.bool_)  # blocks whose id stays with a group already
        settled[local[match]] = True
        settled[local[size[b] > dcount[local]]] = True
        rest = np.flatnonzero(~match)
        if not rest.size:
            break
        key = np.stack([b[rest], h[rest, 0], h[rest, 1]], axis=1)
        gid, ngroups = row_ids(key)
        first = np.full(ngroups, rest.shape[0], dtype=np.int64)
        np.minimum.at(first, gid, np.arange(rest.shape[0], dtype=np.int64))
        gblock = b[rest[first]]
        glocal = local[rest[first]]
        # in an unsettled block the group met first keeps the id (and becomes its signature)
        lead = np.full(nmet, rest.shape[0], dtype=np.int64)
        unsettled = ~settled[glocal]
        np.minimum.at(lead, glocal[unsettled], first[unsettled])
        keeper = unsettled & (lead[glocal] == first)
        kb = gblock[keeper]
        sig1[kb], sig2[kb], has_sig[kb] = h[rest[first[keeper]], 0], h[rest[first[keeper]], 1], True
        movers = np.flatnonzero(~keeper)
        if not movers.size:  # no block split: stable
            break
        fresh = np.full(ngroups, -1, dtype=np.int64)
        fresh[movers] = count + np.arange(movers.shape[0], dtype=np.int64)
        count += int(movers.shape[0])
        gsize = np.bincount(gid, minlength=ngroups)
        size[fresh[movers]] = gsize[movers]
        np.subtract.at(size, gblock[movers], gsize[movers])
        sig1[fresh[movers]], sig2[fresh[movers]] = h[rest[first[movers]], 0], h[rest[first[movers]], 1]
        has_sig[fresh[movers]] = True
        moving = fresh[gid] >= 0
        moved = dirty[rest[moving]]
        block[moved] = fresh[gid[moving]]
        pred = gather_rows(pstart, src, moved)
        dirty = sorted_unique(pred, n)
    if stable and not _is_congruence(block, init, out, live_col, live_tgt):  # a hash collision merged two rows
        if early is not None:  # (a run of early_at rounds that stopped as stable would rerun too)
            early.append(_dense(taken) if taken is not None
                         else _rounds(trans, init, early_at, deadline)[0])
        return _rounds(trans, init, max_rounds, deadline)
    dense = _dense(block)
    if early is not None:
        early.append(_dense(taken) if taken is not None else dense)
    return dense, stable


def _dense(block: NDArray[np.int64]) -> NDArray[np.int64]:
    """Block ids renumbered densely, in the order of the ids (ranks from a table of flags:
    the ids are below twice the state count, so no sort)."""
    if not block.size:
        return block.astype(np.int64)
    return unique_inverse(block, int(block.max()) + 1)[1]


SMALL_ROUND = 64
"""A round with at most this many dirty states runs its grouping in Python (:func:`_small_round`):
a long counted run refines one position per round, thousands of rounds of a few states, where
the array operations' fixed costs are most of a round."""
SMALL_ROUND_CELLS = 1 << 14  # a round's dirty rows up to this many cells are hashed whole


def _small_round(dirty: NDArray[np.int64], h: NDArray[np.int64], block: NDArray[np.int64], size: NDArray[np.int64],
                 has_sig: NDArray[np.bool_], sig1: NDArray[np.int64], sig2: NDArray[np.int64],
                 count: int) -> tuple[list[int] | None, int]:
    """One round of :func:`_incremental_rounds` after its hashes ``h``, for a few dirty
    states, in Python: the same splits, the same fresh block ids in the same order (groups
    ordered as the array path's row sort orders them: by the bytes of (block, hash, hash)).
    Returns (the states moved, or None where the round splits nothing, and the block count)."""
    d = dirty.tolist()
    b_arr = block[dirty]
    bl = b_arr.tolist()
    h0, h1 = h[:, 0].tolist(), h[:, 1].tolist()
    known = has_sig[b_arr].tolist()
    s1, s2, sizes = sig1[b_arr].tolist(), sig2[b_arr].tolist(), size[b_arr].tolist()
    dcount: dict[int, int] = {}
    for b in bl:
        dcount[b] = dcount.get(b, 0) + 1
    settled: set[int] = set()
    groups: dict[tuple[int, int, int], list[int]] = {}  # (block, hash, hash) -> dirty indices, in order
    for i, b in enumerate(bl):
        if known[i] and h0[i] == s1[i] and h1[i] == s2[i]:
            settled.add(b)
        else:
            groups.setdefault((b, h0[i], h1[i]), []).append(i)
        if sizes[i] > dcount[b]:
            settled.add(b)
    if not groups:
        return None, count
    order = sorted(groups, key=lambda k: _KEY.pack(*k))
    lead: dict[int, int] = {}  # unsettled block -> the first dirty index among its groups
    for k in order:
        if k[0] not in settled:
            first = groups[k][0]
            if first < lead.get(k[0], first + 1):
                lead[k[0]] = first
    moved: list[int] = []
    for k in order:
        b, g0, g1 = k
        members = groups[k]
        if b not in settled and lead[b] == members[0]:  # keeps the block's id: its signature now
            sig1[b], sig2[b], has_sig[b] = g0, g1, True
            continue
        fresh = count
        count += 1
        size[fresh] = len(members)
        size[b] -= len(members)
        sig1[fresh], sig2[fresh], has_sig[fresh] = g0, g1, True
        for i in members:
            block[d[i]] = fresh
            moved.append(d[i])
    if not moved:
        return None, count
    return moved, count


_KEY = struct.Struct("qqq")  # native int64s: the byte order the array path's row sort compares


def _refine(
    trans: NDArray[np.int32], initial: NDArray[np.int64], max_rounds: int | None,
    deadline: float | None, *, early: list[NDArray[np.int64]] | None = None, early_at: int = 0,
) -> tuple[NDArray[np.int64], bool]:
    init, _ = row_ids(initial.reshape(-1, 1).astype(np.int64))
    return _incremental_rounds(trans, init, max_rounds, deadline, early=early, early_at=early_at)


def refine(
    trans: NDArray[np.int32], initial: NDArray[np.int64], *, max_rounds: int | None = None,
    deadline: float | None = None,
) -> NDArray[np.int64]:
    """Refine the partition ``initial`` until stable or for ``max_rounds`` rounds.

    After k rounds two states share a block iff no string of length <= k tells them apart
    (with respect to ``initial`` and to where transitions are missing). Signatures are
    128-bit hashes, recomputed only where a successor changed block
    (:func:`_incremental_rounds`); when the refinement stabilizes, a congruence check makes
    the result exact (an exact pass reruns otherwise).
    """
    return _refine(trans, initial, max_rounds, deadline)[0]


def refine_pair(
    trans: NDArray[np.int32], initial: NDArray[np.int64], first_rounds: int, max_rounds: int, *,
    deadline: float | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``refine`` for ``first_rounds`` rounds and for ``max_rounds`` (not fewer), from one run
    of rounds: the first is the run's partition after its first ``first_rounds`` rounds,
    numbered as a run of that many rounds numbers it."""
    early: list[NDArray[np.int64]] = []
    block, _ = _refine(trans, initial, max_rounds, deadline, early=early, early_at=first_rounds)
    return early[0], block


def canonical(dfa: Dfa) -> Dfa:
    """Renumber states in BFS order from the start, visiting classes in order."""
    return _renumber(dfa, *canonical_order(dfa))


def canonical_order(dfa: Dfa) -> tuple[NDArray[np.int64], NDArray[np.int32]]:
    """The canonical numbering: ``(old, new_id)``, the old state of each new number and the
    new number of each old state (-1: unreachable)."""
    n = dfa.num_states
    new_id = np.full(n, DEAD, dtype=np.int32)
    new_id[0] = 0
    if dfa.trans.size <= SMALL_TABLE:
        ids = new_id.tolist()
        order = [0]
        rows = dfa.trans.tolist()
        i = 0
        while i < len(order):
            for t in rows[order[i]]:
                if t >= 0 and ids[t] < 0:
                    ids[t] = len(order)
                    order.append(t)
            i += 1
        return np.asarray(order, dtype=np.int64), np.asarray(ids, dtype=np.int32)
    parts = [np.zeros(1, dtype=np.int64)]
    count = 1
    frontier = parts[0]
    # Level by level: a level's discoveries, in row-major order of its rows, are exactly
    # the order in which a queue would number them.
    while frontier.size:
        succ = dfa.trans[frontier].ravel()
        succ = succ[succ >= 0]
        succ = succ[new_id[succ] < 0]
        if not succ.size:
            break
        fresh = distinct_in_order(succ)
        new_id[fresh] = np.arange(count, count + fresh.shape[0], dtype=np.int32)
        count += fresh.shape[0]
        parts.append(fresh)
        frontier = fresh
    return np.concatenate(parts), new_id


def _renumber(dfa: Dfa, old: NDArray[np.int64], new_id: NDArray[np.int32]) -> Dfa:
    """The states ``old`` (in their new order) with targets mapped through ``new_id``."""
    t = dfa.trans[old]
    t = np.where(t >= 0, new_id[np.where(t >= 0, t, 0)], DEAD).astype(np.int32)
    return Dfa(t, dfa.byte_class.copy(), dfa.accepting[old].copy())


MAX_ROUNDS: int | None = None
DENSE_HASH_CELLS = 1 << 16  # tables up to this many cells hash their rows whole (larger ones hash runs)
MAX_STATES = 300_000  # past this the DFA is only numbered canonically (correct, larger)


def minimal_blocks(trans: NDArray[np.int32], initial: NDArray[np.int64], *,
                   deadline: float | None = None) -> NDArray[np.int64] | None:
    """The coarsest partition of a pruned table's states that refines ``initial`` and is
    a congruence (each state's block); None where :func:`minimize` would not minimize."""
    if trans.shape[0] > MAX_STATES:
        return None
    block, stable = _refine(trans, initial, MAX_ROUNDS, deadline)
    return block if stable else None


def minimize(dfa: Dfa, *, max_rounds: int | None = MAX_ROUNDS, deadline: float | None = None) -> Dfa:
    """The minimal DFA for the language of a pruned ``dfa``, canonically numbered.

    Moore's refinement needs as many rounds as the longest shortest distinguishing string
    (long counted runs such as ``maxLength: 5000``); each round costs only the states whose
    successors changed block. Past ``max_rounds`` (unbounded by default) the DFA is
    returned unminimized but canonically numbered, which is correct, only larger.
    """
    if dfa.num_states > MAX_STATES:
        return canonical(dfa)
    block, stable = _refine(dfa.trans, dfa.accepting.astype(np.int64), max_rounds, deadline)
    if not stable:
        return canonical(dfa)
    nblocks = int(block.max()) + 1
    rep = np.zeros(nblocks, dtype=np.int64)
    rep[block[::-1]] = np.arange(dfa.num_states - 1, -1, -1)  # first member of each block
    t = dfa.trans[rep]
    t = np.where(t >= 0, block[np.where(t >= 0, t, 0)], DEAD).astype(np.int32)
    acc = dfa.accepting[rep].copy()
    # Make the start state's block number 0 before canonical BFS.
    quotient = Dfa(t, dfa.byte_class.copy(), acc)
    if block[0] != 0:
        perm = np.arange(nblocks)
        perm[[0, block[0]]] = perm[[block[0], 0]]
        inv = np.argsort(perm)
        t2 = quotient.trans[perm]
        t2 = np.where(t2 >= 0, inv[np.where(t2 >= 0, t2, 0)], DEAD).astype(np.int32)
        quotient = Dfa(t2, dfa.byte_class.copy(), acc[perm].copy())
    return canonical(quotient)
