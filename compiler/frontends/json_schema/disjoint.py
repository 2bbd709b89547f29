"""Disjointness of two schemas proven from their keywords alone (no automaton).

``oneOf`` needs its branches disjoint; when the branches hold recursion, the automaton
proof (:meth:`~.combinators.CombinatorsMixin.exclusive`) widens references to any bytes and
often cannot tell the branches apart. Most real unions are *discriminated*: each branch
requires a property the others forbid, or gives a required property a different constant
(``"type": {"enum": ["reference"]}``). Those facts are read here from the keywords each
branch must satisfy (its own, its ``allOf`` conjuncts, the targets of its references),
which only ever narrows what a branch admits, so a proof from them is sound:

* the branches' ``type`` sets do not meet (``integer`` is a ``number``);
* their common instances could only be objects, and a property one branch requires is
  forbidden by the other (``additionalProperties: false``, not declared, no
  ``patternProperties``), or takes constants with no value in common with the other's
  constants for it (which apply wherever the property is present, required there or not).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from maskc.compiler.errors import InputError
from maskc.compiler.frontends.json_schema.base import (ANNOTATIONS, ARRAY_KW, NUMBER_KW, OBJECT_KW, STRING_KW, TYPES,
                                                      JsonValue, json_type, ptr)

__all__ = ["Facts", "facts_of", "disjoint", "on_objects", "generation_facts", "admits_kind", "ALL", "NONE", "SCALAR_KINDS",
           "Resolve", "ref_target", "value_types", "required_alternatives", "declares_keys", "declared_properties"]

Resolve = Callable[[JsonValue, str], tuple[JsonValue, str]]

_DEPTH = 6  # references and allOf levels followed


@dataclass
class Facts:
    """What every instance of a schema satisfies, as far as read."""

    empty: bool = False  # the schema admits nothing (``false``)
    types: frozenset[str] | None = None  # None: any type
    required: set[str] = field(default_factory=set)
    closed: list[frozenset[str]] = field(default_factory=list)  # declared names of closed object facets
    excluded: dict[str, frozenset[str]] = field(default_factory=dict)  # property -> strings it never takes
    scalars: dict[str, frozenset[Scalar]] = field(default_factory=dict)  # property -> its only values, all scalars

    def strings(self, name: str) -> frozenset[str] | None:
        """The only values of property ``name`` when they are all strings, else None."""
        vals = self.scalars.get(name)
        if vals is None or any(kind != "string" for kind, _ in vals):
            return None
        return frozenset(str(v) for _, v in vals)


def _types_of(schema: dict[str, JsonValue]) -> frozenset[str] | None:
    t = schema.get("type")
    if isinstance(t, str) and t in TYPES:
        return frozenset({t})
    if isinstance(t, list) and t and all(isinstance(x, str) and x in TYPES for x in t):
        return frozenset(str(x) for x in t)
    return None


def _meet(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    if a is None:
        return b
    if b is None:
        return a
    out = set(a & b)
    if "integer" in a and "number" in b or "integer" in b and "number" in a:
        out.add("integer")
    return frozenset(out)


def value_types(schema: dict[str, JsonValue]) -> frozenset[str] | None:
    """The types an instance can have by the schema's own ``type``, ``const`` and ``enum``
    (None: any)."""
    types = _types_of(schema)
    for key in ("const", "enum"):
        if key in schema:
            vals = [schema["const"]] if key == "const" else schema["enum"]
            if isinstance(vals, list):
                types = _meet(types, frozenset(json_type(v) for v in vals))
    return types


def ref_target(schema: dict[str, JsonValue], pointer: str, resolve: Resolve) -> tuple[JsonValue, str] | None:
    """The target of ``schema``'s ``$ref`` and its location, or None where it does not
    resolve (it proves nothing here; compiling it reports it)."""
    try:
        return resolve(schema["$ref"], pointer)
    except InputError:
        return None


Scalar = tuple[str, object]
"""A scalar JSON value as JSON Schema compares it: tagged by kind (``true`` is not ``1``),
numbers by value (``1`` is ``1.0``)."""


def _scalar(v: JsonValue) -> Scalar | None:
    """``v`` as a :data:`Scalar`; None for an array, an object or a number no float holds."""
    if isinstance(v, str):
        return ("string", v)
    if isinstance(v, bool) or v is None:
        return ("literal", v)
    if isinstance(v, int):
        return ("number", v)
    if isinstance(v, float) and math.isfinite(v):
        return ("number", int(v) if v.is_integer() else v)
    return None


def _scalar_values(schema: dict[str, JsonValue]) -> frozenset[Scalar] | None:
    """The values a property schema admits when ``const``/``enum`` lists them, all scalars."""
    got: frozenset[Scalar] | None = None
    for kw in ("const", "enum"):
        if kw not in schema:
            continue
        listed = [schema[kw]] if kw == "const" else schema[kw]
        if not isinstance(listed, list):
            return None
        keys = [_scalar(x) for x in listed]
        if any(k is None for k in keys):
            return None
        vals = frozenset(k for k in keys if k is not None)
        got = vals if got is None else got & vals
    return got


def _property_values(schema: JsonValue, pointer: str, resolve: Resolve, ref_overrides: bool, budget: int
                     ) -> tuple[frozenset[Scalar] | None, frozenset[str] | None]:
    """``(the only values as scalars, strings never)`` a property schema's value takes, by
    its own keywords and those of its ``$ref`` target (None: not known). A draft 4 to 7
    ``$ref`` overrides its siblings: only the target speaks. Later drafts apply both, so
    both narrow: the only values meet, the excluded strings join."""
    if not isinstance(schema, dict) or budget <= 0:
        return None, None
    consts: frozenset[Scalar] | None = None
    gone: frozenset[str] | None = None
    if "$ref" in schema:
        got = ref_target(schema, pointer, resolve)
        if got is not None:
            consts, gone = _property_values(got[0], got[1], resolve, ref_overrides, budget - 1)
        if ref_overrides:
            return consts, gone
    own_consts, own_gone = _scalar_values(schema), _excluded_strings(schema)
    conj = schema.get("allOf")
    if isinstance(conj, list):  # (a merged allOf leaves a property's conjuncts here: each applies)
        for i, sub in enumerate(conj):
            c, g = _property_values(sub, f"{pointer}/allOf/{i}", resolve, ref_overrides, budget - 1)
            if c is not None:
                own_consts = c if own_consts is None else own_consts & c
            if g is not None:
                own_gone = g if own_gone is None else own_gone | g
    if own_consts is not None:
        consts = own_consts if consts is None else consts & own_consts
    if own_gone is not None:
        gone = own_gone if gone is None else gone | own_gone
    return consts, gone


def _excluded_strings(schema: JsonValue) -> frozenset[str] | None:
    """The strings a property schema never admits by its own ``not`` of string constants
    (``not: {"enum": [...]}`` or ``not: {"const": ...}``), or None where it says none."""
    if not isinstance(schema, dict):
        return None
    inner = schema.get("not")
    if not isinstance(inner, dict) or set(inner) - ANNOTATIONS - {"enum", "const"} or not {"enum", "const"} & set(inner):
        return None
    got: frozenset[str] | None = None
    if "const" in inner:
        c = inner["const"]
        if not isinstance(c, str):
            return None  # (the not admits no string: it excludes none)
        got = frozenset({c})
    if "enum" in inner:
        e = inner["enum"]
        if not isinstance(e, list):
            return None
        vals = frozenset(x for x in e if isinstance(x, str))
        got = vals if got is None else got & vals
    return got or None


def facts_of(schema: JsonValue, pointer: str, resolve: Resolve, ref_overrides: bool) -> Facts:
    """The facts every instance of ``schema`` satisfies (see the module doc)."""
    facts = Facts()
    _gather(schema, pointer, resolve, ref_overrides, facts, _DEPTH)
    return facts


def _gather(schema: JsonValue, pointer: str, resolve: Resolve, ref_overrides: bool, facts: Facts, budget: int) -> None:
    if schema is False:
        facts.empty = True
        return
    if not isinstance(schema, dict) or budget <= 0:
        return
    target: JsonValue = None
    if "$ref" in schema:
        got = ref_target(schema, pointer, resolve)
        if got is not None:
            _gather(got[0], got[1], resolve, ref_overrides, facts, budget - 1)
        if ref_overrides:
            return  # draft 4 to 7: the siblings of $ref are ignored
    facts.types = _meet(facts.types, value_types(schema))
    req = schema.get("required")
    if isinstance(req, list):
        facts.required.update(x for x in req if isinstance(x, str))
    props = schema.get("properties")
    props = props if isinstance(props, dict) else {}
    if schema.get("additionalProperties") is False and not schema.get("patternProperties"):
        facts.closed.append(frozenset(props))
    for name, sub in props.items():
        consts, gone = _property_values(sub, ptr(pointer, "properties", name), resolve, ref_overrides, budget - 1)
        if gone is not None:
            facts.excluded[name] = facts.excluded.get(name, frozenset()) | gone
        if consts is not None:
            facts.scalars[name] = consts if name not in facts.scalars else facts.scalars[name] & consts
    conj = schema.get("allOf")
    if isinstance(conj, list):
        for i, sub in enumerate(conj):
            _gather(sub, f"{pointer}/allOf/{i}", resolve, ref_overrides, facts, budget - 1)


def disjoint(a: Facts, b: Facts) -> bool:
    """Whether no instance satisfies both (False when it is not proven)."""
    if a.empty or b.empty:
        return True
    both = _meet(a.types, b.types)
    if both is not None and not both:
        return True
    if both is None or not both <= {"object"}:
        return False  # a common instance could be something other than an object
    for x, y in ((a, b), (b, a)):
        for name in x.required:
            if any(name not in names for names in y.closed):
                return True  # x requires a property y forbids
    for x, y in ((a, b), (b, a)):
        for name in x.required:  # (present in every instance of x; y's constants then apply)
            cx, cy = x.scalars.get(name), y.scalars.get(name)
            if cx is not None and cy is not None and not cx & cy:
                return True  # constants of any scalar kind: "kind": "a" against "b", "version": 3 against 1
    for x, y in ((a, b), (b, a)):
        for name in x.required:  # (present in every instance of x; y's constraint then applies)
            vx, gone = x.strings(name), y.excluded.get(name)
            if vx is not None and gone is not None and vx <= gone:
                return True  # x takes only strings y's value never is
    return False


_ALTERNATIVES = 32  # key sets kept per schema; past this, the keys they all share


def required_alternatives(schema: JsonValue, pointer: str, resolve: Resolve, ref_overrides: bool,
                          budget: int = _DEPTH) -> list[frozenset[str]]:
    """Key sets such that every object instance of ``schema`` has all the keys of one of
    them: ``required`` in disjunctive form, read through references, ``allOf`` (each
    conjunct's sets joined) and ``anyOf``/``oneOf`` (the branches' sets side by side).

    Keywords not read only narrow the instances, so the claim stays true of them; an
    unread schema gives ``[frozenset()]`` (nothing known), ``false`` no set at all (no
    instance). Past :data:`_ALTERNATIVES` sets, the keys common to all of them stand for
    them (a weaker claim, still true)."""
    if schema is False:
        return []
    if not isinstance(schema, dict) or budget <= 0:
        return [frozenset()]
    parts: list[list[frozenset[str]]] = []
    if "$ref" in schema:
        got = ref_target(schema, pointer, resolve)
        if got is not None:
            parts.append(required_alternatives(got[0], got[1], resolve, ref_overrides, budget - 1))
        if ref_overrides:
            return parts[0] if parts else [frozenset()]  # draft 4 to 7: the siblings of $ref are ignored
    req = schema.get("required")
    if isinstance(req, list):
        parts.append([frozenset(x for x in req if isinstance(x, str))])
    conj = schema.get("allOf")
    if isinstance(conj, list):
        for i, sub in enumerate(conj):
            parts.append(required_alternatives(sub, f"{pointer}/allOf/{i}", resolve, ref_overrides, budget - 1))
    for kw in ("anyOf", "oneOf"):
        branches = schema.get(kw)
        if isinstance(branches, list) and branches:
            union: list[frozenset[str]] = []
            for i, sub in enumerate(branches):
                union.extend(required_alternatives(sub, f"{pointer}/{kw}/{i}", resolve, ref_overrides, budget - 1))
            parts.append(_few(union))
    out = [frozenset[str]()]
    for part in parts:
        out = _few([a | b for a in out for b in part])
    return out


def _few(sets: list[frozenset[str]]) -> list[frozenset[str]]:
    """``sets`` without repeats, or the keys they share when there are too many."""
    sets = list(dict.fromkeys(sets))
    if len(sets) > _ALTERNATIVES:
        return [frozenset.intersection(*sets)]
    return sets


def on_objects(f: Facts) -> Facts:
    """``f`` for the schema's object instances alone (its types met with ``object``)."""
    return Facts(f.empty, _meet(f.types, frozenset({"object"})), set(f.required), list(f.closed), dict(f.excluded),
                 dict(f.scalars))


# -- which non-objects a schema admits --------------------------------------------------------
# A oneOf whose branches are disjoint on objects may still have non-objects that several
# branches admit: object keywords constrain nothing else. Per kind of non-object value,
# ``admits_kind`` says whether a schema admits all of them, none, or (None) not known.

ALL, NONE = "all", "none"
SCALAR_KINDS = ("null", "boolean", "string", "array", "integer", "fraction")  # fraction: a number not whole
_OBJECT_ONLY = frozenset({"properties", "required", "additionalProperties", "patternProperties", "propertyNames",
                          "minProperties", "maxProperties", "dependencies", "dependentRequired",
                          "dependentSchemas", "unevaluatedProperties"})
_ARRAY_ONLY = frozenset({"items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems",
                         "contains", "minContains", "maxContains", "unevaluatedItems"})
_NUMBERS = frozenset({"integer", "fraction"})


def _applies(keyword: str, kind: str) -> bool | None:
    """Whether ``keyword`` constrains values of ``kind`` (None: it is not one read here)."""
    if keyword in _OBJECT_ONLY:
        return False
    if keyword in _ARRAY_ONLY:
        return kind == "array"
    if keyword in STRING_KW:
        return kind == "string"
    if keyword in NUMBER_KW:
        return kind in _NUMBERS
    return None


def _both(verdicts: list[str | None]) -> str | None:
    if NONE in verdicts:
        return NONE
    return None if None in verdicts else ALL


def admits_kind(schema: JsonValue, pointer: str, kind: str, resolve: Resolve, ref_overrides: bool,
                budget: int = _DEPTH) -> str | None:
    """Whether ``schema`` admits every value of ``kind`` (:data:`ALL`), none (:data:`NONE`),
    or some (None: not read). ``kind`` is a :data:`SCALAR_KINDS` entry, never an object."""
    if schema is True:
        return ALL
    if schema is False:
        return NONE
    if not isinstance(schema, dict) or budget <= 0:
        return None
    verdicts: list[str | None] = []
    if "$ref" in schema:
        target = ref_target(schema, pointer, resolve)
        if target is None:
            return None
        got = admits_kind(target[0], target[1], kind, resolve, ref_overrides, budget - 1)
        if ref_overrides:
            return got
        verdicts.append(got)
    for key, value in schema.items():
        if key in ANNOTATIONS or key == "$ref":
            continue
        sub = f"{pointer}/{key}"
        if key == "type":
            types = _types_of({"type": value})
            if types is None:
                return None
            if kind == "integer":
                verdicts.append(ALL if types & {"integer", "number"} else NONE)
            elif kind == "fraction":
                verdicts.append(ALL if "number" in types else NONE)
            else:
                verdicts.append(ALL if kind in types else NONE)
        elif key in ("allOf", "anyOf", "oneOf"):
            if not isinstance(value, list) or not value:
                return None
            each = [admits_kind(v, f"{sub}/{i}", kind, resolve, ref_overrides, budget - 1) for i, v in enumerate(value)]
            if key == "allOf":
                verdicts.append(_both(each))
            elif None in each:
                verdicts.append(None)
            elif key == "anyOf":
                verdicts.append(ALL if ALL in each else NONE)
            else:
                verdicts.append(ALL if each.count(ALL) == 1 else NONE)
        elif key == "not":
            inner = admits_kind(value, sub, kind, resolve, ref_overrides, budget - 1)
            verdicts.append(None if inner is None else NONE if inner == ALL else ALL)
        elif key == "if":
            cond = admits_kind(value, sub, kind, resolve, ref_overrides, budget - 1)
            branch = "then" if cond == ALL else "else"
            if cond is None:
                verdicts.append(None)
            elif branch in schema:
                verdicts.append(admits_kind(schema[branch], f"{pointer}/{branch}", kind, resolve, ref_overrides,
                                            budget - 1))
        elif key in ("then", "else"):
            continue  # (read with their 'if'; alone they constrain nothing)
        elif _applies(key, kind) is not False:
            verdicts.append(None)  # a keyword that may admit some values of the kind and not others
    return _both(verdicts)


# -- what a generation-semantics language holds ---------------------------------------------
# In ``generation`` semantics an object admits no key its schema does not declare (unless
# additionalProperties or patternProperties admit some), and a schema without ``type``
# takes the types its keywords imply. Where a branch's keywords say exactly which keys it
# declares, its language's objects are closed to them: a fact its JSON Schema facts lack.

_KEYLESS = (STRING_KW | NUMBER_KW | _ARRAY_ONLY | {"type", "minProperties", "maxProperties", "properties",
                                                   "required", "additionalProperties", "allOf", "$ref"})


def _declared(schema: JsonValue, pointer: str, resolve: Resolve, ref_overrides: bool, names: set[str],
              seen: set[str], budget: int) -> bool:
    """Add the keys ``schema`` declares to ``names`` and its keywords to ``seen``; False where
    it may admit other keys (a keyword that can declare or admit more, read nowhere here)."""
    if not isinstance(schema, dict) or budget <= 0:
        return False
    if set(schema) - ANNOTATIONS - _KEYLESS:
        return False
    seen.update(schema)
    extra = schema.get("additionalProperties", False)
    if extra is not False:
        return False
    if "$ref" in schema:
        target = ref_target(schema, pointer, resolve)
        if target is None or not _declared(target[0], target[1], resolve, ref_overrides, names, seen, budget - 1):
            return False
        if ref_overrides:
            return True
    props = schema.get("properties", {})
    req = schema.get("required", [])
    if not isinstance(props, dict) or not isinstance(req, list):
        return False
    names.update(props)
    names.update(x for x in req if isinstance(x, str))
    conj = schema.get("allOf", [])
    return isinstance(conj, list) and all(
        _declared(c, f"{pointer}/allOf/{i}", resolve, ref_overrides, names, seen, budget - 1)
        for i, c in enumerate(conj))


def declares_keys(schema: JsonValue, pointer: str, resolve: Resolve, ref_overrides: bool, budget: int = _DEPTH) -> bool:
    """Whether ``schema`` or what merges into it (references, ``allOf``) declares keys
    (``properties``, ``patternProperties``): in ``generation`` semantics its objects then
    hold the keys it declares, and a property constraint added to it keeps that meaning."""
    if not isinstance(schema, dict) or budget <= 0:
        return False
    if "$ref" in schema:
        got = ref_target(schema, pointer, resolve)
        if got is not None and declares_keys(got[0], got[1], resolve, ref_overrides, budget - 1):
            return True
        if ref_overrides:
            return False
    if "properties" in schema or schema.get("patternProperties"):
        return True
    conj = schema.get("allOf")
    return isinstance(conj, list) and any(
        declares_keys(sub, f"{pointer}/allOf/{i}", resolve, ref_overrides, budget - 1) for i, sub in enumerate(conj))


def declared_properties(schema: JsonValue, pointer: str, resolve: Resolve, ref_overrides: bool,
                        budget: int = _DEPTH) -> dict[str, list[tuple[JsonValue, str]]]:
    """Per key, the ``properties`` schemas (with their locations) that ``schema`` and what
    merges into it (references, ``allOf``) declare for it: the value of that key in every
    object instance meets each of them."""
    out: dict[str, list[tuple[JsonValue, str]]] = {}
    if not isinstance(schema, dict) or budget <= 0:
        return out
    if "$ref" in schema:
        got = ref_target(schema, pointer, resolve)
        if got is not None:
            for k, v in declared_properties(got[0], got[1], resolve, ref_overrides, budget - 1).items():
                out.setdefault(k, []).extend(v)
        if ref_overrides:
            return out
    props = schema.get("properties")
    if isinstance(props, dict):
        for k, v in props.items():
            out.setdefault(k, []).append((v, ptr(pointer, "properties", k)))
    conj = schema.get("allOf")
    if isinstance(conj, list):
        for i, sub in enumerate(conj):
            for k, v in declared_properties(sub, f"{pointer}/allOf/{i}", resolve, ref_overrides, budget - 1).items():
                out.setdefault(k, []).extend(v)
    return out


def _keywords(schema: JsonValue, pointer: str, resolve: Resolve, ref_overrides: bool, top: bool, at_top: set[str],
              anywhere: set[str], budget: int) -> bool:
    """Collect the keywords of ``schema`` and of what merges into it (references, ``allOf``
    conjuncts: ``at_top`` too; ``anyOf``/``oneOf`` branches: ``anywhere`` only); False where a
    keyword could give it another type (``type``, ``enum``, ``const``, a condition, ``not``)."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict) or budget <= 0 or set(schema) & {"type", "enum", "const", "if", "then", "else",
                                                                      "not"}:
        return False
    keys = set(schema) - ANNOTATIONS
    anywhere.update(keys)
    if top:
        at_top.update(keys)
    if "$ref" in schema:
        target = ref_target(schema, pointer, resolve)
        if target is None or not _keywords(target[0], target[1], resolve, ref_overrides, top, at_top, anywhere,
                                           budget - 1):
            return False
        if ref_overrides:
            return True
    for kw in ("allOf", "anyOf", "oneOf"):
        subs = schema.get(kw, [])
        if not isinstance(subs, list) or not all(
                _keywords(c, f"{pointer}/{kw}/{i}", resolve, ref_overrides, top and kw == "allOf", at_top, anywhere,
                          budget - 1) for i, c in enumerate(subs)):
            return False
    return True


def generation_facts(schema: JsonValue, pointer: str, resolve: Resolve, ref_overrides: bool, facts: Facts) -> Facts:
    """``facts`` of ``schema`` with what its ``generation``-semantics language adds, where its
    keywords say so: objects closed to the keys it declares (every key it may write is
    declared by it or the conjuncts merged into it, none admits undeclared ones, and it
    declares ``properties``); and, with no ``type`` anywhere, the object type when object
    keywords alone speak (in it or what merges into every one of its alternatives). The
    language is a part of the instances, so ``facts`` hold of it as they are."""
    types = facts.types
    at_top: set[str] = set()
    anywhere: set[str] = set()
    if types is None and _keywords(schema, pointer, resolve, ref_overrides, True, at_top, anywhere, _DEPTH) and (
            at_top & OBJECT_KW and not anywhere & (ARRAY_KW | _ARRAY_ONLY | STRING_KW | NUMBER_KW)):
        types = frozenset({"object"})  # (the type generation infers from object keywords)
    closed = list(facts.closed)
    names: set[str] = set()
    seen: set[str] = set()
    if _declared(schema, pointer, resolve, ref_overrides, names, seen, _DEPTH) and "properties" in seen:
        closed.append(frozenset(names))  # (an object that declares no properties admits any key)
    return Facts(facts.empty, types, set(facts.required), closed, dict(facts.excluded), dict(facts.scalars))
