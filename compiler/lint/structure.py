"""Structural rules: values with no length bound, and unions a consumer must branch on.

``unbounded-string``, ``unbounded-array`` and ``unbounded-object`` fire where maskc's
grammar lets the model go on without end: they read each generated subschema as the
compiler does (:mod:`.views`), and decide a ``pattern`` or ``format`` on its automaton (a
loop on a path to acceptance, :func:`~maskc.compiler.analysis.worst_case_length`), not
on its spelling. ``nullable-union`` and ``mixed-type-union`` name unions of JSON types.

Untyped values (``{}``, ``true``: any JSON value) are not reported here; whether they end
is the termination rules' business.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from typing import Any

from maskc.compiler.analysis import worst_case_length
from maskc.compiler.errors import EmptyLanguage, MaskcError
from maskc.compiler.findings import Finding, RuleInfo
from maskc.compiler.frontends import formats
from maskc.compiler.frontends.json_schema.objects import MAX_PROPERTY_COUNT
from maskc.compiler.frontends.json_text import canonical_chars
from maskc.compiler.frontends.regex import regex_to_ir
from maskc.compiler.ir import Node as IrNode
from maskc.compiler.ir import Product
from maskc.compiler.lint.views import SchemaViews, family, is_pure_ref, types_of, views_of
from maskc.compiler.lint.walk import Node
from maskc.compiler.options import CompileOptions, Limits

__all__ = ["RULES", "check", "string_bound"]

RULES: list[RuleInfo] = [
    RuleInfo(
        "unbounded-string", "warning",
        "A string with no maxLength, enum, const, or pattern/format of bounded length.",
        "Nothing in the grammar makes the model close the quote: a model that loops, or "
        "copies its input, writes until max_tokens and the output is cut off (invalid JSON).",
        '{"type": "string"}   {"type": "string", "pattern": "^[a-z]+$"}',
        "Add maxLength, an enum, or an anchored pattern with bounded repeats ({1,64} instead of +).",
    ),
    RuleInfo(
        "unbounded-array", "warning",
        "An array with no maxItems (and no closed prefixItems).",
        "The model may append items without end; a repetition loop then runs to max_tokens.",
        '{"type": "array", "items": {"type": "integer"}}',
        "Add maxItems, or close a tuple with prefixItems and items: false.",
    ),
    RuleInfo(
        "unbounded-object", "warning",
        "An object that admits any number of undeclared keys.",
        "additionalProperties (or patternProperties, or an object with no properties) lets "
        "the model invent keys without end, and consumers see keys they do not expect.",
        '{"type": "object"}   {"type": "object", "additionalProperties": {"type": "string"}}',
        "List the keys in properties and set additionalProperties: false.",
    ),
    RuleInfo(
        "nullable-union", "info",
        "A value that may be null: type [T, \"null\"], or anyOf/oneOf with a null branch.",
        "Every consumer must handle null, and a model may choose null to avoid answering.",
        '{"type": ["string", "null"]}',
        "Keep null only where absence is a real answer; otherwise drop the null branch.",
    ),
    RuleInfo(
        "mixed-type-union", "warning",
        "A union of unrelated JSON types (string | number | object ...).",
        "Consumers must branch on the type, and the model picks a type by chance, not meaning "
        "(\"3\" or 3). integer and number count as one type; T | null is nullable-union's.",
        '{"type": ["string", "number"]}   {"anyOf": [{"type": "string"}, {"type": "object"}]}',
        "Pick one type, or wrap each alternative in an object with a discriminating const field.",
    ),
]

_ANALYSIS_STATES = 50_000  # a bound proof is a convenience: give up past this
_ANALYSIS_SECONDS = 5.0

Bound = tuple[str, str, bytes, bytes]
"""(verdict, detail, loop_prefix, loop): verdict ``bounded``, ``unbounded`` or ``unknown``."""


@functools.lru_cache(maxsize=1024)
def string_bound(fmt: str | None, pattern: str | None, max_states: int = _ANALYSIS_STATES) -> Bound:
    """Whether the string contents that ``format`` and ``pattern`` admit together (as maskc
    compiles them) have a longest one, decided on their automaton."""
    parts: list[IrNode] = []
    try:
        if fmt is not None:
            node = formats.format_node(fmt)
            if node is None:
                return "unknown", f"format {fmt!r} is not one maskc enforces", b"", b""
            parts.append(node)
        if pattern is not None:
            parts.append(regex_to_ir(pattern, canonical_chars, search=True))
    except MaskcError as e:
        return "unknown", f"the pattern cannot be compiled ({getattr(e, 'reason', e)})", b"", b""
    if not parts:
        return "unbounded", "", b"", b""
    body = parts[0] if len(parts) == 1 else Product(parts[0], parts[1], "and")
    from maskc.compiler.pipeline import grammar_dfa  # the pipeline imports the front ends

    options = CompileOptions(limits=Limits.scaled(max_states=max_states, max_seconds=_ANALYSIS_SECONDS))
    try:
        dfa = grammar_dfa(body, options, deadline=time.monotonic() + _ANALYSIS_SECONDS)
    except EmptyLanguage:
        return "bounded", "no string matches", b"", b""
    except MaskcError as e:
        return "unknown", f"too large to analyse ({getattr(e, 'message', e)})", b"", b""
    bound = worst_case_length(dfa)
    if bound.bounded:
        return "bounded", f"at most {bound.max_bytes} bytes", b"", b""
    return "unbounded", "", bound.loop_prefix, bound.loop


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _listed(view: dict[str, Any]) -> bool:
    return "const" in view or isinstance(view.get("enum"), list)


def _string_problem(view: dict[str, Any]) -> tuple[str, str | None] | None:
    """Why a string view is unbounded (message tail, witness), or None when it is bounded."""
    if _int(view.get("maxLength")) or _listed(view):
        return None
    fmt = view.get("format") if isinstance(view.get("format"), str) else None
    pat = view.get("pattern") if isinstance(view.get("pattern"), str) else None
    notes: list[str] = []
    witness: str | None = None
    verdicts = []
    for f, p, what in ((fmt, None, f"format {fmt!r}"), (None, pat, f"pattern {pat!r}")):
        if f is None and p is None:
            continue
        verdict, detail, prefix, loop = string_bound(f, p)
        verdicts.append(verdict)
        if verdict == "bounded":
            return None
        if verdict == "unknown":
            notes.append(f"{detail}, so it bounds nothing" if f else f"{what}: {detail}, so it bounds nothing")
        else:
            notes.append(f"{what} admits strings of any length"
                         + (f" (it can repeat {_show(loop)} without end)" if loop else ""))
            if p is not None and loop:
                witness = (prefix + loop + loop + loop).decode("utf-8", "backslashreplace")
    if fmt is not None and pat is not None and verdicts == ["unbounded", "unbounded"]:
        if string_bound(fmt, pat)[0] == "bounded":
            return None
    tail = "; ".join(notes)
    return (f"; {tail}" if tail else ""), witness


def _show(b: bytes) -> str:
    text = b.decode("utf-8", "backslashreplace")
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _array_problem(view: dict[str, Any]) -> str | None:
    if _int(view.get("maxItems")) or _listed(view):
        return None
    items = view.get("items", True)
    prefix = view.get("prefixItems")
    if isinstance(items, list):  # draft 7 tuple form
        prefix, items = items, view.get("additionalItems", True)
    if items is False:
        return None
    if isinstance(prefix, list) and prefix:
        return (f"; prefixItems fixes the first {len(prefix)} items, but "
                f"{'additionalItems' if isinstance(view.get('items'), list) else 'items'} is not false, "
                "so more may follow")
    return ""


# Keywords next to which unevaluatedProperties does not reduce to additionalProperties (the
# evaluated properties depend on which subschema matches): the compiler refuses it there.
_UNEVALUATED_BLOCKERS = ("anyOf", "oneOf", "if", "then", "else", "$dynamicRef", "$recursiveRef")


def _count(v: Any) -> int | None:
    """A ``minProperties``/``maxProperties`` value as the compiler reads it (integral floats too)."""
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return v if _int(v) else None


def _listed_names(pn: Any) -> list[str] | None:
    """The key names a ``propertyNames`` schema lists (``const``/``enum``), or None."""
    if not isinstance(pn, dict):
        return None
    values = [pn["const"]] if "const" in pn else pn.get("enum")
    if not isinstance(values, list):
        return None
    return [v for v in values if isinstance(v, str)]


def _object_problem(view: dict[str, Any], exact: bool = False, union: str | None = None) -> str | None:
    """Why maskc's grammar admits unbounded keys here (see the objects front end), or None.

    Keys past the declared ones come from ``additionalProperties`` (or an
    ``unevaluatedProperties`` that reduces to it) and ``patternProperties``; under
    generation semantics a schema that declares its keys admits no others. A bound on the
    count (``maxProperties``) or names that leave no undeclared key (``propertyNames: false``,
    or a ``propertyNames`` enum of declared names) closes the object; a finite set of
    undeclared names does not, as nothing stops a key from repeating. ``union``: the
    ``anyOf``/``oneOf`` that ``view`` was taken out of, if any.
    """
    if _listed(view):
        return None
    pn = view.get("propertyNames")
    if pn is False:
        return None  # no key at all
    props = view.get("properties")
    props = props if isinstance(props, dict) else {}
    patterns = view.get("patternProperties")
    patterns = patterns if isinstance(patterns, dict) else {}
    declared = "properties" in view or bool(patterns)
    names = _listed_names(pn)
    if names is not None and all(n in props for n in names):
        return None  # propertyNames admits declared names only
    addl_kw = "additionalProperties"
    reasons = []
    blocker = union or next((k for k in _UNEVALUATED_BLOCKERS if k in view), None)
    if "additionalProperties" in view:
        addl = view["additionalProperties"]
    elif "unevaluatedProperties" in view and blocker is None:
        addl, addl_kw = view["unevaluatedProperties"], "unevaluatedProperties"
    else:
        addl = False if declared and not exact else True
        if addl is not False and "unevaluatedProperties" in view:
            # the compiler refuses it there (unenforced-keyword) and compiles without it
            reasons.append(f"unevaluatedProperties next to {blocker} is not enforced by maskc's grammar")
    if addl is not False and not reasons:
        reasons.append("it declares no properties, so any key is admitted" if not declared and addl_kw not in view
                       else "JSON Schema admits undeclared keys (exact semantics)" if addl_kw not in view
                       else f"{addl_kw} is true" if addl is True or addl == {}
                       else f"{addl_kw} is a schema")
    free = [p for p, sch in patterns.items() if sch is not False]
    if free:
        reasons.append(f"patternProperties admits any number of keys matching {free[0]!r}")
    if not reasons:
        return None
    cap = _count(view.get("maxProperties"))
    if cap is not None:
        if cap <= MAX_PROPERTY_COUNT:
            return None
        reasons.append(f"maxProperties {cap} is over maskc's bound of {MAX_PROPERTY_COUNT} and not enforced")
    if names is not None:
        reasons.append(f"propertyNames lists {len(names)} names, but the grammar does not stop an "
                       "undeclared key from repeating")
    return "; " + "; ".join(reasons)


_CHECKS = (("unbounded-string", "string"), ("unbounded-array", "array"), ("unbounded-object", "object"))


def _problems(view: Any, exact: bool = False, union: str | None = None) -> dict[str, tuple[str, str | None]]:
    """The unbounded-* rules a view fires, with each one's message tail and witness."""
    if not isinstance(view, dict) or _listed(view) or "anyOf" in view or "oneOf" in view:
        return {}
    types = types_of(view) or frozenset()
    out: dict[str, tuple[str, str | None]] = {}
    if "string" in types:
        got = _string_problem(view)
        if got is not None:
            out["unbounded-string"] = got
    if "array" in types:
        tail = _array_problem(view)
        if tail is not None:
            out["unbounded-array"] = (tail, None)
    if "object" in types:
        tail = _object_problem(view, exact, union)
        if tail is not None:
            out["unbounded-object"] = (tail, None)
    return out


_LEADS = {
    "unbounded-string": "string with no maxLength, enum or const",
    "unbounded-array": "array with no maxItems",
    "unbounded-object": "object with no bound on its keys",
}
_ENDS = {
    "unbounded-string": "the model can write this string forever",
    "unbounded-array": "the model can append items forever",
    "unbounded-object": "the model can add keys forever",
}


def check(ctx: Any) -> Iterator[Finding]:
    views = views_of(ctx)
    suppressed: set[tuple[str, str]] = set()
    for node in ctx.nodes():
        if node.pointer not in views.generated or not isinstance(node.schema, dict):
            continue
        if node.keyword == "allOf" or is_pure_ref(node.schema) or not views.alone(node.pointer):
            continue  # the parent's merged view, the reference's target, or the referrers speak for it
        view = views.node_view(node)
        if not isinstance(view, dict):
            continue
        target = views.ref_target_view(node.schema, node.pointer)
        yield from _union_findings(views, node, view, target)
        branches = views.branch_views(view, node.pointer)
        found = _problems(view, views.exact)
        if branches is not None:
            found = _shared_by_branches(views, node, view, branches, suppressed)
        for rule, (tail, witness) in found.items():
            if (rule, node.pointer) in suppressed or rule in _problems(target, views.exact):
                continue
            yield Finding(rule, _severity(rule), node.pointer,
                          f"{_LEADS[rule]}{tail}: {_ENDS[rule]}", witness=witness)


def _shared_by_branches(views: SchemaViews, node: Node, view: dict[str, Any], branches: list[Any],
                        suppressed: set[tuple[str, str]]) -> dict[str, tuple[str, str | None]]:
    """For a union: the rules that fire on the union's own keywords and on every branch are
    reported once, at the union, instead of at each branch."""
    kw = "anyOf" if isinstance(view.get("anyOf"), list) else "oneOf"
    base = {k: v for k, v in view.items() if k != kw}
    own = _problems(base, views.exact, kw)
    out = {}
    for rule, got in own.items():
        if branches and all(rule in _problems(b, views.exact) for b in branches):
            out[rule] = got
            suppressed.update((rule, f"{node.pointer}/{kw}/{i}") for i in range(len(branches)))
    return out


def _severity(rule: str) -> Any:
    return next(r.severity for r in RULES if r.id == rule)


# -- unions ---------------------------------------------------------------------------------


def _branch_types(view: Any, views: SchemaViews, pointer: str, depth: int = 0) -> frozenset[str] | None:
    """The types a (branch) view generates, looking into nested unions."""
    if isinstance(view, dict) and depth < 8:
        inner = views.branch_views(view, pointer)
        if inner is not None:
            got: set[str] = set()
            for i, b in enumerate(inner):
                t = _branch_types(b, views, f"{pointer}/{i}", depth + 1)
                if t is None:
                    return None
                got |= t
            return frozenset(got)
    return types_of(view)


def _union_findings(views: SchemaViews, node: Node, view: dict[str, Any], target: Any) -> Iterator[Finding]:
    branches = views.branch_views(view, node.pointer)
    if branches is not None:
        kw = "anyOf" if isinstance(view.get("anyOf"), list) else "oneOf"
        kinds = [_branch_types(b, views, f"{node.pointer}/{kw}/{i}") for i, b in enumerate(branches)]
        known = [k for k in kinds if k]
        has_null = any(k <= {"null"} for k in known)
        others = frozenset().union(*(k - {"null"} for k in known)) if known else frozenset()
        if has_null and others:
            yield Finding("nullable-union", "info", node.pointer,
                          f"{kw} has a null branch beside {_names(others)}: every consumer must handle null")
        fams = {family(t) for t in others}
        if len(fams) > 1:
            yield Finding("mixed-type-union", "warning", node.pointer,
                          f"{kw} mixes unrelated types {' | '.join(sorted(fams))}: consumers must branch "
                          "on the type, and the model picks one by chance")
        return
    types = types_of(view)
    if not types or len(types) < 2 or _same_union(target, types):
        return
    listed = _listed(view)
    if "null" in types:
        what = "enum lists null" if listed else f"type {sorted(types)} includes null"
        yield Finding("nullable-union", "info", node.pointer,
                      f"{what} beside {_names(types - {'null'})}: every consumer must handle null")
    fams = {family(t) for t in types if t != "null"}
    if len(fams) > 1 and not listed and isinstance(view.get("type"), list):
        yield Finding("mixed-type-union", "warning", node.pointer,
                      f"type mixes unrelated types {' | '.join(sorted(fams))}: consumers must branch on "
                      "the type, and the model picks one by chance")


def _same_union(target: Any, types: frozenset[str]) -> bool:
    """Whether a ``$ref`` target already has this union (it is reported there)."""
    return isinstance(target, dict) and types_of(target) == types


def _names(types: frozenset[str] | set[str]) -> str:
    return " | ".join(sorted(types))
