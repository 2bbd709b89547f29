"""One registry of front ends: every source format the compiler takes, by kind.

A :class:`FrontEnd` supplies what the rest of maskc needs of a format, so no other module
dispatches on the kind: how a source is read from text, its canonical text (whose hash is
the grammar's identity in the cache key and the artifact header), the :class:`Grammar` it
denotes, and the prompt text ``check`` shows a model. A new format is one new module
registered here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from maskc.compiler.errors import InputError, SchemaError
from maskc.compiler.ir import Grammar, alt, lit
from maskc.compiler.options import CompileOptions
from maskc.compiler.rules import ResolvedRules

__all__ = ["FrontEnd", "FRONTENDS", "frontend", "kind_for_path", "grammar_sha256"]

NotEnforced = list[dict[str, str]]


@dataclass(frozen=True, slots=True)
class FrontEnd:
    """What one source format supplies.

    ``parse_text`` turns text (a file's contents or a command-line argument) into the
    source value; ``canonical`` gives the value's canonical text; ``to_grammar`` compiles
    the value; ``prompt`` writes the user turn for a model from the canonical text.
    ``options`` names the compile options that apply to the format.
    """

    kind: str
    noun: str
    extensions: tuple[str, ...]
    parse_text: Callable[[str], Any]
    canonical: Callable[[Any], str]
    to_grammar: Callable[[Any, CompileOptions], tuple[Grammar, NotEnforced]]
    prompt: Callable[[str, str | None], str]
    options: frozenset[str]
    bounded_grammar: Callable[[Any, CompileOptions, str], tuple[Grammar, NotEnforced]] | None = None
    """The grammar with its unbounded nesting cut to a few levels, where that is a regular
    language: what the pipeline compiles where the pushdown grammar exceeds a state limit
    (JSON Schema's free-form values), given why (the refusal); its not_enforced lists the
    restriction (``kind: "restricted"``). None: no such form."""
    shared_grammar: Callable[[Any, CompileOptions], tuple[Grammar, NotEnforced]] | None = None
    """The same language with every part the source shares (JSON Schema's ``$ref`` targets)
    a rule of its own, and a lower :attr:`Grammar.inline_max_nodes`, so that the large
    parts used more than once are called rather than copied at each use: what the pipeline
    compiles where the grammar exceeds a state limit. None: no such form."""
    bounded_keeps_rules: Callable[[Grammar, ResolvedRules], bool] | None = None
    """Whether the grammar (with its resolved rules) keeps a rule that :attr:`bounded_grammar`
    would keep too, so that the bounded form cannot be regular and is not built: a rule kept
    other than the nesting the bounded form cuts (it is on another cycle, or kept for its
    size, which cutting the nesting only grows). None: the bounded form is always built."""


def grammar_sha256(kind: str, canonical_text: str) -> str:
    """The grammar's identity: sha256 over its kind and canonical source text."""
    return hashlib.sha256(f"{kind}\n{canonical_text}".encode()).hexdigest()


def _json_value(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise SchemaError(f"not valid JSON: {e}") from e


def _json_canonical(value: Any) -> str:
    # JSON keeps key order: property order is part of a schema's meaning here.
    return orjson.dumps(value).decode()


# -- json_schema ---------------------------------------------------------------------------


def _schema_canonical(value: Any) -> str:
    from maskc.compiler.frontends.json_schema.inputs import canonical_schema

    return canonical_schema(value)  # a wrapper's (tool, pydantic) is the schema's it holds


def _schema_grammar(schema: Any, options: CompileOptions, *, bounded_free_form: bool = False,
                    shared_refs: bool = False) -> tuple[Grammar, NotEnforced]:
    from maskc.compiler.frontends.json_schema import schema_to_ir

    got, not_enforced = schema_to_ir(schema, options, bounded_free_form=bounded_free_form,
                                     shared_refs=shared_refs)
    grammar = got if isinstance(got, Grammar) else Grammar.single(got)
    return grammar, not_enforced


def _schema_bounded_grammar(schema: Any, options: CompileOptions,
                            why: str) -> tuple[Grammar, NotEnforced]:
    from maskc.compiler.frontends.json_schema import bounded_free_form_entry

    grammar, not_enforced = _schema_grammar(schema, options, bounded_free_form=True)
    return grammar, [*not_enforced, bounded_free_form_entry(why)]


def _schema_shared_grammar(schema: Any, options: CompileOptions) -> tuple[Grammar, NotEnforced]:
    return _schema_grammar(schema, options, shared_refs=True)


def _schema_bounded_keeps_rules(grammar: Grammar, rules: ResolvedRules) -> bool:
    """A rule kept besides the start, the free-form value's ``any`` (``any@depth`` under
    pretty whitespace) and the grammar's counted items made calls, or a start that refers to
    itself: a ``$ref`` cycle, or a target kept for its size. Bounding free-form values keeps
    a cycle (``any`` refers to no other rule, so none runs through it) and grows a large
    target (each use of ``any`` inlined). A counted item is a call only in a grammar with
    rules (:attr:`Grammar.calls`); the bounded grammar may count it instead."""
    from maskc.compiler.frontends.json_schema import ANY_RULE
    from maskc.compiler.rules import references

    if any(n != ANY_RULE and not n.startswith(ANY_RULE + "@") and n not in grammar.calls for n in rules.names[1:]):
        return True
    return rules.names[0] in references(rules.bodies[0])  # (a walk of the start's body: checked last)


def _schema_prompt(canonical_text: str, instruction: str | None) -> str:
    schema = orjson.dumps(orjson.loads(canonical_text), option=orjson.OPT_INDENT_2).decode()
    ask = instruction or "Produce one JSON value that conforms to the JSON Schema below."
    return f"{ask}\nReply with the JSON only: no prose, no code fences.\n\nJSON Schema:\n{schema}"


# -- regex ---------------------------------------------------------------------------------


def _regex_text(text: str) -> str:
    return text


def _regex_grammar(pattern: Any, options: CompileOptions) -> tuple[Grammar, NotEnforced]:
    from maskc.compiler.frontends.regex import regex_to_ir

    if not isinstance(pattern, str):
        raise InputError(f"a regular expression must be a string, got {type(pattern).__name__}")
    return Grammar.single(regex_to_ir(pattern)), []


def _regex_prompt(canonical_text: str, instruction: str | None) -> str:
    ask = instruction or "Produce text that matches the regular expression below."
    return f"{ask}\nReply with the matching text only.\n\nRegular expression:\n{canonical_text}"


# -- choice --------------------------------------------------------------------------------


def _choice_value(text: str) -> Any:
    value = _json_value(text)
    if not isinstance(value, list) or not value or not all(isinstance(c, str) for c in value):
        raise SchemaError("a choice list must be a non-empty JSON list of strings")
    return value


def _choice_grammar(choices: Any, options: CompileOptions) -> tuple[Grammar, NotEnforced]:
    if not isinstance(choices, (list, tuple)) or not choices:
        raise SchemaError(f"a choice list must be a non-empty list of strings, got {type(choices).__name__}")
    for i, c in enumerate(choices):
        if not isinstance(c, str):
            raise SchemaError(f"a choice list must hold strings; item {i} is {type(c).__name__}", pointer=f"/{i}")
    return Grammar.single(alt(*(lit(c) for c in choices))), []  # alt dedupes in linear time


def _choice_prompt(canonical_text: str, instruction: str | None) -> str:
    options = "\n".join(f"- {c}" for c in orjson.loads(canonical_text))
    ask = instruction or "Answer with exactly one of these options."
    return f"{ask}\nReply with the option only.\n\nOptions:\n{options}"


# -- gbnf ----------------------------------------------------------------------------------


def _gbnf_canonical(text: Any) -> str:
    from maskc.compiler.frontends.gbnf import canonical_gbnf

    if not isinstance(text, str):
        raise InputError(f"a GBNF grammar must be text, got {type(text).__name__}")
    return canonical_gbnf(text)


def _gbnf_grammar(text: Any, options: CompileOptions) -> tuple[Grammar, NotEnforced]:
    from maskc.compiler.frontends.gbnf import gbnf_to_grammar

    return gbnf_to_grammar(_gbnf_canonical(text)), []


def _gbnf_prompt(canonical_text: str, instruction: str | None) -> str:
    ask = instruction or "Produce text in the language of the grammar below (GBNF; start at the rule root)."
    return f"{ask}\nReply with that text only.\n\nGrammar:\n{canonical_text}"


FRONTENDS: dict[str, FrontEnd] = {
    fe.kind: fe
    for fe in (
        FrontEnd("json_schema", "JSON Schema", (".json",), _json_value, _schema_canonical, _schema_grammar,
                 _schema_prompt, frozenset({"whitespace", "lenient", "max_depth"}),
                 _schema_bounded_grammar, _schema_shared_grammar, _schema_bounded_keeps_rules),
        FrontEnd("regex", "regular expression", (), _regex_text, str, _regex_grammar, _regex_prompt,
                 frozenset({"max_depth"})),
        FrontEnd("choice", "choice list", (), _choice_value, _json_canonical, _choice_grammar, _choice_prompt,
                 frozenset({"max_depth"})),
        FrontEnd("gbnf", "GBNF grammar", (".gbnf",), _regex_text, _gbnf_canonical, _gbnf_grammar, _gbnf_prompt,
                 frozenset({"max_depth"})),
    )
}


def frontend(kind: str) -> FrontEnd:
    """The front end of ``kind``.

    Raises:
        ValueError: no such kind.
    """
    fe = FRONTENDS.get(kind)
    if fe is None:
        raise ValueError(f"unknown grammar kind {kind!r}; expected one of {', '.join(FRONTENDS)}")
    return fe


def kind_for_path(path: str) -> str | None:
    """The kind a file's extension names (``.gbnf`` -> gbnf), or None."""
    lower = path.lower()
    for fe in FRONTENDS.values():
        if fe.kind != "json_schema" and any(lower.endswith(ext) for ext in fe.extensions):
            return fe.kind
    return None
