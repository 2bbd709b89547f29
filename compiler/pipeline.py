"""The compile pipeline: front end -> grammar IR -> rules -> automaton -> token masks.

The only module that knows the order of the stages. A grammar whose rules are not
recursive is inlined into one expression and takes the regular path (NFA -> DFA -> minimal
DFA -> a mask per state); a recursive one becomes a pushdown automaton (one minimized DFA
per rule with call edges) with an accepted and an uncertain mask per state. It times each
stage and returns a :class:`CompiledGrammar`: plain arrays plus the facts an artifact records.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, NamedTuple

import numpy as np
import orjson
from numpy.typing import NDArray

from maskc.compiler.align import SharedShortTokens, ShortWalks, TokenTable, align
from maskc.compiler.align_pda import align_pda
from maskc.compiler.collector import fewer_full_collections
from maskc.compiler.hugepages import no_huge_pages
from maskc.compiler.pda import Pda, build_pda
from maskc.compiler.rules import ResolvedRules, references, resolve_rules
from maskc.compiler.counters import finish, with_exits
from maskc.compiler.dfa import CounterConflict, Dfa, compress_classes, coreachable, determinize, determinize_counted, prune
from maskc.compiler.errors import (EmptyLanguage, MaskcError, MemoryLimitExceeded, NonTerminating, SchemaError,
                                  StateLimitExceeded, TimeLimitExceeded)
from maskc.compiler.frontends.json_schema.refs import ONEOF_ANY_DEPTH
from maskc.compiler.frontends.registry import frontend, grammar_sha256
from maskc.compiler.ir import Grammar, Node
from maskc.compiler.maskstore import MaskStore, MaskStoreBuilder
from maskc.compiler.minimize import minimize
from maskc.compiler.nfa import HorizonQuestion, ItemReach, item_reach, lower, recording_horizon, same_horizon_answers
from maskc.compiler.options import CompileOptions, Limits
from maskc.compiler.spelling import prove_spellable, prove_start_spellable
from maskc.compiler.product import operand_state_cap
from maskc.compiler.vocab import Vocabulary

__all__ = ["CompiledGrammar", "compile_ir", "compile_grammar", "compile_source", "compile_json_schema", "compile_regex",
           "compile_choice", "compile_gbnf", "token_table", "grammar_dfa", "source_of", "sharing_automata"]

Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class CompiledGrammar:
    """A grammar compiled for one tokenizer: the DFA, a mask per state, and provenance."""

    kind: str
    source: str
    dfa: Dfa
    state_mask: NDArray[np.int32]
    masks: MaskStore
    options: CompileOptions
    not_enforced: list[dict[str, str]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    pda: Pda | None = None  # recursive grammars: rules and call edges (``dfa`` is ``pda.dfa``)
    uncertain_mask: NDArray[np.int32] | None = None  # per state: tokens the live stack decides
    flat_mask: NDArray[np.int32] | None = None  # per state: accepted tokens that make no call
    inline_depth: int = 0

    @property
    def source_sha256(self) -> str:
        return grammar_sha256(self.kind, self.source)


COUNTED_LOOPS = True
"""Whether regular grammars get counted loops (:mod:`maskc.compiler.counters`); off, every
bounded repetition is unrolled into copies (same language, larger and slower to build)."""


MAX_RECOUNTS = 4
"""Lowerings that unroll the loops a counter conflict named, before every loop is unrolled."""


@dataclass(slots=True)
class _Shared:
    """What a compile leaves for the next one of the same source and options: the front end's
    output, the questions it asked the vocabulary (with the answers) and the automaton (for
    a recursive grammar, its rules and pushdown automaton), or what building them raised."""

    key: tuple[str, str, str]  # (kind, canonical source text, options)
    asked: list[tuple[tuple[bytes, int], int]]
    grammar: Grammar | None  # None: the front end ran out of time
    not_enforced: list[dict[str, str]]
    rules: ResolvedRules | None = None
    pda: Pda | None = None
    refused: MaskcError | None = None  # what building the automaton raised (a limit or the clock)
    walks: ShortWalks | None = None  # the short tokens of the block's tokenizers, walked once for all
    # A regular grammar: the questions its lowering put to the horizon and the vocabulary,
    # and the automaton (or what building it raised, a time-out included) they led to.
    horizon_asked: list[HorizonQuestion] | None = None
    dfa: Dfa | MaskcError | None = None


_SHARED: ContextVar[list[_Shared] | None] = ContextVar("maskc_shared_automata", default=None)
# the tokenizers of the current block (:func:`sharing_automata`), where there are several
_SHORT: ContextVar[tuple[Vocabulary, ...] | None] = ContextVar("maskc_shared_short_tokens", default=None)
_SHORT_TABLES: dict[tuple[str, ...], SharedShortTokens] = {}  # per set of tokenizers: the last one built

FIRST_FORM_NFA_STATES = 2
"""NFA states per DFA state allowed (``Limits.max_states``) when a grammar is first lowered
where its front end has other forms to fall back on (:func:`compile_source`). No first form
the MaskBench slice compiles lowers to more than 1.3 of them; those over 2 never came within
the DFA limit there, and lowering millions of NFA states to learn it took seconds. The limit
only orders the tries: where no other form compiles, the first is lowered again within
``Limits.max_nfa_states``, so what compiles is what compiled without it."""

_NFA_BUDGET: ContextVar[int | None] = ContextVar("maskc_first_form_nfa_states", default=None)


def _nfa_limit(limits: Limits) -> int:
    """The NFA limit of the lowering now running: ``limits``', or a first try's below it."""
    budget = _NFA_BUDGET.get()
    return limits.max_nfa_states if budget is None else min(budget, limits.max_nfa_states)


def _shared_short_tokens(vocabs: Sequence[Vocabulary]) -> SharedShortTokens:
    """The short tokens of ``vocabs`` as one table (:class:`~maskc.compiler.align.SharedShortTokens`),
    built once per process for the last set of tokenizers asked."""
    by_print = {v.fingerprint: v for v in vocabs}
    key = tuple(sorted(by_print))
    got = _SHORT_TABLES.get(key)
    if got is None:
        got = SharedShortTokens([token_table(by_print[f]) for f in key])
        _SHORT_TABLES.clear()
        _SHORT_TABLES[key] = got
    return got


def _short_walks() -> ShortWalks | None:
    """A fresh record of shared walks for the block's tokenizers (their table built on first use)."""
    vocabs = _SHORT.get()
    if vocabs is None:
        return None
    return ShortWalks(lambda: _shared_short_tokens(vocabs))


@contextmanager
def sharing_automata(vocabs: Sequence[Vocabulary] = ()) -> Iterator[None]:
    """Compiles in this block reuse the previous one's tokenizer-independent work: a compile
    of the same source with the same options, for another tokenizer, skips the front end and,
    for a recursive grammar, the rules and the pushdown automaton (lowering, subset
    construction, minimization), and only aligns them with its own vocabulary.

    Exact: the front end reads nothing of the vocabulary but its answers to
    :func:`~maskc.compiler.nfa.item_reach` questions, which are recorded and asked again of
    the new vocabulary (any different answer: the compile starts over), and the pushdown
    automaton is built from the grammar and the options alone. A regular grammar's
    automaton is shared where the new vocabulary answers alike every question its lowering
    asked (how many items one token completes, for each counted loop it planned:
    :func:`~maskc.compiler.nfa.recording_horizon`); the questions depend on the longest token,
    so a vocabulary with other answers builds its own.

    A shared stage's outcome is shared too: a limit it hit, and the clock. Where the front end
    or the automaton ran out of time, the next compile would run the same steps again with
    the same budget (at most the skipped stages' seconds more), so it reports the time-out
    rather than spend it a second time. ``maskc compile`` runs each input's tokenizers one
    after the other in such a block.

    ``vocabs``: the tokenizers the block compiles for. Given two or more, the walks of their
    short tokens are shared too: each automaton's states are walked once over the trie of
    all their distinct short tokens (:class:`~maskc.compiler.align.SharedShortTokens`), and each tokenizer's
    alignment reads its own tokens out of the walks the first one made. The masks are the
    same (a token's fate depends on its bytes alone); the first compile walks a somewhat
    larger trie, the next ones none. And their compiles plan counted loops alike, for the
    longest token among them and the most items any of their tokens completes
    (:func:`_planning`): all answer the lowering's questions alike, so they share the front
    end, the automaton and its walks. A loop is exact for a tokenizer whose tokens reach
    no further than it keeps from its bounds, so each tokenizer's masks are those of its
    own plan, at every step; a tokenizer with shorter tokens than another of the block gets
    more copies beside its loops than compiled alone (a different artifact, the same masks).
    The same tokenizers compiled together always plan alike.
    """
    token = _SHARED.set([])
    short = _SHORT.set(tuple(vocabs) if len({v.fingerprint for v in vocabs}) > 1 else None)
    try:
        yield
    finally:
        _SHORT.reset(short)
        _SHARED.reset(token)


def _recalled(slot: list[_Shared] | None, key: tuple[str, str, str], table: TokenTable) -> _Shared | None:
    """The previous compile's work, where it is the same source and options, and ``table``
    answers its front end's questions alike."""
    prev = next((entry for entry in slot or () if entry.key == key), None)
    if prev is None:
        return None
    reach = _planning(table).reach
    return prev if all(reach(*q) == a for q, a in prev.asked) else None


def token_table(vocab: Vocabulary) -> TokenTable:
    """The arrays of ``vocab`` that alignment needs (built once per vocabulary object)."""
    cached: TokenTable | None = vocab.__dict__.get("_maskc_token_table")
    if cached is not None:
        return cached
    table = _token_table(vocab)
    vocab.__dict__["_maskc_token_table"] = table
    return table


def _token_table(vocab: Vocabulary) -> TokenTable:
    flat, offsets = vocab.flat()
    walkable = np.diff(offsets) > 0
    if vocab.special_ids:
        walkable[np.fromiter(vocab.special_ids, dtype=np.int64)] = False
    return TokenTable(flat, offsets, walkable, tuple(vocab.eos_ids), vocab.vocab_size)


class _Planning(NamedTuple):
    """What counted repeats are planned for: the longest token (None: no counted loops) and
    how many items one token can complete (:data:`~maskc.compiler.nfa.ItemReach`)."""

    horizon: int | None
    reach: ItemReach


def _planning(table: TokenTable) -> _Planning:
    """What a compile for ``table`` plans counted repeats for: its own longest token and
    items reach, or, within a :func:`sharing_automata` block of several tokenizers that holds
    it, the largest of theirs (each question answered by the tokenizer that reaches
    furthest). A loop keeps at least what any of them can reach from a bound, so it is exact
    for each, and they all plan alike: one front end and one automaton for the block."""
    own = _Planning(table.longest if COUNTED_LOOPS else None, table.items_reach)
    vocabs = _SHORT.get()
    if not vocabs:
        return own
    tables = [token_table(v) for v in vocabs]
    if not any(t is table for t in tables):
        return own
    longest = max(t.longest for t in tables)

    def reach(completing: bytes, shortest: int) -> int:
        return max(t.items_reach(completing, shortest) for t in tables)

    return _Planning(longest if COUNTED_LOOPS else None, reach)


def grammar_dfa(
    node: Node, options: CompileOptions, timings: dict[str, float] | None = None, *, deadline: float | None = None,
    horizon: int | None = None,
) -> Dfa:
    """IR -> pruned, minimized, class-compressed DFA.

    ``horizon`` (the most bytes a token has) turns bounded repetitions far longer than a
    token into counted loops (:mod:`maskc.compiler.counters`); where a count could be
    ambiguous the grammar is lowered again with copies for the loops involved (all of them
    after :data:`MAX_RECOUNTS` tries). None: copies only.
    """
    t = timings if timings is not None else {}
    lim = options.limits
    if deadline is None:
        deadline = time.monotonic() + lim.max_seconds
    t0 = time.perf_counter()
    nfa = lower(node, max_states=_nfa_limit(lim), deadline=deadline, horizon=horizon)
    t1 = time.perf_counter()
    dfa: Dfa | None = None
    uncounted: set[int] = set()
    while nfa.regions:
        try:
            parts = determinize_counted(nfa, max_states=lim.max_states, deadline=deadline)
            t2 = time.perf_counter()
            dfa = compress_classes(finish(*parts, [r.span for r in nfa.regions], deadline=deadline,
                                                 parent=[r.parent for r in nfa.regions]))
            break
        except CounterConflict as e:
            # The loops whose counts are ambiguous are unrolled, the others still count (the
            # digits of an integer range beside a long string: only the digits unroll).
            t["counter_conflict"] = t.get("counter_conflict", 0.0) + 1.0
            blamed = {id(nfa.regions[k].node) for k in e.regions}
            if not blamed or blamed <= uncounted or t["counter_conflict"] > MAX_RECOUNTS:
                nfa = lower(node, max_states=_nfa_limit(lim), deadline=deadline)
            else:
                uncounted |= blamed
                nfa = lower(node, max_states=_nfa_limit(lim), deadline=deadline, horizon=horizon,
                            uncounted=frozenset(uncounted))
            t1 = time.perf_counter()
    if dfa is None:
        dfa = determinize(nfa, max_states=lim.max_states, deadline=deadline)
        t2 = time.perf_counter()
        dfa = compress_classes(minimize(prune(dfa), deadline=deadline))
    t3 = time.perf_counter()
    t.update(nfa_ms=(t1 - t0) * 1e3, dfa_ms=(t2 - t1) * 1e3, minimize_ms=(t3 - t2) * 1e3)
    if dfa.num_states > lim.max_states:
        raise StateLimitExceeded("DFA states", limit=lim.max_states, got=dfa.num_states)
    prove_termination(dfa)
    return dfa


def prove_termination(dfa: Dfa) -> None:
    """Every reachable state can still reach acceptance, so EOS stays reachable.

    Pruning establishes this; it is checked here as the compile's post-condition.

    Raises:
        NonTerminating: with a shortest prefix that leads to a state that cannot finish.
    """
    trans = with_exits(dfa)
    live = coreachable(trans, dfa.accepting)
    if bool(live.all()):
        return
    # BFS for a witness prefix (never reached on a pruned DFA).
    prev: dict[int, tuple[int, int]] = {0: (-1, -1)}
    queue = [0]
    inverse = {int(c): b for b, c in reversed(list(enumerate(dfa.byte_class.tolist())))}
    while queue:
        s = queue.pop(0)
        if not live[s]:
            path = bytearray()
            while prev[s][0] >= 0:
                s, c = prev[s]
                path.append(inverse[c])
            raise NonTerminating("a reachable state cannot reach the end of the grammar", witness=bytes(reversed(path)))
        for c, t in enumerate(trans[s].tolist()):
            if t >= 0 and t not in prev:
                prev[t] = (s, c)
                queue.append(t)


@fewer_full_collections()  # (a compile frees by reference counts: see collector.py)
@no_huge_pages()  # (no stalls on compaction: see hugepages.py)
def compile_ir(
    kind: str,
    source: str,
    node: Node,
    vocab: Vocabulary,
    options: CompileOptions,
    *,
    not_enforced: list[dict[str, str]] | None = None,
    progress: Progress | None = None,
    timings: dict[str, float] | None = None,
    deadline: float | None = None,
    shared: _Shared | None = None,
) -> CompiledGrammar:
    """Compile IR for ``vocab``: automaton stages, then alignment and the mask store.
    ``deadline`` (``time.monotonic()``; default: ``max_seconds`` from now) is the whole
    compile's, front end included where the caller started it earlier. ``shared`` (see
    :func:`compile_grammar`): the automaton is taken from it where the vocabulary answers
    its lowering's questions alike, and left there otherwise."""
    t = timings if timings is not None else {}
    start = time.perf_counter()
    if deadline is None:
        deadline = time.monotonic() + options.limits.max_seconds
    try:
        table = token_table(vocab)
        dfa = _regular_dfa(node, options, t, deadline, table, shared)
        builder = MaskStoreBuilder(vocab.vocab_size)
        t0 = time.perf_counter()
        state_mask = align(dfa, table, add_mask=builder.add, progress=progress, deadline=deadline,
                           walks=_walks_for(shared, dfa, table))
    except TimeLimitExceeded as e:
        raise _timed_out(e, options.limits.max_seconds) from None
    t["align_ms"] = (time.perf_counter() - t0) * 1e3
    masks = builder.build()
    t1 = time.perf_counter()
    prove_spellable(dfa, state_mask, masks, table, tokenizer=vocab.name)
    t["spell_ms"] = (time.perf_counter() - t1) * 1e3
    t["total_ms"] = (time.perf_counter() - start) * 1e3
    return CompiledGrammar(
        kind=kind,
        source=source,
        dfa=dfa,
        state_mask=state_mask,
        masks=masks,
        options=options,
        not_enforced=list(not_enforced or []),
        timings=t,
    )


def _walks_for(shared: _Shared | None, dfa: Dfa, table: TokenTable) -> ShortWalks | None:
    """The shared walks (:class:`~maskc.compiler.align.ShortWalks`) for aligning the regular
    automaton ``dfa`` with ``table``'s vocabulary, where another of the block's tokenizers
    aligns the same automaton: it was taken from ``shared``, or another tokenizer answers
    its lowering's questions alike and will take it. Else None: the vocabulary's own trie
    is smaller than all the tokenizers' together, and no walk would be shared."""
    if shared is None or shared.walks is None or shared.dfa is not dfa or shared.horizon_asked is None:
        return None
    vocabs = _SHORT.get() or ()
    mine = _planning(table).horizon
    for v in vocabs:
        other = token_table(v)
        if other is table:
            continue
        horizon, reach = _planning(other)
        with item_reach(reach):
            if horizon == mine or same_horizon_answers(shared.horizon_asked, horizon):
                return shared.walks
    return None


def _shared_time_out(limit: float) -> TimeLimitExceeded:
    """What a compile raises whose tokenizer-independent work ran out of time in the
    previous compile of the same input."""
    return TimeLimitExceeded(
        "compile time (s)", limit=limit,
        hint="this input's automaton, which its tokenizers share, ran out of time in the compile for the "
             "previous tokenizer and is not built again; simplify the schema (smaller maxLength/maxItems, fewer "
             "alternatives) or raise --max-seconds (Limits.max_seconds)")


def _failure(error: MaskcError | MemoryError) -> MaskcError:
    """What a shared stage raised, as the error its next compile reports: an allocation that
    failed is a :class:`MemoryLimitExceeded`.

    Without the frames it was raised through: they hold the failed stage's work (an
    automaton of millions of small objects), kept for the input's next tokenizer otherwise.
    The handler that raises it again must not keep it in a local either (``del`` it in a
    ``finally``): its frame would lie on the traceback, a reference cycle that only a full
    pass of the cycle collector frees (a second or more, at a time of its choosing)."""
    return (error if isinstance(error, MaskcError) else MemoryLimitExceeded(None)).with_traceback(None)


def _shared_failure(error: MaskcError, limit: float) -> MaskcError:
    """What a compile raises whose shared automaton failed in the previous compile of the
    same input: the same error, a time-out or memory exhaustion saying it was not run again."""
    if isinstance(error, TimeLimitExceeded):
        return _shared_time_out(limit)
    if isinstance(error, MemoryLimitExceeded):
        return MemoryLimitExceeded(None, shared=True)
    return error


def _regular_dfa(node: Node, options: CompileOptions, t: dict[str, float], deadline: float, table: TokenTable,
                 shared: _Shared | None) -> Dfa:
    """:func:`grammar_dfa` for ``table``'s vocabulary, or the shared one where the previous
    compile's lowering asked nothing this vocabulary answers otherwise."""
    horizon, reach = _planning(table)
    with item_reach(reach):
        if shared is not None and shared.dfa is not None and shared.horizon_asked is not None \
                and same_horizon_answers(shared.horizon_asked, horizon):
            t["shared_automaton"] = 1.0
            if isinstance(shared.dfa, MaskcError):
                raise _shared_failure(shared.dfa, options.limits.max_seconds)
            return shared.dfa
        asked: list[HorizonQuestion] = []
        try:
            with recording_horizon(asked):
                dfa = grammar_dfa(node, options, t, deadline=deadline, horizon=horizon)
        except (MaskcError, MemoryError) as e:  # (a time-out too: the questions so far lead to the same work)
            failure = _failure(e)
            if shared is not None:
                shared.horizon_asked, shared.dfa = asked, failure
            try:
                raise failure from None
            finally:
                del failure  # (no cycle through this frame: see _failure)
    if shared is not None:
        shared.horizon_asked, shared.dfa = asked, dfa
    return dfa


def _timed_out(e: TimeLimitExceeded, max_seconds: float) -> TimeLimitExceeded:
    """``e`` against the compile's own limit: a deadline check deep in a stage knows no limit
    (it raises with 0), and another form of the grammar runs on the time left."""
    return TimeLimitExceeded("compile time (s)", limit=max_seconds, hint=e.hint)


def _resolved(grammar: Grammar, deadline: float, max_seconds: float) -> ResolvedRules:
    """:func:`resolve_rules`, a time-out reported against ``max_seconds``."""
    try:
        return resolve_rules(grammar, deadline=deadline)
    except TimeLimitExceeded as e:
        raise _timed_out(e, max_seconds) from None


@fewer_full_collections()  # (a compile frees by reference counts: see collector.py)
@no_huge_pages()  # (no stalls on compaction: see hugepages.py)
def compile_grammar(
    kind: str,
    source: str,
    grammar: Grammar,
    vocab: Vocabulary,
    options: CompileOptions,
    *,
    not_enforced: list[dict[str, str]] | None = None,
    progress: Progress | None = None,
    timings: dict[str, float] | None = None,
    deadline: float | None = None,
    shared: _Shared | None = None,
    rules: ResolvedRules | None = None,
) -> CompiledGrammar:
    """Compile a grammar with rules: regular grammars take :func:`compile_ir`'s path.
    ``deadline`` as in :func:`compile_ir`: one for every stage. ``shared`` (from
    :func:`compile_source` within :func:`sharing_automata`): the rules and pushdown automaton
    are taken from it where it holds them, and left there where it does not. ``rules``: the
    grammar's rules, where the caller resolved them already. Operand DFAs keep to the DFA
    limit (:func:`~maskc.compiler.product.operand_state_cap`)."""
    with operand_state_cap(options.limits.max_states):
        t = timings if timings is not None else {}
        if deadline is None:
            deadline = time.monotonic() + options.limits.max_seconds
        if shared is not None and shared.rules is not None:
            rules = shared.rules
        if rules is None:
            t0 = time.perf_counter()
            rules = _resolved(grammar, deadline, options.limits.max_seconds)
            if shared is not None:
                shared.rules = rules
            t["rules_ms"] = (time.perf_counter() - t0) * 1e3
        if rules.regular:
            return compile_ir(kind, source, rules.bodies[0], vocab, options, not_enforced=not_enforced,
                              progress=progress, timings=t, deadline=deadline, shared=shared)
        start = time.perf_counter()
        try:
            pda = shared.pda if shared is not None else None
            if shared is not None and shared.refused is not None:
                raise _shared_failure(shared.refused, options.limits.max_seconds)
            if pda is not None:
                t["shared_automaton"] = 1.0
            else:
                try:
                    pda = build_pda(rules, options, t, deadline=deadline, max_nfa_states=_nfa_limit(options.limits))
                except (MaskcError, MemoryError) as e:
                    failure = _failure(e)
                    if shared is not None:
                        shared.refused = failure
                    try:
                        raise failure from None
                    finally:
                        del failure  # (no cycle through this frame: see _failure)
                if shared is not None:
                    shared.pda = pda
            if pda.num_states > options.limits.max_states:
                raise StateLimitExceeded("automaton states", limit=options.limits.max_states, got=pda.num_states)
            table = token_table(vocab)
            builder = MaskStoreBuilder(vocab.vocab_size)
            t1 = time.perf_counter()
            masks = align_pda(pda, table, add_row=builder.add_row, progress=progress,
                              deadline=deadline,
                              max_states=options.limits.max_states,
                              walks=shared.walks if shared is not None else None)
        except TimeLimitExceeded as e:
            raise _timed_out(e, options.limits.max_seconds) from None
        t["align_ms"] = (time.perf_counter() - t1) * 1e3
        store = builder.build()
        prove_start_spellable(pda, masks.accepted, masks.uncertain, store, tokenizer=vocab.name)
        t["total_ms"] = (time.perf_counter() - start) * 1e3
        return CompiledGrammar(
            kind=kind,
            source=source,
            dfa=pda.dfa,
            state_mask=masks.accepted,
            masks=store,
            options=options,
            not_enforced=list(not_enforced or []),
            timings=t,
            pda=pda,
            uncertain_mask=masks.uncertain,
            flat_mask=masks.flat,
            inline_depth=masks.inline_depth,
        )


def source_of(kind: str, grammar: Any) -> str:
    """Canonical source text of a grammar (its hash is the artifact's grammar identity)."""
    return frontend(kind).canonical(grammar)


@fewer_full_collections()  # (a compile frees by reference counts: see collector.py)
@no_huge_pages()  # (no stalls on compaction: see hugepages.py)
def compile_source(
    kind: str, source: Any, vocab: Vocabulary, options: CompileOptions | None = None, *,
    progress: Progress | None = None,
) -> CompiledGrammar:
    """Compile a source of any registered kind (``json_schema``, ``regex``, ``choice``, ``gbnf``).

    Raises:
        InputError (SchemaError, UnsupportedKeyword, RegexSyntaxError, GrammarSyntaxError,
        GrammarError, EmptyLanguage), LimitExceeded, UnspellableGrammar (no sequence of the
        tokenizer's whole tokens reaches the end of the grammar). MemoryLimitExceeded where
        the process runs out of memory.
    """
    try:
        return _compile_source(kind, source, vocab, options, progress)
    except MemoryError:  # (raised where an allocation failed; freed as it unwound)
        raise MemoryLimitExceeded(None) from None
    except EmptyLanguage as e:
        if kind == "json_schema" and (options or CompileOptions()).semantics == "generation" and e.hint is None:
            e.hint = GENERATION_EMPTY_HINT
        raise


GENERATION_EMPTY_HINT = (
    "generation semantics (the default) writes a narrower language than the schema's: objects get no undeclared "
    "keys and a schema without \"type\" takes the types its keywords imply; compile with --semantics exact to see "
    "whether the schema itself admits a value, else look for contradictory constraints")
"""The hint of an :class:`EmptyLanguage` of a JSON Schema in ``generation`` semantics, whose
language may be empty where the schema's instances are not (a schema without ``type`` whose
only instances are values of another kind, or objects with undeclared keys)."""


def _compile_source(kind: str, source: Any, vocab: Vocabulary, options: CompileOptions | None,
                    progress: Progress | None) -> CompiledGrammar:
    opts = options or CompileOptions()
    fe = frontend(kind)
    t: dict[str, float] = {}
    deadline = time.monotonic() + opts.limits.max_seconds  # (the front end's own starts just after)
    t0 = time.perf_counter()
    text = fe.canonical(source)
    table = token_table(vocab)
    slot = _SHARED.get()
    key = (kind, text, opts.canonical_json())
    grammar, not_enforced, shared = _front_end(key, lambda: fe.to_grammar(source, opts), table,
                                               slot, opts.limits.max_seconds, fresh=True)
    t["frontend_ms"] = (time.perf_counter() - t0) * 1e3

    def with_rules() -> bool:  # (a walk of the whole grammar: only where it decides something)
        return any(references(body) for _, body in grammar.rules)

    other_forms = fe.shared_grammar is not None or (fe.bounded_grammar is not None and with_rules())
    # The first form's rules, resolved here (a block may hold them already) and kept: the
    # forms tried after a refusal decide on them, and its lowering within the whole NFA
    # limit compiles them again.
    first_rules = shared.rules if other_forms and shared is not None else None
    if other_forms and first_rules is None:
        t1 = time.perf_counter()
        first_rules = _resolved(grammar, deadline, opts.limits.max_seconds)
        t["rules_ms"] = (time.perf_counter() - t1) * 1e3
        if shared is not None:
            shared.rules = first_rules
    budget: int | None = None  # (the first form's NFA limit where other forms may follow)
    if other_forms and FIRST_FORM_NFA_STATES * opts.limits.max_states < opts.limits.max_nfa_states:
        budget = FIRST_FORM_NFA_STATES * opts.limits.max_states
    token = _NFA_BUDGET.set(budget)
    try:
        return compile_grammar(kind, text, grammar, vocab, opts, not_enforced=not_enforced,
                               progress=progress, timings=t, deadline=deadline, shared=shared, rules=first_rules)
    except StateLimitExceeded as e:
        if not other_forms:
            raise
        refused: MaskcError = e.with_traceback(None)  # (its frames hold the failed attempt's work)
        over_budget = e.what == "NFA states" and e.limit == budget
    finally:
        _NFA_BUDGET.reset(token)
    t["refused_ms"] = (time.perf_counter() - t0) * 1e3
    why = str(refused).splitlines()[0]  # (its message, not its hint)
    # Over a state limit, two other forms of the grammar are compiled where they differ:
    # 1. The same language with every shared part (a $ref target) a rule, and the large
    #    ones used more than once called rather than copied at each use: a pushdown grammar
    #    (no restriction), tried where sharing kept some part a call.
    # 2. Where the grammar has rules: the nesting they allow bounded (free-form values). A
    #    pushdown grammar unrolls its bounded repeats (counted loops count them in a regular
    #    grammar only); where bounding the nesting makes the grammar regular, that grammar
    #    is compiled, its restriction listed.
    # Otherwise the refusal stands. Each form's front end is shared by the input's
    # tokenizers as its own grammar is (a refusal is not built again). A first form refused
    # over its first NFA limit (FIRST_FORM_NFA_STATES) is lowered again within the whole
    # limit after the first other form and before the restriction: no restriction stands
    # where the grammar itself compiles.
    Form = Callable[[CompileOptions], tuple[Grammar, list[dict[str, str]]]]
    # (name, what it is in a refusal's hint, its front end, whether its rules differ, whether
    # only regular rules can: then a form whose rules would not be is not inlined first)
    forms: list[tuple[str, str, Form, Callable[[ResolvedRules], bool], bool]] = []
    if fe.shared_grammar is not None:
        make_shared = fe.shared_grammar
        forms.append(("shared", "each $ref target used more than once as a called rule",
                      lambda o: make_shared(source, o), lambda rules: bool(rules.sized), False))
    if over_budget:
        forms.append(("whole", "", lambda o: (grammar, not_enforced), lambda rules: True, False))
    if fe.bounded_grammar is not None and with_rules():
        make_bounded = fe.bounded_grammar
        bounded = f"free-form values nested at most {ONEOF_ANY_DEPTH} levels deep (a restriction)"
        forms.append(("bounded", bounded, lambda o: make_bounded(source, o, why),
                      lambda rules: rules.regular, True))
    tried: list[str] = []  # the forms compiled, each with why it failed
    try:
        for form, label, make, applies, regular_only in forms:
            left = deadline - time.monotonic()  # (a form's front end runs in the compile's time)
            if left <= 0:
                break
            form_opts = replace(opts, limits=replace(opts.limits, max_seconds=left))
            if (form == "bounded" and first_rules is not None and fe.bounded_keeps_rules is not None
                    and fe.bounded_keeps_rules(grammar, first_rules)):
                continue  # (its rules would not be regular: not built)
            try:
                t0 = time.perf_counter()
                other, other_not_enforced, other_shared = _front_end(
                    (f"{kind} {form}", text, opts.canonical_json()), partial(make, form_opts),
                    table, slot, opts.limits.max_seconds)
                if form == "whole" and other_shared is not None and other_shared.rules is None:
                    other_shared.rules = first_rules  # (the first form's grammar: its rules as resolved)
                rules = other_shared.rules if other_shared is not None else first_rules if form == "whole" else None
                if rules is None:
                    rules = resolve_rules(other, deadline=deadline, regular_only=regular_only)
                    if other_shared is not None and rules is not None:
                        other_shared.rules = rules  # (compile_grammar takes them from there)
                if rules is None or not applies(rules):
                    continue
                t[f"{form}_frontend_ms"] = (time.perf_counter() - t0) * 1e3
                return compile_grammar(kind, text, other, vocab, opts,
                                       not_enforced=other_not_enforced, progress=progress,
                                       timings=t, deadline=deadline, shared=other_shared, rules=rules)
            except MaskcError as e:
                if isinstance(e, TimeLimitExceeded):  # (its rules', or its front end's against the time left)
                    e = _timed_out(e, opts.limits.max_seconds)
                if form == "whole":  # the first form's own refusal, within the whole limit
                    refused = e.with_traceback(None)
                    why = str(refused).splitlines()[0]
                else:
                    tried.append(f"{label} ({e.message})")
                continue
        raise _with_tries(refused, tried) from None
    finally:
        del refused  # (no cycle through this frame)


def _with_tries(error: MaskcError, tried: list[str]) -> MaskcError:
    """``error`` with the forms compiled after it, and why each failed, added to its hint: a
    user learns what was tried, not only the first refusal. A copy: the error is also what the
    input's next tokenizer recalls."""
    if not tried:
        return error
    out = type(error).__new__(type(error), *error.args)
    out.__dict__.update(error.__dict__)
    also = "; ".join(tried)
    out.hint = f"{error.hint}. Also tried: {also}" if error.hint else f"also tried: {also}"
    return out


def _front_end(key: tuple[str, str, str], build: Callable[[], tuple[Grammar, list[dict[str, str]]]],
               table: TokenTable, slot: list[_Shared] | None, max_seconds: float, *,
               fresh: bool = False) -> tuple[Grammar, list[dict[str, str]], _Shared | None]:
    """The grammar and not_enforced list of ``build()`` (a front end), recalled from ``slot``
    where the previous compile of the same input left them (and ``table`` answers its
    questions alike), else built and left there; and the slot's entry. ``fresh``: the
    input's own grammar, whose build starts the slot over."""
    shared = _recalled(slot, key, table)
    if shared is not None:
        if shared.grammar is None:  # the front end ran out of time on the same questions
            raise _shared_time_out(max_seconds)
        return shared.grammar, list(shared.not_enforced), shared
    if slot is not None and fresh:
        slot.clear()  # (the previous compile's work is not kept past a different one)
    asked: list[tuple[tuple[bytes, int], int]] = []

    planned = _planning(table).reach

    def reach(completing: bytes, shortest: int) -> int:
        got = planned(completing, shortest)
        asked.append(((completing, shortest), got))
        return got

    with item_reach(reach):  # what counted repeats would cost, for this vocabulary
        try:
            grammar, not_enforced = build()
        except TimeLimitExceeded:
            if slot is not None:
                slot.append(_Shared(key, asked, None, []))
            raise
    if slot is not None:
        shared = _Shared(key, asked, grammar, list(not_enforced), walks=_short_walks())
        slot.append(shared)
    return grammar, not_enforced, shared


def compile_json_schema(
    schema: Any, vocab: Vocabulary, options: CompileOptions | None = None, *, progress: Progress | None = None
) -> CompiledGrammar:
    """Compile a JSON Schema (a parsed value, or JSON text) for ``vocab``."""
    if isinstance(schema, (str, bytes)):
        try:
            schema = orjson.loads(schema)
        except orjson.JSONDecodeError as e:
            raise SchemaError(f"not valid JSON: {e}") from e
    return compile_source("json_schema", schema, vocab, options, progress=progress)


def compile_regex(
    pattern: str, vocab: Vocabulary, options: CompileOptions | None = None, *, progress: Progress | None = None
) -> CompiledGrammar:
    """Compile a regular expression (whole-output match) for ``vocab``."""
    return compile_source("regex", pattern, vocab, options, progress=progress)


def compile_choice(
    choices: Sequence[str], vocab: Vocabulary, options: CompileOptions | None = None, *, progress: Progress | None = None
) -> CompiledGrammar:
    """Compile a closed list of literal outputs for ``vocab``."""
    return compile_source("choice", list(choices), vocab, options, progress=progress)


def compile_gbnf(
    text: str, vocab: Vocabulary, options: CompileOptions | None = None, *, progress: Progress | None = None
) -> CompiledGrammar:
    """Compile a GBNF grammar (llama.cpp's format; the start rule is ``root``) for ``vocab``."""
    return compile_source("gbnf", text, vocab, options, progress=progress)
