"""An artifact's header metadata: the keys it may hold, and their validation on load.

Every value is a string (safetensors allows nothing else); JSON values are canonical.
:func:`parse_metadata` checks each field's type and range once, before the tables are
read, so nothing downstream (matcher, LogitsProcessor, ``inspect``) meets an EOS id
outside the logits, a negative width or an options object it does not know. Every field
is also covered by ``content_sha256`` (:func:`maskc.artifacts.format.content_hash`), so an
edit that stays in range is refused as well.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from maskc.artifacts.format import PDA_METADATA, REQUIRED_METADATA, TABLE_METADATA, canonical_json
from maskc.compiler.errors import ArtifactCorrupt
from maskc.compiler.frontends.registry import grammar_sha256
from maskc.compiler.options import MAX_MAX_DEPTH, SEMANTICS, CompileOptions, Limits, parse_whitespace

__all__ = ["MAX_VOCAB_SIZE", "ALLOWED_METADATA", "ParsedMetadata", "parse_metadata"]

MAX_VOCAB_SIZE = 1 << 24
"""The widest logits an artifact may declare (64x the largest vocabularies in use)."""

ALLOWED_METADATA = frozenset({*REQUIRED_METADATA, *TABLE_METADATA, *PDA_METADATA})
"""Every key this format version writes; any other key is refused."""

_SHA256 = re.compile(r"[0-9a-f]{64}")
_VERSION = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+-]{0,32}")
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,18}")


@dataclass(frozen=True, slots=True)
class ParsedMetadata:
    """The typed values of a validated header."""

    vocab_size: int
    eos_token_ids: tuple[int, ...]
    options: dict[str, Any]
    not_enforced: list[dict[str, str]]
    num_states: int | None
    num_masks: int | None
    rule_names: tuple[str, ...] | None
    inline_depth: int | None


def _bad(where: str, key: str, why: str) -> ArtifactCorrupt:
    return ArtifactCorrupt(f"{where} has a bad {key} in its metadata: {why}")


def _json(meta: Mapping[str, str], key: str, where: str) -> Any:
    try:
        return orjson.loads(meta[key])
    except orjson.JSONDecodeError:
        raise _bad(where, key, "not JSON") from None


def _decimal(meta: Mapping[str, str], key: str, where: str, lo: int, hi: int) -> int:
    text = meta[key]
    if not _DECIMAL.fullmatch(text) or not lo <= int(text) <= hi:
        raise _bad(where, key, f"expected an integer in {lo}..{hi}, got {text[:40]!r}")
    return int(text)


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _like(value: object, default: object) -> bool:
    """Whether ``value`` has the JSON shape of ``default`` (objects: the same keys, recursively)."""
    if isinstance(default, dict):
        return isinstance(value, dict) and set(value) == set(default) and all(
            _like(value[k], default[k]) for k in default)
    if _is_int(default):
        return _is_int(value)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return type(value) is type(default)


_VALID_OPTIONS: dict[str, None] = {}
"""Options texts validated already (most artifacts of a process share a few): their next
load parses the text without checking it again."""


def _options(meta: Mapping[str, str], where: str) -> dict[str, Any]:
    """The options object: exactly the keys :meth:`CompileOptions.canonical` writes, typed
    like its defaults, each value in its range."""
    text = meta["options"]
    if text in _VALID_OPTIONS:
        known: dict[str, Any] = orjson.loads(text)
        return known
    opts = _checked_options(meta, where)
    if len(_VALID_OPTIONS) >= 64:
        del _VALID_OPTIONS[next(iter(_VALID_OPTIONS))]
    _VALID_OPTIONS[text] = None
    return opts


def _checked_options(meta: Mapping[str, str], where: str) -> dict[str, Any]:
    opts = _json(meta, "options", where)
    defaults = CompileOptions().canonical()
    if not _like(opts, defaults):
        raise _bad(where, "options", f"expected an object shaped like {canonical_json(defaults)}, "
                                     f"got {meta['options'][:200]!r}")
    try:
        parse_whitespace(str(opts["whitespace"]))
        if "limits" in opts:
            Limits(**opts["limits"])
    except (ValueError, TypeError) as e:
        raise _bad(where, "options", str(e)) from None
    if opts["semantics"] not in SEMANTICS:
        raise _bad(where, "options", f"semantics must be one of {', '.join(SEMANTICS)}, got {opts['semantics']!r}")
    if not 1 <= int(opts["max_depth"]) <= MAX_MAX_DEPTH:
        raise _bad(where, "options", f"max_depth must be in 1..{MAX_MAX_DEPTH}, got {opts['max_depth']}")
    return dict(opts)


def _not_enforced(meta: Mapping[str, str], where: str) -> list[dict[str, str]]:
    items = _json(meta, "not_enforced", where)
    ok = isinstance(items, list) and all(
        isinstance(n, dict) and {"keyword", "pointer"} <= set(n) <= {"keyword", "pointer", "detail", "kind"}
        and all(isinstance(v, str) for v in n.values())
        for n in items
    )
    if not ok:
        raise _bad(where, "not_enforced", "expected a list of {keyword, pointer[, detail]} string objects")
    return [dict(n) for n in items]


def _eos(meta: Mapping[str, str], where: str, vocab_size: int) -> tuple[int, ...]:
    ids = _json(meta, "eos_token_ids", where)
    if not isinstance(ids, list) or not all(_is_int(i) for i in ids):
        raise _bad(where, "eos_token_ids", f"expected a list of integers, got {meta['eos_token_ids'][:40]!r}")
    if any(not 0 <= i < vocab_size for i in ids):
        raise _bad(where, "eos_token_ids", f"ids must lie in [0, {vocab_size}), got {ids[:8]}")
    if ids != sorted(set(ids)):
        raise _bad(where, "eos_token_ids", f"ids must be sorted and unique, got {ids[:8]}")
    return tuple(ids)


def _strings(meta: Mapping[str, str], where: str) -> None:
    for key, pattern in (("grammar_sha256", _SHA256), ("tokenizer_sha256", _SHA256), ("compiler_version", _VERSION)):
        if not pattern.fullmatch(meta[key]):
            raise _bad(where, key, f"{meta[key][:40]!r} does not match {pattern.pattern}")
    if not meta["grammar_kind"]:
        raise _bad(where, "grammar_kind", "empty")
    if grammar_sha256(meta["grammar_kind"], meta["grammar_source"]) != meta["grammar_sha256"]:
        raise _bad(where, "grammar_sha256", "it is not the hash of grammar_kind and grammar_source")


def parse_metadata(meta: Mapping[str, str], where: str) -> ParsedMetadata:
    """Validate every field (present, typed, in range) and return the typed values.

    Assumes the keys of :data:`maskc.artifacts.format.REQUIRED_METADATA` are present.

    Raises:
        ArtifactCorrupt: an unknown key, or a value of the wrong type or out of range.
    """
    unknown = sorted(set(meta) - ALLOWED_METADATA)
    if unknown:
        raise ArtifactCorrupt(f"{where} has unknown metadata keys {', '.join(unknown[:5])}")
    _strings(meta, where)
    vocab_size = _decimal(meta, "vocab_size", where, 1, MAX_VOCAB_SIZE)
    counts = [_decimal(meta, k, where, 0, 1 << 31) if k in meta else None for k in TABLE_METADATA]
    pda = [k for k in PDA_METADATA if k in meta]
    if pda and len(pda) != len(PDA_METADATA):
        raise ArtifactCorrupt(f"{where} has only part of the pushdown metadata ({', '.join(pda)})")
    options = _options(meta, where)
    rule_names: tuple[str, ...] | None = None
    inline_depth: int | None = None
    if pda:
        names = _json(meta, "rule_names", where)
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise _bad(where, "rule_names", "expected a non-empty list of strings")
        rule_names = tuple(names)
        inline_depth = _decimal(meta, "inline_depth", where, 0, MAX_MAX_DEPTH)
        if _decimal(meta, "max_depth", where, 1, MAX_MAX_DEPTH) != options["max_depth"]:
            raise _bad(where, "max_depth", f"{meta['max_depth']} differs from options.max_depth")
    return ParsedMetadata(
        vocab_size=vocab_size,
        eos_token_ids=_eos(meta, where, vocab_size),
        options=options,
        not_enforced=_not_enforced(meta, where),
        num_states=counts[0],
        num_masks=counts[1],
        rule_names=rule_names,
        inline_depth=inline_depth,
    )
