"""Operand automata of :class:`~maskc.compiler.ir.Product` nodes, memoized per node.

A product (intersection or difference) is lowered through a DFA of each side. The front
end nests products (a key that must match one pattern, not another, and no declared
name) and shares operands between them, so each operand is determinized once per node
object, then pruned and minimized: the product walks only pairs of minimal states.
Languages are unchanged, so the compiled grammar is too (its DFA is minimized and
numbered canonically at the end whatever the shape of the NFA).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from maskc.compiler.dfa import DEAD, Dfa, coreachable, determinize, prune
from maskc.compiler.errors import StateLimitExceeded
from maskc.compiler.ir import Node
from maskc.compiler.minimize import minimize
from maskc.compiler.nfa import lower

__all__ = ["operand_dfa", "proven_empty"]

_CACHE_SIZE = 64
# id(node) -> (node, dfa): the node is held, so its id cannot be reused while cached.
_cache: OrderedDict[int, tuple[Node, Dfa]] = OrderedDict()
_lock = threading.Lock()


def _empty_dfa() -> Dfa:
    return Dfa(np.full((1, 1), DEAD, dtype=np.int32), np.zeros(256, dtype=np.uint8), np.zeros(1, dtype=np.bool_))


def proven_empty(node: Node, *, max_states: int, deadline: float | None) -> bool:
    """Whether the regular language of ``node`` is proven empty: False when it is not, and
    when ``max_states`` leaves the question open (callers then keep what they would keep for
    a non-empty language, which is sound either way).

    Raises:
        TimeLimitExceeded: ``deadline`` passed.
    """
    try:
        dfa = determinize(lower(node, max_states=4 * max_states, deadline=deadline),
                          max_states=max_states, deadline=deadline)
    except StateLimitExceeded:
        return False
    return not bool(coreachable(dfa.trans, dfa.accepting)[0])


def operand_dfa(node: Node, *, max_states: int, deadline: float | None) -> Dfa:
    """A DFA of ``node``'s language: pruned and minimized (one dead-end start state if empty).

    Raises:
        StateLimitExceeded: the determinization needs more than ``max_states`` states.
        TimeLimitExceeded: ``deadline`` passed.
    """
    with _lock:
        got = _cache.get(id(node))
        if got is not None and got[0] is node:
            _cache.move_to_end(id(node))
    if got is not None and got[0] is node:
        dfa = got[1]
        if dfa.num_states > max_states:
            raise StateLimitExceeded("DFA states", limit=max_states)
        return dfa
    raw = determinize(lower(node, max_states=max_states, deadline=deadline, direct=True), max_states=max_states,
                      deadline=deadline)
    if not coreachable(raw.trans, raw.accepting)[0]:
        dfa = _empty_dfa()
    else:
        dfa = minimize(prune(raw), deadline=deadline)
    with _lock:
        _cache[id(node)] = (node, dfa)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return dfa
