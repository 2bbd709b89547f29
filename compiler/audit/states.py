"""What the grammar audit knows about the states of a byte DFA: kinds, witnesses, forced runs.

Input: a :class:`~maskc.compiler.dfa.Dfa` (a regular grammar's, or a compiled artifact's).
Output: arrays over states — a *kind* per state derived from the bytes it accepts (see
:func:`state_kinds`), the blocks of states that no string as long as the longest token tells
apart (so each block is audited once), a shortest byte prefix to each state (the witness a
finding shows), and the forced byte run that starts at each state (what a jump-forward
engine would insert).
"""

from __future__ import annotations

from collections import deque
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from maskc.compiler.dfa import Dfa
from maskc.compiler.minimize import refine

__all__ = [
    "KINDS",
    "STRUCTURAL_BYTES",
    "StateKind",
    "WHITESPACE_BYTES",
    "Prefixes",
    "forced_runs",
    "live_bytes",
    "state_blocks",
    "state_kinds",
    "structural_steps",
]

StateKind = Literal["string", "utf8", "escape", "structural", "number", "value", "literal", "other", "end"]

KINDS: tuple[StateKind, ...] = ("string", "utf8", "escape", "structural", "number", "value", "literal", "other",
                                "end")
"""Every state kind, in the order reports list them."""

STRUCTURAL_BYTES = b'{}[],:"'
WHITESPACE_BYTES = b" \t\n\r"

_PRINTABLE = np.arange(0x20, 0x7F)
_FREE_TEXT = 64  # a state that accepts this many printable ASCII bytes is inside free text
_ESCAPES = frozenset(b'"\\/bfnrtu')
_HEX = frozenset(b"0123456789abcdefABCDEF")
_NUMBER = frozenset(b"0123456789+-.eE,}]" + WHITESPACE_BYTES)
_DIGITS = frozenset(b"0123456789")
_VALUE_STARTS = (frozenset(b'"'), frozenset(b"{"), frozenset(b"["), frozenset(b"-0123456789"), frozenset(b"tfn"))


def _mask(chars: bytes | frozenset[int]) -> NDArray[np.bool_]:
    out = np.zeros(256, dtype=np.bool_)
    out[list(chars)] = True
    return out


_STRUCT = _mask(STRUCTURAL_BYTES)
_STRUCT_OR_WS = _mask(STRUCTURAL_BYTES + WHITESPACE_BYTES)


def live_bytes(dfa: Dfa) -> NDArray[np.bool_]:
    """``[states, 256]``: whether each byte has a transition from each state."""
    return np.asarray((dfa.trans >= 0)[:, dfa.byte_class.astype(np.int64)], dtype=np.bool_)


def _kind(ok: NDArray[np.bool_]) -> StateKind:
    live = frozenset(np.flatnonzero(ok).tolist())
    if not live:
        return "end"
    if int(ok[_PRINTABLE].sum()) >= _FREE_TEXT:
        return "string"
    if min(live) >= 0x80:
        return "utf8"
    if (live <= _ESCAPES and {ord('"'), ord("\\"), ord("u")} <= live) or (live <= _HEX and len(live) >= 16):
        return "escape"
    if bool(_STRUCT_OR_WS[list(live)].all()):
        return "structural"
    if live & _DIGITS and live <= _NUMBER:
        return "number"
    if sum(1 for family in _VALUE_STARTS if live & family) >= 2:
        return "value"
    if len(live) == 1:
        return "literal"
    return "other"


def state_kinds(dfa: Dfa) -> list[StateKind]:
    """The kind of each state, from the set of bytes it accepts (checked in this order).

    ``end``: no byte (only the end of the output). ``string``: at least 64 of the 95
    printable ASCII bytes (inside free text). ``utf8``: only bytes >= 0x80 (inside a multi-byte
    character). ``escape``: after a backslash in a JSON string (only ``"\\/bfnrtu``, with
    ``"``, ``\\`` and ``u``) or in its ``\\uXXXX`` (at least 16 of the 22 hex digits, nothing
    else). ``structural``: only JSON structure
    ``{}[],:"`` and whitespace (before a key, after a key, after a value). ``number``: a
    digit, and nothing but number bytes, closers and whitespace. ``value``: the start of a
    value, where at least two of string, object, array, number and literal can begin.
    ``literal``: exactly one byte (inside a key, an enum value, ``true``). ``other``: the
    rest (patterns, formats, enums with several branches). The kinds are a heuristic for
    JSON-shaped grammars; for other grammars they still partition the states.
    """
    ok = live_bytes(dfa)
    memo: dict[bytes, StateKind] = {}
    out: list[StateKind] = []
    for row in ok:
        key = np.packbits(row).tobytes()
        kind = memo.get(key)
        if kind is None:
            kind = memo[key] = _kind(row)
        out.append(kind)
    return out


def structural_steps(dfa: Dfa, kinds: list[StateKind]) -> NDArray[np.bool_]:
    """``[states, 256]``: whether reading the byte in the state writes JSON structure.

    A structural byte (``{}[],:"``) is structure except inside free text, where only the
    closing ``"`` is, and after a backslash, where it is an escaped character.
    """
    code = np.asarray([KINDS.index(k) for k in kinds], dtype=np.int64)
    steps = live_bytes(dfa) & _STRUCT[None, :]
    in_text = code == KINDS.index("string")
    steps[in_text] &= _mask(b'"')[None, :]
    steps[code == KINDS.index("escape")] = False
    return steps


def state_blocks(dfa: Dfa, depth: int) -> NDArray[np.int64]:
    """Blocks of states that no string of at most ``depth`` bytes tells apart.

    States of one block accept the same bytes and the same tokens of at most ``depth``
    bytes, walking through states of the same kinds, so everything the audit computes from
    tokens is the same for all of them (Moore refinement cut at ``depth``, as alignment
    shares masks).
    """
    return refine(dfa.trans, dfa.accepting.astype(np.int64), max_rounds=max(1, depth))


_EXIT = -2  # the step of a counted loop's exit in a prefix tree


class Prefixes:
    """A shortest byte prefix to every state: a breadth-first tree from the start, visiting
    classes in order, each class written as its first printable byte when it has one."""

    def __init__(self, dfa: Dfa) -> None:
        self._rep = _class_bytes(dfa)
        n = dfa.num_states
        self._parent = [-1] * n
        self._byte = [-1] * n
        self._parent[0] = 0
        self._loops: dict[int, bytes] = {}  # a state past a loop's exit -> the bytes from the head
        self._items: dict[int, bytes] = {}
        rows = dfa.trans.tolist()
        counters = dfa.counters
        self._heads = (counters.exit >= 0).tolist() if counters is not None else []
        self._chains = counters.chains() if counters is not None else []
        queue = deque([0])
        while queue:
            s = queue.popleft()
            for c, t in enumerate(rows[s]):
                if t >= 0 and self._parent[t] < 0:
                    self._parent[t] = s
                    self._byte[t] = self._rep[c]
                    queue.append(t)
            if counters is not None and counters.exit[s] >= 0:
                e, items = self._through_loop(dfa, rows, s)
                if e >= 0 and self._parent[e] < 0:
                    self._loops[e] = items
                    self._parent[e] = s
                    self._byte[e] = _EXIT
                    queue.append(e)

    def _through_loop(self, dfa: Dfa, rows: list[list[int]], head: int) -> tuple[int, bytes]:
        """From a loop's ``head`` (reached by its prefix), the state its loop exits to and the
        bytes that get there: shortest items, one arrival each, until the count runs out;
        ``(-1, b"")`` when no item leads on."""
        counters = dfa.counters
        assert counters is not None
        region = counters.region.tolist()
        chains = self._chains
        q, counts = counters.walk_stack(dfa, 0, counters.zeros(0, chains), self.prefix(head), chains)
        if q != head:
            return -1, b""
        k = region[head]
        count = counts[-1]
        out = bytearray()
        # Shortest items up to the last few arrivals, then the shortest way to make the
        # last arrival at ``head`` itself, so that its own exit is taken.
        rest = min(int(counters.span[k]) - count, region.count(k))
        while int(counters.span[k]) - count > rest:
            step = self._items.get(q)
            if step is None:
                step = self._items[q] = self._item(rows, region, q, -1)
            if not step:
                return -1, b""
            q, counts = counters.walk_stack(dfa, q, counts, step, chains)
            out += step
            if q < 0 or region[q] != k:
                return -1, b""
            count = counts[-1]
        tail = self._finish(rows, region, q, head, rest)
        if tail is None:
            return -1, b""
        q, counts = counters.walk_stack(dfa, q, counts, tail, chains)
        if q < 0 or region[q] == k:
            return -1, b""
        return q, bytes(out + tail)

    def _inside(self, region: list[int], t: int, k: int) -> bool:
        """Whether state ``t`` is inside loop ``k`` (in it, or in a loop its item holds)."""
        r = region[t]
        return r == k or (r >= 0 and k in self._chains[r])

    def _finish(self, rows: list[list[int]], region: list[int], start: int, head: int, arrivals: int) -> bytes | None:
        """The shortest bytes from ``start`` inside its loop that make exactly ``arrivals``
        arrivals, the last one at ``head``; None when there are none."""
        heads = self._heads
        back: dict[tuple[int, int], tuple[tuple[int, int], int]] = {}
        queue = deque([(start, arrivals)])
        while queue:
            node = queue.popleft()
            s, left = node
            for c, t in enumerate(rows[s]):
                if t < 0 or not self._inside(region, t, region[start]):
                    continue
                arrival = heads[t] and region[t] == region[start]
                nxt = (t, left - 1) if arrival else (t, left)
                if arrival and left == 1:
                    if t != head:
                        continue
                    out = bytearray([self._rep[c]])
                    while node != (start, arrivals):
                        node, b = back[node]
                        out.append(b)
                    return bytes(reversed(out))
                if nxt not in back and nxt != (start, arrivals):
                    back[nxt] = (node, self._rep[c])
                    queue.append(nxt)
        return None

    def _item(self, rows: list[list[int]], region: list[int], head: int, target: int) -> bytes:
        """The shortest bytes from ``head`` to an arrival at ``target`` (-1: at any head of
        its loop): one item; empty when there is none."""
        heads = self._heads
        back: dict[int, tuple[int, int]] = {}
        queue = deque([head])
        while queue:
            s = queue.popleft()
            for c, t in enumerate(rows[s]):
                if t < 0 or not self._inside(region, t, region[head]):
                    continue
                arrival = heads[t] and region[t] == region[head]
                if arrival and target in (-1, t):
                    out = bytearray([self._rep[c]])
                    while s != head:
                        s, b = back[s]
                        out.append(b)
                    return bytes(reversed(out))
                if not arrival and t not in back and t != head:
                    back[t] = (s, self._rep[c])
                    queue.append(t)
        return b""

    def reachable(self, state: int) -> bool:
        return self._parent[state] >= 0

    def prefix(self, state: int) -> bytes:
        """A shortest byte string that leads from the start to ``state``.

        Raises:
            ValueError: ``state`` is not reachable from the start.
        """
        if self._parent[state] < 0:
            raise ValueError(f"state {state} is not reachable from the start")
        out = bytearray()
        while state != 0:
            b = self._byte[state]
            if b == _EXIT:
                out.extend(reversed(self._loops[state]))
            else:
                out.append(b)
            state = self._parent[state]
        return bytes(reversed(out))


def _class_bytes(dfa: Dfa) -> list[int]:
    best = [-1] * dfa.num_classes
    order = sorted(range(256), key=lambda b: (not 0x20 < b < 0x7F, b))
    for b in order:
        c = int(dfa.byte_class[b])
        if best[c] < 0:
            best[c] = b
    return best


def forced_runs(dfa: Dfa) -> dict[int, bytes]:
    """Maximal forced byte runs: ``{state: bytes}`` for each state where a run begins.

    A state is *forced* when it cannot end the output and exactly one byte continues it
    (the jump-forward rule of :meth:`maskc.artifacts.Artifact.forced_bytes`). A run begins
    at a forced state that no forced state leads to; it goes on through forced states. Runs
    that begin inside another run are suffixes of it and left out.
    """
    n = dfa.num_states
    live = dfa.trans >= 0
    single = live.sum(axis=1) == 1
    cls = np.argmax(live, axis=1)
    sizes = np.bincount(dfa.byte_class.astype(np.int64), minlength=dfa.num_classes)
    forced = single & (sizes[cls] == 1) & ~dfa.accepting
    byte_of = np.zeros(dfa.num_classes, dtype=np.int64)
    byte_of[dfa.byte_class[::-1].astype(np.int64)] = np.arange(255, -1, -1)
    nxt = np.where(forced, dfa.trans[np.arange(n), cls], -1)
    inside = np.zeros(n, dtype=np.bool_)
    targets = nxt[forced]
    inside[targets[targets >= 0]] = True
    runs: dict[int, bytes] = {}
    for s in np.flatnonzero(forced & ~inside).tolist():
        out = bytearray()
        seen: set[int] = set()
        q = s
        while q >= 0 and forced[q] and q not in seen:
            seen.add(q)
            out.append(int(byte_of[cls[q]]))
            q = int(nxt[q])
        runs[s] = bytes(out)
    return runs
