"""``maskc lint`` end to end: inputs, options, configuration, exit codes and the three renderers.

The plumbing is tested with a fake rule module (``tests/cli/lint_fake_rules.py``: findings
on nodes marked ``x-error``, ``x-warn``, ``x-info``), so these tests hold whatever the real
rules find; only the MaskBench corpus test runs the real rules, and asserts no crash.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner, Result

import maskc
import maskc.compiler.lint
from maskc.cli import app
from maskc.cli.findings import FileReport, sarif_log
from maskc.compiler.findings import Finding, rule_info
from tests.maskbench import MASKBENCH_HOWTO, maskbench_dir, maskbench_location, schema_files

FAKE = "tests.cli.lint_fake_rules"
SARIF_SCHEMA = Path(__file__).resolve().parent.parent / "data" / "sarif-schema-2.1.0.json"

A_JSON = """{
  "type": "object",
  "x-info": true,
  "properties": {
    "name": {"type": "string", "x-error": true},
    "tags": {
      "type": "array",
      "x-warn": "[1,1]"
    }
  }
}
"""

TOOL_JSON = """{"type": "function",
 "function": {
  "name": "f",
  "parameters": {"type": "object", "properties": {"q": {"x-error": true}}}
 }
}
"""


@pytest.fixture(autouse=True)
def _fake_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(maskc.compiler.lint, "RULE_MODULES", (FAKE,))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("MASKC_DEBUG", raising=False)
    monkeypatch.chdir(tmp_path)


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(app, ["lint", *map(str, args)])


def lint_json(*args: str | Path) -> tuple[int, dict[str, Any]]:
    result = invoke(*args, "--json")
    assert "Traceback" not in result.output, result.output
    return result.exit_code, json.loads(result.stdout)


def write(name: str, text: str) -> Path:
    path = Path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# -- human ------------------------------------------------------------------------------


def test_human_output_lines_hints_witness_and_summary() -> None:
    write("a.json", A_JSON)
    result = invoke("a.json")
    assert result.exit_code == 1  # an error reaches the default --fail-on error
    assert result.stdout.splitlines() == [
        "a.json:1:1 (root) fake-info info marked as info",
        "    hint: drop x-info",
        "a.json:5:5 /properties/name fake-error error marked as an error",
        "    hint: drop x-error",
        "a.json:6:5 /properties/tags fake-warning warning marked as a warning",
        "    hint: this one's own hint",
        "    witness: [1,1]",
        "",
        "1 error, 1 warning, 1 info in 1 file (of 1 checked)",
    ]
    assert "\x1b[" not in result.stdout  # plain text when not a terminal


def test_files_are_grouped_in_order_and_clean_files_counted() -> None:
    write("s/b.json", '{"type": "object", "x-warn": "w"}')
    write("s/a.json", '{"type": "object", "x-info": true}')
    write("s/clean.json", '{"type": "integer"}')
    result = invoke("s")
    assert result.exit_code == 0  # a warning does not reach --fail-on error
    lines = result.stdout.splitlines()
    assert [x.split(" ")[0] for x in lines if x.startswith("s")] == ["s/a.json:1:1", "s/b.json:1:1"]
    assert lines[-1] == "0 errors, 1 warning, 1 info in 2 files (of 3 checked)"


def test_no_findings() -> None:
    write("clean.json", '{"type": "integer"}')
    result = invoke("clean.json")
    assert result.exit_code == 0
    assert result.stdout.strip() == "no findings in 1 file checked"


@pytest.mark.parametrize(("schema", "fail_on", "code"), [
    ('{"x-warn": "w"}', None, 0),
    ('{"x-warn": "w"}', "warning", 1),
    ('{"x-info": true}', "warning", 0),
    ('{"x-error": true}', "never", 0),
    ('{"x-error": true}', "error", 1),
    ('{"x-error": true}', "warning", 1),
])
def test_fail_on_decides_the_exit_code(schema: str, fail_on: str | None, code: int) -> None:
    write("s.json", schema)
    result = invoke("s.json", *(["--fail-on", fail_on] if fail_on else []))
    assert result.exit_code == code, result.output


# -- inputs -----------------------------------------------------------------------------


def test_a_tool_definition_is_linted_where_its_schema_sits() -> None:
    write("tool.json", TOOL_JSON)
    code, doc = lint_json("tool.json")
    assert code == 1
    [f] = doc["files"][0]["findings"]
    assert f["pointer"] == "/function/parameters/properties/q"
    assert (f["line"], f["column"]) == (4, 51)  # the key "q" on line 4


def test_a_maskbench_case_is_linted_where_its_schema_sits() -> None:
    write("case.json", '{"schema": {"x-error": true},\n "tests": []}')
    code, doc = lint_json("case.json")
    [f] = doc["files"][0]["findings"]
    assert code == 1 and f["pointer"] == "/schema" and (f["line"], f["column"]) == (1, 2)


def test_a_directory_skips_json_that_is_no_schema() -> None:
    write("d/s.json", '{"type": "object", "x-info": true}')
    write("d/notes.json", '{"some": "notes"}')
    result = invoke("d", "--json")
    assert result.exit_code == 0
    assert [f["path"] for f in json.loads(result.stdout)["files"]] == ["d/s.json"]
    assert "skipped d/notes.json" in result.stderr


def test_a_missing_file_is_exit_2_without_traceback() -> None:
    result = invoke("missing.json")
    assert result.exit_code == 2
    assert "no such file or directory: missing.json" in result.stderr
    assert "Traceback" not in result.output


def test_invalid_json_is_exit_2_and_the_other_files_are_still_reported() -> None:
    write("bad.json", '{"type": ')
    write("good.json", '{"x-error": true}')
    code, doc = lint_json("bad.json", "good.json")
    assert code == 2
    bad, good = doc["files"]
    assert bad["error"]["type"] == "InputError" and "not valid JSON" in bad["error"]["message"]
    assert good["error"] is None and [f["rule"] for f in good["findings"]] == ["fake-error"]
    assert doc["summary"]["files_failed"] == 1
    human = invoke("bad.json", "good.json")
    assert human.exit_code == 2 and "bad.json is not valid JSON" in human.stderr


def test_a_schema_that_is_no_object_is_no_crash() -> None:
    write("list.json", "[1, 2]")
    result = invoke("list.json", "--json")
    assert result.exit_code in (0, 1, 2) and "Traceback" not in result.output
    assert result.exit_code != 3


def test_a_crashing_rule_is_an_internal_error_for_that_file_only() -> None:
    write("crash.json", '{"x-crash": true}')
    write("fine.json", '{"x-warn": "w"}')
    code, doc = lint_json("crash.json", "fine.json")
    assert code == 3
    assert doc["files"][0]["error"]["type"] == "InternalError"
    assert doc["files"][1]["findings"][0]["rule"] == "fake-warning"


def test_no_path_is_a_usage_error() -> None:
    result = invoke()
    assert result.exit_code == 2 and "--explain" in result.output


# -- rules, profiles --------------------------------------------------------------------


def test_select_and_ignore() -> None:
    write("s.json", A_JSON)
    _, doc = lint_json("s.json", "--select", "fake-warning,fake-info")
    assert sorted(f["rule"] for f in doc["files"][0]["findings"]) == ["fake-info", "fake-warning"]
    code, doc = lint_json("s.json", "--ignore", "fake-error")
    assert code == 0 and sorted(f["rule"] for f in doc["files"][0]["findings"]) == ["fake-info", "fake-warning"]


@pytest.mark.parametrize("option", ["--select", "--ignore"])
def test_an_unknown_rule_id_is_a_usage_error(option: str) -> None:
    write("s.json", A_JSON)
    result = invoke("s.json", option, "fake-error,no-such-rule")
    assert result.exit_code == 2
    assert "no-such-rule" in result.output and "fake-error" in result.output  # the known ids are listed


def test_semantics_reaches_the_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    # the real structural rules: a schema that declares its keys is closed under generation
    # semantics, open under exact (JSON Schema admits undeclared keys)
    monkeypatch.setattr(maskc.compiler.lint, "RULE_MODULES", ("maskc.compiler.lint.structure",))
    path = write("s.json", '{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}')

    def objects(*extra: str) -> list[str]:
        code, doc = lint_json(path, "--select", "unbounded-object", "--fail-on", "never", *extra)
        assert code == 0
        return [f["pointer"] for f in doc["files"][0]["findings"]]

    assert objects() == []
    assert objects("--semantics", "generation") == []
    assert objects("--semantics", "exact") == [""]


def test_an_unknown_semantics_is_a_usage_error() -> None:
    path = write("s.json", A_JSON)
    result = invoke(path, "--semantics", "loose")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "generation" in result.output and "exact" in result.output


def test_help_documents_semantics() -> None:
    result = CliRunner().invoke(app, ["lint", "--help"])
    assert result.exit_code == 0
    assert "--semantics" in result.output and "generation|exact" in result.output


def test_an_unknown_profile_is_a_usage_error() -> None:
    write("s.json", A_JSON)
    result = invoke("s.json", "--profile", "no-such-provider")
    assert result.exit_code == 2 and "no-such-provider" in result.output


def test_explain_human_and_json() -> None:
    result = invoke("--explain", "fake-warning")
    assert result.exit_code == 0
    out = result.stdout
    for text in ("fake-warning", "A node marked x-warn.", "Why it matters", "Tests need a warning.",
                 "Example", '{"x-warn": "w"}', "Fix", "drop x-warn"):
        assert text in out
    doc = json.loads(invoke("--explain", "fake-info", "--json").stdout)
    assert doc["schema_version"] == 1
    assert doc["rule"] == {"id": "fake-info", "severity": "info", "tool": "lint", "summary": "A node marked x-info.",
                           "why": "Tests need an info.", "example": '{"x-info": true}', "fix": "drop x-info"}


def test_explain_an_unknown_rule_lists_the_known_ones() -> None:
    result = invoke("--explain", "no-such-rule")
    assert result.exit_code == 2
    assert "fake-error" in result.output and "fake-warning" in result.output


# -- json and SARIF ---------------------------------------------------------------------


def test_json_document() -> None:
    write("a.json", A_JSON)
    code, doc = lint_json("a.json")
    assert code == 1
    assert doc["schema_version"] == 1 and doc["tool"] == "maskc lint" and doc["version"] == maskc.__version__
    assert doc["summary"] == {"error": 1, "warning": 1, "info": 1, "files": 1, "files_with_findings": 1,
                              "files_failed": 0}
    [file] = doc["files"]
    assert file["path"] == "a.json" and file["error"] is None
    warn = file["findings"][2]
    assert warn == {"rule": "fake-warning", "severity": "warning", "path": "a.json", "pointer": "/properties/tags",
                    "message": "marked as a warning", "hint": "this one's own hint", "witness": "[1,1]",
                    "data": {}, "line": 6, "column": 5}
    assert file["findings"][1]["hint"] == "drop x-error"  # the rule's fix when the finding has no hint


def _sarif(*args: str) -> tuple[int, dict[str, Any]]:
    result = invoke(*args, "--format", "sarif")
    assert "Traceback" not in result.output, result.output
    return result.exit_code, json.loads(result.stdout)


def _validate_sarif(log: dict[str, Any]) -> None:
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(log), key=str)
    assert not errors, [e.message for e in errors]


def test_sarif_validates_and_points_at_the_keys() -> None:
    write("a.json", A_JSON)
    write("sub dir/tool.json", TOOL_JSON)
    code, log = _sarif("a.json", "sub dir/tool.json")
    assert code == 1
    _validate_sarif(log)
    assert log["version"] == "2.1.0" and len(log["runs"]) == 1
    run = log["runs"][0]
    assert run["columnKind"] == "unicodeCodePoints"
    driver = run["tool"]["driver"]
    assert driver["name"] == "maskc" and driver["version"] == maskc.__version__
    table = {r["id"]: r for r in driver["rules"]}
    assert table["fake-info"]["defaultConfiguration"]["level"] == "note"
    assert table["fake-warning"]["shortDescription"]["text"] == "A node marked x-warn."
    assert table["fake-warning"]["fullDescription"]["text"] == "Tests need a warning."
    assert table["fake-warning"]["help"]["text"] == "drop x-warn"
    places = [(r["ruleId"], r["level"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
               r["locations"][0]["physicalLocation"]["region"]) for r in run["results"]]
    assert places == [
        ("fake-info", "note", "a.json", {"startLine": 1, "startColumn": 1}),
        ("fake-error", "error", "a.json", {"startLine": 5, "startColumn": 5}),
        ("fake-warning", "warning", "a.json", {"startLine": 6, "startColumn": 5}),
        ("fake-error", "error", "sub%20dir/tool.json", {"startLine": 4, "startColumn": 51}),
    ]
    for r in run["results"]:
        assert driver["rules"][r["ruleIndex"]]["id"] == r["ruleId"]
    warning = run["results"][2]["properties"]
    assert warning == {"pointer": "/properties/tags", "witness": "[1,1]", "hint": "this one's own hint", "data": {}}
    assert run["invocations"][0]["executionSuccessful"] is True


def test_sarif_reports_unreadable_files_as_notifications_and_still_validates() -> None:
    write("bad.json", "{")
    code, log = _sarif("bad.json")
    assert code == 2
    _validate_sarif(log)
    invocation = log["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False
    assert "not valid JSON" in invocation["toolExecutionNotifications"][0]["message"]["text"]


def test_sarif_without_text_has_no_region() -> None:
    # an audit's findings point into a tokenizer, which may be no JSON text
    report = FileReport("tok.gguf", [Finding("fake-info", "info", "/tokens/7", "m")], text=None)
    log = sarif_log([report], [rule_info("fake-info")])
    _validate_sarif(log)
    assert log["runs"][0]["results"][0]["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "tok.gguf"}}


# -- configuration ----------------------------------------------------------------------


PYPROJECT = """\
[project]
name = "demo"

[tool.maskc.lint]
ignore = ["fake-info"]
fail-on = "warning"

[tool.maskc.lint.per-path-ignores]
"legacy/*.json" = ["fake-warning"]
"""


def test_configuration_from_the_nearest_pyproject() -> None:
    write("pyproject.toml", PYPROJECT)
    write("legacy/old.json", '{"x-warn": "w", "x-info": true}')
    write("new/s.json", '{"x-warn": "w", "x-info": true}')
    sub = Path("new")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(sub)  # found by searching upward
        code, doc = lint_json("s.json", "../legacy/old.json")
    assert code == 1  # fail-on = "warning" from the file
    new, old = doc["files"]
    assert [f["rule"] for f in new["findings"]] == ["fake-warning"]  # fake-info ignored
    assert old["findings"] == []  # per-path-ignores
    # the command line replaces the configured value
    code, doc = lint_json("new/s.json", "--fail-on", "error", "--ignore", "fake-warning")
    assert code == 0 and [f["rule"] for f in doc["files"][0]["findings"]] == ["fake-info"]


def test_configured_select_and_profile_keys() -> None:
    write("pyproject.toml", '[tool.maskc.lint]\nselect = ["fake-error"]\n')
    write("s.json", A_JSON)
    _, doc = lint_json("s.json")
    assert [f["rule"] for f in doc["files"][0]["findings"]] == ["fake-error"]
    write("pyproject.toml", '[tool.maskc.lint]\nprofile = "no-such-provider"\n')
    assert invoke("s.json").exit_code == 2


@pytest.mark.parametrize(("table", "needle"), [
    ('ignore = ["no-such-rule"]', "no-such-rule"),
    ('ignore = "fake-info"', "must be a list"),
    ('fail-on = "sometimes"', "fail-on must be one of"),
    ('[tool.maskc.lint.per-path-ignores]\n"*.json" = "fake-info"', "must be a list"),
    ("select = [", "not valid TOML"),
])
def test_a_bad_configuration_is_exit_2(table: str, needle: str) -> None:
    write("pyproject.toml", f"[tool.maskc.lint]\n{table}\n")
    write("s.json", A_JSON)
    result = invoke("s.json")
    assert result.exit_code == 2, result.output
    assert needle in result.stderr and "Traceback" not in result.output


def test_an_unknown_configuration_key_is_a_warning() -> None:
    write("pyproject.toml", '[tool.maskc.lint]\nselectt = ["fake-error"]\n')
    write("s.json", '{"x-info": true}')
    result = invoke("s.json")
    assert result.exit_code == 0 and "unknown key 'selectt'" in result.stderr


def test_a_pyproject_without_the_table_is_passed_over() -> None:
    write("pyproject.toml", '[tool.maskc.lint]\nignore = ["fake-info"]\n')
    write("inner/pyproject.toml", '[project]\nname = "inner"\n')
    write("inner/s.json", '{"x-info": true}')
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir("inner")
        _, doc = lint_json("s.json")
    assert doc["files"][0]["findings"] == []


# -- the MaskBench corpus, with the real rules --------------------------------------------


@pytest.mark.slow
def test_maskbench_sample_lints_without_crashing(tmp_path: Path) -> None:
    folder = maskbench_dir()
    if folder is None:
        pytest.skip(f"MaskBench data not found at {maskbench_location()}: {MASKBENCH_HOWTO}")
    files = schema_files(folder)
    # every 93rd file from the third: 30 files across the splits (the corpus run, in
    # benchmarks/lint_corpus.py, covers them all with a time limit each)
    sample = files[2:: max(1, len(files) // 30)][:30]
    done = subprocess.run([sys.executable, "-m", "maskc", "lint", *map(str, sample), "--json", "--fail-on", "never"],
                          capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    assert [f["error"] for f in doc["files"]] == [None] * len(sample)


def test_the_pre_commit_hook_runs_maskc_lint_on_json() -> None:
    yaml = pytest.importorskip("yaml")
    hooks = yaml.safe_load((Path(__file__).resolve().parents[2] / ".pre-commit-hooks.yaml").read_text())
    [hook] = hooks
    assert hook["id"] == "maskc-lint" and hook["entry"] == "maskc lint"
    assert hook["language"] == "python" and hook["types"] == ["json"]
