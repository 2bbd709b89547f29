"""The README is run, not just read: its two commands are the ones CI runs, its Python
examples execute as written, and its ``$ maskc ...`` examples print what it shows.

A Python block whose first line is ``# needs: model`` runs with the SmolLM2 test asset in
the working directory (slow; skipped where the asset cannot be fetched).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from maskc.cli.app import app
from tests.conftest import REPO

README = REPO / "README.md"
CI_RUN = REPO / ".ci" / "run"
NEEDS_MODEL = "# needs: model"


@dataclass(frozen=True)
class Block:
    """A code block of a Markdown file: its info string (empty when indented) and text."""

    line: int  # 1-based line of its first code line
    lang: str
    text: str


def code_blocks(markdown: str) -> list[Block]:
    """Fenced blocks (with their language) and indented blocks (language ``""``), in order."""
    lines = markdown.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if fence:
            end = i + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            blocks.append(Block(i + 2, fence.group(1), "\n".join(lines[i + 1:end]) + "\n"))
            i = end + 1
            continue
        if lines[i].startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            end = i
            while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()):
                end += 1
            body = [x[4:] for x in lines[i:end]]
            while body and not body[-1].strip():
                body.pop()
            blocks.append(Block(i + 1, "", "\n".join(body) + "\n"))
            i = end
            continue
        i += 1
    return blocks


def section(markdown: str, title: str) -> str:
    """The text of the ``## title`` section, up to the next ``## `` heading."""
    start = markdown.index(f"\n## {title}\n")
    end = markdown.find("\n## ", start + 1)
    return markdown[start:end if end >= 0 else None]


def quick_start_commands() -> list[str]:
    return [b.text.strip() for b in code_blocks(section(README.read_text(), "Quick start"))]


def python_blocks(path: Path = README) -> list[Block]:
    return [b for b in code_blocks(path.read_text()) if b.lang == "python"]


# -- the two commands ---------------------------------------------------------------------------


def test_quick_start_is_the_main_job_then_the_tests() -> None:
    main_job, tests = quick_start_commands()
    assert "\n" not in main_job and "\n" not in tests  # one line each, to paste
    assert main_job.startswith("python3 -m venv .venv && . .venv/bin/activate && ")
    assert main_job.endswith("maskc compile sample_schemas/")
    # compiling needs no extra: neither torch (a multi-gigabyte CUDA build on a plain machine)
    # nor the test tools
    assert "pip install -e . &&" in main_job
    assert not re.search(r"torch|\[test\]|\[torch\]|pytest|mypy", main_job)
    # the test command alone is enough on a fresh clone: it installs the test extra, and
    # the assets are fetched by the test session itself
    assert tests.startswith("python3 -m venv .venv && . .venv/bin/activate && ")
    assert '-e ".[test]"' in tests and "python -m pytest" in tests
    assert "tests.assets" not in tests


def test_the_quick_start_folder_holds_schemas_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from maskc.cli.batch import collect_jobs

    monkeypatch.chdir(REPO)
    jobs, skipped = collect_jobs(["sample_schemas/"], "json_schema")
    assert skipped == []  # `maskc compile sample_schemas/` warns about none of its files
    assert len(jobs) == len(list((REPO / "sample_schemas").glob("*.json"))) >= 15


def test_what_the_quick_start_writes_is_ignored_by_git() -> None:
    ignored = {x.strip() for x in (REPO / ".gitignore").read_text().splitlines()}
    assert {"maskc-artifacts/", ".venv/", "tests/.assets/"} <= ignored


def test_ci_runs_exactly_the_readme_commands_in_order() -> None:
    commands = quick_start_commands()
    ci_lines = [x.strip() for x in CI_RUN.read_text().splitlines()]
    for command in commands:
        assert command in ci_lines, f".ci/run does not run the README's command verbatim:\n{command}"
    assert [ci_lines.index(c) for c in commands] == sorted(ci_lines.index(c) for c in commands)
    others = [x for x in ci_lines if x and not x.startswith("#") and x not in commands]
    assert others == ["set -euo pipefail", 'cd "$(dirname "$0")/.."'], others


# -- the Python examples -------------------------------------------------------------------------


def _run(block: Block, path: Path) -> None:
    code = compile(block.text, f"{path.name}:{block.line}", "exec")
    exec(code, {"__name__": "__readme__"})


def _ids(blocks: list[Block]) -> list[str]:
    return [f"line{b.line}" for b in blocks]


QUICK = [b for b in python_blocks() if not b.text.startswith(NEEDS_MODEL)]
MODEL = [b for b in python_blocks() if b.text.startswith(NEEDS_MODEL)]


def test_readme_has_python_examples_of_both_kinds() -> None:
    assert QUICK and MODEL


@pytest.mark.parametrize("block", QUICK, ids=_ids(QUICK))
def test_python_example_runs(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    _run(block, README)
    assert capsys.readouterr().out.strip()  # every example shows a result


@pytest.mark.slow
@pytest.mark.parametrize("block", MODEL, ids=_ids(MODEL))
def test_python_example_with_a_model_runs(block: Block, smollm2_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert f'"{smollm2_path.name}"' in block.text, "a model example names the test asset's file"
    # dequantized weights shared with tests/artifacts/test_model.py
    monkeypatch.setenv("MASKC_MODEL_CACHE_DIR", str(REPO / "tests" / ".assets" / "models"))
    monkeypatch.chdir(smollm2_path.parent)
    _run(block, README)
    assert capsys.readouterr().out.strip()


def test_sample_schemas_readme_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    (block,) = python_blocks(REPO / "sample_schemas" / "README.md")
    monkeypatch.chdir(REPO)
    _run(block, REPO / "sample_schemas" / "README.md")


# -- the shell examples ----------------------------------------------------------------------------


def _shell_examples() -> list[tuple[str, list[str]]]:
    """``$ maskc ...`` examples in indented blocks: the command and the output lines shown."""
    examples: list[tuple[str, list[str]]] = []
    for block in code_blocks(README.read_text()):
        lines = block.text.splitlines()
        if block.lang or not lines or not lines[0].startswith("$ maskc "):
            continue
        for line in lines:
            if line.startswith("$ "):
                examples.append((line[2:], []))
            elif line.strip() and line.strip() != "...":
                examples[-1][1].append(line)
    return examples


SHELL = _shell_examples()


def test_readme_has_shell_examples() -> None:
    assert len(SHELL) >= 2


@pytest.mark.parametrize(("command", "shown"), SHELL, ids=[c for c, _ in SHELL])
def test_shell_example_prints_what_the_readme_shows(command: str, shown: list[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    args = shlex.split(command)
    assert args[0] == "maskc"
    result = CliRunner().invoke(app, args[1:], env={"COLUMNS": "200"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    printed = {" ".join(x.split()) for x in result.stdout.splitlines()}
    missing = [x for x in shown if " ".join(x.split()) not in printed]
    assert not missing, f"README shows lines the command does not print:\n{missing}\n---\n{result.stdout}"
