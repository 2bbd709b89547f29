"""Rendering of ``maskc audit``: the tokenizer report and one grammar report per input, as Rich
tables (counts, examples, the sentence per category) or as one JSON document.

Input: a :class:`~maskc.compiler.audit.tokenizer.TokenizerAudit` and :class:`GrammarReport`
records (a :class:`~maskc.compiler.audit.report.GrammarAudit`, or the error that kept an input
from being audited). The library computes; this module only lays it out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.markup import escape
from rich.table import Table
from rich.text import Text

import maskc
from maskc.cli.output import Output
from maskc.compiler.audit.report import Example, GrammarAudit, show_bytes
from maskc.compiler.audit.tokenizer import TokenizerAudit
from maskc.compiler.findings import SEVERITIES, Finding, rule_info

__all__ = ["GrammarReport", "audit_document", "findings_of", "render_audit"]

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
_PREFIX_TAIL = 36


@dataclass(frozen=True, slots=True)
class GrammarReport:
    """One input of ``maskc audit``: its audit, or the error (``describe`` form) that stopped it."""

    path: str
    kind: str = ""
    audit: GrammarAudit | None = None
    seconds: float = 0.0
    error: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        body = self.audit.as_dict() if self.audit is not None else None
        return {"path": self.path, "grammar_kind": self.kind or None, "seconds": round(self.seconds, 3),
                "audit": body, "error": self.error}


def findings_of(tokenizer: TokenizerAudit, grammars: Sequence[GrammarReport]) -> list[Finding]:
    """Every finding of the run (the tokenizer's, then each grammar's with its path)."""
    out = list(tokenizer.findings)
    for g in grammars:
        if g.audit is not None:
            out.extend(f.with_path(g.path) for f in g.audit.findings)
    return out


def audit_document(tokenizer: TokenizerAudit, grammars: Sequence[GrammarReport], fail_on: str) -> dict[str, Any]:
    """``{"tool", "version", "tokenizer", "grammars", "summary"}`` (``schema_version`` is added
    by :meth:`Output.document`)."""
    found = findings_of(tokenizer, grammars)
    summary: dict[str, Any] = {s: sum(f.severity == s for f in found) for s in SEVERITIES}
    summary.update(fail_on=fail_on, inputs=len(grammars), inputs_failed=sum(g.error is not None for g in grammars))
    return {"tool": "maskc audit", "version": maskc.__version__, "tokenizer": tokenizer.as_dict(),
            "grammars": [g.as_dict() for g in grammars], "summary": summary}


def render_audit(out: Output, tokenizer: TokenizerAudit, grammars: Sequence[GrammarReport]) -> None:
    """The tokenizer tables, then per input its counts table and examples, then a summary line."""
    _tokenizer(out, tokenizer)
    for g in grammars:
        out.show(Text(""))
        if g.error is not None:
            out.error(f"{g.path}: {g.error['message']}", g.error.get("hint"))
        elif g.audit is not None:
            _grammar(out, g, g.audit)
    found = findings_of(tokenizer, grammars)
    parts = ", ".join(f"{sum(f.severity == s for f in found)} {s}" for s in SEVERITIES)
    out.show(Text(""), Text(f"{parts}; {len(grammars)} grammar input(s)", style="bold"))


def _tokenizer(out: Output, t: TokenizerAudit) -> None:
    s = t.summary
    title = (f"Tokenizer {t.name}: {s['token_count']:,} tokens, logits width {s['vocab_size']:,}"
             f" ({s['padding_columns']:,} padding), longest whitespace run {s['longest_whitespace_run']}")
    table = Table(title=escape(title), title_justify="left", show_lines=False)
    table.add_column("category")
    table.add_column("tokens", justify="right")
    table.add_column("examples")
    table.add_column("why it matters", ratio=1)
    for c in t.categories:
        count = "unknown" if c.count is None else f"{c.count:,}"
        examples = ", ".join(f"{e.text!r} ({e.id})" for e in c.examples)
        table.add_row(escape(c.id), count, escape(examples), Text(c.why, style="dim"))
    out.show(table)
    eos = t.eos
    names = ", ".join(f"{c.role} {c.text!r} ({c.token_id}) from {c.source}" for c in eos.candidates) or "none found"
    out.show(Text.assemble(("EOS ", "bold"), f"ids {list(eos.eos_ids)}; candidates: {names}; ",
                           ("agree" if eos.agree else "disagree", "green" if eos.agree else "yellow")))
    if t.normalizer is not None:
        changes = ", ".join(t.normalizer.alterations) or "none"
        out.show(Text.assemble(("Normalizer ", "bold"), f"alters text: {changes}; lossy probes: "
                               f"{len(t.normalizer.failing)} of {len(t.normalizer.probes)}"))
    categorised = {c.rule for c in t.categories if c.rule}
    for f in t.findings:
        if f.rule not in categorised:
            _finding_line(out, f)


def _grammar(out: Output, g: GrammarReport, a: GrammarAudit) -> None:
    kinds = ", ".join(f"{k} {n:,}" for k, n in a.state_kinds.items())
    out.show(Text.assemble((g.path, "bold"), f" ({g.kind}): {a.states:,} states — {kinds}; "
                           f"audited in {g.seconds:.2f} s"))
    if a.note:
        out.show(Text(a.note, style="yellow"))
    if not a.categories:
        return
    table = Table(title="per category: states, (state, token) pairs, distinct tokens; by state kind",
                  title_justify="left")
    for col, justify in (("category", "left"), ("severity", "left"), ("states", "right"), ("pairs", "right"),
                         ("tokens", "right"), ("by kind (states/pairs)", "left")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for c in a.categories:
        sev = rule_info(c.rule).severity
        by_kind = ", ".join(f"{k} {v.states:,}/{v.pairs:,}" for k, v in c.by_kind.items())
        table.add_row(c.rule, Text(sev, style=_STYLE[sev]), f"{c.total.states:,}", f"{c.total.pairs:,}",
                      f"{c.total.tokens:,}", by_kind or "–")
    out.show(table)
    for c in a.categories:
        if not c.examples and not c.note:
            continue
        out.show(Text.assemble((c.title, "bold"), " — ", (c.why, "dim")))
        if c.note:
            out.show(Text(f"  {c.note}", style="dim"))
        if c.examples:
            ex = Table(show_header=True, box=None, padding=(0, 1, 0, 2))
            for col in ("kind", "state", "after prefix", "token", "detail"):
                ex.add_column(col)
            for e in c.examples:
                ex.add_row(e.kind, str(e.state), escape(_tail(e)), escape(_token(e)), escape(e.detail))
            out.show(ex)


def _tail(e: Example) -> str:
    text = show_bytes(e.prefix)
    return repr(text if len(text) <= _PREFIX_TAIL else "…" + text[-_PREFIX_TAIL:])


def _token(e: Example) -> str:
    if not e.token:
        return "–"
    return f"{show_bytes(e.token)!r}" + (f" ({e.token_id})" if e.token_id is not None else "")


def _finding_line(out: Output, f: Finding) -> None:
    out.show(Text.assemble((f.severity, _STYLE[f.severity]), " ", (f.rule, "magenta"), " ", f.message))
