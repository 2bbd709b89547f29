"""Unicode code-point ranges to UTF-8 byte-range sequences.

The only place where characters become bytes: a set of code points (as inclusive ranges)
becomes an :mod:`maskc.compiler.ir` union of byte sequences that matches exactly the
well-formed UTF-8 encodings of those code points (no surrogates, no overlong forms).
"""

from __future__ import annotations

from collections.abc import Iterable

from maskc.compiler.ir import ByteSet, Node, NOTHING, alt, seq

__all__ = ["MAX_CODE_POINT", "SURROGATES", "normalize_ranges", "complement", "utf8_node", "whole_chars"]

MAX_CODE_POINT = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)

# Code-point boundaries at which the UTF-8 length changes.
_LENGTH_BOUNDS = ((0x0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, 0x10FFFF))


def normalize_ranges(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sort and merge code-point ranges; surrogates are removed (they have no UTF-8 form)."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if lo > hi:
            continue
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    cut: list[tuple[int, int]] = []
    s_lo, s_hi = SURROGATES
    for lo, hi in out:
        if hi < s_lo or lo > s_hi:
            cut.append((lo, hi))
            continue
        if lo < s_lo:
            cut.append((lo, s_lo - 1))
        if hi > s_hi:
            cut.append((s_hi + 1, hi))
    return cut


def complement(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """All scalar values not in ``ranges``."""
    out: list[tuple[int, int]] = []
    nxt = 0
    for lo, hi in normalize_ranges(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODE_POINT:
        out.append((nxt, MAX_CODE_POINT))
    return normalize_ranges(out)


def _encode_split(lo: int, hi: int, n: int) -> list[list[tuple[int, int]]]:
    """Split [lo, hi] (all of UTF-8 length n) into byte-range sequences (Russ Cox's utf8 ranges)."""
    if n == 1:
        return [[(lo, hi)]]
    # Split so that all but the first byte cover full continuation ranges.
    for i in range(1, n):
        m = (1 << (6 * i)) - 1
        if lo & ~m != hi & ~m:
            if lo & m != 0:
                return _encode_split(lo, lo | m, n) + _encode_split((lo | m) + 1, hi, n)
            if hi & m != m:
                return _encode_split(lo, (hi & ~m) - 1, n) + _encode_split(hi & ~m, hi, n)
    a = chr(lo).encode("utf-8")
    b = chr(hi).encode("utf-8")
    return [[(a[i], b[i]) for i in range(n)]]


def utf8_node(ranges: Iterable[tuple[int, int]]) -> Node:
    """IR matching one character whose code point lies in ``ranges``, encoded as UTF-8."""
    parts: list[Node] = []
    for lo, hi in normalize_ranges(ranges):
        for n, (blo, bhi) in enumerate(_LENGTH_BOUNDS, start=1):
            a, b = max(lo, blo), min(hi, bhi)
            if a > b:
                continue
            for byte_ranges in _encode_split(a, b, n):
                parts.append(seq(*(ByteSet((r,)) for r in byte_ranges)))
    if not parts:
        return NOTHING
    return alt(*parts)


def whole_chars(data: bytes) -> str:
    """``data`` cut to whole UTF-8 characters (a forced continuation may end mid-character)."""
    for cut in range(len(data), max(-1, len(data) - 4), -1):
        try:
            return data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return ""
