"""Token-level reachability of the end at compile time: can whole tokens spell an output?

The byte automaton is pruned (every state can still finish), but a model writes whole
tokens. A grammar whose outputs need bytes no token supplies (``'ü'`` for a vocabulary
without it, JSON for a vocabulary of ``a`` and ``b``) would compile into an artifact whose
start allows no token, not even EOS. :func:`prove_spellable` refuses such a compile: from
the start state, following whole tokens only, some path must reach an accepting state (where
the mask allows EOS).

This is the weak, cheap half of what ``maskc check`` proves
(:func:`maskc.artifacts.analysis.eos_reachability` shows that *every* token-reachable state
keeps a token path to EOS, on the finished artifact): here one path is enough, and it runs
on the masks the pipeline has just computed, in two steps:

1. one-byte tokens: a one-byte token is allowed in a state exactly when its byte has a
   transition there (alignment allows a token iff its walk never dies), so a byte path to
   acceptance made only of bytes that have a one-byte token is a token path. For byte-level
   BPE and SentencePiece with byte fallback this settles it without reading a mask;
2. otherwise a breadth-first search over the states whole tokens reach, walking each
   state's allowed tokens (from its mask), stopping at the first accepting state.

Pushdown (recursive) grammars get the start check only: the start state must allow some
token (accepted or left to the live stack) or the empty output. A full token-level search
needs the stack, which is the runtime's business (``maskc check`` does it).
"""

from __future__ import annotations

from collections import deque

import numpy as np
from numpy.typing import NDArray

from maskc.compiler.align import TokenTable
from maskc.compiler.dfa import Dfa, sorted_unique
from maskc.compiler.errors import UnspellableGrammar
from maskc.compiler.maskstore import MaskStore
from maskc.compiler.pda import Pda

__all__ = ["prove_spellable", "prove_start_spellable", "walk_tokens"]

_HINT = (
    "the tokenizer has no tokens for the bytes the grammar requires there: check that this "
    "is the model's tokenizer, or allow outputs its tokens can spell"
)


def prove_spellable(dfa: Dfa, state_mask: NDArray[np.int32], masks: MaskStore, table: TokenTable,
                    *, tokenizer: str) -> None:
    """Some sequence of whole tokens leads from the start state to an accepting state.

    Args:
        dfa: The pruned, minimized grammar DFA.
        state_mask: Per state, its mask id in ``masks``.
        masks: The mask store of the compile.
        table: The vocabulary's token table the masks were computed from.
        tokenizer: The tokenizer's name, for the message.

    Raises:
        UnspellableGrammar: no token path reaches an accepting state. Its ``prefix`` is a
            shortest byte prefix whole tokens cannot write: what they can write (over the
            byte steps allowed tokens take) and the next character the grammar needs there.
    """
    if _one_byte_path(dfa, table) or _token_path(dfa, state_mask, masks, table):
        return
    found = _frontier(dfa, state_mask, masks, table)
    if found is None:
        example = _shortest_path(dfa, 0, dfa.accepting)[0]
        raise UnspellableGrammar(
            f"no sequence of whole tokens of tokenizer '{tokenizer}' completes an output of this "
            f"grammar (its shortest output is {_show(example)}), so EOS is never allowed",
            tokenizer=tokenizer, example=example, hint=_HINT)
    spelled, rest = found
    step = rest[:_char_len(rest[0])]
    where = "at the start of the output" if not spelled else f"after {_show(spelled)}"
    raise UnspellableGrammar(
        f"tokenizer '{tokenizer}' cannot spell this grammar: no token can write {_show(step)} "
        f"{where} (as in {_show(spelled + rest)}), and no sequence of whole tokens reaches the "
        "end, so EOS is never allowed",
        tokenizer=tokenizer, prefix=spelled + step, example=spelled + rest, hint=_HINT)


def prove_start_spellable(pda: Pda, accepted: NDArray[np.int32], uncertain: NDArray[np.int32],
                          masks: MaskStore, *, tokenizer: str) -> None:
    """The start state of a pushdown automaton allows some token, or the empty output.

    Uncertain tokens count as allowed (the live stack decides them), so this refuses only
    grammars that certainly cannot begin.

    Raises:
        UnspellableGrammar: no token can begin the output and the output cannot be empty.
    """
    if bool(pda.dfa.accepting[0]) or masks.count(int(accepted[0])) or masks.count(int(uncertain[0])):
        return
    raise UnspellableGrammar(
        f"tokenizer '{tokenizer}' cannot spell this grammar: no token is allowed at the start "
        "of the output and the output cannot be empty, so EOS is never allowed",
        tokenizer=tokenizer, hint=_HINT)


def walk_tokens(dfa: Dfa, table: TokenTable, state: int, ids: NDArray[np.int64], *,
                covered: NDArray[np.bool_] | None = None, died: NDArray[np.int64] | None = None,
                marks: NDArray[np.bool_] | None = None, hit: NDArray[np.bool_] | None = None) -> NDArray[np.int64]:
    """The state each token ends in when its bytes are walked from ``state`` (-1: it dies).

    The one vectorized token walk of the compiler, its analyses and the runtime's proofs.
    Optional outputs, filled when given:

    - ``covered`` (bool [states, classes]): set at every (state, class) step that does not die;
    - ``died`` (int [len(ids)]): the index of the byte each token dies at (its length if it
      does not);
    - ``hit`` (bool [len(ids)]): whether some step of the token, from (state, byte), is set
      in ``marks`` (bool [states, 256]).
    """
    ids = np.asarray(ids, dtype=np.int64)
    starts = table.offsets[ids]
    lens = table.offsets[ids + 1] - starts
    cur = np.where(lens > 0, state, -1).astype(np.int64)
    if died is not None:
        died[:] = lens
    classes = dfa.byte_class.astype(np.int64)
    for k in range(int(lens.max(initial=0))):
        live = np.flatnonzero((cur >= 0) & (lens > k))
        if not live.size:
            break
        byte = table.flat[starts[live] + k].astype(np.int64)
        cls = classes[byte]
        if hit is not None and marks is not None:
            hit[live] |= marks[cur[live], byte]
        nxt = dfa.trans[cur[live], cls]
        if covered is not None:
            ok = nxt >= 0
            covered[cur[live][ok], cls[ok]] = True
        cur[live] = nxt
        if died is not None:
            died[live[nxt < 0]] = k
    return cur


def _one_byte_path(dfa: Dfa, table: TokenTable) -> bool:
    """A byte path to acceptance whose every byte is an ordinary one-byte token."""
    lens = np.diff(table.offsets)
    single = np.flatnonzero(table.walkable & (lens == 1))
    covered = np.zeros(dfa.num_classes, dtype=np.bool_)
    covered[dfa.byte_class[table.flat[table.offsets[single]]].astype(np.int64)] = True
    trans = dfa.trans[:, covered]
    if dfa.counters is not None:  # a counted loop's exit (its arrivals are byte steps too)
        trans = np.concatenate([trans, dfa.counters.exit.reshape(-1, 1)], axis=1)
    seen = np.zeros(dfa.num_states, dtype=np.bool_)
    seen[0] = True
    frontier = np.array([0], dtype=np.int64)
    while frontier.size:
        if bool(dfa.accepting[frontier].any()):
            return True
        nxt = sorted_unique(trans[frontier].ravel())
        nxt = nxt[nxt >= 0]
        nxt = nxt[~seen[nxt]]
        seen[nxt] = True
        frontier = nxt.astype(np.int64)
    return False


def _token_path(dfa: Dfa, state_mask: NDArray[np.int32], masks: MaskStore, table: TokenTable) -> bool:
    """Breadth-first over the states whole tokens reach, until an accepting one."""
    exits = dfa.counters.exit.tolist() if dfa.counters is not None else None
    seen = np.zeros(dfa.num_states, dtype=np.bool_)
    seen[0] = True
    queue = deque([0])
    while queue:
        s = queue.popleft()
        if dfa.accepting[s]:
            return True
        ids = masks.allowed_ids(int(state_mask[s]))
        ids = ids[ids < table.num_tokens]
        ids = ids[table.walkable[ids]]  # EOS and special ids are never walked
        ends = sorted_unique(walk_tokens(dfa, table, s, ids))
        if exits is not None and exits[s] >= 0:
            ends = np.append(ends, exits[s])  # a loop's head: its exit, after enough arrivals
        for t in ends[ends >= 0].tolist():
            if not seen[t]:
                seen[t] = True
                queue.append(t)
    return False


def _frontier(dfa: Dfa, state_mask: NDArray[np.int32], masks: MaskStore,
              table: TokenTable) -> tuple[bytes, bytes] | None:
    """Where whole tokens stop: ``(spelled, rest)``, or None when they never stop.

    A byte step (state, class) is *covered* when an allowed token, walked from a state that
    tokens reach, takes it. ``spelled`` is a shortest byte path from the start over covered
    steps to a state with an uncovered step that the grammar needs; ``rest`` is a shortest
    way to an end from there, beginning with that step. (Covered steps of different tokens
    may combine into a path no single token sequence writes: this is a witness for people,
    not a proof; the proof is the search in :func:`_token_path`.)
    """
    covered = np.zeros((dfa.num_states, dfa.num_classes), dtype=np.bool_)
    seen = np.zeros(dfa.num_states, dtype=np.bool_)
    seen[0] = True
    queue = deque([0])
    while queue:
        s = queue.popleft()
        ids = masks.allowed_ids(int(state_mask[s]))
        ids = ids[ids < table.num_tokens]
        ends = walk_tokens(dfa, table, s, ids[table.walkable[ids]], covered=covered)
        for t in sorted_unique(ends[ends >= 0]).tolist():
            if not seen[t]:
                seen[t] = True
                queue.append(t)
    byte_of = _class_bytes(dfa)
    prev: dict[int, tuple[int, int]] = {0: (-1, -1)}
    order = deque([0])
    while order:
        s = order.popleft()
        row = dfa.trans[s]
        gaps = [c for c in range(dfa.num_classes) if row[c] >= 0 and not covered[s, c]]
        if gaps:
            tails = [bytes([byte_of[c]]) + _shortest_path(dfa, int(row[c]), dfa.accepting)[0] for c in gaps]
            spelled, t = bytearray(), s
            while prev[t][0] >= 0:
                t, b = prev[t]
                spelled.append(b)
            return bytes(reversed(spelled)), min(tails, key=len)
        for c in np.flatnonzero(covered[s]).tolist():
            t = int(row[c])
            if t not in prev:
                prev[t] = (s, byte_of[c])
                order.append(t)
    return None


def _shortest_path(dfa: Dfa, start: int, goal: NDArray[np.bool_]) -> tuple[bytes, int]:
    """Bytes of a shortest DFA path from ``start`` to a ``goal`` state, and that state (-1: none)."""
    byte_of = _class_bytes(dfa)
    prev: dict[int, tuple[int, int]] = {start: (-1, -1)}
    queue = deque([start])
    while queue:
        s = queue.popleft()
        if goal[s]:
            path = bytearray()
            t = s
            while prev[t][0] >= 0:
                t, b = prev[t]
                path.append(b)
            return bytes(reversed(path)), s
        for c, t in enumerate(dfa.trans[s].tolist()):
            if t >= 0 and t not in prev:
                prev[t] = (s, byte_of[c])
                queue.append(t)
    return b"", -1


def _class_bytes(dfa: Dfa) -> list[int]:
    """A byte per class, printable ASCII when the class has one (for readable witnesses)."""
    best = [-1] * dfa.num_classes
    for b, c in sorted(enumerate(dfa.byte_class.tolist()), key=lambda bc: (not 0x20 < bc[0] < 0x7F, bc[0])):
        if best[c] < 0:
            best[c] = b
    return best


def _show(data: bytes) -> str:
    return repr(data.decode("utf-8", errors="backslashreplace"))


def _char_len(lead: int) -> int:
    """Bytes of the UTF-8 character that ``lead`` begins (1 for a stray byte)."""
    return 4 if lead >= 0xF0 else 3 if lead >= 0xE0 else 2 if lead >= 0xC0 else 1
