"""The grammar half of ``maskc audit``: tokenizer-boundary hazards of one grammar on one tokenizer.

Input: the tables of a compiled regular grammar (a
:class:`~maskc.compiler.pipeline.CompiledGrammar`, or an artifact, which holds the same
``dfa``, ``state_mask`` and ``masks``) and its :class:`~maskc.compiler.vocab.Vocabulary`.
Output: a :class:`GrammarAudit` — per category and per state kind
(:func:`~maskc.compiler.audit.states.state_kinds`) the states, (state, token) pairs and
distinct tokens concerned, examples with a witness prefix, and the findings. The per-state
work runs once per group of states that cannot differ (same mask and accepted bytes, or the
same block of the depth-``L`` refinement for walks), vectorized over the vocabulary.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from maskc.compiler.audit.grammar_rules import RULES
from maskc.compiler.audit.report import (
    Example, GrammarAudit, GrammarCategory, KindCount, Tally, category_findings, show_bytes,
)
from maskc.compiler.audit.states import (
    KINDS, STRUCTURAL_BYTES, WHITESPACE_BYTES, Prefixes, StateKind, forced_runs, live_bytes, state_blocks,
    state_kinds, structural_steps,
)
from maskc.compiler.align import TokenTable
from maskc.compiler.dfa import Dfa, sorted_unique
from maskc.compiler.errors import TokenizerError
from maskc.compiler.maskstore import MaskStore
from maskc.compiler.pda import Pda
from maskc.compiler.pipeline import token_table
from maskc.compiler.spelling import walk_tokens
from maskc.compiler.utf8 import whole_chars
from maskc.compiler.vocab import Vocabulary

__all__ = ["RULES", "Example", "GrammarAudit", "GrammarCategory", "GrammarTables", "KindCount", "audit_grammar",
           "show_bytes", "smuggler_ids"]

_STRUCT = np.zeros(256, dtype=np.bool_)
_STRUCT[list(STRUCTURAL_BYTES)] = True

PUSHDOWN_NOTE = ("recursive grammar (pushdown automaton): the state analyses cover regular grammars only, "
                 "where every state's mask is context-independent")


class GrammarTables(Protocol):
    """What the audit reads: a CompiledGrammar and an Artifact both have it."""

    @property
    def dfa(self) -> Dfa: ...
    @property
    def state_mask(self) -> NDArray[np.int32]: ...
    @property
    def masks(self) -> MaskStore: ...
    @property
    def pda(self) -> Pda | None: ...


# -- token facts ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Tokens:
    table: TokenTable  # the compiler's own (flat bytes, offsets, walkable), cached per vocabulary
    lens: NDArray[np.int64]
    first: NDArray[np.int64]
    whitespace: NDArray[np.bool_]  # made only of JSON whitespace
    structural: NDArray[np.int64]  # how many bytes of STRUCTURAL_BYTES it holds
    eos: NDArray[np.int64]

    @property
    def walkable(self) -> NDArray[np.bool_]:
        return self.table.walkable

    @classmethod
    def of(cls, vocab: Vocabulary) -> _Tokens:
        table = token_table(vocab)
        flat, offsets, walkable = table.flat, table.offsets, table.walkable
        n = vocab.token_count
        lens = np.diff(offsets)
        first = np.zeros(n, dtype=np.int64)
        first[lens > 0] = flat[offsets[:-1][lens > 0]]
        owner = np.repeat(np.arange(n), lens)

        def holds(chars: bytes) -> NDArray[np.int64]:
            present = np.zeros(256, dtype=np.bool_)
            present[list(chars)] = True
            return np.bincount(owner, weights=present[flat], minlength=n).astype(np.int64)

        whitespace = walkable & (holds(WHITESPACE_BYTES) == lens)
        structural = np.where(walkable, holds(STRUCTURAL_BYTES), 0)
        return cls(table, lens, first, whitespace, structural, np.asarray(vocab.eos_ids, dtype=np.int64))

    def walk(self, dfa: Dfa, state: int, ids: NDArray[np.int64],
             steps: NDArray[np.bool_] | None = None) -> tuple[NDArray[np.int64], NDArray[np.bool_], NDArray[np.int64]]:
        """The state each token ends in from ``state`` (-1: it dies), whether some byte of it
        was a step marked in ``steps`` ([states, 256]), and the index of the byte it dies at
        (its length when it does not)."""
        died = np.empty(ids.shape[0], dtype=np.int64)
        hit = np.zeros(ids.shape[0], dtype=np.bool_)
        ends = walk_tokens(dfa, self.table, state, ids, died=died, marks=steps, hit=hit)
        return ends, hit, died


# -- the audit -------------------------------------------------------------------------------------


def audit_grammar(tables: GrammarTables, vocab: Vocabulary, *, show: int = 5) -> GrammarAudit:
    """Audit a compiled regular grammar for the hazards between its bytes and ``vocab``'s tokens.

    Categories (rule ids, registered as ``tool="audit"``): ``smuggler`` (tokens whose first
    byte the state accepts but whose later bytes break the grammar: a first-byte mask admits
    them, maskc's mask does not), ``boundary-token`` (allowed multi-byte tokens that write
    JSON structure together with other bytes, such as ``",`` after a string value),
    ``whitespace-only-state``, ``noncanonical-forced`` (a forced run whose canonical
    tokenization differs from the greedy path of longest allowed tokens), ``eos-only-state``
    and ``unspellable-state`` (bytes continue but no token does, in a state whole tokens
    reach). A recursive grammar gets an empty report with a note.

    Args:
        tables: ``dfa``, ``state_mask``, ``masks`` and ``pda`` of a compile or an artifact.
        vocab: The tokenizer the masks were computed for.
        show: Examples (and findings) per state kind and category; the rest are counted in
            one "more" finding per kind.

    Raises:
        ValueError: ``show`` is negative, or the masks are not ``vocab``'s width.

    Example:
        >>> g = compile_json_schema(schema, vocab)
        >>> audit = audit_grammar(g, vocab)
        >>> audit.category("smuggler").total.pairs
    """
    if show < 0:
        raise ValueError(f"show must be >= 0, got {show}")
    if tables.masks.vocab_size != vocab.vocab_size:
        raise ValueError(f"masks cover {tables.masks.vocab_size} ids, the vocabulary {vocab.vocab_size}")
    dfa = tables.dfa
    kinds = state_kinds(dfa)
    census: dict[str, int] = {k: kinds.count(k) for k in KINDS if k in kinds}
    if tables.pda is not None:
        return GrammarAudit(dfa.num_states, True, census, (), (), PUSHDOWN_NOTE)
    tok = _Tokens.of(vocab)
    run = _Run(dfa, tables.state_mask, tables.masks, vocab, tok, kinds, show)
    categories = (run.smugglers(), run.boundary(), *run.by_mask(), run.forced())
    findings = tuple(f for c in categories for f in category_findings(c, show))
    return GrammarAudit(dfa.num_states, False, census, categories, findings)


def smuggler_ids(tables: GrammarTables, vocab: Vocabulary, state: int) -> NDArray[np.int64]:
    """Every smuggler of ``state``: ordinary tokens whose first byte the state accepts and
    that its mask rejects (sorted ids). The audit counts these; this lists them all.

    Raises:
        ValueError: a recursive grammar, or ``state`` out of range.
    """
    if tables.pda is not None:
        raise ValueError("smugglers are defined for regular grammars only")
    if not 0 <= state < tables.dfa.num_states:
        raise ValueError(f"state must lie in [0, {tables.dfa.num_states}), got {state}")
    tok = _Tokens.of(vocab)
    live = (tables.dfa.trans[state] >= 0)[tables.dfa.byte_class.astype(np.int64)]
    allowed = np.zeros(tables.masks.vocab_size, dtype=np.bool_)
    allowed[tables.masks.allowed_ids(int(tables.state_mask[state]))] = True
    return np.flatnonzero(tok.walkable & live[tok.first] & ~allowed[: vocab.token_count])


class _Run:
    def __init__(self, dfa: Dfa, state_mask: NDArray[np.int32], masks: MaskStore, vocab: Vocabulary,
                 tok: _Tokens, kinds: list[StateKind], show: int) -> None:
        self.dfa, self.state_mask, self.masks, self.vocab, self.tok = dfa, state_mask, masks, vocab, tok
        self.kinds, self.show = kinds, show
        self.n = vocab.token_count
        self.live = live_bytes(dfa)
        self.prefixes = Prefixes(dfa)
        self._allowed: dict[int, tuple[NDArray[np.bool_], bool]] = {}
        # groups of states with the same mask and the same accepted bytes: (first state, size)
        keys = np.concatenate([np.packbits(self.live, axis=1),
                               state_mask.astype(">i4").view(np.uint8).reshape(-1, 4)], axis=1)
        _, first, inverse, counts = np.unique(keys, axis=0, return_index=True, return_inverse=True,
                                              return_counts=True)
        order = np.argsort(first, kind="stable")
        self.groups = list(zip(first[order].tolist(), counts[order].tolist()))
        self.group_of = np.asarray(inverse).reshape(-1)

    def allowed(self, state: int) -> tuple[NDArray[np.bool_], bool]:
        """Walkable tokens the state's mask allows, and whether it allows EOS."""
        m = int(self.state_mask[state])
        got = self._allowed.get(m)
        if got is None:
            ids = self.masks.allowed_ids(m)
            bits = np.zeros(self.masks.vocab_size, dtype=np.bool_)
            bits[ids] = True
            eos = bool(bits[self.tok.eos].any()) if self.tok.eos.size else False
            got = self._allowed[m] = (bits[: self.n] & self.tok.walkable, eos)
        return got

    def example(self, state: int, token_id: int | None, detail: str = "") -> Example:
        token = self.vocab.token_bytes[token_id] if token_id is not None else b""
        return Example(state, self.kinds[state], self.prefixes.prefix(state), token_id, token, detail)

    def smugglers(self) -> GrammarCategory:
        tally, tok = Tally(self.n), self.tok
        for s, size in self.groups:
            allowed, _ = self.allowed(s)
            ids = np.flatnonzero(tok.walkable & self.live[s][tok.first] & ~allowed)
            if not ids.size:
                continue
            tally.add(self.kinds[s], size, ids)
            if tally.full(self.kinds[s], self.show):
                continue
            # examples: those broken by a structural byte first, then the shortest
            _, _, died = tok.walk(self.dfa, s, ids)
            broken_by = tok.table.flat[tok.table.offsets[ids] + died]
            order = np.lexsort((ids, tok.lens[ids], ~_STRUCT[broken_by]))
            for t, at in zip(ids[order][: self.show].tolist(), died[order][: self.show].tolist()):
                data = self.vocab.token_bytes[t]
                tally.offer(self.kinds[s], self.example(s, t, f"rejected at byte {at + 1} "
                                                               f"({show_bytes(data[at:at + 1])!r})"), self.show)
        return tally.category("smuggler", "smugglers (first byte allowed, token breaks the grammar)")

    def boundary(self) -> GrammarCategory:
        tally, tok = Tally(self.n), self.tok
        cand = (tok.structural > 0) & (tok.lens > 1)
        depth = int(tok.lens[cand].max(initial=1))
        blocks = state_blocks(self.dfa, depth)
        steps = structural_steps(self.dfa, self.kinds)
        _, first, counts = np.unique(blocks, return_index=True, return_counts=True)
        for s, size in sorted(zip(first.tolist(), counts.tolist())):
            allowed, _ = self.allowed(s)
            ids = np.flatnonzero(allowed & cand)
            if not ids.size:
                continue
            _, crossed, _ = tok.walk(self.dfa, s, ids, steps)
            ids = ids[crossed]
            if ids.size:
                tally.add(self.kinds[s], size, ids)
                for t in sorted(ids.tolist(), key=lambda t: (-int(tok.structural[t]), t))[: self.show]:
                    tally.offer(self.kinds[s], self.example(s, t), self.show)
        return tally.category("boundary-token", "boundary tokens (structure and other bytes in one token)")

    def by_mask(self) -> tuple[GrammarCategory, GrammarCategory, GrammarCategory]:
        """Whitespace-only, EOS-only and unspellable states: facts of a state's mask alone."""
        ws, eos_only, dead = Tally(self.n), Tally(self.n), Tally(self.n)
        dead_groups: list[tuple[int, int]] = []
        for s, size in self.groups:
            allowed, eos = self.allowed(s)
            ids = np.flatnonzero(allowed)
            k = self.kinds[s]
            if ids.size and not eos and bool(self.tok.whitespace[ids].all()):
                ws.add(k, size, ids)
                ws.offer(k, self.example(s, int(ids[0])), self.show)
            elif eos and not ids.size:
                eos_only.add(k, size)
                eos_only.offer(k, self.example(s, None), self.show)
            elif not ids.size and not eos and bool(self.live[s].any()):
                dead_groups.append((s, size))
        note = ""
        if dead_groups:
            reach = self._token_reachable()
            hidden = 0
            for s, _ in dead_groups:
                members = np.flatnonzero(self.group_of == self.group_of[s])
                hit = members[reach[members]]
                hidden += int(members.size - hit.size)
                if hit.size:
                    dead.add(self.kinds[s], int(hit.size))
                    dead.offer(self.kinds[s], self.example(int(hit[0]), None, self._needs(int(hit[0]))), self.show)
            if hidden:
                note = (f"{hidden} more state(s) allow bytes but no token; whole tokens never reach them "
                        "(they lie inside tokens), so they are harmless")
        return (ws.category("whitespace-only-state", "whitespace-only states"),
                eos_only.category("eos-only-state", "EOS-only states"),
                dead.category("unspellable-state", "unspellable states (bytes allowed, no token)", note))

    def _needs(self, state: int) -> str:
        chars = show_bytes(bytes(np.flatnonzero(self.live[state])[:8].tolist()))
        return f"the grammar continues with one of {chars!r}, which no token begins"

    def _token_reachable(self) -> NDArray[np.bool_]:
        """States whole tokens reach from the start (breadth first over allowed tokens)."""
        seen = np.zeros(self.dfa.num_states, dtype=np.bool_)
        seen[0] = True
        queue = deque([0])
        while queue:
            s = queue.popleft()
            ends, _, _ = self.tok.walk(self.dfa, s, np.flatnonzero(self.allowed(s)[0]))
            for t in sorted_unique(ends[ends >= 0]).tolist():
                if not seen[t]:
                    seen[t] = True
                    queue.append(t)
        return seen

    def forced(self) -> GrammarCategory:
        tally = Tally(self.n)
        try:
            encode: Callable[[str], list[int]] | None = self.vocab.encode
            self.vocab.encode("")
        except TokenizerError:
            encode = None
        if encode is None:
            return tally.category("noncanonical-forced", "forced strings tokenized off the canonical path",
                                  "skipped: the tokenizer has no encoder (built from token bytes only)")
        ids_by_bytes: dict[bytes, int] = {}
        for i in range(self.n - 1, -1, -1):
            if self.tok.walkable[i]:
                ids_by_bytes[self.vocab.token_bytes[i]] = i
        longest = int(self.tok.lens[self.tok.walkable].max(initial=1))
        for s, data in sorted(forced_runs(self.dfa).items()):
            text = whole_chars(data)
            if len(text.encode("utf-8")) < 2:
                continue
            try:
                canonical = encode(text)
            except TokenizerError:  # the encoder cannot split it: nothing to compare
                continue
            path = _greedy(text.encode("utf-8"), ids_by_bytes, longest)
            if canonical != path:
                tally.add(self.kinds[s], 1)
                show = " ".join(repr(show_bytes(self.vocab.token_bytes[i])) for i in canonical)
                walk = " ".join(repr(show_bytes(self.vocab.token_bytes[i])) for i in path)
                tally.offer(self.kinds[s], Example(s, self.kinds[s], self.prefixes.prefix(s), None,
                                                   text.encode("utf-8"), f"canonical {show}; greedy path {walk}"),
                            self.show)
        return tally.category("noncanonical-forced", "forced strings tokenized off the canonical path")


def _greedy(data: bytes, ids_by_bytes: dict[bytes, int], longest: int) -> list[int]:
    """Longest matching token at each position (a byte with no token ends the path)."""
    out, p = [], 0
    while p < len(data):
        for k in range(min(longest, len(data) - p), 0, -1):
            t = ids_by_bytes.get(data[p:p + k])
            if t is not None:
                out.append(t)
                p += k
                break
        else:
            break
    return out


# -- findings --------------------------------------------------------------------------------------
