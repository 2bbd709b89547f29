"""Termination and budget rules: will a constrained generation end, and in how many tokens?

``unbounded-recursion`` and ``no-base-case`` come from the front end's recursive rules
(:mod:`.recursion`); ``whitespace-runaway`` and ``max-tokens-budget`` from the compiled
automaton (:mod:`.budget`); ``unenforced-keyword`` and ``unknown-format`` are the front end's
own ``not_enforced`` list, ``later-draft-keyword`` the keywords it ignores by the draft. The
front end and the automaton are computed once per schema and shared through ``ctx.shared``
(keys ``"termination.front"`` and ``"automaton"``).
"""

from __future__ import annotations

from collections.abc import Iterable

from maskc.compiler.findings import Finding, RuleInfo
from maskc.compiler.frontends.json_schema.drafts import DRAFT_NAMES, draft_of, later_keywords
from maskc.compiler.lint import LintContext
from maskc.compiler.lint.budget import (
    FLEXIBLE_WARN_WIDTH,
    SchemaAutomaton,
    budget_findings,
    compile_automaton,
    whitespace_findings,
)
from maskc.compiler.lint.recursion import LINT_LIMITS, SchemaFront, recursion_findings, schema_front

__all__ = ["RULES", "check", "front_of", "automaton_of"]

RULES: list[RuleInfo] = [
    RuleInfo(
        id="unbounded-recursion", severity="warning",
        summary="A recursive $ref: the schema sets no bound on nesting depth.",
        why="A recursive schema admits outputs of any depth; a model that keeps opening nested "
            "objects never reaches EOS on its own. maskc stops the nesting at --max-depth at "
            "run time, but the schema says nothing, so every other consumer is unprotected.",
        example='{"$defs": {"node": {"type": "object", "properties": {"children": {"type": "array", '
                '"items": {"$ref": "#/$defs/node"}}}}}, "$ref": "#/$defs/node"}',
        fix="choose --max-depth deliberately (the depth real documents need), or unroll the "
            "recursion into a fixed number of levels",
    ),
    RuleInfo(
        id="no-base-case", severity="error",
        summary="A reference cycle with no finite instance: every way through it recurses again.",
        why="No finite JSON value satisfies the cycle, so a model that enters it can never stop "
            "(and if the root is on it, the schema admits no value at all).",
        example='{"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}, '
                '"required": ["next"]}}, "$ref": "#/$defs/n"}',
        fix="give the cycle a way out: make the recursive property optional, allow null "
            "(anyOf with {\"type\": \"null\"}), or let the array be empty (minItems: 0)",
    ),
    RuleInfo(
        id="whitespace-runaway", severity="warning",
        summary="Whitespace the output can repeat without end (a pattern's \\s*, a wide flexible policy).",
        why="Models under constraint are known to idle on whitespace: a pattern such as "
            "^\\s*[A-Z]{3}\\s*$ looks bounded but lets a generation pad with spaces until "
            "max_tokens. maskc's own policies (compact, pretty, flexible:N) bound every run; "
            f"flexible:N with N over {FLEXIBLE_WARN_WIDTH} is reported as info.",
        example='{"type": "string", "pattern": "^\\\\s*[A-Z]{3}\\\\s*$"}',
        fix="drop the \\s* around the pattern (trim after decoding), or bound it: \\s{0,2}",
    ),
    RuleInfo(
        id="max-tokens-budget", severity="info",
        summary="The worst-case output length, in bytes and (with --tokenizer) in tokens.",
        why="A max_tokens below the longest valid output truncates valid JSON; this is the "
            "smallest max_tokens that never does, computed on the compiled automaton (the "
            "longest path, at one byte per token, and as the longest path of whole tokens of "
            "the tokenizer). Unbounded schemas get no budget: the termination rules report them.",
        example='{"type": "string", "maxLength": 3}',
        fix="set max_tokens to at least the reported budget",
    ),
    RuleInfo(
        id="unenforced-keyword", severity="warning",
        summary="A keyword the grammar cannot enforce here (uniqueItems over an infinite item "
                "language, multipleOf past the automaton cap, a not or oneOf over recursion, ...).",
        why="maskc refuses these by default and compiles without them under --lenient: the "
            "decoded output may violate them.",
        example='{"type": "array", "items": {"type": "integer"}, "uniqueItems": true}',
        fix="validate the output against the schema after decoding, or express the constraint "
            "with enforced keywords",
    ),
    RuleInfo(
        id="unknown-format", severity="warning",
        summary="A string format maskc does not check (an unknown name, or one that is an "
                "annotation only), so any string passes.",
        why="Known formats (date, date-time, time, duration, email, uuid, uri, uri-reference, iri, "
            "hostname, ipv4, ipv6, json-pointer, regex, byte, ...) compile to exact or "
            "documented-subset regexes. Any other format name, and formats that only annotate "
            "(password, binary, float, int32 on a string, ...), are JSON Schema annotations: maskc "
            "compiles them as a free string, in strict mode too, and never refuses them.",
        example='{"type": "string", "format": "phone"}',
        fix="use a pattern for the format, or validate it after decoding",
    ),
    RuleInfo(
        id="later-draft-keyword", severity="warning",
        summary="A keyword that the draft named by $schema does not have (const in a draft-04 "
                "document): that draft's validators ignore it, and so does maskc.",
        why="Keywords came with drafts: const, contains and propertyNames with draft-06, "
            "if/then/else with draft-07, dependentRequired and unevaluatedProperties with "
            "2019-09, prefixItems with 2020-12. In a document for an earlier draft they are "
            "unknown keywords, which constrain nothing: the output may break the rule the "
            "author meant, and a oneOf whose branches only such a keyword tells apart admits "
            "none of the values they share.",
        example='{"$schema": "http://json-schema.org/draft-04/schema#", "properties": '
                '{"kind": {"const": "a"}}}',
        fix="name the draft the schema is written for in $schema (draft-06 or later for const), "
            "or drop the keyword",
    ),
]


def front_of(ctx: LintContext) -> SchemaFront | None:
    """The front end's run over ``ctx.schema`` (compact, lenient), computed once."""
    got: SchemaFront | None = ctx.shared("termination.front", lambda: schema_front(ctx.schema, ctx.bounded_options()))
    return got


def automaton_of(ctx: LintContext) -> SchemaAutomaton:
    """The schema's automaton in ``ctx.options``'s whitespace and depth, computed once."""
    def compute() -> SchemaAutomaton:
        front = front_of(ctx)
        reuse = front.grammar if front is not None and ctx.options.whitespace.mode == "compact" else None
        return compile_automaton(ctx.schema, ctx.bounded_options(), reuse, limits=ctx.bounded(LINT_LIMITS))

    got: SchemaAutomaton = ctx.shared("automaton", compute)
    return got


def check(ctx: LintContext) -> Iterable[Finding]:
    front = front_of(ctx)
    if front is not None:
        yield from recursion_findings(front, ctx.options.max_depth)
    yield from whitespace_findings(ctx.nodes(), ctx.options)
    yield from budget_findings(automaton_of(ctx), ctx.tokenizer)
    if front is not None:
        yield from _unenforced(front, ctx.options.lenient)
    yield from _later_draft(ctx.schema)


def _later_draft(schema: object) -> Iterable[Finding]:
    """The keywords of later drafts in a draft-04 to -07 document (ignored when compiled)."""
    draft = draft_of(schema)
    name = DRAFT_NAMES[draft]
    for kw, pointer in later_keywords(schema, draft)[1]:
        yield Finding(rule="later-draft-keyword", severity="warning", pointer=pointer,
                      message=f"'{kw}' is not a {name} keyword (the draft $schema names): ignored, as "
                              f"{name} validators ignore it",
                      data={"keyword": kw, "draft": name})


def _unenforced(front: SchemaFront, lenient: bool) -> Iterable[Finding]:
    mode = ("compiled without it (--lenient)" if lenient
            else "maskc compile refuses it unless --lenient, which compiles without it")
    for entry in front.not_enforced:
        kw = entry.get("keyword", "")
        pointer = entry.get("pointer", "")
        if pointer.startswith("#"):
            pointer = pointer[1:]
        detail = entry.get("detail", "")
        data = {"keyword": kw, **({"detail": detail} if detail else {})}
        if entry.get("kind") == "annotation":
            # an annotation constrains nothing in JSON Schema either: the grammar is exact, but
            # an unchecked format is worth a warning (its name promises a check)
            if kw == "format":
                yield Finding(rule="unknown-format", severity="warning", pointer=pointer,
                              message=f"{detail}: the value is not checked (an annotation, compiled as "
                                      "a free string); validate it after decoding if it matters",
                              data={**data, "kind": "annotation"})
            continue
        what = f"'{kw}' is not enforced by the grammar" + (f" ({detail})" if detail else "")
        yield Finding(rule="unenforced-keyword", severity="warning", pointer=pointer,
                      message=f"{what}: {mode}; validate the output after decoding", data=data)
