"""The runtime of a recursive grammar: a matcher over a stack of rule states.

A *stack* is a tuple of state ids, bottom first; its top is the current state, the frames
below are the states callers return to. A *configuration* is a set of stacks (an
ambiguous grammar is followed along every parse at once, GLR-style), kept *unclosed*:
as left by the last byte. Before a byte, or to compute a mask, it is closed under calls
(push the callee's start; the caller's top becomes the return state) and returns (a top
at an accepting state pops). Every move respects the nesting bound: a frame is pushed
only if every frame can still finish within ``max_depth`` (``need``), so no reachable
configuration is stranded.

Masks: the precomputed mask of each closed top (tokens that stay inside its frame), plus
the top's few *uncertain* tokens checked exactly against the stacks. Results are memoized
on the part of the stacks a computation actually read (its *reach*) and the depth headroom
when it could matter, so a mask or a step costs a dictionary lookup once seen, whatever
lies deeper in the stack.

Most steps never meet a rule boundary: one stack whose top makes no call and has no
uncertain token, a token whose bytes pass only such states. Those take a fast path keyed
on the top state alone (a step also on the token), valid for any stack below it given the
headroom: the mask is the top's stored row, the step a walk of the rule's DFA. The fast
path gives exactly what the general walk gives (``PushdownRuntime(art, fast=False)`` is
that reference).

Error policy, as :class:`~maskc.artifacts.matcher.Matcher`: never raises on model behaviour.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from maskc.artifacts.contexts import ANY_BELOW, NONE_BELOW
from maskc.artifacts.matcher import (attached_vocab, bitmask_rows, check_rollback, check_token_id, grammar_tag,
                                     string_bytes, whole_chars, zero_row)
from maskc.compiler.maskstore import KIND_ALLOW, bitmask_words
from maskc.compiler.pda import LazyRows

if TYPE_CHECKING:
    from maskc.artifacts.artifact import Artifact

__all__ = ["PushdownMatcher", "PushdownRuntime", "Stack", "Config"]

Stack = tuple[int, ...]
Config = tuple[Stack, ...]
Derived = tuple[int, int, Stack]  # (index of the original stack, frames consumed from its top, frames pushed)
_Answer = tuple["NDArray[np.int32]", bool]  # a bitmask row and whether the output may end
_DEEPER = object()
MEMO_LIMIT = 8192
FORCED_LIMIT = 256
MANY_CANDIDATES = 1024  # a mask with this many candidates gathers and walks them in arrays


_INF = 1 << 30
_NO_IDS: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
_UNSEEN: Any = object()
_ACCEPTS, _CALLS = 1, 2


class _Walk:
    """One computation over a configuration: frame reads are recorded as reach, and depth
    checks as the interval of headroom (``max_depth - len(stack)``) that gives the same outcomes."""

    __slots__ = ("rt", "config", "reach", "lo", "hi")

    def __init__(self, rt: PushdownRuntime, config: Config) -> None:
        self.rt = rt
        self.config = config
        self.reach = [0] * len(config)
        self.lo = [-_INF] * len(config)
        self.hi = [_INF] * len(config)

    def fits(self, st: Derived, extra: int) -> bool:
        """Whether ``length(st) + extra <= max_depth``, recording the headroom it takes."""
        i, c, pushed = st
        rel = len(pushed) - c + extra
        if self.rt.max_depth - len(self.config[i]) >= rel:
            if rel > self.lo[i]:
                self.lo[i] = rel
            return True
        if rel < self.hi[i]:
            self.hi[i] = rel
        return False

    def frame(self, i: int, d: int) -> int | None:
        """The ``d``-th frame from the top of original stack ``i`` (1 = top), or None."""
        if d > self.reach[i]:
            self.reach[i] = d
        s = self.config[i]
        return s[-d] if d <= len(s) else None

    def top(self, st: Derived) -> int:
        i, c, pushed = st
        if pushed:
            return pushed[-1]
        q = self.frame(i, c + 1)
        assert q is not None  # a derived stack is never empty
        return q

    def length(self, st: Derived) -> int:
        i, c, pushed = st
        return len(self.config[i]) - c + len(pushed)

    def has_below(self, st: Derived) -> bool:
        i, c, pushed = st
        if len(pushed) >= 2:
            return True
        return self.frame(i, c + 2 - len(pushed)) is not None

    def close(self, stacks: Iterable[Derived]) -> list[Derived]:
        rt = self.rt
        seen: set[Derived] = set()
        out: list[Derived] = []
        work = list(stacks)
        while work:
            st = work.pop()
            if st in seen:
                continue
            seen.add(st)
            out.append(st)
            i, c, pushed = st
            q = self.top(st)
            calls = rt.calls[q]
            if calls:
                base = (c, pushed[:-1]) if pushed else (c + 1, ())
                for rule, ret in calls:
                    s0 = rt.starts[rule]
                    if self.fits(st, rt.need[ret]) and self.fits(st, 1 + rt.need[s0]):
                        work.append((i, base[0], base[1] + (ret, s0)))
            if rt.accepting[q] and self.has_below(st):
                work.append((i, c, pushed[:-1]) if pushed else (i, c + 1, ()))
        return out

    def step(self, stacks: list[Derived], byte: int) -> list[Derived]:
        rt = self.rt
        cls = rt.byte_class[byte]
        out: list[Derived] = []
        for st in stacks:
            q2 = rt.trans[self.top(st)][cls]
            if q2 < 0:
                continue
            i, c, pushed = st
            if not self.fits(st, rt.need[q2]):
                continue
            out.append((i, c, pushed[:-1] + (q2,)) if pushed else (i, c + 1, (q2,)))
        return list(dict.fromkeys(out))

    def run(self, stacks: list[Derived], data: bytes) -> list[Derived]:
        """Stacks after all of ``data`` (closed before each byte, unclosed after the last)."""
        for b in data:
            stacks = self.step(self.close(stacks), b)
            if not stacks:
                break
        return stacks

    def run_from(self, closed: list[Derived], data: bytes, after: dict[bytes, list[Derived]]) -> bool:
        """Whether ``data`` survives from the closed stacks ``closed``; ``after`` holds the
        stacks after each prefix already walked from them (filled in here)."""
        n = len(data)
        k = n
        while k and data[:k] not in after:
            k -= 1
        stacks = after[data[:k]] if k else closed
        while k < n and stacks:
            stacks = self.step(self.close(stacks) if k else stacks, data[k])
            k += 1
            after[data[:k]] = stacks
        return bool(stacks)

    def can_end(self, closed: list[Derived]) -> bool:
        return any(self.rt.accepting[self.top(st)] and not self.has_below(st) for st in closed)


class _FastWalk(_Walk):
    """:class:`_Walk` with the common single-stack cases inlined: a top that makes no call,
    and cannot return into a frame below, closes to itself, and a byte step of one stack
    needs no deduplication. It reads the same frames and takes the same depth checks, so it
    records the same reach and headroom (the general walk stays the reference)."""

    __slots__ = ("kinds", "needs")

    def __init__(self, rt: PushdownRuntime, config: Config, kinds: Sequence[int], needs: Sequence[int]) -> None:
        super().__init__(rt, config)
        self.kinds = kinds
        self.needs = needs

    def close(self, stacks: Iterable[Derived]) -> list[Derived]:
        if type(stacks) is list and len(stacks) == 1:
            st = stacks[0]
            i, c, pushed = st
            if pushed:
                q = pushed[-1]
            else:
                d = c + 1
                if d > self.reach[i]:
                    self.reach[i] = d
                q = self.config[i][-d]  # a derived stack is never empty
            kind = self.kinds[q]
            if not kind or (kind == _ACCEPTS and not self.has_below(st)):
                return stacks
        return self._close_all(stacks)

    def _close_all(self, stacks: Iterable[Derived]) -> list[Derived]:
        """:meth:`_Walk.close` with the frame reads and depth checks inlined (same order, same
        records)."""
        rt = self.rt
        config, reach, los, his = self.config, self.reach, self.lo, self.hi
        kinds, needs, calls_of, starts = self.kinds, self.needs, rt.calls, rt.starts
        max_depth = rt.max_depth
        seen: set[Derived] = set()
        out: list[Derived] = []
        work = list(stacks)
        while work:
            st = work.pop()
            if st in seen:
                continue
            seen.add(st)
            out.append(st)
            i, c, pushed = st
            s = config[i]
            if pushed:
                q = pushed[-1]
            else:
                d = c + 1
                if d > reach[i]:
                    reach[i] = d
                q = s[-d]  # a derived stack is never empty
            kind = kinds[q]
            if kind == _CALLS:
                room = max_depth - len(s)
                size = len(pushed) - c
                base = (c, pushed[:-1]) if pushed else (c + 1, ())
                for rule, ret in calls_of[q]:
                    s0 = starts[rule]
                    rel = size + needs[ret]
                    if room >= rel:
                        if rel > los[i]:
                            los[i] = rel
                        rel = size + 1 + needs[s0]
                        if room >= rel:
                            if rel > los[i]:
                                los[i] = rel
                            work.append((i, base[0], base[1] + (ret, s0)))
                        elif rel < his[i]:
                            his[i] = rel
                    elif rel < his[i]:
                        his[i] = rel
            if (kind == _ACCEPTS or (kind == _CALLS and rt.accepting[q])) and self.has_below(st):
                work.append((i, c, pushed[:-1]) if pushed else (i, c + 1, ()))
        return out

    def step(self, stacks: list[Derived], byte: int) -> list[Derived]:
        """:meth:`_Walk.step` with the frame reads and depth checks inlined (one stack needs no
        deduplication)."""
        rt = self.rt
        config, reach, los, his, needs = self.config, self.reach, self.lo, self.hi, self.needs
        item = rt._step
        cls = rt.byte_class[byte]
        max_depth = rt.max_depth
        out: list[Derived] = []
        for i, c, pushed in stacks:
            s = config[i]
            if pushed:
                q = pushed[-1]
            else:
                d = c + 1
                if d > reach[i]:
                    reach[i] = d
                q = s[-d]
            q2 = item(q, cls)
            if q2 < 0:
                continue
            rel = len(pushed) - c + needs[q2]
            if max_depth - len(s) >= rel:
                if rel > los[i]:
                    los[i] = rel
                out.append((i, c, pushed[:-1] + (q2,)) if pushed else (i, c + 1, (q2,)))
            elif rel < his[i]:
                his[i] = rel
        return out if len(out) < 2 else list(dict.fromkeys(out))


def _reachable_need(trans: NDArray[np.int32], need: NDArray[np.int32]) -> NDArray[np.int64]:
    """Per state: the largest ``need`` among the states its byte steps can reach (itself included).

    Fixpoint of ``value[q] = max(value[q], value[q'])`` over the distinct byte edges
    ``q -> q'`` (a sparse edge list, not the dense table).
    """
    n = trans.shape[0]
    src = np.repeat(np.arange(n, dtype=np.int64), trans.shape[1])
    dst = trans.reshape(-1).astype(np.int64)
    keep = (dst >= 0) & (dst != src)
    pairs = np.sort(src[keep] * n + dst[keep])
    if pairs.size > 1:
        pairs = pairs[np.concatenate(([True], pairs[1:] != pairs[:-1]))]
    src, dst = pairs // n, pairs % n
    out = need.astype(np.int64)
    while True:
        new = out.copy()
        np.maximum.at(new, src, out[dst])
        if np.array_equal(new, out):
            return out
        out = new


_BIT = np.arange(8, dtype=np.uint8)


def _set_bits(row: NDArray[np.int32], vocab_size: int) -> NDArray[np.int64]:
    """``np.flatnonzero(unpack_bool(row, vocab_size))``, looking at the nonzero bytes only."""
    octets = np.ascontiguousarray(row).view(np.uint8)
    at = np.flatnonzero(octets)
    if not at.size:
        return at
    on = ((octets[at, None] >> _BIT) & 1).astype(np.bool_)
    ids = (at[:, None] * 8 + _BIT)[on]
    return ids[ids < vocab_size] if ids[-1] >= vocab_size else ids


class _Calls(dict[int, list[tuple[int, int]]]):
    """``(callee rule, return state)`` per state, from the CSR call tables, on first use."""

    def __init__(self, offsets: NDArray[np.int64], rules: NDArray[np.int32], returns: NDArray[np.int32]) -> None:
        super().__init__()
        self.offsets, self.rules, self.returns = offsets, rules, returns

    def __missing__(self, q: int) -> list[tuple[int, int]]:
        a, b = int(self.offsets[q]), int(self.offsets[q + 1])
        value = list(zip(self.rules[a:b].tolist(), self.returns[a:b].tolist())) if b > a else []
        self[q] = value
        return value


class PushdownRuntime:
    """Per-artifact tables and memos shared by every matcher of a recursive artifact.

    ``fast=False`` is the reference (the general walk, nothing stored read); ``contexts=False``
    ignores the answers stored at compile time (:mod:`maskc.artifacts.contexts`) and computes
    every mask on the live stack; ``spell=True`` walks a candidate list met again in the
    order of its spellings (:meth:`_spelled`: for the compile's many computations).
    """

    def __init__(self, art: Artifact, *, fast: bool = True, contexts: bool = True, spell: bool = False) -> None:
        pda = art.pda
        vocab = art.tokenizer
        if pda is None or vocab is None:
            raise ValueError("a pushdown runtime needs a recursive artifact with its tokenizer attached")
        self.art = art
        # per-state tables, converted as states are visited (nothing proportional to the
        # automaton is built before the first mask)
        self.trans: dict[int, list[int]] = pda.dfa.rows
        self.byte_class: list[int] = pda.dfa.byte_class.tolist()
        self.accepting: dict[int, bool] = LazyRows(pda.dfa.accepting)
        self.calls: dict[int, list[tuple[int, int]]] = _Calls(pda.call_offsets, pda.call_rule, pda.call_return)
        self.starts: list[int] = pda.rule_start.tolist()
        self.need: dict[int, int] = LazyRows(pda.need)
        self.max_depth = art.max_depth
        # every state can finish (the automaton is pruned), so every need is finite
        max_need = int(pda.need.max()) if pda.num_states else 0
        # Precomputed masks hold while a token's inline calls cannot meet the depth bound.
        self.fast_headroom = art.inline_depth + max_need + 1
        self.vocab = vocab
        self.tokens = vocab.token_bytes
        # (word, bit) of each EOS id: set one by one (a scatter costs more for so few)
        self._eos_bits = [(e >> 5, 1 << (e & 31)) for e in art.eos_token_ids]
        self.words = bitmask_words(art.vocab_size)
        self.uncertain = art.uncertain_mask if art.uncertain_mask is not None else np.zeros(0, dtype=np.int32)
        self.flat = art.flat_mask if art.flat_mask is not None else self.uncertain
        self._flat_need: list[int] | None = None
        self._ids: dict[int, NDArray[np.int64]] = {}
        self._mask_memo: dict[Any, Any] = {}
        self._step_memo: dict[Any, Any] = {}
        # exact configurations seen: the answer without the reach-keyed lookup (for a step by a
        # token id, before any other: a warm step is one lookup)
        self._mask_exact: dict[Config, tuple[NDArray[np.int32], bool]] = {}
        self._step_exact: dict[tuple[Config, int], Config] = {}
        self.misses = 0
        self.fast = fast
        # top state -> (the answer of ``mask`` for the stack of that state alone, the answer
        # with a frame below or None where the state accepts) when the state makes no call and
        # has no uncertain token (its mask then depends on the headroom and on whether a frame
        # lies below only), else None
        self._top_rows: dict[int, tuple[_Answer, _Answer | None] | None] = {}
        self._answers_by_mask: dict[tuple[int, int], tuple[_Answer, _Answer | None]] = {}  # (mask, kind)
        # (top state, token) -> (state after the token's bytes or -1, largest need met, whether
        # an accepting state met a byte), or None when a state on the way makes a call
        self._flat_steps: dict[tuple[int, int], tuple[int, int, bool] | None] = {}
        self._step = pda.dfa.stepper()  # (state, class) -> state or -1
        self._class_of = pda.dfa.class_table  # bytes.translate: byte -> its class
        self._kinds: Sequence[int] | None = None
        self._needs: Sequence[int] | None = None
        self._empty_masks: bytes | None = None  # per mask: 1 where it is an empty allow list
        self._heads: tuple[NDArray[np.int64], NDArray[np.uint8]] | None = None
        self._groups: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]] | None = None
        # candidate lists met again walked in the order of their spellings (:meth:`_spelled`):
        # for the computations of many stack contexts (a decode rather meets a list once, and
        # ordering one costs about as much as its walk)
        self._spellings: dict[bytes, tuple[list[int], list[bytes], list[int]] | None] | None = {} if spell else None
        # answers stored at compile time for listed stack contexts (maskc.artifacts.contexts)
        self._contexts = art.contexts if fast and contexts else None
        # their top states, as an array.array (on first use: a copy of the bytes, where a list
        # costs 75 us for 12,000 answers; bisect reads either at the same speed)
        self._context_states: array[int] | None = None

    @property
    def flat_need(self) -> list[int]:
        """Accepted tokens that make no call hold wherever the need of every state their
        bytes can reach inside the frame fits: the largest need reachable by bytes. Built on
        first use (near the depth bound only)."""
        if self._flat_need is None:
            pda = self.art.pda
            assert pda is not None  # a runtime exists only for a pushdown artifact
            self._flat_need = _reachable_need(pda.dfa.trans, pda.need).tolist()
        return self._flat_need

    # -- memo keyed on what a computation read ---------------------------------------------------
    # An entry under the top-``j`` frames of every stack holds (lo, hi, value) rows: the value
    # stands for every headroom in [lo, hi) per stack. ``_DEEPER`` says the computation read
    # below the top ``j`` frames: look again with one frame more.

    @staticmethod
    def _key(config: Config, j: int) -> tuple[tuple[Stack, bool], ...]:
        # (top j frames, whether that is the whole stack and it was read past its bottom)
        return tuple((s[-j:], j > len(s)) for s in config)

    def _lookup(self, memo: dict[Any, Any], config: Config, extra: Any) -> tuple[Any, int]:
        if len(config) == 1:  # the common case, without the generic loops
            s = config[0]
            h = self.max_depth - len(s)
            n = len(s)
            j = 1
            while True:
                rows = memo.get((((s[-j:], j > n),), extra))
                got = None
                if rows is not None:
                    for lo, hi, value in rows:
                        if lo[0] <= h < hi[0]:
                            got = value
                            break
                if got is None:
                    return None, j
                if got is _DEEPER:
                    j += 1
                    continue
                return got, j
        room = [self.max_depth - len(s) for s in config]
        j = 1
        while True:
            rows = memo.get((self._key(config, j), extra))
            got = None
            if rows is not None:
                for lo, hi, value in rows:
                    if all(a <= h < b for a, h, b in zip(lo, room, hi)):
                        got = value
                        break
            if got is None:
                return None, j
            if got is _DEEPER:
                j += 1
                continue
            return got, j

    def _store(self, memo: dict[Any, Any], config: Config, extra: Any, j: int, w: _Walk, value: Any) -> None:
        if len(memo) >= MEMO_LIMIT:
            for k in list(memo)[: MEMO_LIMIT // 4]:
                del memo[k]
        reach = max(w.reach)
        row = (tuple(w.lo), tuple(w.hi))
        for jj in range(j, reach):
            memo.setdefault((self._key(config, jj), extra), []).append((*row, _DEEPER))
        memo.setdefault((self._key(config, max(j, reach)), extra), []).append((*row, value))

    # -- masks ----------------------------------------------------------------------------------

    def _mask_ids(self, m: int) -> NDArray[np.int64]:
        got = self._ids.get(m)
        if got is None:
            masks = self.art.masks
            if int(masks.kinds[m]) == KIND_ALLOW:
                got = masks.data[int(masks.offsets[m]) : int(masks.offsets[m + 1])].astype(np.int64)
            else:
                got = _set_bits(self.art.mask_row_of(m), self.art.vocab_size)
            if len(self._ids) >= MEMO_LIMIT:
                self._ids.clear()
            self._ids[m] = got
        return got

    def _mask_row(self, m: int) -> NDArray[np.uint32]:
        return self.art.mask_row_of(m).view(np.uint32)

    def mask(self, config: Config) -> tuple[NDArray[np.int32], bool]:
        """The bitmask row of ``config`` and whether the output may end there (EOS allowed)."""
        if len(config) == 1 and self.fast:
            s = config[0]
            rows: tuple[_Answer, _Answer | None] | None = self._top_rows.get(s[-1], _UNSEEN)
            if rows is _UNSEEN:
                rows = self._top_row(s[-1])
            # No call: the closure is the stack itself, unless an accepting top can return
            # into a frame below. Enough headroom: every stored token holds.
            if rows is not None and self.max_depth - len(s) >= self.fast_headroom:
                got = rows[1] if len(s) > 1 else rows[0]
                if got is not None:
                    return got
        got = self._mask_exact.get(config)
        if got is not None:
            return got
        got = self._mask(config)
        if len(self._mask_exact) >= MEMO_LIMIT:
            self._mask_exact.clear()
        self._mask_exact[config] = got
        return got

    def _top_row(self, q: int) -> tuple[_Answer, _Answer | None] | None:
        rows: tuple[_Answer, _Answer | None] | None = None
        if self._kinds is None:
            self._build_kinds()
        assert self._kinds is not None
        empty = self._empty_masks
        kind = self._kinds[q]
        if kind != _CALLS:
            u = self.uncertain.item(q)
            # An empty mask is stored as an empty allow list (the store's smallest form, never
            # a delta): read off ``empty``, without decoding a mask that is not empty to see
            # (60 to 115 us on a 128k vocabulary, where the answer is then stored elsewhere).
            if empty[u] if empty is not None else not self._mask_ids(u).size:
                # shared by the states of one mask (a first visit of a state whose mask was
                # met costs two look-ups, not a row copy)
                key = (self.art.state_mask.item(q), kind)
                rows = self._answers_by_mask.get(key)
                if rows is None:
                    if len(self._answers_by_mask) >= MEMO_LIMIT:
                        self._answers_by_mask.clear()
                    rows = self._answers_by_mask[key] = self._answers(key[0], kind == _ACCEPTS)
        if len(self._top_rows) >= MEMO_LIMIT:
            self._top_rows.clear()
        self._top_rows[q] = rows
        return rows

    def _answers(self, m: int, accepts: bool) -> tuple[_Answer, _Answer | None]:
        """:meth:`_top_row`'s answers for a state of mask ``m`` that makes no call and has no
        uncertain token: the mask with EOS where the state accepts (and None below a frame,
        where a return may branch off), else the mask alone either way."""
        row = self.art.mask_row_of(m)
        if not accepts:
            alone = (row, False)
            return alone, alone
        with_eos = row
        if self._eos_bits:
            with_eos = row.copy()
            words = with_eos.view(np.uint32)
            for word, bit in self._eos_bits:
                words[word] |= np.uint32(bit)
            with_eos.setflags(write=False)
        return (with_eos, True), None

    def _mask(self, config: Config) -> tuple[NDArray[np.int32], bool]:
        got, j = self._lookup(self._mask_memo, config, None)
        if got is not None:
            return got  # type: ignore[no-any-return]
        if len(config) == 1 and self._contexts is not None:
            got = self._context(config[0])
            if got is not None:
                return got
        self.misses += 1
        result, w = self.compute_mask(config)
        self._store(self._mask_memo, config, None, j, w, result)
        return result

    def _context(self, s: Stack) -> _Answer | None:
        """The stored answer for a stack with ``s``'s top frames and headroom, if one holds.
        A state's answers are sorted by the frames below it (those for any frame and for none
        first), so finding one takes a few reads: a binary search among many return points."""
        t = self._contexts
        assert t is not None
        q = s[-1]
        states = self._context_states
        if states is None:  # (a bisection of an array.array: a tenth of numpy's searchsorted per call)
            states = self._context_states = array("i", t.state.astype(np.int32, copy=False).tobytes())
        a = bisect_left(states, q)
        if a == len(states) or states[a] != q:
            return None
        b = bisect_right(states, q, a)
        n = len(s)
        h = self.max_depth - n
        below, lo, hi = t.below, t.lo, t.hi
        e = a
        while e < b:
            r = below.item(e)
            if r >= 0:
                break
            if (r == ANY_BELOW or n == 1) and lo.item(e) <= h < hi.item(e):
                return self.art.mask_row_of(t.mask.item(e)), bool(t.end.item(e))
            e += 1
        if n == 1 or e == b:
            return None
        r = s[-2]
        if b - e > 8:
            e += int(np.searchsorted(below[e:b], r))
        else:
            while e < b and below.item(e) < r:
                e += 1
        r2 = s[-3] if n > 2 else NONE_BELOW
        below2 = t.below2
        while e < b and below.item(e) == r:  # (few: the frames below ``r`` where it read them)
            x = below2.item(e)
            if (x == ANY_BELOW or x == r2) and lo.item(e) <= h < hi.item(e):
                return self.art.mask_row_of(t.mask.item(e)), bool(t.end.item(e))
            e += 1
        return None

    def stack_dependent(self) -> NDArray[np.bool_]:
        """Per state: whether its answer may depend on the stack below it or on the headroom
        (it makes calls, may return into a frame below, or has uncertain tokens), where the
        fast path of :meth:`mask` does not answer."""
        if self._kinds is None:
            self._build_kinds()
        assert isinstance(self._kinds, memoryview)
        kinds = np.frombuffer(self._kinds, dtype=np.uint8)
        if self._empty_masks is None:
            return np.ones(kinds.shape[0], dtype=np.bool_)
        no_uncertain = np.frombuffer(self._empty_masks, dtype=np.uint8)[self.uncertain]
        out: NDArray[np.bool_] = (kinds != 0) | (no_uncertain == 0)
        return out

    def compute_mask(self, config: Config) -> tuple[_Answer, _Walk]:
        """The answer of :meth:`mask` for ``config``, computed (no memo read or written), and
        the walk that computed it: the frames it read (``reach``) and the headroom interval
        (``lo``, ``hi``) it holds for."""
        w = self._walk(config)
        closed = w.close([(i, 0, ()) for i in range(len(config))])
        row = np.zeros(self.words, dtype=np.uint32)
        sources: list[int] = []  # the masks whose tokens are walked (those not in ``row``)
        can_end = False
        for st in closed:
            q = w.top(st)
            if self.accepting[q] and not w.has_below(st):
                can_end = True
            unc = int(self.uncertain[q])
            if w.fits(st, self.fast_headroom):
                row |= self._mask_row(int(self.art.state_mask[q]))
            elif w.fits(st, self.flat_need[q]):
                # near the depth bound: the no-call tokens still hold; walk the calling ones
                row |= self._mask_row(int(self.flat[q]))
                sources.append(int(self.art.state_mask[q]))
            else:
                sources.append(int(self.art.state_mask[q]))
            if self._mask_ids(unc).size:
                sources.append(unc)
        if sources:
            cand, mark = self._candidates(sources, row)
            if not self.fast:
                after: dict[bytes, list[Derived]] = {}  # stacks after a prefix: candidates share them
                for t in (cand if mark is None else np.flatnonzero(mark)).tolist():
                    if w.run_from(closed, self.tokens[t], after):
                        row[t >> 5] |= np.uint32(1 << (t & 31))
            elif mark is not None:
                self._run_marked(w, len(config), mark, row)
            else:
                self._run_candidates(w, len(config), cand, row)
        if can_end:
            for word, bit in self._eos_bits:
                row[word] |= np.uint32(bit)
        result = (row.view(np.int32), can_end)
        result[0].setflags(write=False)
        return result, w

    def _first_groups(self) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
        """The non-empty tokens grouped by the class of their first byte: their ids (by class,
        ascending within a class), each group's class (ascending) and start; and the empty
        tokens. Built once, the first time a mask walks many candidates."""
        if self._groups is None:
            lens, first = self._token_heads()
            some = np.flatnonzero(lens > 0)
            order = some[np.argsort(first[some], kind="stable")]
            heads = first[order].astype(np.int64)
            starts = np.flatnonzero(np.concatenate(([True], heads[1:] != heads[:-1]))) if order.size else _NO_IDS
            self._groups = (order, heads[starts], starts, np.flatnonzero(lens == 0))
        return self._groups

    def _candidates(self, sources: list[int], row: NDArray[np.uint32]) -> tuple[NDArray[np.int64], NDArray[np.bool_] | None]:
        """The tokens of the masks ``sources`` that ``row`` does not hold, as sorted ids; where
        they are many (:data:`MANY_CANDIDATES`; a whole vocabulary can be uncertain), as marks
        over the vocabulary instead (the ids empty), built from the masks' rows."""
        ids = [self._mask_ids(m) for m in sources]
        if sum(c.shape[0] for c in ids) >= MANY_CANDIDATES:
            bits = self._mask_row(sources[0]).copy()
            for m in sources[1:]:
                bits |= self._mask_row(m)
            bits &= ~row
            mark = np.unpackbits(bits.view(np.uint8), bitorder="little").view(np.bool_)[: self.art.vocab_size]
            if np.count_nonzero(mark) >= MANY_CANDIDATES:
                return _NO_IDS, mark
            return np.flatnonzero(mark), None
        cand = np.sort(np.concatenate(ids)) if len(ids) > 1 else ids[0]
        if cand.size > 1:
            cand = cand[np.concatenate(([True], cand[1:] != cand[:-1]))]
        return cand[((row[cand >> 5] >> (cand & 31).astype(np.uint32)) & 1) == 0], None

    def _token_heads(self) -> tuple[NDArray[np.int64], NDArray[np.uint8]]:
        """Each token's length and the class of its first byte (0 for an empty token), from
        the vocabulary's flat bytes (built once a process): built the first time a mask has
        many candidates to walk."""
        if self._heads is None:
            flat, offsets = self.vocab.flat()
            lens = np.diff(offsets)
            firsts = np.zeros(lens.shape[0], dtype=np.uint8)
            some = lens > 0
            firsts[some] = flat[offsets[:-1][some]]
            self._heads = (lens, np.frombuffer(self._class_of, dtype=np.uint8)[firsts])
        return self._heads

    def _mover(self, w: _Walk, n: int) -> tuple[Callable[[int, int], int], list[dict[int, int]], list[Any]]:
        """The shared steps of candidate walks from the ``n`` stacks of ``w``'s configuration:
        the stacks reached so far (unclosed) and a byte class determine the stacks after it,
        whatever bytes led there, so each distinct (stacks, class) pair is closed and stepped
        once, the same closes and steps the candidates' own walks would take (hence the same
        reads recorded). Stacks are numbered as met (0: the configuration's); ``move(k, c)``
        steps number ``k`` by class ``c`` (the next number, -1: dead) and records it in
        ``moves[k]``, so that a candidate then costs a lookup per byte."""
        states: list[tuple[Derived, ...]] = [tuple((i, 0, ()) for i in range(n))]
        moves: list[dict[int, int]] = [{}]  # per numbered stacks: class -> next number, -1 dead
        number: dict[tuple[Derived, ...], int] = {states[0]: 0}
        closed_of: dict[int, list[Derived]] = {}
        class_of = self._class_of

        def move(k: int, c: int) -> int:
            closed = closed_of.get(k)
            if closed is None:
                closed = closed_of[k] = w.close(list(states[k]))
            after = tuple(w.step(closed, class_of.index(c)))  # any byte of the class
            if not after:
                got = -1
            else:
                got = number.get(after, -2)
                if got == -2:
                    got = number[after] = len(states)
                    states.append(after)
                    moves.append({})
            moves[k][c] = got
            return got

        return move, moves, states

    def _spelled(self, cand: NDArray[np.int64]) -> tuple[list[int], list[bytes], list[int]] | None:
        """The tokens of ``cand`` in the order of their spellings in byte classes, each
        spelling, and how many classes it shares with the one before; built the second time
        a candidate list is met and kept (the masks of a state's contexts give the same few
        lists again and again). None the first time, and for a runtime not made to ``spell``."""
        if self._spellings is None:
            return None
        key = cand.tobytes()
        if key not in self._spellings:
            if len(self._spellings) >= MEMO_LIMIT:
                self._spellings.clear()
            self._spellings[key] = None
            return None
        got = self._spellings[key]
        if got is None:
            class_of, tokens = self._class_of, self.tokens
            pairs = sorted((tokens[t].translate(class_of), t) for t in cand.tolist())
            spelled = [seq for seq, _ in pairs]
            shared = [0]
            for prev, seq in zip(spelled, spelled[1:]):
                m = min(len(prev), len(seq))
                j = 0
                while j < m and prev[j] == seq[j]:
                    j += 1
                shared.append(j)
            got = self._spellings[key] = ([t for _, t in pairs], spelled, shared[: len(pairs)])
        return got

    def _run_candidates(self, w: _Walk, n: int, cand: NDArray[np.int64], row: NDArray[np.uint32]) -> None:
        """Set the bit of each token of ``cand`` whose bytes survive from the ``n`` stacks of
        ``w``'s configuration, the walks sharing their steps (:meth:`_mover`). Where
        :meth:`_spelled` orders the list, each candidate takes up the walk before it where
        their spellings part, and one that shares the classes the walk before died on dies
        there too; else each walks from the start (as sharing no class with the one before)."""
        move, moves, _ = self._mover(w, n)
        bits: dict[int, int] = {}  # word -> bits of the surviving tokens (one numpy write at the end)
        spelled = self._spelled(cand)
        if spelled is None:  # (a list met once: each candidate walked from the start)
            class_of, tokens = self._class_of, self.tokens
            ids = cand.tolist()
            spelled = (ids, [tokens[t].translate(class_of) for t in ids], [0] * len(ids))
        path = [0]  # the stacks after each class of the last walk, as far as it lived
        dead = -1  # how many classes the last walk took, the one that killed it included (-1: none did)
        for t, seq, same in zip(*spelled):
            if 0 <= dead <= same:
                continue
            del path[same + 1 :]
            k = path[same]
            dead = -1
            for c in seq[same:]:
                got = moves[k].get(c)
                if got is None:
                    got = move(k, c)
                if got < 0:
                    dead = len(path)
                    break
                k = got
                path.append(k)
            else:
                bits[t >> 5] = bits.get(t >> 5, 0) | 1 << (t & 31)
        if bits:
            row[list(bits)] |= np.array(list(bits.values()), dtype=np.uint32)

    def _run_marked(self, w: _Walk, n: int, mark: NDArray[np.bool_], row: NDArray[np.uint32]) -> None:
        """:meth:`_run_candidates` for many candidates, given as marks over the vocabulary: their
        first bytes are stepped by groups of tokens (:meth:`_first_groups`: one step per class
        that some candidate starts with; most candidates die there, their groups never gathered)
        and the survivors walk on together, a byte position at a time (:meth:`_walk_levels`)."""
        move, moves, states = self._mover(w, n)
        lens = self._token_heads()[0]
        order, classes, starts, empty = self._first_groups()
        marked = mark[order]
        ends = starts[1:].tolist() + [order.shape[0]]
        done = [empty[mark[empty]]]  # (an empty token survives: no byte rejects it)
        toks: list[NDArray[np.int64]] = []
        ks: list[NDArray[np.int64]] = []
        present = np.logical_or.reduceat(marked, starts) if starts.shape[0] else np.zeros(0, dtype=np.bool_)
        for g in np.flatnonzero(present).tolist():
            k = move(0, int(classes[g]))
            if k < 0:
                continue
            a, b = int(starts[g]), ends[g]
            group = order[a:b][marked[a:b]]
            longer = lens[group] > 1
            done.append(group[~longer])
            toks.append(group[longer])
            ks.append(np.full(toks[-1].shape[0], k, dtype=np.int64))
        ended = np.concatenate(done)
        if ended.size:
            np.bitwise_or.at(row, ended >> 5, (np.uint32(1) << (ended & 31).astype(np.uint32)))
        if toks:
            self._walk_levels(np.concatenate(toks), np.concatenate(ks), move, moves, states, row)

    def _walk_levels(self, toks: NDArray[np.int64], ks: NDArray[np.int64], move: Callable[[int, int], int],
                     moves: list[dict[int, int]], states: list[Any], row: NDArray[np.uint32]) -> None:
        """:meth:`_run_marked`'s walks past the first byte, all tokens one byte position at a
        time in arrays: ``toks`` stand at stacks number ``ks`` after their first byte. Each
        distinct (stacks, class) pair met is moved once (``move``), as the tokens' own walks
        would move it; a token whose stacks die drops out, one that ends alive sets its bit."""
        flat, offsets = self.vocab.flat()
        lut = np.frombuffer(self._class_of, dtype=np.uint8)
        at, ends = offsets[toks] + 1, offsets[toks + 1]
        table = np.full((max(64, 2 * len(states)), 256), -2, dtype=np.int64)  # stacks x class -> stacks
        while toks.shape[0]:
            cls = lut[flat[at]].astype(np.int64)
            nxt = table[ks, cls]
            unknown = nxt == -2
            if unknown.any():
                met = np.zeros(table.size, dtype=np.bool_)  # (a scatter, not a sort of every token's pair)
                met[ks[unknown] * 256 + cls[unknown]] = True
                for pair in np.flatnonzero(met).tolist():
                    k, c = divmod(pair, 256)
                    got = moves[k].get(c)
                    table[k, c] = got if got is not None else move(k, c)
                    if len(states) > table.shape[0]:
                        table = np.concatenate([table, np.full_like(table, -2)])
                nxt = table[ks, cls]
            alive = nxt >= 0
            done = alive & (at + 1 == ends)
            if done.any():
                t = toks[done]
                np.bitwise_or.at(row, t >> 5, np.uint32(1) << (t & 31).astype(np.uint32))
            keep = alive & ~done
            toks, ks, at, ends = toks[keep], nxt[keep], at[keep] + 1, ends[keep]

    # -- steps ----------------------------------------------------------------------------------

    def advance(self, config: Config, data: bytes, token: int | None = None) -> Config:
        """The configuration after ``data`` (empty tuple: rejected). Memoized per (configuration,
        token id): a warm step is one lookup."""
        if token is None:
            w = self._walk(config)
            return self._apply(config, tuple(w.run([(i, 0, ()) for i in range(len(config))], data)))
        if len(config) == 1 and self.fast:
            # One stack: the walk of the token's bytes from the top state, memoized per
            # (state, token) (a key cheaper to hash than the configuration, and shared by
            # every stack with that top).
            s = config[0]
            key2 = (s[-1], token)
            flat = self._flat_steps.get(key2, _UNSEEN)
            if flat is _UNSEEN:
                flat = self._flat_walk(key2, data)
            # No call on the way: the stack keeps its frames below the top, unless an
            # accepting state met a byte with a frame below (a return could branch off).
            if flat is not None and (len(s) == 1 or not flat[2]):
                q2, need, _ = flat
                if q2 < 0 or self.max_depth - len(s) < need:
                    return ()
                return (s[:-1] + (q2,),)
        key = (config, token)
        got = self._step_exact.get(key)
        if got is None:
            got = self._token_step(config, data, token)
            if len(self._step_exact) >= MEMO_LIMIT:
                self._step_exact.clear()
            self._step_exact[key] = got
        return got

    def _token_step(self, config: Config, data: bytes, token: int) -> Config:
        """:meth:`advance` by token ``token`` (bytes ``data``) past what the flat step
        answers, not memoized per configuration."""
        got, j = self._lookup(self._step_memo, config, token)
        if got is not None:
            return self._apply(config, got)
        w = self._walk(config)
        rel = tuple(w.run([(i, 0, ()) for i in range(len(config))], data))
        self._store(self._step_memo, config, token, j, w, rel)
        return self._apply(config, rel)

    def _flat_walk(self, key: tuple[int, int], data: bytes) -> tuple[int, int, bool] | None:
        """The walk of ``data`` from state ``key[0]`` inside its frame (see ``_flat_steps``)."""
        if self._kinds is None:
            self._build_kinds()
        kinds, needs = self._kinds, self._needs
        assert kinds is not None and needs is not None
        item = self._step
        q = key[0]
        most = 0
        met_accepting = False
        got: tuple[int, int, bool] | None = None
        for c in data.translate(self._class_of):
            kind = kinds[q]
            if kind:
                if kind == _CALLS:
                    break
                met_accepting = True
            q = item(q, c)
            if q < 0:
                got = (-1, 0, met_accepting)
                break
            if needs[q] > most:
                most = needs[q]
        else:
            got = (q, most, met_accepting)
        if len(self._flat_steps) >= MEMO_LIMIT:
            self._flat_steps.clear()
        self._flat_steps[key] = got
        return got

    def _build_kinds(self) -> None:
        """Per state: 0 plain, ``_ACCEPTS`` (accepting, no call) or ``_CALLS``; and the needs.
        Both are memoryviews of arrays (indexing gives ints, as a list or bytes would): one
        copy of the accepting flags, the few calling states found from their call edges, the
        needs read in place. Built on the first mask, which it costs a pass or two over the
        states at most (a state-by-state comparison of the call offsets and a conversion of
        the needs took 70 to 85 us on a 115,000-state automaton)."""
        pda = self.art.pda
        assert pda is not None  # a runtime exists only for a pushdown artifact
        offsets = pda.call_offsets
        kinds = pda.dfa.accepting.view(np.uint8).copy()  # (bool, as Dfa checks): _ACCEPTS == 1
        calls = int(offsets[-1])
        if calls:  # each call edge's state: the offsets are non-decreasing (checked on load)
            kinds[np.searchsorted(offsets, np.arange(calls), side="right") - 1] = _CALLS
        self._kinds = kinds.data
        self._needs = np.ascontiguousarray(pda.need, dtype=np.int32).data
        # the masks that are an empty allow list: a state whose uncertain mask is one has no
        # uncertain token (others are looked at one by one). Per mask, not per state: a large
        # automaton has a hundred thousand states and a few hundred masks
        masks = self.art.masks
        if self.uncertain.shape[0] == kinds.shape[0] and masks.num_masks:
            empty = (masks.kinds == KIND_ALLOW) & (masks.offsets[1:] == masks.offsets[:-1])
            self._empty_masks = empty.astype(np.uint8).tobytes()

    def _walk(self, config: Config) -> _Walk:
        """A walk over ``config``: the inlined one, or the general one for the reference."""
        if not self.fast:
            return _Walk(self, config)
        if self._kinds is None:
            self._build_kinds()
        assert self._kinds is not None and self._needs is not None
        return _FastWalk(self, config, self._kinds, self._needs)

    @staticmethod
    def _apply(config: Config, rel: tuple[Derived, ...]) -> Config:
        if len(rel) == 1:
            i, c, pushed = rel[0]
            s = config[i]
            return ((s[: len(s) - c] + pushed) if c else s + pushed,)
        stacks = {config[i][: len(config[i]) - c] + pushed for i, c, pushed in rel}
        return tuple(sorted(stacks))

    def can_end(self, config: Config) -> bool:
        return self.mask(config)[1]

    def next_bytes(self, config: Config) -> set[int]:
        """Bytes that can come next in ``config``."""
        w = _Walk(self, config)
        out: set[int] = set()
        closed = w.close([(i, 0, ()) for i in range(len(config))])
        for b in range(256):
            if w.step(closed, b):
                out.add(b)
        return out

    def forced(self, config: Config) -> bytes:
        """Bytes every continuation must start with (stops where the output may end)."""
        out = bytearray()
        while len(out) < FORCED_LIMIT and not self.can_end(config):
            nxt = self.next_bytes(config)
            if len(nxt) != 1:
                break
            b = nxt.pop()
            config = self.advance(config, bytes([b]))
            out.append(b)
        return bytes(out)


_TERMINATED: Config = ()


class PushdownMatcher:
    """Tracks one output against a recursive artifact; the API of :class:`Matcher`."""

    def __init__(self, artifact: Artifact) -> None:
        vocab = attached_vocab(artifact)
        self.artifact = artifact
        self._rt: PushdownRuntime = artifact.runtime()
        self._eos = frozenset(artifact.eos_token_ids)
        self._special = vocab.special_ids
        self._tokens = vocab.token_bytes
        self._vocab_size = artifact.vocab_size
        self._history: list[Config] = [((0,),)]
        self._forced: dict[Config, bytes] = {}

    def __repr__(self) -> str:
        c = self._history[-1]
        where = f"state={c[0][-1]} depth={self.depth} stacks={len(c)}" if c else "state=- depth=0"
        return (f"<PushdownMatcher {grammar_tag(self.artifact)} {where} accepted={self.num_accepted} "
                f"terminated={self.is_terminated()} can_terminate={self.can_terminate()}>")

    # -- state ----------------------------------------------------------------------------------

    @property
    def config(self) -> Config:
        """The live stacks (bottom first), empty once terminated."""
        return self._history[-1]

    @property
    def state(self) -> int:
        """The top state of the first live stack (-2 once terminated)."""
        c = self._history[-1]
        return c[0][-1] if c else -2

    @property
    def depth(self) -> int:
        """Stack depth: the most frames of any live stack (0 once terminated)."""
        return max((len(s) for s in self._history[-1]), default=0)

    @property
    def num_accepted(self) -> int:
        return len(self._history) - 1

    def is_terminated(self) -> bool:
        return not self._history[-1]

    def can_terminate(self) -> bool:
        c = self._history[-1]
        return bool(c) and self._rt.can_end(c)

    def reset(self) -> None:
        self._history = [((0,),)]

    def rollback(self, num_tokens: int = 1) -> None:
        """Undo the last ``num_tokens`` accepted tokens (the stacks come back too); raises as
        :meth:`~maskc.artifacts.matcher.Matcher.rollback`."""
        n = check_rollback(num_tokens, self.num_accepted)
        if n:
            del self._history[-n:]

    # -- stepping -------------------------------------------------------------------------------

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (state unchanged) if the grammar rejects it. Raises
        TypeError (not an integer) or ValueError (outside ``[0, vocab_size)``) on misuse."""
        t = token_id if type(token_id) is int and 0 <= token_id < self._vocab_size else (
            check_token_id(token_id, self._vocab_size))
        c = self._history[-1]
        if not c:
            return False
        if t in self._eos:
            if self._rt.can_end(c):
                self._history.append(_TERMINATED)
                return True
            return False
        if t >= len(self._tokens) or t in self._special or not self._tokens[t]:
            return False
        nxt = self._rt.advance(c, self._tokens[t], t)
        if not nxt:
            return False
        self._history.append(nxt)
        return True

    def accept_string(self, text: str | bytes) -> bool:
        """Advance by raw bytes; False (state unchanged) if rejected. Not undoable by rollback."""
        data = string_bytes(text)
        c = self._history[-1]
        if not c:
            return False
        nxt = self._rt.advance(c, data)
        if not nxt:
            return False
        self._history[-1] = nxt
        return True

    def allowed_token_ids(self) -> NDArray[np.int64]:
        c = self._history[-1]
        if not c:
            return np.zeros(0, dtype=np.int64)
        return _set_bits(self._rt.mask(c)[0], self.artifact.vocab_size)

    def current_row(self) -> NDArray[np.int32]:
        """The read-only int32 bitmask row of the current configuration (zero once terminated)."""
        c = self._history[-1]
        return self._rt.mask(c)[0] if c else zero_row(self._vocab_size)

    def fill_next_token_bitmask(self, bitmask: Any, index: int = 0) -> None:
        """Write the allowed set into row ``index`` of an int32 ``[batch, ceil(V/32)]`` bitmask;
        raises as :meth:`~maskc.artifacts.matcher.Matcher.fill_next_token_bitmask`."""
        view = bitmask_rows(bitmask, self._vocab_size, index)
        c = self._history[-1]
        row = self._rt.mask(c)[0] if c else zero_row(self._vocab_size)
        if view is not None:
            view[index] = row
        else:
            from maskc.artifacts.torch import copy_row

            copy_row(bitmask, index, row, key=-1, cache=self.artifact._torch_rows)

    # -- forced output --------------------------------------------------------------------------

    def find_jump_forward_bytes(self) -> bytes:
        c = self._history[-1]
        if not c:
            return b""
        got = self._forced.get(c)
        if got is None:
            got = self._rt.forced(c)
            if len(self._forced) > 1024:
                self._forced.clear()
            self._forced[c] = got
        return got

    def find_jump_forward_string(self) -> str:
        return whole_chars(self.find_jump_forward_bytes())
