"""Rule resolution: which rules of a :class:`Grammar` stay rules, and inlining of the rest.

A rule that refers to itself only at its end, or only at its start, becomes a loop
(``R ::= B R | A`` is ``B* A``, as in GBNF's ``ws ::= [ ] ws | ""``; direct left recursion
``R ::= R B | A`` is ``A B*``). A reference to a rule that
is not part of a reference cycle is then replaced by the rule's body (so a grammar without recursion becomes one regular expression and compiles to one
DFA, exactly as before rules existed). Rules on a cycle stay callable: they become the
pushdown automaton's rules. Input: a :class:`Grammar`; output: :class:`ResolvedRules`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal, overload

from maskc.compiler.errors import GrammarError, TimeLimitExceeded
from maskc.compiler.graphs import strongly_connected
from maskc.compiler.ir import EMPTY, Alt, Automaton, ByteSet, Fields, Grammar, Node, Product, Repeat, RuleRef, Seq, alt, children, rep, seq, star

__all__ = ["ResolvedRules", "resolve_rules", "references"]

# A non-recursive rule referenced more than once is kept as a call when its body is this
# large: inlining it at every use would multiply the automaton.
INLINE_MAX_NODES = 4000


@dataclass(frozen=True, slots=True)
class ResolvedRules:
    """The rules that remain after inlining; rule 0 is the start rule.

    ``regular`` is True when no reference remains (one rule, a regular language).
    ``sized``: the rules kept as calls for their size alone (on no cycle, referenced more
    than once, their expansion over the grammar's inlining limit).
    """

    names: tuple[str, ...]
    bodies: tuple[Node, ...]
    sized: frozenset[str] = frozenset()

    @property
    def regular(self) -> bool:
        return len(self.names) == 1 and not references(self.bodies[0])


def references(node: Node) -> set[str]:
    """Names of the rules ``node`` refers to.

    Front ends share sub-nodes (a ``$ref`` used in many places is one object), so the walk
    visits each distinct node once: linear in the DAG, not in the tree it unfolds to.
    """
    out: set[str] = set()
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, RuleRef):
            out.add(n.name)
        else:
            stack.extend(children(n))
    return out


def _tree_counts(node: Node, memo: dict[int, tuple[int, dict[str, int]]]) -> tuple[int, dict[str, int]]:
    """The size of ``node``'s tree (its nodes, repeats counted) and how many times each rule is
    referenced in it, computed once per distinct node (``memo`` is keyed by ``id``; the caller
    keeps the nodes alive)."""
    got = memo.get(id(node))
    if got is not None:
        return got
    # Post-order without recursion: deep grammars exceed Python's stack.
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        n, ready = stack.pop()
        if id(n) in memo:
            continue
        kids = children(n)
        if not ready:
            stack.append((n, True))
            stack.extend((k, False) for k in kids if id(k) not in memo)
            continue
        size = 1
        refs: dict[str, int] = {n.name: 1} if isinstance(n, RuleRef) else {}
        for k in kids:
            ks, kr = memo[id(k)]
            size += ks
            for r, c in kr.items():
                refs[r] = refs.get(r, 0) + c
        memo[id(n)] = (size, refs)
    return memo[id(node)]


def _cyclic(graph: dict[str, set[str]]) -> set[str]:
    """Rules on a reference cycle: a strongly connected group of two or more, or a self-reference."""
    comps = strongly_connected(list(graph), {n: sorted(refs) for n, refs in graph.items()})
    return {n for comp in comps if len(comp) > 1 or comp[0] in graph[comp[0]] for n in comp}


def _inlinable_shared(grammar: Grammar, graph: dict[str, set[str]], cyclic: set[str], uses: dict[str, int]) -> set[str]:
    """The rules of ``grammar.shared`` on a cycle that are inlined all the same: referenced
    exactly once, from another cyclic rule. Inlining one copies nothing (its one use gets
    its body) and adds no frame per level of nesting; every cycle still passes a rule that
    stays (the start, or the rule it is entered by from outside: referenced at least twice,
    or not a shared one)."""
    out: set[str] = set()
    for n in grammar.shared & cyclic:
        if n != grammar.start and uses.get(n, 0) == 1:
            by = next(m for m, refs in graph.items() if n in refs)  # its one referrer
            if by != n and by in cyclic:
                out.add(n)
    return out


def _split(node: Node, name: str, at_end: bool,
           refs: dict[int, set[str]] | None = None) -> tuple[list[Node], list[Node]] | None:
    """``node`` as ``L name | A`` (``at_end``) or ``name L | A``, with ``L`` and ``A`` lists of
    alternatives free of ``name``, when ``name`` occurs only at that end; else None."""
    memo: dict[int, set[str]] = {} if refs is None else refs

    def mentions(x: Node) -> bool:
        got = memo.get(id(x))
        if got is None:
            got = memo[id(x)] = references(x)
        return name in got

    if isinstance(node, RuleRef) and node.name == name:
        return [EMPTY], []
    if not mentions(node):
        return [], [node]
    if isinstance(node, Alt):
        loops: list[Node] = []
        exits: list[Node] = []
        for item in node.items:
            got = _split(item, name, at_end, memo)
            if got is None:
                return None
            loops += got[0]
            exits += got[1]
        return loops, exits
    if isinstance(node, Seq):
        edge, others = (node.items[-1], node.items[:-1]) if at_end else (node.items[0], node.items[1:])
        if any(mentions(x) for x in others):
            return None
        got = _split(edge, name, at_end, memo)
        if got is None:
            return None
        if at_end:
            return [seq(*others, x) for x in got[0]], [seq(*others, x) for x in got[1]]
        return [seq(x, *others) for x in got[0]], [seq(x, *others) for x in got[1]]
    if isinstance(node, Repeat) and node.min == 0 and node.max == 1:
        got = _split(node.item, name, at_end, memo)
        return None if got is None else (got[0], [EMPTY, *got[1]])
    return None


def head_loop(name: str, body: Node) -> Node | None:
    """Direct left recursion as a loop: ``R ::= R B | A`` is ``A B*`` (same language)."""
    got = _split(body, name, at_end=False)
    if got is None or not got[0] or not got[1] or any(b == EMPTY for b in got[0]):
        return None
    return seq(alt(*got[1]), star(alt(*got[0])))


def tail_loop(name: str, body: Node) -> Node | None:
    """A rule that refers to itself only at its end is a loop: ``R ::= B R | A`` is ``B* A``.

    Returns the loop (with no reference to ``name``), or None when the rule has another
    kind of self-reference (or calls itself before consuming anything).
    """
    got = _split(body, name, at_end=True)
    if got is None or not got[0] or any(b == EMPTY for b in got[0]):
        return None
    return seq(star(alt(*got[0])), alt(*got[1]))


@overload
def resolve_rules(grammar: Grammar, *, deadline: float | None = None,
                  regular_only: Literal[False] = False) -> ResolvedRules: ...


@overload
def resolve_rules(grammar: Grammar, *, deadline: float | None = None,
                  regular_only: bool) -> ResolvedRules | None: ...


def resolve_rules(grammar: Grammar, *, deadline: float | None = None,
                  regular_only: bool = False) -> ResolvedRules | None:
    """Inline every rule that is not on a reference cycle; keep the cyclic ones as rules.

    ``regular_only``: None, before anything is inlined, where some rule would stay (the
    result would not be :attr:`ResolvedRules.regular`): a caller that wants only a regular
    grammar does not pay for inlining the others.

    Raises:
        GrammarError: a reference names no rule.
        TimeLimitExceeded: ``deadline`` (``time.monotonic()``) passed while inlining.
    """
    bodies = grammar.rule_map
    graph = {name: references(body) for name, body in bodies.items()}
    for name, body in list(bodies.items()):
        if name not in graph[name]:
            continue  # (no reference to itself: neither loop applies)
        loop = tail_loop(name, body)
        if loop is None:
            loop = head_loop(name, body)
        if loop is not None:
            bodies[name] = loop
            graph[name] = references(loop)
    for name, refs in graph.items():
        missing = sorted(refs - bodies.keys())
        if missing:
            raise GrammarError(f"rule {name!r} refers to undefined rule {missing[0]!r}")
    # only rules reachable from the start matter
    reach = {grammar.start}
    work = [grammar.start]
    while work:
        for r in graph[work.pop()]:
            if r not in reach:
                reach.add(r)
                work.append(r)
    graph = {n: graph[n] for n in bodies if n in reach}
    keep = _cyclic(graph) | (grammar.calls & graph.keys())
    counts: dict[int, tuple[int, dict[str, int]]] = {}
    uses: dict[str, int] = {}
    for n in graph:
        for r, c in _tree_counts(bodies[n], counts)[1].items():
            uses[r] = uses.get(r, 0) + c
    keep -= _inlinable_shared(grammar, graph, keep, uses)
    # Sizes after inlining, bottom up: a rule used more than once whose expansion is large
    # stays a call, so a DAG of small rules (a tree unrolled per depth) cannot blow up.
    expanded: dict[str, int] = {}
    inline_max = INLINE_MAX_NODES if grammar.inline_max_nodes is None else grammar.inline_max_nodes
    sized: set[str] = set()

    def size_of(n: str) -> int:
        got = expanded.get(n)
        if got is None:
            expanded[n] = 1  # guards cycles (kept rules are calls: size 1)
            size, refs = _tree_counts(bodies[n], counts)
            got = size + sum(c * (1 if r in keep else size_of(r)) for r, c in refs.items())
            if n not in keep and uses.get(n, 0) > 1 and got > inline_max:
                keep.add(n)
                sized.add(n)
                got = 1
            expanded[n] = got
        return got

    for n in graph:
        size_of(n)
    if regular_only and keep:  # (every rule kept stays referenced from the start's body)
        return None
    memo: dict[str, Node] = {}
    done: dict[int, Node] = {}  # by id: shared sub-nodes are expanded once

    ticks = [0]

    def expand(node: Node) -> Node:
        got = done.get(id(node))
        if got is None:
            ticks[0] += 1
            if deadline is not None and not ticks[0] & 1023 and time.monotonic() > deadline:
                raise TimeLimitExceeded("compile time (s)", limit=0)
            got = done[id(node)] = _expand(node)
        return got

    def _expand(node: Node) -> Node:
        if isinstance(node, RuleRef):
            if node.name in keep:
                return node
            got = memo.get(node.name)
            if got is None:
                got = expand(bodies[node.name])
                memo[node.name] = got
            return got
        if isinstance(node, Seq):
            return seq(*(expand(x) for x in node.items))
        if isinstance(node, Alt):
            return alt(*(expand(x) for x in node.items))
        if isinstance(node, Repeat):
            return rep(expand(node.item), node.min, node.max)
        if isinstance(node, Fields):
            return Fields(
                tuple((expand(x), r) for x, r in node.items),
                expand(node.first), expand(node.sep), expand(node.close_nonempty),
                None if node.close_empty is None else expand(node.close_empty),
                None if node.rest is None else expand(node.rest),
                node.min_count, node.max_count,
            )
        if isinstance(node, Product):
            return Product(expand(node.a), expand(node.b), node.op)
        assert isinstance(node, (ByteSet, Automaton))
        return node

    order = [grammar.start] + sorted(keep - {grammar.start}, key=list(bodies).index)
    out_names: list[str] = []
    out_bodies: list[Node] = []
    for n in order:
        out_names.append(n)
        out_bodies.append(expand(bodies[n]))
    # rules kept but no longer referenced from what remains are dropped
    live = {out_names[0]}
    work = [out_names[0]]
    body_of = dict(zip(out_names, out_bodies))
    while work:
        for r in references(body_of[work.pop()]):
            if r not in live:
                live.add(r)
                work.append(r)
    pairs = [(n, b) for n, b in zip(out_names, out_bodies) if n in live]
    names = tuple(n for n, _ in pairs)
    return ResolvedRules(names, tuple(b for _, b in pairs), frozenset(sized) & frozenset(names))
