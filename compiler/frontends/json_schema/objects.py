"""Objects: ``properties``, ``required``, ``additionalProperties``, ``patternProperties``,
``propertyNames``, ``minProperties``/``maxProperties`` and the dependency keywords
(``dependentRequired``, ``dependentSchemas``, draft 7's ``dependencies``).

Properties are emitted in definition order (then required names not listed, then names
the dependencies mention); optional ones may be skipped (:class:`~maskc.compiler.ir.Fields`).
Keys are matched in their single canonical JSON spelling, so a key cannot hide a listed
name behind an escape. A dependency splits the object in two languages, trigger absent
and trigger present, so its cost doubles per dependency (capped). :meth:`fold_objects`
rewrites two ``allOf`` conjuncts so that merging their object keywords one by one is exact.
Keys that must exist (:data:`KEY_EXISTS`, from ``not`` of ``propertyNames``) are witnessed by
a declared property or by an undeclared member (:func:`.sequences.witness_language`).
"""

from __future__ import annotations

import json
from typing import Any

from maskc.compiler.errors import EmptyLanguage, RegexSyntaxError, SchemaError, UnsupportedRegex
from maskc.compiler.frontends.json_schema.base import JsonValue, dumps_layout
from maskc.compiler.frontends.json_schema.base import ptr as _ptr
from maskc.compiler.frontends.json_schema.drafts import ref_overrides_siblings
from maskc.compiler.frontends.json_schema.refs import has_ref
from maskc.compiler.frontends.json_schema.witnesses import KEY_EXISTS, WitnessesMixin, accepts_bytes
from maskc.compiler.frontends.json_text import CANONICAL_ANY_CHAR, Layout, canonical_chars
from maskc.compiler.frontends.regex import regex_to_ir
from maskc.compiler.ir import NOTHING, Fields, Node, Product, alt, lit, rep, seq
from maskc.compiler.product import proven_empty

__all__ = ["ObjectsMixin", "KEY_EXISTS", "MAX_DEPENDENCIES", "MAX_PROPERTY_COUNT", "MAX_PATTERN_GROUPS"]

MAX_DEPENDENCIES = 5
"""Dependencies whose trigger may be absent or present: each doubles the object's language."""
MAX_PROPERTY_COUNT = 64
"""Largest ``minProperties``/``maxProperties`` bound compiled: a bound copies each member per count."""
MAX_PATTERN_GROUPS = 32
"""Exact semantics: most sets of ``patternProperties`` patterns that one key may match together."""

_ORDER = "$$order"  # set by an object split: names placed after the properties, in this order
_DEPENDENCY_KW = ("dependentRequired", "dependentSchemas", "dependencies")
# applicators whose evaluated properties depend on which subschema matches (``not`` never
# contributes any; ``dependentSchemas`` is split first, see ObjectsMixin.object)
_APPLICATORS = ("anyOf", "oneOf", "if", "then", "else", "$dynamicRef", "$recursiveRef")

_Dependency = tuple[str, str, "list[str] | None", JsonValue]  # keyword, trigger, names, schema


class ObjectsMixin(WitnessesMixin):
    """The ``object`` type."""

    def object(self, schema: dict[str, JsonValue], pointer: str, depth: int) -> Node:
        deps = self._dependencies(schema, pointer)
        if deps:
            return self._split(schema, deps, pointer, depth)
        if "unevaluatedProperties" in schema:
            schema = self.localize_unevaluated(schema, pointer)
        props = schema.get("properties", {})
        if not isinstance(props, dict):
            raise SchemaError("properties must be an object", pointer=_ptr(pointer, "properties"))
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise SchemaError("required must be an array of strings", pointer=_ptr(pointer, "required"))
        layout = Layout(self.options.whitespace, depth)
        pattern_props = schema.get("patternProperties", {})
        if not isinstance(pattern_props, dict):
            raise SchemaError("patternProperties must be an object", pointer=_ptr(pointer, "patternProperties"))
        declared = "properties" in schema or bool(pattern_props)
        # generation: a schema that declares its keys means those keys only; exact: JSON Schema
        addl = schema.get("additionalProperties", False if declared and not self.exact else True)
        names_lang = self._property_names(schema, pointer, depth)
        # key content languages of the patterns (JSON Schema: a pattern matches anywhere)
        patterns: list[tuple[str, Node, Any]] = []
        for pat, psub in pattern_props.items():
            pptr = _ptr(pointer, "patternProperties", pat)
            try:
                content = regex_to_ir(pat, canonical_chars, search=True)
            except UnsupportedRegex as e:
                self.unsupported("patternProperties", pptr, e.reason)
                continue
            except RegexSyntaxError as e:
                raise RegexSyntaxError(e.reason, pattern=pat, offset=e.offset, pointer=pptr) from e
            patterns.append((pat, content, psub))
        items: list[tuple[Node, bool]] = []
        item_keys: list[bytes] = []
        # order: properties, then the names an object split fixed (see _split), then the
        # other required names
        names = list(props)
        for name in [*schema.get(_ORDER, ()), *required]:
            if name not in names:
                names.append(name)
        for name in names:
            key_bytes = dumps_layout(name, layout)
            req = name in required
            if names_lang is not None and not accepts_bytes(names_lang, key_bytes):
                if req:
                    return NOTHING  # a required name that propertyNames rejects
                continue
            matching = [psub for pat, content, psub in patterns if accepts_bytes(content, key_bytes[1:-1])]
            if name in props:
                sub: JsonValue = props[name]
                if matching:
                    sub = {"allOf": [sub, *matching]}
            elif matching:
                sub = {"allOf": matching} if len(matching) > 1 else matching[0]
            elif addl is False and "additionalProperties" in schema:
                if req:
                    return NOTHING  # a required property that no schema admits
                continue
            elif addl is False:
                if not req:
                    continue
                # generation's closed default: a name it requires is still one of its keys,
                # with any value (what the absent keyword admits)
                sub = True
            else:
                sub = addl
            vnode = self.value(sub, _ptr(pointer, "properties", name), depth + 1)
            if vnode == NOTHING:
                if req:
                    return NOTHING
                continue
            items.append((seq(lit(key_bytes), layout.colon, vnode), req))
            item_keys.append(key_bytes)
        listed = alt(*(lit(dumps_layout(n, layout)) for n in names)) if names else NOTHING
        pattern_keys = [seq(lit('"'), content, lit('"')) for _, content, _ in patterns]
        rest_parts: list[tuple[Node, Node]] = []  # (key, value) of the undeclared members
        for members, key in self._pattern_groups(patterns, pattern_keys, listed, pointer):
            pats = [patterns[i] for i in members]
            sub = pats[0][2] if len(pats) == 1 else {"allOf": [p[2] for p in pats]}
            vnode = self.value(sub, _ptr(pointer, "patternProperties", pats[0][0]), depth + 1)
            if vnode != NOTHING:
                rest_parts.append((_restrict(key, names_lang), vnode))
        if addl is not False:
            vnode = self.value(addl, _ptr(pointer, "additionalProperties"), depth + 1)
            if vnode != NOTHING:
                any_key = seq(lit('"'), rep(CANONICAL_ANY_CHAR, 0, None), lit('"'))
                excluded = alt(listed, *pattern_keys)
                if excluded != NOTHING:
                    any_key = Product(any_key, excluded, "minus")
                rest_parts.append((_restrict(any_key, names_lang), vnode))
        rest: Node | None = alt(*(seq(k, layout.colon, v) for k, v in rest_parts)) if rest_parts else None
        needs = self._key_needs(schema, depth)
        bounds = self._counts(schema, items, rest is not None, pointer)
        if bounds is None or needs is None:
            return NOTHING
        if needs:
            return self._witnessed(items, item_keys, rest_parts, layout, bounds, needs)
        has_required = any(r for _, r in items)
        return seq(
            lit("{"),
            Fields(
                tuple(items),
                layout.first,
                layout.sep,
                layout.close("}"),
                None if has_required else layout.close_empty("}"),
                rest,
                *bounds,
            ),
        )

    # -- propertyNames ---------------------------------------------------------------------

    def _property_names(self, schema: dict[str, JsonValue], pointer: str, depth: int) -> Node | None:
        """The JSON string language every key must be in (None: any key)."""
        if "propertyNames" not in schema:
            return None
        pn = schema["propertyNames"]
        pptr = _ptr(pointer, "propertyNames")
        if pn is True or pn == {}:
            return None
        if pn is False:
            return NOTHING
        # only strings can be keys: the subschema's string language, made regular
        self.bounded_any += 1
        try:
            node = self.value({"allOf": [pn, {"type": "string"}]}, pptr, depth + 1)
        except EmptyLanguage:
            return NOTHING
        finally:
            self.bounded_any -= 1
        if has_ref(node):
            self.unsupported("propertyNames", pptr, "the name schema is recursive")
            return None
        return node

    # -- patternProperties -----------------------------------------------------------------

    def _pattern_groups(
        self, patterns: list[tuple[str, Node, Any]], keys: list[Node], listed: Node, pointer: str,
    ) -> list[tuple[tuple[int, ...], Node]]:
        """Sets of patterns that one undeclared key matches together, with their key languages.

        A key matching exactly the patterns of a set must satisfy all their schemas. Under
        generation semantics only single patterns are kept (keys that two patterns match are
        not generated: a sound restriction that keeps the grammar small); exact semantics
        enumerates every set whose patterns overlap pairwise (capped).
        """
        m = len(patterns)
        groups: list[tuple[int, ...]] = [(i,) for i in range(m)]
        if self.exact and m > 1:
            limit = self.options.limits.max_states
            overlap = {
                (i, j): not proven_empty(Product(keys[i], keys[j], "and"), max_states=limit, deadline=self.deadline)
                for i in range(m) for j in range(i + 1, m)
            }
            frontier = [g for g in groups]
            while frontier:
                nxt: list[tuple[int, ...]] = []
                for g in frontier:
                    for j in range(g[-1] + 1, m):
                        if all(overlap[(i, j)] for i in g):
                            nxt.append((*g, j))
                groups += nxt
                if len(groups) > m + MAX_PATTERN_GROUPS:
                    self.unsupported(
                        "patternProperties", _ptr(pointer, "patternProperties"),
                        f"more than {MAX_PATTERN_GROUPS} sets of patterns can match one key together",
                    )
                    groups = [(i,) for i in range(m)]
                    break
                frontier = nxt
        out: list[tuple[tuple[int, ...], Node]] = []
        for g in groups:
            key = keys[g[0]]
            for i in g[1:]:
                key = Product(key, keys[i], "and")
            others = alt(listed, *(k for j, k in enumerate(keys) if j not in g))
            if others != NOTHING:
                key = Product(key, others, "minus")
            if len(g) > 1 and proven_empty(key, max_states=self.options.limits.max_states, deadline=self.deadline):
                continue
            out.append((g, key))
        return out

    # -- minProperties / maxProperties -----------------------------------------------------

    def _counts(
        self, schema: dict[str, JsonValue], items: list[tuple[Node, bool]], has_rest: bool, pointer: str,
    ) -> tuple[int, int | None] | None:
        """``(min_count, max_count)`` for the Fields, reduced to what constrains (None: no object)."""
        lo = _count(schema, "minProperties", pointer)
        hi = _count(schema, "maxProperties", pointer)
        n_req = sum(1 for _, r in items if r)
        n_all = len(items)
        if lo is not None and lo <= n_req:
            lo = None  # the required properties reach it
        if hi is not None and not has_rest and hi >= n_all:
            hi = None  # the declared properties cannot exceed it
        if hi is not None and hi < max(n_req, lo or 0):
            return None
        if lo is not None and lo > n_all + (1 if has_rest else 0):
            if not has_rest:
                return None
            if self.exact:
                # two undeclared keys may be one key repeated: their distinctness is not regular
                self.unsupported(
                    "minProperties", _ptr(pointer, "minProperties"),
                    f"reaching {lo} needs {lo - n_all} undeclared keys to differ from each other",
                )
                lo = None
            else:
                return None  # generation: keys past the declared ones and one more are not made
        for kw, v in (("minProperties", lo), ("maxProperties", hi)):
            if v is not None and v > MAX_PROPERTY_COUNT:
                self.unsupported(kw, _ptr(pointer, kw), f"bounds above {MAX_PROPERTY_COUNT} are not compiled")
                if kw == "minProperties":
                    lo = None
                else:
                    hi = None
        return lo or 0, hi

    # -- dependencies ------------------------------------------------------------------------

    def _dependencies(self, schema: dict[str, JsonValue], pointer: str) -> list[_Dependency]:
        """The dependencies that constrain, in document order (vacuous ones dropped)."""
        out: list[_Dependency] = []
        for kw in _DEPENDENCY_KW:
            if kw not in schema:
                continue
            table = schema[kw]
            if not isinstance(table, dict):
                raise SchemaError(f"{kw} must be an object", pointer=_ptr(pointer, kw))
            for name, dep in table.items():
                if kw == "dependentRequired" or (kw == "dependencies" and isinstance(dep, list)):
                    if not isinstance(dep, list) or not all(isinstance(d, str) for d in dep):
                        raise SchemaError(f"{kw} values must be arrays of strings", pointer=_ptr(pointer, kw, name))
                    if dep:
                        out.append((kw, name, list(dep), None))
                elif dep is not True and dep != {}:
                    out.append((kw, name, None, dep))
        return out

    def _split(self, schema: dict[str, JsonValue], deps: list[_Dependency], pointer: str, depth: int) -> Node:
        """The object language as the union of "trigger absent" and "trigger present"."""
        base = {k: v for k, v in schema.items() if k not in _DEPENDENCY_KW}
        required = list(schema.get("required", []))
        if not isinstance(schema.get("required", []), list):
            raise SchemaError("required must be an array of strings", pointer=_ptr(pointer, "required"))
        # Names the dependencies mention get fixed positions, after the properties and the
        # required names, in order of mention (trigger, then its dependents), in every
        # branch: a dependency key can never slip in as an undeclared key.
        order = list(schema.get(_ORDER, [r for r in required if r not in schema.get("properties", {})]))
        for _, name, names, _ in deps:
            for n in [name, *(names or ())]:
                if n not in order:
                    order.append(n)
        base[_ORDER] = order
        splitting = [d for d in deps if d[1] not in required]
        if len(splitting) > MAX_DEPENDENCIES:
            kw, name = splitting[MAX_DEPENDENCIES][0], splitting[MAX_DEPENDENCIES][1]
            self.unsupported(kw, _ptr(pointer, kw, name), f"more than {MAX_DEPENDENCIES} dependencies in one object")
            return self.object(base, pointer, depth)  # lenient: compiled without them
        kw, name, names, dep_schema = deps[0]
        rest = dict(base)
        for okw, oname, onames, oschema in deps[1:]:
            table = dict(rest.get(okw, {}))
            table[oname] = onames if onames is not None else oschema
            rest[okw] = table
        if self.exact is False and "additionalProperties" not in rest and "properties" not in rest \
                and not rest.get("patternProperties"):
            rest["additionalProperties"] = True  # generation's default for an undeclared object
        branches: list[Node] = []
        if name not in required:
            absent = dict(rest)
            absent["properties"] = {**rest.get("properties", {}), name: False}
            branches.append(self.object(absent, pointer, depth))
        if names is not None:
            present = dict(rest)
            present["required"] = list(dict.fromkeys([*required, name, *names]))
            branches.append(self.object(present, pointer, depth))
        elif dep_schema is not False:
            # the dependent schema as a conjunct: an unevaluatedProperties of the object sees it
            present = {**rest, "type": "object", "required": list(dict.fromkeys([*required, name]))}
            present["allOf"] = [*present.get("allOf", []), dep_schema]
            branches.append(self.value(present, pointer, depth))
        return alt(*branches)

    # -- allOf ---------------------------------------------------------------------------------

    def fold_objects(
        self, a: dict[str, JsonValue], b: dict[str, JsonValue], pointer: str,
    ) -> tuple[dict[str, JsonValue], dict[str, JsonValue]]:
        """``a`` and ``b`` rewritten so that merging their object keywords one by one is exact.

        ``additionalProperties`` of one conjunct applies to the names the other declares and
        it does not: those names' schemas take it in. A property count or name schema, a
        dependency table or a pattern table present in both becomes their conjunction in
        both. An ``unevaluatedProperties`` of ``b`` (a conjunct) sees only ``b``'s own
        properties, so it becomes ``b``'s ``additionalProperties``.
        """
        if "unevaluatedProperties" in b:
            b = self.localize_unevaluated(b, pointer)
        if not any(k in b for k in _FOLDED) or not any(k in a for k in _FOLDED):
            return a, b
        a, b = dict(a), dict(b)
        pa, pb = _props(a), _props(b)
        for x, y, px, py in ((a, b, pa, pb), (b, a, pb, pa)):
            ap = y.get("additionalProperties", True)
            if ap is True or ap == {}:
                continue
            if x.get("patternProperties"):
                self.unsupported(
                    "allOf", pointer,
                    "patternProperties of one conjunct meet additionalProperties of another",
                )
            ypats = [p for p in y.get("patternProperties", {}) if isinstance(p, str)]
            new = dict(px)
            for n, s in px.items():
                if n not in py and not _name_matches(n, ypats):
                    new[n] = {"allOf": [s, ap]} if s is not True and s != {} else ap
            if new != px:
                x["properties"] = new
        for k in ("additionalProperties", "propertyNames"):
            va, vb = a.get(k), b.get(k)
            if va is not None and vb is not None and va != vb:
                joint: JsonValue = False if va is False or vb is False else {"allOf": [va, vb]}
                a[k] = b[k] = joint
        if "minProperties" in a and "minProperties" in b:
            a["minProperties"] = b["minProperties"] = max(a["minProperties"], b["minProperties"])
        if "maxProperties" in a and "maxProperties" in b:
            a["maxProperties"] = b["maxProperties"] = min(a["maxProperties"], b["maxProperties"])
        pats_a, pats_b = a.get("patternProperties"), b.get("patternProperties")
        if isinstance(pats_a, dict) and isinstance(pats_b, dict) and pats_a != pats_b:
            joined = dict(pats_a)
            for p, s in pats_b.items():
                joined[p] = {"allOf": [joined[p], s]} if p in joined and joined[p] != s else s
            a["patternProperties"] = b["patternProperties"] = joined
        ka, kb = a.get(KEY_EXISTS), b.get(KEY_EXISTS)
        if isinstance(ka, list) and isinstance(kb, list) and ka != kb:
            a[KEY_EXISTS] = b[KEY_EXISTS] = [*ka, *(e for e in kb if e not in ka)]
        ma, mb = a.get(_ORDER), b.get(_ORDER)
        if isinstance(ma, list) and isinstance(mb, list) and ma != mb:
            a[_ORDER] = b[_ORDER] = list(dict.fromkeys([*ma, *mb]))
        for k in _DEPENDENCY_KW:
            ta, tb = a.get(k), b.get(k)
            if isinstance(ta, dict) and isinstance(tb, dict) and ta != tb:
                joined = dict(ta)
                for n, d in tb.items():
                    joined[n] = d if n not in joined or joined[n] == d else _join_dependency(joined[n], d)
                a[k] = b[k] = joined
        return a, b

    def unevaluated(self, schema: dict[str, JsonValue], pointer: str) -> dict[str, JsonValue]:
        """``schema`` (holding ``unevaluatedProperties``) in a form the other keywords compile.

        A reference becomes an ``allOf`` of its target and the other keywords (the order a
        reference merges in), the keyword staying with the schema that holds both; with
        ``allOf`` the keyword waits for the merged schema; otherwise it becomes
        ``additionalProperties`` (:meth:`localize_unevaluated`).
        """
        refs = [k for k in ("$ref", "$dynamicRef", "$recursiveRef") if k in schema]
        if refs and not ref_overrides_siblings(self.draft):
            siblings = {k: v for k, v in schema.items() if k not in refs and k != "unevaluatedProperties"}
            target = {k: schema[k] for k in refs}
            return {"unevaluatedProperties": schema["unevaluatedProperties"], "allOf": [target, siblings]}
        if refs or "allOf" in schema:
            return schema
        return self.localize_unevaluated(schema, pointer)

    def localize_unevaluated(self, schema: dict[str, JsonValue], pointer: str) -> dict[str, JsonValue]:
        """``schema`` with ``unevaluatedProperties`` expressed as ``additionalProperties``.

        Exact where the properties a schema evaluates are its own ``properties`` and
        ``patternProperties`` (``allOf``/``$ref`` conjuncts merged in); an applicator whose
        evaluation depends on which branch matches is refused by name.
        """
        blocking = [k for k in _APPLICATORS if k in schema]
        if not blocking and any(k in schema for k in _DEPENDENCY_KW):
            return schema  # the object splits on its dependencies first, then localizes
        if blocking:
            self.unsupported(
                "unevaluatedProperties", _ptr(pointer, "unevaluatedProperties"),
                f"next to {blocking[0]}, the evaluated properties depend on which subschema matches",
            )
            return {k: v for k, v in schema.items() if k != "unevaluatedProperties"}
        out = {k: v for k, v in schema.items() if k != "unevaluatedProperties"}
        if "additionalProperties" not in out:
            out["additionalProperties"] = schema["unevaluatedProperties"]
        return out


_FOLDED = frozenset(
    {"properties", "patternProperties", "additionalProperties", "propertyNames", "minProperties",
     "maxProperties", _ORDER, KEY_EXISTS, *_DEPENDENCY_KW}
)


def _props(schema: dict[str, JsonValue]) -> dict[str, JsonValue]:
    p = schema.get("properties", {})
    return p if isinstance(p, dict) else {}


def _name_matches(name: str, patterns: list[str]) -> bool:
    """Whether a pattern of ``patterns`` (ECMA-262, searched) matches the property ``name``."""
    for pat in patterns:
        try:
            content = regex_to_ir(pat, canonical_chars, search=True)
        except (UnsupportedRegex, RegexSyntaxError):
            return True  # unknown: assume it matches (then its schema, not the other's, is kept)
        if accepts_bytes(content, json.dumps(name, ensure_ascii=False).encode()[1:-1]):
            return True
    return False


def _join_dependency(x: JsonValue, y: JsonValue) -> JsonValue:
    if isinstance(x, list) and isinstance(y, list):
        return list(dict.fromkeys([*x, *y]))
    xs = {"required": x} if isinstance(x, list) else x
    ys = {"required": y} if isinstance(y, list) else y
    return {"allOf": [xs, ys]}


def _count(schema: dict[str, JsonValue], kw: str, pointer: str) -> int | None:
    v = schema.get(kw)
    if v is None:
        return None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise SchemaError(f"{kw} must be a non-negative integer", pointer=_ptr(pointer, kw))
    return v


def _restrict(key: Node, names: Node | None) -> Node:
    return key if names is None else Product(key, names, "and")


