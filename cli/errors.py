"""The one table that turns a :class:`MaskcError` into an exit code and a hint.

The library raises; commands render. :func:`guard` wraps every command so a ``MaskcError``
becomes a clean message on stderr and its exit code, and any other exception becomes
"internal error" (exit 3), with a traceback only when ``MASKC_DEBUG=1``.

Exit codes: 0 clean; 1 a compile failed (some schemas of a batch, or a limit); 2 bad
invocation or input (usage, unreadable file, invalid or unsupported schema, tokenizer
problem, corrupt artifact, tokenizer mismatch); 3 internal error; 130 interrupted.
"""

from __future__ import annotations

import functools
import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from maskc.compiler.errors import (
    ArtifactCorrupt,
    ArtifactError,
    ArtifactVersionMismatch,
    EmptyLanguage,
    GrammarError,
    InputError,
    LimitExceeded,
    MaskcError,
    WorkerLost,
    NonTerminating,
    RegexSyntaxError,
    UnsupportedRegex,
    SchemaError,
    TokenizerError,
    TokenizerMismatch,
    UnsupportedKeyword,
    UnspellableGrammar,
)

__all__ = [
    "ERROR_TABLE",
    "EXIT_FAILED",
    "EXIT_INPUT",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "INTERNAL_ERROR",
    "ErrorRule",
    "debug_enabled",
    "describe",
    "describe_internal",
    "guard",
    "rule_for",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INPUT = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM (128 + SIGINT, as shells report it)

INTERNAL_ERROR = "InternalError"
DEBUG_HINT = "rerun with MASKC_DEBUG=1 for a traceback, and report it if it persists"


@dataclass(frozen=True, slots=True)
class ErrorRule:
    """What the CLI does with one error class: its exit code and a hint when it carries none."""

    code: int
    hint: str | None = None


# Most specific first: the first class an error is an instance of decides.
ERROR_TABLE: tuple[tuple[type[MaskcError], ErrorRule], ...] = (
    (TokenizerMismatch,
     ErrorRule(EXIT_INPUT, "recompile for this tokenizer: maskc compile SCHEMA --tokenizer SPEC")),
    (ArtifactVersionMismatch,
     ErrorRule(EXIT_INPUT, "recompile the artifact with this version of maskc")),
    (ArtifactCorrupt,
     ErrorRule(EXIT_INPUT, "the file is damaged or not a maskc artifact: recompile it")),
    (ArtifactError, ErrorRule(EXIT_INPUT)),
    (TokenizerError, ErrorRule(EXIT_INPUT, "check the --tokenizer SPEC")),
    (UnsupportedKeyword,
     ErrorRule(EXIT_INPUT, "compile with --lenient and validate after decoding")),
    (SchemaError, ErrorRule(EXIT_INPUT)),
    (RegexSyntaxError, ErrorRule(EXIT_INPUT)),
    (UnsupportedRegex, ErrorRule(EXIT_INPUT)),
    (EmptyLanguage,
     ErrorRule(EXIT_INPUT, "no output satisfies the grammar: look for contradictory constraints")),
    (NonTerminating, ErrorRule(EXIT_INPUT, "bound the repetition that never reaches an end")),
    (GrammarError, ErrorRule(EXIT_INPUT)),
    (InputError, ErrorRule(EXIT_INPUT)),
    (UnspellableGrammar,
     ErrorRule(EXIT_FAILED, "the tokenizer has no tokens for what the grammar requires: "
               "check the --tokenizer, or allow outputs its tokens can spell")),
    (LimitExceeded, ErrorRule(EXIT_FAILED)),
    (WorkerLost, ErrorRule(EXIT_FAILED)),
    (MaskcError, ErrorRule(EXIT_INPUT)),
)


def rule_for(exc: MaskcError) -> ErrorRule:
    for cls, rule in ERROR_TABLE:
        if isinstance(exc, cls):
            return rule
    raise TypeError(f"no error rule for {type(exc).__name__}")  # MaskcError is in the table


def describe(exc: MaskcError) -> dict[str, Any]:
    """The JSON form of an error: ``type``, ``message``, ``pointer`` (or null) and ``hint``."""
    pointer = getattr(exc, "pointer", None)
    return {
        "type": type(exc).__name__,
        "message": exc.message,
        "pointer": pointer if isinstance(pointer, str) else None,
        "hint": exc.hint or rule_for(exc).hint,
    }


def describe_internal(exc: BaseException) -> dict[str, Any]:
    """The JSON form of an unexpected exception, with its traceback under ``MASKC_DEBUG=1``."""
    info: dict[str, Any] = {
        "type": INTERNAL_ERROR,
        "message": f"internal error: {type(exc).__name__}: {exc}",
        "pointer": None,
        "hint": DEBUG_HINT,
    }
    if debug_enabled():
        info["traceback"] = "".join(traceback.format_exception(exc))
    return info


def debug_enabled() -> bool:
    return os.environ.get("MASKC_DEBUG", "").strip() not in ("", "0")


def report(exc: BaseException) -> int:
    """Print ``exc`` on stderr the way the table says; return its exit code."""
    err = Console(stderr=True, highlight=False)
    if debug_enabled():
        err.print(Text("".join(traceback.format_exception(exc)), style="dim"))
    if isinstance(exc, MaskcError):
        info, code = describe(exc), rule_for(exc).code
    else:
        info, code = describe_internal(exc), EXIT_INTERNAL
    err.print(Text.assemble(("error: ", "bold red"), info["message"]))
    if info["hint"] and not (code == EXIT_INTERNAL and debug_enabled()):
        err.print(Text.assemble(("hint: ", "bold cyan"), info["hint"]))
    return code


P = ParamSpec("P")
R = TypeVar("R")

_PASS_THROUGH = (typer.Exit, typer.Abort, typer.BadParameter)


def guard(command: Callable[P, R]) -> Callable[P, R]:
    """Run ``command`` under the error table: render errors, exit with their code."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except _PASS_THROUGH:
            raise
        except Exception as e:  # the command boundary renders every error
            raise typer.Exit(report(e)) from e

    return run
