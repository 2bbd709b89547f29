"""What the tokenizer audit needs beyond the :class:`~maskc.compiler.vocab.Vocabulary`.

:func:`tokenizer_facts` re-reads a tokenizer's source (``tokenizer.json``, a model folder, a
GGUF file, a SentencePiece model, a JSON token list) for the facts a vocabulary does not keep:
the normalizer and pre-tokenizer steps that alter text, whether ``decode(encode(s)) == s`` on
probe strings, which ids are byte-fallback or added tokens, every EOS candidate (the
tokenizer's, the chat template's end of turn, the generation config's) and the model's logits
width when a config names it. The format readers are in :mod:`maskc.compiler.audit.sources`.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from maskc.compiler.errors import MaskcError
from maskc.compiler.vocab import Vocabulary

__all__ = [
    "PROBE_STRINGS",
    "EosCandidate",
    "EosRole",
    "Probe",
    "SourceFormat",
    "TokenizerFacts",
    "end_of_turn_token",
    "run_probes",
    "tokenizer_facts",
]

SourceFormat = Literal["tokenizer.json", "sentencepiece", "gguf", "token-list", "unknown"]
EosRole = Literal["eos", "end-of-turn", "generation"]

PROBE_STRINGS: tuple[str, ...] = (
    "hello",          # a SentencePiece dummy prefix turns it into " hello"
    " hello",         # a leading space (stripping, prefix handling)
    "a  b",           # a double space (whitespace collapsing)
    "end   ",         # trailing spaces (stripping)
    "Hello WORLD",    # upper case (lowercasing normalizers)
    "\ufb01le",       # the ligature "ﬁ" (NFKC makes it "fi")
    "\u2460",         # "①" (NFKC makes it "1")
    "\uff21",         # full-width "Ａ" (NFKC makes it "A")
    "e\u0301",        # a combining accent (NFC makes it "é")
    "caf\u00e9",      # a precomposed accent (NFD splits it; StripAccents drops it)
    "\t",             # a tab
    "\r\n",           # a carriage return and newline
    "\U0001f600",     # an emoji (a 4-byte character; byte fallback)
)
"""Texts whose round trip through a tokenizer reveals a normalizer or pre-tokenizer that alters
bytes; each line says what it catches."""


@dataclass(frozen=True)
class Probe:
    """One probe text and the bytes its tokens decode to.

    Attributes:
        text: The probe.
        served: The concatenated token bytes of ``text`` encoded by the tokenizer as a serving
            stack runs it (normalizer, pre-tokenizer, dummy prefix; no BOS/EOS), or None when
            that encoder is not available.
        continuation: The same through the vocabulary's own encoder (maskc's, which encodes
            text as a continuation: no dummy prefix), or None.
        error: Why an encoding is missing ("" when both are there).
    """

    text: str
    served: bytes | None
    continuation: bytes | None = None
    error: str = ""

    @property
    def lossy(self) -> bool:
        """The served tokenization does not give back the text's bytes."""
        return self.served is not None and self.served != self.text.encode("utf-8")

    @property
    def continuation_lossy(self) -> bool:
        """maskc's continuation encoding does not give back the text's bytes."""
        return self.continuation is not None and self.continuation != self.text.encode("utf-8")


@dataclass(frozen=True)
class EosCandidate:
    """A token some part of the tokenizer or model folder says ends a generation.

    Attributes:
        source: Where it is named (``generation_config.json eos_token_id``,
            ``chat template (end of turn)``, ``GGUF tokenizer.ggml.eos_token_id``).
        role: ``eos`` (the tokenizer's end of sequence), ``end-of-turn`` (what the chat
            template puts after an assistant message, or GGUF's eot/eom), ``generation``
            (what generation stops on: ``generation_config.json``).
        text: The token's text ("" when named by an id that is no token).
        token_id: Its id, or None when the text is no token of the vocabulary.
    """

    source: str
    role: EosRole
    text: str
    token_id: int | None


@dataclass(frozen=True)
class TokenizerFacts:
    """Facts about a tokenizer that its :class:`Vocabulary` does not hold.

    ``None`` means "not known" (never "none"): a vocabulary built from token bytes alone has
    no byte-fallback facts, and the audit reports those counts as unknown.

    Attributes:
        source: The spec or path read.
        format: Which reader read it.
        alterations: Normalizer and pre-tokenizer steps that can change the bytes of a text
            before it is split (``NFKC``, ``Lowercase``, ``dummy prefix``), in order.
        probes: :data:`PROBE_STRINGS` through the tokenizer, empty when no encoder ran.
        byte_fallback_ids: Ids of ``<0xNN>`` byte pieces.
        added_ids: Ids of added (user-defined) tokens that are not special.
        eos_candidates: Every EOS candidate found, in the order the sources are read.
        model_vocab_size: The model's logits width from its config (``vocab_size`` in
            ``config.json``, ``ARCH.vocab_size`` in a GGUF), or None.
        notes: What could not be read, one sentence each.
    """

    source: str = ""
    format: SourceFormat = "unknown"
    alterations: tuple[str, ...] = ()
    probes: tuple[Probe, ...] = ()
    byte_fallback_ids: frozenset[int] | None = None
    added_ids: frozenset[int] | None = None
    eos_candidates: tuple[EosCandidate, ...] = ()
    model_vocab_size: int | None = None
    notes: tuple[str, ...] = ()


def tokenizer_facts(
    spec: str | os.PathLike[str], *, vocab: Vocabulary | None = None
) -> TokenizerFacts:
    """Re-reads a tokenizer's source for the audit's facts.

    Args:
        spec: What :func:`~maskc.compiler.tokenizer.load_tokenizer` accepts (``deepseek``, a
            ``tokenizer.json``, a model folder, a ``.gguf``, a SentencePiece model, a JSON
            token list); a hub id gives facts with a note only.
        vocab: The vocabulary loaded from ``spec`` (loaded again, from the in-process cache,
            when None); probe tokens are turned into bytes with it.

    Raises:
        TokenizerError: the spec names no readable tokenizer.
    """
    from maskc.compiler.audit.sources import read_facts

    return read_facts(os.fspath(spec), vocab)


def run_probes(
    served: Callable[[str], list[int]] | None,
    vocab: Vocabulary,
    *,
    prefix: str = "",
    texts: Iterable[str] = PROBE_STRINGS,
) -> tuple[Probe, ...]:
    """Each probe's bytes through ``served`` (ids of the tokenizer as served; ``prefix`` is
    put before the text first, as llama.cpp's space prefix) and through ``vocab.encode``."""
    out = []
    for text in texts:
        errors = []
        got: list[bytes | None] = []
        for encode, head in ((served, prefix), (vocab.encode, "")):
            if encode is None:
                got.append(None)
                continue
            try:
                got.append(_bytes_of(encode(head + text), vocab))
            except (MaskcError, ValueError, RuntimeError) as e:
                errors.append(str(e))
                got.append(None)
        out.append(Probe(text, got[0], got[1], "; ".join(errors)))
    return tuple(out)


def _bytes_of(ids: list[int], vocab: Vocabulary) -> bytes:
    # Special tokens (an <unk>, say) show their literal text: that is what went wrong.
    n = vocab.token_count
    return b"".join(vocab.token_bytes[i] if 0 <= i < n else "\ufffd".encode() for i in ids)


# -- the chat template's end of turn --------------------------------------------------------

_CONTENT_REF = re.compile(r"""\[\s*['"]content['"]\s*\]|\.content\b""")
_ROLE_LITERAL = re.compile(r"""['"](assistant|user|system|tool|ipython|developer)['"]""")
_LOOKAHEAD = 400


def end_of_turn_token(
    template: str, vocab: Vocabulary, *, extra_ids: Iterable[int] = (), eos_text: str | None = None
) -> str | None:
    """The special token a chat template writes after an assistant message, or None.

    A heuristic over the template's text, without rendering it: at each reference to a
    message's content that follows an ``'assistant'`` role test (all references when none
    does), the first special (or added, ``extra_ids``) token text or ``eos_token`` variable
    written after it; the most frequent wins. ``eos_token`` resolves to ``eos_text`` (the
    tokenizer's configured EOS), else to the vocabulary's first EOS id. Templates that build
    the end of turn from variables are not understood.
    """
    ids = set(vocab.special_ids) | set(extra_ids)
    named = (vocab.token_bytes[i].decode("utf-8", "replace") for i in ids)
    texts = sorted({t for t in named if len(t) >= 2 and t in template}, key=lambda t: (-len(t), t))
    alternatives = [re.escape(t) for t in texts] + [r"\beos_token\b"]
    token = re.compile("|".join(alternatives))
    refs = [m.end() for m in _CONTENT_REF.finditer(template)]
    roles = [(m.start(), m.group(1)) for m in _ROLE_LITERAL.finditer(template)]

    def role_before(pos: int) -> str | None:
        before = [r for p, r in roles if p < pos]
        return before[-1] if before else None

    assistant = [p for p in refs if role_before(p) == "assistant"]
    votes: Counter[str] = Counter()
    for pos in assistant or refs:
        m = token.search(template, pos, pos + _LOOKAHEAD)
        if m is None:
            continue
        text = m.group(0)
        if text == "eos_token":
            if eos_text is not None:
                text = eos_text
            elif vocab.eos_ids:
                text = vocab.token_bytes[vocab.eos_ids[0]].decode("utf-8", "replace")
            else:
                continue
        votes[text] += 1
    return votes.most_common(1)[0][0] if votes else None
