"""The languages of subschemas, for the lint rules that reason on the compiler's automata.

A subschema is compiled in the context of its root document (its ``$ref``s resolve there)
by the JSON Schema front end in lenient mode, under small limits. Three questions are asked
of the result: is it empty (:func:`is_empty`: exact, by productivity of the rules with each
intersection/difference decided on its DFA); what regular language approximates it
(:func:`regular_dfa`: exact for a regular grammar; for a recursive one, references widened
to any bytes from above, or unrolled a few levels from below); and what is the shortest
string two DFAs share (:func:`shortest_common`, a breadth-first product construction).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from maskc.compiler.dfa import Dfa
from maskc.compiler.errors import EmptyLanguage, StateLimitExceeded, TimeLimitExceeded
from maskc.compiler.frontends.json_schema import SchemaCompiler
from maskc.compiler.frontends.json_schema.refs import map_refs, productive_rules
from maskc.compiler.ir import EMPTY, NOTHING, Grammar, Node, Product, byte_range, map_nodes, rep
from maskc.compiler.options import CompileOptions, Limits
from maskc.compiler.pipeline import grammar_dfa
from maskc.compiler.rules import ResolvedRules, resolve_rules

__all__ = [
    "ANALYSIS_LIMITS",
    "MAX_PAIRS",
    "UNROLL_DEPTH",
    "Approx",
    "Subschema",
    "analysis_options",
    "compile_subschema",
    "is_empty",
    "regular_dfa",
    "shortest_common",
]

ANALYSIS_LIMITS = Limits(max_states=20_000, max_nfa_states=200_000, max_seconds=5)
"""Limits of one automaton built for an analysis: past them the question is left open."""
MAX_PAIRS = 200_000
"""Most pairs of states one product construction visits."""
UNROLL_DEPTH = 2
"""Levels of recursion kept when a recursive subschema is approximated from below."""

Approx = Literal["exact", "over", "under"]

_ANY_BYTES = rep(byte_range(0, 255), 0, None)
# Representative bytes, best first: the witness reads as plain text where the language allows.
_PREFERRED = (
    b"abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    + bytes(b for b in range(0x21, 0x7F) if not chr(b).isalnum())
    + b" " + bytes(range(0x80, 0x100)) + bytes(range(0x20)) + b"\x7f"
)


def analysis_options(options: CompileOptions) -> CompileOptions:
    """``options`` in lenient mode under :data:`ANALYSIS_LIMITS` (same whitespace and depth)."""
    return replace(options, lenient=True, limits=ANALYSIS_LIMITS)


@dataclass(frozen=True)
class Subschema:
    """A compiled subschema: its grammar and what lenient mode did not enforce in it.

    The language is the set of texts maskc generates for the subschema: an
    over-approximation of its instances where ``not_enforced`` is non-empty.
    """

    pointer: str
    grammar: Grammar
    not_enforced: tuple[dict[str, str], ...]

    @functools.cached_property
    def rules(self) -> ResolvedRules:
        """The grammar's rules after inlining (one rule without references: regular)."""
        return resolve_rules(self.grammar)


class _OneOfAsAnyOf(SchemaCompiler):
    """Reads ``oneOf`` as ``anyOf``: a superset of the language, whatever lenient mode dropped."""

    def union(self, schema: dict[str, Any], kw: str, pointer: str, depth: int) -> Node:
        if kw == "oneOf" and "anyOf" not in schema:
            schema = {("anyOf" if k == "oneOf" else k): v for k, v in schema.items()}
            kw = "anyOf"
        return super().union(schema, kw, pointer, depth)


def compile_subschema(root: Any, pointer: str, options: CompileOptions, schema: Any = None, *,
                      oneof_as_anyof: bool = False) -> Subschema:
    """Compile the subschema at ``pointer`` of ``root`` (or ``schema`` in its place).

    Lenient mode drops what it cannot enforce, which widens a language, except under
    ``oneOf``, whose overlap the compiler removes: a widened branch may remove more than the
    schema does. With ``oneof_as_anyof`` every ``oneOf`` is read as ``anyOf``, so the
    language contains the schema's instances whatever was dropped (an emptiness proof holds).

    Raises:
        EmptyLanguage: the front end already proves the language empty.
        MaskcError: the subschema cannot be compiled (malformed, left recursion, a limit).
        RecursionError: the schema nests too deeply for the front end.
    """
    sc = _OneOfAsAnyOf(root, options) if oneof_as_anyof else SchemaCompiler(root, options)
    grammar = sc.compile_subschema(pointer, schema)
    return Subschema(pointer, grammar, tuple(sc.not_enforced))


def _map_products(node: Node, f: Callable[[Product], Node]) -> Node:
    """``node`` with every :class:`Product` replaced by ``f(product)`` (renormalized)."""
    return map_nodes(node, lambda n: isinstance(n, Product), lambda n: f(n))  # type: ignore[arg-type]


def is_empty(sub: Subschema, options: CompileOptions, deadline: float,
             decided: dict[Node, bool] | None = None) -> bool:
    """Whether no text is in ``sub``'s language (exact, whatever the recursion).

    The rules' productivity (a least fixed point) decides emptiness once each intersection
    or difference, a regular language without references, is decided on its own DFA. Those
    DFAs are built only when the answer depends on them (not when the language is non-empty
    with every product read as empty). ``decided`` memoizes products across calls (empty: True).

    Raises:
        StateLimitExceeded, TimeLimitExceeded: a product's DFA is over the limits.
    """
    memo = decided if decided is not None else {}

    def productive(f: Callable[[Product], Node]) -> bool:
        rules = {name: _map_products(body, f) for name, body in sub.grammar.rules}
        return sub.grammar.start in productive_rules(rules)

    # The compiled grammar is productive with every product read as non-empty (else the
    # front end raised EmptyLanguage); read as empty, it may still be.
    if productive(lambda _p: NOTHING):
        return False
    opts = _deadlined(options, deadline)

    def settle(n: Product) -> Node:
        empty = memo.get(n)
        if empty is None:
            try:
                grammar_dfa(n, opts, deadline=deadline)
                empty = False
            except EmptyLanguage:
                empty = True
            memo[n] = empty
        return NOTHING if empty else EMPTY

    return not productive(settle)


def regular_dfa(sub: Subschema, approx: Approx, options: CompileOptions, deadline: float) -> Dfa:
    """A minimal DFA of ``sub``'s language, or of a regular approximation of it.

    ``exact`` needs a grammar without recursion. ``over`` widens each remaining reference
    to any bytes (a superset: disjoint over-approximations prove disjoint languages);
    ``under`` unrolls the recursion :data:`UNROLL_DEPTH` levels and drops deeper calls (a
    subset: a string it accepts is in the language).

    Raises:
        EmptyLanguage: the (approximated) language is empty.
        ValueError: ``exact`` of a recursive grammar.
        StateLimitExceeded, TimeLimitExceeded: over the limits.
    """
    rules = sub.rules
    body = rules.bodies[0]
    if not rules.regular:
        if approx == "exact":
            raise ValueError(f"the subschema at {sub.pointer or '/'} is recursive: no exact DFA")
        if approx == "over":
            body = map_refs(body, lambda _r: _ANY_BYTES)
        else:
            body = _unroll(rules, min(UNROLL_DEPTH, options.max_depth))
    return grammar_dfa(body, _deadlined(options, deadline), deadline=deadline)


def _unroll(rules: ResolvedRules, depth: int) -> Node:
    bodies = dict(zip(rules.names, rules.bodies))
    memo: dict[tuple[str, int], Node] = {}

    def at(name: str, level: int) -> Node:
        key = (name, level)
        if key not in memo:
            memo[key] = map_refs(bodies[name], lambda r: at(r.name, level - 1) if level > 0 else NOTHING)
        return memo[key]

    return map_refs(rules.bodies[0], lambda r: at(r.name, depth - 1) if depth > 0 else NOTHING)


def _deadlined(options: CompileOptions, deadline: float) -> CompileOptions:
    left = max(deadline - time.monotonic(), 0.001)
    lim = options.limits
    return replace(options, limits=Limits(max_states=lim.max_states, max_nfa_states=lim.max_nfa_states,
                                          max_artifact_bytes=lim.max_artifact_bytes,
                                          max_seconds=min(lim.max_seconds, left)))


def shortest_common(a: Dfa, b: Dfa, *, max_pairs: int = MAX_PAIRS, deadline: float | None = None) -> bytes | None:
    """A shortest byte string both DFAs accept, or None when their languages are disjoint.

    Breadth-first search over the pairs of states reachable from both starts; the
    alphabet is the 256 bytes grouped by their pair of byte classes, each group stepped
    once with its most readable byte, so among strings of the shortest length the witness
    prefers letters and digits.

    Raises:
        StateLimitExceeded: more than ``max_pairs`` pairs were reached without an answer.
        TimeLimitExceeded: ``deadline`` (a ``time.monotonic()`` value) passed.
    """
    if a.accepting[0] and b.accepting[0]:
        return b""
    nb = b.num_states
    joint: dict[tuple[int, int], int] = {}
    for byte in _PREFERRED:
        joint.setdefault((int(a.byte_class[byte]), int(b.byte_class[byte])), byte)
    ca = np.fromiter((k[0] for k in joint), dtype=np.int64, count=len(joint))
    cb = np.fromiter((k[1] for k in joint), dtype=np.int64, count=len(joint))
    rep_byte = np.fromiter(joint.values(), dtype=np.int64, count=len(joint))
    ta, tb = a.trans[:, ca], b.trans[:, cb]  # [states, joint classes]
    seen = np.zeros(1, dtype=np.int64)  # pair ids a * nb + b, sorted
    frontier = np.zeros(1, dtype=np.int64)
    levels: list[tuple[NDArray[np.int64], NDArray[np.int64]]] = []  # (parent index, byte) per level
    while frontier.size:
        if deadline is not None and time.monotonic() > deadline:
            raise TimeLimitExceeded("product construction (s)", limit=ANALYSIS_LIMITS.max_seconds)
        na_ = ta[frontier // nb]  # [frontier, joint]
        nb_ = tb[frontier % nb]
        ok = (na_ >= 0) & (nb_ >= 0)
        parent, col = np.nonzero(ok)  # row-major: parents in order, preferred bytes first
        ids = na_[parent, col].astype(np.int64) * nb + nb_[parent, col]
        _, first = np.unique(ids, return_index=True)
        first.sort()
        ids, parent, col = ids[first], parent[first], col[first]
        fresh = ~np.isin(ids, seen, assume_unique=True)
        ids, parent, col = ids[fresh], parent[fresh], col[fresh]
        levels.append((parent, rep_byte[col]))
        acc = np.flatnonzero(a.accepting[ids // nb] & b.accepting[ids % nb])
        if acc.size:
            return _path(levels, int(acc[0]))
        seen = np.union1d(seen, ids)
        if seen.size > max_pairs:
            raise StateLimitExceeded("product states", limit=max_pairs, got=int(seen.size))
        frontier = ids
    return None


def _path(levels: list[tuple[NDArray[np.int64], NDArray[np.int64]]], index: int) -> bytes:
    out = bytearray()
    for parent, byte in reversed(levels):
        out.append(int(byte[index]))
        index = int(parent[index])
    return bytes(reversed(out))
