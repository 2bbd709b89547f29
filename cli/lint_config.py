"""``maskc lint`` configuration: ``[tool.maskc.lint]`` in the nearest ``pyproject.toml``.

The file is looked for from the working directory upward; the first ``pyproject.toml``
that has a ``[tool.maskc.lint]`` table is the configuration (as ruff does), and its folder
is where ``per-path-ignores`` globs are matched from. Keys::

    [tool.maskc.lint]
    select = ["unbounded-string", "ambiguous-union"]   # default: every rule
    ignore = ["optional-field"]
    profile = "openai-strict"
    fail-on = "warning"                                 # error | warning | never
    [tool.maskc.lint.per-path-ignores]
    "schemas/legacy/*.json" = ["unbounded-array"]

Command-line options replace the configured value of the same key. Reading TOML needs
``tomllib`` (Python 3.11+); on 3.10 a configuration is ignored with a warning.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from maskc.cli.findings import FailOn
from maskc.compiler.errors import InputError

__all__ = ["LintConfig", "find_config", "load_config", "parse_rules"]

TABLE = "[tool.maskc.lint]"
_KEYS = {"select", "ignore", "per-path-ignores", "profile", "fail-on"}
_FAIL_ON = ("error", "warning", "never")


@dataclass(frozen=True, slots=True)
class LintConfig:
    """The configured values (None or empty where the file says nothing)."""

    path: Path | None = None
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    per_path_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    profile: str | None = None
    fail_on: FailOn | None = None

    def ignored_for(self, file: str) -> set[str]:
        """The rules ``per-path-ignores`` turns off for ``file``: a glob matches the path
        relative to the configuration's folder (``*`` crosses ``/``), or the file's name."""
        if not self.per_path_ignores or self.path is None:
            return set()
        p = Path(file)
        try:
            rel = Path(os.path.relpath(p.resolve(), self.path.parent.resolve())).as_posix()
        except ValueError:  # another drive (Windows)
            rel = p.as_posix()
        out: set[str] = set()
        for glob, rules in self.per_path_ignores:
            if fnmatch.fnmatchcase(rel, glob) or fnmatch.fnmatchcase(p.name, glob):
                out.update(rules)
        return out


def parse_rules(value: str | Iterable[str], known: Collection[str], where: str) -> tuple[str, ...]:
    """Rule ids from ``a,b`` or a list, each checked against ``known``.

    Raises:
        ValueError: an unknown id (the message names ``where`` and the known ids).
    """
    items = value.split(",") if isinstance(value, str) else list(value)
    ids = tuple(dict.fromkeys(i.strip() for i in items if i.strip()))
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise ValueError(f"{where}: unknown rule {', '.join(map(repr, unknown))}; "
                         f"known: {', '.join(sorted(known)) or '(none registered)'}")
    return ids


def find_config(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start`` with a ``[tool.maskc.lint]`` table."""
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file() and _mentions_table(candidate):
            return candidate
    return None


def _mentions_table(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "tool.maskc" in text


def _read_toml(path: Path) -> dict[str, Any] | None:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        return None
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from e
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{path} is not valid TOML: {e}") from e


def load_config(start: Path, known: Collection[str], warn: Callable[[str], None]) -> LintConfig:
    """The configuration that applies in ``start`` (an empty one when there is none).

    Raises:
        InputError: the file is not TOML, or a key holds a value of the wrong kind or an
            unknown rule id.
    """
    path = find_config(start.resolve())
    if path is None:
        return LintConfig()
    doc = _read_toml(path)
    if doc is None:
        warn(f"{path}: {TABLE} ignored: reading pyproject.toml needs Python 3.11 or later")
        return LintConfig()
    table = doc.get("tool", {}).get("maskc", {}).get("lint")
    if table is None:
        return LintConfig()
    if not isinstance(table, dict):
        raise InputError(f"{path}: {TABLE} must be a table")
    for key in sorted(set(table) - _KEYS):
        warn(f"{path}: unknown key {key!r} in {TABLE} ignored (known: {', '.join(sorted(_KEYS))})")
    try:
        return LintConfig(
            path=path,
            select=_rules(table, "select", known) if "select" in table else None,
            ignore=_rules(table, "ignore", known),
            per_path_ignores=_per_path(table.get("per-path-ignores", {}), known),
            profile=_string(table, "profile"),
            fail_on=_fail_on(table),
        )
    except ValueError as e:
        raise InputError(f"{path}: {e}", hint=f"fix the {TABLE} table of {path.name}") from None


def _rules(table: dict[str, Any], key: str, known: Collection[str]) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key} must be a list of rule ids")
    return parse_rules(value, known, key)


def _per_path(value: Any, known: Collection[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        raise ValueError("per-path-ignores must be a table of glob = [rule ids]")
    out = []
    for glob, rules in value.items():
        if not isinstance(rules, list) or not all(isinstance(v, str) for v in rules):
            raise ValueError(f"per-path-ignores.{glob!r} must be a list of rule ids")
        out.append((glob, parse_rules(rules, known, f"per-path-ignores.{glob!r}")))
    return tuple(out)


def _string(table: dict[str, Any], key: str) -> str | None:
    value = table.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{key} must be a string")
    return value


def _fail_on(table: dict[str, Any]) -> FailOn | None:
    value = _string(table, "fail-on")
    if value is not None and value not in _FAIL_ON:
        raise ValueError(f"fail-on must be one of {', '.join(_FAIL_ON)}, got {value!r}")
    return cast("FailOn | None", value)
