"""The grammar audit's report: counts per state kind, examples with witnesses, findings.

:class:`GrammarAudit` is what :func:`~maskc.compiler.audit.grammar.audit_grammar` returns:
one :class:`GrammarCategory` per rule (counts per state kind and in all, examples), and the
:class:`~maskc.compiler.findings.Finding` list — one finding per example, plus one "N more"
finding per state kind. Data only; the CLI renders it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from maskc.compiler.audit.grammar_rules import WHY
from maskc.compiler.audit.states import KINDS, StateKind
from maskc.compiler.findings import Finding, Severity, rule_info

__all__ = ["Example", "GrammarAudit", "GrammarCategory", "KindCount", "Tally", "category_findings", "show_bytes"]


def show_bytes(data: bytes) -> str:
    """Readable text for token or prefix bytes: UTF-8 with invalid bytes as ``\\xNN``."""
    return data.decode("utf-8", errors="backslashreplace")


@dataclass(frozen=True, slots=True)
class KindCount:
    """States concerned, (state, token) pairs, and distinct tokens (0 where not applicable)."""

    states: int = 0
    pairs: int = 0
    tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"states": self.states, "pairs": self.pairs, "tokens": self.tokens}


@dataclass(frozen=True, slots=True)
class Example:
    """One instance with its witness: the shortest prefix reaching ``state``, then ``token``."""

    state: int
    kind: StateKind
    prefix: bytes
    token_id: int | None
    token: bytes
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"state": self.state, "kind": self.kind, "prefix": show_bytes(self.prefix),
                "token_id": self.token_id, "token": show_bytes(self.token), "detail": self.detail}


@dataclass(frozen=True, slots=True)
class GrammarCategory:
    """One row of the report: a rule, its sentence, counts per state kind and in all (distinct
    tokens over all kinds), examples."""

    rule: str
    title: str
    why: str
    by_kind: dict[str, KindCount]
    total: KindCount
    examples: tuple[Example, ...]
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "title": self.title, "why": self.why, "total": self.total.as_dict(),
                "by_kind": {k: c.as_dict() for k, c in self.by_kind.items()},
                "examples": [e.as_dict() for e in self.examples], "note": self.note}


@dataclass(frozen=True, slots=True)
class GrammarAudit:
    """The grammar report: state kinds, one :class:`GrammarCategory` per rule, findings."""

    states: int
    pushdown: bool
    state_kinds: dict[str, int]
    categories: tuple[GrammarCategory, ...]
    findings: tuple[Finding, ...]
    note: str = ""

    def category(self, rule: str) -> GrammarCategory:
        """The category of ``rule`` (KeyError when the audit did not run it)."""
        for c in self.categories:
            if c.rule == rule:
                return c
        raise KeyError(rule)

    def as_dict(self) -> dict[str, Any]:
        return {"states": self.states, "pushdown": self.pushdown, "state_kinds": self.state_kinds,
                "categories": [c.as_dict() for c in self.categories],
                "findings": [f.as_dict() for f in self.findings], "note": self.note}



class Tally:
    """Counts per kind, distinct tokens per kind, and example candidates of one category."""

    def __init__(self, n_tokens: int) -> None:
        self.n = n_tokens
        self.states: dict[str, int] = {}
        self.pairs: dict[str, int] = {}
        self.tokens: dict[str, NDArray[np.bool_]] = {}
        self.all_tokens = np.zeros(n_tokens, dtype=np.bool_)
        self.examples: dict[str, list[Example]] = {}

    def add(self, kind: str, states: int, ids: NDArray[np.int64] | None = None, per_state: int = 0) -> None:
        self.states[kind] = self.states.get(kind, 0) + states
        if ids is not None:
            self.pairs[kind] = self.pairs.get(kind, 0) + states * int(ids.shape[0])
            seen = self.tokens.setdefault(kind, np.zeros(self.n, dtype=np.bool_))
            seen[ids] = True
            self.all_tokens[ids] = True
        elif per_state:
            self.pairs[kind] = self.pairs.get(kind, 0) + states * per_state

    def full(self, kind: str, show: int) -> bool:
        return len(self.examples.get(kind, [])) >= show

    def offer(self, kind: str, example: Example, show: int) -> None:
        got = self.examples.setdefault(kind, [])
        if len(got) < show and all(e.token != example.token or not e.token for e in got):
            got.append(example)

    def category(self, rule: str, title: str, note: str = "") -> GrammarCategory:
        by_kind: dict[str, KindCount] = {k: KindCount(self.states[k], self.pairs.get(k, 0),
                                int(self.tokens[k].sum()) if k in self.tokens else 0)
                   for k in KINDS if self.states.get(k)}
        examples = tuple(e for k in KINDS for e in self.examples.get(k, []))
        total = KindCount(sum(c.states for c in by_kind.values()), sum(c.pairs for c in by_kind.values()),
                          int(self.all_tokens.sum()))
        return GrammarCategory(rule, title, WHY[rule], by_kind, total, examples, note)


def category_findings(cat: GrammarCategory, show: int) -> Iterable[Finding]:
    info = rule_info(cat.rule)
    severity: Severity = info.severity
    for e in cat.examples:
        yield Finding(rule=cat.rule, severity=severity, pointer=f"/states/{e.state}", message=_message(cat.rule, e),
                      witness=show_bytes(e.prefix + e.token) if e.token else show_bytes(e.prefix),
                      data={**e.as_dict(), "count": cat.by_kind[e.kind].as_dict()})
    for kind, count in cat.by_kind.items():
        listed = sum(1 for e in cat.examples if e.kind == kind)
        unit = count.pairs if count.pairs else count.states
        if unit > listed:
            what = "(state, token) pairs" if count.pairs else "states"
            yield Finding(rule=cat.rule, severity=severity, pointer="",
                          message=f"{unit - listed} more {what} in {kind} states ({count.states} states, "
                                  f"{count.tokens} distinct tokens)",
                          data={"kind": kind, "more": unit - listed, "count": count.as_dict()})


def _message(rule: str, e: Example) -> str:
    after = f"after {show_bytes(e.prefix)!r} ({e.kind} state {e.state})"
    token = f"token {show_bytes(e.token)!r} (id {e.token_id})"
    if rule == "smuggler":
        return f"{after}: {token} begins with an allowed byte but is {e.detail}; a first-byte mask admits it"
    if rule == "boundary-token":
        return f"{after}: {token} is allowed and writes structure together with other bytes"
    if rule == "whitespace-only-state":
        return f"{after}: only whitespace tokens are allowed, such as {token}"
    if rule == "eos-only-state":
        return f"{after}: EOS is the only allowed token"
    if rule == "unspellable-state":
        return f"{after}: no token is allowed although the grammar continues; {e.detail}"
    return f"{after}: the forced string {show_bytes(e.token)!r} tokenizes differently: {e.detail}"
