"""Token alignment: which tokens each DFA state admits, vectorized over the vocabulary.

A token is allowed in a state iff walking *all* of its bytes from that state never hits a
missing transition (the DFA is pruned, so every reached state can still finish). The walks
run as numpy arrays, level by level:

* short tokens (at most ``SHORT_TOKEN`` bytes, almost all of a vocabulary) are walked over
  the tokenizer's byte trie (:mod:`maskc.compiler.trie`, built once per tokenizer): narrow
  states follow only their live prefixes, all together; wide states (an eighth of the tokens
  or more survive their first byte: :data:`WIDE_SHARE`) that loop on most
  first bytes (string interiors) are walked only past the byte that leaves the loop; other
  wide states step every node, over the trie merged by byte class when there are many, once
  per distinct state their first bytes lead to (not once per state) where that is fewer;
* long tokens are mapped to deduplicated byte-class sequences, and only those whose first
  class is live in a state are walked;
* states that no string of at most ``L`` bytes (the longest token) tells apart share one
  mask (Moore refinement cut at depth ``L``), which collapses long counted runs such as
  ``maxLength: 5000`` to a handful of distinct computations.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from maskc.compiler.dfa import Dfa, sorted_unique, stable_order
from maskc.compiler.errors import TimeLimitExceeded
from maskc.compiler.minimize import refine, refine_pair, row_ids
from maskc.compiler.trie import (ClassTrie, PairMemo, TokenTrie, build_trie, byte_class_trie, class_trie, first_node,
                                 loop_region, sink_table, walk_dense, walk_from, walk_loops, walk_memo, walk_sparse)

__all__ = ["ClassSeqs", "class_sequences", "align", "TokenTable", "SHORT_TOKEN", "SharedShortTokens", "ShortWalks"]

SHORT_TOKEN = 16  # tokens up to this many bytes are "short" (the vast majority)
CLASS_TRIES = 4  # merged tries (and long-token class sequences) kept per token table
LOOP_REGIONS = 8
"""Loop regions of the byte trie kept per token table, by the loop's moves on bytes: a string's
interior is the same loop, on the same bytes, in every grammar, where its byte classes differ."""


class _Recent(dict[Any, Any]):
    """A dict that keeps its last ``size`` insertions."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        while len(self) > self.size:
            del self[next(iter(self))]


@dataclass(frozen=True)
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
    def longest(self) -> int:
        """The most bytes a walkable token has: the most items of a repetition one token can
        complete (what counted loops keep their distance from a bound by)."""
        got: int | None = self.__dict__.get("_longest")
        if got is None:
            lens = np.diff(self.offsets)[self.walkable]
            got = self.__dict__["_longest"] = int(lens.max(initial=0))
        return got

    def items_reach(self, completing: bytes, shortest: int) -> int:
        """The most items one walkable token can complete, for items of at least ``shortest``
        bytes whose last byte is one of ``completing`` (:data:`maskc.compiler.nfa.ItemReach`):
        the most occurrences of those bytes in a token that lie ``shortest`` or more apart.
        Computed once per table and question."""
        memo: dict[tuple[bytes, int], int] = self.__dict__.setdefault("_items_reach", {})
        got = memo.get((completing, shortest))
        if got is None:
            got = memo[(completing, shortest)] = _items_reach(self, completing, max(1, shortest))
        return got

    def slices(self) -> tuple[TokenSlice, TokenSlice]:
        """Short and long walkable tokens, precomputed once per table (the short ones grouped
        by first byte: :meth:`first_blocks`)."""
        got: tuple[TokenSlice, TokenSlice] | None = self.__dict__.get("_slices")
        if got is None:
            lens = np.diff(self.offsets)
            got = (
                token_slice(self, self.walkable & (lens <= SHORT_TOKEN), by_first=True),
                token_slice(self, self.walkable & (lens > SHORT_TOKEN)),
            )
            self.__dict__["_slices"] = got
        return got

    def short_positions(self) -> NDArray[np.int64]:
        """``[vocab_size]``: each token's index among the short tokens (``slices()[0]``), or
        their count for the others."""
        got: NDArray[np.int64] | None = self.__dict__.get("_short_positions")
        if got is None:
            ids = self.slices()[0].ids
            got = np.full(self.vocab_size, ids.shape[0], dtype=np.int64)
            got[ids] = np.arange(ids.shape[0], dtype=np.int64)
            self.__dict__["_short_positions"] = got
        return got

    def first_blocks(self) -> NDArray[np.int64]:
        """``[257]``: the short tokens (``slices()[0]``) whose first byte is ``b`` are
        ``first_blocks()[b]:first_blocks()[b + 1]``."""
        got: NDArray[np.int64] | None = self.__dict__.get("_first_blocks")
        if got is None:
            sl = self.slices()[0]
            got = np.searchsorted(sl.data[sl.seg], np.arange(257), side="left").astype(np.int64)
            self.__dict__["_first_blocks"] = got
        return got

    def trie(self) -> TokenTrie:
        """The trie of the short walkable tokens (in the order of ``slices()[0].ids``), built once."""
        got: TokenTrie | None = self.__dict__.get("_trie")
        if got is None:
            sl = self.slices()[0]
            got = build_trie(sl.starts, sl.lens, self.flat)
            self.__dict__["_trie"] = got
        return got

    def class_tries(self) -> dict[bytes, ClassTrie]:
        """The short tokens' trie merged by class (:func:`class_trie`), per byte-class map,
        for the last few DFAs aligned (the automata of one pushdown grammar share theirs)."""
        got: dict[bytes, ClassTrie] | None = self.__dict__.get("_class_tries")
        if got is None:
            got = self.__dict__["_class_tries"] = _Recent(CLASS_TRIES)
        return got

    def loop_regions(self) -> dict[bytes, Any]:
        """Regions of loops in the short tokens' trie (:func:`loop_region` and the tokens
        inside), by the loop's moves on bytes, for the last :data:`LOOP_REGIONS` loops: a
        region of the byte trie depends on the bytes that keep a walk inside alone."""
        got: dict[bytes, Any] | None = self.__dict__.get("_loop_regions")
        if got is None:
            got = self.__dict__["_loop_regions"] = _Recent(LOOP_REGIONS)
        return got

    def long_sequences(self, byte_class: NDArray[np.uint8], num_classes: int) -> ClassSeqs:
        """:func:`class_sequences` of the long tokens (``slices()[1]``), kept for the last
        few byte-class maps (the automata of one pushdown grammar share theirs)."""
        recent: dict[tuple[bytes, int], ClassSeqs] | None = self.__dict__.get("_long_sequences")
        if recent is None:
            recent = self.__dict__["_long_sequences"] = _Recent(CLASS_TRIES)
        key = (byte_class.tobytes(), num_classes)
        got = recent.get(key)
        if got is None:
            got = recent[key] = class_sequences(self, byte_class, num_classes, sl=self.slices()[1])
        return got

    @property
    def max_len(self) -> int:
        lens = np.diff(self.offsets)[self.walkable]
        return int(lens.max()) if lens.size else 0


class SharedShortTokens:
    """The short tokens of several tokenizers as one table: each distinct byte string once.

    Alignment walks a DFA's states over this table's trie once for all the tokenizers and
    reads each tokenizer's tokens out of the result (:class:`ShortWalks`): byte-level BPE
    vocabularies share most of their short tokens (DeepSeek's and SmolLM2's trie has 280,000
    nodes together, against 267,000 and 99,000 apart). Whether a token is allowed depends on
    its bytes alone, so the masks are those each tokenizer's own walks give.
    """

    def __init__(self, tables: Sequence[TokenTable]) -> None:
        # Each short token as a key of its bytes (zero-padded to SHORT_TOKEN) and its length;
        # the distinct keys numbered by first occurrence, the tables' tokens in turn.
        slices = [t.slices()[0] for t in tables]
        counts = [sl.ids.shape[0] for sl in slices]
        lens = np.concatenate([sl.lens for sl in slices]) if slices else np.zeros(0, dtype=np.int64)
        if lens.size and int(lens.max()) > SHORT_TOKEN:
            raise ValueError("shared short tokens: a token longer than SHORT_TOKEN bytes")
        rows = np.zeros((lens.shape[0], SHORT_TOKEN), dtype=np.uint8)
        k = 0
        for sl in slices:
            n = sl.ids.shape[0]
            rows[np.repeat(np.arange(k, k + n, dtype=np.int64), sl.lens), sl.pos] = sl.data
            k += n
        group, count = row_ids(np.concatenate([rows.view(np.int64), lens[:, None]], axis=1))
        string_of, heads = _by_first_occurrence(group, count)  # each token's string, and each string's first token
        head_lens = lens[heads]
        offsets = np.zeros(heads.shape[0] + 1, dtype=np.int64)
        np.cumsum(head_lens, out=offsets[1:])
        flat = rows[heads][np.arange(SHORT_TOKEN)[None, :] < head_lens[:, None]]
        self.table = TokenTable(flat, offsets, np.ones(heads.shape[0], dtype=np.bool_), (), int(heads.shape[0]))
        self.max_len = max((t.max_len for t in tables), default=0)
        place = self.table.short_positions()  # a distinct string's index among the table's short tokens
        # per tokenizer table (kept alive here, so that its arrays' ids stay its own)
        self._views: dict[tuple[int, int], tuple[TokenTable, ShortView]] = {}
        k = 0
        for t, sl, n in zip(tables, slices, counts):
            at = place[string_of[k : k + n]]
            k += n
            positions = np.full(t.vocab_size, self.table.num_tokens, dtype=np.int64)
            positions[sl.ids] = at
            order = stable_order(at, self.table.num_tokens)
            starts = np.zeros(self.table.num_tokens + 1, dtype=np.int64)
            np.cumsum(np.bincount(at, minlength=self.table.num_tokens), out=starts[1:])
            self._views[(id(t.flat), id(t.walkable))] = (t, ShortView(positions, starts, sl.ids[order]))

    def view(self, table: TokenTable) -> ShortView | None:
        """The map of a table of one of the tokenizers (or of one with its tokens and
        walkable flags) onto the shared short tokens; None for a table of another tokenizer."""
        got = self._views.get((id(table.flat), id(table.walkable)))
        if got is None or got[0].flat is not table.flat or got[0].walkable is not table.walkable:
            return None
        return got[1]


class ShortView(NamedTuple):
    """One tokenizer's tokens among the shared short tokens (:meth:`SharedShortTokens.view`)."""

    positions: NDArray[np.int64]  # [vocab_size]: each token's shared index (their count for the others)
    starts: NDArray[np.int64]  # [shared + 1]: the ids that spell shared token i are ids[starts[i]:starts[i + 1]]
    ids: NDArray[np.int64]

    def token_ids(self, picked: NDArray[Any]) -> NDArray[np.int64]:
        """The token ids that spell the shared short tokens ``picked``."""
        a = self.starts[picked]
        cnt = self.starts[picked + 1] - a
        total = int(cnt.sum())
        out: NDArray[np.int64] = self.ids[np.repeat(a - (np.cumsum(cnt) - cnt), cnt) + np.arange(total, dtype=np.int64)]
        return out


class ShortWalks:
    """The walks of short tokens that one input's compiles for several tokenizers share:
    the shared table (``tokens``: the table itself, or what builds it on first use), and
    per automaton aligned, its short blocks' allowed tokens (and, for a recursive grammar,
    the alignment automata), kept by the first compile for the next."""

    def __init__(self, tokens: SharedShortTokens | Callable[[], SharedShortTokens]) -> None:
        self._tokens = tokens
        self._found: dict[tuple[Any, ...], tuple[object, Any]] = {}

    @property
    def tokens(self) -> SharedShortTokens:
        if not isinstance(self._tokens, SharedShortTokens):
            self._tokens = self._tokens()
        return self._tokens

    def recall(self, kind: str, owner: object, *key: Any) -> Any:
        """What :meth:`keep` kept of this kind for ``owner`` (the same object) and ``key``, or None."""
        got = self._found.get((kind, id(owner), *key))
        return got[1] if got is not None and got[0] is owner else None

    def keep(self, kind: str, owner: object, value: Any, *key: Any) -> None:
        """Keep ``value`` for ``owner`` (held here, so that its id stays its own) and ``key``."""
        self._found[(kind, id(owner), *key)] = (owner, value)


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
    trie: ClassTrie  # the distinct sequences' trie (its tokens: the sequences, in order)


_SEQ_MULT = np.random.default_rng(0x616C6967).integers(1, 2**62, size=(2, 1 << 12), dtype=np.int64) | 1


@dataclass(frozen=True, slots=True)
class TokenSlice:
    """Per-tokenizer precomputation for one selection of tokens (reused by every compile)."""

    ids: NDArray[np.int64]  # selected token ids
    starts: NDArray[np.int64]
    lens: NDArray[np.int64]
    seg: NDArray[np.int64]  # start of each token in `data`
    pos: NDArray[np.int64]  # position within its token, per byte
    data: NDArray[np.uint8]  # the selected tokens' bytes, concatenated


def _items_reach(table: TokenTable, completing: bytes, gap: int) -> int:
    """:meth:`TokenTable.items_reach`: per token, the completing bytes taken greedily from
    the first, each ``gap`` or more after the one before (the most such a token holds)."""
    lut = np.zeros(256, dtype=np.bool_)
    lut[np.frombuffer(completing, dtype=np.uint8)] = True
    hit = lut[table.flat]
    ends = np.zeros(hit.shape[0] + 1, dtype=np.int64)
    np.cumsum(hit, out=ends[1:])
    counts = ends[table.offsets[1:]] - ends[table.offsets[:-1]]
    counts[~table.walkable] = 0
    best = int(counts.max(initial=0))
    if gap == 1 or best <= 1:
        return best
    best = 1
    for t in np.argsort(-counts, kind="stable").tolist():
        if int(counts[t]) <= best:
            break  # no token from here on holds more completing bytes than the best so far
        a = int(table.offsets[t])
        got, last = 0, -gap
        for p in np.flatnonzero(hit[a : int(table.offsets[t + 1])]).tolist():
            if p - last >= gap:
                got, last = got + 1, p
        best = max(best, got)
    return best


def token_slice(table: TokenTable, select: NDArray[np.bool_], by_first: bool = False) -> TokenSlice:
    """The tokens of ``select`` (non-empty), in id order, or grouped by first byte (stably)."""
    ids = np.flatnonzero(select)
    if by_first:
        ids = ids[np.argsort(table.flat[table.offsets[ids]], kind="stable")]
    starts = table.offsets[ids]
    lens = table.offsets[ids + 1] - starts
    seg = np.cumsum(lens) - lens
    pos = np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(seg, lens)
    data = table.flat[np.repeat(starts, lens) + pos]
    return TokenSlice(ids, starts, lens, seg, pos, data)


def _by_first_occurrence(group: NDArray[np.int64], count: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The ids ``group`` (in ``[0, count)``, each used) renumbered in order of their first
    occurrence, and the position of each one's first occurrence, in the new order."""
    first = np.empty(count, dtype=np.int64)
    first[group[::-1]] = np.arange(group.shape[0] - 1, -1, -1, dtype=np.int64)  # (the last write: the first)
    order = np.argsort(first)
    renum = np.empty(count, dtype=np.int64)
    renum[order] = np.arange(count, dtype=np.int64)
    return renum[group], first[order]


def _group_sequences(sl: TokenSlice, vals: NDArray[np.int64]) -> NDArray[np.int64] | None:
    """Group equal class sequences: a group id per token, or None if a hash collided.

    ``vals`` holds class + 1 per byte of the slice. Every sequence is hashed twice
    (position-weighted sums), grouped by the first hash, then checked exactly, byte by
    byte, against its group's first member.
    """
    n = sl.lens.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if int(sl.lens.max()) > _SEQ_MULT.shape[1]:
        return None
    mult = _SEQ_MULT[:, sl.pos]  # position weights of the two hashes (positions fit: checked above)
    with np.errstate(over="ignore"):
        h1 = np.add.reduceat(vals * mult[0], sl.seg) * 31 + sl.lens
        h2 = np.add.reduceat(vals * mult[1], sl.seg)
    _, first, inverse = np.unique(h1, return_index=True, return_inverse=True)
    inv = np.asarray(inverse, dtype=np.int64).reshape(-1)
    head = first[inv]
    if not (np.array_equal(h2, h2[head]) and np.array_equal(sl.lens, sl.lens[head])):
        return None
    if not np.array_equal(vals, vals[np.repeat(sl.seg[head], sl.lens) + sl.pos]):
        return None
    return inv


def class_sequences(
    table: TokenTable, byte_class: NDArray[np.uint8], num_classes: int, select: NDArray[np.bool_] | None = None,
    sl: TokenSlice | None = None,
) -> ClassSeqs:
    """Map every walkable token (or those in ``select``) to its class sequence; deduplicate."""
    if sl is None:
        sl = token_slice(table, table.walkable if select is None else select)
    ids, tlens = sl.ids, sl.lens
    cls_sel = byte_class[sl.data]
    group = _group_sequences(sl, cls_sel.astype(np.int64) + 1)
    if group is None:  # a hash collision: group exactly, in Python
        translated = cls_sel.tobytes()
        index: dict[bytes, int] = {}
        group = np.empty(ids.shape[0], dtype=np.int64)
        for k, (a, n) in enumerate(zip(sl.seg.tolist(), tlens.tolist())):
            group[k] = index.setdefault(translated[a : a + n], len(index))
    # number groups by first occurrence, so results do not depend on hash values
    token_seq, head_tok = _by_first_occurrence(group, int(group.max()) + 1 if group.size else 0)
    lengths = tlens[head_tok]
    offsets = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    pos = np.arange(int(offsets[-1]), dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    flat = cls_sel[np.repeat(sl.seg[head_tok], lengths) + pos].astype(np.int64)
    first_cls = flat[offsets[:-1]] if lengths.size else np.zeros(0, dtype=np.int64)
    by_first = np.argsort(first_cls.astype(np.uint8), kind="stable")  # radix sort on small keys
    first_start = np.searchsorted(first_cls[by_first], np.arange(num_classes + 1))
    seq_trie = build_trie(offsets[:-1], lengths, flat.astype(np.uint8))  # (classes fit a byte)
    return ClassSeqs(flat, offsets, lengths, ids, token_seq, by_first, first_start.astype(np.int64),
                     byte_class_trie(seq_trie, seq_trie.byte.astype(np.int64)))


class _SeqMemo:
    """The long sequences allowed below each (first class, state it leads to), kept across
    the batches of one alignment; ``canon`` maps a state (and -1, dead, to itself) to its
    representative among those no sequence past its first class tells apart. Past
    ``budget`` sequences held, it starts over."""

    def __init__(self, canon: NDArray[np.int64], budget: int = 1 << 23) -> None:
        self.canon = canon
        self.budget = budget
        self.clear()

    def clear(self) -> None:
        self.index: dict[int, int] = {}
        self.flat = np.zeros(64, dtype=np.int32)  # the pairs' sequences, concatenated (capacity)
        self.held = 0  # entries of ``flat`` in use
        self.start = np.zeros(64, dtype=np.int64)  # pair ``i``: ``flat[start[i]:start[i + 1]]``
        self.pairs = 0

    def extend(self, found: list[NDArray[np.int64]]) -> None:
        """Append the sequences of new pairs (numbered on from :attr:`pairs`); capacities
        double, so a batch copies only what it adds."""
        lens = np.fromiter((f.shape[0] for f in found), dtype=np.int64, count=len(found))
        total = int(lens.sum())
        self.flat = _room(self.flat, self.held + total)
        self.start = _room(self.start, self.pairs + len(found) + 1)
        if total:
            self.flat[self.held : self.held + total] = np.concatenate(found)
        self.start[self.pairs + 1 : self.pairs + len(found) + 1] = self.held + np.cumsum(lens)
        self.held += total
        self.pairs += len(found)


def _room(arr: NDArray[Any], size: int) -> NDArray[Any]:
    """``arr``, or a copy at least twice as long, holding ``size`` entries."""
    if size <= arr.shape[0]:
        return arr
    grown = np.zeros(max(size, 2 * arr.shape[0]), dtype=arr.dtype)
    grown[: arr.shape[0]] = arr
    return grown


def _batch_allowed(dfa: Dfa, seqs: ClassSeqs, states: NDArray[np.int64], memo: _SeqMemo,
                   budget: int = 1 << 21, flat_trans: NDArray[Any] | None = None,
                   read: bool = True) -> list[NDArray[np.int64]]:
    """Allowed sequences for many states at once. A sequence's fate depends only on the state
    its first class leads to, so each (first class, representative) pair that ``memo`` lacks
    is walked once, from the first state of ``states`` that leads there, down the sequences'
    trie (:attr:`ClassSeqs.trie`: a prefix they share is stepped once, as the runs of spaces
    or dashes that most long tokens are), in batches of pairs whose candidate sequences
    number at most ``budget``; every state reads the pairs of its live first classes.
    ``flat_trans``: :func:`~maskc.compiler.trie.sink_table` of ``dfa.trans``, where the caller has it.
    ``read``: False to walk the new pairs into ``memo`` only (returns nothing): a walk steps
    each level of the trie once per call, and runs of spaces are 128 levels deep, so the
    states of a whole alignment are walked in one call where the memo holds them."""
    k = int(states.shape[0])
    counts = seqs.first_start[1:] - seqs.first_start[:-1]  # [classes]
    nxt = dfa.trans[states]
    ks, cs = np.nonzero((nxt >= 0) & (counts[None, :] > 0))
    if not ks.size:
        return [np.zeros(0, dtype=np.int64) for _ in range(k)]
    n = dfa.num_states
    if memo.held > memo.budget:
        memo.clear()
    key = cs * (n + 1) + memo.canon[nxt[ks, cs]]
    uniq, inv = np.unique(key, return_inverse=True)
    inv = np.asarray(inv, dtype=np.int64).reshape(-1)
    ids = np.fromiter((memo.index.get(x, -1) for x in uniq.tolist()), dtype=np.int64, count=uniq.shape[0])
    new = np.flatnonzero(ids < 0)
    if new.size:
        if flat_trans is None:
            flat_trans = sink_table(dfa.trans)
        trie = seqs.trie
        roots = int(trie.level[1]) if trie.level.shape[0] > 1 else 0
        root_of = np.full(dfa.num_classes, -1, dtype=np.int64)  # each first class's node
        root_of[trie.klass[:roots]] = np.arange(roots, dtype=np.int64)
        first = np.empty(uniq.shape[0], dtype=np.int64)
        first[inv[::-1]] = np.arange(inv.shape[0] - 1, -1, -1, dtype=np.int64)  # first pair of each key
        pick = first[new]
        after, rep_cls = nxt[ks[pick], cs[pick]].astype(np.int64), cs[pick]
        lens_all = counts[rep_cls]
        found: list[NDArray[np.int64]] = []
        lo = 0
        while lo < new.shape[0]:  # pairs in batches of at most ``budget`` candidate sequences
            hi = lo + 1 + int(np.searchsorted(np.cumsum(lens_all[lo + 1 :]), budget - int(lens_all[lo]), side="right"))
            found.extend(walk_from(trie, flat_trans, dfa.num_classes, n, root_of[rep_cls[lo:hi]], after[lo:hi]))
            lo = hi
        ids[new] = memo.pairs + np.arange(new.shape[0], dtype=np.int64)
        memo.index.update(zip(uniq[new].tolist(), ids[new].tolist()))
        memo.extend(found)
    if not read:
        return []
    pid = ids[inv]
    st = memo.start[pid]
    ln = memo.start[pid + 1] - st
    total = int(ln.sum())
    vals = memo.flat[np.repeat(st - (np.cumsum(ln) - ln), ln) + np.arange(total, dtype=np.int64)].astype(np.int64)
    bounds = np.searchsorted(np.repeat(ks, ln), np.arange(k + 1)).tolist()  # (ks ascends)
    return [vals[bounds[j] : bounds[j + 1]] for j in range(k)]


LONG_WALK_CHUNK = 8192
"""States whose long tokens are walked in one call (the walks of 16 chunks of states at once:
a call steps each level of the sequences' trie once, and 128 levels for runs of spaces)."""
DENSE_BATCH = 32  # wide states walked together over the whole trie
MEMO_BY_CONTENT = 4096  # allowed short tokens up to which a state's mask is memoized by content
LOOP_BATCH = 32  # looping wide states walked together from their boundary nodes
SPARSE_BUDGET = 1 << 20  # surviving tokens walked together by the narrow states of one batch
MANY_WIDE = 12  # from this many wide states on, they walk the class-merged trie
WIDE_SHARE = 8
"""A state is walked as a wide one when more than 1/WIDE_SHARE of the short tokens survive
its first byte. Each narrow state follows its own live pairs of (trie node, state), and the
pairs of a state inside a string of letters (a sixth of DeepSeek's tokens) number about
40,000; wide states share the walks past their first byte. At 1/4, the 45 slowest slice
schemas aligned in 214 s; at 1/8 in 179 s, and no schema of 60 random ones took longer."""


def _width(dfa: Dfa, trie: TokenTrie, states: NDArray[np.int64]) -> NDArray[np.int64]:
    """How many short tokens survive their first byte in each state."""
    live = dfa.trans[states][:, dfa.byte_class.astype(np.int64)] >= 0  # [k, 256]
    out: NDArray[np.int64] = live.astype(np.int64) @ trie.first_count
    return out


def _wide(dfa: Dfa, trie: TokenTrie, states: NDArray[np.int64]) -> NDArray[np.bool_]:
    """Whether a quarter of the short tokens or more survive their first byte in each state."""
    out: NDArray[np.bool_] = _width(dfa, trie, states) * 4 > trie.num_tokens
    return out


DETOUR_STATES = 16  # the most states a loop's detours may pass through (UTF-8 needs 7)


def _detours(dfa: Dfa, looping: list[int]) -> tuple[NDArray[np.int64], NDArray[np.int64]] | None:
    """The detours of looping states from the loop through the middle of a multi-byte UTF-8
    character and back, as one automaton relative to the loop: ``(rel, places)`` where
    ``rel[r, c]`` is the relative state class ``c`` leads to from relative state ``r`` (0:
    the looping state; -1: the walk leaves), and ``places[j, r]`` the state of
    ``looping[j]``'s walk at ``r`` (-1 where that state's detours differ: it is walked
    otherwise). None where the first state has no such detours.

    A string interior loops on ASCII characters, and a token with a non-ASCII byte leaves
    that loop: a lead byte goes to a state of its own and the continuation bytes come back.
    Inside the detours each walk stays alive, as inside the loop (:func:`~maskc.compiler.trie.loop_region`)."""
    trans = dfa.trans
    s0 = looping[0]
    cont = np.zeros(dfa.num_classes, dtype=np.bool_)  # classes of continuation bytes only
    cont[np.unique(dfa.byte_class[0x80:0xC0])] = True
    cont[np.unique(np.concatenate([dfa.byte_class[:0x80], dfa.byte_class[0xC0:]]))] = False
    order = [s0]
    index = {s0: 0}
    via: list[tuple[int, int]] = [(-1, -1)]  # how each relative state is first reached
    keep: set[int] = set()
    i = 0
    while i < len(order):  # states whose moves are all on continuation bytes, breadth first
        row = trans[order[i]].tolist()
        for c, t in enumerate(row):
            if t < 0 or t in index:
                continue
            live = trans[t] >= 0
            if not live.any() or (live & ~cont).any():
                continue
            if len(order) > DETOUR_STATES:
                return None
            index[t] = len(order)
            order.append(t)
            via.append((i, c))
            keep.add(t)
        i += 1
    changed = True
    while changed:  # only those whose moves stay among them or return to the loop
        changed = False
        for t in list(keep):
            if any(u >= 0 and u != s0 and u not in keep for u in trans[t].tolist()):
                keep.discard(t)
                changed = True
    if not keep:
        return None
    kept = [0] + [r for r in range(1, len(order)) if order[r] in keep]  # (breadth first still)
    renum = {r: j for j, r in enumerate(kept)}
    if any(via[r][0] not in renum for r in kept[1:]):
        return None
    rel = np.full((len(kept), dfa.num_classes), -1, dtype=np.int64)
    for j, r in enumerate(kept):
        for c, t in enumerate(trans[order[r]].tolist()):
            if t == s0:
                rel[j, c] = 0
            elif t in keep:
                rel[j, c] = renum[index[t]]
    k = len(looping)
    places = np.full((k, len(kept)), -1, dtype=np.int64)
    places[:, 0] = looping
    for j, r in enumerate(kept[1:], start=1):
        pr, c = via[r]
        src = places[:, renum[pr]]
        places[:, j] = np.where(src >= 0, trans[np.maximum(src, 0), c], -1)
    ok = (places >= 0).all(axis=1)
    for j in range(len(kept)):  # every move inside the detours lands where the first state's does
        want = rel[j]
        inside = want >= 0
        rows = trans[np.maximum(places[:, j], 0)][:, inside]
        ok &= (rows == places[:, want[inside]]).all(axis=1)
    places[~ok] = -1
    return rel, places


def _short_allowed(dfa: Dfa, trie: TokenTrie, states: NDArray[np.int64], flat_trans: NDArray[np.int64],
                   node_class: NDArray[np.int64], ctries: list[ClassTrie], many_wide: bool,
                   deadline: float | None, blocks: NDArray[np.int64],
                   memos: dict[int, PairMemo], canon: NDArray[np.int64] | None,
                   regions: dict[tuple[int, int, bytes], Any],
                   kept: dict[bytes, Any]) -> list[NDArray[np.int32] | NDArray[np.uint8]]:
    """Per state: the short tokens it allows (indices into the trie's tokens), packed (:func:`_pack`).

    The walks run over the trie labelled by class (built on first need into ``ctries``:
    merged by class when ``many_wide``, which costs a few walks once and makes each walk
    cheaper). Narrow states follow their live prefixes only, all together. Wide states
    (an eighth of the tokens or more survive the first byte) that loop on the first byte
    of most tokens (string interiors) are grouped by their looping classes and walk only
    past the first byte that leaves the loop; other wide states step every node, together
    (:func:`walk_memo`: one walk per distinct successor of a first byte, which states
    spelling declared keys inside a looping string mostly share), or in batches
    (:data:`WIDE_SHARE`; :data:`MANY_WIDE` counts the states where a quarter survive).
    ``blocks`` is :meth:`TokenTable.first_blocks`. ``memos`` (per class trie) keeps the walks
    of the wide states' first-byte successors across calls (:class:`PairMemo`), ``canon``
    its representatives of states alike for the trie's depth. ``kept``: the table's loop
    regions by their moves on bytes (:meth:`TokenTable.loop_regions`), shared by its alignments.
    """
    n = trie.num_tokens
    out: list[NDArray[np.int32] | NDArray[np.uint8]] = [_pack(np.zeros(0, dtype=np.int64), n)] * states.shape[0]
    if not states.size or not n:
        return out
    if not ctries:
        ctries.append(class_trie(trie, node_class, dfa.num_classes) if many_wide else byte_class_trie(trie, node_class))
    ct = ctries[0]
    dead = dfa.num_states
    width = _width(dfa, trie, states)
    wide_mask = width * WIDE_SHARE > trie.num_tokens
    wide = np.flatnonzero(wide_mask)
    if wide.size:
        ws = states[wide]
        loops = dfa.trans[ws] == ws[:, None]  # [w, classes]
        loop_width = loops[:, dfa.byte_class.astype(np.int64)].astype(np.int64) @ trie.first_count
        groups: dict[bytes, list[int]] = {}
        dense: list[int] = []
        for x in range(ws.shape[0]):
            if loop_width[x] * 2 >= trie.num_tokens:
                groups.setdefault(loops[x].tobytes(), []).append(x)
            else:
                dense.append(x)
        for xs in groups.values():
            plain = np.where(loops[xs[0]], 0, -1)[None, :].astype(np.int64)  # the loop alone
            rest = _walk_loop(dfa, ct, flat_trans, xs, plain, ws[xs][:, None], out, wide, n, deadline, regions,
                              kept, trie)
            if rest:  # a quarter of the tokens leave the loop: with its UTF-8 detours, perhaps fewer
                got = _detours(dfa, ws[xs].tolist())
                if got is not None:
                    rest = _walk_loop(dfa, ct, flat_trans, xs, got[0], got[1], out, wide, n, deadline, regions,
                                      kept, trie)
            dense.extend(rest)
        dense.sort()
        if len(dense) > 1:  # walks past the first byte, shared between the states (when fewer)
            if deadline is not None and time.monotonic() > deadline:
                raise TimeLimitExceeded("compile time (s)", limit=0)
            part = np.asarray(dense, dtype=np.int64)
            max_walks = min(len(dense) * 3 // 4, DENSE_BATCH)
            memo = memos.get(id(ct))
            if memo is None:
                memo = memos[id(ct)] = PairMemo(ct, first_node(ct), blocks, canon)
            ok = walk_memo(ct, flat_trans, dfa.num_classes, dead, ws[part], memo, max_walks)
            if ok is not None:
                for x, row in zip(dense, ok):
                    out[int(wide[x])] = _pack_row(row)
                dense = []
        for i in range(0, len(dense), DENSE_BATCH):
            if deadline is not None and time.monotonic() > deadline:
                raise TimeLimitExceeded("compile time (s)", limit=0)
            part = np.asarray(dense[i : i + DENSE_BATCH], dtype=np.int64)
            ok = walk_dense(ct, flat_trans, dfa.num_classes, dead, ws[part])
            for x, row in zip(part.tolist(), ok):
                out[int(wide[x])] = _pack_row(row)
    narrow = np.flatnonzero(~wide_mask)
    # batches of narrow states whose surviving tokens stay under SPARSE_BUDGET in all
    ends = np.cumsum(width[narrow])
    start = 0
    while start < narrow.shape[0]:
        if deadline is not None and time.monotonic() > deadline:
            raise TimeLimitExceeded("compile time (s)", limit=0)
        base = int(ends[start - 1]) if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, base + SPARSE_BUDGET, side="right")))
        part = narrow[start:stop]
        for j, ok_idx in zip(part.tolist(), walk_sparse(ct, flat_trans, dfa.num_classes, dead, states[part])):
            out[j] = _pack(ok_idx, n)
        start = stop
    return out


def _walk_loop(dfa: Dfa, ct: ClassTrie, flat_trans: NDArray[np.int64], xs: list[int], rel: NDArray[np.int64],
               places: NDArray[np.int64], out: list[NDArray[np.int32] | NDArray[np.uint8]], wide: NDArray[np.int64],
               n: int, deadline: float | None, regions: dict[tuple[int, int, bytes], Any],
               kept: dict[bytes, Any], trie: TokenTrie) -> list[int]:
    """Walk the wide states ``xs`` of one loop (``rel``, with each state's ``places``: see
    :func:`~maskc.compiler.trie.walk_loops`) where three quarters of the tokens stay inside
    it, writing ``out``; the states left to walk otherwise (all of them where more leave, and
    those whose places are -1). Regions are kept in ``regions`` for the alignment, and in
    ``kept`` (:meth:`TokenTable.loop_regions`) by the loop's moves on bytes where ``ct`` is
    ``trie`` labelled by class (its nodes are the byte trie's)."""
    key = (id(ct), rel.shape[0], rel.tobytes())
    found = regions.get(key)
    if found is None:
        # (a node's class is its byte's; 256 columns: the bytes tell the rows too)
        on_bytes = rel[:, dfa.byte_class.astype(np.int64)].tobytes() if ct.parent is trie.parent else None
        if on_bytes is not None:
            found = kept.get(on_bytes)
        if found is None:
            region = loop_region(ct, rel)
            inside = np.zeros(n, dtype=np.bool_)  # the tokens every state allows
            inside[region[2]] = True
            found = (region, inside)
            if on_bytes is not None:
                kept[on_bytes] = found
        regions[key] = found
    region, inside = found
    stay = region[2]
    if stay.shape[0] * 4 < n * 3:
        return xs
    follow = places[:, 0] >= 0
    rest = [x for x, f in zip(xs, follow.tolist()) if not f]
    part = np.flatnonzero(follow)
    for i in range(0, part.shape[0], LOOP_BATCH):
        if deadline is not None and time.monotonic() > deadline:
            raise TimeLimitExceeded("compile time (s)", limit=0)
        sel = part[i : i + LOOP_BATCH]
        for j, past in zip(sel.tolist(), walk_loops(ct, flat_trans, dfa.num_classes, dfa.num_states, places[sel],
                                                    region)):
            if stay.shape[0] + past.shape[0] <= MEMO_BY_CONTENT:  # (as _pack: the two never share a token)
                out[int(wide[xs[j]])] = _pack(np.concatenate([stay, past]), n)
            else:
                bits = inside.copy()
                bits[past] = True
                out[int(wide[xs[j]])] = np.packbits(bits)
    return rest


def _pack(ok: NDArray[np.int64], n: int) -> NDArray[np.int32] | NDArray[np.uint8]:
    """A short block's allowed tokens (indices among ``n``) held until its masks are built:
    few as sorted int32 indices, many as a bitset (a wide state allows most of the
    vocabulary: a bitset is 64 times smaller than its indices)."""
    if ok.shape[0] <= MEMO_BY_CONTENT:
        return np.sort(ok).astype(np.int32)
    bits = np.zeros(n, dtype=np.bool_)
    bits[ok] = True
    return np.packbits(bits)


def _pack_row(row: NDArray[np.bool_]) -> NDArray[np.int32] | NDArray[np.uint8]:
    """:func:`_pack` of ``np.flatnonzero(row)``, from the row itself. (Counted row by row: along
    an axis of a ``[states, tokens]`` matrix ``count_nonzero`` takes ten times as long.)"""
    if np.count_nonzero(row) <= MEMO_BY_CONTENT:
        return np.flatnonzero(row).astype(np.int32)
    return np.packbits(row)


def align(
    dfa: Dfa,
    table: TokenTable,
    *,
    add_mask: Callable[[NDArray[np.bool_]], int],
    progress: Callable[[int, int], None] | None = None,
    deadline: float | None = None,
    only: NDArray[np.int64] | None = None,
    free_order: bool = False,
    short_blocks: NDArray[np.int64] | None = None,
    walks: ShortWalks | None = None,
) -> NDArray[np.int32]:
    """Compute each state's allowed-token mask.

    ``add_mask(mask)`` receives each distinct boolean mask (width ``vocab_size``, EOS set
    in accepting states) and returns its id in the caller's store.

    Args:
        only: compute the masks of these states alone (the others map to -1).
        free_order: the masks may reach ``add_mask`` in another order (the caller adds
            them to its store by content): the long tokens' partition is then refined on
            from the short tokens' one rather than from scratch.
        short_blocks: the partition of the states that :data:`SHORT_TOKEN` rounds of
            refinement from the accepting states give (any numbering), where the caller has
            it; else it is computed here.
        walks: the short tokens of this input's tokenizers, walked once for all
            (:class:`ShortWalks`; unused where ``table`` is not one of theirs): the walks of a
            state's short block are kept there for this automaton, and taken from there
            when an earlier alignment of it made them.

    Returns:
        ``state -> mask id`` (int32 [states]).

    Raises:
        TimeLimitExceeded: ``deadline`` (``time.monotonic()``) passed.
    """
    view = walks.tokens.view(table) if walks is not None else None
    joint = walks if view is not None else None  # (the shared walks serve this table)
    short_table = joint.tokens.table if joint is not None else table
    trie = short_table.trie()
    long_ = table.long_sequences(dfa.byte_class, dfa.num_classes)
    acc = dfa.accepting.astype(np.int64)
    # Masks of short tokens depend on the first SHORT_TOKEN bytes of the future only;
    # long tokens (few) on up to max_len bytes: two partitions, the finer one drives.
    long_rounds = max(SHORT_TOKEN, table.max_len)
    if short_blocks is None and long_.token_ids.size and not free_order:  # one run of rounds
        block_s, block = refine_pair(dfa.trans, acc, SHORT_TOKEN, long_rounds, deadline=deadline)
    else:
        if short_blocks is None:
            # (the same rounds of the same automaton: kept for another of the input's tokenizers)
            kept_s: NDArray[np.int64] | None = joint.recall("blocks", dfa) if joint is not None else None
            if kept_s is None:
                kept_s = refine(dfa.trans, acc, max_rounds=SHORT_TOKEN, deadline=deadline)
                if joint is not None:
                    joint.keep("blocks", dfa, kept_s)
            block_s = kept_s
        else:
            block_s = np.unique(short_blocks, return_inverse=True)[1].astype(np.int64).reshape(-1)
        if not long_.token_ids.size:
            block = block_s
        elif free_order:  # the same partition, refined on from the short one (numbered otherwise)
            block = refine(dfa.trans, block_s, max_rounds=long_rounds - SHORT_TOKEN,
                           deadline=deadline)
        else:
            block = refine(dfa.trans, acc, max_rounds=long_rounds, deadline=deadline)
    flat_trans = sink_table(dfa.trans)
    eos = np.asarray(table.eos_ids, dtype=np.int64)

    def reps(part: NDArray[np.int64]) -> NDArray[np.int64]:
        r = np.full(int(part.max()) + 1, -1, dtype=np.int64)
        r[part[::-1]] = np.arange(dfa.num_states - 1, -1, -1)
        return r

    rep_s, rep = reps(block_s), reps(block)
    # (a long sequence reads at most max_len - 1 classes past its first: ``block``'s depth)
    seq_memo = _SeqMemo(np.append(rep[block], -1))
    # Each state's representative among those no short token tells apart (a walk below a
    # token's first byte reads at most SHORT_TOKEN - 1 more), the dead state its own.
    canon = np.append(rep_s[block_s], dfa.num_states) if trie.level.shape[0] - 1 <= SHORT_TOKEN else None
    wanted_blocks: NDArray[np.int64] | None = None
    if only is not None:
        # only the blocks holding requested states are computed
        wanted_blocks = sorted_unique(block[only])
        rep = rep[wanted_blocks]
        need_s = sorted_unique(block_s[rep])
        slot_s = np.full(rep_s.shape[0], -1, dtype=np.int64)
        slot_s[need_s] = np.arange(need_s.shape[0])
        rep_s = rep_s[need_s]
        block_s = slot_s[block_s]
    nblocks = rep.shape[0]
    chunk = 512
    short_ok: list[Any]  # per short block: see _pack
    node_class = dfa.byte_class.astype(np.int64)[trie.byte]
    ctries: list[ClassTrie] = []
    merged = short_table.class_tries().get(dfa.byte_class.tobytes())
    if merged is not None:
        ctries.append(merged)
    blocks = short_table.first_blocks()
    many_wide = int(np.count_nonzero(_wide(dfa, trie, rep_s))) >= MANY_WIDE if rep_s.size else False
    short_chunk = 128  # a wide state's allowed tokens take ~1 MB until packed
    memos: dict[int, PairMemo] = {}
    regions: dict[tuple[int, int, bytes], Any] = {}  # loop regions, per class trie and loop
    # kept once per content: a large grammar's short blocks are tens of thousands, their
    # allowed sets a thousand distinct (JSON Schema Store's config.json: 75 MiB as computed)
    distinct: dict[tuple[str, bytes], NDArray[np.int32] | NDArray[np.uint8]] = {}
    # Walks that an earlier alignment of this automaton made for another of the input's
    # tokenizers (over the same shared tokens) are taken from there: a state's walk depends
    # on the state alone, and each block's is its first state's.
    kept = joint.recall("short", dfa) if joint is not None else None  # (its states, sorted, and their walks)
    todo = np.arange(rep_s.shape[0], dtype=np.int64)
    if kept is not None and kept[0].size:
        at = np.minimum(np.searchsorted(kept[0], rep_s), kept[0].shape[0] - 1)
        hit = kept[0][at] == rep_s
        todo = np.flatnonzero(~hit)
        short_ok = [kept[1][j] if h else None for j, h in zip(at.tolist(), hit.tolist())]
    else:
        short_ok = [None] * rep_s.shape[0]
    for i in range(0, todo.shape[0], short_chunk):
        if deadline is not None and time.monotonic() > deadline:
            raise TimeLimitExceeded("compile time (s)", limit=0)
        part = todo[i : i + short_chunk]
        for b, got in zip(part.tolist(), _short_allowed(dfa, trie, rep_s[part], flat_trans, node_class, ctries,
                                                        many_wide, deadline, blocks, memos, canon, regions,
                                                        short_table.loop_regions())):
            short_ok[b] = distinct.setdefault((got.dtype.char, got.tobytes()), got)
        if progress is not None:
            progress(rep_s.shape[0] - todo.shape[0] + min(i + short_chunk, todo.shape[0]), rep_s.shape[0] + nblocks)
    if joint is not None and todo.size:
        states = rep_s if kept is None else np.concatenate([kept[0], rep_s[todo]])
        found = short_ok if kept is None else list(kept[1]) + [short_ok[b] for b in todo.tolist()]
        order = np.argsort(states, kind="stable")
        joint.keep("short", dfa, (states[order], [found[j] for j in order.tolist()]))
    del distinct
    if ctries and many_wide:
        short_table.class_tries()[dfa.byte_class.tobytes()] = ctries[0]
    memo: dict[tuple[int, bytes], int] = {}
    for i in range(0, nblocks if long_.lengths.size else 0, LONG_WALK_CHUNK):  # (read back chunk by chunk below)
        if deadline is not None and time.monotonic() > deadline:
            raise TimeLimitExceeded("compile time (s)", limit=0)
        _batch_allowed(dfa, long_, rep[i : i + LONG_WALK_CHUNK], seq_memo, flat_trans=flat_trans, read=False)
    short_pos = short_table.short_positions() if view is None else view.positions
    short_ids = table.slices()[0].ids
    block_mask = np.zeros(nblocks, dtype=np.int32)
    for i in range(0, nblocks, chunk):
        if deadline is not None and time.monotonic() > deadline:
            raise TimeLimitExceeded("compile time (s)", limit=0)
        states = rep[i : i + chunk]
        k = states.shape[0]
        # per state: its long sequences allowed, then whether it accepts (EOS), as one row
        oks = np.zeros((k, long_.lengths.shape[0] + 1), dtype=np.bool_)
        if long_.lengths.size:
            long_ok = _batch_allowed(dfa, long_, states, seq_memo, flat_trans=flat_trans)
            oks[np.repeat(np.arange(k), [a.shape[0] for a in long_ok]), np.concatenate(long_ok)] = True
        oks[:, -1] = dfa.accepting[states]
        keys = np.packbits(oks, axis=1)
        for j, b in enumerate(block_s[states].tolist()):
            packed = short_ok[b]
            # short blocks of one content share one object (``distinct`` above): keyed by it
            key = (id(packed), keys[j].tobytes())
            m = memo.get(key)
            if m is None:
                ok_l = oks[j]
                if packed.dtype == np.uint8:  # a bitset over the short tokens, read by every token
                    ext = np.zeros(trie.num_tokens + 1, dtype=np.bool_)  # (the last: not a short token)
                    bits: NDArray[np.uint8] = packed.view(np.uint8)
                    ext[:-1] = np.unpackbits(bits, count=trie.num_tokens).view(np.bool_)
                    mask = np.take(ext, short_pos)
                else:
                    mask = np.zeros(table.vocab_size, dtype=np.bool_)
                    mask[short_ids[packed] if view is None else view.token_ids(packed)] = True
                mask[long_.token_ids[ok_l[long_.token_seq]]] = True
                if ok_l[-1] and eos.size:
                    mask[eos] = True
                m = add_mask(mask)
                memo[key] = m
            block_mask[i + j] = m
        if progress is not None:
            progress(rep_s.shape[0] + min(i + chunk, nblocks), rep_s.shape[0] + nblocks)
    if wanted_blocks is not None:
        full = np.full(int(block.max()) + 1, -1, dtype=np.int32)
        full[wanted_blocks] = block_mask
        return full[block].astype(np.int32)
    return block_mask[block].astype(np.int32)
