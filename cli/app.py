"""The ``maskc`` Typer app: registers the commands and runs them under the error table.

``main()`` is the console script and ``python -m maskc``. Set ``MASKC_DEBUG=1`` to see the
traceback behind an error.
"""

from __future__ import annotations

from typing import Annotated

import typer

from maskc.cli.command import MaskcCommand, MaskcGroup
from maskc.cli.commands import audit, bench, cache, check, compile, inspect, lint, trace
from maskc.cli.errors import EXIT_INTERNAL, report
from maskc.compiler.hugepages import no_huge_pages

__all__ = ["app", "main"]

app = typer.Typer(
    name="maskc",
    cls=MaskcGroup,
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    help="The mask compiler for grammar-constrained decoding: JSON Schema, regex and choice "
    "lists → precomputed token-mask artifacts.",
    epilog="Set MASKC_DEBUG=1 for tracebacks. Exit codes: 0 ok, 1 compile failures or a "
    "failed check/trace, findings at --fail-on (lint, audit), 2 bad invocation or input, 3 internal error.",
)
app.command("compile", cls=MaskcCommand, epilog=compile.EPILOG)(compile.compile_command)
app.command("inspect", cls=MaskcCommand, epilog=inspect.EPILOG)(inspect.inspect_command)
app.command("check", cls=MaskcCommand, epilog=check.EPILOG)(check.check_command)
app.command("trace", cls=MaskcCommand, epilog=trace.EPILOG)(trace.trace_command)
app.command("lint", cls=MaskcCommand, epilog=lint.EPILOG)(lint.lint_command)
app.command("audit", cls=MaskcCommand, epilog=audit.EPILOG)(audit.audit_command)
app.command("bench", cls=MaskcCommand, epilog=bench.EPILOG)(bench.bench_command)
app.add_typer(cache.cache_app)


def _print_version(value: bool) -> None:
    if value:
        import maskc

        typer.echo(f"maskc {maskc.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_print_version,
        help="Print the version of maskc and exit.")] = False,
) -> None:
    """The options of ``maskc`` itself (the commands' options follow their names)."""


def main() -> None:
    """Run the CLI; an error that escapes a command still exits with the table's code."""
    try:
        with no_huge_pages():  # (the whole command: see maskc.compiler.hugepages)
            app(prog_name="maskc")
    except Exception as e:  # noqa: BLE001  (outside any command: argument parsing, Typer itself)
        raise SystemExit(report(e) or EXIT_INTERNAL) from None
