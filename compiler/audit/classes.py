"""Token classes of the tokenizer audit: which ids carry which hazard, from their bytes alone.

Every class is a precise predicate over a token's bytes (see :data:`CLASS_DEFINITIONS`);
:func:`classify_tokens` evaluates them all over a :class:`~maskc.compiler.vocab.Vocabulary`
in one numpy pass over its flat token bytes, so a 128k vocabulary takes well under a second.
Classes are not exclusive: ``{"a`` is in ``quote+brace`` and ``structure+text``.

Byte classes only look at ordinary (non-special) ids, the ones a mask can allow; special and
added tokens are classified by :mod:`maskc.compiler.audit.tokenizer` with the tokenizer's facts.
"""

from __future__ import annotations

import re

import numpy as np
from numpy.typing import NDArray

from maskc.compiler.vocab import Vocabulary

__all__ = [
    "CLASS_DEFINITIONS",
    "JSON_WHITESPACE",
    "STRUCTURAL_BYTES",
    "STRUCTURAL_CLASSES",
    "classify_tokens",
    "duplicate_ids",
    "longest_whitespace_run",
    "printable",
]

STRUCTURAL_BYTES = b'",:{}[]'
"""JSON's structural bytes: the quote that opens and closes strings, and the six punctuators."""

JSON_WHITESPACE = b" \t\n\r"
"""The whitespace JSON allows between values (RFC 8259)."""

# One bit per kind of byte; a token's kinds are the OR of its bytes' bits.
_QUOTE, _COMMA, _COLON, _BRACE, _NEWLINE, _SPACE, _TEXT, _HIGH = 1, 2, 4, 8, 16, 32, 64, 128
_STRUCT = _QUOTE | _COMMA | _COLON | _BRACE
_WS = _NEWLINE | _SPACE


def _kind_table() -> NDArray[np.uint8]:
    table = np.full(256, _TEXT, dtype=np.uint8)
    table[0x80:] |= _HIGH
    table[ord('"')] = _QUOTE
    table[ord(",")] = _COMMA
    table[ord(":")] = _COLON
    for c in b"{}[]":
        table[c] = _BRACE
    for c in b"\n\r":
        table[c] = _NEWLINE
    for c in b" \t":
        table[c] = _SPACE
    return table


_KINDS = _kind_table()

CLASS_DEFINITIONS: dict[str, str] = {
    "quote+comma": 'holds a quote (") and a comma (,) and at least one other byte: ", ,"',
    "quote+colon": 'holds a quote and a colon (:): ": ":"',
    "quote+brace": 'holds a quote and a brace or bracket ({ } [ ]): "} {" "] ["',
    "brace+comma": "holds a brace or bracket and a comma: }, ], ,{",
    "brace+colon": "holds a brace or bracket and a colon: :{ :[",
    "bracket-combo": "holds two or more braces or brackets: [{ }] ]} {} }}",
    "structure+newline": "holds a structural byte and a newline or carriage return: ,\\n }\\n\\n",
    "structure+space": "holds a structural byte and a space or tab: ', ' '{ ' '\": '",
    "structure+text": 'holds a structural byte and a byte that is neither structural nor JSON '
    'whitespace (a letter, digit, other punctuation, a non-ASCII byte): {"a "name 1,',
    "structure-other": "holds a structural byte and at least one other byte but is in none of "
    'the classes above (only repeats of one byte, or comma and colon): "" ,, ,:',
    "whitespace-only": "every byte is JSON whitespace (space, tab, newline, carriage return)",
    "incomplete-utf8": "ends inside a UTF-8 sequence: its last lead byte (110xxxxx, 1110xxxx, "
    "11110xxx) is followed by fewer continuation bytes (10xxxxxx) than it needs, and by nothing else",
    "lone-continuation": "starts with a UTF-8 continuation byte (10xxxxxx)",
}
"""Each byte class's exact definition. Structural classes (the first ten) count ordinary tokens
of two or more bytes with at least one byte of :data:`STRUCTURAL_BYTES`; their union is every
such token, and a token may be in several of them."""

STRUCTURAL_CLASSES: tuple[str, ...] = tuple(list(CLASS_DEFINITIONS)[:10])


def classify_tokens(vocab: Vocabulary) -> dict[str, NDArray[np.int64]]:
    """The sorted ordinary ids of every class in :data:`CLASS_DEFINITIONS`, plus ``structural``
    (the union of the structural classes).

    Special ids are in no class.
    """
    flat, offsets = vocab.flat()
    n = vocab.token_count
    starts = offsets[:-1]
    lengths = np.diff(offsets)
    ordinary = lengths > 0
    if vocab.special_ids:
        ordinary[np.fromiter(vocab.special_ids, dtype=np.int64)] = False
    # A trailing 0 keeps every start index in range of reduceat, even for empty last tokens;
    # reduceat returns the start element for empty segments, which `ordinary` masks out.
    kinds = np.append(_KINDS[flat], np.uint8(0))
    braces = np.append((kinds[:-1] == _BRACE).astype(np.int64), 0)
    seen = np.zeros(n, dtype=np.uint8)
    nbraces = np.zeros(n, dtype=np.int64)
    if n:
        seen = np.where(ordinary, np.bitwise_or.reduceat(kinds, starts), 0).astype(np.uint8)
        nbraces = np.where(ordinary, np.add.reduceat(braces, starts), 0)

    def has(bits: int) -> NDArray[np.bool_]:
        hit: NDArray[np.bool_] = (seen & bits) != 0
        return hit

    structural = has(_STRUCT) & (lengths >= 2)
    q, c, k, b = has(_QUOTE), has(_COMMA), has(_COLON), has(_BRACE)
    masks: dict[str, NDArray[np.bool_]] = {
        "quote+comma": structural & q & c,
        "quote+colon": structural & q & k,
        "quote+brace": structural & q & b,
        "brace+comma": structural & b & c,
        "brace+colon": structural & b & k,
        "bracket-combo": structural & (nbraces >= 2),
        "structure+newline": structural & has(_NEWLINE),
        "structure+space": structural & has(_SPACE),
        "structure+text": structural & has(_TEXT),
    }
    covered = np.zeros(n, dtype=np.bool_)
    for mask in masks.values():
        covered |= mask
    masks["structure-other"] = structural & ~covered
    masks["whitespace-only"] = ordinary & has(_WS) & ~has(~_WS & 0xFF)
    first = np.zeros(n, dtype=np.uint8)
    if n:
        first = np.where(ordinary, np.append(flat, np.uint8(0))[starts], 0).astype(np.uint8)
    masks["lone-continuation"] = ordinary & ((first & 0xC0) == 0x80)
    incomplete = np.zeros(n, dtype=np.bool_)
    tb = vocab.token_bytes
    for i in np.flatnonzero(has(_HIGH)).tolist():
        incomplete[i] = _ends_incomplete(tb[i])
    masks["incomplete-utf8"] = incomplete
    out = {name: np.flatnonzero(masks[name]).astype(np.int64) for name in CLASS_DEFINITIONS}
    out["structural"] = np.flatnonzero(structural).astype(np.int64)
    return out


def _ends_incomplete(data: bytes) -> bool:
    """Whether ``data`` ends with a lead byte followed by too few continuation bytes."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:  # a continuation byte: keep looking for its lead
            continue
        need = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4 if byte & 0xF8 == 0xF0 else 0
        return need > back
    return False


def duplicate_ids(vocab: Vocabulary) -> list[tuple[int, int]]:
    """``(id, first)`` for every ordinary id whose bytes equal those of a lower ordinary id
    ``first`` (the lowest id with those bytes), in id order."""
    first: dict[bytes, int] = {}
    out: list[tuple[int, int]] = []
    special = vocab.special_ids
    for i, data in enumerate(vocab.token_bytes):
        if i in special or not data:
            continue
        j = first.setdefault(data, i)
        if j != i:
            out.append((i, j))
    return out


_WS_RUN = re.compile(rb"[ \t\n\r]+")


def longest_whitespace_run(vocab: Vocabulary) -> tuple[int, int | None]:
    """The longest run of JSON whitespace inside one ordinary token, and the lowest id that
    has it (``(0, None)`` when no token holds whitespace)."""
    best, best_id = 0, None
    special = vocab.special_ids
    for i, data in enumerate(vocab.token_bytes):
        if len(data) <= best or i in special:
            continue
        for m in _WS_RUN.finditer(data):
            if m.end() - m.start() > best:
                best, best_id = m.end() - m.start(), i
    return best, best_id


_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(data: bytes) -> str:
    """A one-line, unambiguous rendering of token bytes.

    UTF-8 text stays as it is; backslash, newline, carriage return and tab are escaped as in
    Python; other control or invisible characters become ``\\xNN`` / ``\\uNNNN``; bytes that
    are not valid UTF-8 become ``\\xNN``. Spaces stay spaces: quote the result to show them.
    """
    out = []
    for ch in data.decode("utf-8", errors="surrogateescape"):
        code = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif 0xDC80 <= code <= 0xDCFF:  # an undecodable byte, kept by surrogateescape
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch == " " or ch.isprintable():
            out.append(ch)
        elif code <= 0xFF:
            out.append(f"\\x{code:02x}")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return "".join(out)
