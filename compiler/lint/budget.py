"""Output length on the compiled automaton: ``max-tokens-budget`` and ``whitespace-runaway``.

The schema is compiled once per lint (:func:`schema_automaton`, shared through
``ctx.shared("automaton")``) in the lint's whitespace policy and nesting bound, leniently and
under :data:`~maskc.compiler.lint.recursion.LINT_LIMITS`. The budget is
:func:`~maskc.compiler.analysis.worst_case_length` in bytes and, for a tokenizer, the longest
path of whole tokens through the DFA (:func:`token_path_bound`); a string ``pattern`` or
``format`` whose only unbounded part is whitespace is compiled on its own and checked for a
loop of whitespace characters.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from maskc.compiler.analysis import LengthBound, worst_case_length
from maskc.compiler.dfa import Dfa
from maskc.compiler.errors import LimitExceeded, MaskcError, TimeLimitExceeded
from maskc.compiler.findings import Finding
from maskc.compiler.frontends.json_schema import schema_to_ir
from maskc.compiler.frontends.json_text import canonical_chars
from maskc.compiler.ir import Grammar, Node, Product, children, lit, seq, star
from maskc.compiler.lint.recursion import LINT_LIMITS
from maskc.compiler.lint.walk import Node as SchemaNode
from maskc.compiler.options import CompileOptions, Limits, Whitespace
from maskc.compiler.pda import Pda, build_pda
from maskc.compiler.pipeline import grammar_dfa, token_table
from maskc.compiler.rules import resolve_rules
from maskc.compiler.spelling import walk_tokens
from maskc.compiler.utf8 import complement
from maskc.compiler.vocab import GreedyEncoder, Vocabulary

__all__ = [
    "FLEXIBLE_WARN_WIDTH",
    "SchemaAutomaton",
    "budget_findings",
    "compile_automaton",
    "longest_output",
    "token_path_bound",
    "whitespace_findings",
]

FLEXIBLE_WARN_WIDTH = 16
"""``flexible:N`` above this is reported (info): runs that long are no layout a reader needs
(eight levels of two-space indentation), only room for a model to idle in."""

TOKEN_DP_WORK = 50_000_000
"""Most (states x tokens) the exact token-path bound may cost; past it the byte bound stands."""

BEST_SPELLING_BYTES = 20_000
"""Longest output whose fewest-token spelling is computed (a dynamic programme per byte)."""

PDA_BOUND_WORK = 2_000_000
"""Most (states x max_depth) the pushdown worst case may cost in lint."""

IR_TREE_NODES = 500_000
"""Most IR nodes, counted as a tree (shared subtrees once per use), lint compiles: rule
resolution walks the grammar as a tree, with no deadline, so a schema whose definitions are
reused many times over (JSON Schema Store's travis.json: 10.7 million) is skipped."""

# ECMA-262 \s: what a pattern's \s admits and what a model idles on.
WHITESPACE = [(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
              (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)]
_NO_WS_STRING: Node = seq(lit('"'), star(canonical_chars(complement(WHITESPACE))), lit('"'))
_SHORT = {0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"}


@dataclass(frozen=True, slots=True)
class SchemaAutomaton:
    """The schema compiled as lint sees it.

    Attributes:
        automaton: The DFA (regular schema) or pushdown automaton; None when compiling failed.
        bound: Its worst-case length, or None when not computed.
        max_depth: The nesting bound of a pushdown automaton (None for a DFA).
        error: Why there is no automaton or bound (a limit, an invalid schema), or None.
    """

    automaton: Dfa | Pda | None
    bound: LengthBound | None
    max_depth: int | None = None
    error: MaskcError | None = None


def compile_automaton(schema: Any, options: CompileOptions, grammar: Grammar | None = None, *,
                      limits: Limits = LINT_LIMITS) -> SchemaAutomaton:
    """Compile ``schema`` leniently and bound its output length.

    The front end runs under ``options``' limits (they decide what it refuses), the automaton
    under ``limits``. ``grammar``: the front end's output when already at hand.
    Never raises a :class:`MaskcError`: it is returned in ``error``.
    """
    opts = replace(options, lenient=True, limits=limits)
    deadline = time.monotonic() + limits.max_seconds
    try:
        if grammar is None:
            grammar, _ = schema_to_ir(schema, replace(options, lenient=True))
        size = _tree_size([body for _, body in grammar.rules], IR_TREE_NODES)
        if size > IR_TREE_NODES:
            raise LimitExceeded("grammar size (IR nodes, as a tree)", limit=IR_TREE_NODES, got=size)
        rules = resolve_rules(grammar)
        if rules.regular:
            dfa = grammar_dfa(rules.bodies[0], opts, deadline=deadline)
            return SchemaAutomaton(dfa, worst_case_length(dfa))
        pda = build_pda(rules, opts, deadline=deadline)
        if pda.num_states * opts.max_depth > PDA_BOUND_WORK:
            return SchemaAutomaton(pda, None, opts.max_depth)
        return SchemaAutomaton(pda, worst_case_length(pda, opts.max_depth), opts.max_depth)
    except TimeLimitExceeded:
        # the stages report the bare deadline; name the limit as the pipeline does
        return SchemaAutomaton(None, None, error=TimeLimitExceeded("compile time (s)", limit=limits.max_seconds))
    except MaskcError as e:
        return SchemaAutomaton(None, None, error=e)
    except RecursionError:
        return SchemaAutomaton(None, None)


def _tree_size(roots: list[Node], cap: int) -> int:
    """Nodes of ``roots`` counted as trees (a shared node once per use), exact up to ``cap``
    and some value above it past that; linear in the distinct nodes."""
    memo: dict[int, int] = {}
    stack: list[tuple[Node, bool]] = [(r, False) for r in roots]
    while stack:
        n, done = stack.pop()
        if id(n) in memo:
            continue
        kids = children(n)
        if done or not kids:
            memo[id(n)] = min(1 + sum(memo[id(k)] for k in kids), cap + 1)
            continue
        stack.append((n, True))
        stack.extend((k, False) for k in kids if id(k) not in memo)
    return min(sum(memo[id(r)] for r in roots), cap + 1)


def _class_bytes(dfa: Dfa) -> dict[int, int]:
    """One byte per class, printable ASCII first (a readable witness)."""
    rep: dict[int, int] = {}
    for b in [*range(0x20, 0x7F), *range(0x00, 0x20), *range(0x7F, 0x100)]:
        rep.setdefault(int(dfa.byte_class[b]), b)
    return rep


def longest_output(dfa: Dfa, bound: LengthBound) -> bytes:
    """One output of the bounded ``dfa`` of the greatest length (``bound.max_bytes`` bytes):
    from the start, always a step to a state with one byte less still to come."""
    if bound.max_bytes is None:
        raise ValueError("the DFA's outputs are unbounded: there is no longest one")
    rep = _class_bytes(dfa)
    rem = bound.remaining
    out = bytearray()
    q = 0
    while int(rem[q]) > 0:
        row = dfa.trans[q]
        c = next(c for c, t in enumerate(row.tolist()) if t >= 0 and int(rem[t]) == int(rem[q]) - 1)
        out.append(rep[c])
        q = int(row[c])
    return bytes(out)


def token_path_bound(dfa: Dfa, bound: LengthBound, vocab: Vocabulary) -> tuple[int, bool]:
    """The most tokens a generation constrained by the bounded ``dfa`` can emit before EOS.

    Every output is a path of whole tokens through the DFA, each token allowed where it is
    taken (alignment allows a token iff its bytes walk without dying), so the longest token
    path bounds every constrained generation; it is at most the byte bound, and equal to it
    when every byte the DFA moves on is a one-byte token (byte-level BPE, byte fallback).
    Otherwise a dynamic programme over states in increasing ``remaining`` order (the DFA is
    acyclic) walks each state's candidate tokens.

    Returns:
        ``(tokens, exact)``: ``exact`` False when the programme would cost more than
        :data:`TOKEN_DP_WORK` and the byte bound is returned instead (still an upper bound);
        ``tokens`` is -1 when no token path reaches the end at all.
    """
    if bound.max_bytes is None:
        raise ValueError("the DFA's outputs are unbounded")
    table = token_table(vocab)
    lens = np.diff(table.offsets)
    ids = np.flatnonzero(table.walkable)
    classes = dfa.byte_class.astype(np.int64)
    single = ids[lens[ids] == 1]
    have = np.zeros(dfa.num_classes, dtype=np.bool_)
    have[classes[table.flat[table.offsets[single]]]] = True
    used = (dfa.trans >= 0).any(axis=0)
    if bool(have[used].all()):
        return bound.max_bytes, True
    if dfa.num_states * ids.size > TOKEN_DP_WORK:
        return bound.max_bytes, False
    first = table.flat[table.offsets[ids]].astype(np.int64)
    best = np.full(dfa.num_states, -1, dtype=np.int64)
    for q in np.argsort(bound.remaining, kind="stable").tolist():
        moves = dfa.trans[q][classes] >= 0  # per byte
        cand = ids[moves[first]]
        ends = walk_tokens(dfa, table, q, cand)
        got = best[ends[ends >= 0]]
        got = got[got >= 0]
        b = int(got.max()) + 1 if got.size else -1
        best[q] = max(b, 0) if dfa.accepting[q] else b
    return int(best[0]), True


def budget_findings(found: SchemaAutomaton, vocab: Vocabulary | None) -> list[Finding]:
    """The ``max-tokens-budget`` finding of a bounded schema (none when unbounded: the
    termination and ``unbounded-*`` rules report that)."""
    bound = found.bound
    if found.automaton is None or bound is None:
        if isinstance(found.error, LimitExceeded) or (found.automaton is not None and bound is None):
            why = str(found.error.message) if found.error is not None else "the pushdown automaton is too large"
            return [Finding(rule="max-tokens-budget", severity="info", pointer="",
                            message=f"no token budget computed: {why} (lint's limits)",
                            data={"skipped": True})]
        return []
    if bound.max_bytes is None:
        return []
    nbytes = bound.max_bytes
    data: dict[str, Any] = {"max_bytes": nbytes, "max_tokens": nbytes + 1}
    depth = ""
    if found.max_depth is not None:
        data["max_depth"] = found.max_depth
        depth = f" (nesting bounded at max_depth={found.max_depth})"
    witness: bytes | None = None
    if isinstance(found.automaton, Dfa):
        witness = longest_output(found.automaton, bound)
    msg = f"the longest output is {nbytes:,} bytes{depth}"
    if vocab is None:
        msg += f": max_tokens={nbytes + 1:,} always suffices (one byte per token, plus EOS)"
    else:
        data["tokenizer"] = vocab.name
        tokens, exact = nbytes, False
        if isinstance(found.automaton, Dfa):
            tokens, exact = token_path_bound(found.automaton, bound, vocab)
        data["token_path"] = tokens if exact else None
        if tokens >= 0:
            data["max_tokens"] = tokens + 1
            msg += (f"; with tokenizer '{vocab.name}' a constrained generation emits at most {tokens:,} "
                    f"tokens before EOS: set max_tokens to {tokens + 1:,}")
        if witness is not None and len(witness) <= BEST_SPELLING_BYTES:
            best = _fewest_tokens(witness, vocab)
            if best is not None:
                data["best_tokens"] = best
                msg += f" (its best spelling of a longest output takes {best:,} tokens)"
    shown = None
    if witness is not None and len(witness) <= 400:
        shown = witness.decode("utf-8", "backslashreplace")
    return [Finding(rule="max-tokens-budget", severity="info", pointer="", message=msg, witness=shown, data=data)]


def _fewest_tokens(data: bytes, vocab: Vocabulary) -> int | None:
    try:
        text = data.decode("utf-8")
        return len(GreedyEncoder(vocab.token_bytes, vocab.special_ids)(text))
    except (UnicodeDecodeError, MaskcError):
        return None


# -- whitespace-runaway ---------------------------------------------------------------------


def _whitespace_units() -> list[bytes]:
    """Every JSON spelling of a whitespace character: canonical, and as a \\u escape."""
    units: set[bytes] = set()
    for lo, hi in WHITESPACE:
        for c in range(lo, hi + 1):
            units.add(_SHORT[c].encode() if c in _SHORT else chr(c).encode() if c >= 0x20 else b"")
            units.add(b"\\u%04x" % c)
            units.add(b"\\u%04X" % c)
    units.discard(b"")
    return sorted(units)


_UNITS = _whitespace_units()


# What a pattern needs in its text to match a whitespace character at all.
_WS_SYNTAX = (r"\s", ".", "[^", r"\W", r"\D", r"\t", r"\n", r"\r", r"\v", r"\f", r"\u", r"\x", r"\p", r"\P",
              r"\0", r"\c")


def _may_idle(s: dict[str, Any]) -> bool:
    """Whether a string schema's ``pattern`` might be unbounded only through whitespace.

    A cheap filter before compiling: ``maxLength`` bounds the string; an unanchored pattern
    (searched for, so ``.*`` on either side) has loops of every character; a pattern that
    cannot match whitespace (no ``\\s``, ``.``, negated class, escape, space, control or
    non-ASCII character in its text) has no whitespace loop. ``format`` alone never fires:
    maskc's format regexes admit no whitespace.
    """
    t = s.get("type")
    if "enum" in s or "const" in s or "maxLength" in s:
        return False
    if not (t is None or t == "string" or (isinstance(t, list) and "string" in t)):
        return False
    p = s.get("pattern")
    if not isinstance(p, str) or not (p.startswith("^") and p.endswith("$")):
        return False
    return any(x in p for x in _WS_SYNTAX) or any(c.isspace() or not 0x20 <= ord(c) < 0x7F for c in p)


def whitespace_findings(nodes: list[SchemaNode], options: CompileOptions) -> list[Finding]:
    """``whitespace-runaway``: string patterns unbounded only through whitespace, and a
    ``flexible`` policy wider than :data:`FLEXIBLE_WARN_WIDTH` (info)."""
    out: list[Finding] = []
    ws = options.whitespace
    if ws.mode == "flexible" and ws.n > FLEXIBLE_WARN_WIDTH:
        out.append(Finding(
            rule="whitespace-runaway", severity="info", pointer="",
            message=f"whitespace policy {ws} admits runs of up to {ws.n} whitespace bytes at every "
                    "insignificant position: room for a model to idle",
            hint=f"use compact, pretty, or flexible:N with N <= {FLEXIBLE_WARN_WIDTH}",
            data={"whitespace": str(ws)}))
    seen: dict[str, tuple[bytes, bytes] | None] = {}
    for node in nodes:
        s = node.schema
        if not isinstance(s, dict) or not _may_idle(s):
            continue
        mini = {"type": "string", **{k: s[k] for k in ("pattern", "format", "minLength") if k in s}}
        key = json.dumps(mini, sort_keys=True)
        if key not in seen:
            seen[key] = _whitespace_loop(mini)
        got = seen[key]
        if got is not None:
            prefix, loop = (x.decode("utf-8", "backslashreplace") for x in got)
            out.append(Finding(
                rule="whitespace-runaway", severity="warning", pointer=node.pointer,
                message=f"this string's pattern is unbounded only through whitespace: a model can "
                        f"repeat {loop!r} without end",
                witness=prefix + loop * 3, data={"prefix": prefix, "loop": loop}))
    return out


def _whitespace_loop(mini: dict[str, Any]) -> tuple[bytes, bytes] | None:
    """(prefix, loop) when the string's language is unbounded, bounded once whitespace is
    taken out, and has a loop made of whitespace characters only."""
    opts = CompileOptions(Whitespace("compact"), lenient=True, limits=LINT_LIMITS)
    try:
        grammar, _ = schema_to_ir(mini, opts)
        dfa = grammar_dfa(grammar.body, opts)
    except MaskcError:
        return None
    if worst_case_length(dfa).bounded:
        return None
    try:
        no_ws = grammar_dfa(Product(grammar.body, _NO_WS_STRING, "and"), opts)
        if not worst_case_length(no_ws).bounded:
            return None
    except LimitExceeded:
        return None
    except MaskcError:
        pass  # no output without whitespace: every loop is whitespace
    return _unit_loop(dfa)


def _unit_loop(dfa: Dfa) -> tuple[bytes, bytes] | None:
    """A shortest byte prefix to a loop of whitespace units, and the loop's bytes.

    States are trimmed until each kept one has a unit successor and a unit predecessor among
    the kept (greenery's live-state trimming); then walking kept successors must repeat one.
    """
    succ: dict[int, list[tuple[int, bytes]]] = {}
    for q in range(dfa.num_states):
        for u in _UNITS:
            t = dfa.walk(q, u)
            if t >= 0:
                succ.setdefault(q, []).append((t, u))
    keep = set(succ)
    while True:
        has_pred = {t for q in keep for t, _ in succ[q] if t in keep}
        now = {q for q in keep if q in has_pred and any(t in keep for t, _ in succ[q])}
        if now == keep:
            break
        keep = now
    if not keep:
        return None
    prefix, q = _shortest_prefix(dfa, keep)
    seen: dict[int, int] = {q: 0}
    units: list[bytes] = []
    while True:
        q, u = next((t, u) for t, u in succ[q] if t in keep)
        units.append(u)
        if q in seen:
            cut = seen[q]
            return prefix + b"".join(units[:cut]), b"".join(units[cut:])
        seen[q] = len(units)


def _shortest_prefix(dfa: Dfa, goal: set[int]) -> tuple[bytes, int]:
    rep = _class_bytes(dfa)
    prev: dict[int, tuple[int, int]] = {0: (-1, -1)}
    queue = [0]
    i = 0
    while i < len(queue):
        q = queue[i]
        i += 1
        if q in goal:
            out = bytearray()
            s = q
            while prev[s][0] >= 0:
                s, c = prev[s]
                out.append(rep[c])
            return bytes(reversed(out)), q
        for c, t in enumerate(dfa.trans[q].tolist()):
            if t >= 0 and t not in prev:
                prev[t] = (q, c)
                queue.append(t)
    raise ValueError("no state of the loop is reachable")  # a pruned DFA reaches every state
