"""Regular expressions (ECMA-262 flavour, as JSON Schema uses them) to Grammar IR.

Parsing is interegular's, after :mod:`~maskc.compiler.frontends.regex_syntax` has refused
what ECMA-262 refuses and rewritten ECMA-only spellings (named groups, ``\\cX``); this
module handles what interegular leaves out (``^``/``$`` anchors at branch ends, repeated
ones too, ``\\uXXXX`` escapes and surrogate pairs, ECMA's ``.`` and ``\\s``) and turns its
character sets into code-point ranges. A ``char`` callback decides how each character
becomes bytes: plain UTF-8 for ``compile_regex``, JSON string escaping inside ``pattern``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator

import interegular
from interegular import patterns as P

from maskc.compiler.errors import RegexSyntaxError, UnsupportedRegex
from maskc.compiler.frontends.regex_syntax import ecma_rewrite
from maskc.compiler.ir import EMPTY, NOTHING, Node, alt, rep, seq, star
from maskc.compiler.utf8 import MAX_CODE_POINT, complement, normalize_ranges, utf8_node

__all__ = ["regex_to_ir", "CharEncoder", "split_anchors", "ECMA_SPACES", "LINE_TERMINATORS"]

CharEncoder = Callable[[list[tuple[int, int]]], Node]

# ECMA-262 WhiteSpace and LineTerminator code points (what `\s` means there).
ECMA_SPACES: list[tuple[int, int]] = [
    (0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
    (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF),
]
LINE_TERMINATORS: list[tuple[int, int]] = [(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]
_EXTRA_SPACES = "".join(
    chr(c) for lo, hi in ECMA_SPACES for c in range(lo, hi + 1) if chr(c) not in " \t\n\r\f\v"
)


_HEX = frozenset("0123456789abcdefABCDEF")


def _escape_char(c: str) -> str:
    if c.isalnum() or c == "_" or ord(c) > 0x7E:
        return c
    if ord(c) < 0x20 or ord(c) == 0x7F:
        return "\\x%02x" % ord(c)
    return "\\" + c


def _preprocess(pattern: str) -> str:
    """Rewrite ``\\uXXXX``, ``\\s`` and ``\\S`` into forms interegular parses with ECMA meaning."""
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            d = pattern[i + 1]
            if d == "u" and i + 6 <= n and all(h in "0123456789abcdefABCDEF" for h in pattern[i + 2 : i + 6]):
                code = int(pattern[i + 2 : i + 6], 16)
                low = pattern[i + 8 : i + 12] if pattern[i + 6 : i + 8] == "\\u" else ""
                if 0xD800 <= code < 0xDC00 and len(low) == 4 and all(h in _HEX for h in low) \
                        and 0xDC00 <= int(low, 16) < 0xE000:  # a surrogate pair is one code point
                    code = 0x10000 + ((code - 0xD800) << 10) + (int(low, 16) - 0xDC00)
                    i += 6
                out.append(_escape_char(chr(code)))
                i += 6
                continue
            if d == "u" and pattern[i + 2 : i + 3] == "{":
                end = pattern.find("}", i)
                if end > 0:
                    try:
                        out.append(_escape_char(chr(int(pattern[i + 3 : end], 16))))
                        i = end + 1
                        continue
                    except ValueError:
                        pass
            if d == "s":
                out.append("\\s" + _EXTRA_SPACES if in_class else "[\\s" + _EXTRA_SPACES + "]")
                i += 2
                continue
            if d == "S" and not in_class:
                out.append("[^\\s" + _EXTRA_SPACES + "]")
                i += 2
                continue
            if d == "d" and not in_class:
                out.append("[0-9]")
                i += 2
                continue
            if d == "/":
                out.append("/")
                i += 2
                continue
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
        elif c == "[":  # ECMA-262: a ']' right after '[' or '[^' closes the class
            in_class = True
            out.append(c)
            i += 1
            if pattern[i : i + 1] == "^":
                out.append("^")
                i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _scan(pattern: str) -> Iterator[tuple[int, str, int]]:
    """Unescaped characters outside character classes, with the group depth after each."""
    depth, in_class, i = 0, False, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
            i += 1
            continue
        if c == "[":
            in_class = True
            if pattern[i + 1 : i + 2] == "^":
                i += 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        yield i, c, depth
        i += 1


def split_anchors(pattern: str) -> list[tuple[bool, str, bool]]:
    """Split a pattern into top-level branches, each with its ``^`` and ``$`` anchors.

    Returns:
        ``(anchored_start, body, anchored_end)`` per top-level alternative.
    """
    branches: list[str] = []
    start = 0
    for i, c, depth in _scan(pattern):
        if c == "|" and depth == 0:
            branches.append(pattern[start:i])
            start = i + 1
    branches.append(pattern[start:])
    out: list[tuple[bool, str, bool]] = []
    for b in branches:
        # ECMA-262 anchors are assertions: "^^a$$" is "^a$"
        a_start = b.startswith("^")
        b = b.lstrip("^")
        a_end = False
        while any(c == "$" and i == len(b) - 1 for i, c, _ in _scan(b)):
            a_end, b = True, b[:-1]
        inner = _whole_group(b)
        if inner is not None and ("^" in inner or "$" in inner):
            # "(^a$|b)": anchors inside a group that spans the whole branch
            for s_in, body, e_in in split_anchors(inner):
                out.append((a_start or s_in, body, a_end or e_in))
            continue
        out.append((a_start, b, a_end))
    return out


def _whole_group(b: str) -> str | None:
    """The inside of ``b`` if ``b`` is one group, ``(...)`` or ``(?:...)``, with no quantifier."""
    if not b.startswith("(") or not b.endswith(")") or b.startswith("(?") and not b.startswith("(?:"):
        return None
    if any(c == ")" and depth == 0 and i != len(b) - 1 for i, c, depth in _scan(b)):
        return None
    return b[3:-1] if b.startswith("(?:") else b[1:-1]


def _chars_to_ranges(chars: frozenset[str]) -> list[tuple[int, int]]:
    return normalize_ranges((ord(c), ord(c)) for c in chars)


class _Converter:
    def __init__(self, encode: CharEncoder, source: str) -> None:
        self.encode = encode
        self.source = source
        self.cache: dict[tuple[tuple[int, int], ...], Node] = {}

    def chars(self, ranges: list[tuple[int, int]]) -> Node:
        key = tuple(ranges)
        node = self.cache.get(key)
        if node is None:
            node = self.encode(ranges) if ranges else NOTHING
            self.cache[key] = node
        return node

    def convert(self, p: object) -> Node:
        if isinstance(p, P.Pattern):
            if p.added_flags or p.removed_flags:
                raise UnsupportedRegex("inline flags are not supported", pattern=self.source)
            return alt(*(self.convert(o) for o in p.options))
        if isinstance(p, P._Concatenation):
            return seq(*(self.convert(q) for q in p.parts))
        if isinstance(p, P._Repeated):
            return rep(self.convert(p.base), p.min, p.max)
        if isinstance(p, P._CharGroup):
            ranges = _chars_to_ranges(p.chars)
            return self.chars(complement(ranges) if p.negated else ranges)
        if p is P._DOT:
            return self.chars(complement(LINE_TERMINATORS))
        if p is P._EMPTY:
            return EMPTY
        if isinstance(p, P._NonCapturing):
            raise UnsupportedRegex("lookaround assertions are not supported", pattern=self.source)
        raise UnsupportedRegex(f"unsupported regex construct {type(p).__name__}", pattern=self.source)


def regex_to_ir(pattern: str, encode: CharEncoder | None = None, *, search: bool = False) -> Node:
    """Parse ``pattern`` into IR.

    Results are memoized (IR is immutable): a schema that repeats a pattern, and the linter
    that compiles each subschema of a document, parse it once.

    Args:
        pattern: the regular expression.
        encode: turns a set of code points into IR (default: their UTF-8 bytes).
        search: JSON Schema semantics: the pattern may match anywhere unless a branch is
            anchored with ``^`` / ``$``. Without it the whole string must match and
            ``^`` / ``$`` at the ends are accepted and ignored.

    Raises:
        RegexSyntaxError: the pattern is malformed (``offset`` says where).
        UnsupportedRegex: a well-formed pattern uses a construct the grammar cannot express.
    """
    return _regex_to_ir(pattern, encode, search)


@functools.lru_cache(maxsize=512)
def _regex_to_ir(pattern: str, encode: CharEncoder | None, search: bool) -> Node:
    enc = encode or utf8_node
    conv = _Converter(enc, pattern)
    any_char = conv.chars([(0, MAX_CODE_POINT)])
    # branches by their anchors: a search wraps each group's union once (.*(a|b).* rather than
    # .*a.*|.*b.*, the same language: the separate wraps make a subset construction track, for
    # every branch, whether it has matched yet, 2^branches subsets); a full match is one group
    # without wraps
    groups: dict[tuple[bool, bool], list[Node]] = {}
    for a_start, body, a_end in split_anchors(ecma_rewrite(pattern)):
        if _has_stray_anchor(body):
            raise UnsupportedRegex(
                "anchors (^, $) inside a branch are not supported (only at its start and end)", pattern=pattern
            )
        try:
            parsed = interegular.parse_pattern(_preprocess(body))
        except P.Unsupported as e:
            raise UnsupportedRegex(f"unsupported construct: {e}", pattern=pattern) from e
        except Exception as e:  # interegular raises several bare types on bad syntax
            offset = getattr(e, "index", None)
            raise RegexSyntaxError(
                f"invalid syntax ({type(e).__name__}{': ' + str(e) if str(e) else ''})",
                pattern=pattern,
                offset=offset if isinstance(offset, int) else None,
            ) from e
        groups.setdefault((a_start, a_end) if search else (True, True), []).append(conv.convert(parsed))
    parts: list[Node] = []
    for (a_start, a_end), bodies in groups.items():
        node = alt(*bodies)
        if not a_start:
            node = seq(star(any_char), node)
        if not a_end:
            node = seq(node, star(any_char))
        parts.append(node)
    return alt(*parts)


def _has_stray_anchor(body: str) -> bool:
    """Whether ``^`` or ``$`` appears outside a character class (after the branch ends were cut)."""
    return any(c in "^$" for _, c, _ in _scan(body))
