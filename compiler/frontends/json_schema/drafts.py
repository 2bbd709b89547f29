"""Which JSON Schema draft a document is written for, and what differs between drafts.

The draft is named by the root's ``$schema`` (draft-04, -06, -07, 2019-09, 2020-12); a
document without one (or with an unknown URI) is read as 2020-12, whose keywords the
front end compiles, while the older forms that cannot be mistaken for 2020-12 ones are
still understood (``exclusiveMinimum: true``, ``items`` as an array with
``additionalItems``, ``dependencies``, ``definitions``).

What changes the meaning of a document between drafts, and so is decided here:

- draft-04 to draft-07: a schema with ``$ref`` is that reference and nothing else (its
  sibling keywords are ignored, ``$id`` included); from 2019-09 the siblings apply too.
- draft-04 names the base URI ``id``; later drafts ``$id``.
- ``$recursiveRef`` (2019-09) and ``$dynamicRef`` (2020-12) are dynamic; they are compiled
  where they reduce to a static reference (see :mod:`.refs`).
- A document that names draft-04, -06 or -07 is read in that draft's vocabulary: an
  assertion or applicator keyword a later draft introduced (``const`` and ``contains`` in
  draft-04, ``if``/``then``/``else`` before draft-07, ``dependentRequired`` or
  ``unevaluatedProperties`` before 2019-09, ``prefixItems`` before 2020-12) is an unknown
  keyword there, which validators of that draft ignore (:func:`later_keywords`).
"""

from __future__ import annotations

import re

from maskc.compiler.frontends.json_schema.base import SCHEMA_MAPS, VALUE_KEYWORDS, JsonValue, ptr

__all__ = ["DRAFTS", "DRAFT_NAMES", "Draft", "draft_of", "ref_overrides_siblings", "id_keyword", "later_keywords"]

Draft = str
DRAFTS: tuple[Draft, ...] = ("draft4", "draft6", "draft7", "draft2019-09", "draft2020-12")

_URI = re.compile(r"^https?://json-schema\.org/(?:(draft-0(?P<old>[467]))/schema|draft/(?P<new>2019-09|2020-12)/schema)#?$")


def draft_of(root: JsonValue) -> Draft:
    """The draft the document's ``$schema`` names; ``draft2020-12`` when it names none."""
    uri = root.get("$schema") if isinstance(root, dict) else None
    m = _URI.match(uri.strip()) if isinstance(uri, str) else None
    if m is None:
        return "draft2020-12"
    return f"draft{m['old'][-1]}" if m["old"] else f"draft{m['new']}"


def ref_overrides_siblings(draft: Draft) -> bool:
    """Whether a schema holding ``$ref`` ignores its other keywords (draft-04 to -07)."""
    return draft in ("draft4", "draft6", "draft7")


def id_keyword(draft: Draft) -> str:
    """The keyword that sets a schema's base URI."""
    return "id" if draft == "draft4" else "$id"


_AFTER_7 = frozenset({"dependentRequired", "dependentSchemas", "unevaluatedProperties", "unevaluatedItems",
                      "minContains", "maxContains", "prefixItems"})
_AFTER_6 = _AFTER_7 | {"if", "then", "else"}
_LATER: dict[Draft, frozenset[str]] = {
    "draft4": _AFTER_6 | {"const", "contains", "propertyNames"},
    "draft6": _AFTER_6,
    "draft7": _AFTER_7,
}
"""Per draft, the assertion and applicator keywords later drafts introduced (identifiers and
locations such as ``$anchor`` or ``$defs`` are not: a reference may name them)."""

DRAFT_NAMES = {"draft4": "draft-04", "draft6": "draft-06", "draft7": "draft-07",
               "draft2019-09": "2019-09", "draft2020-12": "2020-12"}


def later_keywords(root: JsonValue, draft: Draft) -> tuple[JsonValue, list[tuple[str, str]]]:
    """``root`` without the keywords that ``draft`` does not know (see the module doc), and
    each one dropped as (keyword, pointer). Schemas are walked where a reference may reach
    them: every object but the values of ``enum``, ``const``, ``default`` and ``examples``,
    and the values (not the names) of ``properties`` and the other maps of schemas. What is
    unchanged is shared with ``root``, which is not modified."""
    later = _LATER.get(draft)
    if not later:
        return root, []
    dropped: list[tuple[str, str]] = []

    def walk(node: JsonValue, where: str) -> JsonValue:
        if isinstance(node, list):
            items = [walk(v, ptr(where, i)) for i, v in enumerate(node)]
            return items if any(a is not b for a, b in zip(items, node)) else node
        if not isinstance(node, dict):
            return node
        out: dict[str, JsonValue] = {}
        changed = False
        for k, v in node.items():
            if k in later:
                dropped.append((k, ptr(where, k)))
                changed = True
                continue
            nv = v
            if k in SCHEMA_MAPS and isinstance(v, dict):
                named = {name: walk(sub, ptr(where, k, name)) for name, sub in v.items()}
                if any(named[name] is not v[name] for name in v):
                    nv = named
            elif k not in VALUE_KEYWORDS:
                nv = walk(v, ptr(where, k))
            changed = changed or nv is not v
            out[k] = nv
        return out if changed else node

    return walk(root, ""), dropped
