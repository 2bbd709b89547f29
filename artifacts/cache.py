"""A content-addressed artifact cache.

The key is sha256(grammar identity, tokenizer fingerprint, canonical options, format and
compiler versions): the same inputs always map to the same file, and anything that could
change an artifact's bytes changes the key. An entry is trusted only after it loads (its
content hash covers its metadata) and its metadata names exactly what was asked for;
a corrupt or foreign entry is rebuilt, never served.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from maskc.artifacts.artifact import Artifact
from maskc.artifacts.format import COMPILER_VERSION, FORMAT_VERSION, content_address
from maskc.compiler.errors import ArtifactError
from maskc.compiler.vocab import Vocabulary

__all__ = ["cache_root", "cache_key", "ArtifactCache"]

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
                    "format_version": FORMAT_VERSION, "compiler_version": COMPILER_VERSION}
        wrong = [k for k, v in expected.items() if art.metadata[k] != v]
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

