"""Findings: what ``maskc lint`` and ``maskc audit`` report, and the rules that produce them.

A :class:`Finding` is data (rule id, severity, where, what, how to fix, a witness); renderers
(human, JSON, SARIF) live in the CLI. Every rule is described once by a :class:`RuleInfo`
(registered with :func:`register`), which is what ``--explain``, ``--select``/``--ignore``
and SARIF's rule table read.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

__all__ = [
    "Finding",
    "RuleInfo",
    "SEVERITIES",
    "Severity",
    "Tool",
    "register",
    "rule_info",
    "rules",
    "severity_at_least",
]

Severity = Literal["error", "warning", "info"]
Tool = Literal["lint", "audit"]

SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")
_RANK = {"error": 2, "warning": 1, "info": 0}


def severity_at_least(severity: Severity, threshold: Severity) -> bool:
    """Whether ``severity`` is as serious as ``threshold`` or more."""
    return _RANK[severity] >= _RANK[threshold]


@dataclass(frozen=True, slots=True)
class RuleInfo:
    """A rule's stable id and its documentation (``maskc lint --explain RULE``).

    Attributes:
        id: Stable, kebab-case (``unbounded-string``); never reused for another meaning.
        severity: The default severity.
        summary: One line: what the rule finds.
        why: Why it matters in production (a short paragraph).
        example: A minimal schema (or token) that fires it, as text.
        fix: How to fix it (the hint every finding of the rule carries by default).
        tool: ``lint`` or ``audit``.
    """

    id: str
    severity: Severity
    summary: str
    why: str
    example: str
    fix: str
    tool: Tool = "lint"

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, got {self.severity!r}")
        if not self.id or self.id != self.id.lower() or " " in self.id:
            raise ValueError(f"a rule id is lower-case kebab-case, got {self.id!r}")


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem found, at one place.

    Attributes:
        rule: The :class:`RuleInfo` id.
        severity: This finding's severity (the rule's default unless a profile or option changed it).
        pointer: JSON pointer into the input document (``""`` is the root; for a tokenizer
            audit, ``/tokens/ID``).
        message: One sentence, specific to this place.
        hint: How to fix this one (defaults to the rule's ``fix`` when empty).
        witness: Evidence taken from the automata or the vocabulary (a string both union
            branches accept, the cycle of references, the token's bytes), or None.
        path: The input file, as the user named it ("" for an in-memory schema).
        data: Machine-readable extras (numbers, ids), JSON-able.
    """

    rule: str
    severity: Severity
    pointer: str
    message: str
    hint: str = ""
    witness: str | None = None
    path: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, got {self.severity!r}")
        if self.pointer and not self.pointer.startswith("/"):
            raise ValueError(f"a JSON pointer is empty or starts with '/', got {self.pointer!r}")

    def with_path(self, path: str) -> Finding:
        return replace(self, path=path)

    def as_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule, "severity": self.severity, "path": self.path, "pointer": self.pointer,
            "message": self.message, "hint": self.hint or _fix_of(self.rule), "witness": self.witness,
            "data": self.data,
        }


_RULES: dict[str, RuleInfo] = {}


def register(*infos: RuleInfo) -> None:
    """Add rules to the registry (idempotent for an identical description)."""
    for info in infos:
        known = _RULES.get(info.id)
        if known is not None and known != info:
            raise ValueError(f"rule id {info.id!r} is registered twice with different descriptions")
        _RULES[info.id] = info


def rule_info(rule_id: str) -> RuleInfo:
    """The registered rule, or KeyError naming the known ids."""
    try:
        return _RULES[rule_id]
    except KeyError:
        raise KeyError(f"unknown rule {rule_id!r}; known: {', '.join(sorted(_RULES))}") from None


def rules(tool: Tool | None = None) -> list[RuleInfo]:
    """Registered rules, sorted by id (all tools, or one)."""
    return sorted((r for r in _RULES.values() if tool is None or r.tool == tool), key=lambda r: r.id)


def _fix_of(rule_id: str) -> str:
    info = _RULES.get(rule_id)
    return info.fix if info else ""
