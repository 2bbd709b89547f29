"""Reading and writing artifact files: atomic writes, safe reads, clear errors.

Writes go to a temporary file in the target directory and are renamed into place, so a
crash or a full disk never leaves half an artifact under the final name; files get the
mode the umask gives any new file; a killed writer's temporary is swept by the next one.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import mmap
import os
import re
import secrets
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from numpy.typing import NDArray

from maskc.compiler.errors import ArtifactCorrupt, ArtifactError

__all__ = ["write_atomic", "save_bytes", "read_artifact_file", "map_artifact_file", "verified_file",
           "remember_verified", "forget_verified", "sweep_stale_temporaries"]


_DTYPES: dict[np.dtype[np.generic], str] = {
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


_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
_TEMP = re.compile(r"\..+\.([0-9a-f]{8})-([0-9]+)\.[0-9a-f]{16}\.tmp")
_swept: set[Path] = set()
_no_tmpfile: set[Path] = set()
_UNSUPPORTED = frozenset({errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT, errno.EXDEV, errno.EPERM,
                          errno.ENOSYS})


def _temp_name(target: Path) -> Path:
    """``.NAME.HOST-PID.RANDOM.tmp`` next to ``target``: whose it is, so a dead writer's is swept."""
    return target.with_name(f".{target.name}.{_HOST}-{os.getpid()}.{secrets.token_hex(8)}.tmp")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def sweep_stale_temporaries(folder: Path) -> int:
    """Remove the temporaries that writers on this host left when killed; returns how many.

    Only on POSIX (where signal 0 probes a pid) and only names this module makes whose
    writer, on this host, is gone.
    """
    if os.name != "posix":
        return 0
    n = 0
    try:
        names = [e.name for e in os.scandir(folder) if e.name.endswith(".tmp")]
    except OSError:
        return 0
    for name in names:
        m = _TEMP.fullmatch(name)
        if m is None or m.group(1) != _HOST or int(m.group(2)) == os.getpid() or _alive(int(m.group(2))):
            continue
        try:
            os.unlink(folder / name)
            n += 1
        except OSError:
            pass
    return n


def _write_fd(fd: int, data: bytes) -> None:
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _write_anonymous(target: Path, data: bytes, tmp: Path) -> bool:
    """Linux: write into an unnamed file (``O_TMPFILE``), then give it the temporary name.

    A writer killed while writing leaves nothing behind; the name exists only between the
    link and the rename. False when the file system or kernel cannot (the caller falls back).
    """
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag or target.parent in _no_tmpfile or not Path("/proc/self/fd").is_dir():
        return False
    try:
        fd = os.open(target.parent, flag | os.O_WRONLY, 0o666)
    except OSError as e:
        if e.errno in _UNSUPPORTED:
            _no_tmpfile.add(target.parent)
            return False
        raise
    try:
        with os.fdopen(fd, "wb", closefd=False) as f:
            f.write(data)
            f.flush()
            os.fsync(fd)
        os.link(f"/proc/self/fd/{fd}", tmp)
    except OSError as e:
        if e.errno not in _UNSUPPORTED:
            raise
        _no_tmpfile.add(target.parent)  # e.g. overlayfs refuses the link with EXDEV
        return False
    finally:
        os.close(fd)
    return True


def _write_named(data: bytes, tmp: Path) -> None:
    # mode 0o666: the kernel applies the umask, as for any file a program creates
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    _write_fd(fd, data)


def _sync_dir(folder: Path) -> None:
    if os.name != "posix":
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file and ``os.replace``.

    The file gets the mode the umask gives any new file (``0o666 & ~umask``: 0644 under
    umask 022), so a serving process running as another user can read it. Readers see the
    old file or the new one, never a part; a killed writer leaves no file under the final
    name, and its temporary (if any) is swept by the next write into the folder.

    Raises:
        ArtifactError: the directory is not writable or the disk is full; nothing is left behind.
    """
    target = Path(path)
    folder = target.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ArtifactError(f"cannot write {target}: {e.strerror or e}") from e
    if folder not in _swept:
        _swept.add(folder)
        sweep_stale_temporaries(folder)
    tmp = _temp_name(target)
    try:
        if not _write_anonymous(target, data, tmp):
            _write_named(data, tmp)
        os.replace(tmp, target)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        hint = "free some disk space and retry" if e.errno == errno.ENOSPC else None
        raise ArtifactError(f"cannot write {target}: {e.strerror or e}", hint=hint) from e
    _sync_dir(folder)
    return target


_NP_DTYPES: dict[str, np.dtype[np.generic]] = {code: dtype for dtype, code in _DTYPES.items()}
_LE_DTYPES: dict[str, np.dtype[np.generic]] = {code: dtype.newbyteorder("<") for code, dtype in _NP_DTYPES.items()}
_U8 = _LE_DTYPES["U8"]


def read_artifact_file(path: str | os.PathLike[str]) -> tuple[dict[str, NDArray[np.generic]], dict[str, str]]:
    """Memory-map an artifact file; tensors and metadata, any malformation an :class:`ArtifactCorrupt`.

    The tensors are read-only views of the mapping (nothing is copied; processes that load
    the same file share its pages). maskc replaces files by rename, never in place, so a
    mapped file stays whole; a file truncated in place by another program while mapped is
    outside this contract (the operating system then faults on access).
    """
    tensors, meta, _ = map_artifact_file(path)
    return tensors, meta


FileIdentity = tuple[int, int, int, int, int]
"""(device, inode, size, mtime ns, ctime ns) of a file: any write or replacement changes it."""


def _identity(st: os.stat_result) -> FileIdentity:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def map_artifact_file(
    path: str | os.PathLike[str],
) -> tuple[dict[str, NDArray[np.generic]], dict[str, str], FileIdentity]:
    """:func:`read_artifact_file`, plus the identity of the file that was mapped (taken from
    the open descriptor, so it names exactly the bytes read)."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            st = os.fstat(f.fileno())
            if st.st_size < 8:
                buf: bytes | mmap.mmap = f.read()
            else:
                buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise ArtifactError(f"artifact not found: {p}") from None
    except (OSError, ValueError) as e:
        raise ArtifactError(f"cannot read artifact {p}: {getattr(e, 'strerror', None) or e}") from e
    tensors, meta = parse_artifact_bytes(buf, str(p))
    return tensors, meta, _identity(st)


# -- verified files ------------------------------------------------------------------------------
# A file verified once (content hash, metadata, tables) need not be hashed again while it is
# unchanged. "Unchanged" is its identity: a rename over it changes the inode, a write in place
# the mtime and ctime (which no program can set back). File system clocks are coarse, so a
# write in the same tick as the verification could keep the timestamps: an identity is
# remembered only once the file has been left alone for SETTLE_NS before it was verified.

SETTLE_NS = 2_000_000_000
VERIFIED_LIMIT = 64
_verified: dict[FileIdentity, Any] = {}


def remember_verified(identity: FileIdentity, value: Any) -> bool:
    """Remember what verifying the file of ``identity`` produced; False (nothing kept) if the
    file changed too recently to trust its timestamps."""
    if time.time_ns() - max(identity[3], identity[4]) < SETTLE_NS:
        return False
    if len(_verified) >= VERIFIED_LIMIT:
        del _verified[next(iter(_verified))]
    _verified[identity] = value
    return True


def verified_file(path: str | os.PathLike[str]) -> Any:
    """What :func:`remember_verified` kept for the file now at ``path``, or None (never
    verified in this process, changed since, or unreadable)."""
    if not _verified:
        return None
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return _verified.get(_identity(st))


def forget_verified() -> None:
    """Drop every remembered verification (the next load of each file verifies it again)."""
    _verified.clear()


def _loads_header(text: bytes) -> Any:
    """The JSON header: orjson when it can, else the standard parser, which also accepts what
    orjson refuses (lone surrogates escaped in a string, a byte-order mark, NaN), so a header
    reads the same whichever parser took it."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def parse_artifact_bytes(raw: bytes | mmap.mmap, where: str) -> tuple[dict[str, NDArray[np.generic]], dict[str, str]]:
    """Tensors (read-only views of ``raw``, no copy) and metadata of a safetensors buffer.

    Every header entry is validated before a view is made: a known dtype, a shape whose
    size matches its byte range, ranges that tile the data area exactly.
    """
    n = len(raw)
    if n < 8:
        raise ArtifactCorrupt(f"{where} is truncated or not a safetensors file ({n} bytes)")
    hlen = int.from_bytes(raw[:8], "little")
    if hlen > n - 8:
        raise ArtifactCorrupt(f"{where} is truncated: header claims {hlen} bytes, file has {n - 8}")
    try:
        header = _loads_header(raw[8 : 8 + hlen])
        metadata = header.pop("__metadata__", None) or {}
        entries = [(v["data_offsets"][0], v["data_offsets"][1], k, v["dtype"], v["shape"]) for k, v in header.items()]
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
        raise ArtifactCorrupt(f"{where} has a malformed header") from e
    end = 0
    for entry in entries:
        begin, stop = entry[0], entry[1]
        if type(begin) is not int or type(stop) is not int:
            raise ArtifactCorrupt(f"{where} has a malformed header: tensor byte ranges must be integers")
        if stop > end:
            end = stop
    if 8 + hlen + end != n:
        raise ArtifactCorrupt(f"{where} is truncated or has trailing bytes: expected {8 + hlen + end} bytes, found {n}")
    if type(metadata) is not dict or not all(type(v) is str for v in metadata.values()):
        raise ArtifactCorrupt(f"{where} has malformed metadata")
    base = 8 + hlen
    tensors: dict[str, NDArray[np.generic]] = {}
    at = 0
    entries.sort(key=_range_key)
    dtypes = _LE_DTYPES
    area = np.frombuffer(raw, dtype=np.uint8, offset=base)  # the data area: each tensor a slice of it, viewed
    for begin, stop, name, code, shape in entries:
        dtype = dtypes.get(code) if type(code) is str else None
        if type(shape) is list and len(shape) == 1:  # the common case, checked without a generator
            count = shape[0]
            ok = type(count) is int and count >= 0
        else:
            ok = type(shape) is list and all(type(d) is int and d >= 0 for d in shape)
            count = math.prod(shape) if ok else 0  # exact: no int64 wrap-around to slip past the size check
        if not ok or dtype is None or begin != at or stop < begin or count * dtype.itemsize != stop - begin:
            raise ArtifactCorrupt(f"{where} is not a readable safetensors file: tensor {name!r} has a bad dtype, "
                                  "shape or byte range")
        arr = area[begin:stop]
        if dtype is not _U8:
            arr = arr.view(dtype)
        if len(shape) != 1:
            try:
                arr = arr.reshape(shape)
            except (ValueError, OverflowError) as e:  # a dimension numpy cannot index, on an empty tensor
                raise ArtifactCorrupt(f"{where} is not a readable safetensors file: tensor {name!r} has a bad "
                                      "shape") from e
        tensors[name] = arr
        at = stop
    return tensors, dict(metadata)


def _range_key(entry: tuple[Any, ...]) -> tuple[Any, Any]:
    return (entry[0], entry[1])
