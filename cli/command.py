"""The Click command classes behind every ``maskc`` command: readable help, UTF-8 arguments.

Typer builds each command from a function signature; :class:`MaskcCommand` and
:class:`MaskcGroup` (passed as ``cls=``) add two things Typer leaves out:

- **Help a reader can use.** Typer prints a type column for every parameter, so a flag reads
  ``--lenient <bool>`` and a variadic argument ``PATH <list[str]>``. Here a flag shows no
  type, an argument named by a metavar shows none either (``...`` when it repeats), and an
  option shows its metavar (``--eos TOKEN``) or its choices (``--format human|json``).
- **Arguments that are not UTF-8 are a usage error** (exit 2) naming the parameter. Python
  hands undecodable command-line bytes over as lone surrogates (``surrogateescape``), which
  used to fail much later, deep in a compile or in a JSON report, as an internal error.
  File names are held to the same rule: every report (JSON, Rich) writes them as UTF-8 text.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

__all__ = ["MaskcCommand", "MaskcGroup", "undecodable"]


class _PlainOption(TyperOption):
    """A ``TyperOption`` whose help shows no type for a flag, and choices as ``a|b``."""

    def display_type_rich(self, ctx: Any) -> str | None:
        if self.is_flag or self.count:
            return ""
        shown: str | None = super().display_type_rich(ctx)
        if shown is not None and shown.startswith("<") and shown.endswith(">"):
            return shown[1:-1]
        return shown


class _PlainArgument(TyperArgument):
    """A ``TyperArgument`` whose help shows its metavar alone (``...`` when it repeats)."""

    def display_type_rich(self, ctx: Any) -> str | None:
        if self.metavar is None:
            shown: str | None = super().display_type_rich(ctx)
            return shown
        return "..." if self.nargs != 1 else ""


def _readable(params: list[Any]) -> list[Any]:
    # Typer instantiates its own parameter classes with no hook to pick others; the
    # subclasses above add one method and no state, so the instances can take them on.
    for p in params:
        if type(p) is TyperOption:
            p.__class__ = _PlainOption
        elif type(p) is TyperArgument:
            p.__class__ = _PlainArgument
    return params


def undecodable(value: str) -> bytes | None:
    """The command-line bytes of ``value`` when they are not UTF-8, else None."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogateescape" if _escaped_only(value) else "backslashreplace")
    return None


def _escaped_only(value: str) -> bool:
    return all(not 0xD800 <= ord(c) <= 0xDFFF or 0xDC80 <= ord(c) <= 0xDCFF for c in value)


def _check_utf8(ctx: Any, params: list[Any]) -> None:
    for param in params:
        if param.name is None:
            continue
        value = ctx.params.get(param.name)
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            if not isinstance(v, (str, PurePath)):
                continue
            raw = undecodable(str(v))
            if raw is not None:
                raise typer.BadParameter(
                    f"{raw!r} is not valid UTF-8: maskc reads its arguments, file names included, as "
                    "UTF-8 text (check the terminal's locale, or rename the file)", ctx=ctx, param=param)


class MaskcCommand(TyperCommand):
    """A leaf command: readable help, UTF-8 text arguments."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _readable(super().get_params(ctx))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        rest: list[str] = super().parse_args(ctx, args)
        _check_utf8(ctx, self.get_params(ctx))
        return rest


class MaskcGroup(TyperGroup):
    """A group of commands (``maskc``, ``maskc cache``): readable help for its own options."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _readable(super().get_params(ctx))
