"""The shape of the command line itself: ``--version``, help a reader can use, options spelled
the same way everywhere, and arguments that are not UTF-8 refused as bad invocations."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner, Result

import maskc
from maskc.cli import app
from maskc.cli.command import undecodable

WIDE = {"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASKC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MASKC_DEBUG", raising=False)
    monkeypatch.chdir(tmp_path)


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(app, list(args), env=env)


def _commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command and group of the app, with the words that reach it."""
    yield path, group
    for name, sub in getattr(group, "commands", {}).items():
        yield from _commands(sub, (*path, name))


COMMANDS = [path for path, _ in _commands(typer.main.get_command(app))]


def _option_names(path: tuple[str, ...]) -> set[str]:
    cmd = typer.main.get_command(app)
    for word in path:
        cmd = cmd.commands[word]  # type: ignore[attr-defined]
    return {name for p in cmd.params for name in (*p.opts, *p.secondary_opts)}


def test_version_prints_the_package_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"maskc {maskc.__version__}"


def test_version_from_the_console_script() -> None:
    done = subprocess.run([sys.executable, "-m", "maskc", "--version"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.strip() == f"maskc {maskc.__version__}"


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "maskc")
def test_help_shows_no_python_types(path: tuple[str, ...]) -> None:
    result = invoke(*path, "--help", env=WIDE)
    assert result.exit_code == 0, result.output
    body = result.stdout.split("Examples")[0]  # the examples may quote <|im_end|>
    for typename in ("<bool>", "<list", "<str>", "<int>", "<float>", "<Path>", "<path>"):
        assert typename not in body, (path, typename, body)
    assert "--help " in body


def test_help_shows_flags_plainly_and_list_options_by_their_metavar() -> None:
    lines = invoke("compile", "--help", env=WIDE).stdout.splitlines()

    def line(flag: str) -> str:
        return next(x for x in lines if f"{flag} " in x)

    assert line("--lenient").split("--lenient")[1].lstrip().startswith("Compile without keywords")
    assert "TOKEN" in line("--eos")
    assert "human|json" in line("--format")
    assert "PATH" in line("PATH") and "..." in line("PATH")


def test_help_examples_keep_their_brackets() -> None:
    assert """'\\{"[ab]":[12]\\}'""" in invoke("trace", "--help", env=WIDE).stdout


def test_check_help_marks_model_and_grammar_required() -> None:
    out = invoke("check", "--help", env=WIDE).stdout
    model = next(x for x in out.splitlines() if "--model" in x)
    assert "[required]" in model and "*" in model
    grammar = next(x for x in out.splitlines() if "SCHEMA|GRAMMAR|ARTIFACT " in x and "│" in x)
    assert "[required unless --regex or --gbnf]" in grammar


@pytest.mark.parametrize("args", [
    ["check", "s.json"],  # no --model
    ["check", "--model", "m"],  # no grammar
    ["check", "s.json", "--regex", "a", "--model", "m"],  # two grammars
])
def test_check_missing_required_is_a_usage_error(args: list[str]) -> None:
    Path("s.json").write_text('{"type": "boolean"}')
    result = invoke(*args, env=WIDE)
    assert result.exit_code == 2, result.output
    assert "Usage: " in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("path", [p for p in COMMANDS if p], ids=" ".join)
def test_every_command_with_format_takes_json(path: tuple[str, ...]) -> None:
    names = _option_names(path)
    if "--format" in names:
        assert "--json" in names, path


def test_trace_takes_json(tmp_path: Path) -> None:
    vocab = tmp_path / "v.json"
    vocab.write_text(json.dumps({"tokens": ["a", "b", "<eos>"], "eos": "<eos>"}))
    result = invoke("trace", "--regex", "ab", "-t", str(vocab), "--text", "ab", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["finish"] == "eos" and doc["output"] == "ab" and "schema_version" in doc
    # --json wins over --format, as everywhere
    again = invoke("trace", "--regex", "ab", "-t", str(vocab), "--text", "ab", "--format", "jsonl", "--json")
    assert json.loads(again.stdout) == doc


def test_undecodable_names_the_bytes() -> None:
    assert undecodable("abc") is None and undecodable("é") is None
    assert undecodable("a\udcff") == b"a\xff"  # how Python hands over a stray byte of argv
    assert undecodable("\ud800") == b"\\ud800"  # a lone surrogate of another origin


VOCAB = b"{vocab}"


@pytest.mark.parametrize(("args", "name"), [
    ([b"compile", b"--regex", b"a\xff", b"-t", VOCAB], "'PATH'"),
    ([b"compile", b"s.json", b"--eos", b"\xfe", b"-t", VOCAB], "'--eos'"),
    ([b"trace", b"--regex", b"a", b"--text", b"\xff", b"-t", VOCAB], "'--text'"),
    ([b"trace", b"--regex", b"a\xff", b"--text", b"a", b"-t", VOCAB], "'--regex'"),
    ([b"check", b"--regex", b"a", b"--model", b"m", b"--prompt", b"caf\xe9"], "'--prompt'"),
])
def test_invalid_utf8_argument_is_a_usage_error(tmp_path: Path, args: list[bytes], name: str) -> None:
    vocab = tmp_path / "v.json"
    vocab.write_text(json.dumps({"tokens": ["a", "b", "<eos>"], "eos": "<eos>"}))
    Path("s.json").write_text('{"type": "boolean"}')
    argv: list[str | bytes] = [sys.executable, "-m", "maskc",
                               *(str(vocab).encode() if a == VOCAB else a for a in args)]
    done = subprocess.run(argv, capture_output=True, cwd=tmp_path, timeout=120, check=False,
                          env={**_base_env(), **WIDE})
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 2, err
    assert name in err and "not valid UTF-8" in err
    assert "Traceback" not in err and "internal error" not in err


def test_a_file_name_that_is_not_utf8_is_refused_by_name(tmp_path: Path) -> None:
    """Reports write file names as UTF-8 text: such a name is refused up front, not mid-report."""
    raw = b"\xff.json"
    (tmp_path / raw.decode("utf-8", "surrogateescape")).write_text('{"type": "boolean"}')
    for args in ([b"compile", raw, b"--json"], [b"compile", b"x.json", b"-o", b"out\xff"]):
        done = subprocess.run([sys.executable, "-m", "maskc", *args], capture_output=True, cwd=tmp_path,
                              timeout=120, check=False, env={**_base_env(), **WIDE})
        err = done.stderr.decode("utf-8", "replace")
        assert done.returncode == 2, err
        assert "not valid UTF-8" in err and "rename the file" in err and "Traceback" not in err


def _base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "MASKC_DEBUG"}


@pytest.mark.parametrize("budget", ["٣", "²", "0", "-4"])
def test_max_tokens_reads_only_ascii_digits(budget: str) -> None:
    # "٣" (Arabic-Indic three) and "²" pass str.isdecimal()/isdigit(); neither is a budget.
    r = invoke("check", "--regex", "a", "--model", "nowhere", "--max-tokens", budget)
    assert r.exit_code == 2
    assert "--max-tokens" in r.output


def test_a_ref_with_a_superscript_index_points_nowhere(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text(json.dumps({"allOf": [{"type": "string"}], "$ref": "#/allOf/²"}))
    (tmp_path / "v.json").write_text(json.dumps({"tokens": ["a", "\"", "<e>"], "eos": "<e>"}))
    r = invoke("compile", "s.json", "-t", "v.json", "--json")
    assert r.exit_code in (1, 2) and "points nowhere" in r.output
