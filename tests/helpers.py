"""Test helpers: compile IR or schemas to DFAs without the tokenizer stage."""

from __future__ import annotations

import functools
import json
from typing import Any

import maskc
from maskc.compiler.dfa import Dfa
from maskc.compiler.frontends.json_schema import schema_to_ir
from maskc.compiler.frontends.regex import regex_to_ir
from maskc.compiler.frontends.json_schema.refs import has_ref, map_refs
from maskc.compiler.ir import NOTHING, Grammar, Node
from maskc.compiler.options import CompileOptions, parse_whitespace
from maskc.compiler.pipeline import grammar_dfa
from maskc.compiler.vocab import byte_tokenizer


def dfa_of(node: Node) -> Dfa:
    return grammar_dfa(node, CompileOptions())


def regex_dfa(pattern: str) -> Dfa:
    return dfa_of(regex_to_ir(pattern))


def unrolled(grammar: Grammar, depth: int = 4) -> Node:
    """The start rule with references inlined ``depth`` calls deep and cut below (a subset).

    A regular grammar is its body; a recursive one is approximated from below, so a test
    may assert acceptance of values nested at most ``depth`` rule calls deep, and rejection
    only of values the full grammar rejects too.
    """
    rules = grammar.rule_map

    def expand(node: Node, budget: int) -> Node:
        if not has_ref(node):
            return node
        return map_refs(node, lambda r: NOTHING if budget == 0 else expand(rules[r.name], budget - 1))

    return expand(grammar.body, depth)


def schema_dfa(schema: Any, whitespace: str = "compact", lenient: bool = False) -> Dfa:
    """The DFA of a schema; a recursive one is unrolled (see :func:`unrolled`)."""
    opts = CompileOptions(parse_whitespace(whitespace), lenient)
    grammar, _ = schema_to_ir(schema, opts)
    return grammar_dfa(unrolled(grammar), opts)


def compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


@functools.lru_cache(maxsize=128)
def _byte_artifact(schema_json: str, semantics: str, whitespace: str) -> maskc.Artifact:
    opts = CompileOptions(parse_whitespace(whitespace), semantics=semantics)  # type: ignore[arg-type]
    return maskc.compile_json_schema(json.loads(schema_json), byte_tokenizer(), options=opts)


def byte_artifact(schema: Any, semantics: str = "exact", whitespace: str = "compact") -> maskc.Artifact:
    """``schema`` compiled over the byte vocabulary (its masks are the automaton's own), cached."""
    return _byte_artifact(json.dumps(schema), semantics, whitespace)


def accepts(schema: Any, text: str | bytes, semantics: str = "exact", whitespace: str = "compact") -> bool:
    """Whether ``schema``'s grammar accepts exactly ``text`` (then allows EOS)."""
    m = byte_artifact(schema, semantics, whitespace).matcher()
    return bool(m.accept_string(text.encode() if isinstance(text, str) else text) and m.can_terminate())


def assert_language(schema: Any, accepted: list[str], rejected: list[str], semantics: str = "exact") -> None:
    """Each text of ``accepted`` is in ``schema``'s language, none of ``rejected`` is."""
    for text in accepted:
        assert accepts(schema, text, semantics), text
    for text in rejected:
        assert not accepts(schema, text, semantics), text


def ecma_pattern(pattern: str) -> str:
    """``pattern`` for Python's ``re`` with ECMA-262's ``$``: the end of the input only
    (Python's ``$`` also matches before a final newline: ``"a\\n"`` matches ``^a$`` there)."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "$":
            c = r"\Z"
        out.append(c)
        i += 1
    return "".join(out)


def ecma_schema(schema: Any) -> Any:
    """``schema`` with every ``pattern`` and ``patternProperties`` key in ECMA-262's sense
    for Python's ``re``: what ``jsonschema`` and ``hypothesis-jsonschema`` read, so an
    oracle or a generator agrees with JSON Schema (and with maskc) on ``$``."""
    if isinstance(schema, list):
        return [ecma_schema(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for k, v in schema.items():
        if k == "pattern" and isinstance(v, str):
            out[k] = ecma_pattern(v)
        elif k == "patternProperties" and isinstance(v, dict):
            out[k] = {ecma_pattern(p): ecma_schema(s) for p, s in v.items()}
        else:
            out[k] = ecma_schema(v)
    return out
