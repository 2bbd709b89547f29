"""The artifact format: tensor names and dtypes, metadata keys, encode and decode.

An artifact is a safetensors file. Header metadata is ``dict[str, str]`` (JSON values
canonical, keys sorted); tensors are the DFA tables and the mask store. ``content_sha256``
covers every tensor's bytes, so a tampered or truncated file is refused on load.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import numpy as np
import orjson
from numpy.typing import NDArray

from maskc.compiler.errors import ArtifactCorrupt, ArtifactVersionMismatch

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "TENSORS",
    "REQUIRED_METADATA",
    "content_hash",
    "canonical_json",
    "check_tables",
]

FORMAT = "maskc-artifact"
FORMAT_VERSION = "1"

# name -> (dtype, ndim)
TENSORS: dict[str, tuple[np.dtype[np.generic], int]] = {
    "dfa.trans": (np.dtype(np.int32), 2),
    "dfa.byte_class": (np.dtype(np.uint8), 1),
    "dfa.accepting": (np.dtype(np.uint8), 1),
    "mask.state": (np.dtype(np.int32), 1),
    "mask.kind": (np.dtype(np.uint8), 1),
    "mask.offsets": (np.dtype(np.int64), 1),
    "mask.data": (np.dtype(np.int32), 1),
}

REQUIRED_METADATA = (
    "format",
    "format_version",
    "compiler_version",
    "grammar_kind",
    "grammar_sha256",
    "grammar_source",
    "options",
    "tokenizer_sha256",
    "tokenizer_name",
    "vocab_size",
    "eos_token_ids",
    "not_enforced",
    "content_sha256",
)


def canonical_json(value: object) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def content_hash(tensors: Mapping[str, NDArray[np.generic]]) -> str:
    """sha256 over (name, dtype, shape, bytes) of every tensor, in name order."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name])
        h.update(f"{name}|{arr.dtype.str}|{arr.shape}|".encode())
        h.update(arr.tobytes())
    return h.hexdigest()


def check_metadata(meta: Mapping[str, str], where: str) -> None:
    missing = [k for k in REQUIRED_METADATA if k not in meta]
    if meta.get("format") != FORMAT:
        raise ArtifactCorrupt(f"{where} is not a maskc artifact (format={meta.get('format')!r})")
    if meta.get("format_version") != FORMAT_VERSION:
        raise ArtifactVersionMismatch(
            f"{where} has format version {meta.get('format_version')!r}; this maskc reads {FORMAT_VERSION!r}",
            hint="recompile the schema with this version of maskc",
        )
    if missing:
        raise ArtifactCorrupt(f"{where} lacks metadata {', '.join(missing)}")


def check_tables(tensors: Mapping[str, NDArray[np.generic]], vocab_size: int, where: str) -> None:
    """Structural checks that make every later index safe."""
    for name, (dtype, ndim) in TENSORS.items():
        arr = tensors.get(name)
        if arr is None:
            raise ArtifactCorrupt(f"{where} lacks tensor {name!r}")
        if arr.dtype != dtype or arr.ndim != ndim:
            raise ArtifactCorrupt(f"{where}: tensor {name!r} has {arr.dtype}[{arr.ndim}d], expected {dtype}[{ndim}d]")
    trans = tensors["dfa.trans"]
    n, c = trans.shape
    bad = (
        n == 0
        or tensors["dfa.byte_class"].shape != (256,)
        or int(tensors["dfa.byte_class"].max()) >= c
        or (trans.size and (int(trans.min()) < -1 or int(trans.max()) >= n))
        or tensors["dfa.accepting"].shape != (n,)
        or tensors["mask.state"].shape != (n,)
    )
    kinds, offsets, data = tensors["mask.kind"], tensors["mask.offsets"], tensors["mask.data"]
    m = kinds.shape[0]
    bad = bad or offsets.shape != (m + 1,) or (m and int(offsets[-1]) != data.shape[0])
    bad = bad or (n and (int(tensors["mask.state"].min()) < 0 or int(tensors["mask.state"].max()) >= m))
    bad = bad or bool(m and np.any(np.diff(offsets) < 0))
    if not bad and m:
        lens = np.diff(offsets)
        words = (vocab_size + 31) // 32
        dense = kinds == 2
        bad = bool(np.any(lens[dense] != words)) or int(kinds.max()) > 2
        elem_sparse = np.repeat(~dense, lens)
        ids = data[elem_sparse]
        bad = bad or bool(ids.size and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size))
    if bad:
        raise ArtifactCorrupt(f"{where}: inconsistent tables (vocab_size {vocab_size})")


def encode_meta_list(values: list[int]) -> str:
    return canonical_json(values)
