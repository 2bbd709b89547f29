"""The ``maskc`` command line: a Typer app of thin commands over the library."""

from __future__ import annotations

from maskc.cli.app import app, main

__all__ = ["app", "main"]
