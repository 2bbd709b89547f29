"""The tokenizer report of ``maskc audit``: what a vocabulary holds that breaks naive masks.

:func:`audit_tokenizer` counts the tokens of each hazard class (structure glued to other
bytes, whitespace runs, partial UTF-8, byte fallback, special and added tokens, empty and
duplicate tokens; the byte classes are defined in :mod:`maskc.compiler.audit.classes`), checks
the normalizer with probe strings and every EOS candidate, and turns what it finds into
:class:`~maskc.compiler.findings.Finding` records: one per category that has tokens (pointing
at its first token, ``/tokens/ID``), one per normalizer or EOS problem. Rendering is the CLI's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from maskc.compiler.audit.classes import (
    STRUCTURAL_BYTES,
    classify_tokens,
    duplicate_ids,
    longest_whitespace_run,
    printable,
)
from maskc.compiler.audit.facts import EosCandidate, Probe, TokenizerFacts, tokenizer_facts
from maskc.compiler.audit.rules import CATEGORY_INFO, RULES, eos_findings, normalizer_findings
from maskc.compiler.findings import Finding, register, rule_info
from maskc.compiler.vocab import Vocabulary

__all__ = [
    "Category",
    "EosAudit",
    "NormalizerAudit",
    "TokenExample",
    "TokenizerAudit",
    "audit_tokenizer",
]

register(*RULES)


@dataclass(frozen=True)
class TokenExample:
    """One token of a category: its id, exact bytes and a printable form (:func:`printable`)."""

    id: int
    data: bytes
    text: str

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "bytes": self.data.hex(), "text": self.text}


@dataclass(frozen=True)
class Category:
    """A class of tokens, how many the vocabulary has and the first few (lowest ids).

    Attributes:
        id: Stable name (``quote+comma``, ``whitespace-only``, ``byte-fallback``).
        title: A short human title.
        why: One sentence: why it matters for constrained decoding.
        definition: Exactly which tokens are counted.
        rule: The finding rule it feeds, or None (special tokens are reported, not flagged).
        count: How many ids; None when unknown (byte fallback and added tokens need the
            tokenizer's source, see :func:`~maskc.compiler.audit.facts.tokenizer_facts`).
        examples: Up to ``show`` tokens, lowest ids first.
    """

    id: str
    title: str
    why: str
    definition: str
    rule: str | None
    count: int | None
    examples: tuple[TokenExample, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "title": self.title, "why": self.why, "definition": self.definition,
            "rule": self.rule, "count": self.count, "examples": [e.as_dict() for e in self.examples],
        }


@dataclass(frozen=True)
class NormalizerAudit:
    """The text-altering steps and the probe round trips; ``failing`` are the lossy probes."""

    alterations: tuple[str, ...]
    probes: tuple[Probe, ...]

    @property
    def failing(self) -> tuple[Probe, ...]:
        return tuple(p for p in self.probes if p.lossy or p.continuation_lossy)

    def as_dict(self) -> dict[str, Any]:
        def text(b: bytes | None) -> str | None:
            return None if b is None else printable(b)

        return {
            "alterations": list(self.alterations),
            "probes": [
                {"text": printable(p.text.encode()), "served": text(p.served),
                 "continuation": text(p.continuation), "lossy": p.lossy,
                 "continuation_lossy": p.continuation_lossy, "error": p.error}
                for p in self.probes
            ],
        }


@dataclass(frozen=True)
class EosAudit:
    """Every EOS candidate against what the mask lets end a generation, and the logits width.

    Attributes:
        candidates: From the tokenizer's source (empty without one).
        eos_ids: The vocabulary's EOS ids: the only ones the mask allows, where the grammar
            can end.
        agree: Every candidate names a token, all name the same one, and the mask allows it.
        vocab_size: The logits width the mask is built for.
        token_count: The tokenizer's ids; ``vocab_size - token_count`` are padding columns.
        model_vocab_size: The logits width the model's config names, or None.
    """

    candidates: tuple[EosCandidate, ...]
    eos_ids: tuple[int, ...]
    agree: bool
    vocab_size: int
    token_count: int
    model_vocab_size: int | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "candidates": [
                {"source": c.source, "role": c.role, "text": c.text, "id": c.token_id}
                for c in self.candidates
            ],
            "eos_ids": list(self.eos_ids), "agree": self.agree, "vocab_size": self.vocab_size,
            "token_count": self.token_count, "model_vocab_size": self.model_vocab_size,
        }


@dataclass(frozen=True)
class TokenizerAudit:
    """The tokenizer report: categories with counts and examples, findings, summary numbers.

    ``summary`` keys: ``token_count``, ``vocab_size``, ``padding_columns``,
    ``special_tokens``, ``structural_tokens`` (ordinary tokens in any structural category),
    ``whitespace_only``, ``longest_whitespace_run`` and ``longest_whitespace_id``,
    ``partial_utf8`` (in either UTF-8 category), ``byte_fallback``, ``duplicates``,
    ``probes`` and ``lossy_probes``, ``eos_candidates``; a value is None when unknown.
    """

    name: str
    source: str | None
    categories: tuple[Category, ...]
    findings: list[Finding]
    summary: dict[str, int | None]
    normalizer: NormalizerAudit | None
    eos: EosAudit

    def category(self, category_id: str) -> Category:
        """The category named ``category_id`` (KeyError naming the known ones)."""
        for c in self.categories:
            if c.id == category_id:
                return c
        raise KeyError(f"unknown category {category_id!r}; known: {', '.join(c.id for c in self.categories)}")

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able form (bytes as hex, text printable)."""
        return {
            "tokenizer": self.name, "source": self.source, "summary": dict(self.summary),
            "categories": [c.as_dict() for c in self.categories],
            "normalizer": None if self.normalizer is None else self.normalizer.as_dict(),
            "eos": self.eos.as_dict(), "findings": [f.as_dict() for f in self.findings],
        }


def audit_tokenizer(
    vocab: Vocabulary,
    *,
    source: str | os.PathLike[str] | None = None,
    show: int = 5,
    facts: TokenizerFacts | None = None,
) -> TokenizerAudit:
    """Audits a vocabulary for tokenizer-boundary hazards.

    Args:
        vocab: The vocabulary (from :func:`~maskc.compiler.tokenizer.load_tokenizer`).
        source: The spec ``vocab`` was loaded from; when given (and ``facts`` is not), its
            file is re-read for the normalizer, byte-fallback and added ids and the EOS
            candidates. Without either, those parts are reported as unknown.
        show: Examples kept per category (lowest ids first).
        facts: The facts, when the caller has them already (or builds them, in tests).

    Raises:
        ValueError: ``show`` is negative.
        TokenizerError: ``source`` cannot be read.
    """
    if isinstance(show, bool) or not isinstance(show, int) or show < 0:
        raise ValueError(f"show must be a non-negative int, got {show!r}")
    if facts is None and source is not None:
        facts = tokenizer_facts(source, vocab=vocab)
    ids = _category_ids(vocab, facts)
    tb = vocab.token_bytes
    categories = tuple(
        Category(
            id=cid, title=info.title, why=info.why, definition=info.definition, rule=info.rule,
            count=None if found is None else len(found),
            examples=tuple(TokenExample(i, tb[i], printable(tb[i])) for i in (found or [])[:show]),
        )
        for cid, info in CATEGORY_INFO.items()
        for found in [ids.get(cid)]
    )
    run, run_id = longest_whitespace_run(vocab)
    findings = [f for c in categories if (f := _category_finding(c, run, run_id)) is not None]
    normalizer = None if facts is None else NormalizerAudit(facts.alterations, facts.probes)
    if normalizer is not None:
        findings += normalizer_findings(normalizer.alterations, normalizer.probes)
    candidates = () if facts is None else facts.eos_candidates
    model_width = None if facts is None else facts.model_vocab_size
    eos_found, agree = eos_findings(vocab, candidates, model_width)
    findings += eos_found
    eos = EosAudit(candidates, vocab.eos_ids, agree, vocab.vocab_size, vocab.token_count, model_width)
    counts = {c.id: c.count for c in categories}
    summary: dict[str, int | None] = {
        "token_count": vocab.token_count, "vocab_size": vocab.vocab_size,
        "padding_columns": vocab.vocab_size - vocab.token_count,
        "special_tokens": len(vocab.special_ids), "structural_tokens": len(ids["structural"] or ()),
        "whitespace_only": counts["whitespace-only"], "longest_whitespace_run": run,
        "longest_whitespace_id": run_id,
        "partial_utf8": len(set(ids["incomplete-utf8"] or ()) | set(ids["lone-continuation"] or ())),
        "byte_fallback": counts["byte-fallback"], "duplicates": counts["duplicate-bytes"],
        "probes": None if normalizer is None else len(normalizer.probes),
        "lossy_probes": None if normalizer is None else len(normalizer.failing),
        "eos_candidates": len(candidates),
    }
    return TokenizerAudit(vocab.name, None if source is None else os.fspath(source), categories,
                          findings, summary, normalizer, eos)


def _category_ids(vocab: Vocabulary, facts: TokenizerFacts | None) -> dict[str, list[int] | None]:
    out: dict[str, list[int] | None] = {k: v.tolist() for k, v in classify_tokens(vocab).items()}
    tb = vocab.token_bytes
    out["byte-fallback"] = None if facts is None or facts.byte_fallback_ids is None else sorted(
        i for i in facts.byte_fallback_ids if 0 <= i < vocab.token_count)
    added = None if facts is None or facts.added_ids is None else sorted(
        i for i in facts.added_ids if 0 <= i < vocab.token_count and i not in vocab.special_ids)
    eos = set(vocab.eos_ids)
    out["special"] = sorted(i for i in vocab.special_ids if i not in eos and tb[i])
    out["added"] = added
    marked = sorted(vocab.special_ids | set(added or ()))
    structural = set(STRUCTURAL_BYTES)
    out["special-structure"] = [i for i in marked if structural & set(tb[i])]
    out["empty"] = [i for i in range(vocab.token_count) if not tb[i]]
    out["duplicate-bytes"] = [i for i, _ in duplicate_ids(vocab)]
    return out


def _category_finding(c: Category, run: int, run_id: int | None) -> Finding | None:
    if c.rule is None or not c.count or not c.examples:
        return None
    info = rule_info(c.rule)
    first = c.examples[0]
    shown = ", ".join(f"{e.text!r} (id {e.id})" for e in c.examples)
    more = f" and {c.count - len(c.examples):,} more" if c.count > len(c.examples) else ""
    noun = "token" if c.count == 1 else "tokens"
    data: dict[str, Any] = {"category": c.id, "count": c.count, "ids": [e.id for e in c.examples]}
    extra = ""
    if c.id == "whitespace-only":
        extra = (f" The longest whitespace run in one token is {run} byte{'s' * (run != 1)} "
                 f"(id {run_id}).")
        data.update(longest_run=run, longest_run_id=run_id)
    return Finding(
        rule=c.rule, severity=info.severity, pointer=f"/tokens/{first.id}",
        message=f"{c.count:,} {noun} in '{c.id}' ({c.title}): {shown}{more}. {c.why}{extra}",
        witness=first.text, data=data,
    )
