"""Every subschema of a JSON Schema document, with its JSON pointer.

The walk is static: it follows the keywords that hold subschemas (in every draft's
spelling) and never resolves ``$ref``; rules that reason across references use the
compiler's automata or :func:`resolve_local`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from maskc.compiler.jsonpointer import escape, join, resolve

__all__ = ["Node", "escape", "join", "resolve_local", "walk"]

# Keywords whose value is one subschema.
_ONE = ("additionalProperties", "items", "additionalItems", "contains", "not", "if", "then", "else",
        "propertyNames", "unevaluatedProperties", "unevaluatedItems")
# Keywords whose value is a list of subschemas.
_LIST = ("prefixItems", "anyOf", "oneOf", "allOf", "items")
# Keywords whose value maps names to subschemas.
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")


@dataclass(frozen=True, slots=True)
class Node:
    """A subschema at ``pointer``; ``keyword`` is how its parent holds it ("" for the root),
    ``name`` the property/definition name where the parent's value is a map, and ``depth``
    the number of subschema steps from the root."""

    pointer: str
    schema: Any
    keyword: str
    name: str | None
    depth: int
    parent: Any


def walk(root: Any) -> Iterator[Node]:
    """Every subschema (dicts and booleans) in document order, the root first."""
    stack: list[Node] = [Node("", root, "", None, 0, None)]
    while stack:
        node = stack.pop()
        yield node
        s = node.schema
        if not isinstance(s, dict):
            continue
        children: list[Node] = []
        for kw, value in s.items():
            if kw in _ONE and isinstance(value, (dict, bool)):
                children.append(Node(join(node.pointer, kw), value, kw, None, node.depth + 1, s))
            elif kw in _LIST and isinstance(value, list):
                children.extend(Node(join(node.pointer, kw, i), v, kw, None, node.depth + 1, s)
                                for i, v in enumerate(value) if isinstance(v, (dict, bool)))
            elif kw in _MAP and isinstance(value, dict):
                children.extend(Node(join(node.pointer, kw, k), v, kw, k, node.depth + 1, s)
                                for k, v in value.items() if isinstance(v, (dict, bool)))
        stack.extend(reversed(children))


def resolve_local(root: Any, ref: str) -> tuple[str, Any] | None:
    """The (pointer, subschema) a local ``$ref`` (``#``, ``#/a/b``) names, or None."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    frag = ref[1:]
    if frag and not frag.startswith("/"):
        return None  # an anchor: not resolved here
    try:
        return frag, resolve(root, frag)
    except LookupError:
        return None
