"""Deduplicated token masks, each stored in the cheapest of three forms.

A mask is a set of allowed token ids over the logits width ``V``. Per distinct mask the
store keeps whichever is smallest: the allowed ids, the rejected ids (either up to half a
row's words: :data:`LIST_FRACTION`), or a dense bitset of ``ceil(V/32)`` int32 words
(XGrammar's layout: bit ``i % 32`` of word ``i // 32``), or the ids whose bit differs from a
close mask (a delta), while the chain of deltas a first visit decodes stays short
(:data:`MAX_DELTA_DEPTH` links, :data:`MAX_CHAIN_FLIPS` flips).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

__all__ = ["MaskStore", "MaskStoreBuilder", "KIND_ALLOW", "KIND_REJECT", "KIND_DENSE", "KIND_DELTA", "bitmask_words", "pack_bool", "unpack_bool"]

KIND_ALLOW = 0
KIND_REJECT = 1
KIND_DENSE = 2
KIND_DELTA = 3  # data = [base mask id, token ids whose bit differs from the base]
MAX_DELTA_DEPTH = 8
MAX_CHAIN_FLIPS = 2048
"""Most flips a delta's chain may hold, its own and its bases' down to a self-contained
mask: what a first visit decodes (about 5 ns a flip) is bounded, where a chain of deltas each
nearly a dense row's size saves little space and costs tens of µs to decode."""
LIST_FRACTION = 2
"""A list of ids is stored up to ``1 / LIST_FRACTION`` of a dense row's words; a longer one
is stored dense. A first visit decodes a list with a scatter (10–20 µs for a few thousand
ids, whatever numpy does) where a dense row is a view of the file: the store gives up at most
twice a long list's bytes (on a MaskBench sample: 5% more in all, the median artifact 15%)
for the fastest first mask."""
DELTA_WINDOW = 16
SPARSE_WORDS = 8
"""A mask with nonzero words in at most ``1 / SPARSE_WORDS`` of its row is compared with a
delta base's words at those places alone."""
REUSE_LIMIT = 4096  # a store given to a builder with up to this many masks is searched for each new one


def bitmask_words(vocab_size: int) -> int:
    """Number of int32 words in one bitmask row: ``ceil(vocab_size / 32)``."""
    return (vocab_size + 31) // 32


def unpack_bool(row: NDArray[np.generic], vocab_size: int) -> NDArray[np.bool_]:
    """An int32 bitmask row (or its uint32/uint64 view) -> boolean mask of width ``vocab_size``."""
    bits = np.unpackbits(np.ascontiguousarray(row).view(np.uint8), bitorder="little")
    return bits[:vocab_size].astype(np.bool_)


_FEW_BITS = 64
"""Up to this many set bits, :func:`_set_bits` reads them from their words alone."""


def _set_bits(words: NDArray[np.uint64], count: int, width: int) -> NDArray[np.int32]:
    """The positions of the ``count`` set bits of a packed row of ``width`` bits (bit ``i % 64``
    of word ``i // 64``), in order: a few read from their words alone, many from the row."""
    if count > _FEW_BITS:
        return np.flatnonzero(unpack_bool(words, width)).astype(np.int32)
    at = np.flatnonzero(words)
    bit = np.flatnonzero(np.unpackbits(words[at].view(np.uint8), bitorder="little"))
    out: NDArray[np.int32] = (at[bit >> 6] * 64 + (bit & 63)).astype(np.int32)
    return out


def pack_bool(mask: NDArray[np.bool_]) -> NDArray[np.int32]:
    """Boolean mask -> int32 bitmask row (bit ``i % 32`` of word ``i // 32`` = token ``i``)."""
    words = bitmask_words(mask.shape[0])
    if mask.shape[0] == words * 32:
        packed = np.packbits(mask, bitorder="little")
    else:
        padded = np.zeros(words * 32, dtype=np.bool_)
        padded[: mask.shape[0]] = mask
        packed = np.packbits(padded, bitorder="little")
    return packed.view("<i4").astype(np.int32, copy=False)


@dataclass(frozen=True, slots=True)
class MaskStore:
    """Distinct masks: ``kinds[m]`` and ``data[offsets[m]:offsets[m+1]]`` (int32)."""

    vocab_size: int
    kinds: NDArray[np.uint8]
    offsets: NDArray[np.int64]
    data: NDArray[np.int32]
    checked: bool = field(default=False, repr=False, compare=False)
    """The caller proved every kind known (an artifact's load)."""

    def __post_init__(self) -> None:
        m = self.kinds.shape[0]
        if self.offsets.shape != (m + 1,) or (m and int(self.offsets[-1]) != self.data.shape[0]):
            raise ValueError("mask store offsets do not match its data")
        if m and not self.checked and int(self.kinds.max()) > KIND_DELTA:
            raise ValueError("unknown mask kind")

    @property
    def num_masks(self) -> int:
        return int(self.kinds.shape[0])

    def dense_row(self, m: int) -> NDArray[np.int32]:
        """Mask ``m`` as an int32 bitmask row."""
        kind = int(self.kinds[m])
        seg = self.data[int(self.offsets[m]) : int(self.offsets[m + 1])]
        if kind == KIND_DENSE:
            return seg.copy()
        if kind == KIND_DELTA:
            row = self.dense_row(int(seg[0]))
            ids = seg[1:]
            flips = np.zeros(row.shape[0], dtype=np.uint32)
            np.bitwise_or.at(flips, ids // 32, (np.uint32(1) << (ids % 32).astype(np.uint32)))
            return (row.view(np.uint32) ^ flips).view(np.int32)
        bits = np.zeros(self.vocab_size, dtype=np.bool_)
        if kind == KIND_ALLOW:
            bits[seg] = True
        else:
            bits[:] = True
            bits[seg] = False
        return pack_bool(bits)

    def allowed_ids(self, m: int) -> NDArray[np.int64]:
        """Sorted allowed token ids of mask ``m``."""
        kind = int(self.kinds[m])
        seg = self.data[int(self.offsets[m]) : int(self.offsets[m + 1])]
        if kind == KIND_ALLOW:
            return seg.astype(np.int64)
        if kind == KIND_REJECT:
            bits = np.ones(self.vocab_size, dtype=np.bool_)
            bits[seg] = False
            return np.flatnonzero(bits)
        dense = seg if kind == KIND_DENSE else self.dense_row(m)
        return np.flatnonzero(unpack_bool(dense, self.vocab_size))

    def count(self, m: int) -> int:
        kind = int(self.kinds[m])
        n = int(self.offsets[m + 1] - self.offsets[m])
        if kind == KIND_ALLOW:
            return n
        if kind == KIND_REJECT:
            return self.vocab_size - n
        return int(self.allowed_ids(m).shape[0])

    def depth(self, m: int) -> int:
        """Length of the delta chain behind mask ``m`` (0 for a self-contained mask)."""
        d = 0
        while int(self.kinds[m]) == KIND_DELTA:
            m = int(self.data[int(self.offsets[m])])
            d += 1
        return d


class MaskStoreBuilder:
    """Collects boolean masks, deduplicating identical ones.

    ``store``: masks already built, kept with their ids; what is added goes after them (a
    store of up to ``REUSE_LIMIT`` masks is also searched for a mask before it is added)."""

    def __init__(self, vocab_size: int, store: MaskStore | None = None) -> None:
        self.vocab_size = vocab_size
        self._index: dict[bytes, int] = {}
        self._kinds: list[int] = []
        self._data: list[NDArray[np.int32]] = []
        self._depth: list[int] = []
        self._flips: list[int] = []  # per mask: the flips of its delta chain (0: self-contained)
        # The last DELTA_WINDOW masks (delta bases): packed rows in a ring, oldest at _next.
        self._ring = np.zeros((DELTA_WINDOW, (bitmask_words(vocab_size) + 1) // 2), dtype=np.uint64)
        self._ring_id = [-1] * DELTA_WINDOW
        self._ring_pop = [0] * DELTA_WINDOW  # the allowed tokens of each
        self._next = 0
        self._store = store
        self._base_rows: dict[int, tuple[NDArray[np.uint64], int]] = {}  # a base's row, its count
        if store is not None:
            if store.vocab_size != vocab_size:
                raise ValueError(f"store vocab_size {store.vocab_size} != {vocab_size}")
            offsets = store.offsets.tolist()
            for m, kind in enumerate(store.kinds.tolist()):
                data = store.data[offsets[m] : offsets[m + 1]]
                self._kinds.append(kind)
                self._data.append(data)
                delta = kind == KIND_DELTA
                self._depth.append(self._depth[int(data[0])] + 1 if delta else 0)  # bases come first
                self._flips.append(self._flips[int(data[0])] + data.shape[0] - 1 if delta else 0)
            if store.num_masks <= REUSE_LIMIT:
                for m in range(store.num_masks - 1, -1, -1):  # (the first of equal masks wins)
                    self._index[store.dense_row(m).tobytes()] = m

    def _wide(self, row: NDArray[np.int32]) -> NDArray[np.uint64]:
        wide = np.zeros(self._ring.shape[1] * 2, dtype=np.int32)
        wide[: row.shape[0]] = row
        return wide.view(np.uint64)

    def add(self, mask: NDArray[np.bool_], base: int | None = None) -> int:
        """The id of ``mask``, added if new. ``base``: a mask of the store given at
        construction that is likely close to it, tried as a delta base before the last
        ``DELTA_WINDOW`` masks added."""
        if mask.shape != (self.vocab_size,):
            raise ValueError(f"mask width {mask.shape} != vocab_size {self.vocab_size}")
        return self._add_row(pack_bool(mask), base, mask)

    def add_row(self, row: NDArray[np.int32], base: int | None = None) -> int:
        """:meth:`add` of a mask given as its int32 bitmask row (:func:`pack_bool`'s layout,
        the bits past ``vocab_size`` clear): a mask that arrives packed is neither unpacked
        nor packed again."""
        words = bitmask_words(self.vocab_size)
        if row.dtype != np.int32 or row.shape != (words,):
            raise ValueError(f"bitmask row {row.dtype}{list(row.shape)} != int32[{words}]")
        tail = self.vocab_size % 32
        if tail and (int(row[-1]) & 0xFFFFFFFF) >> tail:
            raise ValueError(f"bitmask row has bits set past vocab_size {self.vocab_size}")
        return self._add_row(row, base, None)

    def _add_row(self, row: NDArray[np.int32], base: int | None,
                 mask: NDArray[np.bool_] | None) -> int:
        """:meth:`add` of the mask whose packed row is ``row`` (``mask`` itself where the
        caller has it)."""
        key = row.tobytes()
        m = self._index.get(key)
        if m is not None:
            return m
        words = row.shape[0]
        as64 = self._wide(row)
        n_allow = int(np.bitwise_count(as64).sum())
        n_reject = self.vocab_size - n_allow
        longest = words // LIST_FRACTION
        if n_allow <= min(n_reject, longest):
            kind, size = KIND_ALLOW, n_allow
        elif n_reject <= longest:
            kind, size = KIND_REJECT, n_reject
        else:
            kind, size = KIND_DENSE, words
        depth = 0
        chain = 0
        flips: NDArray[np.int32] | None = None
        # Delta form: masks of neighbouring states (counted runs) differ in a few tokens. A
        # candidate base whose count of allowed tokens differs by d differs in d bits at
        # least: where that bound already rules a delta on it out (larger than the mask's own
        # form, or over the chain's flips) and it is not equal, its bits are not compared.
        ids: list[int] = []
        pops: list[int] = []
        brow: NDArray[np.uint64] | None = None
        if base is not None and self._store is not None and self._depth[base] < MAX_DELTA_DEPTH:
            got = self._base_rows.get(base)
            if got is None:
                wide = self._wide(self._store.dense_row(base))
                got = self._base_rows[base] = (wide, int(np.bitwise_count(wide).sum()))
            brow, pop = got
            if self._may_base(base, pop, n_allow, size):
                ids.append(base)
                pops.append(pop)
            else:
                brow = None
        ring_ids, ring_pop = self._ring_id, self._ring_pop
        order = ((self._next + i) % DELTA_WINDOW for i in range(DELTA_WINDOW))  # oldest first
        slots = [sl for sl in order
                 if ring_ids[sl] >= 0 and self._depth[ring_ids[sl]] < MAX_DELTA_DEPTH
                 and self._may_base(ring_ids[sl], ring_pop[sl], n_allow, size)]
        if slots:
            ids += [ring_ids[sl] for sl in slots]
            pops += [ring_pop[sl] for sl in slots]
        if ids:
            # The bits two masks differ in are their counts less twice the bits they share,
            # and the bits they share lie in this mask's nonzero words: for a sparse mask,
            # only those words of each candidate are read.
            at = np.flatnonzero(as64)
            if at.shape[0] * SPARSE_WORDS <= as64.shape[0]:
                cols = self._ring[np.asarray(slots, dtype=np.int64)[:, None], at[None, :]]
                if brow is not None:
                    cols = np.concatenate([brow[None, at], cols])
                shared = np.bitwise_count(cols & as64[at]).sum(axis=1, dtype=np.int64)
                diffs = np.asarray(pops, dtype=np.int64) + n_allow - 2 * shared
            else:
                bases = self._ring[slots]
                if brow is not None:
                    bases = np.concatenate([brow[None, :], bases])
                diffs = np.bitwise_count(bases ^ as64[None, :]).sum(axis=1, dtype=np.int64)
            j = int(np.argmin(diffs))  # the first of the closest: the base given, else the oldest
            if int(diffs[j]) == 0:
                return ids[j]  # (a base the index does not hold: a large store's)
            # a delta must be smaller than the mask's own form and keep its chain's flips bounded
            chains = np.asarray([self._flips[i] for i in ids], dtype=np.int64)
            fits = (diffs + 1 < size) & (chains + diffs <= MAX_CHAIN_FLIPS)
            if fits.any():
                j = int(np.argmin(np.where(fits, diffs, np.iinfo(np.int64).max)))  # (the first of the closest)
                if brow is not None and j == 0:
                    near = brow
                else:
                    near = self._ring[slots[j - (brow is not None)]]
                flips = _set_bits(near ^ as64, int(diffs[j]), self.vocab_size)
                depth = self._depth[ids[j]] + 1
                chain = self._flips[ids[j]] + flips.shape[0]
        if flips is not None:
            kind, data = KIND_DELTA, np.concatenate([np.array([ids[j]], dtype=np.int32), flips])
        elif kind == KIND_ALLOW:
            data = _set_bits(as64, n_allow, self.vocab_size)
        elif kind == KIND_REJECT:
            bits = unpack_bool(row, self.vocab_size) if mask is None else mask
            data = np.flatnonzero(~bits).astype(np.int32)
        else:
            data = row
        m = len(self._kinds)
        self._index[key] = m
        self._kinds.append(kind)
        self._data.append(data)
        self._depth.append(depth)
        self._flips.append(chain)
        self._ring[self._next] = as64
        self._ring_id[self._next] = m
        self._ring_pop[self._next] = n_allow
        self._next = (self._next + 1) % DELTA_WINDOW
        return m

    def _may_base(self, m: int, count: int, n_allow: int, size: int) -> bool:
        """Whether mask ``m``, which allows ``count`` tokens, may be the base of a delta of a
        mask that allows ``n_allow`` and whose own form has ``size`` entries: equal to it, or
        not ruled out by the bits they differ in at least."""
        least = abs(count - n_allow)
        return not least or (least + 1 < size and self._flips[m] + least <= MAX_CHAIN_FLIPS)

    def build(self) -> MaskStore:
        offsets = np.zeros(len(self._data) + 1, dtype=np.int64)
        np.cumsum([d.shape[0] for d in self._data], out=offsets[1:])
        data = np.concatenate(self._data) if self._data else np.zeros(0, dtype=np.int32)
        return MaskStore(self.vocab_size, np.asarray(self._kinds, dtype=np.uint8), offsets, data.astype(np.int32))
