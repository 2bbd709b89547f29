"""Grammar IR: byte-level regular expressions as frozen trees.

Front ends produce a :class:`Grammar` (a start rule plus named rules) whose bodies are these
nodes; :mod:`maskc.compiler.rules` inlines what is not recursive and
:mod:`maskc.compiler.nfa` lowers the rest. Every node describes a set of byte strings (a
:class:`RuleRef` stands for its rule's language). Constructors normalize (flatten nested
``Seq``/``Alt``, merge byte ranges) so that equal languages built the same way compare equal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Union

__all__ = [
    "children",
    "map_nodes",
    "ByteSet",
    "Seq",
    "Alt",
    "Repeat",
    "Fields",
    "Product",
    "Automaton",
    "RuleRef",
    "Grammar",
    "Node",
    "EMPTY",
    "NOTHING",
    "lit",
    "seq",
    "alt",
    "opt",
    "star",
    "plus",
    "rep",
    "byte_range",
    "byte_set",
]


def _merge(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if not (0 <= lo <= hi <= 255):
            raise ValueError(f"byte range must lie in 0..255 with lo <= hi, got ({lo}, {hi})")
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ByteSet:
    """One byte out of a set, as sorted, disjoint, non-adjacent inclusive ranges."""

    ranges: tuple[tuple[int, int], ...]
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ranges", _merge(list(self.ranges)))
        object.__setattr__(self, "_hash", hash((ByteSet, self.ranges)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[ByteSet], tuple[tuple[tuple[int, int], ...]]]:
        return ByteSet, (self.ranges,)  # rebuilt, so the cached hash is this process's

    def __eq__(self, other: object) -> bool:
        return self is other or (
            type(other) is ByteSet and self._hash == other._hash and self.ranges == other.ranges
        )

    def __contains__(self, b: int) -> bool:
        return any(lo <= b <= hi for lo, hi in self.ranges)


@dataclass(frozen=True, slots=True)
class Seq:
    """Concatenation; ``Seq(())`` is the empty string."""

    items: tuple[Node, ...]
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((Seq, self.items)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[Seq], tuple[tuple[Node, ...]]]:
        return Seq, (self.items,)

    def __eq__(self, other: object) -> bool:
        return self is other or (
            type(other) is Seq and self._hash == other._hash and self.items == other.items
        )


@dataclass(frozen=True, slots=True)
class Alt:
    """Union; ``Alt(())`` is the empty language."""

    items: tuple[Node, ...]
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((Alt, self.items)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[Alt], tuple[tuple[Node, ...]]]:
        return Alt, (self.items,)

    def __eq__(self, other: object) -> bool:
        return self is other or (
            type(other) is Alt and self._hash == other._hash and self.items == other.items
        )


@dataclass(frozen=True, slots=True)
class Repeat:
    """``item`` repeated between ``min`` and ``max`` times (``max=None``: unbounded)."""

    item: Node
    min: int
    max: int | None
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.min < 0 or (self.max is not None and self.max < self.min):
            raise ValueError(f"bad repetition bounds {{{self.min},{self.max}}}")
        object.__setattr__(self, "_hash", hash((Repeat, self.item, self.min, self.max)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[Repeat], tuple[Node, int, int | None]]:
        return Repeat, (self.item, self.min, self.max)

    def __eq__(self, other: object) -> bool:
        return self is other or (
            type(other) is Repeat and self._hash == other._hash
            and (self.item, self.min, self.max) == (other.item, other.min, other.max)
        )


@dataclass(frozen=True, slots=True)
class Fields:
    """An ordered, separator-delimited list whose optional items may be skipped.

    The language is ``first I_a (sep I_b)* close_nonempty`` over any subsequence of
    ``items`` that keeps every required item (in order), followed by ``rest`` repeated
    without bound; or ``close_empty`` when nothing is emitted. Each item is lowered once
    (linear size), which a nest of ``Alt``s could not do without copying tails.
    ``max_count`` bounds the members emitted (items and rest); ``min_count`` bounds the
    items emitted plus one if any rest member is (rest members may repeat a key, so only
    one of them surely adds a distinct one). A bound costs one copy of each member per
    count it can be reached with.
    """

    items: tuple[tuple[Node, bool], ...]  # (item, required)
    first: Node
    sep: Node
    close_nonempty: Node
    close_empty: Node | None  # None: at least one item must be emitted
    rest: Node | None = None
    min_count: int = 0  # emitted items, plus one for any rest members: at least this many
    max_count: int | None = None  # emitted items and rest members: at most this many

    def __post_init__(self) -> None:
        if self.min_count < 0 or (self.max_count is not None and self.max_count < self.min_count):
            raise ValueError(f"bad member count bounds {{{self.min_count},{self.max_count}}}")


@dataclass(frozen=True, slots=True)
class Product:
    """Intersection (``op="and"``) or difference (``op="minus"``) of two languages.

    Lowered through DFAs of both sides (a product construction), so it costs a
    determinization of each side; the front end uses it for ``pattern`` together with
    length bounds, and for keys that must differ from the declared property names.
    """

    a: Node
    b: Node
    op: str  # "and" | "minus"

    def __post_init__(self) -> None:
        if self.op not in ("and", "minus"):
            raise ValueError(f"Product op must be 'and' or 'minus', got {self.op!r}")


@dataclass(frozen=True, slots=True)
class Automaton:
    """A regular language given by a deterministic automaton over bytes (a leaf).

    For languages whose regular expressions are exponentially larger than their automata,
    such as the decimal numerals divisible by ``k`` (``k`` states). State 0 is the start;
    ``edges[s]`` holds ``(lo, hi, target)`` byte ranges, disjoint within a state;
    ``accepting`` the accepting states. Lowered state for state, so it costs its size.
    """

    edges: tuple[tuple[tuple[int, int, int], ...], ...]
    accepting: frozenset[int]

    def __post_init__(self) -> None:
        n = len(self.edges)
        if n == 0:
            raise ValueError("an automaton needs at least its start state")
        for out in self.edges:
            for lo, hi, t in out:
                if not (0 <= lo <= hi <= 255 and 0 <= t < n):
                    raise ValueError(f"bad automaton edge ({lo}, {hi}, {t}) for {n} states")
        if not all(0 <= s < n for s in self.accepting):
            raise ValueError(f"accepting states must lie in 0..{n - 1}")


@dataclass(frozen=True, slots=True)
class RuleRef:
    """A reference to the rule ``name`` of the enclosing :class:`Grammar` (may be recursive)."""

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a rule name must be a non-empty string, got {self.name!r}")


Node = Union[ByteSet, Seq, Alt, Repeat, Fields, Product, Automaton, RuleRef]


@dataclass(frozen=True, slots=True)
class Grammar:
    """A start rule plus named rules; bodies are IR nodes that may hold :class:`RuleRef`.

    Every reference must name a rule of ``rules``; a grammar without references is a
    regular language (one rule). ``Product`` operands may not hold references (an
    intersection of context-free languages is not context-free).
    """

    start: str
    rules: tuple[tuple[str, Node], ...]
    shared: frozenset[str] = frozenset()
    """Rules a front end made only so that their uses share one body (rather than each
    inlining a copy): :func:`maskc.compiler.rules.resolve_rules` inlines one used only once,
    so that it adds no pushdown frame."""
    calls: frozenset[str] = frozenset()
    """Rules that stay calls though no cycle passes them: a front end made them so that a
    bounded repeat of a large part is one call edge per position, not one copy of the
    part's automaton (``maxItems`` over a large item)."""
    inline_max_nodes: int | None = None
    """A rule on no cycle, referenced more than once, stays a call where its expansion has
    more IR nodes than this (None: :data:`maskc.compiler.rules.INLINE_MAX_NODES`): lower
    for a grammar whose front end made a rule of every shared part so that large ones are
    called rather than copied (JSON Schema's ``$ref`` targets, where copies were refused)."""

    def __post_init__(self) -> None:
        names = [n for n, _ in self.rules]
        if len(set(names)) != len(names):
            raise ValueError("rule names must be unique")
        if self.start not in names:
            raise ValueError(f"start rule {self.start!r} is not defined")

    @staticmethod
    def single(node: Node, name: str = "root") -> Grammar:
        """The grammar of one rule (a regular language when ``node`` holds no reference)."""
        return Grammar(name, ((name, node),))

    @property
    def rule_map(self) -> dict[str, Node]:
        return dict(self.rules)

    @property
    def body(self) -> Node:
        """The start rule's body."""
        return self.rule_map[self.start]

EMPTY: Node = Seq(())
NOTHING: Node = Alt(())


def byte_range(lo: int, hi: int) -> ByteSet:
    return ByteSet(((lo, hi),))


def byte_set(chars: bytes) -> ByteSet:
    return ByteSet(tuple((b, b) for b in chars))


_BYTES = tuple(ByteSet(((b, b),)) for b in range(256))  # shared: a 10k-member enum builds ~100k of them


def lit(data: bytes | str) -> Node:
    """The literal byte string ``data`` (a ``str`` is encoded as UTF-8)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if len(raw) == 1:
        return _BYTES[raw[0]]
    return Seq(tuple(_BYTES[b] for b in raw))


def seq(*items: Node) -> Node:
    flat: list[Node] = []
    for it in items:
        if isinstance(it, Seq):
            flat.extend(it.items)
        elif it == NOTHING:
            return NOTHING
        else:
            flat.append(it)
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def alt(*items: Node) -> Node:
    # a dict keeps first occurrences in order and dedupes by hash (cached on each node):
    # linear in the number of alternatives, where a list membership test was quadratic
    seen: dict[Node, None] = {}
    for it in items:
        if isinstance(it, Alt):
            seen.update(dict.fromkeys(it.items))
        else:
            seen[it] = None
    flat = list(seen)
    sets = [p for p in flat if isinstance(p, ByteSet)]
    if len(sets) > 1:
        merged = ByteSet(tuple(r for s in sets for r in s.ranges))
        first = flat.index(sets[0])
        flat = [p for p in flat if not isinstance(p, ByteSet)]
        flat.insert(first, merged)
    return flat[0] if len(flat) == 1 else Alt(tuple(flat))


def rep(item: Node, lo: int, hi: int | None) -> Node:
    if hi == 0 or item == EMPTY:
        return EMPTY
    if lo == hi == 1:
        return item
    if item == NOTHING:
        return EMPTY if lo == 0 else NOTHING
    return Repeat(item, lo, hi)


def opt(item: Node) -> Node:
    return rep(item, 0, 1)


def star(item: Node) -> Node:
    return rep(item, 0, None)


def plus(item: Node) -> Node:
    return rep(item, 1, None)


def children(node: Node) -> tuple[Node, ...]:
    """The nodes ``node`` is built from, in order (none for a byte set or a reference)."""
    if isinstance(node, (Seq, Alt)):
        return node.items
    if isinstance(node, Repeat):
        return (node.item,)
    if isinstance(node, Fields):
        parts = [x for x, _ in node.items] + [node.first, node.sep, node.close_nonempty]
        return tuple(parts + [x for x in (node.close_empty, node.rest) if x is not None])
    if isinstance(node, Product):
        return (node.a, node.b)
    return ()


def map_nodes(node: Node, match: Callable[[Node], bool], f: Callable[[Node], Node]) -> Node:
    """``node`` with every sub-node that ``match``es replaced by ``f(sub-node)``, rebuilt through
    the normalizing constructors. Sub-nodes holding no match are kept as they are, and each
    shared sub-node is visited once (the IR is a DAG)."""
    memo: dict[int, Node] = {}
    holds: dict[int, bool] = {}

    def has(n: Node) -> bool:
        got = holds.get(id(n))
        if got is None:
            got = holds[id(n)] = match(n) or any(has(c) for c in children(n))
        return got

    def go(n: Node) -> Node:
        if not has(n):
            return n
        got = memo.get(id(n))
        if got is not None:
            return got
        out: Node
        if match(n):
            out = f(n)
        elif isinstance(n, Seq):
            out = seq(*(go(x) for x in n.items))
        elif isinstance(n, Alt):
            out = alt(*(go(x) for x in n.items))
        elif isinstance(n, Repeat):
            out = rep(go(n.item), n.min, n.max)
        elif isinstance(n, Fields):
            out = Fields(
                tuple((go(x), r) for x, r in n.items), go(n.first), go(n.sep), go(n.close_nonempty),
                None if n.close_empty is None else go(n.close_empty), None if n.rest is None else go(n.rest),
                n.min_count, n.max_count,
            )
        elif isinstance(n, Product):
            out = Product(go(n.a), go(n.b), n.op)
        else:
            out = n
        memo[id(n)] = out
        return out

    return go(node)
