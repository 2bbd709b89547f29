"""Answers of the pushdown runtime precomputed for the stack contexts a compile can list.

A pushdown state whose mask depends on the stack (it makes calls, may return, or has
uncertain tokens) makes its first visit walk those tokens on the live stack: 60 to 350 µs
on a 128k vocabulary, the tail of a decode's step times. Yet most such answers read only
the top frame, or the top two, and the frame below a state is one of a few: a return point
of its rule (or none, where its rule is the start rule). So at compile time the runtime
itself answers, for each such state ``q``, the stack ``q`` alone (where ``q``'s rule can be
at the bottom) and the stack ``r, q`` for each return point ``r``; where that answer read
below ``r`` (a token that closes two rules), the stacks ``r2, r, q`` for each return point
``r2`` of ``r``'s rule. An answer that read no deeper than the frames given holds for every
stack with the same top frames and a headroom in the interval the walk recorded; it is
stored as a mask (a delta of a close one) with that interval. The runtime looks there before
it walks: a first visit becomes a row decode.

Answers that read deeper still are left to the runtime, as are the contexts past
:data:`MAX_CONTEXTS` computations (each state's first context comes before any state's
others, so the answers that hold under any frames are found first). Where the stacks
``r2, r, q`` of two return points read deeper still and none stored an answer, the other
``r2`` of that ``r, q`` are not tried (:data:`GIVE_UP_DEEPER`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from maskc.artifacts.format import CTX_TENSORS
from maskc.compiler.dfa import first_seen
from maskc.compiler.maskstore import MaskStore, MaskStoreBuilder
from maskc.compiler.pda import Pda

if TYPE_CHECKING:
    from maskc.artifacts.artifact import Artifact

Stack = tuple[int, ...]

__all__ = ["ContextTable", "MAX_CONTEXTS", "build_contexts", "ANY_BELOW", "NONE_BELOW"]

MAX_CONTEXTS = 16_000
"""Stack contexts computed per compile at most (30 to 300 µs each). Most recursive grammars
need a few hundred; a large one 10,000 to 20,000 (MaskBench's o48094: 12,961, whose decode
then walks on 3 first visits instead of 18, per-token p99 180 -> 51 µs); a few, tens of
thousands and more, where the cap bounds the compile (renovate-schema: 183,000)."""

GIVE_UP_DEEPER = 2
"""Stacks ``r2, r, q`` whose answers read deeper still (a token that closes three rules),
none stored yet, after which the other return points ``r2`` of that ``r, q`` are not tried:
their answers would read as deep and store nothing, spending the budget that other states'
answers need (renovate-schema: a million computations for 22,000 answers without this)."""

ANY_BELOW = -1  # the answer did not read that frame: it holds whatever lies there
NONE_BELOW = -2  # the answer holds where the stack ends above that frame


@dataclass(frozen=True, slots=True)
class ContextTable:
    """Answers sorted by top ``state``, then by the frames below it: the frame ``below`` the
    top and the one below that, ``below2`` (a state, :data:`ANY_BELOW`, or
    :data:`NONE_BELOW` where the stack ends above it); the ``mask`` id of the row, whether
    the output may ``end``, and the headroom interval ``[lo, hi)`` (the frames the runtime may
    still push) the answer holds for."""

    state: NDArray[np.int32]
    below: NDArray[np.int32]
    below2: NDArray[np.int32]
    mask: NDArray[np.int32]
    lo: NDArray[np.int16]
    hi: NDArray[np.int16]
    end: NDArray[np.uint8]

    @classmethod
    def from_tensors(cls, tensors: dict[str, NDArray[Any]]) -> ContextTable:
        return cls(*(np.asarray(tensors[name], dtype=dtype) for name, (dtype, _) in CTX_TENSORS.items()))

    @property
    def num_answers(self) -> int:
        return int(self.state.shape[0])

    def tensors(self) -> dict[str, NDArray[Any]]:
        return {name: getattr(self, name[4:]) for name in CTX_TENSORS}

    def span(self, q: int) -> tuple[int, int]:
        """The answers of top state ``q``: indices ``[a, b)``."""
        return int(np.searchsorted(self.state, q)), int(np.searchsorted(self.state, q, side="right"))


def _start_frame(pda: Pda, calls: list[list[tuple[int, int]]]) -> NDArray[np.bool_]:
    """States of the start rule's own frame: from its start over bytes and call returns
    (where a state can lie at the bottom of the stack)."""
    n = pda.num_states
    seen = np.zeros(n, dtype=np.bool_)
    seen[0] = True
    trans = pda.dfa.trans
    frontier = np.zeros(1, dtype=np.int64)
    while frontier.size:
        step = trans[frontier].ravel()
        rets = [ret for q in frontier.tolist() for _, ret in calls[q]]
        nxt = np.concatenate([step[step >= 0], np.asarray(rets, dtype=np.int64)]).astype(np.int64)
        frontier = first_seen(nxt[~seen[nxt]], n)
        seen[frontier] = True
    return seen


def build_contexts(art: Artifact) -> tuple[MaskStore, ContextTable] | None:
    """The answers of ``art``'s runtime for the contexts of its stack-dependent states, and
    the mask store with their rows appended; None where there is none to store (a regular
    artifact, or no state that depends on the stack). Deterministic: the same artifact gives
    the same tables.

    Per state ``q``: the stack ``q`` alone where ``q`` can lie at the bottom, and ``r, q``
    for each return point ``r`` of its rule; an answer that read below ``r`` (a token closing
    two rules) is asked again under each return point ``r2`` of ``r``'s rule. An answer that
    read only the top frame holds under any frames, and ends the state's list.
    """
    from maskc.artifacts.pushdown import PushdownRuntime
    from maskc.compiler.align_pda import return_points

    pda = art.pda
    if pda is None or art.tokenizer is None:
        return None
    rt = PushdownRuntime(art, spell=True)  # (a state's contexts meet its candidate lists again)
    depends = rt.stack_dependent()
    if not depends.any():
        return None
    calls = pda.all_calls()
    returns = return_points(pda, None, calls)
    bottom = _start_frame(pda, calls)
    owner: list[int] = []
    below: list[tuple[int, int]] = []  # (the frame below the top, the frame below that)
    # Answers repeat (a few dozen distinct rows in thousands of contexts): each distinct
    # row is kept once, with the mask of the first state that gave it, as it comes.
    distinct: list[tuple[NDArray[np.int32], int]] = []
    found: dict[bytes, int] = {}
    which: list[int] = []  # per context: its row in ``distinct``
    lo: list[int] = []
    hi: list[int] = []
    end: list[bool] = []
    # A first context per state, then the others state by state (within MAX_CONTEXTS): the
    # answers that hold under any frames, one computation each, come first.
    work: dict[int, list[Stack]] = {}
    for q in np.flatnonzero(depends).tolist():
        contexts = ([(q,)] if bottom[q] else []) + [(r, q) for r in returns[q]]
        work[q] = [c for c in contexts if len(c) <= art.max_depth]  # (no stack is deeper)
    done = 0
    deeper: dict[Stack, int] = {}  # (r, q) -> how many of its stacks r2, r, q read deeper still
    stored: set[Stack] = set()  # (r, q) with an answer stored under some r2
    for first in (True, False):
        for q, todo in work.items():
            k = 0
            while k < len(todo) and done < MAX_CONTEXTS:
                s = todo[k]
                k += 1
                if len(s) == 3 and deeper.get(s[1:], 0) >= GIVE_UP_DEEPER and s[1:] not in stored:
                    continue  # (the tokens that read below r2 under other r2 most likely do here too)
                (row, can_end), w = rt.compute_mask((s,))
                done += 1
                reach = max(w.reach)
                key: tuple[int, int] | None
                if reach <= 1:
                    key = (ANY_BELOW, ANY_BELOW)
                elif len(s) == 1:
                    key = (NONE_BELOW, ANY_BELOW)  # it looked below the bottom: for this stack alone
                elif reach == 2:
                    key = (s[-2], ANY_BELOW)
                elif len(s) == 2:
                    # it looked below r: for the stack r, q alone (where r can lie at the
                    # bottom), and asked again under each return point of r's rule
                    todo.extend(c for c in ((r2, *s) for r2 in returns[s[0]]) if len(c) <= art.max_depth)
                    key = (s[0], NONE_BELOW) if bottom[s[0]] else None
                elif reach == 3:
                    key = (s[1], s[0])
                    stored.add(s[1:])  # (the other r2 of this r, q are all tried)
                else:
                    key = None  # it read deeper still: the runtime decides on the live stack
                    deeper[s[1:]] = deeper.get(s[1:], 0) + 1
                if key is not None:
                    owner.append(q)
                    below.append(key)
                    j = found.setdefault(row.tobytes(), len(distinct))
                    if j == len(distinct):
                        distinct.append((row, int(art.state_mask[q])))
                    which.append(j)
                    lo.append(w.lo[0])
                    hi.append(w.hi[0])
                    end.append(can_end)
                if reach <= 1:
                    k = len(todo)  # one answer for every stack below
                if first:
                    break
            del todo[:k]
    if not below:
        return None
    builder = MaskStoreBuilder(art.vocab_size, art.masks)
    added = [builder.add_row(row.view(np.int32), base) for row, base in distinct]  # (uint32 rows)
    ids = [added[j] for j in which]
    store = builder.build()
    # sorted by top state, then by the frames below (NONE_BELOW and ANY_BELOW first): the
    # runtime searches them. The headroom lies in [0, max_depth): an interval is kept
    # within [-1, max_depth + 1], which holds the same headrooms.
    b1 = np.asarray([b for b, _ in below], dtype=np.int64)
    b2 = np.asarray([b for _, b in below], dtype=np.int64)
    states = np.asarray(owner, dtype=np.int64)
    order = np.lexsort((b2, b1, states))
    top = art.max_depth + 1
    table = ContextTable(states.astype(np.int32)[order], b1.astype(np.int32)[order], b2.astype(np.int32)[order],
                         np.asarray(ids, dtype=np.int32)[order],
                         np.clip(np.asarray(lo, dtype=np.int64), -1, top).astype(np.int16)[order],
                         np.clip(np.asarray(hi, dtype=np.int64), -1, top).astype(np.int16)[order],
                         np.asarray(end, dtype=np.uint8)[order])
    return store, table
