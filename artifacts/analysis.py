"""Static facts about a compiled artifact: how long an output can get, and whether EOS stays
reachable for a decoder that can only emit whole tokens.

Both answer questions the grammar alone cannot: the byte DFA is pruned (every state can
reach acceptance), but a model speaks in tokens, so a state is only safe if a *token* path
to EOS exists from it. ``worst_case_length`` bounds every complete output, which is what
``maskc check --max-tokens auto`` budgets for and what the adversarial sampler tries to reach.
No torch here: numpy over the artifact's tables.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from maskc.artifacts.artifact import Artifact
from maskc.compiler.dfa import Dfa
from maskc.compiler.vocab import Vocabulary

__all__ = [
    "LengthBound",
    "Reachability",
    "TokenWalker",
    "eos_reachability",
    "worst_case_length",
]

UNBOUNDED = np.iinfo(np.int64).max


@dataclass(frozen=True, slots=True)
class LengthBound:
    """The longest complete output in bytes, or where the grammar can repeat without end.

    Attributes:
        max_bytes: Bytes of the longest accepted output; None when outputs are unbounded.
        remaining: Per state, the most bytes still to come before the grammar can end
            (``UNBOUNDED`` for states from which a loop is reachable).
        loop_prefix: For unbounded grammars, a shortest prefix reaching a state on a loop.
        loop: The bytes of that loop (the prefix followed by any number of them stays valid).
    """

    max_bytes: int | None
    remaining: NDArray[np.int64]
    loop_prefix: bytes = b""
    loop: bytes = b""

    @property
    def bounded(self) -> bool:
        return self.max_bytes is not None

    @property
    def max_tokens(self) -> int | None:
        """A sound token budget: every non-EOS token carries at least one byte, then EOS."""
        return None if self.max_bytes is None else self.max_bytes + 1


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
    pairs = np.unique(src.astype(np.int64) * n + dst)
    return pairs // n, pairs % n


def worst_case_length(dfa: Dfa) -> LengthBound:
    """The longest path to acceptance from every state, in bytes (reverse topological order).

    States are settled sink-first, level by level in numpy; a state whose successors never
    all settle lies on, or leads to, a loop: the language is infinite and the witness names
    a prefix and the loop it can repeat.
    """
    n = dfa.num_states
    src, dst = _edges(dfa)
    outdeg = np.bincount(src, minlength=n).astype(np.int64)
    order = np.argsort(dst, kind="stable")
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
        cand = np.unique(preds)
        new = cand[(outdeg[cand] == 0) & ~done[cand]]
        done[new] = True
        frontier = new
    if bool(done.all()):
        return LengthBound(int(remaining[0]), remaining)
    remaining[~done] = UNBOUNDED
    prefix, loop = _loop_witness(dfa, ~done)
    return LengthBound(None, remaining, prefix, loop)


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
        t = np.unique(targets)
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


class TokenWalker:
    """Walks many tokens from one state at once: the state each token ends in, or -1."""

    def __init__(self, artifact: Artifact, vocab: Vocabulary) -> None:
        self.dfa = artifact.dfa
        flat, offsets = vocab.flat()
        self.lengths = np.diff(offsets)
        self.offsets = offsets
        self.classes = self.dfa.byte_class[flat].astype(np.int64)

    def walk(self, state: int, ids: NDArray[np.int64]) -> NDArray[np.int64]:
        ids = np.asarray(ids, dtype=np.int64)
        cur = np.full(ids.size, state, dtype=np.int64)
        lens = self.lengths[ids]
        cur[lens == 0] = -1
        pos = self.offsets[ids]
        trans = self.dfa.trans
        for k in range(int(lens.max(initial=0))):
            live = (cur >= 0) & (lens > k)
            if not live.any():
                break
            cur[live] = trans[cur[live], self.classes[pos[live] + k]]
        return cur


@dataclass(frozen=True, slots=True)
class Reachability:
    """Whether EOS is reachable by whole tokens from every token-reachable state.

    Attributes:
        proved: True when it holds for every state.
        method: ``single-byte tokens`` (every byte step of the DFA is also an allowed
            one-byte token, so every byte path is a token path) or ``token graph`` (the
            token-level automaton explored from the start).
        states: States examined.
        counterexample: Token ids of a prefix that reaches a state with no token path to EOS.
        detail: One sentence for people.
    """

    proved: bool
    method: str
    states: int
    counterexample: tuple[int, ...] | None
    detail: str


def _bits(row: NDArray[np.int32], ids: NDArray[np.int64]) -> NDArray[np.bool_]:
    words: NDArray[np.uint32] = row.view(np.uint32)[ids >> 5]
    bits: NDArray[np.bool_] = ((words >> (ids & 31).astype(np.uint32)) & 1).astype(np.bool_)
    return bits


def _single_byte_proof(artifact: Artifact, vocab: Vocabulary) -> bool:
    """Every DFA transition is an allowed one-byte token, and every accepting state allows EOS."""
    single = np.full(256, -1, dtype=np.int64)
    for i, b in enumerate(vocab.token_bytes):
        if len(b) == 1 and i not in vocab.special_ids and single[b[0]] < 0:
            single[b[0]] = i
    dfa = artifact.dfa
    has = single >= 0
    eos = np.asarray(artifact.eos_token_ids, dtype=np.int64)
    verdict: dict[int, NDArray[np.bool_]] = {}  # mask id -> classes covered
    for s in range(dfa.num_states):
        m = int(artifact.state_mask[s])
        covered = verdict.get(m)
        if covered is None:
            row = artifact.mask_row(s)
            ok = np.zeros(256, dtype=np.bool_)
            ok[has] = _bits(row, single[has])
            covered = np.zeros(dfa.num_classes, dtype=np.bool_)
            np.logical_or.at(covered, dfa.byte_class.astype(np.int64), ok)
            eos_ok = bool(eos.size) and bool(_bits(row, eos).any())
            verdict[m] = covered = np.r_[covered, eos_ok]
        needed = dfa.trans[s] >= 0
        if not covered[:-1][needed].all():
            return False
        if dfa.accepting[s] and not covered[-1]:
            return False
    return True


def eos_reachability(artifact: Artifact, vocab: Vocabulary, *, max_work: int = 50_000_000) -> Reachability:
    """Prove that whole tokens can always reach EOS, or find a prefix after which they cannot.

    First the cheap sufficient condition (one-byte tokens cover every byte step: true for
    byte-level BPE and for SentencePiece with byte fallback); otherwise an exploration of
    the token-level automaton from the start, bounded by ``max_work`` token walks.
    """
    dfa = artifact.dfa
    if _single_byte_proof(artifact, vocab):
        return Reachability(True, "single-byte tokens", dfa.num_states, None,
                            "every byte step is an allowed one-byte token and every accepting "
                            "state allows EOS, so every byte path to the end is a token path")
    walker = TokenWalker(artifact, vocab)
    eos = set(artifact.eos_token_ids)
    parent: dict[int, tuple[int, int]] = {0: (-1, -1)}
    succ: dict[int, set[int]] = {}
    finishes: set[int] = set()
    queue, work = deque([0]), 0
    while queue:
        s = queue.popleft()
        ids = artifact.allowed_tokens(s)
        if any(int(i) in eos for i in ids):
            finishes.add(s)
        ids = ids[[int(i) not in eos for i in ids]] if eos else ids
        work += int(ids.size)
        if work > max_work:
            return Reachability(False, "token graph", len(parent), None,
                                f"undecided: the token graph exceeded {max_work:,} token walks")
        ends = walker.walk(s, ids)
        nxt: set[int] = set()
        for tok, t in zip(ids.tolist(), ends.tolist()):
            if t < 0:
                continue
            nxt.add(t)
            if t not in parent:
                parent[t] = (s, tok)
                queue.append(t)
        succ[s] = nxt
    good = set(finishes)
    changed = True
    while changed:
        changed = False
        for s, nxt in succ.items():
            if s not in good and not nxt.isdisjoint(good):
                good.add(s)
                changed = True
    bad = [s for s in parent if s not in good]
    if not bad:
        return Reachability(True, "token graph", len(parent), None,
                            f"all {len(parent)} token-reachable states have a token path to EOS")

    def depth(s: int) -> int:
        d = 0
        while parent[s][0] >= 0:
            s, d = parent[s][0], d + 1
        return d

    s = min(bad, key=depth)
    path: list[int] = []
    while parent[s][0] >= 0:
        s, tok = parent[s]
        path.append(tok)
    return Reachability(False, "token graph", len(parent), tuple(reversed(path)),
                        f"{len(bad)} of {len(parent)} token-reachable states have no token path to EOS")


@dataclass
class Adversary:
    """Among allowed tokens, picks one that keeps the longest possible continuation open.

    Score of a token = the most bytes still possible after it (``UNBOUNDED`` inside a loop);
    EOS only when nothing else is allowed; ties go to the model's highest logit, so the worst
    case it finds is one the model could plausibly produce.
    """

    artifact: Artifact
    vocab: Vocabulary
    bound: LengthBound

    @cached_property
    def walker(self) -> TokenWalker:
        return TokenWalker(self.artifact, self.vocab)

    def choose(self, state: int, allowed: NDArray[np.int64], logits: NDArray[np.float32]) -> int:
        eos = np.isin(allowed, np.asarray(self.artifact.eos_token_ids, dtype=np.int64))
        body = allowed[~eos]
        if body.size == 0:
            return int(allowed[0]) if allowed.size else -1
        ends = self.walker.walk(state, body)
        ok = ends >= 0
        body, ends = body[ok], ends[ok]
        if body.size == 0:
            return int(allowed[eos][0]) if eos.any() else -1
        score = self.bound.remaining[ends]
        best = body[score == score.max()]
        return int(best[np.argmax(logits[best])])
