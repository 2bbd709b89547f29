"""An independent GBNF recognizer and string generator, used as a test oracle.

Shares no code with :mod:`maskc.compiler.frontends.gbnf`: its own small parser (to tuples),
a recognizer that decides membership of a byte string by a least fixpoint over
(rule, position) → end positions (so left recursion and nullable rules are handled), a
depth-bounded random generator of strings in the language, and a one-byte mutator.
Characters are code points read from strict UTF-8, so invalid bytes never match a class.
"""

from __future__ import annotations

import random
import re
import sys
from dataclasses import dataclass, field

__all__ = ["OracleGrammar", "parse", "recognize", "generate", "mutate"]

# AST: ("lit", bytes) | ("cls", ranges) | ("ref", name) | ("seq", items) | ("alt", items)
#      | ("rep", item, lo, hi)  (hi None: unbounded); ranges are code-point pairs.
Ast = tuple[object, ...]
Ranges = tuple[tuple[int, int], ...]

_TOKEN = re.compile(
    r"""(?P<ws>(?:[ \t\r\n]|\#[^\n]*)+)
      | (?P<define>::=)
      | (?P<name>[a-zA-Z0-9-]+)
      | (?P<lit>"(?:[^"\\\n]|\\.)*")
      | (?P<cls>\[(?:[^\]\\\n]|\\.)*\])
      | (?P<bounds>\{\s*\d+\s*(?:,\s*\d*\s*)?\})
      | (?P<op>[|()*+?.])""",
    re.VERBOSE,
)
_ESC = {"n": 10, "r": 13, "t": 9}
_HEXLEN = {"x": 2, "u": 4, "U": 8}
_TOP = 0x10FFFF


def _unescape(body: str) -> list[int]:
    out: list[int] = []
    i = 0
    while i < len(body):
        if body[i] == "\\":
            e = body[i + 1]
            if e in _HEXLEN:
                n = _HEXLEN[e]
                out.append(int(body[i + 2 : i + 2 + n], 16))
                i += 2 + n
            else:
                out.append(_ESC.get(e, ord(e)))
                i += 2
        else:
            out.append(ord(body[i]))
            i += 1
    return out


def _class(text: str) -> Ranges:
    negated = text.startswith("[^")
    # re-tokenize the inside into (code point, was-a-plain-hyphen) pairs
    inner = text[2 if negated else 1 : -1]
    units: list[tuple[int, bool]] = []
    for m in re.finditer(r"\\x[0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}|\\U[0-9a-fA-F]{8}|\\.|.", inner, re.S):
        units.append((_unescape(m.group())[0], m.group() == "-"))
    ranges: list[tuple[int, int]] = []
    i = 0
    while i < len(units):
        if i + 2 < len(units) and units[i + 1][1]:
            ranges.append((units[i][0], units[i + 2][0]))
            i += 3
        else:
            ranges.append((units[i][0], units[i][0]))
            i += 1
    if negated:
        ranges.sort()
        comp: list[tuple[int, int]] = []
        nxt = 0
        for lo, hi in ranges:
            if lo > nxt:
                comp.append((nxt, lo - 1))
            nxt = max(nxt, hi + 1)
        if nxt <= _TOP:
            comp.append((nxt, _TOP))
        ranges = comp
    # surrogates are never decoded from strict UTF-8, so they need no removal here
    return tuple(ranges)


@dataclass
class OracleGrammar:
    rules: dict[str, Ast]
    min_depth: dict[str, int] = field(default_factory=dict)


def parse(text: str) -> OracleGrammar:
    """Parse GBNF into tuples. Assumes well-formed input (the oracle checks languages)."""
    toks: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"oracle cannot tokenize at {pos}: {text[pos:pos + 20]!r}")
        pos = m.end()
        kind = m.lastgroup or ""
        if kind != "ws":
            toks.append((kind, m.group()))
    rules: dict[str, Ast] = {}
    i = 0

    def at_rule(j: int) -> bool:
        return j + 1 < len(toks) and toks[j][0] == "name" and toks[j + 1][0] == "define"

    def alternates(j: int) -> tuple[Ast, int]:
        opts = []
        s, j = sequence(j)
        opts.append(s)
        while j < len(toks) and toks[j] == ("op", "|"):
            s, j = sequence(j + 1)
            opts.append(s)
        return ("alt", tuple(opts)), j

    def sequence(j: int) -> tuple[Ast, int]:
        items: list[Ast] = []
        while j < len(toks) and not at_rule(j) and toks[j][1] not in ("|", ")"):
            kind, val = toks[j]
            j += 1
            node: Ast
            if kind == "name":
                node = ("ref", val)
            elif kind == "lit":
                node = ("lit", "".join(map(chr, _unescape(val[1:-1]))).encode("utf-8"))
            elif kind == "cls":
                node = ("cls", _class(val))
            elif val == ".":
                node = ("cls", ((0, _TOP),))
            elif val == "(":
                node, j = alternates(j)
                assert toks[j] == ("op", ")"), "oracle: unbalanced group"
                j += 1
            else:
                raise ValueError(f"oracle: unexpected token {val!r}")
            while j < len(toks) and (toks[j][0] == "bounds" or toks[j][1] in ("*", "+", "?")):
                val = toks[j][1]
                j += 1
                if val == "*":
                    node = ("rep", node, 0, None)
                elif val == "+":
                    node = ("rep", node, 1, None)
                elif val == "?":
                    node = ("rep", node, 0, 1)
                else:
                    nums = [p.strip() for p in val[1:-1].split(",")]
                    lo = int(nums[0])
                    hi = lo if len(nums) == 1 else (int(nums[1]) if nums[1] else None)
                    node = ("rep", node, lo, hi)
            items.append(node)
        return ("seq", tuple(items)), j

    while i < len(toks):
        assert at_rule(i), f"oracle: expected a rule at token {toks[i]}"
        name = toks[i][1]
        body, i = alternates(i + 2)
        rules[name] = body
    g = OracleGrammar(rules)
    _compute_min_depth(g)
    return g


def _compute_min_depth(g: OracleGrammar) -> None:
    """Fewest nested rule expansions needed to finish each rule (a fixpoint from infinity)."""
    inf = 1 << 30
    depth = {n: inf for n in g.rules}
    changed = True
    while changed:
        changed = False
        for n, body in g.rules.items():
            d = min(inf, 1 + _node_depth(body, depth))
            if d < depth[n]:
                depth[n] = d
                changed = True
    g.min_depth = depth


def _node_depth(node: Ast, depth: dict[str, int]) -> int:
    kind = node[0]
    if kind == "lit":
        return 0
    if kind == "cls":
        return 0 if node[1] else 1 << 30
    if kind == "ref":
        return depth[str(node[1])]
    if kind == "seq":
        return max((_node_depth(x, depth) for x in _items(node)), default=0)
    if kind == "alt":
        return min((_node_depth(x, depth) for x in _items(node)), default=1 << 30)
    lo = node[2]
    return 0 if lo == 0 else _node_depth(_sub(node), depth)


def _items(node: Ast) -> tuple[Ast, ...]:
    items = node[1]
    assert isinstance(items, tuple)
    return items


def _sub(node: Ast) -> Ast:
    sub = node[1]
    assert isinstance(sub, tuple)
    return sub


# -- recognizer ---------------------------------------------------------------------------


def _decode_at(data: bytes, i: int) -> tuple[int, int] | None:
    """(code point, length) of the strict UTF-8 character at ``i``, or None."""
    if i >= len(data):
        return None
    b = data[i]
    n = 1 if b < 0x80 else 2 if 0xC0 <= b < 0xE0 else 3 if 0xE0 <= b < 0xF0 else 4 if 0xF0 <= b < 0xF8 else 0
    if n == 0:
        return None
    try:
        ch = data[i : i + n].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return (ord(ch), n) if len(ch) == 1 else None


class _Recognizer:
    def __init__(self, g: OracleGrammar, data: bytes) -> None:
        self.g = g
        self.data = data
        self.table: dict[tuple[str, int], frozenset[int]] = {}
        self.visited: set[tuple[str, int]] = set()
        self.memo: dict[tuple[int, int], frozenset[int]] = {}
        self.changed = False

    def rule(self, name: str, i: int) -> frozenset[int]:
        key = (name, i)
        old = self.table.get(key, frozenset())
        if key in self.visited:
            return old
        self.visited.add(key)
        new = old | self.ends(self.g.rules[name], i)
        if new != old:
            self.table[key] = new
            self.changed = True
        return new

    def ends(self, node: Ast, i: int) -> frozenset[int]:
        key = (id(node), i)
        got = self.memo.get(key)
        if got is None:
            got = self._ends(node, i)
            self.memo[key] = got
        return got

    def _ends(self, node: Ast, i: int) -> frozenset[int]:
        kind = node[0]
        if kind == "lit":
            lit = node[1]
            assert isinstance(lit, bytes)
            return frozenset([i + len(lit)]) if self.data.startswith(lit, i) else frozenset()
        if kind == "cls":
            dec = _decode_at(self.data, i)
            if dec is None:
                return frozenset()
            cp, n = dec
            ranges = node[1]
            assert isinstance(ranges, tuple)
            return frozenset([i + n]) if any(lo <= cp <= hi for lo, hi in ranges) else frozenset()
        if kind == "ref":
            return self.rule(str(node[1]), i)
        if kind == "seq":
            cur = frozenset([i])
            for item in _items(node):
                cur = frozenset(e for s in cur for e in self.ends(item, s))
            return cur
        if kind == "alt":
            return frozenset(e for item in _items(node) for e in self.ends(item, i))
        item, lo, hi = _sub(node), node[2], node[3]
        assert isinstance(lo, int) and (hi is None or isinstance(hi, int))
        cur = frozenset([i])
        for _ in range(lo):
            cur = frozenset(e for s in cur for e in self.ends(item, s))
        result = set(cur)
        frontier = set(cur)
        k = lo
        while frontier and (hi is None or k < hi):
            k += 1
            step = {e for s in frontier for e in self.ends(item, s)}
            # unbounded: only new positions need expanding; bounded: the count matters
            frontier = step - result if hi is None else step
            result |= step
        return frozenset(result)


def recognize(grammar: OracleGrammar | str, data: bytes) -> bool:
    """Whether ``data`` is a string of the grammar's language (from rule ``root``)."""
    g = parse(grammar) if isinstance(grammar, str) else grammar
    r = _Recognizer(g, data)
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 20000))
    try:
        while True:
            r.changed = False
            r.visited = set()
            r.memo = {}
            r.rule("root", 0)
            if not r.changed:
                break
    finally:
        sys.setrecursionlimit(old_limit)
    return len(data) in r.table.get(("root", 0), frozenset())


# -- generator and mutator ----------------------------------------------------------------

_ASCII = (0x20, 0x7E)


def _pick_char(ranges: Ranges, rng: random.Random) -> int:
    while True:
        if rng.random() < 0.6:  # prefer printable ASCII where the class has some
            ascii_parts = [(max(lo, _ASCII[0]), min(hi, _ASCII[1])) for lo, hi in ranges]
            ascii_parts = [p for p in ascii_parts if p[0] <= p[1]]
            if ascii_parts:
                lo, hi = rng.choice(ascii_parts)
                return rng.randint(lo, hi)
        lo, hi = rng.choice(ranges)
        if rng.random() < 0.5:
            hi = min(hi, lo + 200)  # near the start of a range: real characters, mostly
        cp = rng.randint(lo, hi)
        if not 0xD800 <= cp <= 0xDFFF:
            return cp


def generate(grammar_text: str | OracleGrammar, rng: random.Random, max_depth: int = 8) -> bytes:
    """A random string of the language, with rule nesting kept near ``max_depth``.

    Below ``max_depth`` choices are random (repetitions add up to 3 beyond their minimum);
    at it, every choice takes the alternative that finishes in the fewest expansions.
    """
    g = parse(grammar_text) if isinstance(grammar_text, str) else grammar_text
    out = bytearray()

    def gen(node: Ast, depth: int) -> None:
        kind = node[0]
        deep = depth >= max_depth
        if kind == "lit":
            lit = node[1]
            assert isinstance(lit, bytes)
            out.extend(lit)
        elif kind == "cls":
            ranges = node[1]
            assert isinstance(ranges, tuple)
            out.extend(chr(_pick_char(ranges, rng)).encode("utf-8"))
        elif kind == "ref":
            gen(g.rules[str(node[1])], depth + 1)
        elif kind == "seq":
            for item in _items(node):
                gen(item, depth)
        elif kind == "alt":
            items = _items(node)
            costs = [_node_depth(x, g.min_depth) for x in items]
            ok = [x for x, c in zip(items, costs) if c < 1 << 30]
            if deep or depth + 1 >= max_depth:
                best = min(costs)
                ok = [x for x, c in zip(items, costs) if c == best]
            gen(rng.choice(ok), depth)
        else:
            lo, hi = node[2], node[3]
            assert isinstance(lo, int) and (hi is None or isinstance(hi, int))
            extra = 0 if deep else rng.randint(0, 3 if depth < max_depth // 2 else 1)
            count = lo + extra if hi is None else min(hi, lo + extra)
            for _ in range(count):
                gen(_sub(node), depth)

    gen(g.rules["root"], 1)
    return bytes(out)


def mutate(data: bytes, rng: random.Random) -> bytes:
    """``data`` with one byte deleted, inserted or replaced (at a random place)."""
    ops = ["insert"] if not data else ["delete", "insert", "replace"]
    op = rng.choice(ops)
    i = rng.randrange(len(data) + (1 if op == "insert" else 0))
    new = rng.choice(data) if data and rng.random() < 0.5 else rng.randrange(256)
    if op == "delete":
        return data[:i] + data[i + 1 :]
    if op == "insert":
        return data[:i] + bytes([new]) + data[i:]
    return data[:i] + bytes([new]) + data[i + 1 :]

