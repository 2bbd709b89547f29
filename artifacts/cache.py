"""A content-addressed artifact cache.

The key is sha256(grammar identity, tokenizer fingerprint, canonical options, format and
compiler versions): the same inputs always map to the same file, and anything that could
change an artifact's bytes changes the key. A corrupt entry is rebuilt, never trusted.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

from maskc.artifacts.format import FORMAT_VERSION
from maskc.compiler.errors import ArtifactError

__all__ = ["cache_root", "cache_key", "ArtifactCache"]

log = logging.getLogger("maskc.cache")


def cache_root() -> Path:
    """``$MASKC_CACHE_DIR``, else the user cache directory (``~/.cache/maskc`` on Linux)."""
    env = os.environ.get("MASKC_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("maskc", appauthor=False))


def cache_key(grammar_sha256: str, tokenizer_sha256: str, options_json: str, compiler_version: str) -> str:
    h = hashlib.sha256()
    for part in (grammar_sha256, tokenizer_sha256, options_json, FORMAT_VERSION, compiler_version):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


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

    def discard(self, key: str) -> None:
        try:
            self.path(key).unlink()
        except OSError:
            pass

    def entries(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(self.root.glob("*/*.safetensors"))

    def clear(self) -> int:
        n = 0
        for p in self.entries():
            try:
                p.unlink()
                n += 1
            except OSError as e:
                raise ArtifactError(f"cannot remove cache entry {p}: {e.strerror or e}") from e
        return n


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

