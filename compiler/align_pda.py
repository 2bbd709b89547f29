"""Token alignment for a pushdown automaton: a precomputed mask per state, plus the few
tokens that only the live stack can decide.

For a state ``q`` on top of any stack, a token is

* **accepted** when some walk of its bytes from ``q`` stays inside ``q``'s frame: byte
  steps of ``q``'s rule, and calls into rules that return within the token, at most
  ``inline_depth`` levels deep. Such a walk never reads the stack below ``q``, so the token
  is allowed whatever the context (given enough depth headroom; the runtime checks it);
* **uncertain** when it is not accepted but some walk returns past ``q``'s frame with bytes
  left and goes on at a place where ``q``'s rule returns to in some caller (XGrammar calls
  this context expansion), or enters a call deeper than ``inline_depth``. The runtime
  resolves these against the live stack;
* **rejected** otherwise, in every context.

Both sets come from the vectorized DFA alignment (:func:`~maskc.compiler.align.align`) run
over two automata built here by a subset construction over *local configurations*
(return states pushed within the token, current state): one where leaving the frame kills
the walk (accepted), one where it goes on in the over-approximated callers (accepted or
uncertain). Returns from the base frame at the token's first byte are not escapes: the
runtime closes the stack under returns before a token starts.
"""

from __future__ import annotations

import bisect
import time
from array import array
from collections.abc import Callable, Mapping, Set

import numpy as np
from numpy.typing import NDArray

from maskc.compiler.align import SHORT_TOKEN, ShortWalks, TokenTable, align
from maskc.compiler.dfa import DEAD, Dfa, sorted_unique
from maskc.compiler.errors import StateLimitExceeded, TimeLimitExceeded
from maskc.compiler.maskstore import bitmask_words, pack_bool
from maskc.compiler.minimize import refine
from maskc.compiler.pda import LazyRows, Pda

__all__ = ["align_pda", "PdaMasks", "INLINE_DEPTH", "return_points"]

INLINE_DEPTH = 2  # call levels a token may enter and leave inside a state's precomputed mask
MAX_LOCAL_STATES = 40_000  # past this the inline depth is lowered
MAX_OUTER = 16  # configurations tracked past the frame; beyond, any byte may follow
UNION_MAX_STATES = 16_384  # alignment automata aligned as one up to this many states in all
SHARED_UNION_MAX_STATES = 100_000
"""Past :data:`UNION_MAX_STATES`, alignment automata are still aligned as one up to this
many states in all where they share their short-token futures: where the union's blocks
(the states that no short token tells apart) number at most :data:`SHARED_UNION_BLOCKS`
of the automata's blocks counted one by one."""
SHARED_UNION_BLOCKS = 0.9
# Bytes into a token past which a walk that left its frame is no longer followed through the
# callers' return points: it goes loose (its token is uncertain, settled on the live stack).
OUTER_HORIZON = 6
GROUP_MEMO_LIMIT = 8192  # state sets whose class groups are kept (a large grammar meets 50,000, most once)
_BULK_CHUNK = 4096  # plain states stepped per array operation (bounds the temporaries)

Local = tuple[tuple[int, ...], int]  # (return states pushed within the token, current state)
# A subset construction that exceeded its limit: the depth of the subset it was at (-1: the
# states alone exceeded it), every subset's depth so far (in order: breadth first), the limit.
Abort = tuple[int, list[int], int]
# What alignment aligns: the inline depth, each automaton with its seeds, the short-token partitions known.
Automata = tuple[int, list[tuple[Dfa, NDArray[np.int64]]], dict[int, NDArray[np.int64]]]


def _fits(abort: Abort, horizon: int) -> bool:
    """Whether the subset construction that ``abort`` records would have stayed under its
    limit with a horizon of ``horizon`` bytes, shorter than its own. Breadth first, that
    construction's subsets are a prefix of the longer one's, those within ``horizon`` bytes
    of a seed; the longer one stopped at a subset at least that deep, with all of them made."""
    at, depth, limit = abort
    return at >= horizon and bisect.bisect_right(depth, horizon) <= limit


class PdaMasks:
    """Per PDA state, mask ids: the accepted tokens, those of them that make no call (valid
    wherever the depth headroom covers the state's ``need``), and the uncertain tokens."""

    def __init__(self, accepted: NDArray[np.int32], flat: NDArray[np.int32], uncertain: NDArray[np.int32],
                 inline_depth: int) -> None:
        self.accepted = accepted
        self.flat = flat
        self.uncertain = uncertain
        self.inline_depth = inline_depth


def return_points(pda: Pda, deadline: float | None = None,
                  calls: list[list[tuple[int, int]]] | None = None) -> list[list[int]]:
    """Per state: where its rule(s) can return to, in any caller (context expansion), sorted.

    A state belongs to every rule whose start reaches it by bytes and call-return edges
    (minimization may share a state between rules); the start rule, not called, has none.
    States of the same rules share one list (read it, never change it).
    """
    n = pda.num_states
    returns: dict[int, set[int]] = {}
    if calls is None:
        calls = pda.all_calls()
    for q in range(n):
        for rule, ret in calls[q]:
            returns.setdefault(rule, set()).add(ret)
    ptr, flat = _byte_successors(pda.dfa.trans)
    member: list[list[int] | None] = [None] * n  # the called rules that reach each state
    for rule, start in enumerate(pda.rule_start.tolist()):
        if start < 0 or rule not in returns:
            continue
        if deadline is not None and time.monotonic() > deadline:
            raise TimeLimitExceeded("compile time (s)", limit=0)
        seen = {start}
        work = [start]
        while work:
            q = work.pop()
            got = member[q]
            if got is None:
                member[q] = [rule]
            else:
                got.append(rule)
            for t in flat[ptr[q] : ptr[q + 1]]:
                if t not in seen:
                    seen.add(t)
                    work.append(t)
            for _, t in calls[q]:
                if t not in seen:
                    seen.add(t)
                    work.append(t)
    none: list[int] = []
    shared: dict[tuple[int, ...], list[int]] = {}
    out: list[list[int]] = []
    for rules in member:
        if rules is None:
            out.append(none)
            continue
        key = tuple(rules)
        got = shared.get(key)
        if got is None:
            got = shared[key] = sorted(set().union(*(returns[r] for r in rules)))
        out.append(got)
    return out


def _byte_successors(trans: NDArray[np.int32]) -> tuple[list[int], list[int]]:
    """Each state's distinct byte successors, as ``flat[ptr[q]:ptr[q + 1]]`` (a row of a
    large table has dozens of live classes but few targets: listed per row, not per cell)."""
    n = trans.shape[0]
    keys = []
    for lo in range(0, n, _BULK_CHUNK):
        part = trans[lo : lo + _BULK_CHUNK]
        src, col = np.nonzero(part >= 0)
        keys.append(sorted_unique((src + lo).astype(np.int64) * n + part[src, col]))
    key = np.concatenate(keys) if keys else np.zeros(0, dtype=np.int64)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(key // max(n, 1), minlength=n), out=ptr[1:])
    return ptr.tolist(), (key % max(n, 1)).tolist()


Subset = tuple[frozenset[Local], frozenset[Local], bool]  # (inside the frame, past it, loose)


class _LiveClasses(LazyRows):
    """The classes each state can take, listed on first use."""

    def __missing__(self, q: int) -> list[int]:
        value: list[int] = np.flatnonzero(self.table[q] >= 0).tolist()
        self[q] = value
        return value


def _class_groups(qs: tuple[int, ...], loose: bool, trans: Mapping[int, list[int]], live_classes: Mapping[int, list[int]],
                  nclasses: int) -> list[tuple[dict[int, int], list[int]]]:
    """The classes that some state of ``qs`` can take (all of them when ``loose``), grouped
    by their column of successors, in order of each group's first class: per group, each
    state's successor on the group's classes, and the classes."""
    if loose:
        classes: list[int] = list(range(nclasses))
    elif len(qs) == 1:
        classes = live_classes[qs[0]]
    else:
        classes = sorted({c for q in qs for c in live_classes[q]})
    if len(qs) == 1:  # (the common case: columns of one state)
        q, row = qs[0], trans[qs[0]]
        single: dict[int, list[int]] = {}
        for cl in classes:
            single.setdefault(row[cl], []).append(cl)
        return [({q: t}, members) for t, members in single.items()]
    if not qs:  # (a loose walk with no configuration left: one group, no successor)
        return [({}, classes)] if classes else []
    cols = list(zip(*[trans[q] for q in qs]))  # (each class's column of successors, built at once)
    groups: dict[tuple[int, ...], list[int]] = {}
    for cl in classes:
        groups.setdefault(cols[cl], []).append(cl)
    return [(dict(zip(qs, sig)), members) for sig, members in groups.items()]


def _local_automata(pda: Pda, k: int, deadline: float | None, limit: int = MAX_LOCAL_STATES,
                    horizon: int | None = None,
                    frames: tuple[list[list[tuple[int, int]]], list[list[int]]] | None = None,
                    outer_horizon: int | None = None,
                    aborts: list[Abort] | None = None,
                    ) -> tuple[Dfa, Dfa, NDArray[np.int64], NDArray[np.int64]] | None:
    """The 'accepted' and 'accepted or uncertain' automata and each PDA state's seed in them.

    A subset holds the configurations still inside the starting frame, those that
    returned past it (continuing at the frame's possible return points, callers unknown:
    an over-approximation), and a flag for walks no longer tracked at all (a call deeper
    than ``k``), which accept any remaining bytes.

    With ``horizon`` (the longest token, in bytes), subsets are expanded only within that
    many bytes of some seed: no token walks further, so farther subsets (configurations
    that left a frame and went on through a long stretch of a caller) get no transitions.

    With ``outer_horizon``, a subset that holds configurations past the frame, reached that
    many bytes or more from the nearest seed, drops them and goes loose instead. Following them on
    decides only whether a token that left its frame early in its bytes is uncertain or
    rejected, and costs most of the subsets: past a frame, a walk runs on through every
    caller's literals (the keys after an object's value) for up to ``horizon`` bytes. Loose,
    such a token is uncertain at worst, and the runtime walks it on the live stack: sound,
    and on real vocabularies the same masks (tokens that return and then go on for several
    more bytes are rare), from a fraction of the subsets.

    ``frames``: each state's calls and return points (:meth:`Pda.all_calls`,
    :func:`return_points`), shared by the builds of one grammar. Returns None, having built
    nothing, when the states alone exceed ``limit`` (each seeds a subset of its own).
    ``aborts``: where the subsets exceed ``limit``, what tells whether a shorter horizon
    would have kept them under it is appended there (:func:`_fits`).
    """
    if pda.num_states > limit:
        if aborts is not None:
            aborts.append((-1, [], limit))
        return None
    calls, returns = frames if frames is not None else (pda.all_calls(), return_points(pda, deadline))
    trans = LazyRows(pda.dfa.trans)  # (a large grammar's plain states are stepped in bulk, never read here)
    accepting = pda.dfa.accepting.tolist()
    starts = pda.rule_start.tolist()
    nclasses = pda.dfa.num_classes

    def closure(configs: Set[Local], first: bool, inner: bool) -> tuple[frozenset[Local], set[Local], bool]:
        """(closed configs, configs that left the frame, loose) from ``configs``."""
        out: set[Local] = set()
        left: set[Local] = set()
        esc = False
        work = list(configs)
        while work:
            cfg = work.pop()
            if cfg in out:
                continue
            out.add(cfg)
            rs, q = cfg
            for rule, ret in calls[q]:
                if len(rs) < k:
                    work.append((rs + (ret,), starts[rule]))
                else:
                    esc = True
            if accepting[q]:
                if rs:
                    work.append((rs[:-1], rs[-1]))
                elif not first:
                    if inner:
                        left.update(((), r) for r in returns[q])
                    else:
                        work.extend(((), r) for r in returns[q])
        return frozenset(out), left, esc

    memo: dict[tuple[frozenset[Local], frozenset[Local], bool], tuple[frozenset[Local], frozenset[Local], bool]] = {}

    def close_both(inner_cfgs: Set[Local], outer_cfgs: Set[Local], first: bool) -> tuple[frozenset[Local], frozenset[Local], bool]:
        key = (frozenset(inner_cfgs), frozenset(outer_cfgs), first)
        got = memo.get(key)
        if got is None:
            a, left, e1 = closure(inner_cfgs, first, True)
            b, _, e2 = closure(outer_cfgs | left, first, False)
            if len(b) > MAX_OUTER:  # too many callers to track: let the walk go loose (sound)
                b, e2 = frozenset(), True
            got = (a, b, e1 or e2)
            memo[key] = got
        return got

    live_classes = _LiveClasses(pda.dfa.trans)

    index: dict[Subset, int] = {}
    order: list[Subset | None] = []  # (None: a plain state's seed, known by its state, see below)
    depth: list[int] = []  # bytes from the nearest seed (breadth first: the first visit is the least)
    here = [0]

    def intern(key: Subset) -> int:
        j = index.get(key)
        if j is None:
            j = len(order)
            index[key] = j
            order.append(key)
            depth.append(here[0])
        return j

    def successor(inside: frozenset[Local], past: frozenset[Local], loose: bool) -> int:
        """The id of the subset a step leads to, from the configurations it leaves inside the
        frame and past it (``loose``: the walk was loose already); -1 if none is left."""
        got = memo.get((inside, past, False))
        a, b, e = got if got is not None else close_both(inside, past, False)
        e = e or loose
        if not (a or b or e):
            return -1
        if b and outer_horizon is not None and here[0] >= outer_horizon:
            b, e = no_configs, True  # (a loose walk accepts whatever follows: a superset)
        if not b and not e and len(a) == 1:
            ((rs, t),) = a
            if not rs and plain[t]:
                return alone[t]
        key = (a, b, e)
        j = index.get(key)
        return j if j is not None else intern(key)

    no_configs: frozenset[Local] = frozenset()
    # A plain state (no call, cannot return) closes to itself: a subset holding just it, on
    # an empty stack, is (({((), q)}), {}, False) whatever led there. Subsets of one such
    # configuration (a string's or a number's interior, a long run of copies) step through
    # these lists, without the closures and sets of the general case below; such a subset is
    # its state's seed, found by ``alone`` (no key kept: a large grammar has 100,000 of them).
    plain = [not calls[q] and not accepting[q] for q in range(pda.num_states)]

    def seed(q: int) -> int:
        if plain[q]:
            order.append(None)
            depth.append(here[0])
            return len(order) - 1
        # (a state without calls, at a token's start, closes to itself: it may not return yet)
        return intern(close_both({((), q)}, set(), True) if calls[q] else (frozenset([((), q)]), no_configs, False))

    seeds = np.asarray([seed(q) for q in range(pda.num_states)], dtype=np.int64)
    rows = array("i")  # the rows of the subsets' transitions, concatenated (4 bytes a cell)
    group_memo: dict[tuple[frozenset[int], bool], list[tuple[dict[int, int], list[int]]]] = {}
    one_memo: dict[int, list[tuple[int, list[int]]]] = {}  # 2 * state + loose -> (target, classes)
    # plain state -> the id of its subset: its own seed
    alone: list[int] = np.where(plain, seeds, -1).tolist() if pda.num_states else []
    # The rows of the plain states' seeds, in array steps (written after the loop): a class
    # steps to the seed of a plain target, else to the closure of the target alone (one per
    # target, at depth 1, interned here so that the loop expands it).
    plain_q = np.flatnonzero(np.asarray(plain, dtype=np.bool_))
    step_to = np.append(np.asarray(alone, dtype=np.int32), np.int32(DEAD))  # the last: no target
    here[0] = 1
    for lo in range(0, plain_q.shape[0], _BULK_CHUNK):
        targets = pda.dfa.trans[plain_q[lo : lo + _BULK_CHUNK]]
        for t in sorted_unique(targets[(targets >= 0) & (step_to[targets] < 0)]).tolist():
            step_to[t] = successor(frozenset([((), t)]), no_configs, False)
    is_plain_seed = np.zeros(len(order), dtype=np.bool_)
    is_plain_seed[seeds[plain_q]] = True
    bulk = is_plain_seed.tolist()
    dead_row = array("i", [DEAD] * nclasses)  # (a row is a copy of it: an array extends an array by a copy)
    dead_rows = dead_row.tobytes()
    i = 0
    while i < len(order):
        if len(order) > limit:
            if aborts is not None:
                aborts.append((depth[i], depth, limit))
            return None
        if deadline is not None and (i & 15) == 0 and time.monotonic() > deadline:
            raise TimeLimitExceeded("compile time (s)", limit=0)
        if i < len(bulk) and bulk[i]:  # a run of plain seeds: their rows are written from step_to below
            j = i + 1
            while j < len(bulk) and bulk[j]:
                j += 1
            rows.frombytes(dead_rows * (j - i))
            i = j
            continue
        sub = order[i]
        assert sub is not None  # (plain seeds are written in bulk)
        inner, outer, esc = sub
        row = dead_row[:]
        if horizon is not None and depth[i] >= horizon:
            rows.extend(row)  # past every token's end
            i += 1
            continue
        here[0] = depth[i] + 1
        if len(group_memo) >= GROUP_MEMO_LIMIT:
            group_memo.clear()
        if len(one_memo) >= GROUP_MEMO_LIMIT:
            one_memo.clear()
        if not outer and len(inner) == 1:
            ((rs0, q0),) = inner
            if not rs0 and not esc:
                # its live classes grouped by target, in order of each group's first class (as
                # :func:`_class_groups`; a subset of one configuration is met once: not kept)
                to = trans[q0]
                by_target: dict[int, list[int]] = {}
                for cl in live_classes[q0]:
                    by_target.setdefault(to[cl], []).append(cl)
                for t, members in by_target.items():  # (t >= 0: live classes)
                    j = alone[t] if plain[t] else successor(frozenset([((), t)]), no_configs, False)
                    if j < 0:
                        continue
                    for cl in members:
                        row[cl] = j
                rows.extend(row)
                i += 1
                continue
            # One configuration inside a call, or loose: its classes grouped by target as
            # :func:`_class_groups` groups them (-1, no target, is taken by a loose walk only),
            # kept per state, and each target's subset found without building a column.
            okey = 2 * q0 + esc
            by_state = one_memo.get(okey)
            if by_state is None:
                to = trans[q0]
                by_to: dict[int, list[int]] = {}
                for cl in (range(nclasses) if esc else live_classes[q0]):
                    by_to.setdefault(to[cl], []).append(cl)
                by_state = list(by_to.items())
                one_memo[okey] = by_state
            for t, members in by_state:
                j = successor(frozenset([(rs0, t)]) if t >= 0 else no_configs, no_configs, esc)
                if j >= 0:
                    for cl in members:
                        row[cl] = j
            rows.extend(row)
            i += 1
            continue
        # Classes that move every configuration alike share one closure: group them by
        # their column of successors (groups in order of their first class, so states are
        # interned in class order). A configuration moves by its state alone, so the groups
        # depend on the set of states (and looseness) only, and are shared by the subsets
        # that hold the same states under other stacks.
        qkey = (frozenset([q for _, q in inner] + [q for _, q in outer]), esc)
        grouped = group_memo.get(qkey)
        if grouped is None:
            grouped = _class_groups(tuple(sorted(qkey[0])), esc, trans, live_classes, nclasses)
            group_memo[qkey] = grouped
        for step, members in grouped:
            j = successor(frozenset([(rs, t) for rs, q in inner if (t := step[q]) >= 0]),
                          frozenset([(rs, t) for rs, q in outer if (t := step[q]) >= 0]), esc)
            if j >= 0:
                for cl in members:
                    row[cl] = j
        rows.extend(row)
        i += 1
    any_t = np.frombuffer(rows, dtype=np.int32).reshape(len(order), nclasses)  # (writable: no copy)
    for lo in range(0, plain_q.shape[0], _BULK_CHUNK):
        part = plain_q[lo : lo + _BULK_CHUNK]
        any_t[seeds[part]] = step_to[pda.dfa.trans[part]]  # (DEAD, -1, reads the last entry: DEAD)
    # the 'accepted' automaton: the same subsets, inside configurations only
    # (configurations of one plain state on an empty stack are keyed by the state)
    seed_state = np.full(len(order), DEAD, dtype=np.int64)
    seed_state[seeds[plain_q]] = plain_q
    local_ids: dict[frozenset[Local] | int, int] = {}
    local_list = [DEAD] * len(order)
    for j, (sub, q) in enumerate(zip(order, seed_state.tolist())):
        key: frozenset[Local] | int = q
        if sub is not None:
            configs = sub[0]
            if not configs:
                continue
            key = configs
            if len(configs) == 1:
                ((rs, t),) = configs
                if not rs and plain[t]:
                    key = t
        local_list[j] = local_ids.setdefault(key, len(local_ids))
    local_of = np.asarray(local_list, dtype=np.int64)
    del local_list, seed_state
    local_t = np.full((len(local_ids), nclasses), DEAD, dtype=np.int32)
    # (subsets with equal inside configurations move alike; a cut one has no row): each
    # local state takes the row of the last uncut subset of its configurations
    depth_a = np.asarray(depth, dtype=np.int64)
    has_row = local_of >= 0
    if horizon is not None:
        has_row &= depth_a < horizon
    js = np.flatnonzero(has_row)
    if js.size:
        lj = local_of[js]
        rev_lj = lj[::-1]
        _, last_rev = np.unique(rev_lj, return_index=True)
        pick = js[js.shape[0] - 1 - last_rev]
        to_local = np.append(local_of, DEAD).astype(np.int32)  # (no target, -1, reads the last entry: DEAD)
        for lo in range(0, pick.shape[0], _BULK_CHUNK):  # (in chunks: bounds the temporaries)
            part = pick[lo : lo + _BULK_CHUNK]
            local_t[local_of[part]] = to_local[any_t[part]]
    byte_class = pda.dfa.byte_class.copy()
    d_any = Dfa(any_t, byte_class, np.zeros(len(order), dtype=np.bool_))
    d_local = Dfa(local_t if local_t.size else np.full((1, nclasses), DEAD, dtype=np.int32), byte_class.copy(),
                  np.zeros(max(1, len(local_ids)), dtype=np.bool_))
    return d_local, d_any, local_of[seeds], seeds


def align_pda(
    pda: Pda,
    table: TokenTable,
    *,
    add_row: Callable[[NDArray[np.int32]], int],
    progress: Callable[[int, int], None] | None = None,
    deadline: float | None = None,
    inline_depth: int = INLINE_DEPTH,
    max_states: int = 200_000,
    walks: ShortWalks | None = None,
) -> PdaMasks:
    """Accepted and uncertain token masks of every state of ``pda`` (EOS excluded: the
    runtime allows it where the whole stack can finish).

    ``add_row(row)`` receives each distinct mask as its int32 bitmask row
    (:meth:`MaskStoreBuilder.add_row`) and returns its id in the caller's store: the
    alignment automata's masks are held packed, and added so.

    ``walks`` (:class:`~maskc.compiler.align.ShortWalks`): the short tokens of this input's
    tokenizers, walked once for all. Where ``table`` is one of theirs, the alignment
    automata reach as far as the longest token of any of them, and they, their partition
    and their short walks are kept there for the next tokenizer's alignment of ``pda``
    (the same masks: a state past a token's end is never read by its walk).

    Raises:
        TimeLimitExceeded: ``deadline`` passed.
        StateLimitExceeded: the alignment automata exceed ``max_states`` even without inlining.
    """
    joint = walks if walks is not None and walks.tokens.view(table) is not None else None
    built: Automata | StateLimitExceeded | None = None
    if joint is not None:
        longest = joint.tokens.max_len
        built, aborts = _kept_automata(joint, pda, longest, deadline, inline_depth, max_states)
        # Built for the longest token of all the tokenizers, the automata hold more states
        # than this one's need, and give its masks exactly (a state past its longest token
        # is never read by its walks), unless they exceeded a limit that its own would have
        # stayed under (they then have less inline depth, or were refused): then its own
        # are built.
        if table.max_len < longest and any(_fits(a, max(table.max_len, 1)) for a in aborts):
            built, _ = _kept_automata(joint, pda, table.max_len, deadline, inline_depth, max_states)
    if isinstance(built, StateLimitExceeded):
        raise built.with_traceback(None)
    k, parts, short_blocks = built if built is not None else _alignment_automata(
        pda, table.max_len, deadline, inline_depth, max_states)
    no_eos = TokenTable(table.flat, table.offsets, table.walkable, (), table.vocab_size)
    no_eos.__dict__["_slices"] = table.slices()
    if joint is None:  # (the shared tokens' trie serves otherwise: this one need not be built)
        no_eos.__dict__["_trie"] = table.trie()
        no_eos.__dict__["_first_blocks"] = table.first_blocks()
        no_eos.__dict__["_short_positions"] = table.short_positions()
        no_eos.__dict__["_class_tries"] = table.class_tries()
    # Packed and deduplicated: the three automata give thousands of masks on a large grammar,
    # mostly the same few hundred (o7578: 11,452 masks, 268 distinct).
    masks: list[NDArray[np.int32]] = []
    mask_ids: dict[bytes, int] = {}

    def collect(mask: NDArray[np.bool_]) -> int:
        packed = pack_bool(mask)
        j = mask_ids.setdefault(packed.tobytes(), len(masks))
        if j == len(masks):
            masks.append(packed)
        return j

    found: dict[int, NDArray[np.int32]] = {}
    total = len({id(d) for d, _ in parts})
    if progress is not None:
        progress(0, total)
    for d, seed in parts:
        if id(d) not in found:
            wanted = sorted_unique(np.concatenate([s[s >= 0] for dd, s in parts if dd is d]))
            found[id(d)] = align(d, no_eos, add_mask=collect, deadline=deadline, only=wanted, free_order=True,
                                 short_blocks=short_blocks.get(id(d)), walks=walks) if wanted.size else (
                np.zeros(0, dtype=np.int32))
            if progress is not None:
                progress(len(found), total)
    ids_of = [np.where(seed >= 0, found[id(d)][np.where(seed >= 0, seed, 0)], -1).astype(np.int32)
              if found[id(d)].size else np.full(seed.shape[0], -1, dtype=np.int32) for d, seed in parts]
    local_of, any_of = ids_of[0], ids_of[1]
    flat_of = local_of if len(ids_of) == 2 else ids_of[2]
    empty = np.zeros(bitmask_words(table.vocab_size), dtype=np.int32)
    accepted = np.empty(pda.num_states, dtype=np.int32)
    flat = np.empty(pda.num_states, dtype=np.int32)
    uncertain = np.empty(pda.num_states, dtype=np.int32)
    memo: dict[tuple[int, int, int], tuple[int, int, int]] = {}
    for q, (lm, fm, am) in enumerate(zip(local_of.tolist(), flat_of.tolist(), any_of.tolist())):
        got = memo.get((lm, fm, am))
        if got is None:
            loc = masks[lm] if lm >= 0 else empty
            fl = (masks[fm] if fm >= 0 else empty) & loc
            got = (add_row(loc), add_row(fl), add_row(masks[am] & ~loc))
            memo[(lm, fm, am)] = got
        accepted[q], flat[q], uncertain[q] = got
    return PdaMasks(accepted, flat, uncertain, k)


def _kept_automata(walks: ShortWalks, pda: Pda, longest: int, deadline: float | None, inline_depth: int,
                   max_states: int) -> tuple[Automata | StateLimitExceeded, list[Abort]]:
    """:func:`_alignment_automata` (or the refusal it raised) and the subset constructions
    that exceeded their limit on the way, kept in ``walks`` for the next tokenizer (the same
    automata objects: their short walks are kept with them)."""
    kept: tuple[Automata | StateLimitExceeded, list[Abort]] | None = walks.recall(
        "pda", pda, inline_depth, max_states, longest)
    if kept is not None:
        return kept
    aborts: list[Abort] = []
    try:
        got: Automata | StateLimitExceeded = _alignment_automata(pda, longest, deadline, inline_depth, max_states,
                                                                 aborts)
    except StateLimitExceeded as e:
        got = e.with_traceback(None)
    walks.keep("pda", pda, (got, aborts), inline_depth, max_states, longest)
    return got, aborts


def _alignment_automata(pda: Pda, longest: int, deadline: float | None, inline_depth: int, max_states: int,
                        aborts: list[Abort] | None = None) -> Automata:
    """The automata :func:`align_pda` aligns, for tokens of at most ``longest`` bytes: the
    inline depth they were built with, each automaton with its seeds (the 'accepted' one,
    the 'accepted or uncertain' one, then the one without inlining where that differs; or
    their disjoint union in each place), and the short-token partitions known of them.
    ``aborts``: where a subset construction exceeded its limit (see :func:`_local_automata`)."""
    k = inline_depth
    horizon = max(longest, 1)
    calls = pda.all_calls()
    frames = (calls, return_points(pda, deadline, calls))
    outer = OUTER_HORIZON
    built = _local_automata(pda, k, deadline, horizon=horizon, frames=frames, outer_horizon=outer, aborts=aborts)
    while built is None and k > 1:
        k -= 1
        built = _local_automata(pda, k, deadline, horizon=horizon, frames=frames, outer_horizon=outer, aborts=aborts)
    if built is None:
        k = 0
        built = _local_automata(pda, 0, deadline, limit=max(max_states, MAX_LOCAL_STATES), horizon=horizon,
                                frames=frames, outer_horizon=outer, aborts=aborts)
    if built is None:
        raise StateLimitExceeded("token-alignment states of the pushdown automaton", limit=max(max_states, MAX_LOCAL_STATES))
    d_local, d_any, seed_local, seed_any = built
    flat_built = built if k == 0 else _local_automata(pda, 0, deadline, limit=max(max_states, MAX_LOCAL_STATES),
                                                      horizon=horizon, frames=frames, outer_horizon=outer,
                                                      aborts=aborts)
    if flat_built is None:
        raise StateLimitExceeded("token-alignment states of the pushdown automaton", limit=max(max_states, MAX_LOCAL_STATES))
    d_flat, seed_flat = flat_built[0], flat_built[2]
    parts = [(d_local, seed_local), (d_any, seed_any)] + ([] if flat_built is built else [(d_flat, seed_flat)])
    short_blocks: dict[int, NDArray[np.int64]] = {}  # per automaton: its short-token partition, where known
    total_states = sum(d.num_states for d, _ in parts)
    if total_states <= SHARED_UNION_MAX_STATES:
        # The automata share many of their states' futures (all agree wherever no token
        # leaves or enters a frame): aligned as one disjoint union, the refinement gives the
        # states of one future one block, aligned once for all.
        union: Dfa | None
        union, seeds = _disjoint_union(parts)
        if total_states > UNION_MAX_STATES:
            # A large grammar's automata are aligned one by one (the walks of one are freed
            # before the next, where a union holds them all at once), unless they share
            # enough: the union's short-token partition tells (states of two automata share
            # a block where no short token tells them apart; two states of one automaton
            # share one there exactly when they do in their automaton alone), and is handed
            # to the alignments either way, so it is computed once.
            block_u = refine(union.trans, union.accepting.astype(np.int64), max_rounds=SHORT_TOKEN,
                             deadline=deadline)
            wanted_u = [block_u[s[s >= 0]] for s in seeds]
            apart = sum(sorted_unique(w).shape[0] for w in wanted_u)
            if sorted_unique(np.concatenate(wanted_u)).shape[0] <= SHARED_UNION_BLOCKS * apart:
                short_blocks[id(union)] = block_u
            else:
                base = 0
                for d, _ in parts:
                    short_blocks[id(d)] = block_u[base : base + d.num_states]
                    base += d.num_states
                union = None  # (freed before the alignments)
        if union is not None:
            parts = [(union, seed) for seed in seeds]
    return k, parts, short_blocks


def _disjoint_union(parts: list[tuple[Dfa, NDArray[np.int64]]]) -> tuple[Dfa, list[NDArray[np.int64]]]:
    """One DFA holding each of ``parts``' automata side by side (no accepting state), and
    each part's seeds in it (-1 stays -1)."""
    tables, seeds = [], []
    base = 0
    for d, seed in parts:
        t = d.trans
        tables.append(np.where(t >= 0, t + base, DEAD).astype(np.int32))
        seeds.append(np.where(seed >= 0, seed + base, -1).astype(np.int64))
        base += d.num_states
    trans = np.concatenate(tables, axis=0)
    return Dfa(trans, parts[0][0].byte_class.copy(), np.zeros(base, dtype=np.bool_)), seeds
