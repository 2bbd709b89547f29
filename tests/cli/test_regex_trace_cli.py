"""The command line on bad regex bounds (exit 1 for compile, 2 for trace, never 3) and the
human ``trace`` view of a long replay (plain columns past a few hundred rows)."""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
from typer.testing import CliRunner

from maskc.cli import render
from maskc.cli.app import app

runner = CliRunner()


@pytest.fixture
def vocab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("MASKC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "120")
    path = tmp_path / "chars.json"
    path.write_text(json.dumps({"tokens": [*string.ascii_letters, '"', "{", "}", "<eos>"], "eos": "<eos>"}))
    return str(path)


def test_compile_regex_with_bounds_out_of_order_fails_with_the_offset(vocab: str) -> None:
    r = runner.invoke(app, ["compile", "--regex", "a{2,1}", "-t", vocab, "--no-cache"])
    assert r.exit_code == 1, r.output
    assert "RegexSyntaxError" in r.output and "offset 1" in r.output and "Traceback" not in r.output


def test_compile_schema_pattern_with_bounds_out_of_order_fails(vocab: str, tmp_path: Path) -> None:
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "string", "pattern": "^a{2,1}$"}))
    r = runner.invoke(app, ["compile", str(schema), "-t", vocab, "--no-cache"])
    assert r.exit_code == 1, r.output
    assert "/pattern" in r.output and "offset 2" in r.output


def test_trace_regex_with_bounds_out_of_order_is_an_input_error(vocab: str) -> None:
    r = runner.invoke(app, ["trace", "--regex", "a{2,1}", "-t", vocab, "--text", "aa", "--no-cache"])
    assert r.exit_code == 2, r.output
    assert "out of order" in r.output and "Traceback" not in r.output


def _step_rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.split() and line.split()[0].isdigit()]


def test_human_trace_of_a_long_text(vocab: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = 2 * render._RICH_TABLE_ROWS  # past the Rich table: plain columns
    text = "b" + "a" * (rows - 2) + "c"
    added: list[object] = []
    monkeypatch.setattr(render.Table, "add_row", lambda self, *cells, **kw: added.append(cells))
    r = runner.invoke(app, ["trace", "--regex", "ba*c", "-t", vocab, "--text", text, "--no-cache"])
    assert r.exit_code == 0, r.output
    assert not added  # a Rich table costs about a millisecond a row: 100 KB of text took a minute
    steps = _step_rows(r.stdout)
    assert len(steps) == rows + 1  # a row per character, then EOS
    # step, state, depth, allowed, top allowed..., picked, vetoed, forced
    assert steps[0][:4] == ["0", "0", "1", "1"] and steps[0][4:6] == ["b", "b"]
    assert steps[1][0] == "1" and steps[1][3] == "2" and steps[1][-2:] == ["a", "–"]
    assert steps[-2][0] == str(rows - 1) and steps[-2][-2:] == ["c", "–"]
    assert steps[-1][0] == str(rows) and steps[-1][-2:] == ["<eos>", "–"]
    assert "(eos)" in r.stdout and r.stdout.index("step") < r.stdout.index(" 0 ")


def test_human_trace_of_a_long_rejected_text(vocab: str) -> None:
    text = "b" + "a" * (2 * render._RICH_TABLE_ROWS) + "b"
    r = runner.invoke(app, ["trace", "--regex", "ba*c", "-t", vocab, "--text", text, "--no-cache"])
    assert r.exit_code == 1
    steps = _step_rows(r.stdout)
    assert steps[-1][0] == str(len(text) - 1) and "rejected" in steps[-1]
    assert "the grammar rejects" in r.stdout
