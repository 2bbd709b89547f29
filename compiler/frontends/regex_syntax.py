"""ECMA-262 pattern syntax (what JSON Schema's ``pattern`` means), checked before parsing.

interegular parses Python's dialect: it accepts ``(?P<x>...)``, ``a**`` and ``a{2,1}``, and
it does not know ECMA's named groups ``(?<x>...)``. :func:`ecma_rewrite` walks a pattern
once, refuses what ECMA-262 refuses with a :class:`RegexSyntaxError` carrying the offset in
the pattern as written, and rewrites the ECMA spellings interegular lacks into ones it parses
with the same meaning: ``(?<name>`` becomes ``(?:``, ``\\cX`` and ``\\0`` become ``\\xHH``.

Where ECMA-262 and its web-compatibility annex disagree (a lone ``{``, ``{,N}``, an escaped
letter that means nothing), the stricter Unicode-mode reading is taken: those are errors,
never a silent literal. Character classes follow ECMA: a ``]`` right after ``[`` or ``[^``
closes the class, so ``[]`` matches nothing and ``[^]`` any character.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from maskc.compiler.errors import RegexSyntaxError, UnsupportedRegex

__all__ = ["ecma_rewrite", "class_end"]

# letters ECMA-262 gives a meaning after a backslash (outside and inside classes)
_LETTER_ESCAPES = frozenset("bBcdDfknpPrsStuvwWx")
_CONTROL = {"n": 10, "t": 9, "r": 13, "f": 12, "v": 11}
_GROUP_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_QUANTIFIER = re.compile(r"\{(\d+)(,(\d*))?\}")
_FLAGS = re.compile(r"[a-zA-Z]*(-[a-zA-Z]*)?")


class _Escape:
    """One escape at ``pattern[at]``: its length, the text interegular gets, its code point."""

    __slots__ = ("length", "text", "code")

    def __init__(self, length: int, text: str, code: int | None) -> None:
        self.length, self.text, self.code = length, text, code


def _escape(pattern: str, at: int, *, in_class: bool) -> _Escape:
    def fail(message: str) -> RegexSyntaxError:
        return RegexSyntaxError(message, pattern=pattern, offset=at)

    if at + 1 >= len(pattern):
        raise fail("a pattern cannot end with a lone backslash")
    d = pattern[at + 1]
    code: int | None = None
    if d in "upP" and pattern[at + 2 : at + 3] == "{":  # \u{...}, \p{...}: read to the brace
        end = pattern.find("}", at)
        if end < 0:
            raise fail(f"\\{d}{{ without a closing }}")
        text = pattern[at : end + 1]
        if d == "u":
            try:
                code = int(pattern[at + 3 : end], 16)
            except ValueError:
                raise fail("\\u{...} must hold hexadecimal digits") from None
        return _Escape(len(text), text, code)
    if d == "c":
        letter = pattern[at + 2 : at + 3]
        if not (letter.isascii() and letter.isalpha()):
            raise fail("\\c must be followed by a letter A-Z or a-z")
        code = ord(letter) % 32
        return _Escape(3, "\\x%02x" % code, code)
    if d == "0" and not pattern[at + 2 : at + 3].isdigit():
        return _Escape(2, "\\x00", 0)
    if d == "k" and not in_class:
        raise UnsupportedRegex("backreferences (\\k<name>) are not supported", pattern=pattern, offset=at)
    if d.isascii() and d.isalpha() and d not in _LETTER_ESCAPES:
        raise fail(f"\\{d} is not an ECMA-262 escape (Python's \\A, \\Z, \\a are not either)")
    if d in _CONTROL:
        code = _CONTROL[d]
    elif d == "b" and in_class:
        code = 8
    elif d in "xu":
        digits = 2 if d == "x" else 4
        hexa = pattern[at + 2 : at + 2 + digits]
        if len(hexa) == digits and all(h in "0123456789abcdefABCDEF" for h in hexa):
            return _Escape(2 + digits, pattern[at : at + 2 + digits], int(hexa, 16))
    elif not d.isalnum():
        code = ord(d)
    return _Escape(2, pattern[at : at + 2], code)


def class_end(pattern: str, at: int) -> int:
    """The index of the ``]`` that closes the class opened at ``pattern[at]``, or -1.

    ECMA-262: the first unescaped ``]`` closes, even right after ``[`` or ``[^``.
    """
    i = at + 1
    if pattern[i : i + 1] == "^":
        i += 1
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            if pattern[i + 1 : i + 2] in ("u", "p", "P") and pattern[i + 2 : i + 3] == "{":
                close = pattern.find("}", i)
                i = close + 1 if close > 0 else i + 2
            else:
                i += 2
            continue
        if c == "]":
            return i
        i += 1
    return -1


def _class(pattern: str, at: int, end: int) -> str:
    """The class ``pattern[at : end + 1]`` rewritten for interegular, its ranges checked."""
    out = ["["]
    i = at + 1
    if pattern[i : i + 1] == "^":
        out.append("^")
        i += 1
    items: list[tuple[int, int | None, bool]] = []  # (offset, code point or None, an unescaped '-')
    while i < end:
        if pattern[i] == "\\":
            esc = _escape(pattern, i, in_class=True)
            out.append(esc.text)
            code, start = esc.code, i
            i += esc.length
            if code is not None and 0xD800 <= code < 0xDC00 and pattern[i : i + 2] == "\\u":
                low = _escape(pattern, i, in_class=True)
                if low.code is not None and 0xDC00 <= low.code < 0xE000:  # a surrogate pair: one code point
                    out.append(low.text)
                    code = 0x10000 + ((code - 0xD800) << 10) + (low.code - 0xDC00)
                    i += low.length
            items.append((start, code, False))
        else:
            out.append(pattern[i])
            items.append((i, ord(pattern[i]), pattern[i] == "-"))
            i += 1
    k = 0
    while k < len(items):
        if k + 2 < len(items) and items[k + 1][2]:
            (at_lo, lo, _), (_, hi, _) = items[k], items[k + 2]
            if lo is not None and hi is not None and lo > hi:
                raise RegexSyntaxError("character range out of order", pattern=pattern, offset=at_lo)
            k += 3
        else:
            k += 1
    out.append("]")
    return "".join(out)


def _group(pattern: str, at: int) -> tuple[int, str]:
    """The opening of the group at ``pattern[at]``: its length and the text interegular gets."""
    if pattern[at + 1 : at + 2] != "?":
        return 1, "("
    rest = pattern[at + 2 :]
    if rest[:1] in (":", "=", "!") or rest[:2] in ("<=", "<!"):
        n = 3 if rest[:1] != "<" else 4
        return n, pattern[at : at + n]
    if rest[:1] == "<":
        m = _GROUP_NAME.match(rest, 1)
        if m is None or rest[m.end() : m.end() + 1] != ">":
            raise RegexSyntaxError("a group name must be an identifier closed by '>'", pattern=pattern,
                                   offset=at + 3)
        return 2 + m.end() + 1, "(?:"
    if rest[:1] == "P":
        raise RegexSyntaxError("(?P...) is Python syntax; ECMA-262 names a group (?<name>...)",
                               pattern=pattern, offset=at)
    if rest[:1] == "#":
        raise RegexSyntaxError("(?#...) comments are Python syntax, not ECMA-262", pattern=pattern, offset=at)
    flags = _FLAGS.match(rest)
    if flags is not None and flags.end() > 0 and rest[flags.end() : flags.end() + 1] == ":":
        n = 2 + flags.end() + 1  # (?i:...) modifiers: interegular reads them, the front end refuses them
        return n, pattern[at : at + n]
    raise RegexSyntaxError("invalid group: '(?' must start (?:, (?=, (?!, (?<=, (?<! or (?<name> "
                           "(inline flags such as (?i) are Python syntax)", pattern=pattern, offset=at)


def _tokens(pattern: str) -> Iterator[tuple[int, str, str]]:
    """``(offset, kind, text for interegular)`` per item; kinds: atom, open, close, bar, anchor, quant."""
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            esc = _escape(pattern, i, in_class=False)
            yield i, "anchor" if pattern[i + 1] in "bB" else "atom", esc.text
            i += esc.length
        elif c == "[":
            end = class_end(pattern, i)
            if end < 0:
                raise RegexSyntaxError("unterminated character class", pattern=pattern, offset=i)
            yield i, "atom", _class(pattern, i, end)
            i = end + 1
        elif c == "(":
            length, text = _group(pattern, i)
            yield i, "open", text
            i += length
        elif c in "*+?{":
            if c == "{":
                m = _QUANTIFIER.match(pattern, i)
                if m is None:
                    upto = re.match(r"\{,(\d+)\}", pattern[i:])
                    hint = f"; write {{0,{upto.group(1)}}}" if upto else " (escape it as \\{)"
                    raise RegexSyntaxError(f"'{{' does not start a quantifier{hint}", pattern=pattern, offset=i)
                lo, hi = int(m.group(1)), m.group(3)
                if hi and int(hi) < lo:
                    raise RegexSyntaxError(f"numbers out of order in the quantifier {m.group(0)}",
                                           pattern=pattern, offset=i)
                end = m.end()
            else:
                end = i + 1
            if pattern[end : end + 1] == "?":  # lazy: the same language
                end += 1
            yield i, "quant", pattern[i:end]
            i = end
        else:
            yield i, {")": "close", "|": "bar", "^": "anchor", "$": "anchor"}.get(c, "atom"), c
            i += 1


def ecma_rewrite(pattern: str) -> str:
    """Check ``pattern`` against ECMA-262 syntax and rewrite it for interegular.

    Raises:
        RegexSyntaxError: not ECMA-262 syntax; ``offset`` indexes ``pattern``.
        UnsupportedRegex: a backreference by name.
    """
    out: list[str] = []
    opened: list[int] = []
    last = "bar"  # what a quantifier would apply to
    for at, kind, text in _tokens(pattern):
        if kind == "quant":
            if last == "quant":
                raise RegexSyntaxError("a quantifier cannot follow another quantifier", pattern=pattern, offset=at)
            if last != "atom" and last != "close":
                raise RegexSyntaxError("nothing to repeat", pattern=pattern, offset=at)
        elif kind == "open":
            opened.append(at)
        elif kind == "close":
            if not opened:
                raise RegexSyntaxError("unmatched ')'", pattern=pattern, offset=at)
            opened.pop()
        out.append(text)
        last = kind
    if opened:
        raise RegexSyntaxError("missing ')'", pattern=pattern, offset=opened[-1])
    return "".join(out)
