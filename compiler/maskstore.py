"""Deduplicated token masks, each stored in the cheapest of three forms.

A mask is a set of allowed token ids over the logits width ``V``. Per distinct mask the
store keeps whichever is smallest: the allowed ids, the rejected ids, or a dense bitset of
``ceil(V/32)`` int32 words (XGrammar's layout: bit ``i % 32`` of word ``i // 32``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["MaskStore", "MaskStoreBuilder", "append_masks", "KIND_ALLOW", "KIND_REJECT", "KIND_DENSE", "KIND_DELTA", "bitmask_words", "pack_bool", "unpack_bool"]

KIND_ALLOW = 0
KIND_REJECT = 1
KIND_DENSE = 2
KIND_DELTA = 3  # data = [base mask id, token ids whose bit differs from the base]
MAX_DELTA_DEPTH = 8
DELTA_WINDOW = 16


def bitmask_words(vocab_size: int) -> int:
    """Number of int32 words in one bitmask row: ``ceil(vocab_size / 32)``."""
    return (vocab_size + 31) // 32


def unpack_bool(row: NDArray[np.generic], vocab_size: int) -> NDArray[np.bool_]:
    """An int32 bitmask row (or its uint32/uint64 view) -> boolean mask of width ``vocab_size``."""
    bits = np.unpackbits(np.ascontiguousarray(row).view(np.uint8), bitorder="little")
    return bits[:vocab_size].astype(np.bool_)


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

    def __post_init__(self) -> None:
        m = self.kinds.shape[0]
        if self.offsets.shape != (m + 1,) or (m and int(self.offsets[-1]) != self.data.shape[0]):
            raise ValueError("mask store offsets do not match its data")
        if m and int(self.kinds.max()) > KIND_DELTA:
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
    """Collects boolean masks, deduplicating identical ones."""

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size
        self._index: dict[bytes, int] = {}
        self._kinds: list[int] = []
        self._data: list[NDArray[np.int32]] = []
        self._depth: list[int] = []
        # The last DELTA_WINDOW masks (delta bases): packed rows in a ring, oldest at _next.
        self._ring = np.zeros((DELTA_WINDOW, (bitmask_words(vocab_size) + 1) // 2), dtype=np.uint64)
        self._ring_id = [-1] * DELTA_WINDOW
        self._next = 0

    def add(self, mask: NDArray[np.bool_]) -> int:
        if mask.shape != (self.vocab_size,):
            raise ValueError(f"mask width {mask.shape} != vocab_size {self.vocab_size}")
        row = pack_bool(mask)
        key = row.tobytes()
        m = self._index.get(key)
        if m is not None:
            return m
        words = row.shape[0]
        n_allow = int(np.count_nonzero(mask))
        n_reject = self.vocab_size - n_allow
        if n_allow <= min(n_reject, words):
            kind, data = KIND_ALLOW, np.flatnonzero(mask).astype(np.int32)
        elif n_reject <= words:
            kind, data = KIND_REJECT, np.flatnonzero(~mask).astype(np.int32)
        else:
            kind, data = KIND_DENSE, row
        depth = 0
        # Delta form: masks of neighbouring states (counted runs) differ in a few tokens.
        wide = np.zeros(self._ring.shape[1] * 2, dtype=np.int32)
        wide[:words] = row
        as64 = wide.view(np.uint64)
        slots = [(self._next + i) % DELTA_WINDOW for i in range(DELTA_WINDOW)]  # oldest first
        slots = [sl for sl in slots if self._ring_id[sl] >= 0 and self._depth[self._ring_id[sl]] < MAX_DELTA_DEPTH]
        if slots:
            diffs = np.bitwise_count(self._ring ^ as64[None, :]).sum(axis=1, dtype=np.int64)[slots]
            j = int(np.argmin(diffs))  # the oldest of the closest
            if int(diffs[j]) + 1 < data.shape[0]:
                base = self._ring_id[slots[j]]
                flips = np.flatnonzero(unpack_bool(self._ring[slots[j]], self.vocab_size) != mask).astype(np.int32)
                kind, data = KIND_DELTA, np.concatenate([np.array([base], dtype=np.int32), flips])
                depth = self._depth[base] + 1
        m = len(self._kinds)
        self._index[key] = m
        self._kinds.append(kind)
        self._data.append(data)
        self._depth.append(depth)
        self._ring[self._next] = as64
        self._ring_id[self._next] = m
        self._next = (self._next + 1) % DELTA_WINDOW
        return m

    def build(self) -> MaskStore:
        offsets = np.zeros(len(self._data) + 1, dtype=np.int64)
        np.cumsum([d.shape[0] for d in self._data], out=offsets[1:])
        data = np.concatenate(self._data) if self._data else np.zeros(0, dtype=np.int32)
        return MaskStore(self.vocab_size, np.asarray(self._kinds, dtype=np.uint8), offsets, data.astype(np.int32))


_REUSE_LIMIT = 4096
"""Stores of up to this many masks are searched for a row before it is appended."""


def _self_contained(row: NDArray[np.int32], vocab_size: int) -> tuple[int, NDArray[np.int32]]:
    """The smallest of the three self-contained forms of a packed row: (kind, data)."""
    mask = unpack_bool(row, vocab_size)
    n_allow = int(np.count_nonzero(mask))
    words = row.shape[0]
    if n_allow <= min(vocab_size - n_allow, words):
        return KIND_ALLOW, np.flatnonzero(mask).astype(np.int32)
    if vocab_size - n_allow <= words:
        return KIND_REJECT, np.flatnonzero(~mask).astype(np.int32)
    return KIND_DENSE, row.astype(np.int32)


def append_masks(store: MaskStore, rows: list[tuple[NDArray[np.int32], int]]) -> tuple[MaskStore, list[int]]:
    """``store`` with more masks after its own (whose ids do not change), and the id of each.

    ``rows``: an int32 bitmask row per mask and a base, a mask of the store that is likely
    close to it. A row equal to a mask of the store (of up to ``_REUSE_LIMIT`` masks) or to
    a row given before is not stored again; another is stored in the smallest form: self-
    contained, or the delta of its base or of one of the last ``DELTA_WINDOW`` masks
    appended, within ``MAX_DELTA_DEPTH``.
    """
    kinds = store.kinds.tolist()
    datas: list[NDArray[np.int32]] = []
    depth_of: dict[int, int] = {}
    seen: dict[bytes, int] = {}
    base_rows: dict[int, NDArray[np.int32]] = {}
    recent: list[tuple[int, NDArray[np.int32]]] = []  # the last masks appended (delta bases)
    ids: list[int] = []
    existing: dict[bytes, int] | None = None  # the store's own rows (built on first need)

    def depth(m: int) -> int:
        got = depth_of.get(m)
        if got is None:
            got = depth_of[m] = store.depth(m)
        return got

    for given, base in rows:
        row = given.view(np.int32)
        key = row.tobytes()
        m = seen.get(key)
        if m is None:
            brow = base_rows.get(base)
            if brow is None:
                brow = base_rows[base] = store.dense_row(base)
            if np.array_equal(brow, row):
                m = base
            elif existing is not None or store.num_masks <= _REUSE_LIMIT:
                if existing is None:
                    existing = {store.dense_row(k).tobytes(): k for k in range(store.num_masks - 1, -1, -1)}
                m = existing.get(key)
            if m is None:
                kind, data = _self_contained(row, store.vocab_size)
                bases = [(b, r) for b, r in [(base, brow), *recent] if depth(b) < MAX_DELTA_DEPTH]
                if bases:
                    diffs = [int(np.bitwise_count(r.view(np.uint32) ^ row.view(np.uint32)).sum()) for _, r in bases]
                    j = int(np.argmin(diffs))
                    if diffs[j] + 1 < data.shape[0]:
                        b, r = bases[j]
                        diff = (row.view(np.uint32) ^ r.view(np.uint32)).view(np.uint8)
                        flips = np.flatnonzero(np.unpackbits(diff, bitorder="little")).astype(np.int32)
                        kind, data = KIND_DELTA, np.concatenate([np.array([b], dtype=np.int32), flips])
                m = len(kinds)
                kinds.append(kind)
                datas.append(data)
                depth_of[m] = depth(int(data[0])) + 1 if kind == KIND_DELTA else 0
                recent.append((m, row))
                if len(recent) > DELTA_WINDOW:
                    del recent[0]
            seen[key] = m
        ids.append(m)
    if not datas:
        return store, ids
    offsets = np.concatenate([store.offsets, store.offsets[-1] + np.cumsum([d.shape[0] for d in datas])])
    data = np.concatenate([store.data, *datas]).astype(np.int32)
    return MaskStore(store.vocab_size, np.asarray(kinds, dtype=np.uint8), offsets.astype(np.int64), data), ids
