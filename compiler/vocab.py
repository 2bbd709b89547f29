"""The vocabulary a mask is compiled against: the exact bytes of every token id.

:class:`Vocabulary` is what the compiler sees of a tokenizer: ``token_bytes[i]`` is what id
``i`` appends to the output when it is decoded as part of a continuation, which ids are
special (never allowed, except EOS where the grammar can end) and how wide the logits are.
This module also owns the decoding rules that turn a tokenizer's token strings into those
bytes (GPT-2 byte-level, SentencePiece ``▁`` and ``<0xNN>`` byte fallback); the file
readers that use them live in :mod:`maskc.compiler.tokenizer`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache

import numpy as np
from numpy.typing import NDArray

from maskc.compiler.errors import TokenizerError

__all__ = [
    "MAX_VOCAB_SIZE",
    "GreedyEncoder",
    "Vocabulary",
    "byte_level_decoder",
    "byte_tokenizer",
    "decode_byte_level",
    "decode_metaspace",
]

Encoder = Callable[[str], list[int]]

METASPACE = "\u2581"
"""SentencePiece's visible space, ``▁``."""

_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")

_FINGERPRINT_MAGIC = b"maskc-vocabulary-v1\0"

MAX_VOCAB_SIZE = 1 << 24
"""The widest logits a vocabulary may declare (16,777,216 columns, far above any real model)."""


@dataclass(frozen=True)
class Vocabulary:
    """A tokenizer as the mask compiler sees it.

    Invariants (checked on construction): ``len(token_bytes) <= vocab_size``; special and EOS
    ids index ``token_bytes``; every EOS id is special; every non-special token has at least
    one byte, so no allowed token can leave the output unchanged.

    Attributes:
        name: A human name for messages and artifact metadata (not part of the fingerprint).
        token_bytes: The bytes id ``i`` produces when decoded inside a continuation. For special
            tokens, the UTF-8 of their literal content, for display only.
        special_ids: Special, control, unknown and unused ids. The compiler never allows them,
            except an EOS id where the grammar can end.
        eos_ids: Sorted ids that end a generation; empty only when none could be detected.
        vocab_size: The logits width. Ids ``len(token_bytes) .. vocab_size - 1`` are padding
            columns: they exist in the model's output but no tokenizer id maps to them, and a
            mask must always reject them.
    """

    name: str
    token_bytes: tuple[bytes, ...]
    special_ids: frozenset[int]
    eos_ids: tuple[int, ...]
    vocab_size: int
    _encoder: Encoder | None = field(default=None, compare=False, repr=False, hash=False)

    def __post_init__(self) -> None:
        n = len(self.token_bytes)
        if isinstance(self.vocab_size, bool) or not isinstance(self.vocab_size, int):
            raise TypeError(f"vocab_size must be an int, got {type(self.vocab_size).__name__}")
        if self.vocab_size < n:
            raise ValueError(f"vocab_size must be >= the token count {n}, got {self.vocab_size}")
        if self.vocab_size > MAX_VOCAB_SIZE:
            raise ValueError(f"vocab_size must be at most {MAX_VOCAB_SIZE}, got {self.vocab_size}")
        bad = [i for i in self.special_ids if not 0 <= i < n]
        if bad:
            raise ValueError(f"special ids must lie in [0, {n}), got {sorted(bad)[:5]}")
        if list(self.eos_ids) != sorted(set(self.eos_ids)):
            raise ValueError(f"eos_ids must be sorted and unique, got {self.eos_ids}")
        if any(not 0 <= i < n for i in self.eos_ids):
            raise ValueError(f"eos ids must lie in [0, {n}), got {self.eos_ids}")
        if not self.special_ids.issuperset(self.eos_ids):
            raise ValueError(f"every eos id must be special, got {self.eos_ids}")
        for i, b in enumerate(self.token_bytes):
            if type(b) is not bytes:
                raise TypeError(f"token_bytes[{i}] must be bytes, got {type(b).__name__}")
            if not b and i not in self.special_ids:
                raise ValueError(f"token {i} decodes to no bytes but is not special")

    def __repr__(self) -> str:
        # Short on purpose: the generated repr would print every token's bytes (megabytes).
        eos = repr(self.eos_ids) if len(self.eos_ids) <= 8 else f"({str(self.eos_ids[:8])[1:-1]}, ...)"
        return (
            f"Vocabulary(name={self.name[:80]!r}, tokens={self.token_count}, "
            f"vocab_size={self.vocab_size}, eos_ids={eos}, fingerprint={self.fingerprint[:12]})"
        )

    # -- derived data -------------------------------------------------------------------

    @property
    def token_count(self) -> int:
        """The number of tokenizer ids, ``len(token_bytes)`` (at most ``vocab_size``)."""
        return len(self.token_bytes)

    @cached_property
    def fingerprint(self) -> str:
        """Hex sha256 of everything a mask depends on, identical across processes.

        Covers ``vocab_size``, each id's bytes (length-prefixed, in id order), the sorted
        special ids and the sorted EOS ids; the name and the encoder are left out.
        """
        flat, offsets = self.flat()
        h = hashlib.sha256(_FINGERPRINT_MAGIC)
        h.update(np.array([self.vocab_size, self.token_count], dtype="<i8").tobytes())
        h.update(np.diff(offsets).astype("<i8").tobytes())
        h.update(flat.tobytes())
        for ids in (sorted(self.special_ids), list(self.eos_ids)):
            h.update(np.array([len(ids), *ids], dtype="<i8").tobytes())
        return h.hexdigest()

    def flat(self) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
        """All token bytes as one array, and the offsets that slice it.

        Returns:
            ``(flat, offsets)``, read-only: the bytes of id ``i`` are
            ``flat[offsets[i]:offsets[i + 1]]``; ``offsets`` has ``token_count + 1`` entries.
        """
        return self._flat

    @cached_property
    def _flat(self) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
        flat = np.frombuffer(b"".join(self.token_bytes), dtype=np.uint8).copy()
        lengths = np.fromiter(map(len, self.token_bytes), dtype=np.int64, count=self.token_count)
        offsets = np.zeros(self.token_count + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat.flags.writeable = False
        offsets.flags.writeable = False
        return flat, offsets

    @cached_property
    def _ids_by_bytes(self) -> dict[bytes, int]:
        # Special ids win over ordinary tokens with the same bytes, then the lowest id.
        # Later assignments win: ordinary ids from the highest down, then special ids.
        tb = self.token_bytes
        index = {tb[i]: i for i in range(self.token_count - 1, -1, -1)}
        index.update((tb[i], i) for i in sorted(self.special_ids, reverse=True))
        return index

    def token_id(self, token: str | bytes) -> int | None:
        """The id whose bytes (or special content) are exactly ``token``, or None.

        A special token wins over an ordinary one with the same bytes.
        """
        key = token.encode("utf-8") if isinstance(token, str) else token
        return self._ids_by_bytes.get(key)

    # -- text ---------------------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        """Token ids for ``text`` as the real tokenizer splits it inside a continuation.

        No BOS/EOS is added and no SentencePiece dummy-prefix space is inserted, so the token
        bytes of the result concatenate back to ``text.encode()`` for every tokenizer whose
        normalizer keeps the text as it is.

        Raises:
            TokenizerError: this vocabulary was built without its tokenizer.
        """
        if self._encoder is None:
            raise TokenizerError(
                f"tokenizer '{self.name}' has no encoder: it was built from token bytes only",
                hint="load it with load_tokenizer() from its tokenizer file",
            )
        return self._encoder(text)

    def decode(self, ids: Iterable[int], *, skip_special: bool = True) -> bytes:
        """The bytes the ids produce in a continuation.

        Args:
            ids: Token ids below ``token_count``.
            skip_special: Leave special tokens out (True) or show their literal content.

        Raises:
            ValueError: an id is negative or a padding id.
        """
        out = []
        for i in ids:
            if not 0 <= i < self.token_count:
                raise ValueError(f"token id must lie in [0, {self.token_count}), got {i}")
            if not (skip_special and i in self.special_ids):
                out.append(self.token_bytes[i])
        return b"".join(out)

    # -- variants -----------------------------------------------------------------------

    def with_overrides(
        self, eos: int | str | Sequence[int | str] | None = None, vocab_size: int | None = None
    ) -> Vocabulary:
        """A copy with other EOS tokens and/or another logits width.

        Args:
            eos: EOS token(s) as ids or token strings (a special token's content, or an ordinary
                token's exact text); they become special. ``None`` keeps the current ones.
                A string is always a token's text, never a number to parse.
            vocab_size: The logits width, at least ``token_count`` and at most
                :data:`MAX_VOCAB_SIZE`. ``None`` keeps it.

        Raises:
            TokenizerError: an EOS token is unknown, or ``vocab_size`` is below the token count
                or above :data:`MAX_VOCAB_SIZE`.
            TypeError: ``vocab_size`` is not an int.
        """
        eos_ids = self.eos_ids
        special = self.special_ids
        if eos is not None:
            # A lone str is one token's text, never a sequence of one-character tokens.
            items: Sequence[int | str] = [eos] if isinstance(eos, (str, int)) else eos
            ids = [self._resolve_eos(e) for e in items]
            if not ids:
                raise TokenizerError(
                    "no EOS token given", hint="pass at least one --eos TOKEN or id"
                )
            eos_ids = tuple(sorted(set(ids)))
            special = special | frozenset(eos_ids)
        size = self.vocab_size if vocab_size is None else _check_vocab_size(vocab_size, self)
        if eos_ids == self.eos_ids and size == self.vocab_size:
            return self
        return replace(self, special_ids=special, eos_ids=eos_ids, vocab_size=size)

    def _resolve_eos(self, token: int | str) -> int:
        if isinstance(token, bool) or not isinstance(token, (int, str)):
            raise TypeError(f"an EOS token must be an int id or a str, got {token!r}")
        if isinstance(token, int):
            if not 0 <= token < self.token_count:
                raise TokenizerError(
                    f"EOS id {token} is not a token of '{self.name}' "
                    f"(ids are 0..{self.token_count - 1})",
                    hint="pass an existing token id or the EOS token's text",
                )
            return token
        found = self.token_id(token)
        if found is None:
            raise TokenizerError(
                f"EOS token {token!r} is not in the vocabulary of '{self.name}'",
                hint="pass the exact text of a special token, e.g. '</s>' or '<|im_end|>'",
            )
        return found

    @classmethod
    def from_tokens(
        cls,
        tokens: Sequence[str | bytes],
        *,
        eos: str | None = None,
        special: Sequence[str] = (),
        name: str = "toy-vocabulary",
        vocab_size: int | None = None,
    ) -> Vocabulary:
        """A small vocabulary from literal tokens, for teaching examples and tests.

        Strings are UTF-8 encoded; the encoder splits text into the fewest tokens.

        Args:
            tokens: Token ``i``'s bytes or text, in id order.
            eos: The text of the EOS token (must be one of ``tokens``); it becomes special.
            special: Texts of further special tokens.
            name: The vocabulary's name.
            vocab_size: The logits width; defaults to ``len(tokens)``.

        Raises:
            ValueError: ``eos`` or a special name is not a token, or a token is empty.

        Example:
            >>> v = Vocabulary.from_tokens(["a", "b", "ab", "<eos>"], eos="<eos>")
            >>> v.encode("abab")
            [2, 2]
        """
        raw = tuple(t.encode("utf-8") if isinstance(t, str) else bytes(t) for t in tokens)
        first: dict[bytes, int] = {}
        for i, b in enumerate(raw):
            first.setdefault(b, i)

        def lookup(text: str, what: str) -> int:
            i = first.get(text.encode("utf-8"))
            if i is None:
                raise ValueError(f"{what} {text!r} is not one of the tokens")
            return i

        specials = {lookup(s, "special token") for s in special}
        eos_ids: tuple[int, ...] = ()
        if eos is not None:
            eos_ids = (lookup(eos, "eos token"),)
            specials.update(eos_ids)
        frozen = frozenset(specials)
        return cls(
            name=name,
            token_bytes=raw,
            special_ids=frozen,
            eos_ids=eos_ids,
            vocab_size=len(raw) if vocab_size is None else vocab_size,
            _encoder=GreedyEncoder(raw, frozen),
        )


def _check_vocab_size(size: int, vocab: Vocabulary) -> int:
    """``size`` if it is a logits width ``vocab`` can have; else a :class:`TokenizerError`."""
    if isinstance(size, bool) or not isinstance(size, int):
        raise TypeError(f"vocab_size must be an int or None, got {type(size).__name__}")
    hint = "--vocab-size is the model's logits width (its embedding rows); it is at least the token count"
    if size < vocab.token_count:
        raise TokenizerError(
            f"vocab size {size} is smaller than the {vocab.token_count} tokens of "
            f"tokenizer '{vocab.name}'",
            hint=hint,
        )
    if size > MAX_VOCAB_SIZE:
        raise TokenizerError(
            f"vocab size {size} is larger than the supported maximum of {MAX_VOCAB_SIZE:,}",
            hint=hint,
        )
    return size


class GreedyEncoder:
    """Splits text into the fewest non-special tokens (ties: the longest first token).

    The exact encoder of toy vocabularies and of the byte tokenizer; a dynamic program over
    byte positions, so it never fails where some segmentation exists.
    """

    def __init__(self, token_bytes: Sequence[bytes], special_ids: frozenset[int]) -> None:
        self._ids: dict[bytes, int] = {}
        for i, b in enumerate(token_bytes):
            if i not in special_ids and b:
                self._ids.setdefault(b, i)
        self._max_len = max(map(len, self._ids), default=0)

    def __call__(self, text: str) -> list[int]:
        data = text.encode("utf-8")
        n = len(data)
        inf = n + 1
        # best[p] = fewest tokens covering data[p:]; choice[p] = length of its first token.
        best = [inf] * n + [0]
        choice = [0] * (n + 1)
        for p in range(n - 1, -1, -1):
            for k in range(min(self._max_len, n - p), 0, -1):
                if data[p : p + k] in self._ids and best[p + k] + 1 < best[p]:
                    best[p], choice[p] = best[p + k] + 1, k
        if n and best[0] >= inf:
            raise TokenizerError(
                f"text {text[:40]!r} cannot be split into tokens of this vocabulary"
            )
        out, p = [], 0
        while p < n:
            out.append(self._ids[data[p : p + choice[p]]])
            p += choice[p]
        return out


def byte_tokenizer() -> Vocabulary:
    """256 single-byte tokens (id ``b`` is byte ``b``) and a special EOS ``<eos>`` at id 256.

    The tokenizer under which masks are exact byte sets; tests use it as an oracle.
    """
    return _byte_tokenizer()


@lru_cache(maxsize=1)
def _byte_tokenizer() -> Vocabulary:
    return Vocabulary.from_tokens(
        [bytes([b]) for b in range(256)] + [b"<eos>"], eos="<eos>", name="byte-tokenizer"
    )


# -- decoding rules -------------------------------------------------------------------------


@lru_cache(maxsize=1)
def byte_level_decoder() -> dict[str, int]:
    """GPT-2's ``bytes_to_unicode`` table, inverted: printable stand-in character -> byte.

    Printable Latin-1 bytes stand for themselves; the other 68 bytes map to U+0100 onwards.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    table = {chr(b): b for b in printable}
    extra = 0
    for b in range(256):
        if b not in printable:
            table[chr(256 + extra)] = b
            extra += 1
    return table


def decode_byte_level(token: str) -> bytes:
    """The bytes of a byte-level BPE token string (``"Ġthe"`` -> ``b" the"``).

    A string with a character outside the byte alphabet is taken as its own UTF-8, as the
    Hugging Face ``ByteLevel`` decoder does.
    """
    try:
        return token.translate(_byte_level_translation()).encode("latin-1")
    except UnicodeEncodeError:
        return token.encode("utf-8")


@lru_cache(maxsize=1)
def _byte_level_translation() -> dict[int, str]:
    # Stand-in character -> the Latin-1 character of its byte. Latin-1 characters outside the
    # alphabet become U+FFFF, which Latin-1 cannot encode, so they take the UTF-8 fallback.
    table = {b: "\uffff" for b in range(256)}
    table.update({ord(c): chr(b) for c, b in byte_level_decoder().items()})
    return table


def decode_metaspace(token: str, *, byte_fallback: bool, replacement: str = METASPACE) -> bytes:
    """The bytes of a SentencePiece-style token (``"▁the"`` -> ``b" the"``).

    Args:
        token: The piece.
        byte_fallback: Whether ``<0xNN>`` pieces stand for the single byte ``NN``.
        replacement: The character that stands for a space.
    """
    if byte_fallback:
        m = _BYTE_PIECE.fullmatch(token)
        if m is not None:
            return bytes([int(m.group(1), 16)])
    return token.replace(replacement, " ").encode("utf-8")
