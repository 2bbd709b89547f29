"""``manifest.json``: the index of an artifact folder, so a serving process finds its file.

Artifact files are named ``<stem>.<key>.safetensors``, ``key`` the first 16 hex digits of
the artifact's content address (sha256 of grammar, tokenizer fingerprint, options, format
and compiler versions), so compiles with other options or another tokenizer never
overwrite each other. The manifest maps each (source, tokenizer, options) to its file:

    {"format": "maskc-manifest", "version": 1, "artifacts": [
      {"source": "../schemas/order.json", "stem": "order", "kind": "json_schema",
       "artifact": "order.3f9c0a1b2c4d5e6f.safetensors", "tokenizer_name": "...",
       "tokenizer_sha256": "...", "options": {"lenient": false, "max_depth": 32,
       "whitespace": "compact"}, "grammar_sha256": "...", "content_key": "...", ...}]}

``source`` is the input path relative to the manifest's folder (a regex: the pattern).
Each entry also records how the file was made and how to trust it again: ``source_key``
(sha256 of the source value, its kind, the tokenizer fingerprint, the options and the
compiler and format versions: known before any compile), ``bytes`` and ``sha256`` of the
file, ``states``, ``distinct_masks`` and ``compile_ms`` (the time of the compile that
built the artifact; 0 when it came from the artifact cache, where no compile ran). A later
compile of the same source key finds the entry, checks the file's size and hash and skips
the compile (:func:`reusable_artifact`).

Updates merge under an exclusive lock (``flock`` on the folder) and replace the file
atomically, so concurrent compiles into one folder keep every entry.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from maskc.artifacts.artifact import Artifact
from maskc.artifacts.format import canonical_json
from maskc.artifacts.io import write_atomic
from maskc.compiler.errors import ArtifactCorrupt, ArtifactError

__all__ = ["MANIFEST", "artifact_file_name", "manifest_entry", "read_manifest", "update_manifest", "find_artifact",
           "file_sha256", "reusable_artifact"]

MANIFEST = "manifest.json"
_FORMAT = "maskc-manifest"
_VERSION = 1
_KEY_CHARS = 16

log = logging.getLogger("maskc.manifest")


def artifact_file_name(stem: str, art: Artifact) -> str:
    """``<stem>.<first 16 hex digits of the content address>.safetensors``."""
    return f"{stem}.{art.content_key[:_KEY_CHARS]}.safetensors"


def manifest_entry(art: Artifact, *, source: str, stem: str, file_name: str, source_key: str | None = None,
                   file_bytes: int | None = None, sha256: str | None = None, compile_ms: float = 0.0
                   ) -> dict[str, Any]:
    """The manifest's record of one written artifact.

    Args:
        source_key: the key a later compile of the same input looks the entry up by.
        file_bytes, sha256: size and sha256 of the written file, checked before it is reused.
        compile_ms: the time the compile that built the artifact took (0: none ran).
    """
    m = art.metadata
    return {
        "source": source, "stem": stem, "kind": m["grammar_kind"], "artifact": file_name,
        "tokenizer_name": m["tokenizer_name"], "tokenizer_sha256": m["tokenizer_sha256"],
        "vocab_size": art.vocab_size, "eos_token_ids": list(art.eos_token_ids), "options": art.options,
        "grammar_sha256": m["grammar_sha256"], "content_key": art.content_key,
        "format_version": m["format_version"], "not_enforced": art.not_enforced,
        "source_key": source_key, "bytes": file_bytes, "sha256": sha256,
        "states": art.num_states, "distinct_masks": art.num_masks, "compile_ms": round(compile_ms, 3),
    }


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file's bytes, read in chunks.

    Raises:
        OSError: the file cannot be read.
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def reusable_artifact(folder: str | os.PathLike[str], entry: dict[str, Any]) -> Path | None:
    """The file of ``entry`` if it is still exactly the file recorded (size, then sha256), else None.

    Only the file's own bytes are hashed: nothing is parsed, so this costs a read. An entry
    written before entries recorded a hash is never reused.
    """
    name, size, digest = entry.get("artifact"), entry.get("bytes"), entry.get("sha256")
    if not isinstance(name, str) or not isinstance(size, int) or not isinstance(digest, str):
        return None
    path = Path(folder) / name
    if Path(name).name != name:  # a manifest names files in its own folder only
        return None
    try:
        if path.stat().st_size != size or file_sha256(path) != digest:
            log.warning("%s changed since it was written; recompiling", path)
            return None
    except OSError:
        return None
    return path


def _identity(entry: dict[str, Any]) -> tuple[str, str, str]:
    """One entry per (source, tokenizer, options): a recompile replaces its own entry."""
    return str(entry.get("source")), str(entry.get("tokenizer_sha256")), canonical_json(entry.get("options"))


def read_manifest(folder: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The entries of ``folder/manifest.json`` ([] when there is none).

    Raises:
        ArtifactCorrupt: the file is not a maskc manifest.
        ArtifactError: it cannot be read.
    """
    path = Path(folder) / MANIFEST
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as e:
        raise ArtifactError(f"cannot read {path}: {e.strerror or e}") from e
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise ArtifactCorrupt(f"{path} is not valid JSON: {e}") from None
    entries = doc.get("artifacts") if isinstance(doc, dict) and doc.get("format") == _FORMAT else None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ArtifactCorrupt(f"{path} is not a maskc manifest")
    return entries


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """An exclusive ``flock`` on the folder (a lock file where a directory cannot be locked);
    no lock where ``fcntl`` does not exist (Windows: concurrent compiles may drop entries)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    fd = -1
    try:
        fd = os.open(folder, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        if fd >= 0:
            os.close(fd)
        fd = os.open(folder / ".manifest.lock", os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        os.close(fd)  # closing releases the lock


def update_manifest(folder: str | os.PathLike[str], entries: Iterable[dict[str, Any]]) -> Path:
    """Merge ``entries`` into ``folder/manifest.json`` (same source, tokenizer and options:
    replaced) under the folder's lock, and write it atomically.

    An unreadable or foreign manifest is replaced (logged): the artifacts are the data, the
    manifest only their index.

    Raises:
        ArtifactError: the folder cannot be locked or written.
    """
    base = Path(folder)
    new = list(entries)
    try:
        base.mkdir(parents=True, exist_ok=True)
        with _locked(base):
            try:
                current = read_manifest(base)
            except ArtifactError as e:
                log.warning("%s; writing a new one", e.message)
                current = []
            merged = {_identity(e): e for e in current}
            merged.update((_identity(e), e) for e in new)
            doc = {"format": _FORMAT, "version": _VERSION,
                   "artifacts": [merged[k] for k in sorted(merged)]}
            return write_atomic(base / MANIFEST, orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    except OSError as e:
        raise ArtifactError(f"cannot update {base / MANIFEST}: {e.strerror or e}") from e


def find_artifact(folder: str | os.PathLike[str], *, tokenizer_sha256: str, source: str | None = None,
                  stem: str | None = None, options: dict[str, Any] | None = None) -> Path:
    """The artifact file in ``folder`` for a source (or stem) and tokenizer (and options).

    Raises:
        ArtifactError: no entry matches, or several do (name ``options`` to choose).
    """
    def wanted(e: dict[str, Any]) -> bool:
        return (e.get("tokenizer_sha256") == tokenizer_sha256
                and (source is None or e.get("source") == source)
                and (stem is None or e.get("stem") == stem)
                and (options is None or canonical_json(e.get("options")) == canonical_json(options)))

    hits = [e for e in read_manifest(folder) if wanted(e)]
    if len(hits) != 1:
        what = f"source={source!r} stem={stem!r} tokenizer={tokenizer_sha256[:12]} options={options}"
        raise ArtifactError(f"{len(hits) or 'no'} artifacts in {Path(folder) / MANIFEST} match {what}",
                            hint="name the options too" if hits else "compile it: maskc compile SCHEMA -o FOLDER")
    return Path(folder) / str(hits[0]["artifact"])
