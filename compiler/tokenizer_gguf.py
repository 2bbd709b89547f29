"""GGUF embedded vocabulary -> :class:`Vocabulary`: metadata reader and encoder rebuild.

Reads a GGUF file's key/value metadata without touching its tensors, decodes the
``tokenizer.ggml.*`` tokens by llama.cpp token type, and encodes either through a byte-level
BPE rebuilt from the embedded merges or through transformers' GGUF conversion.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from maskc.compiler.errors import TokenizerError
from maskc.compiler.tokenizer_common import finish_vocabulary
from maskc.compiler.tokenizer_hf import HFEncoder, continuation_tokenizer_json
from maskc.compiler.vocab import Vocabulary, decode_byte_level, decode_metaspace

__all__ = ["load_gguf", "read_gguf_metadata"]

_GGUF_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
_GGUF_STRING, _GGUF_ARRAY = 8, 9


def read_gguf_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The key/value metadata of a GGUF (v2 or v3) file, without reading its tensors.

    Numeric arrays come back as numpy arrays, string arrays as lists of ``str``.

    Raises:
        TokenizerError: the file is not GGUF, is truncated, or uses an unknown value type.
    """
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return _parse_gguf(mm)
    except (OSError, ValueError, struct.error, UnicodeDecodeError, IndexError) as e:
        raise TokenizerError(
            f"cannot read GGUF metadata from '{path}': {e}",
            hint="the file may be truncated or corrupt; download it again",
        ) from e


def _parse_gguf(buf: mmap.mmap) -> dict[str, Any]:
    if buf[:4] != b"GGUF":
        raise ValueError("no GGUF magic")
    order = "<"
    (version,) = struct.unpack_from("<I", buf, 4)
    if version > 0xFFFF:
        order = ">"
        (version,) = struct.unpack_from(">I", buf, 4)
    if version not in (2, 3):
        raise ValueError(f"GGUF version {version} is not supported (need 2 or 3)")
    _, kv_count = struct.unpack_from(order + "QQ", buf, 8)
    pos = 24

    def u(fmt: str) -> Any:
        nonlocal pos
        (value,) = struct.unpack_from(order + fmt, buf, pos)
        pos += struct.calcsize(fmt)
        return value

    def string() -> str:
        nonlocal pos
        size = u("Q")
        if pos + size > len(buf):
            raise ValueError("string runs past the end of the file")
        text = buf[pos : pos + size].decode("utf-8")
        pos += size
        return text

    def value(kind: int) -> Any:
        nonlocal pos
        if kind in _GGUF_SCALARS:
            return u(_GGUF_SCALARS[kind])
        if kind == _GGUF_STRING:
            return string()
        if kind == _GGUF_ARRAY:
            item, count = u("I"), u("Q")
            if item in _GGUF_SCALARS:
                dtype = np.dtype(order + _GGUF_SCALARS[item].replace("?", "b1"))
                end = pos + dtype.itemsize * count
                if end > len(buf):
                    raise ValueError("array runs past the end of the file")
                arr = np.frombuffer(buf[pos:end], dtype=dtype)
                pos = end
                return arr
            return [value(item) for _ in range(count)]
        raise ValueError(f"unknown GGUF value type {kind}")

    meta: dict[str, Any] = {}
    for _ in range(kv_count):
        key = string()
        meta[key] = value(u("I"))
    return meta


# llama.cpp token types
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED, _BYTE = 1, 2, 3, 4, 5, 6
_DIGIT_SPLITTING_PRE = {"smollm", "starcoder", "refact"}


class _GgufBpeEncoder:
    """Byte-level BPE rebuilt from a GGUF's tokens and merges, built on first use."""

    def __init__(self, tokens: list[str], types: list[int], merges: list[str], pre: str) -> None:
        self._args = (tokens, types, merges, pre)
        self._tokenizer: Any = None

    def __call__(self, text: str) -> list[int]:
        if self._tokenizer is None:
            self._tokenizer = self._build()
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def _build(self) -> Any:
        from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

        tokens, types, merges, pre = self._args
        vocab = {t: i for i, t in enumerate(tokens) if types[i] in (_NORMAL, _BYTE)}
        pairs = [(a, b) for a, _, b in (m.partition(" ") for m in merges)]
        tok = Tokenizer(models.BPE(vocab=vocab, merges=pairs))
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        if pre in _DIGIT_SPLITTING_PRE:
            digits = pre_tokenizers.Digits(individual_digits=True)
            tok.pre_tokenizer = pre_tokenizers.Sequence([digits, byte_level])
        else:
            tok.pre_tokenizer = byte_level
        tok.add_tokens(
            [
                AddedToken(t, special=types[i] == _CONTROL, normalized=False)
                for i, t in enumerate(tokens)
                if types[i] in (_CONTROL, _USER_DEFINED)
            ]
        )
        return tok


class _TransformersEncoder:
    """Encoder through transformers' GGUF conversion, built on first use."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._encoder: Callable[[str], list[int]] | None = None

    def __call__(self, text: str) -> list[int]:
        if self._encoder is None:
            try:
                from tokenizers import Tokenizer
                from transformers import AutoTokenizer

                hf = AutoTokenizer.from_pretrained(self._path.parent, gguf_file=self._path.name)
                data = json.loads(hf.backend_tokenizer.to_str())
                cont = continuation_tokenizer_json(data)
                tok = Tokenizer.from_str(json.dumps(cont)) if cont else hf.backend_tokenizer
            except Exception as e:
                raise TokenizerError(
                    f"cannot build an encoder for '{self._path.name}': {e}",
                    hint="encoding this GGUF vocabulary needs transformers: "
                    "pip install 'maskc[torch]'",
                ) from e
            self._encoder = HFEncoder(tok)
        return self._encoder(text)


def load_gguf(path: Path, name: str) -> Vocabulary:
    """Loads the vocabulary embedded in a GGUF file (``gpt2`` or ``llama`` tokenizer models).

    Raises:
        TokenizerError: the file has no embedded tokenizer, an unsupported tokenizer model,
            or inconsistent token metadata.
    """
    meta = read_gguf_metadata(path)
    model = _string(meta, "tokenizer.ggml.model", path)
    if model is None and "tokenizer.ggml.tokens" not in meta:
        raise TokenizerError(f"'{path}' has no embedded tokenizer (tokenizer.ggml.* keys)")
    if model is None:
        raise _bad_field(path, "tokenizer.ggml.model", "is missing", "a string such as 'gpt2'")
    if model not in ("gpt2", "llama"):
        raise TokenizerError(
            f"GGUF tokenizer model '{model}' is not supported",
            hint="maskc reads GGUF vocabularies of type 'gpt2' (byte-level BPE) and 'llama' "
            "(SentencePiece)",
        )
    tokens = _string_list(meta, "tokenizer.ggml.tokens", path)
    if tokens is None:
        raise _bad_field(path, "tokenizer.ggml.tokens", "is missing", "an array of strings")
    raw_types = _int_list(meta, "tokenizer.ggml.token_type", path)
    types = [_NORMAL] * len(tokens) if raw_types is None else raw_types
    if len(types) != len(tokens):
        raise TokenizerError(f"'{path}' has {len(tokens)} tokens but {len(types)} token types")
    token_bytes: list[bytes] = []
    special: set[int] = set()
    for i, (text, kind) in enumerate(zip(tokens, types)):
        if kind in (_CONTROL, _UNKNOWN, _UNUSED):
            special.add(i)
            token_bytes.append(text.encode("utf-8"))
        elif kind == _USER_DEFINED:
            token_bytes.append(text.encode("utf-8"))
        elif model == "gpt2":
            token_bytes.append(decode_byte_level(text))
        else:
            token_bytes.append(decode_metaspace(text, byte_fallback=kind == _BYTE))
    configured: list[int | str] = [
        tid
        for k in (
            "tokenizer.ggml.eos_token_id",
            "tokenizer.ggml.eot_token_id",
            "tokenizer.ggml.eom_token_id",
        )
        if (tid := _token_id(meta, k, path)) is not None
    ]
    merges = _string_list(meta, "tokenizer.ggml.merges", path)
    encoder: Callable[[str], list[int]]
    if model == "gpt2" and merges is not None:
        pre = _string(meta, "tokenizer.ggml.pre", path) or "default"
        encoder = _GgufBpeEncoder(tokens, types, merges, pre)
    else:
        encoder = _TransformersEncoder(path)
    return finish_vocabulary(name, token_bytes, special, configured, encoder)


# -- typed access to metadata fields ---------------------------------------------------------
# A GGUF key can hold any value type; these readers refuse the wrong one by name, so a
# mistyped field is a TokenizerError naming it, not a crash further down.


def _kind(value: object) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of {value.dtype.name}"
    if isinstance(value, list):
        inner = {"arrays" if isinstance(v, (list, np.ndarray)) else type(v).__name__ for v in value}
        return f"an array of {'/'.join(sorted(inner))}"
    return f"of type {type(value).__name__} ({value!r:.40})"


def _bad_field(path: Path, key: str, problem: str, expected: str) -> TokenizerError:
    return TokenizerError(
        f"'{path}': GGUF metadata field {key} {problem}; expected {expected}",
        hint="the file's tokenizer metadata is malformed; re-export it with llama.cpp's tools",
    )


def _string(meta: dict[str, Any], key: str, path: Path) -> str | None:
    value = meta.get(key)
    if value is None or isinstance(value, str):
        return value
    raise _bad_field(path, key, f"is {_kind(value)}", "a string")


def _string_list(meta: dict[str, Any], key: str, path: Path) -> list[str] | None:
    value = meta.get(key)
    if value is None:
        return None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    if isinstance(value, np.ndarray) and not value.size:  # an empty array has no item type
        return []
    raise _bad_field(path, key, f"is {_kind(value)}", "an array of strings")


def _int_list(meta: dict[str, Any], key: str, path: Path) -> list[int] | None:
    value = meta.get(key)
    if value is None:
        return None
    if isinstance(value, np.ndarray) and value.dtype.kind in "iu":
        out: list[int] = value.tolist()
        return out
    raise _bad_field(path, key, f"is {_kind(value)}", "an array of integers")


def _token_id(meta: dict[str, Any], key: str, path: Path) -> int | None:
    value = meta.get(key)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise _bad_field(path, key, f"is {_kind(value)}", "a non-negative integer token id")
