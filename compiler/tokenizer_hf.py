"""Hugging Face ``tokenizer.json`` -> :class:`Vocabulary`: decoding scheme and encoder.

Works out how token strings map to bytes (GPT-2 byte-level, SentencePiece metaspace or raw
UTF-8, with or without byte fallback), refuses models whose tokens have no fixed bytes, and
rewrites the tokenizer so that it encodes text as a continuation (no dummy-prefix space).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from maskc.compiler.errors import TokenizerError
from maskc.compiler.tokenizer_common import (
    FORMATS_HINT,
    eos_from_configs,
    finish_vocabulary,
    read_json,
)
from maskc.compiler.vocab import (
    MAX_VOCAB_SIZE,
    METASPACE,
    Vocabulary,
    decode_byte_level,
    decode_metaspace,
)

__all__ = [
    "HFEncoder",
    "TokenDecoding",
    "continuation_tokenizer_json",
    "detect_decoding",
    "load_tokenizer_json",
]


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
        raise TokenizerError("tokenizer.json has no 'model' object", hint=FORMATS_HINT)
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


class HFEncoder:
    """Encoder over a ``tokenizers.Tokenizer``, without special tokens added."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer

    def __call__(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids)


def _id_count(path: Path, model_vocab: object, added: Mapping[int, Any]) -> int:
    """One past the highest id of the model vocabulary and the added tokens.

    Ids must be non-negative ints no larger than the file can plausibly hold: a few gaps are
    normal (removed or reserved ids), but an id far past the number of entries would make
    the loader walk every id in between (a 2,000,000,000 id would hang it).

    Raises:
        TokenizerError: the vocabulary is neither an object of ids nor a list, or an id is
            not a non-negative int or is out of bounds.
    """
    ids: list[int] = []
    if isinstance(model_vocab, list):
        ids = list(range(len(model_vocab)))
    elif isinstance(model_vocab, Mapping):
        for i in model_vocab.values():
            if isinstance(i, bool) or not isinstance(i, int) or i < 0:
                raise TokenizerError(
                    f"'{path}': model.vocab holds {i!r} where a token id (a non-negative int) "
                    "belongs",
                    hint="the file may be corrupt",
                )
            ids.append(i)
    else:
        raise TokenizerError(
            f"'{path}': model.vocab must be an object of token ids or a list, "
            f"got {type(model_vocab).__name__}"
        )
    limit = min(MAX_VOCAB_SIZE, 4 * (len(ids) + len(added)) + 256)
    top = max([*ids, *added], default=-1)
    if top >= limit:
        where = "added_tokens" if top in added else "model.vocab"
        raise TokenizerError(
            f"'{path}': token id {top:,} in {where} is out of bounds for a vocabulary of "
            f"{len(ids):,} entries and {len(added):,} added tokens (ids must stay below {limit:,})",
            hint="the file may be corrupt; ids of a tokenizer.json count up from 0 with few gaps",
        )
    return top + 1


def load_tokenizer_json(
    path: Path, name: str, *, config_dir: Path | None, data: dict[str, Any] | None = None
) -> Vocabulary:
    """Loads a ``tokenizer.json`` (``data``, when given, is its already-parsed content).

    EOS entries come from the config files in ``config_dir`` when it is given.

    Raises:
        TokenizerError: the file cannot be read or parsed, or its tokens have no fixed bytes.
    """
    from tokenizers import Tokenizer

    if data is None:
        data = read_json(path)
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
    n = _id_count(path, data["model"].get("vocab") or {}, added)
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
    return finish_vocabulary(name, token_bytes, special, configured, HFEncoder(tok))

