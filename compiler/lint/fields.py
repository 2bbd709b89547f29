"""Field rules: optional properties, free text where a closed set belongs, invalid schemas.

``optional-field`` and ``free-text-enum`` read each generated object property as the
compiler does (:mod:`.views`). ``schema-error`` reuses the compiler's own checks: the
metaschema validation and nesting bound of
:func:`~maskc.compiler.frontends.json_schema.validate.check_schema`, and ``$ref``
resolution; it never stops the other rules, which skip what they cannot read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from maskc.compiler.errors import MaskcError, SchemaError
from maskc.compiler.findings import Finding, RuleInfo
from maskc.compiler.frontends.json_schema.validate import check_schema
from maskc.compiler.lint.views import SchemaViews, is_pure_ref, parent_pointer, types_of, views_of
from maskc.compiler.lint.walk import Node, join

__all__ = ["CLOSED_SET_WORDS", "CLOSED_SET_PHRASES", "RULES", "check", "closed_set_word", "name_tokens"]

RULES: list[RuleInfo] = [
    RuleInfo(
        "optional-field", "info",
        "A property that is not in required.",
        "The model may leave it out, and will when unsure: consumers must handle its absence, "
        "and data the prompt asked for can silently go missing.",
        '{"type": "object", "properties": {"age": {"type": "integer"}}}',
        "Add it to required; if absence is a real answer, make it required and nullable.",
    ),
    RuleInfo(
        "free-text-enum", "warning",
        "A string field whose name or description says it is a closed set, with no enum/const/pattern/format.",
        "A status, type or currency written as free text comes back as \"Open\", \"open\", "
        "\"OPEN \" and \"in progress\": valid JSON that says the wrong thing downstream.",
        '{"properties": {"ticket_status": {"type": "string"}}}',
        "List the values in an enum (or use const, a pattern, or a format).",
    ),
    RuleInfo(
        "schema-error", "error",
        "The schema is invalid against its metaschema, or a $ref cannot be resolved in the document.",
        "maskc refuses to compile it; other tools may guess, each differently.",
        '{"type": "strng"}   {"$ref": "#/$defs/missing"}',
        "Fix the keyword's value, or define the referenced schema in $defs.",
    ),
]

CLOSED_SET_WORDS: frozenset[str] = frozenset({
    "status", "state", "type", "kind", "category", "priority", "severity", "level", "mode", "role",
    "currency", "country", "unit", "gender", "sex", "language", "lang", "locale", "tier", "stage",
    "phase", "grade", "sentiment", "urgency", "visibility", "direction", "method", "polarity",
    "weekday", "month", "quarter", "plan", "environment", "env",
})
"""Head nouns of a property name that say its value is one of a closed set (``ticket_status``,
``paymentMethod``). Only the last token counts (``statusMessage`` is a message), or the one
before a ``code`` (``country_code``); plurals name arrays of such values (``categories``)."""

_CODE_SUFFIXES = frozenset({"code"})

CLOSED_SET_PHRASES: tuple[str, ...] = (
    r"\b(?:must|should|can|may|will|has to) be (?:one of|either)\b",
    r"\bone of(?: the following| these)?\s*[:(\[]",
    r"\bone of the following\b",
    r"\b(?:possible|allowed|valid|accepted|permitted|supported|available) (?:values|options)\b",
    r"\benum(?:eration)?\b",
    r"['\"`][\w-]+['\"`](?:\s*,\s*['\"`][\w-]+['\"`])*,?\s*(?:\bor\b|\|)\s*['\"`][\w-]+['\"`]",
)
"""What a description says when the value is one of a closed set (``'asc' or 'desc'``,
``one of: low, medium, high``, ``allowed values``)."""
_PHRASES = re.compile("|".join(CLOSED_SET_PHRASES), re.IGNORECASE)
_TOKEN = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def name_tokens(name: str) -> list[str]:
    """The lower-case words of a snake, kebab, camel or Pascal case name."""
    return [t.lower() for t in _TOKEN.findall(name)]


def _singulars(word: str) -> list[str]:
    out = [word]
    if word.endswith("ies"):
        out.append(word[:-3] + "y")
    if word.endswith("es"):
        out.append(word[:-2])
    if word.endswith("s"):
        out.append(word[:-1])
    return out


def closed_set_word(name: str, *, plural: bool = False) -> str | None:
    """The word of ``name`` that says it holds a closed set (None if none does).

    With ``plural``, the head noun is read in the plural too (``categories``).
    """
    tokens = name_tokens(name)
    if not tokens:
        return None
    head = tokens[-1]
    if head in _CODE_SUFFIXES and len(tokens) > 1 and tokens[-2] in CLOSED_SET_WORDS:
        return f"{tokens[-2]} {head}"
    for w in _singulars(head) if plural else [head]:
        if w in CLOSED_SET_WORDS:
            return head
    return None


def check(ctx: Any) -> Iterator[Finding]:
    views = views_of(ctx)
    yield from _schema_errors(ctx, views)
    for node in ctx.nodes():
        if node.pointer not in views.generated or not isinstance(node.schema, dict):
            continue
        yield from _optional_fields(views, node)
        if node.keyword == "properties" and node.name is not None:
            yield from _free_text(views, node)


# -- optional-field -------------------------------------------------------------------------


def _required(view: Any) -> set[str]:
    req = view.get("required") if isinstance(view, dict) else None
    return {r for r in req if isinstance(r, str)} if isinstance(req, list) else set()


def _optional_fields(views: SchemaViews, node: Node) -> Iterator[Finding]:
    props = node.schema.get("properties")
    if not isinstance(props, dict) or not props:
        return
    view = views.node_view(node)
    types = types_of(view)
    if view is False or (types is not None and "object" not in types):
        return
    required = _required(view) | _required(node.schema)
    if node.keyword == "allOf":  # a conjunct: the others and its parent may require the name
        parent = parent_pointer(node)
        holder = views.by_pointer.get(parent) if parent is not None else None
        if holder is not None:
            required |= _required(views.node_view(holder))
    if not views.alone(node.pointer):  # a definition only merged into its uses: optional in one of them?
        uses = [_required(v) for v in views.merged_uses(node.pointer)]
        required |= set.intersection(*uses) if uses else set(props)
    for name, sub in props.items():
        if sub is False or name in required:
            continue
        yield Finding("optional-field", "info", join(node.pointer, "properties", name),
                      f"property {name!r} is optional: the model may leave it out, and consumers must "
                      "handle its absence",
                      hint=f"add {name!r} to required; if absence is a real answer, make it required "
                      "and nullable")


# -- free-text-enum -------------------------------------------------------------------------


def _free_string(view: Any) -> bool:
    """A view that generates strings and nothing closes them."""
    if not isinstance(view, dict) or any(k in view for k in ("enum", "const", "pattern", "format", "anyOf", "oneOf")):
        return False
    types = types_of(view)
    return types is not None and "string" in types


def _free_text(views: SchemaViews, node: Node) -> Iterator[Finding]:
    name = node.name or ""
    view = views.node_view(node)
    if not isinstance(view, dict):
        return
    if _free_string(view):
        word = closed_set_word(name)
        subject = f"property {name!r} is free text"
    elif "array" in (types_of(view) or ()) and not _listed(view):
        items = view.get("items")
        if not isinstance(items, (dict, bool)) or not _free_string(views.view(items, join(node.pointer, "items"))):
            return
        word = closed_set_word(name, plural=True)
        subject = f"the items of {name!r} are free text"
    else:
        return
    if word is not None:
        why = f"its name says it is one of a closed set ({word!r})"
    else:
        desc = _description(node.schema, view)
        found = _PHRASES.search(desc) if desc else None
        if found is None:
            return
        why = f"its description says it is one of a closed set ({found.group(0).strip()!r})"
    yield Finding("free-text-enum", "warning", node.pointer,
                  f"{subject}, but {why}: the model may write any spelling",
                  hint="list the values in an enum (or use const, a pattern, or a format)")


def _listed(view: dict[str, Any]) -> bool:
    return "const" in view or "enum" in view


def _description(schema: dict[str, Any], view: dict[str, Any]) -> str:
    for s in (schema, view):
        d = s.get("description")
        if isinstance(d, str):
            return d
    return ""


# -- schema-error ---------------------------------------------------------------------------


def _schema_errors(ctx: Any, views: SchemaViews) -> Iterator[Finding]:
    seen: set[tuple[str, str]] = set()
    try:
        check_schema(ctx.schema)
    except SchemaError as e:
        seen.add((e.pointer, e.reason))
        yield Finding("schema-error", "error", e.pointer, e.reason, hint=e.hint or "")
    for node in ctx.nodes():
        if not isinstance(node.schema, dict) or "$ref" not in node.schema:
            continue
        where = join(node.pointer, "$ref")
        try:
            target, _ = views.resolve(node.schema["$ref"], node.pointer)
            problem = None if isinstance(target, (dict, bool)) else (
                f"$ref {node.schema['$ref']!r} points at a {type(target).__name__}, not a schema")
            if problem is None and is_pure_ref(target):
                _follow(views, target, node.pointer)
        except MaskcError as e:
            problem = getattr(e, "reason", None) or e.message
        if problem is not None and (where, problem) not in seen:
            seen.add((where, problem))
            yield Finding("schema-error", "error", where, problem,
                          hint="define the referenced schema in this document ($defs) and refer to it "
                          "as #/$defs/NAME")


def _follow(views: SchemaViews, schema: Any, pointer: str) -> None:
    """Follow a chain of bare references; raise when it loops without reaching a schema."""
    seen: list[str] = []
    while is_pure_ref(schema):
        schema, pointer = views.resolve(schema["$ref"], pointer)
        if pointer in seen:
            raise SchemaError("$ref chain loops without reaching a schema: "
                              + " -> ".join("#" + p for p in [*seen, pointer]), pointer=pointer)
        seen.append(pointer)
