"""The runtime matcher: a DFA state stack driven token by token.

Error policy: the matcher never raises on model behaviour. ``accept_token`` returns False
for a token the grammar rejects (any id in ``[0, vocab_size)``: special, padding or not
allowed here) and leaves the state unchanged. API misuse raises ``TypeError`` (a wrong
type or dtype) or ``ValueError`` (a wrong shape, a non-contiguous bitmask, an index, id or
rollback count out of range), saying what was expected and what came; the checks are here,
shared by :class:`Matcher` and :class:`~maskc.artifacts.pushdown.PushdownMatcher`.
"""

from __future__ import annotations

import ctypes
import operator
import sys
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from maskc.artifacts.bitmask import write_ids
from maskc.compiler.maskstore import bitmask_words
from maskc.compiler.utf8 import whole_chars

if TYPE_CHECKING:
    from maskc.artifacts.artifact import Artifact
    from maskc.compiler.vocab import Vocabulary

__all__ = ["Matcher", "attached_vocab", "bitmask_rows", "check_bitmask", "check_rollback", "check_token_id",
           "fill_next_token_bitmasks", "grammar_tag", "string_bytes", "whole_chars"]

_TERMINATED = -2


def attached_vocab(artifact: Artifact) -> Vocabulary:
    """The tokenizer a matcher needs, or a ValueError saying how to attach it."""
    vocab: Vocabulary | None = getattr(artifact, "tokenizer", None)
    if vocab is None:
        raise ValueError(
            "the matcher needs the tokenizer's token bytes: load the artifact with "
            "load_artifact(path, tokenizer=maskc.load_tokenizer(spec))"
        )
    return vocab


_ALLOCATE = ("allocate it with maskc.allocate_token_bitmask(batch, artifact.vocab_size) (torch) or "
             "maskc.allocate_bitmask_np(batch, artifact.vocab_size) (numpy)")


def _is_tensor(x: object) -> bool:
    """Whether ``x`` is a torch tensor, without importing torch."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def check_bitmask(bitmask: Any, vocab_size: int, index: int) -> int:
    """Validate an int32 ``[batch, ceil(V/32)]`` bitmask and a row index; the words per row.

    Raises:
        TypeError: not a numpy array or torch tensor, a dtype other than int32, a non-integer
            ``index``.
        ValueError: another shape, a non-contiguous or read-only array, ``index`` out of range.
    """
    words = bitmask_words(vocab_size)
    if isinstance(bitmask, np.ndarray):
        dtype_ok = bitmask.dtype == np.int32
        flags = bitmask.flags
        contiguous, writeable = bool(flags.c_contiguous), bool(flags.writeable)
    elif _is_tensor(bitmask):
        dtype_ok = str(bitmask.dtype) == "torch.int32"
        contiguous = bool(bitmask.is_contiguous())
        writeable = True
    else:
        raise TypeError(f"bitmask must be a numpy array or a torch tensor of dtype int32, got "
                        f"{type(bitmask).__name__}; {_ALLOCATE}")
    if not dtype_ok:
        raise TypeError(f"bitmask must have dtype int32, got {bitmask.dtype} (32 token bits per word); {_ALLOCATE}")
    shape = tuple(bitmask.shape)
    if len(shape) != 2 or shape[1] != words:
        raise ValueError(f"bitmask must have shape [batch, {words}] (ceil(vocab_size / 32) words for vocab_size "
                         f"{vocab_size}), got {list(shape)}; {_ALLOCATE}")
    if not contiguous:
        raise ValueError(f"bitmask must be contiguous (row-major, as allocated), got a strided view of shape "
                         f"{list(shape)}; fill a contiguous bitmask and pass that same object to "
                         "apply_token_bitmask_inplace")
    if not writeable:
        raise ValueError("bitmask is read-only; fill a writeable array")
    if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
        raise TypeError(f"index must be an int, got {type(index).__name__}")
    if not 0 <= index < shape[0]:
        raise ValueError(f"index must lie in [0, {shape[0]}) (the bitmask's batch), got {index}")
    return words


_I32 = np.dtype(np.int32)
_VIEW_LIMIT = 64
# id(tensor) -> (weak reference, numpy view of its memory, its shape, its data pointer)
_VIEWS: dict[int, tuple[Any, NDArray[np.int32], Any, int]] = {}


def bitmask_rows(bitmask: Any, vocab_size: int, index: int) -> NDArray[np.int32] | None:
    """Validate ``bitmask`` and ``index`` as :func:`check_bitmask` does; the numpy array that
    shares the bitmask's memory (the array itself, or a cached view of a CPU tensor), or None
    for a tensor on another device.

    The common cases cost a few attribute reads: a numpy array is checked in place; a CPU
    tensor's view is made once and found again by identity, shape, data pointer and
    contiguity (a ``resize_``, ``set_`` or ``as_strided_`` makes a new one).
    """
    words = (vocab_size + 31) >> 5
    if type(bitmask) is np.ndarray:
        shape = bitmask.shape
        flags = bitmask.flags
        if (bitmask.dtype == _I32 and len(shape) == 2 and shape[1] == words and type(index) is int
                and 0 <= index < shape[0] and flags.c_contiguous and flags.writeable):
            return bitmask
    else:
        got = _VIEWS.get(id(bitmask))
        if (got is not None and got[0]() is bitmask and type(index) is int and got[2][1] == words
                and 0 <= index < got[2][0] and bitmask.data_ptr() == got[3] and bitmask.shape == got[2]
                and bitmask.is_contiguous()):
            return got[1]
    check_bitmask(bitmask, vocab_size, index)
    if isinstance(bitmask, np.ndarray):
        return bitmask
    if bitmask.device.type != "cpu":
        return None
    # A view over the tensor's memory that holds no reference to its storage (a numpy view
    # from ``Tensor.numpy()`` would pin the storage and make ``resize_`` fail): it is used
    # only while the tensor is alive with the same shape, data pointer and contiguity.
    shape = tuple(bitmask.shape)
    ptr = int(bitmask.data_ptr())
    count = shape[0] * shape[1]  # a ctypes array over the memory (np.ctypeslib costs ~1.5 ms on first use)
    view = np.frombuffer((ctypes.c_int32 * count).from_address(ptr), dtype=np.int32, count=count).reshape(shape)
    key = id(bitmask)
    if len(_VIEWS) >= _VIEW_LIMIT:
        _VIEWS.clear()
    def forget(_ref: Any, key: int = key) -> None:
        _VIEWS.pop(key, None)

    try:
        ref = weakref.ref(bitmask, forget)
    except TypeError:
        return view
    _VIEWS[key] = (ref, view, bitmask.shape, ptr)
    return view


def check_token_id(token_id: object, vocab_size: int) -> int:
    """``token_id`` as an int in ``[0, vocab_size)``, or a TypeError/ValueError (API misuse).

    Any integer (``int``, numpy integer, a one-element integer torch tensor) is taken; ids
    in range that the grammar or the tokenizer does not allow are the matcher's business
    (``accept_token`` returns False), not errors.
    """
    if type(token_id) is int:
        t = token_id
    else:
        if isinstance(token_id, (bool, np.bool_)):
            raise TypeError(f"token_id must be an int, got {type(token_id).__name__}")
        try:
            t = operator.index(token_id)  # type: ignore[arg-type]
        except TypeError:
            raise TypeError(f"token_id must be an int, got {type(token_id).__name__} {token_id!r:.40}") from None
    if not 0 <= t < vocab_size:
        raise ValueError(f"token_id must lie in [0, {vocab_size}) (the artifact's vocab_size), got {t}")
    return t


def check_rollback(num_tokens: object, accepted: int) -> int:
    """``num_tokens`` as an int in ``[0, accepted]``, or a TypeError/ValueError."""
    if isinstance(num_tokens, (bool, np.bool_)) or not isinstance(num_tokens, (int, np.integer)):
        raise TypeError(f"num_tokens must be an int, got {type(num_tokens).__name__}")
    n = int(num_tokens)
    if not 0 <= n <= accepted:
        raise ValueError(f"can roll back 0..{accepted} tokens (the tokens accepted since the start or the "
                         f"last reset), got {n}")
    return n


def string_bytes(text: object) -> bytes:
    """``text`` as bytes (UTF-8 for a str), or a TypeError."""
    if isinstance(text, str):
        return text.encode()
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text)
    raise TypeError(f"text must be a str or bytes, got {type(text).__name__}")


def grammar_tag(artifact: Artifact) -> str:
    """``kind:sha-prefix`` of an artifact's grammar, for reprs."""
    meta = artifact.metadata
    return f"{meta.get('grammar_kind', '?')}:{meta.get('grammar_sha256', '?')[:12]}"


_ZERO_ROWS: dict[int, NDArray[np.int32]] = {}


def zero_row(vocab_size: int) -> NDArray[np.int32]:
    """A read-only all-zero row (no token allowed) of ``ceil(vocab_size / 32)`` words."""
    row = _ZERO_ROWS.get(vocab_size)
    if row is None:
        row = np.zeros(bitmask_words(vocab_size), dtype=np.int32)
        row.setflags(write=False)
        _ZERO_ROWS[vocab_size] = row
    return row


def fill_next_token_bitmasks(matchers: Sequence[Any], bitmask: Any, indices: Sequence[int] | None = None) -> None:
    """Fill one bitmask row per matcher in one call: row ``indices[k]`` (default ``k``) gets
    ``matchers[k]``'s allowed set, as :meth:`Matcher.fill_next_token_bitmask` would.

    Args:
        matchers: :class:`Matcher` or :class:`~maskc.artifacts.pushdown.PushdownMatcher`
            objects (of one artifact or several), all with the same ``vocab_size``.
        bitmask: int32 ``[batch, ceil(vocab_size / 32)]``, a numpy array or a torch tensor on
            any device (XGrammar's layout, bit 1 = allowed). A CUDA tensor is written with one
            host-to-device copy of the whole batch.
        indices: the bitmask row of each matcher; rows not named are left as they are.

    Raises:
        TypeError, ValueError: as ``fill_next_token_bitmask``; also matchers of differing
        ``vocab_size``, or a ``len(indices)`` other than ``len(matchers)``.

    Example::

        bitmask = maskc.allocate_token_bitmask(len(matchers), art.vocab_size)
        maskc.fill_next_token_bitmasks(matchers, bitmask)
        maskc.apply_token_bitmask_inplace(logits, bitmask.to(logits.device, non_blocking=True))
    """
    n = len(matchers)
    if indices is None:
        rows = list(range(n))
    else:
        rows = [operator.index(i) for i in indices]
        if len(rows) != n:
            raise ValueError(f"indices must name one bitmask row per matcher: {n} matchers, {len(rows)} indices")
    if n == 0:
        return
    from maskc.artifacts.pushdown import PushdownMatcher

    for m in matchers:
        if not isinstance(m, (Matcher, PushdownMatcher)):
            raise TypeError(f"matchers must be maskc matchers, got {type(m).__name__}")
    vocab_size = matchers[0].artifact.vocab_size
    other = next((m.artifact.vocab_size for m in matchers if m.artifact.vocab_size != vocab_size), None)
    if other is not None:
        raise ValueError(f"matchers must share one vocab_size (the bitmask's width), got {vocab_size} and {other}")
    view = bitmask_rows(bitmask, vocab_size, 0)
    batch = int(bitmask.shape[0])
    bad = [i for i in rows if not 0 <= i < batch]
    if bad:
        raise ValueError(f"indices must lie in [0, {batch}) (the bitmask's batch), got {bad[:5]}")
    if len(set(rows)) != n:
        raise ValueError("indices must be distinct: two matchers cannot fill one row")
    if view is None:
        from maskc.artifacts.torch import staged_fill

        staged_fill(bitmask, matchers, rows)
        return
    for m, i in zip(matchers, rows):
        if type(m) is Matcher:
            m.write_row(view, i)
        else:
            view[i] = m.current_row()


class Matcher:
    """Tracks one output against an artifact; names mirror XGrammar's ``GrammarMatcher``."""

    def __init__(self, artifact: Artifact) -> None:
        vocab = attached_vocab(artifact)
        self.artifact = artifact
        self._tokens = vocab.token_bytes
        self._eos = frozenset(artifact.eos_token_ids)
        self._special = vocab.special_ids
        self._vocab_size = artifact.vocab_size
        self._stack: list[int] = [0]
        self._step_cache: dict[tuple[int, int], int] = artifact._step_cache
        self._state_rows: dict[int, NDArray[np.int32]] = artifact._state_rows
        self._plans = artifact._plans
        self._zero_row = zero_row(self._vocab_size)
        self._step: Any = None  # the DFA's stepper, made on the first walk

    def __repr__(self) -> str:
        s = self._stack[-1]
        state = "-" if s == _TERMINATED else str(s)
        return (f"<Matcher {grammar_tag(self.artifact)} state={state} accepted={self.num_accepted} "
                f"terminated={self.is_terminated()} can_terminate={self.can_terminate()}>")

    # -- state ------------------------------------------------------------------------------

    @property
    def state(self) -> int:
        """The current DFA state (-2 once terminated by EOS)."""
        return self._stack[-1]

    @property
    def num_accepted(self) -> int:
        return len(self._stack) - 1

    def is_terminated(self) -> bool:
        return self._stack[-1] == _TERMINATED

    def can_terminate(self) -> bool:
        """Whether the output so far is complete (EOS would be accepted now)."""
        s = self._stack[-1]
        return s >= 0 and bool(self.artifact.dfa.accepting[s])

    def reset(self) -> None:
        self._stack = [0]

    def rollback(self, num_tokens: int = 1) -> None:
        """Undo the last ``num_tokens`` accepted tokens.

        Raises:
            TypeError: ``num_tokens`` is not an int. ValueError: negative, or more than
            :attr:`num_accepted`.
        """
        n = check_rollback(num_tokens, self.num_accepted)
        if n:
            del self._stack[-n:]

    # -- stepping ---------------------------------------------------------------------------

    def _next(self, state: int, token_id: int) -> int:
        """The state after ``token_id`` (``_TERMINATED`` after EOS), or -1; memoized per artifact."""
        if token_id in self._eos:
            nxt = _TERMINATED if self.artifact.dfa.accepting[state] else -1
        elif token_id >= len(self._tokens) or token_id in self._special or not self._tokens[token_id]:
            nxt = -1
        else:
            if self._step is None:  # (the stepper made once per matcher, not once per walk)
                self._step = self.artifact.dfa.stepper()
            nxt = self.artifact.dfa.walk(state, self._tokens[token_id], self._step)
        self._step_cache[(state, token_id)] = nxt
        return nxt

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (state unchanged) if the grammar rejects it.

        Any id in ``[0, vocab_size)`` is model behaviour: a special, padding or disallowed id
        returns False, as does every token once terminated.

        Raises:
            TypeError: ``token_id`` is not an integer. ValueError: outside ``[0, vocab_size)``.
        """
        t = token_id if type(token_id) is int and 0 <= token_id < self._vocab_size else (
            check_token_id(token_id, self._vocab_size))
        s = self._stack[-1]
        nxt = self._step_cache.get((s, t))
        if nxt is None:
            if s == _TERMINATED:
                return False
            nxt = self._next(s, t)
        if nxt == -1:
            return False
        self._stack.append(nxt)
        return True

    def accept_string(self, text: str | bytes) -> bool:
        """Advance by raw bytes (not tokens); False (state unchanged) if rejected. Not undoable by rollback."""
        data = string_bytes(text)
        s = self._stack[-1]
        if s == _TERMINATED:
            return False
        nxt = self.artifact.dfa.walk(s, data)
        if nxt < 0:
            return False
        self._stack[-1] = nxt
        return True

    def allowed_token_ids(self) -> NDArray[np.int64]:
        s = self._stack[-1]
        if s == _TERMINATED:
            return np.zeros(0, dtype=np.int64)
        return self.artifact.allowed_tokens(s)

    def current_row(self) -> NDArray[np.int32]:
        """The read-only int32 bitmask row of the current state (all zero once terminated)."""
        s = self._stack[-1]
        row = self._state_rows.get(s)
        if row is None:
            row = zero_row(self._vocab_size) if s == _TERMINATED else self.artifact.mask_row(s)
        return row

    def fill_next_token_bitmask(self, bitmask: Any, index: int = 0) -> None:
        """Write the allowed set into row ``index`` of an int32 ``[batch, ceil(V/32)]`` bitmask.

        ``bitmask`` is a numpy array or a torch tensor (CPU or CUDA), contiguous, with exactly
        ``ceil(artifact.vocab_size / 32)`` words per row. Once terminated, no token is allowed.
        A CPU tensor is written through a numpy view of its memory (no torch call per step);
        a CUDA tensor gets one row copy per call (fill a CPU bitmask and move it once, or use
        :func:`fill_next_token_bitmasks`, for a batch).

        Raises:
            TypeError: not a numpy array or torch tensor, not int32, a non-integer ``index``.
            ValueError: another shape, a non-contiguous or read-only bitmask, ``index`` outside
            the batch.
        """
        view = bitmask_rows(bitmask, self._vocab_size, index)
        if view is not None:
            self.write_row(view, index)
        else:
            s = self._stack[-1]
            row = self.artifact.mask_row(s) if s != _TERMINATED else zero_row(self._vocab_size)
            from maskc.artifacts.torch import copy_row

            key = int(self.artifact.state_mask[s]) if s >= 0 else -1
            copy_row(bitmask, index, row, key=key, cache=self.artifact._torch_rows)

    def write_row(self, view: NDArray[np.int32], index: int) -> None:
        """Write the allowed set into ``view[index]`` (a validated numpy bitmask) through the
        state's cached fill plan: on a first visit, a short allow list as a clear and a bit
        set per token; on later visits, and for any other mask, a row copy."""
        s = self._stack[-1]
        plan = self._plans.get(s)
        if plan is None:
            if s == _TERMINATED:
                view[index] = self._zero_row
                return
            plan = self.artifact.fill_plan(s)
        elif type(plan) is list:
            plan = self.artifact.row_plan(s)  # visited again: one row copy from now on
        if type(plan) is list:
            view[index] = self._zero_row  # (a row copy: faster than fill(0))
            write_ids(view[index], plan)
        else:
            view[index] = plan

    # -- forced output ----------------------------------------------------------------------

    def find_jump_forward_bytes(self) -> bytes:
        """Bytes every continuation must start with (the grammar forces them)."""
        s = self._stack[-1]
        if s < 0:
            return b""
        return self.artifact.forced_bytes(s)

    def find_jump_forward_string(self) -> str:
        """The forced continuation, cut to whole UTF-8 characters."""
        return whole_chars(self.find_jump_forward_bytes())


class CountingMatcher(Matcher):
    """A :class:`Matcher` for an artifact with counted loops: beside each state it keeps the
    count of the loop the state is in (arrivals at the loop's head since it was entered),
    and leaves a loop at its ``span``-th arrival. Masks do not depend on the count (a loop
    keeps more than a token's length from its bounds), so filling is :class:`Matcher`'s. A
    token within its length of a loop's exit is walked exactly (it may pass the exit: a
    loop may span fewer positions than a token has bytes)."""

    def __init__(self, artifact: Artifact) -> None:
        super().__init__(artifact)
        counters = artifact.dfa.counters
        assert counters is not None
        self._counters = counters
        self._start_count: Any = 0  # the count a walk from the first state starts with
        self._counts: list[Any] = [self._start_count]
        # Per state: the count at which a token may reach the exit (huge outside loops); built
        # once per artifact, so a new matcher (one per request) costs nothing per state or token.
        if artifact._counted_room is None:
            span = counters.span.tolist()
            artifact._counted_room = [span[r] if r >= 0 else 1 << 62 for r in counters.region.tolist()]
        self._room: list[int] = artifact._counted_room
        self._counted_cache: dict[tuple[int, int], tuple[int, int, bool]] = artifact._counted_step_cache

    @property
    def count(self) -> int:
        """Arrivals at the head of the current state's loop since it was entered (0 outside loops)."""
        return int(self._counts[-1])

    def reset(self) -> None:
        self._stack = [0]
        self._counts = [self._start_count]

    def rollback(self, num_tokens: int = 1) -> None:
        n = check_rollback(num_tokens, self.num_accepted)
        if n:
            del self._stack[-n:]
            del self._counts[-n:]

    def _walk(self, state: int, count: Any, data: bytes) -> tuple[int, Any]:
        return self._counters.walk(self.artifact.dfa, state, count, data)

    def _special_step(self, state: int, token_id: int) -> int | None:
        """Where EOS or a token that spells nothing leads from ``state`` (-1: rejected);
        None for a token with bytes, which is walked."""
        if token_id in self._eos:
            return _TERMINATED if self.artifact.dfa.accepting[state] else -1
        if token_id >= len(self._tokens) or token_id in self._special or not self._tokens[token_id]:
            return -1
        return None

    def accept_token(self, token_id: int) -> bool:
        t = token_id if type(token_id) is int and 0 <= token_id < self._vocab_size else (
            check_token_id(token_id, self._vocab_size))
        s = self._stack[-1]
        if s == _TERMINATED:
            return False
        c = self._counts[-1]
        got = self._counted_cache.get((s, t))
        if got is None:
            special = self._special_step(s, t)
            if special is not None:
                got = (special, 0, False)
            else:
                # The walk from count 0: used below only where the count before the token
                # is too far from the exit for the token to reach it (so from 0 it reaches
                # no exit of this loop either), and where the count adds on if the token
                # stays in the loop throughout. A loop the token enters counts from 0 both ways.
                nxt, n = self._walk(s, 0, self._tokens[t])
                got = (nxt, n, nxt >= 0 and self._same_run(s, t))
            self._counted_cache[(s, t)] = got
        nxt, n, same = got
        if nxt == -1:
            return False
        if nxt >= 0:
            if c + len(self._tokens[t]) >= self._room[s]:
                # The token may reach the exit of this state's loop: the exact walk.
                nxt, n = self._walk(s, c, self._tokens[t])
                if nxt < 0:
                    return False
            elif same:
                n += c
        self._stack.append(nxt)
        self._counts.append(n)
        return True

    def _same_run(self, state: int, token_id: int) -> bool:
        """Whether ``token_id`` walked from ``state`` stays in ``state``'s loop throughout
        (so its count adds to the count before it)."""
        region = self._counters.region.item
        r = region(state)
        if r < 0:
            return False
        dfa = self.artifact.dfa
        step, klass = dfa.stepper(), dfa.byte_class.item
        s = state
        for b in self._tokens[token_id]:
            s = step(s, klass(b))
            if s < 0 or region(s) != r:
                return False
        return True

    def accept_string(self, text: str | bytes) -> bool:
        data = string_bytes(text)
        s = self._stack[-1]
        if s == _TERMINATED:
            return False
        nxt, n = self._walk(s, self._counts[-1], data)
        if nxt < 0:
            return False
        self._stack[-1] = nxt
        self._counts[-1] = n
        return True


class NestedCountingMatcher(CountingMatcher):
    """A :class:`Matcher` for an artifact whose counted loops nest (a counted array of items
    that hold counted strings): beside each state, a stack of counts, one per loop the
    state is inside (:meth:`~maskc.compiler.counters.Counters.walk_stack`). Masks do not
    depend on the counts, as in :class:`CountingMatcher`."""

    def __init__(self, artifact: Artifact) -> None:
        super().__init__(artifact)
        counters = self._counters
        if artifact._nested_spans is None:  # per state, the spans of its loops, outermost first
            chains = counters.chains()
            span = counters.span.tolist()
            by_loop = [tuple(span[k] for k in chain) for chain in chains]
            artifact._nested_chains = chains
            artifact._nested_spans = [by_loop[r] if r >= 0 else () for r in counters.region.tolist()]
        self._chains: list[tuple[int, ...]] = artifact._nested_chains
        self._spans: list[tuple[int, ...]] = artifact._nested_spans
        self._nested_cache: dict[tuple[int, int], tuple[int, tuple[int, ...], int]] = artifact._nested_step_cache
        # a zero for each loop the first state is inside (a grammar may begin inside a loop)
        self._start_count = counters.zeros(0, self._chains)
        self.reset()

    @property
    def count(self) -> int:
        """Arrivals at the head of the current state's innermost loop since it was entered (0 outside loops)."""
        c = self._counts[-1]
        return c[-1] if c else 0

    @property
    def counts(self) -> tuple[int, ...]:
        """The count of each loop the current state is inside, outermost first."""
        counts: tuple[int, ...] = self._counts[-1]
        return counts

    def accept_token(self, token_id: int) -> bool:
        t = token_id if type(token_id) is int and 0 <= token_id < self._vocab_size else (
            check_token_id(token_id, self._vocab_size))
        s = self._stack[-1]
        got = self._from_zero(s, t) if s != _TERMINATED else None
        if got is None or got[0] == -1:
            return False
        nxt, n, kept = got
        c = self._counts[-1]
        if nxt >= 0 and c:
            size = len(self._tokens[t])
            if any(x + size >= sp for x, sp in zip(c, self._spans[s])):
                # The token may reach the exit of one of this state's loops: the exact walk.
                nxt, n = self._walk(s, c, self._tokens[t])
                if nxt < 0:
                    return False
            elif kept:
                n = tuple(x + y for x, y in zip(c[:kept], n)) + n[kept:]
        self._stack.append(nxt)
        self._counts.append(n)
        return True

    def _from_zero(self, state: int, token_id: int) -> tuple[int, tuple[int, ...], int]:
        """The walk of ``token_id`` from ``state`` with every count 0 (memoized per artifact):
        the counts the token leaves, and how many of the loops it starts in it never left.
        Read only where no count is within the token's length of its loop's exit (so the
        walk from 0 passes no exit of those loops either: see :meth:`accept_token`)."""
        got = self._nested_cache.get((state, token_id))
        if got is None:
            special = self._special_step(state, token_id)
            if special is not None:
                got = (special, (), 0)
            else:
                got = self._counters.walk_kept(self.artifact.dfa, state, (0,) * len(self._spans[state]),
                                               self._tokens[token_id], self._chains)
            self._nested_cache[(state, token_id)] = got
        return got

    def _walk(self, state: int, count: Any, data: bytes) -> tuple[int, Any]:
        return self._counters.walk_stack(self.artifact.dfa, state, count, data, self._chains)
