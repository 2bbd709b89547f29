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
"""

from __future__ import annotations

import re

from maskc.compiler.frontends.json_schema.base import JsonValue

__all__ = ["DRAFTS", "Draft", "draft_of", "ref_overrides_siblings", "id_keyword"]

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
