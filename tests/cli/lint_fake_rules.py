"""A rule module for testing ``maskc lint``'s plumbing without the real rules.

``fake-error`` fires on every subschema with ``"x-error": true``, ``fake-warning`` on every
one with an ``x-warn`` string (that string is its witness), ``fake-info`` on every
``"x-info": true``; ``"x-crash": true`` anywhere makes :func:`check` raise (an internal error).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from maskc.compiler.findings import Finding, RuleInfo

RULES: list[RuleInfo] = [
    RuleInfo("fake-error", "error", "A node marked x-error.", "Tests need an error.",
             '{"x-error": true}', "drop x-error"),
    RuleInfo("fake-warning", "warning", "A node marked x-warn.", "Tests need a warning.",
             '{"x-warn": "w"}', "drop x-warn"),
    RuleInfo("fake-info", "info", "A node marked x-info.", "Tests need an info.",
             '{"x-info": true}', "drop x-info"),
]


def check(ctx: Any) -> Iterator[Finding]:
    for node in ctx.nodes():
        s = node.schema
        if not isinstance(s, dict):
            continue
        if s.get("x-crash") is True:
            raise RuntimeError("fake rule crashed")
        if s.get("x-error") is True:
            yield Finding("fake-error", "error", node.pointer, "marked as an error")
        if isinstance(s.get("x-warn"), str):
            yield Finding("fake-warning", "warning", node.pointer, "marked as a warning",
                          hint="this one's own hint", witness=s["x-warn"])
        if s.get("x-info") is True:
            yield Finding("fake-info", "info", node.pointer, "marked as info")
