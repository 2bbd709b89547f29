"""Shared ``Annotated`` option types, so every command spells a common option the same way.

Each alias fixes the flag names, help text and help panel; the default stays in the command
signature, where a reader looks for it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Literal

import typer

from maskc.compiler.options import parse_whitespace
from maskc.compiler.tokenizer import DEFAULT_TOKENIZER

__all__ = [
    "DEFAULT_TOKENIZER",
    "EosOpt",
    "FormatOpt",
    "JobsOpt",
    "JsonOpt",
    "LenientOpt",
    "MaxDepthOpt",
    "MaxMemoryOpt",
    "MaxSecondsOpt",
    "MaxStatesOpt",
    "NoCacheOpt",
    "OutOpt",
    "OutputFormat",
    "TokenizerOpt",
    "VerifyTokenizerOpt",
    "VocabSizeOpt",
    "WhitespaceOpt",
    "SemanticsOpt",
    "ShardOpt",
    "TokenizersOpt",
    "parse_shard",
    "resolve_format",
]

OutputFormat = Literal["human", "json"]

_TOKENIZER_HELP = (
    "tokenizer.json, model folder, .gguf, SentencePiece .model, JSON token list, "
    "or 'deepseek'."
)


def _check_whitespace(value: str) -> str:
    try:
        parse_whitespace(value)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    return value


def _check_seconds(value: float) -> float:
    if not 0 < value < math.inf:
        raise typer.BadParameter(f"must be a positive number of seconds, got {value}")
    return value


FormatOpt = Annotated[
    OutputFormat,
    typer.Option("--format", "-f", help="Output format: human (Rich) or json (one document).",
                 rich_help_panel="Output"),
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Shortcut for --format json.", rich_help_panel="Output")
]
TokenizerOpt = Annotated[
    str,
    typer.Option("--tokenizer", "-t", metavar="SPEC", help=_TOKENIZER_HELP,
                 rich_help_panel="Tokenizer"),
]
TokenizersOpt = Annotated[
    list[str] | None,
    typer.Option("--tokenizer", "-t", metavar="SPEC",
                 help=f"{_TOKENIZER_HELP} Repeat to compile every input for each tokenizer "
                      "(default: deepseek).",
                 rich_help_panel="Tokenizer"),
]
VerifyTokenizerOpt = Annotated[
    str | None,
    typer.Option("--tokenizer", "-t", metavar="SPEC",
                 help=f"Verify the artifact was built for this tokenizer: {_TOKENIZER_HELP}",
                 rich_help_panel="Tokenizer"),
]
EosOpt = Annotated[
    list[str] | None,
    typer.Option("--eos", metavar="TOKEN",
                 help="End-of-sequence token, as its text or its id; repeat for several. "
                 "Replaces the detected ones.", rich_help_panel="Tokenizer"),
]
VocabSizeOpt = Annotated[
    int | None,
    typer.Option("--vocab-size", min=1, metavar="N",
                 help="Logits width when the model pads its vocabulary past the token count.",
                 rich_help_panel="Tokenizer"),
]
WhitespaceOpt = Annotated[
    str,
    typer.Option("--whitespace", "-w", metavar="POLICY", callback=_check_whitespace,
                 help="compact | pretty[:INDENT] | flexible[:N] (JSON Schema only)."),
]
LenientOpt = Annotated[
    bool,
    typer.Option("--lenient",
                 help="Compile without keywords that cannot be enforced (multipleOf, "
                 "uniqueItems, ...); they are recorded as not enforced in the artifact."),
]
SemanticsOpt = Annotated[
    Literal["generation", "exact"],
    typer.Option("--semantics",
                 help="JSON Schema semantics: generation (no undeclared keys unless the schema "
                      "admits them; types inferred from keywords) or exact (exactly the schema's "
                      "instances). Recorded in the artifact."),
]
OutOpt = Annotated[
    Path,
    typer.Option("--out", "-o", metavar="DIR", file_okay=False,
                 help="Directory the artifacts are written to.", rich_help_panel="Output"),
]
JobsOpt = Annotated[
    int,
    typer.Option("--jobs", "-j", min=1, metavar="N",
                 help="Compile N inputs in parallel processes."),
]
MaxDepthOpt = Annotated[
    int,
    typer.Option("--max-depth", metavar="N", min=1, max=1024,
                 help="Nesting bound of recursive grammars (stack frames): a token that would nest "
                      "deeper is rejected. Recorded in the artifact."),
]
MaxStatesOpt = Annotated[
    int,
    typer.Option("--max-states", metavar="N", min=1,
                 help="Compile limit: automaton states (the NFA may have 10 N). A schema past it "
                      "fails with exit 1. Recorded in the artifact.", rich_help_panel="Limits"),
]
MaxSecondsOpt = Annotated[
    float,
    typer.Option("--max-seconds", metavar="S", callback=_check_seconds,
                 help="Compile limit: seconds per input. Recorded in the artifact.",
                 rich_help_panel="Limits"),
]
MaxMemoryOpt = Annotated[
    int | None,
    typer.Option("--max-memory", metavar="MIB", min=64,
                 help="Compile limit: memory of each compiling process in MiB (its tokenizer tables "
                      "included). Compiles then run in worker processes; an input past it fails with "
                      "exit 1 and the others go on. Enforced on Linux. [default: none]",
                 show_default=False, rich_help_panel="Limits"),
]

def parse_shard(value: str) -> tuple[int, int]:
    """``K/N`` -> (K, N), with ``1 <= K <= N``.

    Raises:
        ValueError: anything else, with what was expected.
    """
    k, sep, n = value.partition("/")
    if not (sep and k.isascii() and k.isdigit() and n.isascii() and n.isdigit()):
        raise ValueError(f"expected K/N (shard K of N, e.g. 2/4), got {value!r}")
    index, count = int(k), int(n)
    if count < 1 or not 1 <= index <= count:
        raise ValueError(f"shard K/N needs 1 <= K <= N, got {value!r}")
    return index, count


def _check_shard(value: str | None) -> str | None:
    if value is not None:
        try:
            parse_shard(value)
        except ValueError as e:
            raise typer.BadParameter(str(e)) from None
    return value


ShardOpt = Annotated[
    str | None,
    typer.Option("--shard", metavar="K/N", callback=_check_shard,
                 help="Compile only shard K of N (1-based) of the inputs sorted by path, each for every "
                      "tokenizer: N CI machines with K = 1..N compile every input once."),
]

NoCacheOpt = Annotated[
    bool,
    typer.Option("--no-cache",
                 help="Neither read nor write the artifact cache ($MASKC_CACHE_DIR or the "
                 "user cache directory)."),
]


def resolve_format(fmt: OutputFormat, json_flag: bool) -> OutputFormat:
    """``--json`` wins over ``--format``."""
    return "json" if json_flag else fmt
