"""A content-addressed artifact cache, and the per-tokenizer tables cached beside it.

The key is sha256(grammar identity, tokenizer fingerprint, canonical options, format and
compiler versions): the same inputs always map to the same file, and anything that could
change an artifact's bytes changes the key. An entry is trusted only after it loads (its
content hash covers its metadata) and its metadata names exactly what was asked for;
a corrupt or foreign entry is rebuilt, never served.

:class:`TokenizerTables` keeps a loaded :class:`Vocabulary` (every id's bytes, the special
and EOS ids, the logits width) under its fingerprint, so a worker process rebuilds it from
one flat file instead of parsing the tokenizer again; an entry is served only when the
vocabulary it holds has exactly the fingerprint it is filed under.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from maskc.artifacts.artifact import Artifact
from maskc.artifacts.format import COMPILER_VERSION, FORMAT_VERSION, READ_VERSIONS, content_address
from maskc.artifacts.io import parse_artifact_bytes, save_bytes, write_atomic
from maskc.compiler.errors import ArtifactError
from maskc.compiler.vocab import Vocabulary

__all__ = ["cache_root", "cache_key", "ArtifactCache", "TokenizerTables"]

log = logging.getLogger("maskc.cache")


def cache_root() -> Path:
    """``$MASKC_CACHE_DIR``, else the user cache directory (``~/.cache/maskc`` on Linux)."""
    env = os.environ.get("MASKC_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("maskc", appauthor=False))


cache_key = content_address


class ArtifactCache:
    """Artifacts stored as ``ROOT/ab/abcdef….safetensors``."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root) if root is not None else cache_root()

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.safetensors"

    def get(self, key: str) -> bytes | None:
        p = self.path(key)
        try:
            return p.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            log.warning("cache entry %s unreadable (%s); rebuilding", p, e)
            return None

    def load(self, key: str, *, kind: str, grammar_sha256: str, tokenizer: Vocabulary,
             options_json: str) -> Artifact | None:
        """The entry at ``key`` if it is the artifact asked for, else None (a miss).

        The entry must load (tables and metadata hashed, every field valid) and its metadata
        must name this grammar, tokenizer, options and format and compiler versions: a file
        copied or renamed over another key is a miss, logged and discarded, not a hit.
        """
        raw = self.get(key)
        if raw is None:
            return None
        path = self.path(key)
        try:
            art = Artifact.from_bytes(raw, where=str(path))
            art.verify_tokenizer(tokenizer)
        except ArtifactError as e:
            log.warning("cache entry %s is unusable (%s); rebuilding", path, e.message)
            self.discard(key)
            return None
        expected = {"grammar_kind": kind, "grammar_sha256": grammar_sha256, "options": options_json,
                    "compiler_version": COMPILER_VERSION}
        wrong = [k for k, v in expected.items() if art.metadata[k] != v]
        if art.metadata["format_version"] not in READ_VERSIONS:  # (6 and 4: with counted loops)
            wrong.append("format_version")
        if wrong:
            log.warning("cache entry %s is another artifact (%s differ); rebuilding", path, ", ".join(wrong))
            self.discard(key)
            return None
        art.tokenizer = tokenizer
        art.cache_hit = True
        art.cache_path = path
        return art

    def discard(self, key: str) -> None:
        try:
            self.path(key).unlink()
        except OSError:
            pass

    def entries(self) -> list[Path]:
        """The artifacts (tokenizer tables and models, kept beside them, are not entries)."""
        if not self.root.is_dir():
            return []
        return sorted(self.root.glob("[0-9a-f][0-9a-f]/*.safetensors"))

    def clear(self) -> int:
        """Remove every artifact, and the tokenizer tables; returns the number of artifacts."""
        n = 0
        for p in self.entries():
            try:
                p.unlink()
                n += 1
            except OSError as e:
                raise ArtifactError(f"cannot remove cache entry {p}: {e.strerror or e}") from e
        tables = TokenizerTables(self.root)
        for p in [*tables.entries(), *tables.sources()]:
            try:
                p.unlink()
            except OSError as e:
                raise ArtifactError(f"cannot remove tokenizer tables {p}: {e.strerror or e}") from e
        return n


_TABLES_FORMAT = "maskc-tokenizer-tables"
_TABLES_VERSION = "1"
_FINGERPRINT = re.compile(r"[0-9a-f]{64}")


class TokenizerTables:
    """Vocabularies stored as ``ROOT/tokenizers/<fingerprint>.safetensors``.

    The file holds the token bytes (one flat array and its offsets), the special and EOS
    ids, the logits width and the name: what the compiler reads of a tokenizer. Loading it
    costs a read and one hash, where parsing a tokenizer file costs a JSON or GGUF parse
    and a decode of every token. An entry that does not load, or whose vocabulary hashes
    to another fingerprint, is deleted and reported as a miss.
    """

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = (Path(root) if root is not None else cache_root()) / "tokenizers"

    def path(self, fingerprint: str) -> Path:
        """The entry's file.

        Raises:
            ValueError: ``fingerprint`` is not 64 lowercase hex digits.
        """
        if not _FINGERPRINT.fullmatch(fingerprint):
            raise ValueError(f"a tokenizer fingerprint is 64 lowercase hex digits, got {fingerprint!r}")
        return self.root / f"{fingerprint}.safetensors"

    def entries(self) -> list[Path]:
        return sorted(self.root.glob("*.safetensors")) if self.root.is_dir() else []

    def sources(self) -> list[Path]:
        """The files naming which tables a tokenizer source reads (:meth:`file_source`)."""
        folder = self.root / "sources"
        return sorted(p for p in folder.iterdir() if _FINGERPRINT.fullmatch(p.name)) if folder.is_dir() else []

    def save(self, vocab: Vocabulary) -> Path | None:
        """Store ``vocab`` under its fingerprint unless a valid entry is already there (None
        when the write fails: the cache is an optimization, the failure is logged)."""
        path = self.path(vocab.fingerprint)
        if self.load(vocab.fingerprint) is not None:
            return path
        flat, offsets = vocab.flat()
        tensors: dict[str, NDArray[np.generic]] = {
            "token_bytes": np.asarray(flat, dtype=np.uint8),
            "token_offsets": np.asarray(offsets, dtype=np.int64),
            "special_ids": np.array(sorted(vocab.special_ids), dtype=np.int64),
            "eos_ids": np.array(vocab.eos_ids, dtype=np.int64),
        }
        metadata = {"format": _TABLES_FORMAT, "format_version": _TABLES_VERSION, "name": vocab.name,
                    "vocab_size": str(vocab.vocab_size), "tokenizer_sha256": vocab.fingerprint}
        try:
            return write_atomic(path, save_bytes(tensors, metadata))
        except ArtifactError as e:
            log.warning("could not write tokenizer tables: %s", e.message)
            return None

    def source(self, key: str) -> str | None:
        """The fingerprint filed under a tokenizer source's ``key`` (64 hex digits: a hash of
        what names its files as they are, see :meth:`file_source`), or None."""
        if not _FINGERPRINT.fullmatch(key):
            raise ValueError(f"a tokenizer source key is 64 lowercase hex digits, got {key!r}")
        try:
            got = (self.root / "sources" / key).read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            return None
        return got if _FINGERPRINT.fullmatch(got) else None

    def file_source(self, key: str, fingerprint: str) -> None:
        """File ``fingerprint`` under a source's ``key``, so that the next load of that source
        reads these tables and parses no tokenizer file (a failed write is logged: the cache
        is an optimization)."""
        if not _FINGERPRINT.fullmatch(key) or not _FINGERPRINT.fullmatch(fingerprint):
            raise ValueError("a tokenizer source key and a fingerprint are 64 lowercase hex digits")
        try:
            write_atomic(self.root / "sources" / key, fingerprint.encode("ascii"))
        except ArtifactError as e:
            log.warning("could not file a tokenizer source: %s", e.message)

    def load(self, fingerprint: str, *, encoder: Callable[[str], list[int]] | None = None) -> Vocabulary | None:
        """The vocabulary filed under ``fingerprint``, or None (a miss).

        Args:
            fingerprint: :attr:`Vocabulary.fingerprint` of the tokenizer wanted.
            encoder: the returned vocabulary's text encoder (the file holds no encoder).
        """
        path = self.path(fingerprint)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            log.warning("tokenizer tables %s unreadable (%s); rebuilding", path, e)
            return None
        try:
            vocab = _vocabulary_from(raw, str(path), encoder)
            if vocab.fingerprint != fingerprint:
                raise ValueError(f"its tokens hash to {vocab.fingerprint[:12]}")
        except (ArtifactError, ValueError, TypeError, KeyError) as e:
            log.warning("tokenizer tables %s are unusable (%s); rebuilding", path,
                        e.message if isinstance(e, ArtifactError) else e)
            try:
                path.unlink()
            except OSError:
                pass
            return None
        return vocab


def _vocabulary_from(raw: bytes, where: str, encoder: Callable[[str], list[int]] | None) -> Vocabulary:
    tensors, meta = parse_artifact_bytes(raw, where)
    if meta.get("format") != _TABLES_FORMAT or meta.get("format_version") != _TABLES_VERSION:
        raise ValueError("not a tokenizer tables file of this version")
    flat, offsets = tensors["token_bytes"], tensors["token_offsets"]
    special, eos = tensors["special_ids"], tensors["eos_ids"]
    if (flat.dtype != np.uint8 or flat.ndim != 1 or offsets.dtype != np.int64 or offsets.ndim != 1
            or not offsets.size or special.dtype != np.int64 or eos.dtype != np.int64):
        raise ValueError("tensors of the wrong dtype or shape")
    if offsets[0] != 0 or offsets[-1] != flat.size or bool((np.diff(offsets) < 0).any()):
        raise ValueError("token offsets do not slice the token bytes")
    data = flat.tobytes()
    bounds = offsets.tolist()
    vocab = Vocabulary(
        name=meta["name"],
        token_bytes=tuple(data[a:b] for a, b in zip(bounds, bounds[1:])),
        special_ids=frozenset(special.tolist()),
        eos_ids=tuple(eos.tolist()),
        vocab_size=int(meta["vocab_size"]),
        _encoder=encoder,
    )
    return vocab


MODEL_MARKER = "maskc-model.json"
"""Written last into a dequantized model folder: its presence means the copy is complete."""


def model_cache_root() -> Path:
    """``$MASKC_MODEL_CACHE_DIR``, else ``models/`` under the artifact cache."""
    env = os.environ.get("MASKC_MODEL_CACHE_DIR")
    return Path(env).expanduser() if env else cache_root() / "models"


def cached_models(root: Path | None = None) -> list[Path]:
    """Complete dequantized model folders (partial ones from a crash are left out)."""
    base = root or model_cache_root()
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if (p / MODEL_MARKER).is_file())


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())

