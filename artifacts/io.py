"""Reading and writing artifact files: atomic writes, safe reads, clear errors.

Writes go to a temporary file in the target directory and are renamed into place, so a
crash or a full disk never leaves half an artifact under the final name.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from safetensors.numpy import load as st_load

from maskc.compiler.errors import ArtifactCorrupt, ArtifactError

__all__ = ["write_atomic", "save_bytes", "read_artifact_file"]


_DTYPES = {
    np.dtype(np.int32): "I32", np.dtype(np.int64): "I64", np.dtype(np.uint8): "U8",
    np.dtype(np.bool_): "BOOL", np.dtype(np.float32): "F32", np.dtype(np.int8): "I8",
    np.dtype(np.uint32): "U32", np.dtype(np.int16): "I16", np.dtype(np.uint16): "U16",
}


def save_bytes(tensors: Mapping[str, NDArray[np.generic]], metadata: Mapping[str, str]) -> bytes:
    """Serialize in the safetensors layout, deterministically.

    The header is written here rather than by the safetensors library, whose metadata
    order varies between processes: keys are sorted, tensors laid out by (alignment, name),
    so the same inputs always give the same bytes.
    """
    import json
    import struct

    arrays = {k: np.ascontiguousarray(v) for k, v in tensors.items()}
    order = sorted(arrays, key=lambda k: (-arrays[k].dtype.itemsize, k))
    header: dict[str, object] = {"__metadata__": {k: metadata[k] for k in sorted(metadata)}}
    offset = 0
    for k in order:
        a = arrays[k]
        if a.dtype not in _DTYPES:
            raise TypeError(f"tensor {k!r} has unsupported dtype {a.dtype}")
        header[k] = {"dtype": _DTYPES[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":"), sort_keys=False, ensure_ascii=True).encode()
    text += b" " * (-(len(text) + 8) % 8)
    body = b"".join(arrays[k].astype(arrays[k].dtype.newbyteorder("<"), copy=False).tobytes() for k in order)
    return struct.pack("<Q", len(text)) + text + body


def write_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file and ``os.replace``.

    Raises:
        ArtifactError: the directory is not writable or the disk is full; nothing is left behind.
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as e:
        raise ArtifactError(f"cannot write {target}: {e.strerror or e}") from e
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        hint = "free some disk space and retry" if e.errno == errno.ENOSPC else None
        raise ArtifactError(f"cannot write {target}: {e.strerror or e}", hint=hint) from e
    return target


def read_artifact_file(path: str | os.PathLike[str]) -> tuple[dict[str, NDArray[np.generic]], dict[str, str]]:
    """Read tensors and metadata; any malformation becomes :class:`ArtifactCorrupt`."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise ArtifactError(f"artifact not found: {p}") from None
    except OSError as e:
        raise ArtifactError(f"cannot read artifact {p}: {e.strerror or e}") from e
    return parse_artifact_bytes(raw, str(p))


def parse_artifact_bytes(raw: bytes, where: str) -> tuple[dict[str, NDArray[np.generic]], dict[str, str]]:
    import json
    import struct

    if len(raw) < 8:
        raise ArtifactCorrupt(f"{where} is truncated or not a safetensors file ({len(raw)} bytes)")
    (hlen,) = struct.unpack("<Q", raw[:8])
    if hlen > len(raw) - 8:
        raise ArtifactCorrupt(f"{where} is truncated: header claims {hlen} bytes, file has {len(raw) - 8}")
    try:
        header = json.loads(raw[8 : 8 + hlen])
        metadata = header.get("__metadata__") or {}
        end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ArtifactCorrupt(f"{where} has a malformed header") from e
    if 8 + hlen + end != len(raw):
        raise ArtifactCorrupt(
            f"{where} is truncated or has trailing bytes: expected {8 + hlen + end} bytes, found {len(raw)}"
        )
    try:
        tensors = st_load(raw)
    except Exception as e:  # safetensors raises its own SafetensorError
        raise ArtifactCorrupt(f"{where} is not a readable safetensors file: {e}") from e
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise ArtifactCorrupt(f"{where} has malformed metadata")
    return dict(tensors), dict(metadata)
