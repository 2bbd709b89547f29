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
