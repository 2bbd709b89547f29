"""Token-level facts about a compiled artifact: whether EOS stays reachable for a decoder
that can only emit whole tokens, and the adversarial sampler that chases the worst case.

The byte automaton is pruned (every state can reach acceptance), but a model speaks in
tokens, so a state is only safe if a *token* path to EOS exists from it. Regular artifacts
are read through their DFA and masks; recursive (pushdown) ones through the runtime's exact
masks over configurations. The torch-free length analysis lives in
:mod:`maskc.compiler.analysis` and is re-exported here.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray

from maskc.artifacts.artifact import Artifact
from maskc.compiler.analysis import INFEASIBLE, UNBOUNDED, UNBOUNDED_FRAME, LengthBound, worst_case_length
from maskc.compiler.pda import NEED_INF
from maskc.compiler.maskstore import unpack_bool
from maskc.compiler.pipeline import token_table
from maskc.compiler.spelling import walk_tokens
from maskc.compiler.vocab import Vocabulary

__all__ = [
    "INFEASIBLE",
    "UNBOUNDED",
    "UNBOUNDED_FRAME",
    "Adversary",
    "LengthBound",
    "Reachability",
    "TokenWalker",
    "eos_reachability",
    "length_bound",
    "worst_case_length",
]

Config = tuple[tuple[int, ...], ...]


def length_bound(artifact: Artifact) -> LengthBound:
    """:func:`worst_case_length` of an artifact: its DFA, or its pushdown automaton under
    ``artifact.max_depth``."""
    if artifact.pda is not None:
        return worst_case_length(artifact.pda, artifact.max_depth)
    return worst_case_length(artifact.dfa)


class TokenWalker:
    """Walks many tokens from one state at once: the state each token ends in, or -1
    (the compiler's :func:`~maskc.compiler.spelling.walk_tokens` over the artifact's DFA)."""

    def __init__(self, artifact: Artifact, vocab: Vocabulary) -> None:
        self.dfa = artifact.dfa
        self.table = token_table(vocab)

    def walk(self, state: int, ids: NDArray[np.int64]) -> NDArray[np.int64]:
        return walk_tokens(self.dfa, self.table, state, ids)


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


def _single_byte_tokens(vocab: Vocabulary) -> NDArray[np.int64]:
    """Per byte, a non-special token of exactly that byte (-1: none)."""
    single = np.full(256, -1, dtype=np.int64)
    for i, b in enumerate(vocab.token_bytes):
        if len(b) == 1 and i not in vocab.special_ids and single[b[0]] < 0:
            single[b[0]] = i
    return single


def _single_byte_proof(artifact: Artifact, vocab: Vocabulary) -> bool:
    """Every byte step is an allowed one-byte token, and EOS is allowed wherever the output
    can end.

    Regular artifacts: read per DFA state from its mask. Recursive ones: a byte step of
    ``q`` (inside its rule; a call or a return puts the callee's start or the return state
    on top first, and is checked there) must have its one-byte token among ``q``'s accepted
    or uncertain tokens, which the runtime allows exactly when the byte can follow; the
    runtime adds EOS wherever the output can end, so an EOS id must exist; and every state
    must be finishable within the nesting bound (``need``), which the runtime's depth guard
    then keeps true of every configuration it reaches.
    """
    single = _single_byte_tokens(vocab)
    dfa = artifact.dfa
    pda = artifact.pda
    has = single >= 0
    eos = np.asarray(artifact.eos_token_ids, dtype=np.int64)
    if pda is not None:
        need = pda.need
        if not eos.size or bool((need >= NEED_INF).any()) or int(need[0]) + 1 > artifact.max_depth:
            return False
    uncertain = artifact.uncertain_mask
    verdict: dict[tuple[int, int], NDArray[np.bool_]] = {}  # mask ids -> classes covered (+ EOS)
    for s in range(dfa.num_states):
        key = (int(artifact.state_mask[s]), int(uncertain[s]) if uncertain is not None else -1)
        covered = verdict.get(key)
        if covered is None:
            row = artifact.mask_row(s)
            if uncertain is not None:
                row = row | artifact.masks.dense_row(key[1])
            ok = np.zeros(256, dtype=np.bool_)
            ok[has] = _bits(row, single[has])
            covered = np.zeros(dfa.num_classes, dtype=np.bool_)
            np.logical_or.at(covered, dfa.byte_class.astype(np.int64), ok)
            eos_ok = bool(eos.size) and (pda is not None or bool(_bits(row, eos).any()))
            verdict[key] = covered = np.r_[covered, eos_ok]
        needed = dfa.trans[s] >= 0
        if not covered[:-1][needed].all():
            return False
        if dfa.accepting[s] and not covered[-1]:
            return False
    return True


def eos_reachability(artifact: Artifact, vocab: Vocabulary, *, max_work: int = 50_000_000,
                     max_configs: int = 20_000) -> Reachability:
    """Prove that whole tokens can always reach EOS, or find a prefix after which they cannot.

    First the cheap sufficient condition (one-byte tokens cover every byte step: true for
    byte-level BPE and for SentencePiece with byte fallback); otherwise an exploration of
    the token-level automaton from the start, bounded by ``max_work`` token walks. For a
    recursive artifact the exploration runs over configurations (stacks) with the
    runtime's exact masks, at most ``max_configs`` of them; past a budget the answer is
    "not proved", never a proof.

    Example:
        >>> r = eos_reachability(art, vocab)
        >>> r.proved, r.method, r.counterexample
    """
    dfa = artifact.dfa
    if _single_byte_proof(artifact, vocab):
        if artifact.pda is not None:
            return Reachability(True, "single-byte tokens", dfa.num_states, None,
                                "every byte step is an allowed one-byte token, EOS is allowed wherever "
                                "the output can end, and the depth guard keeps every stack finishable, "
                                "so every byte path to the end is a token path")
        return Reachability(True, "single-byte tokens", dfa.num_states, None,
                            "every byte step is an allowed one-byte token and every accepting "
                            "state allows EOS, so every byte path to the end is a token path")
    if artifact.pda is not None:
        return _configuration_graph(artifact, vocab, max_work=max_work, max_configs=max_configs)
    walker = TokenWalker(artifact, vocab)
    exits = dfa.counters.exit.tolist() if dfa.counters is not None else None
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
        if exits is not None and exits[s] >= 0 and exits[s] not in parent:
            parent[exits[s]] = (s, -1)  # a counted loop's exit, taken after enough arrivals
            queue.append(exits[s])
    if exits is not None:
        # A head reaches its exit when tokens can keep arriving: when a token path leads back to it.
        for s in list(succ):
            if exits[s] >= 0 and _returns(succ, s):
                succ[s] = succ[s] | {exits[s]}
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
        if tok >= 0:  # not a loop exit
            path.append(tok)
    return Reachability(False, "token graph", len(parent), tuple(reversed(path)),
                        f"{len(bad)} of {len(parent)} token-reachable states have no token path to EOS")


def _returns(succ: dict[int, set[int]], start: int) -> bool:
    """Whether a path of ``succ`` edges leads from ``start`` back to it."""
    seen: set[int] = set()
    stack = list(succ.get(start, ()))
    while stack:
        s = stack.pop()
        if s == start:
            return True
        if s not in seen:
            seen.add(s)
            stack.extend(succ.get(s, ()))
    return False


def _allowed_ids(row: NDArray[np.int32], vocab_size: int) -> NDArray[np.int64]:
    return np.flatnonzero(unpack_bool(row, vocab_size)).astype(np.int64)


def _configuration_graph(artifact: Artifact, vocab: Vocabulary, *, max_work: int, max_configs: int) -> Reachability:
    """Breadth-first over the configurations whole tokens reach, with the runtime's masks.

    A configuration is *good* when EOS is allowed there or a token leads to a good one. A
    configuration left unexpanded (budget) counts as possibly good, so a counterexample is
    only reported for a configuration whose every continuation was explored.
    """
    method = "configuration graph"
    rt: Any = artifact.runtime()
    tokens = vocab.token_bytes
    eos = np.asarray(artifact.eos_token_ids, dtype=np.int64)
    root: Config = ((0,),)
    parent: dict[Config, tuple[Config | None, int]] = {root: (None, -1)}
    succ: dict[Config, set[Config]] = {}
    finishes: set[Config] = set()
    queue: deque[Config] = deque([root])
    work = 0
    budget_hit = ""
    while queue:
        if len(parent) > max_configs:
            budget_hit = f"{max_configs:,} configurations"
            break
        c = queue.popleft()
        row, can_end = rt.mask(c)
        if can_end and eos.size:
            finishes.add(c)
        ids = _allowed_ids(row, artifact.vocab_size)
        ids = ids[~np.isin(ids, eos)]
        work += int(ids.size)
        if work > max_work:
            budget_hit = f"{max_work:,} token steps"
            break
        nxt: set[Config] = set()
        for tok in ids.tolist():
            c2: Config = rt.advance(c, tokens[tok], tok)
            if not c2:
                continue
            nxt.add(c2)
            if c2 not in parent:
                parent[c2] = (c, tok)
                queue.append(c2)
        succ[c] = nxt
    preds: dict[Config, list[Config]] = {}
    for c, nxt in succ.items():
        for c2 in nxt:
            preds.setdefault(c2, []).append(c)
    unexpanded = [c for c in parent if c not in succ]
    maybe = set(finishes) | set(unexpanded)
    work_list = list(maybe)
    while work_list:
        c = work_list.pop()
        for p in preds.get(c, ()):
            if p not in maybe:
                maybe.add(p)
                work_list.append(p)
    bad = [c for c in parent if c not in maybe]  # discovery order: fewest tokens first
    if bad:
        c_opt: Config | None = bad[0]
        path: list[int] = []
        while c_opt is not None:
            c_opt, tok = parent[c_opt]
            if tok >= 0:
                path.append(tok)
        return Reachability(False, method, len(parent), tuple(reversed(path)),
                            f"{len(bad)} of {len(parent)} token-reachable configurations have no token path to EOS")
    if unexpanded:
        return Reachability(False, method, len(parent), None,
                            f"undecided: not proved within {budget_hit}; {len(succ):,} configurations "
                            f"explored, no dead end among them")
    return Reachability(True, method, len(parent), None,
                        f"all {len(parent)} token-reachable configurations have a token path to EOS")


EXACT_CANDIDATES = 2048
"""On a recursive artifact the adversary scores at most this many allowed tokens exactly per
step (the one-byte tokens, then the model's favourites); the rest are left out."""


@dataclass
class Adversary:
    """Among allowed tokens, picks one that keeps the longest possible continuation open.

    Score of a token = the most bytes still possible after it (``UNBOUNDED`` inside a loop);
    EOS only when nothing else is allowed; ties go to the model's highest logit, so the worst
    case it finds is one the model could plausibly produce. On a recursive artifact the
    score is that of the configuration after the token: the best of its stacks, each the sum
    of its frames' remaining worst cases (:meth:`LengthBound.stack_remaining`).
    """

    artifact: Artifact
    vocab: Vocabulary
    bound: LengthBound

    @cached_property
    def walker(self) -> TokenWalker:
        return TokenWalker(self.artifact, self.vocab)

    def choose(self, at: int | Config, allowed: NDArray[np.int64], logits: NDArray[np.float32]) -> int:
        """The token to emit, or -1 when nothing is allowed.

        Args:
            at: Where the matcher is: ``Matcher.state`` for a regular artifact,
                ``PushdownMatcher.config`` for a recursive one (a bare state there stands
                for a one-frame stack).
            allowed: The allowed token ids (``matcher.allowed_token_ids()``).
            logits: The model's logits, for ties.
        """
        eos = np.isin(allowed, np.asarray(self.artifact.eos_token_ids, dtype=np.int64))
        body = allowed[~eos]
        if body.size == 0:
            return int(allowed[0]) if allowed.size else -1
        if self.artifact.pda is not None:
            config: Config = ((int(at),),) if isinstance(at, (int, np.integer)) else at
            picked = self._choose_pushdown(config, body, logits)
            if picked < 0:
                return int(allowed[eos][0]) if eos.any() else -1
            return picked
        if not isinstance(at, (int, np.integer)):
            raise TypeError(f"a regular artifact's adversary takes a state id, got {type(at).__name__}")
        ends = self.walker.walk(int(at), body)
        ok = ends >= 0
        body, ends = body[ok], ends[ok]
        if body.size == 0:
            return int(allowed[eos][0]) if eos.any() else -1
        score = self.bound.remaining[ends]
        best = body[score == score.max()]
        return int(best[np.argmax(logits[best])])

    def _choose_pushdown(self, config: Config, body: NDArray[np.int64], logits: NDArray[np.float32]) -> int:
        rt: Any = self.artifact.runtime()
        tokens = self.vocab.token_bytes
        if body.size > EXACT_CANDIDATES:
            short = body[[len(tokens[t]) == 1 for t in body.tolist()]]
            rest = body[~np.isin(body, short)]
            top = rest[np.argsort(-logits[rest], kind="stable")[: max(EXACT_CANDIDATES - short.size, 0)]]
            body = np.concatenate([short, top])
        best_key: tuple[int, int] | None = None
        best: list[int] = []
        for tok in body.tolist():
            after: Config = rt.advance(config, tokens[tok], tok)
            if not after:
                continue
            key = (-1, 0)
            for stack in after:
                got = self.bound.stack_remaining(stack)
                k = (1, 0) if got is None else (0, got)
                if k > key:
                    key = k
            if best_key is None or key > best_key:
                best_key, best = key, [tok]
            elif key == best_key:
                best.append(tok)
        if not best:
            return -1
        ids = np.asarray(best, dtype=np.int64)
        return int(ids[np.argmax(logits[ids])])
