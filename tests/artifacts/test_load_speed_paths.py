"""The quick paths of artifact loading give what the plain definitions give: the content hash
fed in few pieces, the header read by either JSON parser, shapes checked exactly, the
transition table decoded by flat index, token ids checked per mask."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from maskc.artifacts import format as fmt
from maskc.artifacts.io import parse_artifact_bytes, save_bytes
from maskc.compiler.errors import ArtifactCorrupt
from maskc.compiler.maskstore import KIND_ALLOW, KIND_DELTA, KIND_DENSE, KIND_REJECT, bitmask_words


def content_stream(tensors: Mapping[str, object], metadata: Mapping[str, str]) -> bytes:
    """The definition of the content stream, as one bytes object."""
    out = [b"maskc-artifact-content\0"]
    keys = sorted(k for k in metadata if k != "content_sha256")
    out.append(len(keys).to_bytes(8, "little"))
    for key in keys:
        for part in (key.encode(), metadata[key].encode("utf-8", "surrogatepass")):
            out += (len(part).to_bytes(8, "little"), part)
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name])
        out.append(f"{name}|{arr.dtype.str}|{arr.shape}|".encode())
        out.append(arr.reshape(-1).view(np.uint8).tobytes())
    return b"".join(out)


def plain_content_hash(tensors: Mapping[str, object], metadata: Mapping[str, str]) -> str:
    """The definition of the content hash: versions 3 and 4 hash the stream whole; 5 and 6
    hash the sha256 digests of its pieces of ``fmt.PIECE`` bytes, after a prefix and the
    stream's length."""
    stream = content_stream(tensors, metadata)
    if metadata.get("format_version") not in ("5", "6"):
        return hashlib.sha256(stream).hexdigest()
    top = hashlib.sha256(b"maskc-artifact-pieces\0" + len(stream).to_bytes(8, "little"))
    for i in range(0, max(1, len(stream)), fmt.PIECE):
        top.update(hashlib.sha256(stream[i : i + fmt.PIECE]).digest())
    return top.hexdigest()


def test_content_hash_matches_its_definition() -> None:
    rng = np.random.default_rng(3)
    tensors: dict[str, Any] = {
        "scalar": np.array(7, dtype=np.int32),
        "strided": np.arange(40, dtype=np.int64)[::3],
        "transposed": np.arange(24, dtype=np.int16).reshape(2, 3, 4).T,
        "bools": rng.random(33) < 0.5,
        "big_endian": np.arange(9, dtype=">i4"),
        "large": rng.integers(-5, 5, size=fmt._HASH_COPY_LIMIT).astype(np.int32),  # past the copy limit
        "at_limit": np.zeros(fmt._HASH_COPY_LIMIT, dtype=np.uint8),
        "empty": np.zeros((0, 3), dtype=np.uint8),
        "floats": np.linspace(0, 1, 5),
        "a_list": [1, 2, 3],
    }
    metadata = {"b": "", "a": "x\ud800y", "content_sha256": "ignored", "é": "ü" * 100}
    assert fmt.content_hash(tensors, metadata) == plain_content_hash(tensors, metadata)
    for name, value in tensors.items():
        one: dict[str, Any] = {name: value}
        assert fmt.content_hash(one, {}) == plain_content_hash(one, {})
    assert fmt.content_hash({}, {}) == plain_content_hash({}, {})


@pytest.mark.parametrize("piece", [1, 7, 64, 1 << 20])
@pytest.mark.parametrize("threads", [1, 2, 5])
def test_the_content_hash_in_pieces_matches_its_definition(piece: int, threads: int,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fmt, "PIECE", piece)
    rng = np.random.default_rng(piece)
    tensors: dict[str, Any] = {
        "large": rng.integers(-9, 9, size=fmt._HASH_COPY_LIMIT + 3).astype(np.int32),  # hashed in place
        "small": np.arange(5, dtype=np.uint8),
        "big_endian": np.arange(9, dtype=">i4"),
        "empty": np.zeros(0, dtype=np.int64),
    }
    for version in ("5", "6", "3", "4"):
        metadata = {"format_version": version, "a": "x" * 70, "content_sha256": "ignored"}
        digest = fmt.content_hash(tensors, metadata, threads=threads)
        assert digest == plain_content_hash(tensors, metadata)
        assert digest != fmt.content_hash(tensors, {**metadata, "a": "y" * 70}, threads=threads)
    empty = {"format_version": "5"}
    assert fmt.content_hash({}, empty, threads=threads) == plain_content_hash({}, empty)
    # the two definitions differ: a file's version cannot be swapped without a new hash
    assert plain_content_hash(tensors, {"format_version": "5"}) != plain_content_hash(tensors, {"format_version": "3"})


def framed(header: bytes, body: bytes = b"") -> bytes:
    return len(header).to_bytes(8, "little") + header + body


def test_a_header_only_the_standard_parser_reads_loads_the_same() -> None:
    # a lone surrogate (escaped, as json.dumps writes it) and NaN in a field nobody reads
    raw = save_bytes({"t": np.arange(3, dtype=np.int32)}, {"src": "a\ud800b"})
    tensors, meta = parse_artifact_bytes(raw, "x")
    assert meta == {"src": "a\ud800b"} and tensors["t"].tolist() == [0, 1, 2]
    header = b'{"t":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"note":NaN}}'
    tensors, meta = parse_artifact_bytes(framed(header, b"\x01\x02"), "x")
    assert meta == {} and tensors["t"].tolist() == [1, 2]
    with pytest.raises(ArtifactCorrupt):
        parse_artifact_bytes(framed(b'{"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}\xff}', b"\x00"), "x")


def test_shapes_of_any_rank_read_back() -> None:
    arrays: dict[str, NDArray[Any]] = {"m": np.arange(12, dtype=np.int32).reshape(3, 4), "e": np.zeros((2, 0, 3), dtype=np.uint8),
              "v": np.arange(4, dtype=np.uint16)}
    tensors, _ = parse_artifact_bytes(save_bytes(arrays, {}), "x")
    for name, arr in arrays.items():
        assert tensors[name].shape == arr.shape and tensors[name].dtype == arr.dtype
        assert np.array_equal(tensors[name], arr)
    header = b'{"s":{"dtype":"I16","shape":[],"data_offsets":[0,2]}}'
    tensors, _ = parse_artifact_bytes(framed(header, b"\x05\x00"), "x")
    assert tensors["s"].shape == () and int(tensors["s"]) == 5


@pytest.mark.parametrize("shape", [[1 << 32, 1 << 32], [0, 1 << 70], [1 << 70], [3, -1], [2.0], ["2"], [True]])
def test_a_shape_numpy_cannot_hold_or_that_does_not_fit_is_corrupt(shape: list[object]) -> None:
    entry = {"dtype": "U8", "shape": shape, "data_offsets": [0, 0]}
    with pytest.raises(ArtifactCorrupt):
        parse_artifact_bytes(framed(json.dumps({"t": entry}).encode()), "x")


def plain_decode(tensors: Mapping[str, NDArray[np.generic]]) -> NDArray[np.int32]:
    n, c = (int(v) for v in tensors["dfa.shape"])
    trans = np.empty((n, c), dtype=np.int32)
    offsets = tensors["dfa.exc_offsets"]
    for row in range(n):
        trans[row, :] = tensors["dfa.default"][row]
        for e in range(int(offsets[row]), int(offsets[row + 1])):
            trans[row, int(tensors["dfa.exc_class"][e])] = tensors["dfa.exc_target"][e]
    return trans


def test_decode_trans_matches_a_plain_loop() -> None:
    rng = np.random.default_rng(5)
    for _ in range(30):
        n, c = int(rng.integers(1, 12)), int(rng.integers(1, 9))
        trans = rng.integers(-1, n, size=(n, c)).astype(np.int32)
        tensors: dict[str, NDArray[np.generic]] = dict(fmt.encode_trans(trans))
        assert np.array_equal(fmt.sparse_trans(tensors, "x").decode(), trans)
        # a class repeated within a row (never written, but decodable): the later one wins
        row = int(rng.integers(n))
        k = int(tensors["dfa.exc_offsets"][row + 1])
        at = int(rng.integers(c))
        tensors["dfa.exc_class"] = np.insert(tensors["dfa.exc_class"], k, [at, at]).astype(np.uint8)
        tensors["dfa.exc_target"] = np.insert(tensors["dfa.exc_target"], k, [0, n - 1]).astype(np.int32)
        offsets: NDArray[Any] = tensors["dfa.exc_offsets"].copy()
        offsets[row + 1:] += 2
        tensors["dfa.exc_offsets"] = offsets
        decoded = fmt.sparse_trans(tensors, "x").decode()
        assert np.array_equal(decoded, plain_decode(tensors)) and decoded[row, at] == n - 1


def tables(kinds: list[int], rows: list[list[int]]) -> dict[str, NDArray[np.generic]]:
    """A one-state, one-class artifact's tables with these masks (state 0 uses mask 0)."""
    lens = [len(r) for r in rows]
    return {
        **fmt.encode_trans(np.zeros((1, 1), dtype=np.int32)),
        "dfa.byte_class": np.zeros(256, dtype=np.uint8),
        "dfa.accepting": np.ones(1, dtype=np.uint8),
        "mask.state": np.zeros(1, dtype=np.int32),
        "mask.kind": np.array(kinds, dtype=np.uint8),
        "mask.offsets": np.concatenate([[0], np.cumsum(lens)]).astype(np.int64),
        "mask.data": np.array([x for r in rows for x in r], dtype=np.int32),
    }


@pytest.mark.parametrize("with_dense", [True, False])  # without dense masks, every entry is checked in one pass
@pytest.mark.parametrize("vocab_size", [3, 64, 1000])  # fewer tokens than masks, and more
def test_token_ids_are_checked_in_every_sparse_and_delta_mask(vocab_size: int, with_dense: bool) -> None:
    words = bitmask_words(vocab_size)
    dense = [-1] * words  # bit words: any value
    kinds = [KIND_ALLOW, KIND_REJECT, KIND_ALLOW, KIND_DENSE if with_dense else KIND_ALLOW, KIND_DELTA, KIND_DELTA]
    rows = [[0, 2], [], [1], dense if with_dense else [2], [3, 0], [4, 1, 2]]  # a delta row starts with its base
    fmt.check_tables(tables(kinds, rows), vocab_size, "x")
    for mask, at in [(0, 1), (2, 0), (4, 1), (5, 2)] + ([] if with_dense else [(3, 0)]):
        for bad in (-1, vocab_size, (1 << 31) - 1):
            edited = [list(r) for r in rows]
            edited[mask][at] = bad
            with pytest.raises(ArtifactCorrupt) as e:
                fmt.check_tables(tables(kinds, edited), vocab_size, "x")
            if not with_dense and vocab_size >= len(kinds):
                assert "a token id out of range" in str(e.value)
    for base in (-1, 4, 5):  # a delta's base must be an earlier mask
        edited = [list(r) for r in rows]
        edited[4][0] = base
        with pytest.raises(ArtifactCorrupt):
            fmt.check_tables(tables(kinds, edited), vocab_size, "x")


def test_mask_offsets_must_start_at_zero() -> None:
    t = tables([KIND_ALLOW, KIND_ALLOW], [[0], [1]])
    t["mask.offsets"] = np.array([1, 1, 2], dtype=np.int64)
    with pytest.raises(ArtifactCorrupt):
        fmt.check_tables(t, 8, "x")
