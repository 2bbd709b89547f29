"""GBNF (llama.cpp's grammar format) to Grammar IR.

Owns the GBNF text → :class:`~maskc.compiler.ir.Grammar` step: rules ``name ::= ...`` with
``root`` as the start rule, literals and character classes over code points (encoded as
UTF-8 bytes through :mod:`maskc.compiler.utf8`), grouping, alternation, repetition and
``#`` comments. Every rule reference stays a :class:`~maskc.compiler.ir.RuleRef`, so
recursion is kept for the compiler core to inline or call. Malformed input raises
:class:`~maskc.compiler.errors.GrammarSyntaxError` with a line and column, never a traceback.
"""

from __future__ import annotations

from maskc.compiler.errors import GrammarSyntaxError
from maskc.compiler.ir import (
    EMPTY, Alt, ByteSet, Grammar, Node, Repeat, RuleRef, Seq, alt, lit, opt, plus, rep, seq, star,
)
from maskc.compiler.utf8 import MAX_CODE_POINT, SURROGATES, complement, normalize_ranges, utf8_node

__all__ = ["GBNF_EXTENSIONS", "START_RULE", "gbnf_to_grammar", "canonical_gbnf"]

GBNF_EXTENSIONS = (".gbnf",)
START_RULE = "root"

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
_HEX = frozenset("0123456789abcdefABCDEF")
_SPACE = frozenset(" \t\r\n")
# single-character escapes llama.cpp accepts, plus `\-` (a literal hyphen inside a class)
_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
# deeper nesting than this is refused instead of exhausting Python's stack
_MAX_NESTING = 200


def canonical_gbnf(text: str) -> str:
    """The grammar's identity: ``\\r\\n`` made ``\\n`` and trailing blanks cut from each line.

    Only ASCII blanks are cut: a GBNF literal or class cannot span a line end, so they are
    never part of the language.
    """
    lines = text.replace("\r\n", "\n").split("\n")
    return "\n".join(line.rstrip(" \t\r\f\v") for line in lines)


def gbnf_to_grammar(text: str) -> Grammar:
    """Parse GBNF text into a Grammar whose start rule is ``root``.

    The result holds the rules reachable from ``root``, in definition order; references
    stay :class:`RuleRef` (recursion included). Escapes (``\\xXX``, ``\\uXXXX``,
    ``\\UXXXXXXXX``) denote code points, so ``"\\x85"`` is the two bytes ``C2 85``.

    Example::

        g = gbnf_to_grammar('root ::= "a" root? "b"')

    Args:
        text: the grammar source.

    Returns:
        The grammar IR.

    Raises:
        GrammarSyntaxError: malformed text (with line, column and a caret), an undefined
            rule, no ``root`` rule, a rule defined twice, or a rule that derives no finite
            string.
    """
    return _Parser(text.replace("\r\n", "\n")).grammar()


class _Parser:
    """Recursive descent over the text; builds IR directly and records where names occur."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.rules: dict[str, Node] = {}
        self.defined_at: dict[str, int] = {}
        self.refs: list[tuple[str, int]] = []
        self.class_cache: dict[tuple[tuple[int, int], ...], Node] = {}

    # -- errors ---------------------------------------------------------------------------

    def error(self, message: str, pos: int, hint: str | None = None) -> GrammarSyntaxError:
        pos = min(pos, len(self.text))
        line_start = self.text.rfind("\n", 0, pos) + 1
        line_end = self.text.find("\n", pos)
        line_end = len(self.text) if line_end < 0 else line_end
        return GrammarSyntaxError(
            message,
            line=self.text.count("\n", 0, pos) + 1,
            column=pos - line_start + 1,
            line_text=self.text[line_start:line_end],
            hint=hint,
        )

    # -- lexical --------------------------------------------------------------------------

    def peek(self, k: int = 0) -> str:
        i = self.pos + k
        return self.text[i] if i < len(self.text) else ""

    def skip_space(self) -> None:
        """Skip blanks, line ends and ``#`` comments."""
        text, n = self.text, len(self.text)
        while self.pos < n:
            c = text[self.pos]
            if c in _SPACE:
                self.pos += 1
            elif c == "#":
                end = text.find("\n", self.pos)
                self.pos = n if end < 0 else end
            else:
                return

    def name_end(self, i: int) -> int:
        while i < len(self.text) and self.text[i] in _NAME_CHARS:
            i += 1
        return i

    def starts_rule(self) -> bool:
        """Whether a rule definition ``name ::=`` starts at the current position."""
        i = self.name_end(self.pos)
        while i < len(self.text) and self.text[i] in " \t":
            i += 1
        return i > self.pos and self.text.startswith("::=", i)

    # -- grammar --------------------------------------------------------------------------

    def grammar(self) -> Grammar:
        while True:
            self.skip_space()
            if self.pos >= len(self.text):
                break
            self.rule()
        for name, at in self.refs:
            if name not in self.rules:
                raise self.error(f"undefined rule '{name}'", at, hint=f"define it: {name} ::= ...")
        if START_RULE not in self.rules:
            raise self.error(
                "no 'root' rule: GBNF starts at the rule named 'root'", 0, hint="add: root ::= ..."
            )
        self.check_productive()
        keep = _reachable(self.rules, START_RULE)
        return Grammar(START_RULE, tuple((n, b) for n, b in self.rules.items() if n in keep))

    def rule(self) -> None:
        start = self.pos
        end = self.name_end(start)
        if end == start:
            c = self.peek()
            raise self.error(
                f"expected a rule name, got {c!r}", start,
                hint="rules read `name ::= ...`; names use letters, digits and '-'",
            )
        name = self.text[start:end]
        self.pos = end
        while self.peek() in (" ", "\t"):
            self.pos += 1
        if not self.text.startswith("::=", self.pos):
            raise self.error(f"expected '::=' after the rule name '{name}'", self.pos)
        if name in self.defined_at:
            first = self.text.count("\n", 0, self.defined_at[name]) + 1
            raise self.error(f"rule '{name}' is defined twice (first on line {first})", start)
        self.defined_at[name] = start
        self.pos += 3
        self.rules[name] = self.alternates(0)
        if self.peek() == ")":
            raise self.error("unbalanced ')': no '(' to close", self.pos)

    def alternates(self, depth: int) -> Node:
        options = [self.sequence(depth)]
        while self.peek() == "|":
            self.pos += 1
            options.append(self.sequence(depth))
        return alt(*options)

    def sequence(self, depth: int) -> Node:
        items: list[Node] = []
        while True:
            self.skip_space()
            c = self.peek()
            if c in ("", "|", ")"):
                break
            if c in _NAME_CHARS and self.starts_rule():
                break  # the next rule begins (inside a group, the caller reports the '(')
            at = self.pos
            if c in "*+?{":
                raise self.error(f"repetition '{c}' has no item to repeat", at)
            items.append(self.postfix(self.item(depth), depth))
        return seq(*items)

    def item(self, depth: int) -> Node:
        c, at = self.peek(), self.pos
        if c == '"':
            return self.literal()
        if c == "[":
            return self.char_class()
        if c == ".":
            self.pos += 1
            return self.chars([(0, MAX_CODE_POINT)])
        if c == "(":
            if depth >= _MAX_NESTING:
                raise self.error(f"groups nested deeper than {_MAX_NESTING}", at)
            self.pos += 1
            body = self.alternates(depth + 1)
            if self.peek() != ")":
                raise self.error("unbalanced '(': no ')' closes this group", at)
            self.pos += 1
            return body
        if c in _NAME_CHARS:
            self.pos = self.name_end(at)
            name = self.text[at : self.pos]
            self.refs.append((name, at))
            return RuleRef(name)
        if c == "]":
            raise self.error("unbalanced ']': no '[' opens a character class", at)
        if c == "<":
            raise self.error("token references (<...>) are not supported", at)
        raise self.error(f"unexpected character {c!r}", at)

    def postfix(self, node: Node, depth: int) -> Node:
        while True:
            save = self.pos
            self.skip_space()
            c, at = self.peek(), self.pos
            if c == "*":
                node = star(node)
            elif c == "+":
                node = plus(node)
            elif c == "?":
                node = opt(node)
            elif c == "{":
                self.pos += 1
                lo, hi = self.bounds(at)
                node = rep(node, lo, hi)
                continue
            else:
                self.pos = save
                return node
            self.pos += 1

    def bounds(self, at: int) -> tuple[int, int | None]:
        """``{m}``, ``{m,}`` or ``{m,n}`` after the ``{`` at ``at``."""
        lo = self.number()
        hi: int | None = lo
        self.skip_space()
        if self.peek() == ",":
            self.pos += 1
            self.skip_space()
            hi = self.number() if _is_digit(self.peek()) else None
            self.skip_space()
        if self.peek() != "}":
            raise self.error("unbalanced '{': expected '}' to close the repetition", at)
        self.pos += 1
        if hi is not None and hi < lo:
            raise self.error(f"bad repetition bounds {{{lo},{hi}}}: the maximum is below the minimum", at)
        return lo, hi

    def number(self) -> int:
        self.skip_space()
        start = self.pos
        while _is_digit(self.peek()):
            self.pos += 1
        if start == self.pos:
            raise self.error("expected a number in the repetition bounds", start)
        return int(self.text[start : self.pos])

    def literal(self) -> Node:
        open_at = self.pos
        self.pos += 1
        out: list[str] = []
        while True:
            c = self.peek()
            if c in ("", "\n"):
                raise self.error("unterminated string literal: no closing '\"' on this line", open_at)
            if c == '"':
                self.pos += 1
                break
            at = self.pos
            cp = self.char()
            if SURROGATES[0] <= cp <= SURROGATES[1]:
                raise self.error(f"bad escape: U+{cp:04X} is a surrogate, not a character", at)
            out.append(chr(cp))
        return lit("".join(out)) if out else EMPTY

    def char_class(self) -> Node:
        open_at = self.pos
        self.pos += 1
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges: list[tuple[int, int]] = []
        while True:
            c = self.peek()
            if c in ("", "\n"):
                raise self.error("unbalanced '[': no ']' closes this character class", open_at)
            if c == "]":
                self.pos += 1
                break
            at = self.pos
            lo = self.char()
            hi = lo
            if self.peek() == "-" and self.peek(1) not in ("]", "", "\n"):
                self.pos += 1
                hi = self.char()
                if hi < lo:
                    raise self.error(
                        f"bad range: U+{lo:04X}-U+{hi:04X} is reversed (its end is below its start)", at
                    )
            ranges.append((lo, hi))
        # surrogates have no UTF-8 form: a class never matches one, negated or not
        return self.chars(complement(ranges) if negated else normalize_ranges(ranges))

    def char(self) -> int:
        """One code point of a literal or class, with its escape resolved."""
        c = self.peek()
        if c != "\\":
            self.pos += 1
            return ord(c)
        at = self.pos
        e = self.peek(1)
        if e in _SIMPLE_ESCAPES:
            self.pos += 2
            return ord(_SIMPLE_ESCAPES[e])
        if e in _HEX_ESCAPES:
            size = _HEX_ESCAPES[e]
            digits = self.text[at + 2 : at + 2 + size]
            if len(digits) != size or any(d not in _HEX for d in digits):
                raise self.error(f"bad escape: '\\{e}' needs {size} hex digits", at)
            cp = int(digits, 16)
            if cp > MAX_CODE_POINT:
                raise self.error(f"bad escape: U+{cp:X} is beyond U+10FFFF", at)
            self.pos = at + 2 + size
            return cp
        shown = "end of line" if e in ("", "\n") else repr("\\" + e)
        raise self.error(
            f"bad escape {shown}", at,
            hint="GBNF escapes: \\xXX \\uXXXX \\UXXXXXXXX \\n \\r \\t \\\\ \\\" \\[ \\] \\-",
        )

    def chars(self, ranges: list[tuple[int, int]]) -> Node:
        key = tuple(ranges)
        node = self.class_cache.get(key)
        if node is None:
            node = utf8_node(ranges)
            self.class_cache[key] = node
        return node

    # -- semantic checks ------------------------------------------------------------------

    def check_productive(self) -> None:
        """Refuse a rule that derives no finite string (least fixpoint over the rules)."""
        productive: set[str] = set()
        changed = True
        while changed:
            changed = False
            for name, body in self.rules.items():
                if name not in productive and _productive(body, productive):
                    productive.add(name)
                    changed = True
        dead = [n for n in self.rules if n not in productive]
        if not dead:
            return
        # blame a rule whose dead references all lead back to it (the cause, not a user of it)
        deps = {n: _refs(self.rules[n]) & set(dead) for n in dead}
        reach = {n: _closure(n, deps) for n in dead}
        culprit = next(n for n in dead if all(n in reach[m] for m in reach[n]))
        others = [n for n in dead if n != culprit]
        also = f"; so can: {', '.join(others)}" if others else ""
        raise self.error(
            f"rule '{culprit}' can never finish: no finite string derives from it{also}",
            self.defined_at[culprit],
            hint="give it (or a rule it needs) an alternative without the recursion",
        )


def _is_digit(c: str) -> bool:
    return c != "" and c in "0123456789"


def _productive(node: Node, productive: set[str]) -> bool:
    if isinstance(node, ByteSet):
        return bool(node.ranges)
    if isinstance(node, RuleRef):
        return node.name in productive
    if isinstance(node, Seq):
        return all(_productive(it, productive) for it in node.items)
    if isinstance(node, Alt):
        return any(_productive(it, productive) for it in node.items)
    if isinstance(node, Repeat):
        return node.min == 0 or _productive(node.item, productive)
    raise TypeError(f"the GBNF front end builds no {type(node).__name__}")


def _refs(node: Node) -> set[str]:
    if isinstance(node, RuleRef):
        return {node.name}
    if isinstance(node, (Seq, Alt)):
        out: set[str] = set()
        for it in node.items:
            out |= _refs(it)
        return out
    if isinstance(node, Repeat):
        return _refs(node.item)
    return set()  # a ByteSet (the GBNF front end builds no Fields or Product)


def _closure(start: str, deps: dict[str, set[str]]) -> set[str]:
    """Rules reachable from ``start`` through ``deps`` in one or more steps."""
    seen: set[str] = set()
    todo = list(deps.get(start, ()))
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(deps.get(n, ()))
    return seen


def _reachable(rules: dict[str, Node], start: str) -> set[str]:
    deps = {n: _refs(b) for n, b in rules.items()}
    return _closure(start, deps) | {start}

