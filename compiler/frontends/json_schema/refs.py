"""``$ref`` resolution and the rules of recursive schemas.

A reference resolves inside the document only: ``#`` (the root), ``#/json/pointer``
(RFC 6901 ``~0``/``~1`` and URI percent-escapes) or ``#anchor`` (``$anchor``, a draft-7
``$id: "#anchor"`` or ``$dynamicAnchor``). A target that is not being expanded is inlined,
so a schema without recursion compiles to one regular rule, exactly as before rules
existed. A target reached again while it is being expanded becomes a :class:`RuleRef` to
a rule named by its JSON pointer (``#/$defs/node``, ``#`` for the root); its body is the
target compiled once. Under ``pretty`` whitespace the indentation depends on the nesting
depth, so rules are made per (target, depth), named ``#/$defs/node@3``, and a reference
deeper than ``options.max_depth`` is the empty language (a sound restriction: deeper
documents are not generated). Free-form values are the rule ``any`` (``any@d``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from urllib.parse import unquote, urldefrag

from maskc.compiler.errors import SchemaError, UnsupportedKeyword
from maskc.compiler.frontends.json_schema.base import ANNOTATIONS, Base, JsonValue, ptr
from maskc.compiler.frontends.json_text import CANONICAL_ANY_CHAR, JSON_CHAR, NUMBER, Layout
from maskc.compiler.jsonpointer import resolve as resolve_pointer
from maskc.compiler.ir import (
    NOTHING,
    Alt,
    ByteSet,
    Fields,
    Grammar,
    Node,
    Repeat,
    RuleRef,
    Seq,
    alt,
    children,
    lit,
    map_nodes,
    rep,
    seq,
)

__all__ = ["RefsMixin", "ANY_RULE", "ONEOF_ANY_DEPTH", "has_ref", "map_refs", "productive_rules"]

ANY_RULE = "any"
ONEOF_ANY_DEPTH = 3
"""Nesting of a free-form value inside overlapping ``oneOf`` branches (kept regular there)."""
_ANCHOR_KEYS = ("$anchor", "$dynamicAnchor")
_DATA_KEYS = frozenset({"enum", "const", "default", "examples", "example"})  # values, not schemas
_REMOTE_HINT = "bundle the referenced schema into $defs and refer to it as #/$defs/NAME"


class RefsMixin(Base):
    """Resolves references and turns recursion into rules."""

    _anchors: dict[str, tuple[JsonValue, str]] | None = None

    # -- resolution ----------------------------------------------------------------------

    def resolve(self, ref: JsonValue, pointer: str) -> tuple[JsonValue, str]:
        """The schema ``ref`` names and its location (a JSON pointer, ``""`` for the root).

        Raises:
            SchemaError: ``ref`` is not a string or points nowhere in the document.
            UnsupportedKeyword: ``ref`` names another document.
        """
        if not isinstance(ref, str):
            raise SchemaError("$ref must be a string", pointer=pointer)
        base, frag = urldefrag(ref)
        if base:
            own = self.root.get("$id") if isinstance(self.root, dict) else None
            if not (isinstance(own, str) and urldefrag(own)[0] == base):
                raise UnsupportedKeyword(
                    "$ref", pointer=pointer,
                    detail=f"{ref!r} names another document (a relative $id-based URI or a remote "
                    "URL); only references inside this schema (#, #/pointer, #anchor) are resolved",
                    hint=_REMOTE_HINT,
                )
        elif not ref.startswith("#"):
            raise UnsupportedKeyword("$ref", pointer=pointer, detail=f"unsupported reference {ref!r}", hint=_REMOTE_HINT)
        frag = unquote(frag)
        if frag and not frag.startswith("/"):
            found = self.anchors().get(frag)
            if found is None:
                raise SchemaError(f"$ref {ref!r} names no $anchor of this schema", pointer=pointer)
            return found
        try:
            target: JsonValue = resolve_pointer(self.root, frag)
        except LookupError:
            raise SchemaError(f"$ref {ref!r} points nowhere", pointer=pointer) from None
        return target, frag

    def anchors(self) -> dict[str, tuple[JsonValue, str]]:
        """Plain-name fragments of the document: anchor -> (schema, its pointer)."""
        if self._anchors is None:
            found: dict[str, tuple[JsonValue, str]] = {}
            for schema, where in _subschemas(self.root, ""):
                names = [schema[k] for k in _ANCHOR_KEYS if isinstance(schema.get(k), str)]
                sid = schema.get("$id")
                if isinstance(sid, str) and sid.startswith("#") and not sid.startswith("#/"):
                    names.append(sid[1:])  # draft 7: "$id": "#name"
                for name in dict.fromkeys(names):
                    if name in found and found[name][1] != where:
                        raise SchemaError(f"$anchor {name!r} is defined twice", pointer=where)
                    found[name] = (schema, where)
            self._anchors = found
        return self._anchors

    def deref(self, schema: JsonValue, pointer: str) -> tuple[JsonValue, str]:
        seen: list[str] = []
        while isinstance(schema, dict) and "$ref" in schema and set(schema) - ANNOTATIONS == {"$ref"}:
            schema, pointer = self.resolve(schema["$ref"], pointer)
            if pointer in seen:
                raise SchemaError("$ref chain loops without reaching a schema: " + " -> ".join(["#" + p for p in seen + [pointer]]), pointer=pointer)
            seen.append(pointer)
        return schema, pointer

    # -- references and rules ------------------------------------------------------------

    def reference(self, schema: dict[str, JsonValue], pointer: str, depth: int) -> Node:
        """A schema with ``$ref``: the target, inlined or as a rule; siblings merged by allOf."""
        target, tptr = self.resolve(schema["$ref"], pointer)
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        if set(rest) - ANNOTATIONS:
            return self.merged({"allOf": [target, rest]}, pointer, depth, "$ref")
        return self.expand("#" + tptr, lambda: self.value(target, tptr or "#", depth), depth, "$ref", pointer)

    def rule_name(self, key: str, depth: int, fallback: str) -> str:
        """The rule name of an expansion key: its pointer, ``@depth`` under pretty."""
        name = self.rule_names.get(key)
        if name is None:
            name, n = fallback, 1
            while name in self.taken_names:
                n += 1
                name = f"{fallback}#{n}"
            self.rule_names[key] = name
            self.taken_names.add(name)
        return f"{name}@{depth}" if self.pretty else name

    def expand(self, key: str, build: Callable[[], Node], depth: int, keyword: str, pointer: str,
               name: str | None = None) -> Node:
        """Compile ``build()`` inline, or as the rule of ``key`` when ``key`` recurses.

        Raises:
            UnsupportedKeyword: ``key`` recurses without entering an object or array (left
                recursion: the value would be defined by itself).
        """
        if (key, depth) in self.active:
            raise UnsupportedKeyword(
                keyword, pointer=pointer,
                detail=f"{name or key} refers back to itself without entering an object or array "
                "(left recursion: the schema defines a value by itself)",
                hint="put the recursive reference inside properties, items or additionalProperties",
            )
        rname = self.rule_name(key, depth, name or key)
        if rname in self.rules:
            return RuleRef(rname)
        if any(k == key for k, _ in self.active):
            self.recursive.add(key)
            if not self.pretty:
                return RuleRef(rname)  # the rule is being built by the expansion on the stack
        if self.pretty and key in self.recursive and depth > self.options.max_depth:
            return NOTHING  # pretty: nesting beyond max_depth is not generated (sound)
        self.active.append((key, depth))
        try:
            body = build()
        finally:
            self.active.pop()
        if key in self.recursive:
            self.rules[rname] = body
            return RuleRef(rname)
        return body

    def any_value(self, depth: int) -> Node:
        """Any JSON value, any depth: the recursive rule ``any`` (``any@depth`` under pretty)."""
        if self.bounded_any:
            return self._any_body(depth, ONEOF_ANY_DEPTH)
        return self.expand(ANY_RULE, lambda: self._any_body(depth, None), depth, "$ref", "", ANY_RULE)

    def _any_body(self, depth: int, budget: int | None) -> Node:
        """Any JSON value; ``budget``: containers nest at most that deep (None: the rule)."""
        layout = Layout(self.options.whitespace, depth)
        scalars = [lit("null"), lit("true"), lit("false"), NUMBER, seq(lit('"'), rep(JSON_CHAR, 0, None), lit('"'))]
        if budget is not None and budget <= 0:
            return alt(*scalars)
        inner = self.any_value(depth + 1) if budget is None else self._any_body(depth + 1, budget - 1)
        key = seq(lit('"'), rep(CANONICAL_ANY_CHAR, 0, None), lit('"'))
        items = seq(layout.first, inner, rep(seq(layout.sep, inner), 0, None), layout.close("]"))
        arr = seq(lit("["), alt(layout.close_empty("]"), items))
        obj = seq(
            lit("{"),
            Fields((), layout.first, layout.sep, layout.close("}"), layout.close_empty("}"), seq(key, layout.colon, inner)),
        )
        return alt(*scalars, arr, obj)

    def grammar(self, top: Node) -> Grammar:
        """The grammar of the compiled root: one rule when nothing recursed.

        Rules that can derive no finite string are replaced by the empty language, and
        only the rules reachable from the start are kept (start first, then in order of
        first reference).
        """
        if not self.rules:
            return Grammar.single(top)
        rules = dict(self.rules)
        live = productive_rules(rules)
        if len(live) < len(rules):
            dead = set(rules) - live
            prune: Callable[[RuleRef], Node] = lambda r: NOTHING if r.name in dead else r  # noqa: E731
            rules = {n: map_refs(b, prune) for n, b in rules.items() if n in live}
            top = map_refs(top, prune)
        if isinstance(top, RuleRef):
            start, order = top.name, [top.name]
        else:
            start = "root"
            while start in rules:
                start += "_"
            rules = {start: top, **rules}
            order = [start]
        i = 0
        while i < len(order):
            for r in _refs_in(rules[order[i]]):
                if r not in order:
                    order.append(r)
            i += 1
        return Grammar(start, tuple((n, rules[n]) for n in order))


def _subschemas(node: JsonValue, where: str) -> Iterator[tuple[dict[str, JsonValue], str]]:
    """Every object of the document that may be a schema, with its pointer."""
    if isinstance(node, dict):
        yield node, where
        for k, v in node.items():
            if k not in _DATA_KEYS:
                yield from _subschemas(v, ptr(where, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _subschemas(v, ptr(where, i))


def has_ref(node: Node) -> bool:
    """Whether ``node`` holds a :class:`RuleRef` (a walk of its DAG, each shared node once)."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, RuleRef):
            return True
        for c in children(n):
            if id(c) not in seen:
                seen.add(id(c))
                stack.append(c)
    return False


def _refs_in(node: Node) -> list[str]:
    """Names of the rules ``node`` refers to, in order of first appearance."""
    out: dict[str, None] = {}
    seen: set[int] = set()

    def walk(n: Node) -> None:
        if isinstance(n, RuleRef):
            out[n.name] = None
        for c in children(n):
            if id(c) not in seen:
                seen.add(id(c))
                walk(c)

    walk(node)
    return list(out)


def map_refs(node: Node, f: Callable[[RuleRef], Node]) -> Node:
    """``node`` with every :class:`RuleRef` replaced by ``f(ref)`` (renormalized)."""
    return map_nodes(node, lambda n: isinstance(n, RuleRef), lambda n: f(n))  # type: ignore[arg-type]


def _productive(node: Node, live: set[str], memo: dict[int, bool]) -> bool:
    """Whether ``node`` derives some finite string, given the rules known to."""
    got = memo.get(id(node))
    if got is None:
        got = _productive_uncached(node, live, memo)
        memo[id(node)] = got
    return got


def _productive_uncached(node: Node, live: set[str], memo: dict[int, bool]) -> bool:
    def p(n: Node) -> bool:
        return _productive(n, live, memo)

    if isinstance(node, RuleRef):
        return node.name in live
    if isinstance(node, ByteSet):
        return bool(node.ranges)
    if isinstance(node, Seq):
        return all(p(x) for x in node.items)
    if isinstance(node, Alt):
        return any(p(x) for x in node.items)
    if isinstance(node, Repeat):
        return node.min == 0 or p(node.item)
    if isinstance(node, Fields):
        required = [x for x, r in node.items if r]
        if not required and node.close_empty is not None and p(node.close_empty):
            return True
        if not (p(node.first) and p(node.close_nonempty)):
            return False
        if len(required) > 1 and not p(node.sep):
            return False
        if required:
            return all(p(x) for x in required)
        return any(p(x) for x, _ in node.items) or (node.rest is not None and p(node.rest))
    return True  # Product: never holds references


def productive_rules(rules: dict[str, Node]) -> set[str]:
    """The rules that derive at least one finite string (least fixed point)."""
    live: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, body in rules.items():
            if name not in live and _productive(body, live, {}):
                live.add(name)
                changed = True
    return live
