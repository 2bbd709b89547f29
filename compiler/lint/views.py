"""What the structural lint rules see of a schema: the subschemas maskc generates, each as
the compiler reads it.

A subschema is *generated* when the compiler turns it into grammar: it is reachable from
the root through subschema keywords and local ``$ref``s (an unused ``$defs`` entry is not),
and no keyword that the compiler reads only through its parent lies above it (``not``,
``if``/``then``/``else``, ``contains``, ``propertyNames``, ...: see :data:`DROPPED`).

A node's *view* is the schema the compiler compiles there: ``$ref`` siblings and ``allOf``
conjuncts merged by the compiler's own merge (:meth:`SchemaCompiler.merge_allof`), the
expressible forms of ``not`` applied, and for an ``anyOf``/``oneOf`` branch the keywords of
the union's node merged in, as the front end does. A view that cannot be built (a broken
reference, a merge the compiler refuses) is None: rules skip it, and ``schema-error`` or
the compile says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from maskc.compiler.errors import MaskcError
from maskc.compiler.frontends.json_schema import SchemaCompiler
from maskc.compiler.frontends.json_schema.base import (
    ANNOTATIONS,
    ARRAY_KW,
    NUMBER_KW,
    OBJECT_KW,
    STRING_KW,
    json_type,
)
from maskc.compiler.lint.walk import Node
from maskc.compiler.options import CompileOptions

__all__ = ["DROPPED", "SchemaViews", "family", "json_type", "views_of"]

# Keywords whose subschemas are not read as values of their own: the compiler tests an
# instance against them, or merges them into their parent (not, if/then/else, contains,
# propertyNames, the dependency keywords) or into its additionalProperties/items
# (unevaluated*), so the rules read them through their parent's view, not alone.
DROPPED = frozenset({
    "not", "if", "then", "else", "contains", "propertyNames", "dependentSchemas", "dependencies",
    "unevaluatedProperties", "unevaluatedItems",
})
_ENTRY = ("$defs", "definitions")
_MAP_KW = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
_LIST_KW = ("prefixItems", "anyOf", "oneOf", "allOf", "items")
_INFER = (("object", OBJECT_KW), ("array", ARRAY_KW), ("string", STRING_KW), ("number", NUMBER_KW))
_VIEW_STEPS = 32
_MISSING = object()



def family(t: str) -> str:
    """Types a consumer handles alike: ``integer`` is a ``number``."""
    return "number" if t == "integer" else t


def parent_pointer(node: Node) -> str | None:
    """The pointer of the subschema that holds ``node`` (None for the root)."""
    if node.depth == 0:
        return None
    held = node.parent.get(node.keyword) if isinstance(node.parent, dict) else None
    tokens = 2 if node.keyword in _MAP_KW or (node.keyword in _LIST_KW and isinstance(held, list)) else 1
    cut = len(node.pointer)
    for _ in range(tokens):
        cut = node.pointer.rindex("/", 0, cut)
    return node.pointer[:cut]


def structural(schema: dict[str, Any]) -> set[str]:
    return set(schema) - ANNOTATIONS


def is_pure_ref(schema: Any) -> bool:
    """A node that is only a ``$ref`` (and annotations): its target speaks for it."""
    return isinstance(schema, dict) and "$ref" in schema and structural(schema) == {"$ref"}


@dataclass
class SchemaViews:
    """The generated nodes of one schema and their views (built once per lint, memoized)."""

    root: Any
    nodes: list[Node]
    options: CompileOptions = field(default_factory=CompileOptions)
    by_pointer: dict[str, Node] = field(init=False)
    generated: set[str] = field(init=False)
    bare_targets: set[str] = field(init=False)
    referrers: dict[str, list[Node]] = field(init=False)
    _compiler: SchemaCompiler | None = field(init=False)
    _views: dict[tuple[Any, ...], Any] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.by_pointer = {n.pointer: n for n in self.nodes}
        try:
            self._compiler = SchemaCompiler(self.root, CompileOptions(
                whitespace=self.options.whitespace, lenient=True, limits=self.options.limits,
                max_depth=self.options.max_depth, semantics=self.options.semantics))
        except MaskcError:
            self._compiler = None
        self.generated = self._generated()
        self.bare_targets = set()
        self.referrers = {}
        for n in self.nodes:
            if n.pointer in self.generated and isinstance(n.schema, dict) and "$ref" in n.schema:
                try:
                    self.referrers.setdefault(self.resolve(n.schema["$ref"], n.pointer)[1], []).append(n)
                except MaskcError:
                    pass
            if n.pointer not in self.generated or not is_pure_ref(n.schema) or n.keyword == "allOf":
                continue
            if n.keyword in ("anyOf", "oneOf") and isinstance(n.parent, dict) and structural(
                    {k: v for k, v in n.parent.items() if k != n.keyword}):
                continue
            try:
                self.bare_targets.add(self.resolve(n.schema["$ref"], n.pointer)[1])
            except MaskcError:
                continue

    @property
    def exact(self) -> bool:
        """Whether the views are read in exact semantics (undeclared keys where JSON Schema
        allows them)."""
        return self.options.semantics == "exact"

    # -- references ---------------------------------------------------------------------

    def resolve(self, ref: Any, pointer: str) -> tuple[Any, str]:
        """The target of ``ref`` and its pointer, as the compiler resolves it.

        Raises:
            MaskcError: the reference cannot be resolved inside the document.
        """
        if self._compiler is None:
            raise MaskcError("the schema is not an object")
        target, tptr = self._compiler.resolve(ref, pointer)
        return target, tptr

    def ref_target_view(self, schema: Any, pointer: str) -> Any:
        """The view of the target of ``schema``'s ``$ref`` when the target is reported on its
        own (it is used bare somewhere); None otherwise."""
        if not isinstance(schema, dict) or "$ref" not in schema:
            return None
        try:
            target, tptr = self.resolve(schema["$ref"], pointer)
        except MaskcError:
            return None
        return self.view(target, tptr) if self.alone(tptr) else None

    def merged_uses(self, pointer: str) -> list[Any]:
        """The views that merge the definition at ``pointer`` with other keywords: the node of
        an ``allOf`` with a bare reference to it, or a reference with siblings."""
        out = []
        for r in self.referrers.get(pointer, ()):
            if is_pure_ref(r.schema) and r.keyword == "allOf":
                parent = parent_pointer(r)
                holder = self.by_pointer.get(parent) if parent is not None else None
                if holder is not None:
                    out.append(self.node_view(holder))
            elif not is_pure_ref(r.schema) or r.keyword in ("anyOf", "oneOf"):
                out.append(self.node_view(r))
        return out

    def alone(self, pointer: str) -> bool:
        """Whether the subschema at ``pointer`` is compiled as it is somewhere: it is not a
        definition, or some generated node refers to it with a bare ``$ref`` (not as an
        ``allOf`` conjunct, nor with sibling keywords the compiler merges in)."""
        node = self.by_pointer.get(pointer)
        return node is None or node.keyword not in _ENTRY or pointer in self.bare_targets

    # -- generated nodes ----------------------------------------------------------------

    def _generated(self) -> set[str]:
        dropped: set[str] = set()
        entry_of: dict[str, str] = {}
        for n in self.nodes:
            parent = parent_pointer(n)
            if n.keyword in DROPPED or (parent is not None and parent in dropped):
                dropped.add(n.pointer)
            if parent is None or n.keyword in _ENTRY:
                entry_of[n.pointer] = n.pointer
            else:
                entry_of[n.pointer] = entry_of.get(parent, "")
        refs_of: dict[str, list[Node]] = {}
        for n in self.nodes:
            if n.pointer not in dropped and isinstance(n.schema, dict) and "$ref" in n.schema:
                refs_of.setdefault(entry_of[n.pointer], []).append(n)
        live_entries = {""}
        frontier = [""]
        while frontier:
            entry = frontier.pop()
            for n in refs_of.get(entry, ()):
                try:
                    _, tptr = self.resolve(n.schema["$ref"], n.pointer)
                except MaskcError:
                    continue
                target_entry = self._entry_of_pointer(tptr, entry_of)
                if target_entry not in live_entries:
                    live_entries.add(target_entry)
                    frontier.append(target_entry)
        return {p for p, e in entry_of.items() if e in live_entries and p not in dropped}

    def _entry_of_pointer(self, pointer: str, entry_of: dict[str, str]) -> str:
        """The entry (root or a definition) that holds ``pointer``, even a pointer that is
        not itself a subschema the walk yields (it falls back to its longest known prefix)."""
        p = pointer
        while p not in entry_of and p:
            p = p[: p.rindex("/")]
        return entry_of.get(p, "")

    # -- views --------------------------------------------------------------------------

    def view(self, schema: Any, pointer: str, key: tuple[Any, ...] | None = None) -> Any:
        """The schema the compiler compiles for ``schema`` at ``pointer``: a dict without
        ``$ref``/``allOf``/``not``, a bool, or None when it cannot be built.

        ``schema`` is memoized by identity, so a schema built on the fly must name its own
        ``key`` (an id can be reused once the object is gone).
        """
        key = key or ("node", id(schema), pointer)
        got = self._views.get(key, _MISSING)
        if got is _MISSING:
            try:
                got = self._build(schema, pointer)
            except (MaskcError, TypeError, ValueError, KeyError, AttributeError, RecursionError):
                got = None  # the compiler refuses this schema; the compile or schema-error says why
            self._views[key] = got
        return got

    def _build(self, schema: Any, pointer: str) -> Any:
        comp = self._compiler
        if comp is None:
            return None
        for _ in range(_VIEW_STEPS):
            if isinstance(schema, bool):
                return schema
            if not isinstance(schema, dict):
                return None
            if "$ref" in schema:
                target, tptr = comp.resolve(schema["$ref"], pointer)
                rest = {k: v for k, v in schema.items() if k != "$ref"}
                if structural(rest):
                    schema = comp.merge_allof({"allOf": [target, rest]}, pointer)
                else:
                    schema, pointer = target, tptr
                continue
            if "allOf" in schema:
                merged = comp.merge_allof(schema, pointer)
                if "allOf" in merged and "$ref" not in merged:
                    merged = {k: v for k, v in merged.items() if k != "allOf"}  # refused part
                schema = merged
                continue
            if "not" in schema:
                simpler = comp.simplify_not(schema, pointer)
                if simpler is schema:  # not expressible: the compiler drops it
                    simpler = {k: v for k, v in schema.items() if k != "not"}
                schema = simpler
                continue
            return schema
        return None

    def node_view(self, node: Node) -> Any:
        """The view at ``node``; an ``anyOf``/``oneOf`` branch gets its union's keywords."""
        if node.keyword in ("anyOf", "oneOf") and isinstance(node.parent, dict):
            base = _union_base(node.parent, node.keyword)
            if structural(base):
                if node.schema is False:
                    return False
                branch = {} if node.schema is True else node.schema
                return self.view({"allOf": [base, branch]}, node.pointer, ("branch", node.pointer))
        return self.view(node.schema, node.pointer)

    def branch_views(self, view: dict[str, Any], pointer: str) -> list[Any] | None:
        """The views of the branches of ``view``'s ``anyOf`` or ``oneOf`` (None: no union)."""
        for kw in ("anyOf", "oneOf"):
            branches = view.get(kw)
            if isinstance(branches, list) and branches:
                base = _union_base(view, kw)
                out = []
                for i, br in enumerate(branches):
                    sub = br if not structural(base) else (
                        {"allOf": [base, {} if br is True else br]} if br is not False else False)
                    out.append(self.view(sub, f"{pointer}/{kw}/{i}", ("branches", id(view), pointer, i)))
                return out
        return None


def _union_base(schema: dict[str, Any], kw: str) -> dict[str, Any]:
    """The keywords of a union's node that each branch is merged with. ``unevaluated*`` next to
    a union is refused by the compiler (which items or keys a branch evaluates depends on which
    branch matches), so in lenient mode it is compiled without them."""
    return {k: v for k, v in schema.items() if k != kw and k not in _UNEVALUATED}


_UNEVALUATED = ("unevaluatedProperties", "unevaluatedItems")


def types_of(view: Any) -> frozenset[str] | None:
    """The JSON types a view generates, as the compiler reads them (None: any value, or
    unknown). ``enum``/``const`` give their values' types."""
    if view is False:
        return frozenset()
    if not isinstance(view, dict):
        return None
    if "const" in view:
        return frozenset({json_type(view["const"])})
    if "enum" in view:
        values = view["enum"]
        return frozenset(json_type(v) for v in values) if isinstance(values, list) else None
    t = view.get("type")
    if isinstance(t, str):
        return frozenset({t})
    if isinstance(t, list):
        return frozenset(x for x in t if isinstance(x, str))
    if t is not None:
        return None
    keys = set(view)
    inferred = frozenset(name for name, kws in _INFER if keys & kws)
    return inferred or None


def views_of(ctx: Any) -> SchemaViews:
    """The :class:`SchemaViews` of a lint context (shared by the structural rule modules)."""
    got: SchemaViews = ctx.shared("structure.views", lambda: SchemaViews(ctx.schema, ctx.nodes(), ctx.options))
    return got
