"""Shared vocabulary of the JSON Schema front end: keyword sets, pointers, layout dumps.

:class:`Base` holds the state of one compile (the root, the options, what lenient mode
dropped, the rules built so far) and declares the methods the keyword families call on
each other; :class:`~maskc.compiler.frontends.json_schema.SchemaCompiler` mixes the
families together.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from maskc.compiler.errors import UnsupportedKeyword
from maskc.compiler.frontends.json_text import Layout
from maskc.compiler.ir import Node, RuleRef
from maskc.compiler.options import CompileOptions

__all__ = [
    "JsonValue",
    "ANNOTATIONS",
    "TYPES",
    "STRING_KW",
    "NUMBER_KW",
    "OBJECT_KW",
    "ARRAY_KW",
    "VALUE_KEYWORDS",
    "SCHEMA_MAPS",
    "ptr",
    "dumps_layout",
    "is_type",
    "json_type",
    "Base",
]

JsonValue = Any

ANNOTATIONS = frozenset(
    {
        "$schema", "$id", "$comment", "$anchor", "$vocabulary", "$defs", "definitions",
        "title", "description", "default", "examples", "example", "deprecated", "readOnly",
        "writeOnly", "contentEncoding", "contentMediaType", "contentSchema", "nullable",
        "discriminator", "xml", "externalDocs", "$dynamicAnchor",
    }
)
"""Keywords that never constrain an instance."""

TYPES = ("null", "boolean", "object", "array", "string", "number", "integer")
STRING_KW = frozenset({"minLength", "maxLength", "pattern", "format"})
NUMBER_KW = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})
OBJECT_KW = frozenset({"properties", "required", "additionalProperties", "patternProperties"})
ARRAY_KW = frozenset({"items", "prefixItems", "minItems", "maxItems", "additionalItems"})
VALUE_KEYWORDS = frozenset({"enum", "const", "default", "examples", "example"})
"""Keywords whose values are JSON values, not schemas (a document walk does not enter them)."""
SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"})
"""Keywords whose value maps names to schemas (a name there is not a keyword)."""


def ptr(base: str, *parts: str | int) -> str:
    """``base`` extended by ``parts``, each escaped as an RFC 6901 reference token."""
    out = base
    for p in parts:
        out += "/" + str(p).replace("~", "~0").replace("/", "~1")
    return out


def dumps_layout(value: JsonValue, layout: Layout) -> bytes:
    """``value`` as JSON text in the layout's whitespace policy (flexible: compact)."""
    ws = layout.ws
    if ws.mode == "pretty" and isinstance(value, (dict, list)) and value:
        text = json.dumps(value, indent=ws.n, ensure_ascii=False)
        pad = "\n" + " " * (ws.n * layout.depth)
        return text.replace("\n", pad).encode()
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def json_type(value: Any) -> str:
    """The JSON type name of a value (``integer`` for whole numbers, ``2.0`` included)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def is_type(v: JsonValue, t: str) -> bool:
    """Whether the JSON value ``v`` has the JSON Schema type ``t`` (``2.0`` is an integer)."""
    if t == "null":
        return v is None
    if t == "boolean":
        return isinstance(v, bool)
    if t == "string":
        return isinstance(v, str)
    if t == "integer":
        return (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer())
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if t == "object":
        return isinstance(v, dict)
    return isinstance(v, list)


class Base:
    """State of one compile, and the cross-family methods every keyword family may call.

    Invariants: ``rules`` maps a rule name to its finished body; ``active`` is the stack
    of (expansion key, JSON depth) being compiled right now; a key in ``recursive`` was
    reached again while it was being expanded, so it is compiled as a rule, not inlined.
    """

    def __init__(self, root: JsonValue, options: CompileOptions) -> None:
        self.root = root
        self.options = options
        # The front end's own automata (oneOf disjointness, counted-item sizes) stop here too.
        self.deadline = time.monotonic() + options.limits.max_seconds
        self.not_enforced: list[dict[str, str]] = []
        self.rules: dict[str, Node] = {}
        self.active: list[tuple[str, int]] = []
        self.recursive: set[str] = set()
        self.shared: set[str] = set()  # keys made rules only for lying on another key's cycle
        # parts made rules only so that a count of them is one call edge per position, by the
        # id of the part (kept alive here): the part and its rule's reference
        self.calls: dict[int, tuple[Node, RuleRef]] = {}
        self.rule_names: dict[str, str] = {}  # expansion key -> rule name (depth excluded)
        self.taken_names: set[str] = set()
        self.name_numbers: dict[str, int] = {}  # fallback name -> the number its last rule took
        self.merging: list[int] = []  # ids of the schemas whose allOf is being merged
        self.bounded_any = 0  # > 0: free-form values are regular, ONEOF_ANY_DEPTH deep
        # shared_refs: every $ref target is a rule, built once (see :meth:`shares_refs_here`)
        self.share_refs = False
        self.ref_rules: set[str] = set()
        self._root_options = options
        # (target key, depth, with_rules) -> the node its inlined expansion built (see :meth:`inlines_alike`)
        self.inlined: dict[tuple[str, int, bool], Node] = {}

    @property
    def with_rules(self) -> bool:
        """Whether the grammar has rules: the nodes compiled from here on may hold references."""
        return bool(self.recursive or self.calls or self.ref_rules)

    def shares_refs_here(self) -> bool:
        """Whether a ``$ref`` compiled here may be (or call) its target's shared rule: with
        ``shared_refs``, and where the target compiles as it does at the top (the compile's
        own options, free-form values unbounded, no over-approximation or subject of a
        difference being built), so that one body serves every such place."""
        return self.share_refs and self.inlines_alike()

    def inlines_alike(self) -> bool:
        """Whether a target compiled here compiles as it does at the top: the compile's own
        options, free-form values unbounded, no over-approximation or subject of a difference
        being built. Its expansion is then the same node wherever it is inlined (at one depth),
        built once (:attr:`inlined`)."""
        return (self.options is self._root_options and not self.bounded_any
                and not getattr(self, "_over", 0) and not getattr(self, "_in_subject", False)
                and getattr(self, "_any_limit", None) is None)

    @property
    def exact(self) -> bool:
        """Whether the language must be exactly the schema's instances (``semantics="exact"``):
        undeclared keys where JSON Schema allows them, no types inferred from keywords."""
        return self.options.semantics == "exact"

    @property
    def pretty(self) -> bool:
        """Whether the layout depends on the nesting depth (so rules are made per depth)."""
        return self.options.whitespace.mode == "pretty"

    def unsupported(self, keyword: str, pointer: str, detail: str = "") -> None:
        """Refuse ``keyword``, or (lenient) record it as compiled without enforcement."""
        if not self.options.lenient:
            raise UnsupportedKeyword(keyword, pointer=pointer, detail=detail)
        entry = {"keyword": keyword, "pointer": pointer}
        if detail:
            entry["detail"] = detail
        if entry not in self.not_enforced:
            self.not_enforced.append(entry)

    def annotation(self, keyword: str, pointer: str, detail: str) -> None:
        """Record ``keyword`` as an annotation that constrains nothing (an unknown ``format``
        name, say): compiled as if absent, in strict mode too, and listed in
        ``not_enforced`` with ``kind: "annotation"`` so ``inspect`` and ``lint`` show it."""
        entry = {"keyword": keyword, "pointer": pointer, "detail": detail, "kind": "annotation"}
        if entry not in self.not_enforced:
            self.not_enforced.append(entry)

    # -- implemented by the families (declared here for the type checker) ---------------

    @property
    def draft(self) -> str:
        """The draft the root's ``$schema`` names (see :mod:`.drafts`)."""
        raise NotImplementedError

    def value(self, schema: JsonValue, pointer: str, depth: int) -> Node:
        """The language of ``schema`` at JSON nesting ``depth``."""
        raise NotImplementedError

    def types_of(self, schema: dict[str, JsonValue], pointer: str) -> list[str]:
        """The JSON types ``schema`` admits, from ``type`` or inferred from its keywords."""
        raise NotImplementedError

    def resolve(self, ref: JsonValue, pointer: str) -> tuple[JsonValue, str]:
        """The schema a ``$ref`` value names, and its location."""
        raise NotImplementedError

    def deref(self, schema: JsonValue, pointer: str) -> tuple[JsonValue, str]:
        """Follow a schema made only of ``$ref`` (and annotations) to its target."""
        raise NotImplementedError

    def call_rule(self, node: Node, pointer: str, depth: int) -> RuleRef:
        """``node`` as a rule that stays a call; its reference."""
        raise NotImplementedError

    def refs_may_cycle(self) -> bool:
        """Whether the document's references can form a cycle (recursion, known up front)."""
        raise NotImplementedError

    def merged(self, schema: dict[str, JsonValue], pointer: str, depth: int, keyword: str) -> Node:
        """The language of an ``allOf`` schema (``keyword``: where it came from, for errors)."""
        raise NotImplementedError

    def expand(self, key: str, build: Callable[[], Node], depth: int, keyword: str, pointer: str,
               name: str | None = None) -> Node:
        """``build()`` inlined, or as the rule of ``key`` when ``key`` recurses."""
        raise NotImplementedError

    def any_value(self, depth: int) -> Node:
        """Any JSON value at nesting ``depth``."""
        raise NotImplementedError

    def fold_objects(self, a: dict[str, JsonValue], b: dict[str, JsonValue],
                     pointer: str) -> tuple[dict[str, JsonValue], dict[str, JsonValue]]:
        """Two ``allOf`` conjuncts rewritten so that merging their object keywords is exact."""
        raise NotImplementedError
