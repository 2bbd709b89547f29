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

import copy
from collections.abc import Callable
from urllib.parse import quote, unquote, urldefrag, urljoin, urlsplit

from maskc.compiler.errors import SchemaError, UnsupportedKeyword
from maskc.compiler.frontends.json_schema.base import ANNOTATIONS, SCHEMA_MAPS, VALUE_KEYWORDS, Base, JsonValue, ptr
from maskc.compiler.frontends.json_schema.drafts import Draft, draft_of, id_keyword, ref_overrides_siblings
from maskc.compiler.frontends.json_text import CANONICAL_ANY_CHAR, JSON_CHAR, NUMBER, Layout
from maskc.compiler.graphs import strongly_connected
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
SHARED_REFS_INLINE_MAX_NODES = 300
"""With ``shared_refs``, a ``$ref`` target referenced more than once stays a call from this
many IR nodes (its expansion) on: :attr:`Grammar.inline_max_nodes`."""
_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")
_REMOTE_HINT = "bundle the referenced schema into $defs and refer to it as #/$defs/NAME"


class RefsMixin(Base):
    """Resolves references and turns recursion into rules."""

    _index: _Index | None = None
    _cyclic_refs: bool | None = None
    absolute = False  # whether self.root is the output of absolutized()

    @property
    def draft(self) -> Draft:
        """The draft the root's ``$schema`` names (see :mod:`.drafts`)."""
        return self.index().draft

    def index(self) -> _Index:
        """The document's resources (schemas with their own base URI) and anchors."""
        if self._index is None:
            # once absolutized, the document is one resource: anchors of former resources may repeat
            self._index = _Index(self.root, unique_anchors=not self.absolute)
        return self._index

    def refs_may_cycle(self) -> bool:
        """Whether the document's references can lead back to where they were taken (a
        static over-estimate of recursion, known before the compile reaches the cycle): a
        ``$ref`` target whose subtree holds a reference that leads, through others, back to
        it. A dynamic reference counts as one."""
        if self._cyclic_refs is None:
            idx = self.index()
            succ: dict[str, set[str]] = {}
            found = False
            for where in idx.referrers:
                schema = resolve_pointer(self.root, where)
                if not isinstance(schema, dict) or any(k in schema for k in _REF_KEYS[1:]):
                    found = True
                    break
                try:
                    _, target = self.resolve(schema.get("$ref"), where)
                except (SchemaError, UnsupportedKeyword):
                    continue  # the compile says so where it meets it
                succ.setdefault(target, set())
                parts = where.split("/")
                for i in range(len(parts)):  # every pointer above ``where`` (and itself)
                    succ.setdefault("/".join(parts[: i + 1]), set()).add(target)
            if not found:
                nodes = list(succ)
                order = {n: sorted(succ[n] & succ.keys()) for n in nodes}
                comps = strongly_connected(nodes, order)
                found = any(len(c) > 1 or c[0] in order[c[0]] for c in comps)
            self._cyclic_refs = found
        return self._cyclic_refs

    # -- resolution ----------------------------------------------------------------------

    def resolve(self, ref: JsonValue, pointer: str) -> tuple[JsonValue, str]:
        """The schema ``ref`` names and its location (a JSON pointer, ``""`` for the root).

        ``ref`` is resolved against the base URI in force at ``pointer`` (the nearest
        enclosing ``$id``): ``#`` and ``#/json/pointer`` (RFC 6901, URI percent-escapes),
        ``#anchor`` (``$anchor``, ``$dynamicAnchor``, a draft-7 ``$id: "#anchor"``), and a
        URI naming a schema embedded in this document by its ``$id``, with either fragment.

        Raises:
            SchemaError: ``ref`` is not a string or points nowhere in the document.
            UnsupportedKeyword: ``ref`` names another document.
        """
        if not isinstance(ref, str):
            raise SchemaError("$ref must be a string", pointer=pointer)
        idx = self.index()
        doc, frag = urldefrag(_join(idx.base_at(pointer), ref))
        where = idx.resources.get(doc)
        if where is None:
            raise UnsupportedKeyword(
                "$ref", pointer=pointer,
                detail=f"{ref!r} names another document (a URI that no $id of this schema has, or a remote "
                "URL); only references inside this schema (#, #/pointer, #anchor, an embedded $id) are resolved",
                hint=_REMOTE_HINT,
            )
        frag = unquote(frag)
        if frag and not frag.startswith("/"):
            found = idx.anchors.get((doc, frag))
            if found is None:
                raise SchemaError(f"$ref {ref!r} names no $anchor of this schema", pointer=pointer)
            return resolve_pointer(self.root, found), found
        full = where + frag
        try:
            target: JsonValue = resolve_pointer(self.root, full)
        except LookupError:
            raise SchemaError(f"$ref {ref!r} points nowhere", pointer=pointer) from None
        return target, full

    def absolutized(self) -> JsonValue:
        """The root with every reference that resolves inside the document rewritten as
        ``#<pointer>`` from the root (``$dynamicRef``/``$recursiveRef`` too, where they
        reduce to a static reference), and the base URIs dropped, so that a subschema means
        the same wherever a merge (``allOf``, ``$ref`` siblings) carries it. References that
        do not resolve are left as they are, to be refused when compiled."""
        idx = self.index()
        if not idx.referrers:
            return self.root
        root = copy.deepcopy(self.root)
        for where in idx.referrers:
            schema = resolve_pointer(root, where)
            for key in _REF_KEYS:
                if not isinstance(schema.get(key), str):
                    continue
                try:
                    ref = schema[key] if key == "$ref" else self.dynamic_target(schema, where)
                    _, target = self.resolve(ref, where)
                except (SchemaError, UnsupportedKeyword):
                    continue
                if key != "$ref" and "$ref" in schema:
                    continue  # both: left for reference() to merge
                del schema[key]
                schema["$ref"] = "#" + quote(target, safe="/~!$&'()*+,;=:@")
        for where in idx.bases:
            schema = resolve_pointer(root, where)
            if isinstance(schema, dict):
                schema.pop(id_keyword(idx.draft), None)
        return root

    def dynamic_target(self, schema: dict[str, JsonValue], pointer: str) -> str:
        """The static reference a ``$dynamicRef`` or ``$recursiveRef`` reduces to.

        ``$dynamicRef: "#name"`` is dynamic only when more than one schema of the document
        declares ``$dynamicAnchor: name`` (an outer resource could then override the
        target); with one (or none: it is then a plain ``$ref``) it is that reference.
        ``$recursiveRef: "#"`` reduces to ``$ref: "#"`` when no resource but the root sets
        ``$recursiveAnchor: true``.

        Raises:
            UnsupportedKeyword: the reference depends on the dynamic scope.
        """
        idx = self.index()
        if "$dynamicRef" in schema:
            ref = schema["$dynamicRef"]
            if not isinstance(ref, str):
                raise SchemaError("$dynamicRef must be a string", pointer=ptr(pointer, "$dynamicRef"))
            name = urldefrag(ref)[1]
            if name and not name.startswith("/") and len(idx.dynamic_anchors.get(name, ())) > 1:
                raise UnsupportedKeyword(
                    "$dynamicRef", pointer=ptr(pointer, "$dynamicRef"),
                    detail=f"{len(idx.dynamic_anchors[name])} schemas declare $dynamicAnchor {name!r}: the target "
                    "depends on the dynamic scope, which a static grammar cannot follow",
                    hint="replace $dynamicRef by a $ref to the schema meant",
                )
            return ref
        ref = schema["$recursiveRef"]
        if ref != "#":
            raise SchemaError('$recursiveRef must be "#"', pointer=ptr(pointer, "$recursiveRef"))
        if any(where != "" for where in idx.recursive_anchors):
            raise UnsupportedKeyword(
                "$recursiveRef", pointer=ptr(pointer, "$recursiveRef"),
                detail="an embedded resource sets $recursiveAnchor: the target depends on the dynamic scope",
                hint='replace $recursiveRef by a $ref to the schema meant',
            )
        return "#"

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
        """A schema with ``$ref`` (or a ``$dynamicRef``/``$recursiveRef`` that reduces to
        one): the target, inlined or as a rule; siblings merged by allOf (draft-04 to -07:
        siblings ignored)."""
        dynamic = [k for k in ("$dynamicRef", "$recursiveRef") if k in schema]
        if dynamic:
            static = self.dynamic_target(schema, pointer)
            rest0 = {k: v for k, v in schema.items() if k not in dynamic}
            if "$ref" in schema:
                return self.merged({"allOf": [{"$ref": static}, rest0]}, pointer, depth, dynamic[0])
            return self.reference({**rest0, "$ref": static}, pointer, depth)
        target, tptr = self.resolve(schema["$ref"], pointer)
        rest: dict[str, JsonValue] = {}
        if not ref_overrides_siblings(self.draft):
            rest = {k: v for k, v in schema.items() if k != "$ref"}
        if set(rest) - ANNOTATIONS:
            return self.merged({"allOf": [target, rest]}, pointer, depth, "$ref")
        return self.expand("#" + tptr, lambda: self.value(target, tptr or "#", depth), depth, "$ref", pointer)

    def rule_name(self, key: str, depth: int, fallback: str) -> str:
        """The rule name of an expansion key: its pointer, ``@depth`` under pretty."""
        name = self.rule_names.get(key)
        if name is None:
            # (numbered from where the last key of this fallback stopped: names stay taken,
            # so the numbers below are, and a name costs no scan of them)
            n = self.name_numbers.get(fallback, 1)
            name = fallback if n == 1 else f"{fallback}#{n}"
            while name in self.taken_names:
                n += 1
                name = f"{fallback}#{n}"
            self.name_numbers[fallback] = n
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
        share = keyword == "$ref" and self.shares_refs_here()
        if rname in self.rules and (share or rname not in self.ref_rules):
            return RuleRef(rname)
        if any(k == key for k, _ in self.active):
            self.recursive.add(key)
            self.shared.discard(key)  # reached again itself: a rule of its own
            if not self.pretty:
                # Every target being expanded since ``key`` lies on its cycle: each becomes a
                # rule too, so that its other uses call it rather than inline another copy.
                at = max(i for i, (k, _) in enumerate(self.active) if k == key)
                for k, _ in self.active[at + 1 :]:
                    if k not in self.recursive:
                        self.recursive.add(k)
                        self.shared.add(k)
                return RuleRef(rname)  # the rule is being built by the expansion on the stack
        if self.pretty and key in self.recursive and depth > self.options.max_depth:
            return NOTHING  # pretty: nesting beyond max_depth is not generated (sound)
        # An inlined target is built once per depth and reused: the same part of the document,
        # compiled in the same context, is the same node (a document that uses one large
        # definition in many places built it once per use: 17,000 expansions, 5.5 s, for one
        # MaskBench schema). Kept per ``with_rules`` too, which decides how a count is built (a
        # copy of its item or a call), and only where the build did not change it.
        memo = keyword == "$ref" and not share and self.inlines_alike()
        rules_before = memo and self.with_rules
        if memo:
            got = self.inlined.get((key, depth, rules_before))
            if got is not None:
                return got
        self.active.append((key, depth))
        try:
            body = build()
        finally:
            self.active.pop()
        if key in self.recursive:
            self.rules[rname] = body
            return RuleRef(rname)
        if memo and self.with_rules == rules_before:
            self.inlined[(key, depth, rules_before)] = body
        if share:  # (not on a cycle: the rules pass inlines it where it is small or used once)
            self.rules[rname] = body
            self.ref_rules.add(rname)
            return RuleRef(rname)
        return body

    def call_rule(self, node: Node, pointer: str, depth: int) -> RuleRef:
        """``node`` (the schema at ``pointer``) as a rule that stays a call, though no cycle
        passes it (:attr:`Grammar.calls`); the same rule for the same node."""
        got = self.calls.get(id(node))
        if got is not None:
            return got[1]
        name = self.rule_name(f"counted item {id(node)}", depth, "#" + pointer)
        self.rules[name] = node
        ref = RuleRef(name)
        self.calls[id(node)] = (node, ref)
        return ref

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
        shared = frozenset(self.rule_names[k] for k in self.shared) & set(order) - {start}
        calls = frozenset(ref.name for _, ref in self.calls.values()) & set(order) - {start}
        inline_max = SHARED_REFS_INLINE_MAX_NODES if self.share_refs else None
        return Grammar(start, tuple((n, rules[n]) for n in order), shared, calls, inline_max)


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
        if not all(p(x) for x in required):
            return False
        # member counts k that can be emitted: the required items, optional ones, one rest
        # member (more add nothing here), within min_count..max_count
        lo = max(len(required), node.min_count)
        most = len(required) + sum(1 for x, r in node.items if not r and p(x))
        most += 1 if node.rest is not None and p(node.rest) else 0
        if node.max_count is not None:
            most = min(most, node.max_count)
        if most < lo:
            return False
        if lo == 0 and node.close_empty is not None and p(node.close_empty):
            return True
        k = max(lo, 1)
        if most < k:
            return False
        return p(node.first) and p(node.close_nonempty) and (k < 2 or p(node.sep))
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


def _join(base: str, ref: str) -> str:
    """``ref`` resolved against ``base`` (RFC 3986; a fragment-only ``ref`` keeps any base,
    a URN's included)."""
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    if urlsplit(ref).scheme:
        return ref
    return urljoin(base, ref)


class _Index:
    """The resources of one document: each schema with its own base URI (``$id``; draft-04
    ``id``) by that URI, the base URI in force at each such schema, and the anchors of each
    resource. A document without a root ``$id`` has the base URI ``""``."""

    def __init__(self, root: JsonValue, unique_anchors: bool = True) -> None:
        self.draft = draft_of(root)
        self.unique_anchors = unique_anchors
        self.resources: dict[str, str] = {}  # base URI (no fragment) -> pointer
        self.bases: dict[str, str] = {}  # pointer of a schema that sets a base -> base URI
        self.anchors: dict[tuple[str, str], str] = {}  # (resource URI, anchor) -> pointer
        self.dynamic_anchors: dict[str, list[str]] = {}  # $dynamicAnchor name -> pointers
        self.recursive_anchors: list[str] = []  # pointers of schemas with $recursiveAnchor: true
        self.referrers: list[str] = []  # pointers of schemas holding $ref, $dynamicRef or $recursiveRef
        self._walk(root, "", "", True)
        self.resources.setdefault("", "")

    def _walk(self, node: JsonValue, where: str, base: str, is_schema: bool) -> None:
        if isinstance(node, list):
            for i, v in enumerate(node):
                self._walk(v, ptr(where, i), base, True)
            return
        if not isinstance(node, dict):
            return
        if is_schema:
            base = self._enter(node, where, base)
        for k, v in node.items():
            if k in VALUE_KEYWORDS:
                continue
            # the values of these are maps from names to schemas, not schemas
            named = k in SCHEMA_MAPS
            if named and isinstance(v, dict):
                for name, sub in v.items():
                    self._walk(sub, ptr(where, k, name), base, True)
            else:
                self._walk(v, ptr(where, k), base, isinstance(v, dict))

    def _enter(self, schema: dict[str, JsonValue], where: str, base: str) -> str:
        """Record what ``schema`` declares; the base URI inside it."""
        sid = schema.get(id_keyword(self.draft))
        if ref_overrides_siblings(self.draft) and "$ref" in schema:
            sid = None  # draft-04 to -07: a $ref's siblings are ignored, $id included
        anchors: list[str] = []
        if isinstance(sid, str):
            doc, frag = urldefrag(_join(base, sid))
            if doc and doc != urldefrag(base)[0] or where == "":
                base = doc
                self.resources.setdefault(doc, where)
                self.bases[where] = doc
            if frag and not frag.startswith("/"):
                anchors.append(frag)  # draft-6/7: "$id": "#name" (or "uri#name")
        for key in ("$anchor", "$dynamicAnchor"):
            name = schema.get(key)
            if isinstance(name, str):
                anchors.append(name)
                if key == "$dynamicAnchor":
                    self.dynamic_anchors.setdefault(name, []).append(where)
        if schema.get("$recursiveAnchor") is True:
            self.recursive_anchors.append(where)
        if any(isinstance(schema.get(k), str) for k in _REF_KEYS):
            self.referrers.append(where)
        doc = urldefrag(base)[0]
        for name in dict.fromkeys(anchors):
            prev = self.anchors.get((doc, name))
            if prev is not None and prev != where and self.unique_anchors:
                raise SchemaError(f"$anchor {name!r} is defined twice", pointer=where)
            self.anchors[(doc, name)] = where
        return base

    def base_at(self, pointer: str) -> str:
        """The base URI in force at ``pointer``: that of the nearest schema above it (or at
        it) that sets one."""
        p = pointer if pointer != "#" else ""
        while True:
            got = self.bases.get(p)
            if got is not None:
                return got
            if not p:
                return ""
            p = p[: p.rfind("/")]
