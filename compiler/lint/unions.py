"""``unsatisfiable`` and ``ambiguous-union``: lint rules that reason on the compiler's automata.

Each subschema is compiled in its root's context, leniently and under small limits
(:mod:`.languages`). ``unsatisfiable`` reports the innermost subschemas whose language is
empty, plus nodes whose own keywords contradict each other (:mod:`.contradictions`).
``ambiguous-union`` intersects the branches of every ``anyOf``/``oneOf`` pairwise and reports
a shortest text both accept, found by a product construction on their DFAs. A question the
limits leave open is never read as an answer: it is no ``unsatisfiable`` finding, and an
``info`` ``ambiguous-union`` finding that says the overlap was not decided.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from maskc.compiler.dfa import Dfa
from maskc.compiler.errors import EmptyLanguage, MaskcError, SchemaError
from maskc.compiler.findings import Finding, RuleInfo, Severity
from maskc.compiler.frontends.json_schema.base import ANNOTATIONS
from maskc.compiler.frontends.json_schema.validate import check_schema
from maskc.compiler.ir import Node as IrNode
from maskc.compiler.lint import LintContext
from maskc.compiler.lint.contradictions import contradictions
from maskc.compiler.lint.languages import (
    Approx,
    Subschema,
    analysis_options,
    compile_subschema,
    is_empty,
    regular_dfa,
    shortest_common,
)
from maskc.compiler.lint.walk import Node, join, resolve_local
from maskc.compiler.options import CompileOptions

__all__ = ["AMBIGUOUS_UNION", "BUDGET_SECONDS", "MAX_PER_UNION", "RULES", "SCHEMA_ERROR_KEY", "UNSATISFIABLE", "check"]

AMBIGUOUS_UNION = RuleInfo(
    id="ambiguous-union",
    severity="warning",
    summary="Two anyOf/oneOf branches accept a common value (for oneOf: an error).",
    why="An instance that two branches accept cannot tell a consumer which branch was meant; under "
        "oneOf it is invalid, so the schema forbids values its own branches describe. The witness "
        "is a shortest text both branches' automata accept.",
    example='{"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 5}]}',
    fix="Make the branches disjoint (a const discriminator property, distinct required keys or "
        "types); use anyOf where an overlap is intended.",
)
UNSATISFIABLE = RuleInfo(
    id="unsatisfiable",
    severity="error",
    summary="A schema or subschema that no value satisfies, or none that maskc can generate.",
    why="The compiler refuses an empty schema, and an empty branch or property silently removes "
        "what its author meant to allow: a model can never produce it. The language is maskc's: "
        "exact for what it enforces, and with no undeclared keys unless additionalProperties allows "
        "them, so a required property that is only allowed implicitly is reported too.",
    example='{"type": "string", "minLength": 5, "maxLength": 2}',
    fix="Fix the contradicting keywords (bounds, required vs additionalProperties, enum vs type); "
        "declare every required property in properties.",
)
RULES: list[RuleInfo] = [AMBIGUOUS_UNION, UNSATISFIABLE]

BUDGET_SECONDS = 8.0
"""Time both rules may spend on one schema; what is left is reported as not analysed."""
MAX_PER_UNION = 3
"""Overlapping pairs reported per union; the rest are counted in one more finding."""
SCHEMA_ERROR_KEY = "metaschema_error"
"""``ctx.shared`` key: the :class:`SchemaError` of the metaschema check, or None."""
_IN_CONTEXT = " in context"  # cache key suffix of a branch merged with its parent's keywords
_LOWER: dict[Severity, Severity] = {"error": "warning", "warning": "info", "info": "info"}


@dataclass
class _Analysis:
    ctx: LintContext
    options: CompileOptions
    deadline: float
    compiled: dict[str, Subschema | BaseException] = field(default_factory=dict)
    empty: dict[str, str] = field(default_factory=dict)  # pointer -> why (front end's words or "")
    dfas: dict[tuple[str, Approx], Dfa | None] = field(default_factory=dict)  # None: empty
    products: dict[IrNode, bool] = field(default_factory=dict)  # intersection/difference -> empty
    out_of_time: bool = False

    def time_left(self) -> bool:
        if time.monotonic() > self.deadline:
            self.out_of_time = True
        return not self.out_of_time

    def op_deadline(self) -> float:
        return min(self.deadline, time.monotonic() + self.options.limits.max_seconds)

    def compile(self, pointer: str, schema: Any = None, key: str | None = None,
                oneof_as_anyof: bool = False) -> Subschema | BaseException:
        """The subschema at ``pointer`` (or ``schema`` in its place, cached under ``key``), or
        the error that stopped its compile."""
        key = pointer if key is None else key
        got = self.compiled.get(key)
        if got is None:
            try:
                got = compile_subschema(self.ctx.schema, pointer, self.options, schema,
                                        oneof_as_anyof=oneof_as_anyof)
            except (MaskcError, RecursionError) as e:
                got = e
            self.compiled[key] = got
        return got


def check(ctx: LintContext) -> Iterable[Finding]:
    a = _Analysis(ctx, analysis_options(ctx.bounded_options()), time.monotonic() + ctx.seconds_left(BUDGET_SECONDS))
    valid = ctx.shared(SCHEMA_ERROR_KEY, lambda: _schema_error(ctx.schema)) is None
    # a schema that breaks its metaschema is schema-error's finding; only its keywords are read here
    found = list(_unsatisfiable(a, automata=valid))
    if valid:
        found.extend(_ambiguous(a))
    if a.out_of_time:
        found.append(Finding(
            "ambiguous-union", "info", "",
            "the union and satisfiability analysis ran out of time (at most "
            f"{BUDGET_SECONDS:g} s, within the schema's lint budget); parts of the schema were not analysed",
        ))
    return found


# -- unsatisfiable -----------------------------------------------------------------------


def _deliberate(schema: Any) -> bool:
    """``false`` and ``{"not": {}}`` say "nothing here" on purpose."""
    return schema is False or (isinstance(schema, dict) and set(schema) == {"not"} and schema["not"] in ({}, True))


def _schema_error(schema: Any) -> SchemaError | None:
    try:
        check_schema(schema)
    except SchemaError as e:
        return e
    return None


def _unsatisfiable(a: _Analysis, *, automata: bool = True) -> Iterator[Finding]:
    nodes = [n for n in a.ctx.nodes() if isinstance(n.schema, dict) and not _deliberate(n.schema)]
    in_context, merged = _merges(a.ctx.schema, nodes)
    exact = a.options.semantics == "exact"
    direct: dict[str, tuple[str, dict[str, Any]]] = {}
    for n in nodes:
        got = contradictions(n.schema, closed_by_default=n.pointer not in merged, exact=exact)
        if got is not None:
            direct[n.pointer] = got
    # descendants before ancestors (reversed pre-order): small compiles first, so a spent
    # budget leaves out the large ones, and one front-end compile is the most it overruns
    for n in reversed(nodes):
        if n.pointer in direct:
            a.empty[n.pointer] = ""
            continue
        if not automata or (n.pointer in merged and n.pointer not in in_context):
            continue  # read only merged with other keywords: its merge is checked where it happens
        if not a.time_left():
            break
        why = _empty_why(a, n.pointer, in_context.get(n.pointer))
        if why is not None:
            a.empty[n.pointer] = why
    children: dict[str, list[str]] = {}
    for n in nodes:
        if n.keyword not in ("$defs", "definitions") and n.depth > 0:
            children.setdefault(_parent_pointer(n), []).append(n.pointer)
        target = _ref_target(a.ctx.schema, n.schema)
        if target is not None:
            children.setdefault(n.pointer, []).append(target)
    for n in nodes:
        if n.pointer in direct:
            message, data = direct[n.pointer]
            lead = "maskc can generate no value for this schema" if data.get("semantics") == "generation" \
                else "no value satisfies this schema"
            yield Finding("unsatisfiable", "error", n.pointer, f"{lead}: {message}",
                          data={**data, "source": "keywords"})
        elif n.pointer in a.empty and not any(c in a.empty for c in children.get(n.pointer, ())):
            why = a.empty[n.pointer]
            where = " together with its parent's keywords" if n.pointer in in_context else ""
            detail = f": {why}" if why else ""
            yield Finding("unsatisfiable", "error", n.pointer,
                          f"maskc can generate no value for this schema{where} (its automaton, which enforces "
                          f"what maskc enforces and generates no undeclared keys, accepts nothing){detail}",
                          data={"source": "automaton", "in_context": n.pointer in in_context})


def _ref_target(root: Any, schema: Any) -> str | None:
    ref = schema.get("$ref") if isinstance(schema, dict) else None
    target = resolve_local(root, ref) if isinstance(ref, str) else None
    return None if target is None else target[0]


def _in_context(parent: dict[str, Any], kw: str, branch: Any) -> Any:
    """The schema the compiler reads for a union branch: merged with the parent's other
    keywords where it has some (None: the branch as it is)."""
    base = {k: v for k, v in parent.items() if k != kw and not k.startswith("x-")}
    if not set(base) - ANNOTATIONS:
        return None
    return base if branch is True else {"allOf": [base, branch]}


def _merges(root: Any, nodes: list[Node]) -> tuple[dict[str, Any], set[str]]:
    """Where the compiler merges a node with other keywords before reading it.

    Returns the union branches whose parent has other keywords (pointer -> the merged
    schema), and every merged node: those branches, ``allOf`` members, and the targets of
    their ``$ref``s and of a ``$ref`` with sibling keywords. A merged node alone may hold
    a ``required`` name that only its partner declares.
    """
    in_context: dict[str, Any] = {}
    merged: set[str] = set()
    for n in nodes:
        if n.keyword in ("anyOf", "oneOf") and isinstance(n.parent, dict):
            ctx = _in_context(n.parent, n.keyword, n.schema)
            if ctx is not None:
                in_context[n.pointer] = ctx
        if n.pointer in in_context or n.keyword == "allOf":
            merged.add(n.pointer)
            target = _ref_target(root, n.schema)
            if target is not None:
                merged.add(target)
        if "$ref" in n.schema and set(n.schema) - ANNOTATIONS - {"$ref"}:
            target = _ref_target(root, n.schema)
            if target is not None:
                merged.add(target)
    return in_context, merged


def _parent_pointer(n: Node) -> str:
    """The pointer of ``n``'s parent subschema (strip the keyword, and the index or name)."""
    cut = 2 if n.name is not None or n.keyword in ("anyOf", "oneOf", "allOf", "prefixItems") or \
        (n.keyword == "items" and isinstance(n.parent, dict) and isinstance(n.parent.get("items"), list)) else 1
    return n.pointer.rsplit("/", cut)[0]


def _empty_why(a: _Analysis, pointer: str, schema: Any = None) -> str | None:
    """Why the subschema at ``pointer`` (or ``schema`` in its place) is empty, or None when
    it is not (or is unknown)."""
    key = pointer if schema is None else pointer + _IN_CONTEXT
    got = a.compile(pointer, schema, key=key)
    if isinstance(got, Subschema) and _dropped(got):
        # what lenient mode dropped may sit under a oneOf, whose difference then removes too
        # much: decide on the language with every oneOf read as anyOf (a superset)
        if not a.time_left():
            return None
        got = a.compile(pointer, schema, key=key + " as anyOf", oneof_as_anyof=True)
    if isinstance(got, EmptyLanguage):
        return _strip_at(str(got))
    if isinstance(got, BaseException):
        return None
    try:
        return "" if is_empty(got, a.options, a.op_deadline(), a.products) else None
    except MaskcError:
        return None


def _dropped(sub: Subschema) -> list[dict[str, str]]:
    """What lenient mode compiled ``sub`` without: its ``not_enforced`` entries less the
    annotations (an unknown ``format``, say), which constrain nothing in JSON Schema either."""
    return [e for e in sub.not_enforced if e.get("kind") != "annotation"]


def _strip_at(message: str) -> str:
    """The front end's reason without its ``(at POINTER)`` suffix (the finding has the pointer);
    "" for the generic one."""
    head, sep, _ = message.rpartition(" (at ")
    why = head if sep and message.endswith(")") else message
    return "" if why.startswith("the subschema at ") or why == "the schema admits no value" else why


# -- ambiguous-union ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Branch:
    pointer: str
    sub: Subschema


def _ambiguous(a: _Analysis) -> Iterator[Finding]:
    for n in a.ctx.nodes():
        if not isinstance(n.schema, dict):
            continue
        for kw in ("anyOf", "oneOf"):
            branches = n.schema.get(kw)
            if not isinstance(branches, list) or len(branches) < 2 or not a.time_left():
                continue
            yield from _union(a, n, kw, branches)


def _union(a: _Analysis, n: Node, kw: str, branches: list[Any]) -> Iterator[Finding]:
    live: list[_Branch] = []
    for i, br in enumerate(branches):
        bptr = join(n.pointer, kw, i)
        if _deliberate(br) or bptr in a.empty:
            continue
        # a branch means its parent's other keywords too, as the compiler reads it
        schema = _in_context(n.schema, kw, br)
        got = a.compile(bptr, schema, key=bptr if schema is None else bptr + _IN_CONTEXT)
        if isinstance(got, Subschema):
            live.append(_Branch(bptr, got))
    upointer = join(n.pointer, kw)
    overlaps: list[Finding] = []
    undecided: list[list[str]] = []
    for i, x in enumerate(live):
        for y in live[i + 1:]:
            if not a.time_left():
                return
            try:
                witness, approx = _common(a, x, y)
            except MaskcError:
                undecided.append([x.pointer, y.pointer])
                continue
            if witness is None:
                if approx == "under":
                    undecided.append([x.pointer, y.pointer])
                continue
            overlaps.append(_overlap(kw, upointer, x, y, witness, approx))
    yield from overlaps[:MAX_PER_UNION]
    if len(overlaps) > MAX_PER_UNION:
        more = overlaps[MAX_PER_UNION:]
        worst: Severity = "error" if any(f.severity == "error" for f in more) else more[0].severity
        yield Finding("ambiguous-union", worst, upointer,
                      f"{len(more)} more pairs of {kw} branches overlap",
                      data={"pairs": [f.data["branches"] for f in more]})
    if undecided:
        yield Finding(
            "ambiguous-union", "info", upointer,
            f"whether {len(undecided)} pair(s) of {kw} branches overlap was not decided within the analysis "
            "limits (recursive or large branches)",
            data={"pairs": undecided},
        )


def _common(a: _Analysis, x: _Branch, y: _Branch) -> tuple[bytes | None, Approx]:
    """A shortest text both branches accept (None: disjoint, or not found under ``under``)."""
    if x.sub.rules.regular and y.sub.rules.regular:
        return _shortest(a, x, y, "exact"), "exact"
    # recursive: disjoint from above proves disjoint; a common text from below is real
    if _shortest(a, x, y, "over") is None:
        return None, "over"
    return _shortest(a, x, y, "under"), "under"


def _shortest(a: _Analysis, x: _Branch, y: _Branch, approx: Approx) -> bytes | None:
    dx, dy = _dfa(a, x, approx), _dfa(a, y, approx)
    if dx is None or dy is None:
        return None
    return shortest_common(dx, dy, deadline=a.op_deadline())


def _dfa(a: _Analysis, b: _Branch, approx: Approx) -> Dfa | None:
    if b.sub.rules.regular:
        approx = "exact"
    key = (b.pointer, approx)
    if key not in a.dfas:
        try:
            a.dfas[key] = regular_dfa(b.sub, approx, a.options, a.op_deadline())
        except EmptyLanguage:
            a.dfas[key] = None
    return a.dfas[key]


def _overlap(kw: str, upointer: str, x: _Branch, y: _Branch, witness: bytes, approx: Approx) -> Finding:
    text = witness.decode("utf-8", errors="replace")
    i, j = x.pointer.rsplit("/", 1)[1], y.pointer.rsplit("/", 1)[1]
    if kw == "oneOf":
        severity: Severity = "error"
        message = (f"oneOf branches {i} and {j} both accept {text}: a value matching both is invalid under oneOf "
                   "(maskc's grammar, exact for oneOf, never generates it)")
    else:
        severity = "warning"
        message = f"anyOf branches {i} and {j} both accept {text}: a consumer cannot tell which branch it is"
    loose = [*_dropped(x.sub), *_dropped(y.sub)]
    if loose:
        severity = _LOWER[severity]
        first = loose[0]
        message += (f" (maskc does not enforce {first['keyword']} at {first['pointer'] or '/'}, so a validator "
                    "may reject this value)")
    data: dict[str, Any] = {"keyword": kw, "branches": [x.pointer, y.pointer], "approximation": approx}
    if loose:
        data["not_enforced"] = loose
    return Finding("ambiguous-union", severity, upointer, message, witness=text, data=data)
