"""The lean runtime: lazy row decoding, memory-mapped loads, bitmask views, batch fills,
and the device path of ``apply_token_bitmask_inplace`` against the CPU reference."""

from __future__ import annotations

import gc
import json
import mmap
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

import maskc
from maskc.artifacts import torch as mt
from maskc.artifacts.artifact import Artifact
from maskc.artifacts.bitmask import write_ids
from maskc.artifacts.io import save_bytes
from maskc.artifacts.pushdown import _reachable_need
from maskc.compiler.maskstore import KIND_ALLOW, KIND_DELTA, KIND_DENSE, KIND_REJECT, MaskStoreBuilder, unpack_bool
from maskc.compiler.vocab import Vocabulary

SCHEMA = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 6}, "b": {"type": "integer"}},
          "required": ["a"]}
GBNF = 'root ::= "[" root "]" | "a"'


@pytest.fixture(scope="module")
def regular(toy_vocab: Vocabulary) -> Artifact:
    return maskc.compile_json_schema(SCHEMA, toy_vocab)


@pytest.fixture(scope="module")
def pushdown(toy_vocab: Vocabulary) -> Artifact:
    return maskc.compile_gbnf(GBNF, toy_vocab)


def _fresh(art: Artifact) -> Artifact:
    back = Artifact.from_bytes(art.to_bytes())
    back.tokenizer = art.tokenizer
    return back


# -- row decoding ------------------------------------------------------------------------------


def _random_store(vocab_size: int, seed: int) -> MaskStoreBuilder:
    """Masks of every stored form: short and long allow lists, reject lists, dense rows, and
    delta chains (neighbours differing in a few or in hundreds of ids)."""
    rng = np.random.default_rng(seed)
    b = MaskStoreBuilder(vocab_size)
    base = rng.random(vocab_size) < 0.5
    for _ in range(12):  # a walk of neighbours: delta chains
        base = base.copy()
        base[rng.choice(vocab_size, int(rng.integers(1, 400)), replace=False)] ^= True
        b.add(base)
    for n in (0, 1, 3, 300, 600):
        m = np.zeros(vocab_size, dtype=np.bool_)
        m[rng.choice(vocab_size, n, replace=False)] = True
        b.add(m)
        b.add(~m)
    b.add(np.ones(vocab_size, dtype=np.bool_))
    return b


@pytest.mark.parametrize("vocab_size", [20000, 20001, 20031])
def test_decoded_rows_equal_the_store_in_any_visit_order(toy_vocab: Vocabulary, vocab_size: int) -> None:
    wide = toy_vocab.with_overrides(vocab_size=vocab_size)
    template = maskc.compile_regex("a+", wide)
    store = _random_store(vocab_size, vocab_size).build()
    assert {KIND_ALLOW, KIND_REJECT, KIND_DENSE, KIND_DELTA} <= set(store.kinds.tolist())
    assert max(store.depth(m) for m in range(store.num_masks)) >= 3
    for order in (range(store.num_masks), reversed(range(store.num_masks))):
        art = _fresh(template)
        art.masks = store
        for m in order:
            row = art.mask_row_of(m)
            assert row.dtype == np.int32 and not row.flags.writeable
            assert np.array_equal(row, store.dense_row(m)), m
            assert not unpack_bool(row, 32 * row.shape[0])[vocab_size:].any()  # padding bits clear


def test_short_delta_chains_flip_a_repeated_id_once_per_link(toy_vocab: Vocabulary) -> None:
    vocab_size = 20000
    template = maskc.compile_regex("a+", toy_vocab.with_overrides(vocab_size=vocab_size))
    b = MaskStoreBuilder(vocab_size)
    rng = np.random.default_rng(3)
    row = rng.random(vocab_size) < 0.5
    chain = [row]
    for flips in ([5, 37], [5, 70], [5, 31, 32], [63]):  # id 5 flipped on three links
        row = row.copy()
        row[flips] ^= True
        chain.append(row)
    ids = [b.add(m) for m in chain]
    store = b.build()
    assert [int(store.kinds[i]) for i in ids[1:]] == [KIND_DELTA] * 4 and store.depth(ids[-1]) >= 3
    for order in (ids, ids[::-1]):  # chains decoded from the root, and from a cached row
        art = _fresh(template)
        art.masks = store
        for i, m in zip(order, [chain[ids.index(k)] for k in order]):
            assert np.array_equal(unpack_bool(art.mask_row_of(i), vocab_size), m), i


def _write(art: Artifact, state: int, out: np.ndarray) -> None:
    """What ``Matcher.fill_next_token_bitmask`` writes for ``state``, through its fill plan."""
    plan = art.fill_plan(state)
    if type(plan) is list:
        out.fill(0)
        write_ids(out, plan)
    else:
        out[:] = plan


def test_fill_plans_write_exactly_the_stored_rows(toy_vocab: Vocabulary) -> None:
    vocab_size = 20001
    wide = toy_vocab.with_overrides(vocab_size=vocab_size)
    template = maskc.compile_regex("a+", wide)
    b = _random_store(vocab_size, 7)
    for ids in ([31], [31, 63, 64, 95], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
                list(range(0, 17 * 40, 40)), [vocab_size - 1]):  # bit 31 set; 16 ids (short); 17 ids (a row)
        m = np.zeros(vocab_size, dtype=np.bool_)
        m[ids] = True
        b.add(m)
    store = b.build()
    art = _fresh(template)
    art.masks = store
    art.state_mask = np.arange(store.num_masks, dtype=np.int32)  # state s shows mask s
    kinds = {type(art.fill_plan(s)) for s in range(store.num_masks)}
    assert kinds == {list, np.ndarray}  # both paths are exercised
    out = np.full((vocab_size + 31) // 32, -1, dtype=np.int32)
    for visit in range(2):  # a first visit and a memoized one
        for s in range(store.num_masks):
            out.fill(-1)  # garbage left by an earlier step must not survive
            _write(art, s, out)
            assert np.array_equal(out, store.dense_row(s)), (visit, s)


def test_matcher_fills_equal_the_rows_on_every_visit(regular: Artifact) -> None:
    art = _fresh(regular)
    m = art.matcher()
    bm = maskc.allocate_bitmask_np(2, art.vocab_size)
    probe = _fresh(regular)
    short = [s for s in range(art.num_states) if type(probe.fill_plan(s)) is list]
    assert short
    # the rows from the store itself: reading art's rows would fill its caches between visits
    want = [probe.masks.dense_row(int(probe.state_mask[s])) for s in range(art.num_states)]
    for visit in range(3):  # a first visit (bit sets), the one that keeps the row, a row copy
        for s in range(art.num_states):
            m._stack = [s]
            bm.fill(-1)
            m.fill_next_token_bitmask(bm, 1)
            assert np.array_equal(bm[1], want[s]), (visit, s)
            assert (bm[0] == -1).all()
    assert all(type(art._plans[s]) is np.ndarray for s in short)  # revisited: one row copy


def test_mask_rows_match_the_allowed_tokens(regular: Artifact) -> None:
    art = _fresh(regular)
    for s in range(art.num_states):
        allowed = np.flatnonzero(unpack_bool(art.mask_row(s), art.vocab_size))
        assert np.array_equal(allowed, art.allowed_tokens(s))


# -- loading -----------------------------------------------------------------------------------


def test_load_maps_the_file_read_only(regular: Artifact, tmp_path: Path) -> None:
    path = regular.save(tmp_path / "a.safetensors")
    art = maskc.load_artifact(path, tokenizer=regular.tokenizer)
    for name, arr in art.tensors.items():
        assert not arr.flags.writeable, name
        base = arr
        while isinstance(base, np.ndarray) and base.base is not None:
            base = base.base
        if isinstance(base, memoryview):
            base = base.obj
        assert isinstance(base, mmap.mmap), name
    for s in range(art.num_states):
        assert np.array_equal(art.mask_row(s), regular.mask_row(s))


def _header_edit(raw: bytes, edit: dict[str, object]) -> bytes:
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    for key, value in edit.items():
        name, field = key.split("/")
        header[name][field] = value
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(len(text) + 8) % 8)
    return struct.pack("<Q", len(text)) + text + raw[8 + n :]


@pytest.mark.parametrize("edit", [
    {"mask.data/dtype": "X9"},
    {"mask.data/dtype": 4},
    {"mask.data/shape": [-1]},
    {"mask.data/shape": ["3"]},
    {"mask.state/data_offsets": [0, 4]},
    {"mask.state/data_offsets": ["0", "4"]},
    {"dfa.shape/shape": [3]},
])
def test_malformed_tensor_entries_are_refused(regular: Artifact, tmp_path: Path, edit: dict[str, object]) -> None:
    p = tmp_path / "bad.safetensors"
    p.write_bytes(_header_edit(regular.to_bytes(), edit))
    with pytest.raises(maskc.ArtifactCorrupt):
        maskc.load_artifact(p)


def test_tiny_and_missing_files_give_maskc_errors(tmp_path: Path) -> None:
    (tmp_path / "tiny.safetensors").write_bytes(b"\x01")
    with pytest.raises(maskc.ArtifactCorrupt, match="truncated"):
        maskc.load_artifact(tmp_path / "tiny.safetensors")
    with pytest.raises(maskc.ArtifactError, match="not found"):
        maskc.load_artifact(tmp_path / "absent.safetensors")


def test_saved_bytes_round_trip_through_the_parser(regular: Artifact) -> None:
    back = Artifact.from_bytes(save_bytes(regular.tensors, regular.metadata))
    assert set(back.tensors) == set(regular.tensors)
    for name, arr in regular.tensors.items():
        assert back.tensors[name].dtype == arr.dtype and np.array_equal(back.tensors[name], arr), name


# -- matchers ----------------------------------------------------------------------------------


def _walk_ids(art: Artifact, text: bytes) -> list[int]:
    """Greedy ids of ``text`` that the matcher takes one by one (longest token first)."""
    vocab = art.tokenizer
    assert vocab is not None
    m = art.matcher()
    ids: list[int] = []
    i = 0
    while i < len(text):
        for t in sorted(range(len(vocab.token_bytes)), key=lambda t: -len(vocab.token_bytes[t])):
            tb = vocab.token_bytes[t]
            if tb and text.startswith(tb, i) and m.accept_token(t):
                ids.append(t)
                i += len(tb)
                break
        else:
            raise AssertionError(f"no token continues {text[:i]!r}")
    return ids


@pytest.mark.parametrize(("which", "text"), [("regular", b'{"a":"ab","b":12}'), ("pushdown", b"[[a]]")])
def test_numpy_and_torch_fills_agree_every_step(request: pytest.FixtureRequest, which: str, text: bytes) -> None:
    art = _fresh(request.getfixturevalue(which))
    ids = _walk_ids(art, text)
    eos = art.eos_token_ids[0]
    a, b = art.matcher(), art.matcher()
    bm_np = maskc.allocate_bitmask_np(2, art.vocab_size)
    bm_t = maskc.allocate_token_bitmask(3, art.vocab_size)
    for t in [*ids, eos]:
        a.fill_next_token_bitmask(bm_np, 1)
        b.fill_next_token_bitmask(bm_t, 2)
        expect = np.flatnonzero(unpack_bool(bm_np[1], art.vocab_size))
        assert np.array_equal(expect, a.allowed_token_ids())
        assert np.array_equal(bm_t[2].numpy(), bm_np[1])
        assert (bm_t[:2] == -1).all()  # other rows untouched
        assert a.accept_token(t) and b.accept_token(t)
    a.fill_next_token_bitmask(bm_np, 0)
    b.fill_next_token_bitmask(bm_t, 0)
    assert not bm_np[0].any() and not bm_t[0].any()  # terminated: nothing allowed


def test_the_torch_view_follows_resizes_and_new_tensors(regular: Artifact) -> None:
    art = _fresh(regular)
    m = art.matcher()
    want = art.mask_row(0)
    for _ in range(3):
        bm = maskc.allocate_token_bitmask(1, art.vocab_size)
        m.fill_next_token_bitmask(bm, 0)
        assert np.array_equal(bm[0].numpy(), want)
        del bm
        gc.collect()
    bm = maskc.allocate_token_bitmask(1, art.vocab_size)
    m.fill_next_token_bitmask(bm, 0)
    bm.resize_(4, bm.shape[1])  # may move the memory: the cached view must not be reused
    bm.fill_(-1)
    m.fill_next_token_bitmask(bm, 3)
    assert np.array_equal(bm[3].numpy(), want) and (bm[:3] == -1).all()
    with pytest.raises(ValueError, match="index"):
        m.fill_next_token_bitmask(bm, 4)
    bm.resize_(1, bm.shape[1] + 1)
    with pytest.raises(ValueError, match="shape"):
        m.fill_next_token_bitmask(bm, 0)


def test_eos_through_the_shared_step_cache(regular: Artifact) -> None:
    art = _fresh(regular)
    eos = art.eos_token_ids[0]
    ids = _walk_ids(art, b'{"a":""}')
    first, second = art.matcher(), art.matcher()
    assert not first.accept_token(eos)  # not complete at the start
    for m in (first, second):
        for t in ids:
            assert m.accept_token(t)
        assert m.accept_token(eos) and m.is_terminated()
        assert not m.accept_token(eos) and not m.accept_token(ids[0])
        m.rollback(1)
        assert not m.is_terminated() and m.can_terminate()
    assert not second.accept_token(art.vocab_size - 1)  # padding id


def test_batch_fill_matches_single_fills(regular: Artifact, pushdown: Artifact) -> None:
    ra, pa = _fresh(regular), _fresh(pushdown)
    ms = [ra.matcher(), pa.matcher(), ra.matcher(), pa.matcher()]
    for t in _walk_ids(ra, b'{"a":"b'):
        assert ms[2].accept_token(t)
    for t in _walk_ids(pa, b"[["):
        assert ms[3].accept_token(t)
    one = maskc.allocate_bitmask_np(len(ms), ra.vocab_size)
    for i, m in enumerate(ms):
        m.fill_next_token_bitmask(one, i)
    for bm in (maskc.allocate_bitmask_np(4, ra.vocab_size), maskc.allocate_token_bitmask(4, ra.vocab_size)):
        maskc.fill_next_token_bitmasks(ms, bm)
        assert np.array_equal(np.asarray(bm), one)
    some = maskc.allocate_bitmask_np(6, ra.vocab_size)
    maskc.fill_next_token_bitmasks(ms[:2], some, indices=[5, 1])
    assert np.array_equal(some[5], one[0]) and np.array_equal(some[1], one[1])
    assert (some[[0, 2, 3, 4]] == -1).all()
    maskc.fill_next_token_bitmasks([], some)


def test_batch_fill_misuse(regular: Artifact, toy_vocab: Vocabulary) -> None:
    m = _fresh(regular).matcher()
    bm = maskc.allocate_bitmask_np(2, regular.vocab_size)
    with pytest.raises(ValueError, match="one bitmask row per matcher"):
        maskc.fill_next_token_bitmasks([m, m], bm, indices=[0])
    with pytest.raises(ValueError, match="distinct"):
        maskc.fill_next_token_bitmasks([m, m], bm, indices=[1, 1])
    with pytest.raises(ValueError, match=r"\[0, 2\)"):
        maskc.fill_next_token_bitmasks([m], bm, indices=[2])
    with pytest.raises(TypeError, match="maskc matchers"):
        maskc.fill_next_token_bitmasks([object()], bm)
    wide = maskc.compile_regex("a", toy_vocab.with_overrides(vocab_size=200)).matcher()
    with pytest.raises(ValueError, match="share one vocab_size"):
        maskc.fill_next_token_bitmasks([m, wide], bm)
    with pytest.raises(TypeError, match="int32"):
        maskc.fill_next_token_bitmasks([m], bm.astype(np.int64))


# -- pushdown runtime --------------------------------------------------------------------------


def _reachable_need_bfs(trans: np.ndarray, need: np.ndarray) -> list[int]:
    out = []
    for q in range(trans.shape[0]):
        seen, work = {q}, [q]
        while work:
            for t in trans[work.pop()].tolist():
                if t >= 0 and t not in seen:
                    seen.add(t)
                    work.append(t)
        out.append(max(int(need[s]) for s in seen))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_reachable_need_is_the_max_over_reachable_states(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, c = int(rng.integers(1, 40)), int(rng.integers(1, 6))
    trans = np.where(rng.random((n, c)) < 0.4, rng.integers(0, n, (n, c)), -1).astype(np.int32)
    need = rng.integers(0, 5, n).astype(np.int32)
    assert _reachable_need(trans, need).tolist() == _reachable_need_bfs(trans, need)


def test_pushdown_runtime_builds_per_state_tables_lazily(pushdown: Artifact) -> None:
    art = _fresh(pushdown)
    m = art.matcher()
    rt = art.runtime()
    assert rt._flat_need is None
    bm = maskc.allocate_bitmask_np(1, art.vocab_size)
    m.fill_next_token_bitmask(bm, 0)
    assert len(rt.trans) <= art.num_states
    pda = art.pda
    assert pda is not None
    assert rt.flat_need == _reachable_need_bfs(pda.dfa.trans, pda.need)


# -- applying bitmasks -------------------------------------------------------------------------


def _case(rows: int, vocab: int, width: int, dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, width, generator=g).to(dtype)
    bits = torch.rand(rows, (vocab + 31) // 32 * 32, generator=g) < 0.3
    bits[:, vocab:] = False
    packed = np.packbits(bits.numpy(), axis=1, bitorder="little").view("<i4").astype(np.int32)
    return logits, torch.from_numpy(packed)


@pytest.mark.parametrize(("vocab", "width"), [(64, 64), (100, 100), (100, 128), (100, 140), (33, 300)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("indices", [None, [3, 0]])
def test_device_path_equals_the_cpu_reference(vocab: int, width: int, dtype: torch.dtype,
                                              indices: list[int] | None) -> None:
    logits, bm = _case(4, vocab, width, dtype, vocab * width)
    want, got = logits.clone(), logits.clone()
    rows = list(range(4)) if indices is None else indices
    mt._apply_cpu(want, bm, indices, width)
    mt.apply_on_device(got, bm, indices, width)
    assert torch.equal(want, got)
    untouched = [i for i in range(4) if i not in rows]
    assert torch.equal(got[untouched], logits[untouched])
    for k, i in enumerate(rows):  # the reference itself: bit j of the row keeps column j
        keep = torch.from_numpy(unpack_bool(bm[k].numpy(), 32 * bm.shape[1]).copy())[:width]
        keep = torch.cat([keep, torch.zeros(max(0, width - keep.shape[0]), dtype=torch.bool)])
        assert torch.equal(got[i][keep], logits[i][keep])
        assert bool(torch.isneginf(got[i][~keep]).all())


def test_duplicate_indices_are_refused() -> None:
    logits, bm = _case(2, 64, 64, torch.float32, 0)
    with pytest.raises(ValueError, match="distinct"):
        maskc.apply_token_bitmask_inplace(logits, bm, [1, 1])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize(("vocab", "width"), [(100, 100), (100, 140), (128000, 128256), (129280, 129280)])
@pytest.mark.parametrize("indices", [None, [2, 0]])
def test_cuda_apply_equals_the_cpu_reference(vocab: int, width: int, indices: list[int] | None) -> None:
    for dtype in (torch.float32, torch.bfloat16):
        logits, bm = _case(3, vocab, width, dtype, vocab)
        want = logits.clone()
        maskc.apply_token_bitmask_inplace(want, bm, indices)
        on_gpu = logits.cuda()
        maskc.apply_token_bitmask_inplace(on_gpu, bm.cuda(), indices)
        assert torch.equal(on_gpu.cpu(), want)
        fallback = logits.cuda()
        mt.apply_on_device(fallback, bm.cuda(), indices, width)
        assert torch.equal(fallback.cpu(), want)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_batch_fill_into_a_cuda_bitmask(regular: Artifact) -> None:
    art = _fresh(regular)
    ms = [art.matcher() for _ in range(3)]
    assert ms[1].accept_token(_walk_ids(art, b"{")[0])
    host = maskc.allocate_bitmask_np(3, art.vocab_size)
    maskc.fill_next_token_bitmasks(ms, host)
    dev = maskc.allocate_token_bitmask(3, art.vocab_size).cuda()
    for _ in range(2):  # the staging buffer is reused
        maskc.fill_next_token_bitmasks(ms, dev)
        assert np.array_equal(dev.cpu().numpy(), host)
