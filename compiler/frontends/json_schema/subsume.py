"""Inclusion of one schema's language in another's, proven from their keywords alone.

``anyOf`` is a union: a branch whose language lies inside another branch's adds nothing,
and need not be compiled. That matters where the redundant branch is the expensive one:
a ``oneOf`` of overlapping objects (an exclusive choice needs a product of object
grammars) next to the plain object schema that already admits all of it.

:func:`implies` answers "is every spelling ``x`` admits also one ``y`` admits?" in the
``exact`` semantics, where a schema's language is its instances spelled in maskc's layout
(declared properties in definition order, then undeclared members). It reads keywords,
never automata, and says True only where the inclusion follows from them:

* ``y`` is ``true`` or annotations only, ``x`` is ``false``, or the two are equal;
* a reference stands for its target, a lone ``allOf`` conjunct for itself; ``y`` may be an
  ``anyOf`` (``x`` implies one branch) and ``x`` an ``anyOf`` or ``oneOf`` (every branch implies
  ``y``: an instance meets one of them), without sibling keywords, whose merge would
  change the layout;
* otherwise ``y``'s keywords are met one by one by ``x``'s own (``x``'s other keywords only
  narrow it, and merge after its own properties): ``type`` (``integer`` inside
  ``number``), ``required``, ``enum``/``const`` (a subset), ``properties`` (the names ``y``
  lays out, its properties then its other required names, open ``x``'s properties in that
  order, each with a schema that implies ``y``'s, so ``x``'s spellings read as ``y``'s
  members followed by undeclared ones), and any other keyword equal in both. Keywords that
  shape the undeclared members (``additionalProperties``, ``patternProperties``, ...) are
  not read.

Anything else is False: not proven, so the branch is kept and compiled.
"""

from __future__ import annotations

import json
from typing import Literal

from maskc.compiler.frontends.json_schema.base import ANNOTATIONS, JsonValue
from maskc.compiler.frontends.json_schema.disjoint import Resolve, ref_target, value_types

__all__ = ["implies"]

_DEPTH = 8  # references, combinators and nested properties followed
_STEPS = 20_000  # comparisons one question may take (unions of unions multiply): then not proven
_COMBINATORS = frozenset({"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref"})
# keywords that decide which undeclared members an object admits: equal in both, and the
# same declared names, or no inclusion is read from them
_MEMBERS = frozenset({"additionalProperties", "patternProperties", "propertyNames", "unevaluatedProperties",
                      "minProperties", "maxProperties", "dependencies", "dependentRequired",
                      "dependentSchemas"})


def _same(a: JsonValue, b: JsonValue) -> bool:
    """Equal as JSON documents, keys in order (``1`` and ``1.0``, ``true`` and ``1`` differ)."""
    return json.dumps(a) == json.dumps(b)


def _key(v: JsonValue) -> str:
    return json.dumps(v, sort_keys=True)


def _values(schema: dict[str, JsonValue]) -> set[str] | None:
    """The instances ``enum``/``const`` allow, as canonical keys (None: not listed)."""
    got: set[str] | None = None
    if "const" in schema:
        got = {_key(schema["const"])}
    e = schema.get("enum")
    if isinstance(e, list):
        vals = {_key(v) for v in e}
        got = vals if got is None else got & vals
    return got


class _Prover:
    def __init__(self, resolve: Resolve, ref_overrides: bool) -> None:
        self.resolve = resolve
        self.ref_overrides = ref_overrides
        self.steps = _STEPS

    def alias(self, schema: dict[str, JsonValue], pointer: str) -> tuple[JsonValue, str] | Literal[False] | None:
        """What ``schema`` stands for when it is a reference (with no siblings, or siblings
        its draft ignores) or a lone ``allOf`` conjunct; False for a reference not read here
        (siblings that merge, or no target); None when it is neither."""
        kws = set(schema) - ANNOTATIONS
        if "$ref" in schema:
            if not self.ref_overrides and kws != {"$ref"}:
                return False
            return ref_target(schema, pointer, self.resolve) or False
        if kws == {"allOf"} and isinstance(schema["allOf"], list) and len(schema["allOf"]) == 1:
            return schema["allOf"][0], f"{pointer}/allOf/0"
        return None

    def implies(self, x: JsonValue, xp: str, y: JsonValue, yp: str, budget: int) -> bool:
        if y is True or x is False or _same(x, y):
            return True
        if isinstance(y, dict) and not set(y) - ANNOTATIONS:
            return True
        self.steps -= 1
        if budget <= 0 or self.steps <= 0 or not isinstance(x, dict) or not isinstance(y, dict):
            return False
        # the right side: a reference, a lone conjunct, a union of branches (without siblings:
        # merged siblings would change the layout)
        y_kw = set(y) - ANNOTATIONS
        alias = self.alias(y, yp)
        if alias is not None:
            return alias is not False and self.implies(x, xp, alias[0], alias[1], budget - 1)
        if y_kw == {"anyOf"} and isinstance(y["anyOf"], list):
            return any(self.implies(x, xp, a, f"{yp}/anyOf/{i}", budget - 1) for i, a in enumerate(y["anyOf"]))
        if y_kw & _COMBINATORS:
            return False
        # the left side: a reference, a lone conjunct, each branch of a union
        x_kw = set(x) - ANNOTATIONS
        alias = self.alias(x, xp)
        if alias is not None:
            return alias is not False and self.implies(alias[0], alias[1], y, yp, budget - 1)
        unions = [kw for kw in ("anyOf", "oneOf") if kw in x]
        if len(unions) == 1 and x_kw == set(unions):
            alts = x[unions[0]]
            return isinstance(alts, list) and bool(alts) and all(
                self.implies(a, f"{xp}/{unions[0]}/{i}", y, yp, budget - 1) for i, a in enumerate(alts))
        # x's own keywords: its other ones (a union, a conjunction, a condition) only narrow
        # it, and merge after its own properties, so its layout starts as its own does
        return self.plain(x, xp, y, yp, budget)

    def plain(self, x: dict[str, JsonValue], xp: str, y: dict[str, JsonValue], yp: str, budget: int) -> bool:
        """Whether ``x``'s own keywords meet each of ``y``'s (``y`` holds no combinator)."""
        for kw, want in y.items():
            if kw in ANNOTATIONS or kw in ("enum", "const"):
                continue
            if kw == "type":
                have, need = value_types(x), value_types({"type": want})
                if have is None or need is None or not all(t in need or (t == "integer" and "number" in need)
                                                           for t in have):
                    return False
            elif kw == "required":
                got = x.get("required")
                if not isinstance(want, list) or not isinstance(got, list) or not (
                        {_key(r) for r in want} <= {_key(r) for r in got}):
                    return False
            elif kw == "properties":
                if not self.properties(x, xp, y, yp, budget):
                    return False
            elif kw in _MEMBERS or kw not in x or not _same(x[kw], want):
                return False  # (undeclared members shaped otherwise: not read here)
        if "required" in y and "properties" not in y and not self.properties(x, xp, {**y, "properties": {}}, yp, budget):
            return False
        need_vals = _values(y)
        if need_vals is not None:
            have_vals = _values(x)
            if have_vals is None or not have_vals <= need_vals:
                return False
        return True

    def properties(self, x: dict[str, JsonValue], xp: str, y: dict[str, JsonValue], yp: str, budget: int) -> bool:
        """Whether ``x``'s members spell as ``y``'s: the names ``y`` lays out (its properties,
        then its required names it does not declare) open ``x``'s properties in that order,
        and each of ``y``'s property schemas is implied by ``x``'s."""
        mine, theirs = x.get("properties"), y.get("properties")
        req = y.get("required", [])
        if not isinstance(mine, dict) or not isinstance(theirs, dict) or not isinstance(req, list):
            return False
        names = list(dict.fromkeys([*theirs, *(r for r in req if isinstance(r, str) and r not in theirs)]))
        if list(mine)[: len(names)] != names:
            return False
        return all(self.implies(mine[n], f"{xp}/properties/{n}", theirs[n], f"{yp}/properties/{n}", budget - 1)
                   for n in theirs)


def _dict(v: JsonValue) -> dict[str, JsonValue]:
    return v if isinstance(v, dict) else {}


def implies(x: JsonValue, x_pointer: str, y: JsonValue, y_pointer: str, resolve: Resolve,
            ref_overrides: bool) -> bool:
    """Whether every spelling ``x`` admits is one ``y`` admits, in ``exact`` semantics
    (False when not proven; see the module doc)."""
    return _Prover(resolve, ref_overrides).implies(x, x_pointer, y, y_pointer, _DEPTH)
