"""SentencePiece ``.model`` -> :class:`Vocabulary`, through the ``sentencepiece`` library.

Holds a minimal protobuf reader so that the model can be rewritten to encode text as a
continuation (no dummy-prefix ``▁``) before the library loads it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from maskc.compiler.errors import TokenizerError
from maskc.compiler.tokenizer_common import FORMATS_HINT, eos_from_configs, finish_vocabulary
from maskc.compiler.vocab import Vocabulary, decode_metaspace

__all__ = ["continuation_sentencepiece_proto", "load_sentencepiece"]


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


def load_sentencepiece(path: Path, name: str, *, config_dir: Path | None) -> Vocabulary:
    """Loads a SentencePiece model; control, unknown and unused pieces are special.

    EOS entries are those of the config files in ``config_dir`` (when given), then the
    model's own ``eos_id``.

    Raises:
        TokenizerError: the file cannot be read or is not a SentencePiece model.
    """
    import sentencepiece

    not_readable = TokenizerError(
        f"'{path}' is not a tokenizer file maskc can read (not JSON, not GGUF, "
        "not a SentencePiece model)",
        hint=FORMATS_HINT,
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
    return finish_vocabulary(name, token_bytes, special, configured, _SentencePieceEncoder(sp))

