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
from safetensors.numpy import save as st_save

from maskc.compiler.errors import ArtifactCorrupt, ArtifactError

__all__ = ["write_atomic", "save_bytes", "read_artifact_file"]


def save_bytes(tensors: Mapping[str, NDArray[np.generic]], metadata: Mapping[str, str]) -> bytes:
    """Serialize deterministically: tensors and metadata in sorted key order."""
    ordered = {k: np.ascontiguousarray(tensors[k]) for k in sorted(tensors)}
    meta = {k: metadata[k] for k in sorted(metadata)}
    return st_save(ordered, metadata=meta)


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
