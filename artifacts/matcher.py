"""The runtime matcher: a DFA state stack driven token by token.

Error policy: the matcher never raises on model behaviour. ``accept_token`` returns False
for a token the grammar rejects and leaves the state unchanged; only API misuse (a bitmask
of the wrong shape, a negative rollback) raises.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from maskc.compiler.maskstore import bitmask_words

if TYPE_CHECKING:
    from maskc.artifacts.artifact import Artifact
    from maskc.compiler.vocab import Vocabulary

__all__ = ["Matcher", "attached_vocab", "check_bitmask", "whole_chars"]

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


def check_bitmask(bitmask: Any, vocab_size: int, index: int) -> int:
    """Validate an int32 ``[batch, ceil(V/32)]`` bitmask and a row index; the words per row."""
    words = bitmask_words(vocab_size)
    shape = tuple(bitmask.shape)
    if len(shape) != 2 or shape[1] != words:
        raise ValueError(f"bitmask must have shape [batch, {words}], got {list(shape)}")
    if not 0 <= index < shape[0]:
        raise ValueError(f"index {index} out of range for batch {shape[0]}")
    return words


def whole_chars(data: bytes) -> str:
    """``data`` cut to whole UTF-8 characters (a forced continuation may end mid-character)."""
    for cut in range(len(data), max(-1, len(data) - 4), -1):
        try:
            return data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return ""


class Matcher:
    """Tracks one output against an artifact; names mirror XGrammar's ``GrammarMatcher``."""

    def __init__(self, artifact: Artifact) -> None:
        vocab = attached_vocab(artifact)
        self.artifact = artifact
        self._tokens = vocab.token_bytes
        self._eos = frozenset(artifact.eos_token_ids)
        self._special = vocab.special_ids
        self._stack: list[int] = [0]
        self._step_cache: dict[tuple[int, int], int] = artifact._step_cache

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
        """Undo the last ``num_tokens`` accepted tokens."""
        if num_tokens < 0 or num_tokens > self.num_accepted:
            raise ValueError(f"can roll back 0..{self.num_accepted} tokens, got {num_tokens}")
        if num_tokens:
            del self._stack[-num_tokens:]

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
        """Advance by one token; False (state unchanged) if the grammar rejects it."""
        s = self._stack[-1]
        if s == _TERMINATED or not isinstance(token_id, (int, np.integer)):
            return False
        t = int(token_id)
        if t in self._eos:
            if self.artifact.dfa.accepting[s]:
                self._stack.append(_TERMINATED)
                return True
            return False
        if t < 0 or t >= len(self._tokens) or t in self._special:
            return False
        nxt = self._next(s, t)
        if nxt < 0:
            return False
        self._stack.append(nxt)
        return True

    def accept_string(self, text: str | bytes) -> bool:
        """Advance by raw bytes (not tokens); False (state unchanged) if rejected. Not undoable by rollback."""
        data = text.encode() if isinstance(text, str) else text
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

        ``bitmask`` is a numpy array or a torch tensor (CPU or CUDA). Once terminated, no
        token is allowed.
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
