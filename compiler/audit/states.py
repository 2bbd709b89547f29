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


class Prefixes:
    """A shortest byte prefix to every state: a breadth-first tree from the start, visiting
    classes in order, each class written as its first printable byte when it has one."""

    def __init__(self, dfa: Dfa) -> None:
        self._rep = _class_bytes(dfa)
        n = dfa.num_states
        self._parent = [-1] * n
        self._byte = [-1] * n
        self._parent[0] = 0
        rows = dfa.trans.tolist()
        queue = deque([0])
        while queue:
            s = queue.popleft()
            for c, t in enumerate(rows[s]):
                if t >= 0 and self._parent[t] < 0:
                    self._parent[t] = s
                    self._byte[t] = self._rep[c]
                    queue.append(t)

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
            out.append(self._byte[state])
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
