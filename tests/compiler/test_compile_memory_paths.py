"""The array forms of the pushdown build's graph walks against plain queue and set walks.

``_canonical_blocks`` numbers blocks breadth first a level at a time, ``return_points``
lists successors from deduplicated arrays and shares one list per rule set, and the trie
walk keeps one scaled copy of the table it walks: each must give what the direct
definition gives, on random tables with calls, dead edges and merged blocks.
"""

from __future__ import annotations

import numpy as np
import pytest

from maskc.compiler.align_pda import return_points
from maskc.compiler.dfa import Dfa
from maskc.compiler.pda import Pda, _canonical_blocks
from maskc.compiler.trie import _scaled


def _random_full(rng: np.random.Generator, n: int, c: int, r: int) -> np.ndarray:
    full = rng.integers(-1, n, size=(n, c + r)).astype(np.int32)
    full[rng.random((n, c + r)) < 0.55] = -1  # sparse rows, calls rare
    full[:, c:][rng.random((n, r)) < 0.6] = -1
    return full


def _queue_blocks(full: np.ndarray, c: int, block: np.ndarray, keep: np.ndarray,
                  starts: np.ndarray) -> tuple[list[int], list[int]]:
    """The definition: a queue over blocks from the start rule's start; each block's first
    kept state lists its columns in order, a call column's return state then the callee's start."""
    rep: dict[int, int] = {}
    for q in range(full.shape[0]):
        if keep[q]:
            rep.setdefault(int(block[q]), q)
    first = int(block[starts[0]])
    order, seen = [first], {first}
    for b in order:
        q = rep[b]
        for col in range(full.shape[1]):
            t = int(full[q, col])
            if t < 0:
                continue
            found = [int(block[t])] + ([int(block[starts[col - c]])] if col >= c else [])
            for x in found:
                if x not in seen:
                    seen.add(x)
                    order.append(x)
    return [rep[b] for b in order], order


@pytest.mark.parametrize("seed", range(12))
def test_canonical_blocks_number_as_a_queue(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, c, r = int(rng.integers(5, 60)), int(rng.integers(1, 6)), int(rng.integers(1, 4))
    full = _random_full(rng, n, c, r)
    starts = rng.integers(0, n, size=r).astype(np.int64)
    keep = np.ones(n, dtype=np.bool_)
    # blocks: a random merge of states (the walk reads each block's first state only)
    block = rng.integers(0, max(2, n // 2), size=n).astype(np.int64)
    _, block = np.unique(block, return_inverse=True)
    block = block.astype(np.int64)
    got_reps, got_order = _canonical_blocks(full, c, block, keep, starts)
    want_reps, want_order = _queue_blocks(full, c, block, keep, starts)
    assert got_order.tolist() == want_order
    assert got_reps.tolist() == want_reps


def _pda(rng: np.random.Generator, n: int, c: int, r: int) -> Pda:
    trans = rng.integers(-1, n, size=(n, c)).astype(np.int32)
    trans[rng.random((n, c)) < 0.5] = -1
    rule = []
    ret = []
    offsets = [0]
    for _ in range(n):
        k = int(rng.integers(0, 3)) if rng.random() < 0.3 else 0
        for _ in range(k):
            rule.append(int(rng.integers(0, r)))
            ret.append(int(rng.integers(0, n)))
        offsets.append(len(rule))
    starts = rng.integers(0, n, size=r).astype(np.int32)
    starts[0] = 0
    dfa = Dfa(trans, np.zeros(256, dtype=np.uint8), rng.random(n) < 0.3)
    return Pda(dfa, np.asarray(offsets, dtype=np.int64), np.asarray(rule, dtype=np.int32),
               np.asarray(ret, dtype=np.int32), starts, np.zeros(n, dtype=np.int32),
               tuple(f"r{i}" for i in range(r)))


def _set_returns(pda: Pda) -> list[list[int]]:
    """The definition: per called rule, every state its start reaches (bytes and returns) gets its return points."""
    calls = pda.all_calls()
    returns: dict[int, set[int]] = {}
    for q in range(pda.num_states):
        for rule, ret in calls[q]:
            returns.setdefault(rule, set()).add(ret)
    out: list[set[int]] = [set() for _ in range(pda.num_states)]
    rows = pda.dfa.trans.tolist()
    for rule, start in enumerate(pda.rule_start.tolist()):
        if start < 0 or rule not in returns:
            continue
        seen, work = {start}, [start]
        while work:
            q = work.pop()
            out[q] |= returns[rule]
            for t in [t for t in rows[q] if t >= 0] + [ret for _, ret in calls[q]]:
                if t not in seen:
                    seen.add(t)
                    work.append(t)
    return [sorted(x) for x in out]


@pytest.mark.parametrize("seed", range(12))
def test_return_points_match_the_set_walk(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    pda = _pda(rng, int(rng.integers(3, 50)), int(rng.integers(1, 5)), int(rng.integers(1, 4)))
    assert return_points(pda) == _set_returns(pda)


def test_scaled_table_is_per_table() -> None:
    a = np.arange(12, dtype=np.int64)
    b = np.arange(12, dtype=np.int64)[::-1].copy()
    assert _scaled(a, 3, np.int32).tolist() == (a * 3).tolist()
    assert _scaled(a, 3, np.int32) is _scaled(a, 3, np.int32)  # kept for the same table
    assert _scaled(a, 5, np.int32).tolist() == (a * 5).tolist()  # another width
    assert _scaled(b, 5, np.int32).tolist() == (b * 5).tolist()  # another table: its own
    assert _scaled(b, 5, np.int64).dtype == np.int64
