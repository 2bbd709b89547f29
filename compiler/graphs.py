"""Graph algorithms the compiler's analyses share."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

__all__ = ["strongly_connected"]

T = TypeVar("T", bound=Hashable)


def strongly_connected(nodes: Sequence[T], succ: Mapping[T, Sequence[T]]) -> list[list[T]]:
    """Strongly connected components, each emitted after every component it reaches (Tarjan)."""
    index: dict[T, int] = {}
    low: dict[T, int] = {}
    on: set[T] = set()
    stack: list[T] = []
    out: list[list[T]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[T, int]] = [(root, 0)]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, i = work[-1]
            nxt = succ[v]
            if i < len(nxt):
                work[-1] = (v, i + 1)
                w = nxt[i]
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, 0))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
            if low[v] == index[v]:
                comp: list[T] = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(comp)
    return out
