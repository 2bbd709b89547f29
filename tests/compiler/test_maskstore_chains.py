"""The mask store's delta chains stay cheap to decode: a delta is kept only while the flips of
its whole chain (its own and its bases', down to a self-contained mask) stay within
``MAX_CHAIN_FLIPS``, and every mask reads back exactly as it was added."""

from __future__ import annotations

import numpy as np
import pytest

from maskc.compiler.maskstore import (KIND_ALLOW, KIND_DELTA, KIND_DENSE, KIND_REJECT, LIST_FRACTION, MAX_CHAIN_FLIPS,
                                      MAX_DELTA_DEPTH, MaskStore, MaskStoreBuilder, bitmask_words, unpack_bool)

V = 1 << 17  # 4,096 words: a dense row is 4,096 int32, the size a delta must beat


def _flip(mask: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    out = mask.copy()
    out[rng.choice(V, n, replace=False)] ^= True
    return out


def _chain_flips(store: MaskStore, m: int) -> int:
    total = 0
    while int(store.kinds[m]) == KIND_DELTA:
        seg = store.data[int(store.offsets[m]) : int(store.offsets[m + 1])]
        total += seg.shape[0] - 1
        m = int(seg[0])
    return total


def test_a_delta_that_would_make_its_chain_too_long_is_stored_whole() -> None:
    rng = np.random.default_rng(1)
    a = rng.random(V) < 0.5  # dense
    b = _flip(a, 1500, rng)  # a delta of a: 1,500 flips
    c = _flip(b, 1000, rng)  # 1,000 from b, but b's chain already holds 1,500
    d = _flip(a, 3000, rng)  # smaller than a dense row as a delta, but over the bound alone
    e = _flip(a, 400, rng)
    builder = MaskStoreBuilder(V)
    ids = [builder.add(x) for x in (a, b, c, d, e)]
    store = builder.build()
    kinds = [int(store.kinds[m]) for m in ids]
    assert kinds[1] == KIND_DELTA and _chain_flips(store, ids[1]) == 1500
    assert kinds[2] != KIND_DELTA  # (its closest base, b, would make a chain of 2,500 flips)
    assert kinds[3] != KIND_DELTA
    assert kinds[4] == KIND_DELTA and _chain_flips(store, ids[4]) == 400  # (a delta of a, the closest)
    for m, x in zip(ids, (a, b, c, d, e)):
        assert np.array_equal(unpack_bool(store.dense_row(m), V), x)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_runs_keep_every_chain_within_the_bounds_and_read_back_exactly(seed: int) -> None:
    rng = np.random.default_rng(seed)
    masks = [rng.random(V) < 0.3]
    for _ in range(60):  # a run of neighbours, each a few hundred flips from one before it
        base = masks[int(rng.integers(max(0, len(masks) - 5), len(masks)))]
        masks.append(_flip(base, int(rng.integers(1, 700)), rng))
    builder = MaskStoreBuilder(V)
    ids = [builder.add(x) for x in masks]
    store = builder.build()
    deltas = [m for m in set(ids) if int(store.kinds[m]) == KIND_DELTA]
    assert deltas  # (the bound leaves short chains as deltas)
    assert all(_chain_flips(store, m) <= MAX_CHAIN_FLIPS and store.depth(m) <= MAX_DELTA_DEPTH for m in deltas)
    for m, x in zip(ids, masks):
        assert np.array_equal(unpack_bool(store.dense_row(m), V), x)
    # a builder continuing a store counts the chains it was given
    more = MaskStoreBuilder(V, store)
    follow = _flip(masks[-1], 300, rng)
    m = more.add(follow, ids[-1])
    grown = more.build()
    assert np.array_equal(unpack_bool(grown.dense_row(m), V), follow)
    assert int(grown.kinds[m]) != KIND_DELTA or _chain_flips(grown, m) <= MAX_CHAIN_FLIPS


@pytest.mark.parametrize(("allowed", "kind"), [
    (1, KIND_ALLOW), (2048, KIND_ALLOW), (2049, KIND_DENSE), (V // 2, KIND_DENSE),
    (V - 2049, KIND_DENSE), (V - 2048, KIND_REJECT), (V - 1, KIND_REJECT),
])
def test_a_list_longer_than_half_a_row_is_stored_dense(allowed: int, kind: int) -> None:
    """Up to ``words / LIST_FRACTION`` ids (2,048 of a 4,096-word row) a mask is a list of
    allowed or rejected ids; past that, a dense row: a first visit reads it in place."""
    assert bitmask_words(V) // LIST_FRACTION == 2048
    rng = np.random.default_rng(allowed)
    mask = np.zeros(V, dtype=np.bool_)
    mask[rng.choice(V, allowed, replace=False)] = True
    builder = MaskStoreBuilder(V)
    m = builder.add(mask)
    store = builder.build()
    assert int(store.kinds[m]) == kind
    assert np.array_equal(unpack_bool(store.dense_row(m), V), mask)
