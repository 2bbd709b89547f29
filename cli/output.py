"""The output sink of every command: human (Rich) or json, data on stdout, the rest on stderr.

Data (tables, JSON documents) goes to stdout, so it can be piped; progress, warnings and
hints go to stderr. Progress bars are drawn only in human format on a terminal.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from maskc.cli.options import OutputFormat

__all__ = ["SCHEMA_VERSION", "Output", "ProgressBar", "human_bytes"]

SCHEMA_VERSION = 1
"""Version of the ``--format json`` documents; bumped when a key changes meaning or goes away."""


def human_bytes(n: int | None) -> str:
    """``1536`` → ``"1.5 KiB"``."""
    if n is None:
        return "–"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


class ProgressBar:
    """A bar over a known number of items; does nothing when progress is not shown."""

    def __init__(self, progress: Progress | None, total: int, what: str) -> None:
        self._progress = progress
        self._what = what
        self._task = progress.add_task(what, total=total) if progress is not None else None

    def working_on(self, label: str) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, description=f"{self._what} [bold]{label}[/]")

    def advance(self) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, advance=1)


class Output:
    """Where a command's results, progress and messages go, in one format."""

    def __init__(self, fmt: OutputFormat) -> None:
        self.format: OutputFormat = fmt
        self.out = Console(highlight=False)
        self.err = Console(stderr=True, highlight=False)

    @property
    def human(self) -> bool:
        return self.format == "human"

    def document(self, doc: dict[str, Any]) -> None:
        """Print one JSON document (json format) on stdout, ``schema_version`` first."""
        body = {"schema_version": SCHEMA_VERSION, **doc}
        sys.stdout.write(orjson.dumps(body, option=orjson.OPT_INDENT_2).decode() + "\n")
        sys.stdout.flush()

    def show(self, *items: RenderableType) -> None:
        """Print human-format data on stdout."""
        self.out.print(*items)

    def note(self, message: str | Text) -> None:
        """A side remark for humans, on stderr (silent in json format)."""
        if self.human:
            self.err.print(message)

    def warn(self, message: str) -> None:
        self.err.print(Text.assemble(("warning: ", "bold yellow"), message))

    def hint(self, message: str) -> None:
        self.err.print(Text.assemble(("hint: ", "bold cyan"), message))

    def error(self, message: str, hint: str | None = None) -> None:
        self.err.print(Text.assemble(("error: ", "bold red"), message))
        if hint:
            self.hint(hint)

    @contextmanager
    def progress(self, total: int, what: str) -> Iterator[ProgressBar]:
        """A progress bar on stderr, only in human format on a terminal."""
        if not (self.human and self.err.is_terminal and total > 1):
            yield ProgressBar(None, total, what)
            return
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn())
        with Progress(*columns, console=self.err, transient=True) as bar:
            yield ProgressBar(bar, total, what)
