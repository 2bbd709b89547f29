"""``maskc lint``: findings about a JSON Schema that will hurt in production.

Each rule module exposes ``RULES`` (its :class:`~maskc.compiler.findings.RuleInfo` list) and
``check(ctx) -> Iterable[Finding]``. :func:`lint_schema` runs the selected rules over one
schema and applies ``x-maskc-ignore`` lists found in schema nodes; choosing files, reading
configuration and rendering are the CLI's business.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any

from maskc.compiler.collector import fewer_full_collections
from maskc.compiler.hugepages import no_huge_pages
from maskc.compiler.findings import Finding, RuleInfo, register, rules
from maskc.compiler.lint.walk import Node, walk
from maskc.compiler.options import CompileOptions, Limits
from maskc.compiler.vocab import Vocabulary

__all__ = ["IGNORE_KEY", "LINT_BUDGET_SECONDS", "LintContext", "RULE_MODULES", "all_rules", "lint_schema", "load_rules"]

# The modules that hold rules, in the order their findings are reported.
RULE_MODULES: tuple[str, ...] = (
    "maskc.compiler.lint.structure",    # unbounded-*, nullable/mixed unions
    "maskc.compiler.lint.fields",       # optional-field, free-text-enum, schema-error
    "maskc.compiler.lint.unions",       # ambiguous-union and unsatisfiable, on the compiler's automata
    "maskc.compiler.lint.termination",  # unbounded-recursion, no-base-case, whitespace-runaway, max-tokens-budget,
                                        # unenforced-keyword, unknown-format
    "maskc.compiler.lint.profiles",     # strict-mode, deep-nesting, large-enum (limits as data, per profile)
)

IGNORE_KEY = "x-maskc-ignore"


@dataclass
class LintContext:
    """What every rule may read: the schema, the compile options, an optional tokenizer and
    profile, and memoized facts that several rules share (``ctx.memo``).

    Attributes:
        schema: The schema itself (unwrapped from a tool definition or MaskBench case).
        options: The compile options whose language the rules reason about (whitespace,
            max_depth, semantics: generation or exact).
        tokenizer: For token budgets; None when ``--tokenizer`` was not given.
        profile: A provider profile (``openai-strict``) as data, or None.
        base_pointer: Where ``schema`` sits in the file (``/function/parameters`` for a tool
            definition), prefixed to every finding's pointer.
    """

    schema: Any
    options: CompileOptions = field(default_factory=CompileOptions)
    tokenizer: Vocabulary | None = None
    profile: dict[str, Any] | None = None
    base_pointer: str = ""
    memo: dict[str, Any] = field(default_factory=dict)
    deadline: float | None = None  # time.monotonic() value; set by lint_schema from its budget

    def seconds_left(self, cap: float = float("inf")) -> float:
        """Time left for an analysis, at most ``cap`` (0 once the schema's budget is spent)."""
        left = cap if self.deadline is None else min(cap, self.deadline - time.monotonic())
        return max(left, 0.0)

    def bounded(self, limits: Limits) -> Limits:
        """``limits`` with no more time than the schema's budget has left (a compile given no
        time fails at once with a time limit, which rules report as "not analysed")."""
        return replace(limits, max_seconds=max(self.seconds_left(limits.max_seconds), 1e-3))

    def bounded_options(self) -> CompileOptions:
        """``options`` under :meth:`bounded` limits."""
        return replace(self.options, limits=self.bounded(self.options.limits))

    def nodes(self) -> list[Node]:
        """Every subschema with its pointer (computed once)."""
        cached: list[Node] | None = self.memo.get("nodes")
        if cached is None:
            cached = list(walk(self.schema))
            self.memo["nodes"] = cached
        return cached

    def shared(self, key: str, compute: Callable[[], Any]) -> Any:
        """A fact several rules use, computed once per schema."""
        if key not in self.memo:
            self.memo[key] = compute()
        return self.memo[key]


def load_rules() -> list[tuple[ModuleType, list[RuleInfo]]]:
    """Import the rule modules and register their rules."""
    out = []
    for name in RULE_MODULES:
        module = importlib.import_module(name)
        infos: list[RuleInfo] = list(module.RULES)
        register(*infos)
        out.append((module, infos))
    return out


def _ignored_at(schema: Any, pointer: str) -> set[str]:
    """The rule ids listed in ``x-maskc-ignore`` of the node at ``pointer`` or any ancestor."""
    ignored: set[str] = set()
    node: Any = schema
    parts = pointer.split("/")[1:] if pointer else []
    for i in range(len(parts) + 1):
        if isinstance(node, dict):
            listed = node.get(IGNORE_KEY)
            if isinstance(listed, list):
                ignored.update(x for x in listed if isinstance(x, str))
            elif isinstance(listed, str):
                ignored.add(listed)
        if i == len(parts):
            break
        part = parts[i].replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and part.isascii() and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            break
    return ignored


LINT_BUDGET_SECONDS = 30.0
"""Time one schema's analyses may take together; past it, rules that compile automata report
what they could not decide instead of running on."""


@fewer_full_collections()  # (the rules build automata: see collector.py)
@no_huge_pages()  # (see hugepages.py)
def lint_schema(ctx: LintContext, *, select: Sequence[str] | None = None,
                ignore: Sequence[str] = (), budget_seconds: float = LINT_BUDGET_SECONDS) -> list[Finding]:
    """Run the rules (all, or ``select``; minus ``ignore``) over ``ctx.schema``.

    A finding is dropped when its node or an ancestor lists its rule in ``x-maskc-ignore``.
    Pointers are made absolute with ``ctx.base_pointer``. The rules share ``budget_seconds``.
    """
    if ctx.deadline is None:
        ctx.deadline = time.monotonic() + budget_seconds
    wanted = set(select) if select else None
    found: list[Finding] = []
    for module, infos in load_rules():
        ids = {i.id for i in infos}
        if wanted is not None and not ids & wanted:
            continue
        if not ids - set(ignore):
            continue
        results: Iterable[Finding] = module.check(ctx)
        for f in results:
            if (wanted is not None and f.rule not in wanted) or f.rule in ignore:
                continue
            if f.rule in _ignored_at(ctx.schema, f.pointer):
                continue
            found.append(_absolute(f, ctx.base_pointer))
    return found


def _absolute(f: Finding, base: str) -> Finding:
    if not base:
        return f
    return replace(f, pointer=base + f.pointer)


def all_rules() -> list[RuleInfo]:
    """Every lint rule, registered (for ``--explain`` and SARIF)."""
    load_rules()
    return rules("lint")
