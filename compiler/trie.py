"""A byte trie of tokens, numbered level by level, and DFA walks over it as numpy arrays.

Built once per tokenizer (for the short tokens, which are almost all of a vocabulary), it
replaces a per-schema deduplication of token byte-class sequences: a walk of a DFA state
over the trie visits each distinct token prefix once. Nodes of depth ``d`` are the
contiguous range ``level[d - 1]:level[d]``, in lexicographic order of their prefixes, so a
node's children are contiguous too (``child_start``) and a parent always precedes its
children.

Two walks, both exact (a token is allowed iff every one of its bytes has a transition):

* :func:`walk_dense` steps every node of the trie for a few states at once, level by level,
  one gather per level: the right tool for wide states (string interiors), where most
  tokens survive;
* :func:`walk_sparse` follows only the live (state, node) pairs of many states at once,
  expanding children level by level: the right tool for narrow states (inside literal
  keys), where a handful of tokens survive the first byte.

:func:`walk_memo` gives what :func:`walk_dense` gives, from walks below the first byte kept
per (first node, state it leads to) across the calls of one alignment (:class:`PairMemo`).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from maskc.compiler.dfa import RADIX_KEYS, stable_order

__all__ = ["TokenTrie", "ClassTrie", "build_trie", "byte_class_trie", "class_trie", "walk_dense", "walk_sparse", "walk_loops",
           "PairMemo", "walk_memo", "first_node", "loop_region", "sink_table", "walk_from", "unique_inverse"]


@dataclass(frozen=True, slots=True)
class TokenTrie:
    """The trie of a selection of tokens (``num_tokens`` of them, in selection order)."""

    byte: NDArray[np.uint8]  # [nodes] the byte on the edge into each node
    parent: NDArray[np.int64]  # [nodes] parent node; -1 under the root (depth 1)
    level: NDArray[np.int64]  # [depth + 1] nodes of depth d: level[d - 1]:level[d]
    child_start: NDArray[np.int64]  # [nodes + 1] children of n: child_start[n]:child_start[n + 1]
    end: NDArray[np.int64]  # [tokens] node where each token ends
    tok_order: NDArray[np.int64]  # token indices sorted by end node
    tok_start: NDArray[np.int64]  # [nodes + 1] tokens ending at n: tok_order[tok_start[n]:tok_start[n + 1]]
    first_count: NDArray[np.int64]  # [256] tokens per first byte

    @property
    def num_nodes(self) -> int:
        return int(self.byte.shape[0])

    @property
    def num_tokens(self) -> int:
        return int(self.end.shape[0])


FEW_DEEP_CELLS = 1 << 17
"""Up to this many (token, depth) cells, :func:`build_trie` numbers the nodes of all depths at
once (:func:`_build_trie_at_once`): a few deep sequences (a grammar's long tokens, up to 128
classes each) then take a fraction of a level-by-level build's time, where a vocabulary's
short tokens (many, shallow) are faster level by level."""


def build_trie(starts: NDArray[np.int64], lens: NDArray[np.int64], flat: NDArray[np.uint8]) -> TokenTrie:
    """The trie of the tokens ``flat[starts[i] : starts[i] + lens[i]]`` (all non-empty)."""
    n = int(lens.shape[0])
    depth = int(lens.max()) if n else 0
    if n and int(lens.min()) < 1:
        raise ValueError("trie tokens must be non-empty")
    if n and n * depth <= FEW_DEEP_CELLS:
        return _build_trie_at_once(starts, lens, flat, depth)
    # [depth, tokens]: row d holds each token's byte d (0 past its end), one scatter of all
    # the bytes (a level's bytes then lie together: a gather per level reads one row)
    mat = np.zeros((max(depth, 1), n), dtype=np.uint8)
    seg = np.cumsum(lens) - lens
    pos = np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(seg, lens)
    mat[pos, np.repeat(np.arange(n, dtype=np.int64), lens)] = flat[np.repeat(starts, lens) + pos]
    # Lexicographic order of the padded rows: tokens sharing a prefix are contiguous.
    order = np.lexsort(mat[::-1]) if n else np.zeros(0, dtype=np.int64)
    # Level by level, in that order: the tokens still as long as the level (the previous
    # level's, fewer), each one's byte there and its node one level up.
    idx = order
    slen = lens[order]
    node_at = np.full(n, -1, dtype=np.int64)
    par = np.full(n, -1, dtype=np.int64)
    at = par  # (each level's nodes, in the order of idx)
    bytes_: list[NDArray[np.uint8]] = []
    parents: list[NDArray[np.int64]] = []
    level = [0]
    for d in range(depth):
        if d:
            keep = slen > d
            idx, slen, par = idx[keep], slen[keep], at[keep]
        col = mat[d][idx]
        new = np.ones(idx.shape[0], dtype=np.bool_)
        new[1:] = (par[1:] != par[:-1]) | (col[1:] != col[:-1])
        at = np.cumsum(new) + (level[-1] - 1)
        node_at[idx] = at
        bytes_.append(col[new])
        parents.append(par[new])
        level.append(level[-1] + bytes_[-1].shape[0])
    byte = np.concatenate(bytes_) if bytes_ else np.zeros(0, dtype=np.uint8)
    parent = np.concatenate(parents) if parents else np.zeros(0, dtype=np.int64)
    first_count = np.bincount(mat[0], minlength=256).astype(np.int64) if n else np.zeros(256, dtype=np.int64)
    return _trie(byte, parent, np.asarray(level, dtype=np.int64), node_at, first_count)


def _trie(byte: NDArray[np.uint8], parent: NDArray[np.int64], level: NDArray[np.int64], node_at: NDArray[np.int64],
          first_count: NDArray[np.int64]) -> TokenTrie:
    """The :class:`TokenTrie` of nodes numbered level by level (``byte``, ``parent``,
    ``level``) and each token's last node (``node_at``): its children and tokens indexed, by
    counting (each level comes in its parents' order, so ``parent`` never decreases)."""
    nodes = byte.shape[0]
    roots = int(level[1]) if level.shape[0] > 1 else 0  # the first-level nodes (no parent)
    return TokenTrie(byte, parent, level, _starts(parent[roots:], nodes, roots), node_at,
                     stable_order(node_at, nodes).astype(np.int64), _starts(node_at, nodes, 0), first_count)


def _build_trie_at_once(starts: NDArray[np.int64], lens: NDArray[np.int64], flat: NDArray[np.uint8],
                        depth: int) -> TokenTrie:
    """:func:`build_trie` (the same trie, numbered alike) from one ``[tokens, depth]`` table:
    in the tokens' lexicographic order, a token starts a node at each depth from the first
    where it differs from the token before it, to its last byte."""
    n = int(lens.shape[0])
    # each byte plus one, 0 past a token's end: a token sorts before every token it is a
    # prefix of, so the tokens under a node are contiguous with no shorter token among them
    cols = np.arange(depth, dtype=np.int64)
    inside = cols[None, :] < lens[:, None]
    mat = np.zeros((n, depth), dtype=np.uint16)
    mat[inside] = flat[(starts[:, None] + cols[None, :])[inside]].astype(np.uint16) + 1
    order = np.lexsort(mat.T[::-1])
    srt = mat[order]
    slen = lens[order]
    lcp = np.zeros(n, dtype=np.int64)  # where each token first differs from the one before
    diff = srt[1:] != srt[:-1]
    lcp[1:] = np.where(diff.any(axis=1), diff.argmax(axis=1), depth)
    new = (cols[None, :] >= lcp[:, None]) & (cols[None, :] < slen[:, None])  # [tokens, depth]
    level = np.zeros(depth + 1, dtype=np.int64)
    np.cumsum(new.sum(axis=0), out=level[1:])
    at = np.cumsum(new, axis=0, dtype=np.int64) - 1 + level[None, :-1]  # each token's node at each depth
    d_new, r_new = np.nonzero(new.T)  # the nodes, level by level, each level in order
    byte = (srt[r_new, d_new] - 1).astype(np.uint8)
    parent = np.where(d_new > 0, at[r_new, np.maximum(d_new - 1, 0)], -1).astype(np.int64)
    node_at = np.empty(n, dtype=np.int64)
    node_at[order] = at[np.arange(n), slen - 1]
    return _trie(byte, parent, level, node_at, np.bincount(srt[:, 0] - 1, minlength=256).astype(np.int64))


def sink_table(trans: NDArray[np.int32]) -> NDArray[Any]:
    """``trans`` flattened with one extra absorbing row (the dead state ``n``) appended: int32
    where every flat index fits (half the memory of a large table), else int64."""
    n, c = trans.shape
    t = np.empty((n + 1, c), dtype=np.int32 if (n + 1) * max(c, 1) < 2**31 else np.int64)
    t[:n] = np.where(trans >= 0, trans, n)
    t[n] = n
    return t.ravel()


@dataclass(frozen=True, slots=True)
class ClassTrie:
    """A trie labelled by byte classes, ready to walk one DFA's classes.

    Either the byte trie with each node's class (:func:`byte_class_trie`), or the byte trie
    merged by class (:func:`class_trie`): nodes with the same parent and the same class
    are one, so each distinct class-sequence prefix is visited once.
    """

    parent: NDArray[np.int64]  # [nodes] parent node; -1 under the root
    klass: NDArray[np.int64]  # [nodes] class on the edge into each node
    level: NDArray[np.int64]  # [depth + 1]
    child_start: NDArray[np.int64]  # [nodes + 1]
    end: NDArray[np.int64]  # [tokens] node where each token ends
    tok_order: NDArray[np.int64]  # token indices sorted by end node
    tok_start: NDArray[np.int64]  # [nodes + 1]

    @property
    def num_nodes(self) -> int:
        return int(self.klass.shape[0])

    @property
    def num_tokens(self) -> int:
        return int(self.end.shape[0])


def byte_class_trie(trie: TokenTrie, node_class: NDArray[np.int64]) -> ClassTrie:
    """The byte trie labelled with each node's class (no merging)."""
    return ClassTrie(trie.parent, node_class, trie.level, trie.child_start, trie.end, trie.tok_order, trie.tok_start)


def class_trie(trie: TokenTrie, node_class: NDArray[np.int64], num_classes: int) -> ClassTrie:
    """Merge the nodes of ``trie`` whose class sequences from the root are equal."""
    of_node = np.empty(trie.num_nodes, dtype=np.int64)
    parents: list[NDArray[np.int64]] = []
    classes: list[NDArray[np.int64]] = []
    level = [0]
    lv = trie.level.tolist()
    for d in range(len(lv) - 1):
        lo, hi = lv[d], lv[d + 1]
        # parents numbered from the previous merged level's start (the root: -1)
        pbase = -1 if d == 0 else level[-2]
        pc = np.zeros(hi - lo, dtype=np.int64) if d == 0 else of_node[trie.parent[lo:hi]] - pbase
        key = pc * num_classes + node_class[lo:hi]
        uniq, inv = unique_inverse(key, (level[-1] - pbase) * num_classes)
        of_node[lo:hi] = level[-1] + inv
        parents.append(uniq // num_classes + pbase)
        classes.append(uniq % num_classes)
        level.append(level[-1] + int(uniq.shape[0]))
    empty = np.zeros(0, dtype=np.int64)
    parent = np.concatenate(parents) if parents else empty
    nodes = parent.shape[0]
    end = of_node[trie.end]
    tok_order = stable_order(end, nodes).astype(np.int64)
    roots = level[1] if len(level) > 1 else 0  # the first-level nodes (no parent)
    return ClassTrie(parent, np.concatenate(classes) if classes else empty, np.asarray(level, dtype=np.int64),
                     _starts(parent[roots:], nodes, roots), end, tok_order, _starts(end, nodes, 0))


def unique_inverse(key: NDArray[np.int64], bound: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``np.unique(key, return_inverse=True)`` for keys in ``0..bound - 1``: by marking a
    table of ``bound`` entries when that is not much longer than ``key`` (no sort), else by
    a sort in 16-bit digits (:func:`~maskc.compiler.dfa.stable_order`) where the keys fit
    32 bits and are not too many for its passes (a third of ``np.unique``'s time on 60,000 to
    500,000 keys)."""
    if bound <= 6 * key.shape[0] + 4096:
        seen = np.zeros(bound, dtype=np.bool_)
        seen[key] = True
        rank = np.cumsum(seen, dtype=np.int64)
        rank -= 1
        return np.flatnonzero(seen), rank[key]
    if bound <= 1 << 32 and key.shape[0] <= RADIX_KEYS:
        order = stable_order(key, bound)
        ordered = key[order]
        new = np.empty(ordered.shape[0], dtype=np.bool_)
        new[:1] = True
        np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
        inv = np.empty(key.shape[0], dtype=np.int64)
        inv[order] = np.cumsum(new) - 1
        return ordered[new].astype(np.int64, copy=False), inv
    uniq, inv = np.unique(key, return_inverse=True)
    return uniq, np.asarray(inv, dtype=np.int64).reshape(-1)


def _starts(keys: NDArray[np.int64], n: int, base: int) -> NDArray[np.int64]:
    """``[n + 1]``: for each ``v`` in ``0..n``, ``base`` plus the number of ``keys`` (all in
    ``0..n - 1``) below ``v``: where ``v`` starts once the keys are sorted after ``base``
    entries that precede them all (``np.searchsorted`` of every value, by counting)."""
    out = np.empty(n + 1, dtype=np.int64)
    out[0] = base
    np.cumsum(np.bincount(keys, minlength=n), out=out[1:])
    out[1:] += base
    return out


def walk_dense(trie: ClassTrie, flat_trans: NDArray[np.int64], num_classes: int, dead: int,
               states: NDArray[np.int64]) -> NDArray[np.bool_]:
    """``[len(states), tokens]``: whether each token is allowed from each state (every node walked)."""
    lo, hi = int(trie.level[0]), int(trie.level[1]) if trie.level.shape[0] > 1 else 0
    first = flat_trans[states[None, :] * num_classes + trie.klass[lo:hi, None]]  # [first nodes, states]
    return _state_major(_walk_below(trie, flat_trans, num_classes, dead, first))


TRANSPOSE_ROWS = 2048
"""Rows of a token-major table transposed at a time (:func:`_state_major`): a block's source
and target stay in the cache, where a whole 128k-token table's strided copy runs at a third
of the speed."""


def _state_major(ok: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """``ok`` (``[tokens, k]``) as a C-contiguous ``[k, tokens]`` table, in blocks of rows."""
    n = int(ok.shape[0])
    out = np.empty((int(ok.shape[1]), n), dtype=np.bool_)
    for a in range(0, n, TRANSPOSE_ROWS):
        out[:, a : a + TRANSPOSE_ROWS] = ok[a : a + TRANSPOSE_ROWS].T
    return out


_SCALED: list[tuple[weakref.ref[NDArray[np.int64]], int, NDArray[Any]]] = []


def _scaled(flat_trans: NDArray[np.int64], num_classes: int, dt: type[np.signedinteger[Any]]) -> NDArray[Any]:
    """``flat_trans * num_classes`` as ``dt``: each cell its target's row offset. Kept for the
    last table asked (an alignment walks one table hundreds of times; the copy is the size of
    the table), and dropped with it."""
    for ref, nc, got in list(_SCALED):  # (a copy: another thread may replace the entry)
        if ref() is flat_trans and nc == num_classes and got.dtype == dt:
            return got
    got = flat_trans.astype(dt)
    got *= num_classes
    _SCALED[:] = [(weakref.ref(flat_trans, lambda _: _SCALED.clear()), num_classes, got)]
    return got


def _walk_below(trie: ClassTrie, flat_trans: NDArray[np.int64], num_classes: int, dead: int,
                first: NDArray[np.int64]) -> NDArray[np.bool_]:
    """``[tokens, k]``: whether each token is allowed when its first node leaves the walk in
    ``first[node, j]`` (``dead`` for none), for ``k`` columns; every deeper node is walked.
    (Token-major, as the walk leaves it: a caller that reads a few tokens of many columns
    gathers whole rows; :func:`_state_major` turns it for one that reads whole columns.)"""
    k = int(first.shape[1])
    nodes = int(trie.level[-1])
    # int32 arithmetic (half the memory traffic) whenever the flat indices fit; node-major
    # layout, so the gather of a level's parents reads contiguous rows of the batch. Each
    # node holds its state's row offset (state * num_classes): one add and one gather a level.
    dt: type[np.signedinteger[Any]] = np.int32 if (dead + 1) * num_classes < 2**31 else np.int64
    ft = _scaled(flat_trans, num_classes, dt)
    klass: NDArray[Any] = trie.klass.astype(dt)
    st: NDArray[Any] = np.empty((nodes, k), dtype=dt)
    lv = trie.level.tolist()
    for d in range(len(lv) - 1):
        lo, hi = lv[d], lv[d + 1]
        if d == 0:
            st[lo:hi] = first * num_classes
            continue
        idx: NDArray[Any] = st[trie.parent[lo:hi]]
        idx += klass[lo:hi, None]
        np.take(ft, idx, out=st[lo:hi], mode="clip")  # (indices are in range; clip avoids a buffer)
    out: NDArray[np.bool_] = st[trie.end] != dt(dead * num_classes)
    return out


def first_node(trie: ClassTrie) -> NDArray[np.int64]:
    """Per token: the first-level node its walk passes (its first byte's node)."""
    anc = np.empty(trie.num_nodes, dtype=np.int64)
    lv = trie.level.tolist()
    for d in range(len(lv) - 1):
        lo, hi = lv[d], lv[d + 1]
        anc[lo:hi] = np.arange(lo, hi, dtype=np.int64) if d == 0 else anc[trie.parent[lo:hi]]
    out: NDArray[np.int64] = anc[trie.end]
    return out


SPARSE_COST = 8  # the work of a sparse step (:func:`_expand`) in dense steps (:func:`_walk_below`), roughly


class PairMemo:
    """The walks below the first level of a trie, per (first node, state the first byte leads
    to), kept across the calls of one alignment.

    A token's fate from a state depends only on the state its first byte leads to, and the
    wide states of one grammar (keys spelled inside a looping string, in many stack contexts)
    lead to the same few states in batch after batch: each such pair is walked once. With
    ``canon`` (a state's representative among the states that no string of the trie's depth
    less one byte tells apart), pairs whose states differ only past the longest token share
    one walk as well. Rows are kept per first node, over that node's tokens; past ``budget``
    bytes the memo starts over.
    """

    def __init__(self, trie: ClassTrie, tok_first: NDArray[np.int64], blocks: NDArray[np.int64],
                 canon: NDArray[np.int64] | None = None, budget: int = 64 << 20) -> None:
        lo, hi = int(trie.level[0]), int(trie.level[1]) if trie.level.shape[0] > 1 else 0
        self.width = hi - lo
        rel = tok_first - lo
        self.count = np.bincount(rel, minlength=self.width).astype(np.int64)
        self.order = stable_order(rel, self.width).astype(np.int64)  # tokens grouped by first node
        self.start = np.zeros(self.width + 1, dtype=np.int64)
        np.cumsum(self.count, out=self.start[1:])
        pos = np.empty(rel.shape[0], dtype=np.int64)  # each token's place among its node's tokens
        pos[self.order] = np.arange(rel.shape[0], dtype=np.int64) - self.start[rel[self.order]]
        self.pos = pos
        # per first-byte group of tokens (contiguous): (first, end, node, place of the first)
        bl = blocks.tolist()
        self.parts: list[list[tuple[int, int, int]]] = [[] for _ in range(self.width)]
        for b in range(len(bl) - 1):
            a, e = bl[b], bl[b + 1]
            if a < e:
                n = int(rel[a])
                self.parts[n].append((a, e, int(pos[a])))
        self.canon = canon
        self.budget = budget
        self.clear()

    def clear(self) -> None:
        # row 0 of every node's table: nothing allowed (a dead first byte)
        self.tables: list[NDArray[np.bool_]] = [np.zeros((4, int(c)), dtype=np.bool_) for c in self.count.tolist()]
        self.used = [1] * self.width
        self.rows: dict[int, int] = {}
        self.bytes = int(self.count.sum()) * 4

    def _add(self, n: int, new_rows: NDArray[np.bool_]) -> int:
        """Append ``new_rows`` to node ``n``'s table; the index of the first."""
        t, u, m = self.tables[n], self.used[n], int(new_rows.shape[0])
        if u + m > t.shape[0]:
            grown = np.zeros((max(2 * t.shape[0], u + m), t.shape[1]), dtype=np.bool_)
            grown[:u] = t[:u]
            self.bytes += (grown.shape[0] - t.shape[0]) * t.shape[1]
            self.tables[n] = t = grown
        t[u : u + m] = new_rows
        self.used[n] = u + m
        return u


def _walk_pairs(trie: ClassTrie, flat_trans: NDArray[np.int64], num_classes: int, dead: int, memo: PairMemo,
                pairs: NDArray[np.int64], max_walks: int) -> NDArray[np.int64] | None:
    """Walk the (first node, state) ``pairs`` (keys ``node * (dead + 1) + state``, sorted, first
    nodes relative to the first level) into ``memo``; each pair's row, or None if that takes
    more than ``max_walks`` walks of the whole trie (:func:`walk_memo`)."""
    lo = int(trie.level[0])
    pair_node = pairs // (dead + 1)
    succ = pairs % (dead + 1)
    rank = np.arange(pairs.shape[0], dtype=np.int64) - np.searchsorted(pair_node, pair_node)
    under = memo.count[pair_node]
    alone_w = np.zeros(int(rank.max()) + 2)
    alone_w[:-1] = np.bincount(rank, weights=under)[::-1].cumsum()[::-1]
    cost = np.arange(alone_w.shape[0]) * trie.num_nodes + SPARSE_COST * alone_w
    walks = int(np.argmin(cost))
    if walks > max_walks:
        return None
    shared = rank < walks
    ok: NDArray[np.bool_] | None = None
    if walks:
        first = np.full((memo.width, walks), dead, dtype=np.int64)
        first[pair_node[shared], rank[shared]] = succ[shared]
        ok = _walk_below(trie, flat_trans, num_classes, dead, first)
    alone = np.flatnonzero(~shared)
    found = _expand(trie, flat_trans, num_classes, dead, np.arange(alone.shape[0], dtype=np.int64),
                    pair_node[alone] + lo, succ[alone], int(alone.shape[0])) if alone.size else []
    out = np.empty(pairs.shape[0], dtype=np.int64)
    bounds = np.flatnonzero(np.diff(pair_node, prepend=-1, append=-1)).tolist()
    alone_at = np.full(pairs.shape[0], -1, dtype=np.int64)
    alone_at[alone] = np.arange(alone.shape[0], dtype=np.int64)
    for a, e in zip(bounds, bounds[1:]):  # the new pairs of one first node
        n = int(pair_node[a])
        rows = np.zeros((e - a, int(memo.count[n])), dtype=np.bool_)
        sh = shared[a:e]
        if ok is not None and sh.any():
            toks = memo.order[memo.start[n] : memo.start[n + 1]]
            rows[sh] = ok[toks][:, rank[a:e][sh]].T  # (``ok`` is token-major)
        for i in np.flatnonzero(~sh).tolist():
            rows[i, memo.pos[found[int(alone_at[a + i])]]] = True
        out[a:e] = memo._add(n, rows) + np.arange(e - a, dtype=np.int64)
    return out


def walk_memo(trie: ClassTrie, flat_trans: NDArray[np.int64], num_classes: int, dead: int,
              states: NDArray[np.int64], memo: PairMemo, max_walks: int) -> NDArray[np.bool_] | None:
    """As :func:`walk_dense`, walking the trie below its first level once per (first node,
    successor) pair that no earlier call with ``memo`` walked; None if those take more than
    ``max_walks`` walks of the whole trie.

    A token's fate depends only on the state its first byte leads to. The new pairs take one
    column of a whole-trie walk each (a column follows one successor of every first node), as
    many columns as the first node with the most new successors needs, up to the cheapest
    count; the successors past it are followed alone, under their first node. Wide states
    that spell literals inside a looping string (declared keys) lead almost everywhere to the
    loop, so a few pairs serve many states, in this call and the next.
    """
    if memo.bytes > memo.budget:
        memo.clear()
    lo, hi = int(trie.level[0]), int(trie.level[1]) if trie.level.shape[0] > 1 else 0
    k = int(states.shape[0])
    below = flat_trans[states[None, :] * num_classes + trie.klass[lo:hi, None]]  # [first nodes, k]
    if memo.canon is not None:
        below = memo.canon[below]
    node, col = np.nonzero(below != dead)
    key = node * (dead + 1) + below[node, col]
    pairs, inv = np.unique(key, return_inverse=True)
    rows = memo.rows
    got = np.fromiter((rows.get(p, -1) for p in pairs.tolist()), dtype=np.int64, count=pairs.shape[0])
    new = np.flatnonzero(got < 0)
    if new.size:
        fresh = _walk_pairs(trie, flat_trans, num_classes, dead, memo, pairs[new], max_walks)
        if fresh is None:
            return None
        got[new] = fresh
        rows.update(zip(pairs[new].tolist(), fresh.tolist()))
    row_of = np.zeros((hi - lo, k), dtype=np.int64)  # row 0: nothing allowed
    row_of[node, col] = got[np.asarray(inv, dtype=np.int64).reshape(-1)]
    out = np.zeros((k, trie.num_tokens), dtype=np.bool_)
    live = np.flatnonzero(row_of.any(axis=1)).tolist()
    for n in live:
        sub = memo.tables[n][row_of[n]]
        for a, e, p in memo.parts[n]:
            out[:, a:e] = sub[:, p : p + e - a]
    return out


def walk_sparse(trie: ClassTrie, flat_trans: NDArray[np.int64], num_classes: int, dead: int,
                states: NDArray[np.int64]) -> list[NDArray[np.int64]]:
    """Per state of ``states``: the indices of the allowed tokens, in no particular order
    (live pairs only)."""
    lo, hi = int(trie.level[0]), int(trie.level[1]) if trie.level.shape[0] > 1 else 0
    first = flat_trans[states[:, None] * num_classes + trie.klass[None, lo:hi]]
    owner, col = np.nonzero(first != dead)
    return _expand(trie, flat_trans, num_classes, dead, owner.astype(np.int64), col.astype(np.int64) + lo,
                   first[owner, col], int(states.shape[0]))


def walk_from(trie: ClassTrie, flat_trans: NDArray[np.int64], num_classes: int, dead: int, node: NDArray[np.int64],
              state: NDArray[np.int64]) -> list[NDArray[np.int64]]:
    """Per start ``j``: the tokens allowed from node ``node[j]`` on, the walk being in state
    ``state[j]`` there (live), in no particular order: those that end at the node and those
    below it whose remaining classes the walk takes."""
    return _expand(trie, flat_trans, num_classes, dead, np.arange(node.shape[0], dtype=np.int64), node, state,
                   int(node.shape[0]))


LoopRegion = tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]
"""(boundary nodes, the relative state each is left from, the tokens that end inside)."""


def loop_region(trie: ClassTrie, rel: NDArray[np.int64]) -> LoopRegion:
    """The nodes a walk reaches inside a loop (the "stay" region). ``rel`` (``[r,
    classes]``) is the loop as a small automaton relative to a looping state: 0 is the
    state itself (a class it loops on leads back to 0), other rows are states its walks
    pass through and come back from, such as the middle of a UTF-8 character; -1 where a
    class leaves. Returns the first nodes past the region (the boundary), the relative
    state each boundary node is left from, and the tokens that end inside."""
    ext = np.vstack([rel, np.full((1, rel.shape[1]), -1, dtype=np.int64)])  # (row -1: outside)
    at = np.empty(trie.num_nodes, dtype=np.int64)  # each node's relative state, -1 outside
    lv = trie.level.tolist()
    for d in range(len(lv) - 1):
        lo, hi = lv[d], lv[d + 1]
        at[lo:hi] = ext[0, trie.klass[lo:hi]] if d == 0 else ext[at[trie.parent[lo:hi]], trie.klass[lo:hi]]
    from_r = np.zeros(trie.num_nodes, dtype=np.int64)  # the relative state a node is entered from
    has_parent = trie.parent >= 0
    from_r[has_parent] = at[trie.parent[has_parent]]
    boundary = np.flatnonzero((at < 0) & (from_r >= 0))
    return boundary, from_r[boundary], np.flatnonzero(at[trie.end] >= 0)


def walk_loops(trie: ClassTrie, flat_trans: NDArray[np.int64], num_classes: int, dead: int,
               places: NDArray[np.int64], region: LoopRegion) -> list[NDArray[np.int64]]:
    """As :func:`walk_sparse`, for states whose walks follow one loop (:func:`loop_region`):
    ``places[j, r]`` is the state of ``j``'s walk at relative state ``r`` (column 0: the
    state itself). Inside the region each walk stays alive, so its tokens are allowed; a
    walk leaves the region once, at a boundary node, and only from there on is it followed.
    Per state, the tokens allowed past the region only (those inside, ``region[2]``, are
    allowed in every state)."""
    boundary, from_r, _ = region
    nxt = flat_trans[places[:, from_r] * num_classes + trie.klass[None, boundary]]
    owner, col = np.nonzero(nxt != dead)
    return _expand(trie, flat_trans, num_classes, dead, owner.astype(np.int64), boundary[col], nxt[owner, col],
                   int(places.shape[0]))


def _expand(trie: ClassTrie, flat_trans: NDArray[np.int64], num_classes: int, dead: int, owner: NDArray[np.int64],
            node: NDArray[np.int64], state: NDArray[np.int64], k: int) -> list[NDArray[np.int64]]:
    """Follow live (owner, node, state) triples down the trie: per owner, the tokens reached
    alive (in no particular order).

    The tokens that end at a level's nodes are gathered with that level, while its arrays
    are fresh in the cache, and a node without children needs no filtering out: its count
    of zero repeats it nowhere."""
    got_o: list[NDArray[np.int64]] = []
    got_t: list[NDArray[np.int64]] = []
    cs, ts, order = trie.child_start, trie.tok_start, trie.tok_order
    while node.size:
        t0 = ts[node]
        tc = ts[node + 1] - t0
        te = np.cumsum(tc)
        total = int(te[-1])
        if total:
            got_t.append(order[np.repeat(t0 - (te - tc), tc) + np.arange(total, dtype=np.int64)])
            got_o.append(np.repeat(owner, tc))
        c0 = cs[node]
        cnt = cs[node + 1] - c0
        ends = np.cumsum(cnt)
        total = int(ends[-1])
        if not total:
            break
        child = np.repeat(c0 - (ends - cnt), cnt) + np.arange(total, dtype=np.int64)
        nxt = flat_trans[np.repeat(state, cnt) * num_classes + trie.klass[child]]
        alive = nxt != dead
        owner, node, state = np.repeat(owner, cnt)[alive], child[alive], nxt[alive]
    if not got_o:
        return [np.zeros(0, dtype=np.int64) for _ in range(k)]
    owner = np.concatenate(got_o)
    tok = np.concatenate(got_t)
    # grouped by owner only (a stable radix sort on small keys), not sorted within a group
    toks = tok[stable_order(owner, k)]
    bounds = _starts(owner, k, 0).tolist()
    return [toks[bounds[j] : bounds[j + 1]] for j in range(k)]
