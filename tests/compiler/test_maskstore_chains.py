"""The mask store's delta chains stay cheap to decode: a delta is kept only while the flips of
its whole chain (its own and its bases', down to a self-contained mask) stay within
``MAX_CHAIN_FLIPS``, and every mask reads back exactly as it was added."""

from __future__ import annotations

import numpy as np
import pytest

from maskc.compiler.maskstore import (KIND_ALLOW, KIND_DELTA, KIND_DENSE, KIND_REJECT, LIST_FRACTION, MAX_CHAIN_FLIPS,
                                      MAX_DELTA_DEPTH, MaskStore, MaskStoreBuilder, bitmask_words,
                                      pack_bool, unpack_bool)

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


def _reference_store(masks: list[np.ndarray], width: int) -> tuple[list[int], MaskStore]:
    """The store as the rules define it, every candidate compared bit by bit: a mask seen
    before keeps its id; else the closest of the last 16 masks (the oldest of equals) with
    a chain that may grow is its delta base, where the delta is smaller than the mask's own
    form and the chain's flips stay bounded; else the smallest of its own forms."""
    kinds: list[int] = []
    data: list[np.ndarray] = []
    depth: list[int] = []
    chain: list[int] = []
    seen: dict[bytes, int] = {}
    words = bitmask_words(width)
    ids = []
    for x in masks:
        key = np.packbits(x).tobytes()
        if key in seen:
            ids.append(seen[key])
            continue
        n = int(x.sum())
        if n <= min(width - n, words // LIST_FRACTION):
            kind, own = KIND_ALLOW, np.flatnonzero(x)
        elif width - n <= words // LIST_FRACTION:
            kind, own = KIND_REJECT, np.flatnonzero(~x)
        else:
            kind, own = KIND_DENSE, np.zeros(words)
        best = None
        for m in range(max(0, len(kinds) - 16), len(kinds)):
            if depth[m] >= MAX_DELTA_DEPTH:
                continue
            flips = np.flatnonzero(masks[ids.index(m)] != x)
            fits = flips.shape[0] + 1 < own.shape[0] and chain[m] + flips.shape[0] <= MAX_CHAIN_FLIPS
            if fits and (best is None or flips.shape[0] < best[1].shape[0]):
                best = (m, flips)
        m = len(kinds)
        if best is not None:
            kinds.append(KIND_DELTA)
            data.append(np.concatenate([[best[0]], best[1]]).astype(np.int32))
            depth.append(depth[best[0]] + 1)
            chain.append(chain[best[0]] + best[1].shape[0])
        else:
            kinds.append(kind)
            data.append(own.astype(np.int32) if kind != KIND_DENSE else np.zeros(0, dtype=np.int32))
            depth.append(0)
            chain.append(0)
        seen[key] = m
        ids.append(m)
    offsets = np.zeros(len(data) + 1, dtype=np.int64)
    np.cumsum([d.shape[0] for d in data], out=offsets[1:])
    return ids, MaskStore(width, np.asarray(kinds, dtype=np.uint8), offsets,
                          np.concatenate(data) if data else np.zeros(0, dtype=np.int32))


@pytest.mark.parametrize(("seed", "width"), [(0, V), (1, V - 37), (2, 129_280), (3, 1000)])
def test_the_builder_picks_the_delta_bases_that_comparing_every_bit_picks(seed: int,
                                                                         width: int) -> None:
    """Candidates ruled out by their counts alone and sparse masks compared at their nonzero
    words: the store is the one that comparing every candidate bit by bit builds, for sparse,
    dense and nearly full masks, deltas of a few flips and of many, widths off a word."""
    rng = np.random.default_rng(seed)
    masks: list[np.ndarray] = []
    for i in range(120):
        shape = i % 4
        if masks and rng.random() < 0.6:
            base = masks[int(rng.integers(max(0, len(masks) - 20), len(masks)))]
            step = int(rng.choice([0, 1, 3, 40, 70, 300, 2500]))
            x = base.copy()
            if step:
                x[rng.choice(width, min(step, width), replace=False)] ^= True
        elif shape == 0:
            x = np.zeros(width, dtype=np.bool_)
            x[rng.choice(width, int(rng.integers(1, 30)), replace=False)] = True
        elif shape == 1:
            x = rng.random(width) < 0.01
        elif shape == 2:
            x = rng.random(width) < 0.5
        else:
            x = rng.random(width) < 0.995
        masks.append(x)
    builder = MaskStoreBuilder(width)
    ids = [builder.add(x) for x in masks]
    got = builder.build()
    want_ids, want = _reference_store(masks, width)
    assert ids == want_ids
    assert got.kinds.tolist() == want.kinds.tolist()
    assert int(np.count_nonzero(got.kinds == KIND_DELTA)) > 5
    for m in range(got.num_masks):
        seg = got.data[int(got.offsets[m]) : int(got.offsets[m + 1])]
        ref = want.data[int(want.offsets[m]) : int(want.offsets[m + 1])]
        if int(got.kinds[m]) != KIND_DENSE:
            assert seg.tolist() == ref.tolist()
    for m, x in zip(ids, masks):
        assert np.array_equal(unpack_bool(got.dense_row(m), width), x)


def test_a_sparse_mask_given_a_base_of_the_store_is_its_delta() -> None:
    """A builder that continues a store compares a sparse mask with the base it is given at
    the mask's nonzero words (the base's count telling the rest), beside the masks it added."""
    rng = np.random.default_rng(7)
    first = np.zeros(V, dtype=np.bool_)
    first[rng.choice(V, 200, replace=False)] = True
    other = np.zeros(V, dtype=np.bool_)
    other[rng.choice(V, 150, replace=False)] = True
    builder = MaskStoreBuilder(V)
    a, b = builder.add(first), builder.add(other)
    more = MaskStoreBuilder(V, builder.build())
    near = first.copy()
    near[np.flatnonzero(first)[:3]] = False  # 3 flips from ``first``, far from ``other``
    near[rng.choice(np.flatnonzero(~first), 2, replace=False)] = True
    m = more.add(near, a)
    grown = more.build()
    seg = grown.data[int(grown.offsets[m]) : int(grown.offsets[m + 1])]
    assert int(grown.kinds[m]) == KIND_DELTA and int(seg[0]) == a and seg.shape[0] == 6
    far = other.copy()
    far[np.flatnonzero(other)[:1]] = False  # 1 flip from ``other``: closer than ``near`` is
    m2 = more.add(far, b)
    grown2 = more.build()
    seg2 = grown2.data[int(grown2.offsets[m2]) : int(grown2.offsets[m2 + 1])]
    assert int(grown2.kinds[m2]) == KIND_DELTA and int(seg2[0]) == b and seg2.shape[0] == 2
    assert more.add(other.copy(), a) == b  # an equal mask of the store keeps its id
    for mm, x in ((m, near), (m2, far)):
        assert np.array_equal(unpack_bool(grown2.dense_row(mm), V), x)


@pytest.mark.parametrize("width", [V, 1003, 129_281])
def test_a_mask_given_as_its_row_is_added_as_the_mask_is(width: int) -> None:
    """``add_row`` (the int32 bitmask row, as the pushdown alignment and the stack contexts
    hold their masks) builds the store ``add`` builds from the same masks, whatever the
    width's last word holds; a row with bits past the vocabulary is refused."""
    rng = np.random.default_rng(width)
    masks = []
    for density in (0.0005, 0.01, 0.5, 0.99, 0.9995):
        x = rng.random(width) < density
        masks += [x, _flip_some(x, 3, rng), x.copy()]
    plain, packed = MaskStoreBuilder(width), MaskStoreBuilder(width)
    ids = [plain.add(x) for x in masks]
    assert [packed.add_row(pack_bool(x)) for x in masks] == ids
    a, b = plain.build(), packed.build()
    assert a.kinds.tolist() == b.kinds.tolist() and a.offsets.tolist() == b.offsets.tolist()
    assert np.array_equal(a.data, b.data)
    assert {int(k) for k in a.kinds} >= {KIND_ALLOW, KIND_REJECT, KIND_DENSE, KIND_DELTA}
    with pytest.raises(ValueError, match="bitmask row"):
        packed.add_row(pack_bool(masks[0])[:-1])
    if width % 32:
        over = pack_bool(masks[0])
        over[-1] |= np.int32(-(1 << 31))  # the last word's top bit: past the vocabulary
        with pytest.raises(ValueError, match="past vocab_size"):
            packed.add_row(over)


def _flip_some(mask: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    out = mask.copy()
    out[rng.choice(mask.shape[0], n, replace=False)] ^= True
    return out
