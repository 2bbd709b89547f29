"""Rule resolution: which rules stay callable (pushdown frames) and which are inlined."""

from __future__ import annotations

import pytest

from maskc.compiler.ir import EMPTY, Grammar, Node, RuleRef, alt, lit, seq
from maskc.compiler.rules import resolve_rules


def _grammar(b_uses: int, shared: frozenset[str], start_in_cycle: bool = False) -> Grammar:
    """``s ::= "(" A ")"``, ``A ::= "a" B^b_uses | ""``, ``B ::= "[" A "]"`` (A and B on one cycle)."""
    a: Node = alt(seq(lit("a"), *([RuleRef("B")] * b_uses)), EMPTY)
    b: Node = seq(lit("["), RuleRef("s" if start_in_cycle else "A"), lit("]"))
    return Grammar("s", (("s", seq(lit("("), RuleRef("A"), lit(")"))), ("A", a), ("B", b)), shared)


@pytest.mark.parametrize(("b_uses", "shared", "names"), [
    (1, frozenset({"B"}), ("s", "A")),  # shared and used once: its one use gets its body
    (1, frozenset(), ("s", "A", "B")),  # a rule the grammar itself made stays a rule
    (2, frozenset({"B"}), ("s", "A", "B")),  # used twice: one body, called from both
    (1, frozenset({"A", "B"}), ("s", "A")),  # A is entered from s and from B: it stays
])
def test_a_shared_rule_used_once_is_inlined(b_uses: int, shared: frozenset[str], names: tuple[str, ...]) -> None:
    got = resolve_rules(_grammar(b_uses, shared))
    assert got.names == names
    if "B" not in names:  # B's body now sits in A, which calls itself through it
        assert got.bodies[1] == alt(seq(lit("a"), lit("["), RuleRef("A"), lit("]")), EMPTY)


def test_the_start_rule_always_stays() -> None:
    # B calls the start rule; s is referenced once (from B) but is where the grammar begins
    got = resolve_rules(_grammar(1, frozenset({"s", "B"}), start_in_cycle=True))
    assert got.names[0] == "s" and "B" not in got.names


def _grammars() -> list[Grammar]:
    """Grammars whose rules resolve to one regular body or do not: cycles (kept), a rule that
    calls itself at its end or its start (a loop), an acyclic DAG inlined, a large rule used
    twice (kept by its size), a rule the front end made a call, an unused cycle."""
    x, y = RuleRef("X"), RuleRef("Y")
    big = seq(*(lit(c) for c in "abcdefghij"))
    return [
        _grammar(1, frozenset({"B"})),
        _grammar(2, frozenset()),
        Grammar("s", (("s", seq(lit("a"), RuleRef("s"))), )),  # s ::= "a" s (no way out)
        Grammar("s", (("s", alt(seq(lit("a"), RuleRef("s")), lit("b"))),)),  # tail loop: a* b
        Grammar("s", (("s", alt(seq(RuleRef("s"), lit("a")), lit("b"))),)),  # head loop: b a*
        Grammar("s", (("s", seq(x, y, x)), ("X", seq(lit("x"), y)), ("Y", lit("y")))),
        Grammar("s", (("s", seq(x, x)), ("X", big)), inline_max_nodes=5),
        Grammar("s", (("s", seq(x, lit("!"))), ("X", lit("x"))), calls=frozenset({"X"})),
        Grammar("s", (("s", lit("s")), ("X", seq(lit("x"), x)))),
    ]


@pytest.mark.parametrize("k", range(9))
def test_asking_for_regular_rules_only_gives_them_or_none(k: int) -> None:
    """``regular_only``: the same rules where they resolve to one body with no reference
    (regular), None exactly where they do not (a rule stays), before anything is inlined."""
    g = _grammars()[k]
    full = resolve_rules(g)
    got = resolve_rules(g, regular_only=True)
    assert (got is not None) == full.regular
    if got is not None:
        assert got == full
    assert {full.regular for full in map(resolve_rules, _grammars())} == {True, False}
