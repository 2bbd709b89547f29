"""Test helpers: compile IR or schemas to DFAs without the tokenizer stage."""

from __future__ import annotations

import json
from typing import Any

from maskc.compiler.dfa import Dfa
from maskc.compiler.frontends.json_schema import schema_to_ir
from maskc.compiler.frontends.regex import regex_to_ir
from maskc.compiler.ir import Node
from maskc.compiler.options import CompileOptions, parse_whitespace
from maskc.compiler.pipeline import grammar_dfa


def dfa_of(node: Node) -> Dfa:
    return grammar_dfa(node, CompileOptions())


def regex_dfa(pattern: str) -> Dfa:
    return dfa_of(regex_to_ir(pattern))


def schema_dfa(schema: Any, whitespace: str = "compact", lenient: bool = False) -> Dfa:
    opts = CompileOptions(parse_whitespace(whitespace), lenient)
    node, _ = schema_to_ir(schema, opts)
    return grammar_dfa(node, opts)


def compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
