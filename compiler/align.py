"""Token alignment: which tokens each DFA state admits, vectorized over the vocabulary.

A token is allowed in a state iff walking *all* of its bytes from that state never hits a
missing transition (the DFA is pruned, so every reached state can still finish). The walk
runs over deduplicated byte-class sequences, as numpy arrays, level by level:

* tokens whose classes are all self-loops of the state stay there: allowed without a walk;
* only tokens whose first class is live in the state are walked at all;
* states that no string of at most ``L`` bytes (the longest token) tells apart share one
  mask (Moore refinement cut at depth ``L``), which collapses long counted runs such as
  ``maxLength: 5000`` to a handful of distinct computations.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from maskc.compiler.dfa import Dfa
from maskc.compiler.errors import TimeLimitExceeded
from maskc.compiler.minimize import refine

__all__ = ["ClassSeqs", "class_sequences", "align", "TokenTable", "SHORT_TOKEN"]

SHORT_TOKEN = 16  # tokens up to this many bytes are "short" (the vast majority)


@dataclass(frozen=True, slots=True)
class TokenTable:
    """The vocabulary as one flat byte array; the part of a tokenizer that alignment needs."""

    flat: NDArray[np.uint8]  # all token bytes, concatenated
    offsets: NDArray[np.int64]  # [n + 1]
    walkable: NDArray[np.bool_]  # [n]: non-special, non-empty tokens
    eos_ids: tuple[int, ...]
    vocab_size: int  # logits width, >= n

    @property
    def num_tokens(self) -> int:
        return int(self.offsets.shape[0] - 1)

    @property
    def max_len(self) -> int:
        lens = np.diff(self.offsets)[self.walkable]
        return int(lens.max()) if lens.size else 0


@dataclass(frozen=True, slots=True)
class ClassSeqs:
    """Distinct byte-class sequences of the walkable tokens, for one DFA's byte classes."""

    flat: NDArray[np.int64]  # classes of all distinct sequences, concatenated
    offsets: NDArray[np.int64]  # [u + 1]
    lengths: NDArray[np.int64]  # [u]
    token_ids: NDArray[np.int64]  # walkable token ids
    token_seq: NDArray[np.int64]  # [len(token_ids)] -> sequence index
    by_first: NDArray[np.int64]  # sequence indices sorted by first class
    first_start: NDArray[np.int64]  # [classes + 1] ranges into by_first
    by_len: NDArray[np.int64]  # sequence indices, longest first
    columns: NDArray[np.int32]  # [max_len, u]: class at depth d of the d-th longest... (by_len order)
    active: NDArray[np.int64]  # [max_len]: how many sequences (by_len order) are longer than d


def class_sequences(
    table: TokenTable, byte_class: NDArray[np.uint8], num_classes: int, select: NDArray[np.bool_] | None = None
) -> ClassSeqs:
    """Map every walkable token (or those in ``select``) to its class sequence; deduplicate."""
    translated = byte_class[table.flat].tobytes()
    offs = table.offsets.tolist()
    ids = np.flatnonzero(table.walkable if select is None else select)
    index: dict[bytes, int] = {}
    token_seq = np.empty(ids.shape[0], dtype=np.int64)
    seqs: list[bytes] = []
    for k, t in enumerate(ids.tolist()):
        key = translated[offs[t] : offs[t + 1]]
        j = index.get(key)
        if j is None:
            j = len(seqs)
            index[key] = j
            seqs.append(key)
        token_seq[k] = j
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.frombuffer(b"".join(seqs), dtype=np.uint8).astype(np.int64)
    first = flat[offsets[:-1]] if len(seqs) else np.zeros(0, dtype=np.int64)
    by_first = np.argsort(first, kind="stable")
    first_start = np.searchsorted(first[by_first], np.arange(num_classes + 1))
    by_len = np.argsort(-lengths, kind="stable")
    max_len = int(lengths.max()) if lengths.size else 0
    sorted_len = lengths[by_len]
    active = np.array([int(np.count_nonzero(sorted_len > d)) for d in range(max_len)], dtype=np.int64)
    columns = np.zeros((max_len, len(seqs)), dtype=np.int32)
    starts = offsets[:-1][by_len]
    for d in range(max_len):
        n = int(active[d])
        columns[d, :n] = flat[starts[:n] + d]
    return ClassSeqs(flat, offsets, lengths, ids, token_seq, by_first, first_start.astype(np.int64),
                     by_len, columns, active)


def _walk(
    trans: NDArray[np.int32], seqs: ClassSeqs, cand: NDArray[np.int64], start: NDArray[np.int64]
) -> NDArray[np.int64]:
    """Sequences in ``cand`` whose walk from ``start`` (state per candidate) completes."""
    pos = np.zeros(cand.shape[0], dtype=np.int64)
    state = start
    ok: list[NDArray[np.int64]] = []
    while cand.size:
        done = pos >= seqs.lengths[cand]
        if done.any():
            ok.append(cand[done])
            keep = ~done
            cand, pos, state = cand[keep], pos[keep], state[keep]
            if not cand.size:
                break
        cls = seqs.flat[seqs.offsets[cand] + pos]
        state = trans[state, cls].astype(np.int64)
        alive = state >= 0
        cand, pos, state = cand[alive], pos[alive] + 1, state[alive]
    return np.concatenate(ok) if ok else np.zeros(0, dtype=np.int64)


def _sink_table(trans: NDArray[np.int32]) -> NDArray[np.int64]:
    """``trans`` flattened with one extra absorbing row (the dead state) appended."""
    n, c = trans.shape
    t = np.empty((n + 1, c), dtype=np.int64)
    t[:n] = np.where(trans >= 0, trans, n)
    t[n] = n
    return t.ravel()


def _dense_walk(flat_trans: NDArray[np.int64], num_classes: int, dead: int, seqs: ClassSeqs, s: int) -> NDArray[np.int64]:
    """Walk every sequence from ``s`` at once, depth by depth, over a shrinking prefix.

    Sequences are ordered longest first, so at depth ``d`` exactly the first
    ``active[d]`` of them still have bytes: no compaction is needed.
    """
    state = np.full(seqs.by_len.shape[0], s, dtype=np.int64)
    for d in range(seqs.columns.shape[0]):
        n = int(seqs.active[d])
        head = state[:n]
        state[:n] = flat_trans[head * num_classes + seqs.columns[d, :n]]
    out: NDArray[np.int64] = seqs.by_len[state != dead]
    return out


def allowed_sequences(dfa: Dfa, seqs: ClassSeqs, s: int, flat_trans: NDArray[np.int64] | None = None) -> NDArray[np.int64]:
    """Indices of the class sequences allowed in state ``s``."""
    row = dfa.trans[s]
    live_first = np.flatnonzero(row >= 0)
    if not live_first.size:
        return np.zeros(0, dtype=np.int64)
    width = int((seqs.first_start[live_first + 1] - seqs.first_start[live_first]).sum())
    if flat_trans is not None and width * 4 > seqs.lengths.shape[0]:
        return _dense_walk(flat_trans, dfa.num_classes, dfa.num_states, seqs, s)
    self_loop = row == s
    parts: list[NDArray[np.int64]] = []
    if self_loop.any():
        in_loop = self_loop[seqs.flat]
        all_loop = np.logical_and.reduceat(in_loop, seqs.offsets[:-1]) if seqs.flat.size else in_loop
        parts.append(np.flatnonzero(all_loop))
        skip = all_loop
    else:
        skip = None
    chunks = [seqs.by_first[seqs.first_start[c] : seqs.first_start[c + 1]] for c in live_first.tolist()]
    cand = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)
    if skip is not None:
        cand = cand[~skip[cand]]
    if cand.size:
        start = np.full(cand.shape[0], s, dtype=np.int64)
        parts.append(_walk(dfa.trans, seqs, cand, start))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def align(
    dfa: Dfa,
    table: TokenTable,
    *,
    add_mask: Callable[[NDArray[np.bool_]], int],
    progress: Callable[[int, int], None] | None = None,
    deadline: float | None = None,
) -> NDArray[np.int32]:
    """Compute each state's allowed-token mask.

    ``add_mask(mask)`` receives each distinct boolean mask (width ``vocab_size``, EOS set
    in accepting states) and returns its id in the caller's store.

    Returns:
        ``state -> mask id`` (int32 [states]).

    Raises:
        TimeLimitExceeded: ``deadline`` (``time.monotonic()``) passed.
    """
    lens = np.diff(table.offsets)
    short_sel = table.walkable & (lens <= SHORT_TOKEN)
    long_sel = table.walkable & (lens > SHORT_TOKEN)
    short = class_sequences(table, dfa.byte_class, dfa.num_classes, short_sel)
    long_ = class_sequences(table, dfa.byte_class, dfa.num_classes, long_sel)
    acc = dfa.accepting.astype(np.int64)
    # Masks of short tokens depend on the first SHORT_TOKEN bytes of the future only;
    # long tokens (few) on up to max_len bytes: two partitions, the finer one drives.
    block_s = refine(dfa.trans, acc, max_rounds=SHORT_TOKEN)
    block = refine(dfa.trans, acc, max_rounds=max(SHORT_TOKEN, table.max_len)) if long_.token_ids.size else block_s
    nblocks = int(block.max()) + 1
    rep = np.full(nblocks, -1, dtype=np.int64)
    rep[block[::-1]] = np.arange(dfa.num_states - 1, -1, -1)
    eos = np.asarray(table.eos_ids, dtype=np.int64)
    flat_trans = _sink_table(dfa.trans)
    short_cache: dict[int, NDArray[np.bool_]] = {}
    memo: dict[bytes, int] = {}
    block_mask = np.zeros(nblocks, dtype=np.int32)
    for b in range(nblocks):
        if deadline is not None and time.monotonic() > deadline:
            raise TimeLimitExceeded("compile time (s)", limit=0)
        s = int(rep[b])
        ks = int(block_s[s])
        ok_s = short_cache.get(ks)
        if ok_s is None:
            ok_s = np.zeros(short.lengths.shape[0], dtype=np.bool_)
            ok_s[allowed_sequences(dfa, short, s, flat_trans)] = True
            short_cache[ks] = ok_s
        ok_l = np.zeros(long_.lengths.shape[0] + 1, dtype=np.bool_)
        if long_.lengths.size:
            ok_l[allowed_sequences(dfa, long_, s, flat_trans)] = True
        ok_l[-1] = bool(dfa.accepting[s])
        key = np.packbits(ok_s).tobytes() + b"|" + np.packbits(ok_l).tobytes()
        m = memo.get(key)
        if m is None:
            mask = np.zeros(table.vocab_size, dtype=np.bool_)
            mask[short.token_ids[ok_s[short.token_seq]]] = True
            mask[long_.token_ids[ok_l[long_.token_seq]]] = True
            if ok_l[-1] and eos.size:
                mask[eos] = True
            m = add_mask(mask)
            memo[key] = m
        block_mask[b] = m
        if progress is not None:
            progress(b + 1, nblocks)
    return block_mask[block].astype(np.int32)


def brute_force_allowed(dfa: Dfa, token_bytes: list[bytes], walkable: list[bool], s: int) -> list[int]:
    """Reference oracle: walk every token's bytes one at a time (tests only; slow)."""
    out = []
    for t, data in enumerate(token_bytes):
        if walkable[t] and data and dfa.walk(s, data) >= 0:
            out.append(t)
    return out
