"""The renderers of findings, shared by ``maskc lint`` and ``maskc audit``: human, JSON, SARIF.

A command gathers one :class:`FileReport` per input (its findings, its text for line and
column, or the error that kept it from being checked) and hands the list to one renderer:
:func:`render_human` (Rich, grouped per file, a summary line), :func:`json_document` (one
document, ``schema_version`` added by :class:`~maskc.cli.output.Output`) or
:func:`sarif_log` (SARIF 2.1.0 for code scanning). Positions come from
:mod:`maskc.compiler.json_locate`: the key the finding's pointer names, columns in code points.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PureWindowsPath
from typing import Any, Literal
from urllib.parse import quote

from rich.padding import Padding
from rich.text import Text

import maskc
from maskc.cli.output import Output
from maskc.compiler.findings import SEVERITIES, Finding, RuleInfo, Severity, severity_at_least
from maskc.compiler.json_locate import Locator

__all__ = [
    "FailOn",
    "FileReport",
    "Located",
    "SARIF_SCHEMA",
    "count",
    "explain_document",
    "json_document",
    "render_explain",
    "render_human",
    "sarif_log",
    "threshold_reached",
]

FailOn = Literal["error", "warning", "never"]
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_SARIF_LEVEL: dict[Severity, str] = {"error": "error", "warning": "warning", "info": "note"}
_STYLE: dict[Severity, str] = {"error": "bold red", "warning": "yellow", "info": "cyan"}


@dataclass(frozen=True, slots=True)
class Located:
    """A finding and the 1-based line and column of its pointer (None without the text)."""

    finding: Finding
    line: int | None
    column: int | None


@dataclass(frozen=True, slots=True)
class FileReport:
    """One input: its findings, or the error that kept it from being checked.

    Attributes:
        path: The input as the user named it.
        findings: What the rules found (pointers relative to the file's document).
        text: The file's JSON text, to place findings by line and column; None when the
            input is no JSON text (a tokenizer model) or could not be read.
        error: The error's JSON form (:func:`maskc.cli.errors.describe`), or None.
    """

    path: str
    findings: Sequence[Finding] = ()
    text: str | None = None
    error: dict[str, Any] | None = None
    located: list[Located] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        locator = Locator(self.text) if self.text is not None else None
        out = []
        for f in self.findings:
            line, column = locator.position(f.pointer) if locator is not None else (None, None)
            out.append(Located(f, line, column))
        out.sort(key=lambda x: (x.line or 0, x.column or 0, x.finding.pointer, x.finding.rule))
        object.__setattr__(self, "located", out)


def count(reports: Sequence[FileReport]) -> dict[str, int]:
    """Findings per severity, files checked, files with findings, files that failed."""
    summary: dict[str, int] = {s: 0 for s in SEVERITIES}
    for r in reports:
        for f in r.findings:
            summary[f.severity] += 1
    return {**summary, "files": len(reports),
            "files_with_findings": sum(bool(r.findings) for r in reports),
            "files_failed": sum(r.error is not None for r in reports)}


def threshold_reached(reports: Sequence[FileReport], fail_on: FailOn) -> bool:
    """Whether some finding is as serious as ``fail_on`` (never, for ``never``)."""
    if fail_on == "never":
        return False
    return any(severity_at_least(f.severity, fail_on) for r in reports for f in r.findings)


# -- human ------------------------------------------------------------------------------


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 or word == "info" else f"{n} {word}s"


def _shown_pointer(pointer: str) -> str:
    return pointer or "(root)"


def render_human(out: Output, reports: Sequence[FileReport]) -> None:
    """One line per finding, ``file:line:col pointer rule severity message``, the hint and
    witness indented below it; files in the given order, a blank line between them; a
    summary line. Errors that kept a file from being checked go to stderr."""
    first = True
    for r in reports:
        if r.error is not None:
            out.error(f"{r.path}: {r.error['message']}", r.error.get("hint"))
        if not r.located:
            continue
        if not first:
            out.out.print()
        first = False
        for x in r.located:
            f = x.finding
            where = f"{r.path}:{x.line}:{x.column}" if x.line is not None else r.path
            line = Text.assemble((where, "bold"), " ", (_shown_pointer(f.pointer), "dim"), " ",
                                 (f.rule, "magenta"), " ", (f.severity, _STYLE[f.severity]), " ", f.message)
            out.out.print(line, soft_wrap=True)
            hint = f.as_dict()["hint"]
            if hint:
                out.out.print(Text.assemble("    ", ("hint: ", "cyan"), hint), soft_wrap=True)
            if f.witness is not None:
                out.out.print(Text.assemble("    ", ("witness: ", "cyan"), f.witness), soft_wrap=True)
    c = count(reports)
    parts = ", ".join(_plural(c[s], s) for s in SEVERITIES)
    checked = c["files"] - c["files_failed"]
    if c["files_with_findings"]:
        summary = f"{parts} in {_plural(c['files_with_findings'], 'file')} (of {checked} checked)"
    else:
        summary = f"no findings in {_plural(checked, 'file')} checked"
    if c["files_failed"]:
        summary += f"; {_plural(c['files_failed'], 'file')} could not be checked"
    if not first:
        out.out.print()
    out.out.print(Text(summary, style="bold"), soft_wrap=True)


# -- json -------------------------------------------------------------------------------


def json_document(reports: Sequence[FileReport], *, tool: str) -> dict[str, Any]:
    """``{"tool", "version", "files": [{"path", "findings", "error"}], "summary"}``; each
    finding is :meth:`Finding.as_dict` plus ``line`` and ``column`` (null without text)."""
    return {
        "tool": tool,
        "version": maskc.__version__,
        "files": [{
            "path": r.path,
            "findings": [{**x.finding.as_dict(), "path": r.path, "line": x.line, "column": x.column}
                         for x in r.located],
            "error": r.error,
        } for r in reports],
        "summary": count(reports),
    }


def _rule_dict(info: RuleInfo) -> dict[str, Any]:
    return {"id": info.id, "severity": info.severity, "tool": info.tool, "summary": info.summary,
            "why": info.why, "example": info.example, "fix": info.fix}


def explain_document(info: RuleInfo) -> dict[str, Any]:
    """A rule's documentation as JSON (``--explain RULE --json``)."""
    return {"rule": _rule_dict(info)}


def render_explain(out: Output, info: RuleInfo) -> None:
    """A rule's documentation for a reader: summary, why it matters, an example, the fix."""
    out.show(Text.assemble((info.id, "bold magenta"), "  ", (info.severity, _STYLE[info.severity]),
                           f"  ({info.tool})"))
    out.show(Text(info.summary))
    for title, body in (("Why it matters", info.why), ("Example", info.example), ("Fix", info.fix)):
        out.show(Text(""))
        out.show(Text(title, style="bold"))
        out.show(Padding(Text(body or "–"), (0, 0, 0, 2), expand=False))


# -- SARIF ------------------------------------------------------------------------------


def _uri(path: str) -> str:
    """A SARIF ``uri``: the path as given, with forward slashes, percent-encoded."""
    posix = PureWindowsPath(path).as_posix() if os.sep == "\\" else path
    if posix.startswith("/"):
        return "file://" + quote(posix)
    return quote(posix, safe="/")


def _descriptor(info: RuleInfo) -> dict[str, Any]:
    return {
        "id": info.id,
        "name": info.id,
        "shortDescription": {"text": info.summary},
        "fullDescription": {"text": info.why or info.summary},
        "help": {"text": info.fix or info.summary},
        "defaultConfiguration": {"level": _SARIF_LEVEL[info.severity]},
        "properties": {"tags": [f"maskc-{info.tool}"]},
    }


def _result(r: FileReport, x: Located, index: dict[str, int]) -> dict[str, Any]:
    f = x.finding
    physical: dict[str, Any] = {"artifactLocation": {"uri": _uri(r.path)}}
    if x.line is not None and x.column is not None:
        physical["region"] = {"startLine": x.line, "startColumn": x.column}
    result: dict[str, Any] = {
        "ruleId": f.rule,
        "level": _SARIF_LEVEL[f.severity],
        "message": {"text": f.message or f.rule},
        "locations": [{"physicalLocation": physical}],
        "properties": {"pointer": f.pointer, "witness": f.witness, "hint": f.as_dict()["hint"],
                       "data": f.data},
    }
    if f.rule in index:
        result["ruleIndex"] = index[f.rule]
    return result


def sarif_log(reports: Sequence[FileReport], rules: Sequence[RuleInfo]) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one run: ``rules`` as the driver's rule table, one result per
    finding at the line and column of its pointer's key (columns in code points), and the
    files that could not be checked as tool execution notifications."""
    index = {info.id: i for i, info in enumerate(rules)}
    notifications = [{
        "level": "error",
        "message": {"text": f"{r.path}: {r.error['message']}"},
        "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(r.path)}}}],
        "properties": {"type": r.error.get("type"), "hint": r.error.get("hint")},
    } for r in reports if r.error is not None]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "maskc", "version": maskc.__version__,
                                "rules": [_descriptor(info) for info in rules]}},
            "columnKind": "unicodeCodePoints",
            "results": [_result(r, x, index) for r in reports for x in r.located],
            "invocations": [{"executionSuccessful": not notifications,
                             "toolExecutionNotifications": notifications}],
        }],
    }
