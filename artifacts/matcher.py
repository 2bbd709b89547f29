"""The runtime matcher: a DFA state stack driven token by token.

Error policy: the matcher never raises on model behaviour. ``accept_token`` returns False
for a token the grammar rejects (any id in ``[0, vocab_size)``: special, padding or not
allowed here) and leaves the state unchanged. API misuse raises ``TypeError`` (a wrong
type or dtype) or ``ValueError`` (a wrong shape, a non-contiguous bitmask, an index, id or
rollback count out of range), saying what was expected and what came; the checks are here,
shared by :class:`Matcher` and :class:`~maskc.artifacts.pushdown.PushdownMatcher`.
"""

from __future__ import annotations

import operator
import sys
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from maskc.compiler.maskstore import bitmask_words
from maskc.compiler.utf8 import whole_chars

if TYPE_CHECKING:
    from maskc.artifacts.artifact import Artifact
    from maskc.compiler.vocab import Vocabulary

__all__ = ["Matcher", "attached_vocab", "check_bitmask", "check_rollback", "check_token_id", "grammar_tag",
           "string_bytes", "whole_chars"]

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
        key = (state, token_id)
        nxt = self._step_cache.get(key)
        if nxt is None:
            data = self._tokens[token_id]
            nxt = self.artifact.dfa.walk(state, data) if data else -1
            self._step_cache[key] = nxt
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
        if s == _TERMINATED:
            return False
        if t in self._eos:
            if self.artifact.dfa.accepting[s]:
                self._stack.append(_TERMINATED)
                return True
            return False
        if t >= len(self._tokens) or t in self._special:
            return False
        nxt = self._next(s, t)
        if nxt < 0:
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

    def fill_next_token_bitmask(self, bitmask: Any, index: int = 0) -> None:
        """Write the allowed set into row ``index`` of an int32 ``[batch, ceil(V/32)]`` bitmask.

        ``bitmask`` is a numpy array or a torch tensor (CPU or CUDA), contiguous, with exactly
        ``ceil(artifact.vocab_size / 32)`` words per row. Once terminated, no token is allowed.

        Raises:
            TypeError: not a numpy array or torch tensor, not int32, a non-integer ``index``.
            ValueError: another shape, a non-contiguous or read-only bitmask, ``index`` outside
            the batch.
        """
        words = check_bitmask(bitmask, self.artifact.vocab_size, index)
        s = self._stack[-1]
        row = np.zeros(words, dtype=np.int32) if s == _TERMINATED else self.artifact.mask_row(s)
        if isinstance(bitmask, np.ndarray):
            bitmask[index, :] = row
        else:
            from maskc.artifacts.torch import copy_row

            copy_row(bitmask, index, row, key=int(self.artifact.state_mask[s]) if s >= 0 else -1, cache=self.artifact._torch_rows)

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
