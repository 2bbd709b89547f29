"""Where a JSON pointer lands in a JSON document's text: the line and column of its key.

Findings name places by JSON pointer (RFC 6901); editors and code scanning want a line and
a column. :func:`locate` scans the text once per pointer with a small exact JSON scanner
(strings with escapes, nested containers) and returns the 1-based position of the key that
the pointer's last token names in an object, or of the element it names in an array.

Positions count lines after LF, CRLF or a lone CR, and columns in Unicode code points
(Python ``str`` indices), not UTF-16 code units: SARIF output says so with
``columnKind: "unicodeCodePoints"``. A leading byte-order mark is not counted.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterator

__all__ = ["Locator", "locate", "split_pointer"]

_WS = " \t\n\r"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_INDEX = re.compile(r"0|[1-9][0-9]*")
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_SCALAR = re.compile(r"[^,\]} \t\n\r]*")
_STRUCTURE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]]', re.DOTALL)


def split_pointer(pointer: str) -> list[str]:
    """The reference tokens of a JSON pointer, unescaped (``~1`` → ``/``, then ``~0`` → ``~``).

    Raises:
        ValueError: ``pointer`` is neither empty nor starts with ``/``.
    """
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise ValueError(f"a JSON pointer is empty or starts with '/', got {pointer!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


class _Malformed(Exception):
    """The text is not JSON where the scanner looked; the deepest position found stands."""


class Locator:
    """Positions of JSON pointers in one document's text (the line table is built once).

    Example:
        >>> Locator('{\\n  "a": {"b": 1}\\n}').position("/a/b")
        (2, 9)
    """

    def __init__(self, text: str) -> None:
        self._skip = 1 if text.startswith("\ufeff") else 0
        self._text = text
        self._line_starts = [0, *(m.end() for m in _LINE_BREAK.finditer(text))]
        # Where the text is JSON, each container's end is found once, by one scan, and each
        # container's members and elements once, on their first lookup: a document's
        # findings are then placed in time linear in its size (a scan per finding took
        # minutes on a 500 KB schema with thousands of findings).
        self._ends: dict[int, int] | None = _container_ends(text[self._skip:], self._skip)
        self._keys: dict[int, dict[str, tuple[int, int]]] = {}
        self._items: dict[int, list[int]] = {}

    def offset(self, pointer: str) -> int:
        """The character offset of what ``pointer`` names (its key, or its array element);
        the root, and a pointer none of whose tokens exists, give the document's start. A
        pointer that leaves the document part way gives its deepest existing ancestor.

        Raises:
            ValueError: ``pointer`` is not a JSON pointer.
        """
        tokens = split_pointer(pointer)
        found = self._skip
        try:
            at = self._ws(self._skip)
            for token in tokens:
                step = self._step(at, token)
                if step is None:
                    break
                found, at = step
        except _Malformed:
            pass
        return found

    def position(self, pointer: str) -> tuple[int, int]:
        """1-based (line, column) of :meth:`offset`; columns count code points."""
        return self.line_column(self.offset(pointer))

    def line_column(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._line_starts, offset) - 1
        start = self._line_starts[line]
        skip = self._skip if line == 0 else 0
        return line + 1, max(offset - start - skip, 0) + 1

    # -- the scanner ------------------------------------------------------------------

    def _char(self, i: int) -> str:
        if i >= len(self._text):
            raise _Malformed
        return self._text[i]

    def _ws(self, i: int) -> int:
        text = self._text
        while i < len(text) and text[i] in _WS:
            i += 1
        return i

    def _step(self, at: int, token: str) -> tuple[int, int] | None:
        """(where the member or element named by ``token`` starts, where its value starts)
        in the container at ``at``, or None when it holds no such member."""
        opener = self._char(at)
        if opener == "{":
            return self._member(at, token)
        if opener == "[":
            return self._element(at, token) if _INDEX.fullmatch(token) else None
        return None

    def _member(self, at: int, token: str) -> tuple[int, int] | None:
        if self._ends is not None:  # (JSON text: the object's keys, read once)
            keys = self._keys.get(at)
            if keys is None:
                keys = self._keys[at] = {key: (key_at, value_at) for key, key_at, value_at in self._members(at)}
            return keys.get(token)  # (the last duplicate wins, as JSON decoders do)
        found: tuple[int, int] | None = None
        try:
            for key, key_at, value_at in self._members(at):
                if key == token:
                    found = (key_at, value_at)  # the last duplicate wins, as JSON decoders do
        except _Malformed as broken:
            if found is None or not broken.args:
                raise _Malformed from None
            return found  # the text breaks off in a value after the member: its place stands
        return found

    def _members(self, at: int) -> Iterator[tuple[str, int, int]]:
        """(key, its offset, its value's offset) of each member of the object at ``at``, in
        order. Raises :class:`_Malformed` where the text is not JSON, with an argument where it
        breaks off inside a value (the members before it, and that one, stand)."""
        i = self._ws(at + 1)
        if self._char(i) == "}":
            return
        while True:
            key_at = i
            i, key = self._string(i)
            i = self._ws(i)
            if self._char(i) != ":":
                raise _Malformed
            value_at = self._ws(i + 1)
            yield key, key_at, value_at
            try:
                i = self._ws(self._value_end(value_at))
            except _Malformed:
                raise _Malformed(value_at) from None
            if self._char(i) == "}":
                return
            if self._char(i) != ",":
                raise _Malformed
            i = self._ws(i + 1)

    def _element(self, at: int, token: str) -> tuple[int, int] | None:
        wanted = int(token)
        if self._ends is not None:  # (JSON text: the array's elements, read once)
            items = self._items.get(at)
            if items is None:
                items = self._items[at] = list(self._elements(at))
            return (items[wanted], items[wanted]) if wanted < len(items) else None
        for index, i in enumerate(self._elements(at)):
            if index == wanted:
                return i, i
        return None

    def _elements(self, at: int) -> Iterator[int]:
        """Where each element of the array at ``at`` starts, in order (:class:`_Malformed`
        where the text is not JSON)."""
        i = self._ws(at + 1)
        if self._char(i) == "]":
            return
        while True:
            self._char(i)  # an element, not the end of the text
            yield i
            i = self._ws(self._value_end(i))
            if self._char(i) == "]":
                return
            if self._char(i) != ",":
                raise _Malformed
            i = self._ws(i + 1)

    def _string(self, i: int) -> tuple[int, str]:
        """(the offset past the string at ``i``, its decoded value)."""
        if self._char(i) != '"':
            raise _Malformed
        whole = _STRING.match(self._text, i)
        if whole is None:  # (no closing quote: the text breaks off inside the string)
            raise _Malformed
        j = whole.end() - 1
        try:
            decoded = json.loads(self._text[i:j + 1])
        except ValueError:
            raise _Malformed from None
        if not isinstance(decoded, str):
            raise _Malformed
        return j + 1, decoded

    def _value_end(self, i: int) -> int:
        """The offset past the value at ``i`` (nested containers skipped whole)."""
        c = self._char(i)
        if c == '"':
            return self._string(i)[0]
        if c not in "{[":
            scalar = _SCALAR.match(self._text, i)
            return scalar.end() if scalar is not None else i
        if self._ends is not None:
            return self._ends[i]
        depth = 0
        while True:
            c = self._char(i)
            if c == '"':
                i = self._string(i)[0]
                continue
            if c in "{[":
                depth += 1
            elif c in "}]":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1


def _container_ends(text: str, skip: int) -> dict[int, int] | None:
    """Offset of each ``{`` or ``[`` -> the offset past its closing bracket, where ``text``
    (from offset ``skip`` of the document) is JSON; None where it is not, and the scanner
    then reads the text as it comes."""
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return None
    ends: dict[int, int] = {}
    opened: list[int] = []
    for m in _STRUCTURE.finditer(text):
        c = m.group()
        if c == "{" or c == "[":
            opened.append(m.start() + skip)
        elif c == "}" or c == "]":
            ends[opened.pop()] = m.end() + skip
    return ends


def locate(text: str, pointer: str) -> tuple[int, int]:
    """1-based (line, column) of the key (or array element) that ``pointer``'s last token
    names in the JSON ``text``; ``(1, 1)`` for the root. A pointer that does not exist in
    the text gives its deepest existing ancestor's position. Columns count code points.

    Args:
        text: A JSON document.
        pointer: A JSON pointer (RFC 6901), ``""`` for the root.

    Raises:
        ValueError: ``pointer`` is not a JSON pointer.

    Example:
        >>> locate('{"a": [10, {"b~/c": 2}]}', "/a/1/b~0~1c")
        (1, 13)
    """
    return Locator(text).position(pointer)
