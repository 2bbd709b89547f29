"""DFA minimization and canonical state numbering.

Moore's partition refinement, vectorized: each round splits blocks by the tuple
(block, block of each successor). The result is numbered canonically (BFS from the start
in class order), so equal languages over equal classes give identical arrays.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from maskc.compiler.dfa import DEAD, Dfa

__all__ = ["minimize", "refine", "canonical"]


def _row_ids(rows: NDArray[np.int64]) -> tuple[NDArray[np.int64], int]:
    """Dense ids for identical rows (order of first occurrence is irrelevant here)."""
    contiguous = np.ascontiguousarray(rows)
    view = contiguous.view(np.dtype((np.void, contiguous.dtype.itemsize * contiguous.shape[1])))
    _, inverse = np.unique(view.ravel(), return_inverse=True)
    inv = np.asarray(inverse, dtype=np.int64).reshape(-1)
    return inv, int(inv.max()) + 1 if inv.size else 0


def refine(
    trans: NDArray[np.int32], initial: NDArray[np.int64], *, max_rounds: int | None = None
) -> NDArray[np.int64]:
    """Refine the partition ``initial`` until stable or for ``max_rounds`` rounds.

    After k rounds two states share a block iff no string of length <= k tells them apart
    (with respect to ``initial`` and to where transitions are missing).
    """
    block, count = _row_ids(initial.reshape(-1, 1).astype(np.int64))
    rounds = 0
    while max_rounds is None or rounds < max_rounds:
        succ = np.where(trans >= 0, block[np.where(trans >= 0, trans, 0)], -1)
        sig = np.concatenate([block[:, None], succ.astype(np.int64)], axis=1)
        new_block, new_count = _row_ids(sig)
        rounds += 1
        block = new_block
        if new_count == count:
            break
        count = new_count
    return block


def canonical(dfa: Dfa) -> Dfa:
    """Renumber states in BFS order from the start, visiting classes in order."""
    n = dfa.num_states
    order = [0]
    new_id = np.full(n, DEAD, dtype=np.int32)
    new_id[0] = 0
    i = 0
    while i < len(order):
        for t in dfa.trans[order[i]].tolist():
            if t >= 0 and new_id[t] < 0:
                new_id[t] = len(order)
                order.append(t)
        i += 1
    old = np.asarray(order, dtype=np.int64)
    t = dfa.trans[old]
    t = np.where(t >= 0, new_id[np.where(t >= 0, t, 0)], DEAD).astype(np.int32)
    return Dfa(t, dfa.byte_class.copy(), dfa.accepting[old].copy())


def minimize(dfa: Dfa) -> Dfa:
    """The minimal DFA for the language of a pruned ``dfa``, canonically numbered."""
    block = refine(dfa.trans, dfa.accepting.astype(np.int64))
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
