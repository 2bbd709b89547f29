"""Recursion in a schema: ``unbounded-recursion`` and ``no-base-case``.

The compiler decides what is recursive and what can finish: the JSON Schema front end makes a
rule of every ``$ref`` target reached again while it is being expanded, and
:func:`~maskc.compiler.frontends.json_schema.refs.productive_rules` is the least fixed point
it prunes with (a rule that derives no finite string). This module runs that front end once
(compact whitespace, lenient, so rule names are plain pointers) and names each recursive
rule's cycle through the document's ``$ref``s: a shortest path of references from the rule's
target back to itself, every step a ``$ref`` inside the previous target.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from maskc.compiler.errors import EmptyLanguage, MaskcError
from maskc.compiler.findings import Finding
from maskc.compiler.frontends.json_schema import ANY_RULE, SchemaCompiler
from maskc.compiler.frontends.json_schema.refs import productive_rules
from maskc.compiler.frontends.json_schema.validate import check_schema
from maskc.compiler.ir import Grammar, Node
from maskc.compiler.lint.walk import walk
from maskc.compiler.options import CompileOptions, Limits, Whitespace
from maskc.compiler.rules import references

__all__ = ["LINT_LIMITS", "Cycle", "SchemaFront", "recursion_findings", "schema_front"]

LINT_LIMITS = Limits(max_states=50_000, max_nfa_states=500_000, max_seconds=10.0)
"""Limits of the compiles lint runs: small, so a huge schema is skipped rather than waited on."""

# Keywords whose subschemas the grammar never expands (dropped in lenient mode, or not an
# instance's value): a $ref inside them makes no recursion.
_NOT_EXPANDED = frozenset({
    "$defs", "definitions", "not", "if", "then", "else", "propertyNames", "contains",
    "dependentSchemas", "dependencies", "unevaluatedProperties", "unevaluatedItems",
})


@dataclass(frozen=True, slots=True)
class SchemaFront:
    """What the JSON Schema front end found, compiled leniently with compact whitespace.

    Attributes:
        compiler: The front end after its run (``resolve`` follows a ``$ref`` as it does).
        grammar: The grammar, or None when the schema admits no value.
        rules: Every rule built (recursive targets), before pruning, by rule name.
        recursive: The expansion keys (``#`` + pointer) that became rules, in build order,
            free-form values (``any``) left out.
        complete: Every rule a body refers to was built (False when the compile stopped
            half-way, so productivity cannot be judged).
        not_enforced: The keywords lenient mode compiled without.
    """

    compiler: SchemaCompiler
    grammar: Grammar | None
    rules: dict[str, Node]
    recursive: tuple[str, ...]
    complete: bool
    not_enforced: list[dict[str, str]]

    def rule_of(self, key: str) -> str:
        return self.compiler.rule_names.get(key, key)


@dataclass(frozen=True, slots=True)
class Cycle:
    """A cycle of references: ``targets[i]`` holds, at ``sites[i]``, a ``$ref`` to
    ``targets[i + 1]`` (the last target is the first again). Targets are ``#``-pointers."""

    targets: tuple[str, ...]
    sites: tuple[str, ...]

    def __str__(self) -> str:
        return " -> ".join(self.targets)


def schema_front(schema: Any, options: CompileOptions) -> SchemaFront | None:
    """Run the front end as lint needs it; None when the schema cannot be compiled at all
    (malformed, refused): other rules report that."""
    # the user's limits: the front end reads them to decide what it refuses (not_enforced)
    opts = replace(options, whitespace=Whitespace("compact"), lenient=True)
    try:
        check_schema(schema)
        sc = SchemaCompiler(schema, opts)
    except MaskcError:
        return None
    grammar: Grammar | None = None
    try:
        grammar = sc.compile()
    except EmptyLanguage:
        pass
    except (MaskcError, RecursionError):
        return None
    rules = dict(sc.rules)
    keys = [k for k in sc.recursive if k != ANY_RULE]
    named = set(rules)
    complete = all(sc.rule_names.get(k, k) in named for k in sc.recursive) and all(
        references(body) <= named for body in rules.values())
    first_named: dict[str, int] = {k: i for i, k in enumerate(sc.rule_names)}  # expansion order
    keys.sort(key=lambda k: first_named.get(k, len(first_named)))
    return SchemaFront(sc, grammar, rules, tuple(keys), complete, list(sc.not_enforced))


class _RefGraph:
    """The document's references: from a target, every ``$ref`` its value expands."""

    def __init__(self, front: SchemaFront) -> None:
        self.front = front
        self._edges: dict[str, list[tuple[str, str]]] = {}

    def edges(self, frag: str) -> list[tuple[str, str]]:
        """``(site pointer, target pointer)`` of each ``$ref`` under the target at ``frag``."""
        got = self._edges.get(frag)
        if got is None:
            got = list(self._scan(frag))
            self._edges[frag] = got
        return got

    def _scan(self, frag: str) -> Iterator[tuple[str, str]]:
        sc = self.front.compiler
        try:
            target, _ = sc.resolve("#" + frag, frag)
        except MaskcError:
            return
        pruned: list[str] = []
        for node in walk(target):
            if any(node.pointer.startswith(p + "/") for p in pruned):
                continue
            if node.keyword in _NOT_EXPANDED:
                pruned.append(node.pointer)
                continue
            s = node.schema
            if isinstance(s, dict) and isinstance(s.get("$ref"), str):
                site = frag + node.pointer
                try:
                    _, to = sc.resolve(s["$ref"], site)
                except MaskcError:
                    continue
                yield site, to

    def reach(self, start: str) -> set[str]:
        """Every target reached from ``start`` through references, ``start`` included."""
        seen = {start}
        work = [start]
        while work:
            for _, t in self.edges(work.pop()):
                if t not in seen:
                    seen.add(t)
                    work.append(t)
        return seen

    def cycle(self, start: str) -> Cycle | None:
        """A shortest cycle of references that expands ``start`` again (breadth first).

        It closes at a target that is ``start`` or holds it (a ``$ref`` to the enclosing
        definition, or an ``allOf`` that merges it); the cycle is named from that target.
        """
        prev: dict[str, tuple[str, str]] = {}
        queue = deque([start])
        while queue:
            cur = queue.popleft()
            for site, t in self.edges(cur):
                if covers(t, start):
                    sites = [site]
                    hops: list[str] = []
                    node = cur
                    while node != start:
                        hops.append(node)
                        node, s = prev[node]
                        sites.append(s)
                    return Cycle(tuple("#" + x for x in [t, *reversed(hops), t]), tuple(reversed(sites)))
                if t not in prev and t != start:
                    prev[t] = (cur, site)
                    queue.append(t)
        return None


def covers(target: str, location: str) -> bool:
    """Whether expanding the schema at ``target`` expands the one at ``location``."""
    if target == location:
        return True
    if not location.startswith(target + "/"):
        return False
    return not any(part in _NOT_EXPANDED for part in location[len(target) + 1:].split("/"))


def _start(front: SchemaFront, key: str) -> str | None:
    """The location whose expansion recursed: a ``$ref`` target, or the schema holding a
    recursive ``allOf`` (its rule is named after the keyword: ``#/a/b/allOf``)."""
    if key.startswith("#"):
        return key[1:]
    name = re.sub(r"#\d+$", "", front.rule_of(key))
    if not name.startswith("#") or "/" not in name:
        return None
    return name[1:].rsplit("/", 1)[0]


def recursion_findings(front: SchemaFront, max_depth: int) -> list[Finding]:
    """One finding per strongly connected group of recursive locations: ``no-base-case`` for
    those with no finite instance, ``unbounded-recursion`` for the others."""
    graph = _RefGraph(front)
    # productivity is judged only on a complete set of rules (else a missing one reads as dead)
    live = productive_rules(front.rules) if front.complete else None
    starts: dict[str, bool] = {}  # location -> has no finite instance
    for key in front.recursive:
        loc = _start(front, key)
        if loc is not None:
            starts[loc] = starts.get(loc, False) or (live is not None and front.rule_of(key) not in live)
    reach = {loc: graph.reach(loc) for loc in starts}

    def leads(a: str, b: str) -> bool:
        return any(covers(t, b) for t in reach[a])

    groups: list[list[str]] = []
    for loc in starts:
        for g in groups:
            if leads(g[0], loc) and leads(loc, g[0]):
                g.append(loc)
                break
        else:
            groups.append([loc])
    root_dead = front.grammar is None and front.complete and any(starts.values())
    out: list[Finding] = []
    for g in groups:
        bad = [x for x in g if starts[x]]
        good = [x for x in g if not starts[x]]
        if bad:
            out.append(_no_base_case(graph, bad, root_dead))
        if good:
            out.append(_unbounded(graph, good, max_depth))
    return out


def _cycle_of(graph: _RefGraph, start: str) -> Cycle:
    return graph.cycle(start) or Cycle(("#" + start, "#" + start), (start,))


def _no_base_case(graph: _RefGraph, starts: list[str], root_dead: bool) -> Finding:
    cyc = _cycle_of(graph, starts[0])
    also = "; the root is on it, so the schema admits no value at all" if root_dead else ""
    return Finding(
        rule="no-base-case", severity="error", pointer=starts[0],
        message=f"the reference cycle {cyc} has no finite instance: every way through it recurses "
                f"again, so an output that enters it can never finish{also}",
        witness=str(cyc),
        data={"cycle": list(cyc.targets), "ref_sites": list(cyc.sites), "rules": ["#" + x for x in starts]},
    )


def _unbounded(graph: _RefGraph, starts: list[str], max_depth: int) -> Finding:
    cyc = _cycle_of(graph, starts[0])
    return Finding(
        rule="unbounded-recursion", severity="warning", pointer=starts[0],
        message=f"recursive reference {cyc}: the schema sets no bound on how deep it nests; maskc "
                f"stops it at max_depth={max_depth} levels at run time (--max-depth)",
        witness=str(cyc),
        data={"cycle": list(cyc.targets), "ref_sites": list(cyc.sites), "rules": ["#" + x for x in starts],
              "max_depth": max_depth},
    )
