"""IR for JSON lexical pieces: strings (escaping), numbers, literals and whitespace layout.

Two string encodings exist. ``json_char`` admits every JSON spelling of a character
(raw UTF-8 or any escape) and is used where only the character count matters.
``canonical_chars`` gives each character exactly one spelling (``json.dumps`` style),
so that a byte-level language equals a character-level one; ``pattern``, ``format``,
``enum`` and property-name exclusion rely on it.
"""

from __future__ import annotations

from dataclasses import dataclass

from maskc.compiler.ir import (
    EMPTY,
    ByteSet,
    Node,
    alt,
    byte_range,
    byte_set,
    lit,
    opt,
    rep,
    seq,
    star,
)
from maskc.compiler.options import Whitespace
from maskc.compiler.utf8 import MAX_CODE_POINT, normalize_ranges, utf8_node

__all__ = [
    "JSON_CHAR",
    "canonical_chars",
    "CANONICAL_ANY_CHAR",
    "json_string",
    "INTEGER",
    "NUMBER",
    "Layout",
]

_HEX = ByteSet(((0x30, 0x39), (0x41, 0x46), (0x61, 0x66)))
# \uXXXX without the surrogate block D800-DFFF: a surrogate pair would count as two
# characters here but one code point for maxLength, which could admit a too-short string.
_NON_SURROGATE_U = alt(
    seq(ByteSet(((0x30, 0x39), (0x41, 0x43), (0x61, 0x63))), _HEX, _HEX, _HEX),
    seq(byte_set(b"dD"), byte_range(0x30, 0x37), _HEX, _HEX),
    seq(ByteSet(((0x45, 0x46), (0x65, 0x66))), _HEX, _HEX, _HEX),
)
_ESCAPE = seq(lit("\\"), alt(byte_set(b'"\\/bfnrt'), seq(lit("u"), _NON_SURROGATE_U)))
_UNESCAPED = utf8_node([(0x20, 0x21), (0x23, 0x5B), (0x5D, MAX_CODE_POINT)])

JSON_CHAR: Node = alt(_UNESCAPED, _ESCAPE)
"""One character of a JSON string, in any legal spelling."""

_SHORT_ESCAPES = {0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r", 0x22: '\\"', 0x5C: "\\\\"}


def canonical_chars(ranges: list[tuple[int, int]]) -> Node:
    """One character from ``ranges`` in its single canonical JSON spelling."""
    ranges = normalize_ranges(ranges)
    plain: list[tuple[int, int]] = []
    special: list[Node] = []
    for lo, hi in ranges:
        for cut_lo, cut_hi in ((lo, min(hi, 0x1F)), (max(lo, 0x20), hi)):
            if cut_lo > cut_hi:
                continue
            if cut_hi <= 0x1F:
                for c in range(cut_lo, cut_hi + 1):
                    special.append(lit(_SHORT_ESCAPES.get(c, "\\u%04x" % c)))
                continue
            # split out '"' and '\\'
            start = cut_lo
            for c in (0x22, 0x5C):
                if cut_lo <= c <= cut_hi:
                    if start <= c - 1:
                        plain.append((start, c - 1))
                    special.append(lit(_SHORT_ESCAPES[c]))
                    start = c + 1
            if start <= cut_hi:
                plain.append((start, cut_hi))
    parts: list[Node] = []
    if plain:
        parts.append(utf8_node(plain))
    parts.extend(special)
    return alt(*parts)


CANONICAL_ANY_CHAR: Node = canonical_chars([(0, MAX_CODE_POINT)])


def json_string(min_len: int = 0, max_len: int | None = None) -> Node:
    """A quoted JSON string of ``min_len..max_len`` characters (code points)."""
    return seq(lit('"'), rep(JSON_CHAR, min_len, max_len), lit('"'))


_DIGIT = byte_range(0x30, 0x39)
_INT_BODY = seq(opt(lit("-")), alt(lit("0"), seq(byte_range(0x31, 0x39), star(_DIGIT))))
INTEGER: Node = _INT_BODY
NUMBER: Node = seq(
    _INT_BODY,
    opt(seq(lit("."), rep(_DIGIT, 1, None))),
    opt(seq(byte_set(b"eE"), opt(byte_set(b"+-")), rep(_DIGIT, 1, None))),
)


@dataclass(frozen=True, slots=True)
class Layout:
    """Separators of one container at nesting ``depth`` under a whitespace policy."""

    ws: Whitespace
    depth: int

    def _indent(self, depth: int) -> bytes:
        return b"\n" + b" " * (self.ws.n * depth)

    @property
    def gap(self) -> Node:
        """Free whitespace (flexible only)."""
        if self.ws.mode == "flexible" and self.ws.n > 0:
            return rep(byte_set(b" \t\n\r"), 0, self.ws.n)
        return EMPTY

    @property
    def first(self) -> Node:
        if self.ws.mode == "pretty":
            return lit(self._indent(self.depth + 1))
        return self.gap

    @property
    def sep(self) -> Node:
        if self.ws.mode == "pretty":
            return lit(b"," + self._indent(self.depth + 1))
        return seq(self.gap, lit(","), self.gap)

    @property
    def colon(self) -> Node:
        if self.ws.mode == "pretty":
            return lit(": ")
        return seq(self.gap, lit(":"), self.gap)

    def close(self, bracket: str) -> Node:
        if self.ws.mode == "pretty":
            return lit(self._indent(self.depth) + bracket.encode())
        return seq(self.gap, lit(bracket))

    def close_empty(self, bracket: str) -> Node:
        if self.ws.mode == "flexible":
            return seq(self.gap, lit(bracket))
        return lit(bracket)
