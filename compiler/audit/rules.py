"""The tokenizer audit's rules and categories as data, and its normalizer and EOS checks.

Every category of :func:`~maskc.compiler.audit.tokenizer.audit_tokenizer` has a title, the
sentence on why it matters, its exact definition and the rule its finding carries
(:data:`CATEGORY_INFO`); :data:`RULES` describes each rule for ``--explain`` and SARIF.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from maskc.compiler.audit.classes import CLASS_DEFINITIONS, printable
from maskc.compiler.audit.facts import EosCandidate, Probe
from maskc.compiler.findings import Finding, RuleInfo, Severity
from maskc.compiler.vocab import Vocabulary

__all__ = ["CATEGORY_INFO", "RULES", "CategoryInfo", "eos_findings", "normalizer_findings"]


def _rule(id: str, severity: Severity, summary: str, why: str, example: str, fix: str) -> RuleInfo:
    return RuleInfo(id, severity, summary, why, example, fix, tool="audit")


RULES: list[RuleInfo] = [
    _rule("structural-token", "info", "Tokens that carry a JSON structural byte with other bytes.",
          "A mask that checks only a token's first byte lets the rest of the token smuggle a "
          "comma, quote or brace past the grammar.", 'the token ",',
          "Check every byte of a token against the grammar (maskc does); audit a schema on this "
          "tokenizer to see where first-byte masks would break it."),
    _rule("whitespace-token", "info", "Tokens made only of whitespace.",
          "Where a grammar allows free whitespace, a model can emit these until max_tokens.",
          "the token '\\n\\n\\n'", "Compile with compact or bounded whitespace."),
    _rule("partial-utf8-token", "info", "Tokens that end or start inside a UTF-8 character.",
          "Masks must follow bytes, not characters; per-token detokenizers show U+FFFD.",
          "the token b'\\xe2\\x80'", "Use a byte-level mask (maskc's masks are byte-exact)."),
    _rule("byte-fallback-token", "info", "SentencePiece/GGUF byte-fallback pieces (<0xNN>).",
          "They spell any text byte by byte, so every string has many tokenizations.",
          "the piece <0xE2>", "Nothing to fix; forced strings should use the canonical tokenization."),
    _rule("special-token-structure", "info",
          "Special or added tokens whose text holds JSON structural characters.",
          "An engine that matches the grammar against token text, or prints special tokens, "
          "could admit them as structure.", "the token [INST]",
          "Never allow special tokens in a mask except EOS at an end state (maskc does)."),
    _rule("empty-token", "info", "Ids that decode to no bytes.",
          "Allowing one never advances the output, so a model can repeat it forever.",
          "an id with no piece", "Keep them out of every mask (maskc marks them special)."),
    _rule("duplicate-token-bytes", "info", "Ordinary ids that spell the same bytes as a lower id.",
          "The mask allows all of them; the model's probability is split and only one is canonical.",
          "<0x41> and A", "Nothing to fix; be aware when comparing token-level traces."),
    _rule("lossy-normalizer", "warning", "The tokenizer does not give back the text it encodes.",
          "A normalizer or pre-tokenizer that lowercases, applies NFKC, strips or prepends a "
          "dummy prefix makes decode(encode(s)) differ from s, so forced (jump-forward) "
          "strings and prompts are not what the grammar spelled.", "NFKC turns 'ﬁ' into 'fi'",
          "Encode forced strings as a continuation without the normalizer (maskc does), or use "
          "a tokenizer without lossy normalization."),
    _rule("eos-disagreement", "warning", "EOS candidates that disagree or that the mask does not allow.",
          "A model trained to end its turn with one token cannot stop when the mask allows "
          "only another: it runs to max_tokens.",
          "tokenizer eos </s>, chat template end of turn <|im_end|>",
          "Pass every end token the model uses with --eos (ids or texts)."),
    _rule("padded-vocab", "info", "The logits are wider than the vocabulary, or the model disagrees.",
          "A bitmask must be as wide as the logits and reject the padding columns; a width "
          "from the wrong source misaligns or crashes the mask.",
          "DeepSeek-V3: 129,280 logits for 128,815 tokens",
          "Pass the model's logits width with --vocab-size."),
]


@dataclass(frozen=True)
class CategoryInfo:
    title: str
    why: str
    definition: str
    rule: str | None


_STRUCT_WHY = {
    "quote+comma": "One token closes a string and starts the next item; a first-byte mask "
    "admits the comma even where the grammar wants more string or a closing brace.",
    "quote+colon": "One token ends a key and adds the colon; a first-byte mask lets a string "
    "value end with a colon no grammar allows there.",
    "quote+brace": "One token opens or closes a container together with a string quote; a "
    "first-byte check admits the brace wherever the quote is allowed.",
    "brace+comma": "One token closes a container and continues the outer one; a first-byte "
    "mask can close a level the grammar keeps open.",
    "brace+colon": "Only :{ and :[ can be valid JSON; a first-byte check admits ]: and }: too.",
    "bracket-combo": "One token opens or closes several levels at once; a first-byte mask checks "
    "only the first and can close past what the grammar allows.",
    "structure+newline": "The line break rides along with the structure; with compact "
    "whitespace it is invalid, and a first-byte check never sees it.",
    "structure+space": "The space rides along with the structure; where whitespace is "
    "disallowed or bounded, a first-byte check lets it through.",
    "structure+text": "The token ends or starts a string, key or number mid-token; a "
    "first-byte mask never checks the text glued to the structure.",
    "structure-other": "Repeated structure (\"\", ,,): a first-byte mask admits the second "
    "byte unchecked.",
}
_STRUCT_TITLES = {
    "quote+comma": "quote and comma", "quote+colon": "quote and colon",
    "quote+brace": "quote and brace or bracket", "brace+comma": "brace or bracket and comma",
    "brace+colon": "brace or bracket and colon", "bracket-combo": "several braces or brackets",
    "structure+newline": "structure and newline", "structure+space": "structure and space or tab",
    "structure+text": "structure and text", "structure-other": "other structure runs",
}

CATEGORY_INFO: dict[str, CategoryInfo] = {
    **{k: CategoryInfo(_STRUCT_TITLES[k], _STRUCT_WHY[k], CLASS_DEFINITIONS[k], "structural-token")
       for k in _STRUCT_TITLES},
    "whitespace-only": CategoryInfo(
        "whitespace only", "Where the grammar allows free whitespace a model can emit these "
        "until max_tokens; the longest run says how much one token adds.",
        CLASS_DEFINITIONS["whitespace-only"], "whitespace-token"),
    "incomplete-utf8": CategoryInfo(
        "ends mid-character", "The next token must complete the character, so masks must track "
        "bytes, not characters, and per-token detokenizers print U+FFFD.",
        CLASS_DEFINITIONS["incomplete-utf8"], "partial-utf8-token"),
    "lone-continuation": CategoryInfo(
        "starts mid-character", "Valid only right after the lead bytes of its character; a "
        "character-level mask would admit or reject it wrongly.",
        CLASS_DEFINITIONS["lone-continuation"], "partial-utf8-token"),
    "byte-fallback": CategoryInfo(
        "byte-fallback pieces", "Single-byte pieces spell any text byte by byte, so every string "
        "has many tokenizations, and they duplicate ordinary tokens' bytes.",
        "ids whose piece is <0xNN> (SentencePiece byte pieces, GGUF token type BYTE); unknown "
        "without the tokenizer's source", "byte-fallback-token"),
    "special": CategoryInfo(
        "special tokens", "Control tokens (BOS, EOS, padding, chat markers) must be rejected by "
        "every mask except EOS where the grammar can end.",
        "special ids with text, other than EOS (control, unknown and unused tokens; EOS is in "
        "the EOS audit, empty ids in 'empty')", None),
    "added": CategoryInfo(
        "added tokens", "Added tokens are matched before the model's splitting, so text that "
        "contains one is always cut at it.",
        "non-special ids the tokenizer adds to its model's vocabulary (tokenizer.json "
        "added_tokens, user-defined pieces); unknown without the tokenizer's source", None),
    "special-structure": CategoryInfo(
        "special or added with structure", "An engine that matches the grammar against token "
        "text, or prints special tokens, could admit them as JSON structure.",
        "special or added ids whose text holds a byte of \",:{}[]", "special-token-structure"),
    "empty": CategoryInfo(
        "decodes to nothing", "Allowing such an id never advances the output, so a model can "
        "repeat it forever; it must never be allowed.",
        "ids whose bytes are empty (gaps in the id space, empty pieces)", "empty-token"),
    "duplicate-bytes": CategoryInfo(
        "same bytes as a lower id", "The mask allows every id that spells the allowed bytes; "
        "the model's probability is split and only one is the canonical tokenization.",
        "ordinary ids whose bytes equal those of a lower ordinary id (each group of k ids "
        "counts k - 1)", "duplicate-token-bytes"),
}
"""Every category of the tokenizer report, in report order."""


def _round_trip(p: Probe) -> str:
    """``'text' -> 'got'``; as ASCII escapes when both look alike (NFC vs NFD)."""
    got = p.served if p.served is not None and p.lossy else p.continuation or b""
    before, after = printable(p.text.encode("utf-8")), printable(got)
    if unicodedata.normalize("NFC", before) == unicodedata.normalize("NFC", after):
        before, after = ascii(p.text)[1:-1], ascii(got.decode("utf-8", "replace"))[1:-1]
    return f"{before!r} -> {after!r}"


def normalizer_findings(alterations: Sequence[str], probes: Sequence[Probe]) -> list[Finding]:
    """``lossy-normalizer`` findings: one when served or continuation round trips fail (a
    warning when maskc's own continuation encoding is lossy, else info), or one (info) when
    steps alter text but no probe could run."""
    served = [p for p in probes if p.lossy]
    cont = [p for p in probes if p.continuation_lossy]
    steps = f" Steps that alter text: {'; '.join(alterations)}." if alterations else ""
    if served or cont:
        failing = served or cont
        shown = ", ".join(_round_trip(p) for p in failing[:5])
        where = "as served" if served else "through maskc's continuation encoder"
        if served and cont:
            where = "as served and through maskc's continuation encoder"
        return [Finding(
            rule="lossy-normalizer", severity="warning" if cont else "info", pointer="/normalizer",
            message=f"decode(encode(s)) != s for {len(failing)} of {len(probes)} probe strings "
            f"({where}): {shown}.{steps}",
            witness=printable(failing[0].text.encode("utf-8")),
            data={"served": [p.text for p in served], "continuation": [p.text for p in cont],
                  "alterations": list(alterations)},
        )]
    if alterations and not any(p.served is not None for p in probes):
        return [Finding(
            rule="lossy-normalizer", severity="info", pointer="/normalizer",
            message=f"the tokenizer alters text before splitting it, and no probe could run.{steps}",
            data={"alterations": list(alterations)},
        )]
    return []


def _name(c: EosCandidate) -> str:
    return f"{c.source} {c.text!r} (id {c.token_id})" if c.token_id is not None else f"{c.source} {c.text!r}"


def eos_findings(
    vocab: Vocabulary, candidates: Sequence[EosCandidate], model_width: int | None
) -> tuple[list[Finding], bool]:
    """``eos-disagreement`` and ``padded-vocab`` findings, and whether the EOS candidates agree."""
    out: list[Finding] = []
    allowed = set(vocab.eos_ids)
    unknown = [c for c in candidates if c.token_id is None]
    blocked = [c for c in candidates if c.token_id is not None and c.token_id not in allowed]
    ids = sorted({c.token_id for c in candidates if c.token_id is not None})
    allowed_text = ", ".join(f"{printable(vocab.token_bytes[i])!r} (id {i})" for i in vocab.eos_ids) or "none"
    if not vocab.eos_ids:
        out.append(Finding(
            rule="eos-disagreement", severity="warning", pointer="/eos",
            message="the vocabulary has no EOS id: a mask can never let the model stop",
        ))
    for c in unknown:
        out.append(Finding(
            rule="eos-disagreement", severity="warning", pointer="/eos",
            message=f"{c.source} names {c.text!r}, which is no token of this vocabulary",
            witness=c.text, data={"source": c.source},
        ))
    if blocked:
        out.append(Finding(
            rule="eos-disagreement", severity="warning", pointer="/eos",
            message=f"{'; '.join(map(_name, blocked))} "
            f"{'is' if len(blocked) == 1 else 'are'} not among the EOS ids the mask allows "
            f"({allowed_text}): a model that ends its turn that way cannot stop",
            witness=blocked[0].text, data={"ids": [c.token_id for c in blocked], "eos_ids": sorted(allowed)},
        ))
    elif len(ids) > 1:
        out.append(Finding(
            rule="eos-disagreement", severity="info", pointer="/eos",
            message=f"EOS candidates name {len(ids)} different tokens: {'; '.join(map(_name, candidates))}; "
            f"the mask allows all of them ({allowed_text})",
            data={"ids": ids},
        ))
    padding = vocab.vocab_size - vocab.token_count
    if padding:
        out.append(Finding(
            rule="padded-vocab", severity="info", pointer="/vocab_size",
            message=f"the logits are {vocab.vocab_size:,} wide for {vocab.token_count:,} tokens: "
            f"{padding:,} padding columns, which every mask must reject (a bitmask is "
            f"{-(-vocab.vocab_size // 32):,} int32 words per row)",
            data={"vocab_size": vocab.vocab_size, "token_count": vocab.token_count},
        ))
    if model_width is not None and model_width != vocab.vocab_size:
        if model_width < vocab.token_count:
            what = (f"below the tokenizer's {vocab.token_count:,} ids: ids from {model_width:,} "
                    "up have no logit")
        else:
            what = f"but the mask would be {vocab.vocab_size:,} wide: pass --vocab-size {model_width}"
        out.append(Finding(
            rule="padded-vocab", severity="warning", pointer="/vocab_size",
            message=f"the model's config says its logits are {model_width:,} wide, {what}",
            data={"model_vocab_size": model_width, "vocab_size": vocab.vocab_size},
        ))
    agree = not unknown and not blocked and len(ids) <= 1 and bool(vocab.eos_ids)
    return out, agree
