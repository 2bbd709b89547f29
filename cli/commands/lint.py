"""``maskc lint``: findings about JSON Schemas that will hurt in production, before they ship.

Reads schema files (or directories of ``*.json``; tool definitions and MaskBench cases are
unwrapped as ``maskc compile`` does), runs the rules of :mod:`maskc.compiler.lint` on each,
and renders the findings (human, JSON or SARIF) at the line and column of their pointers.
Options come from the command line, else ``[tool.maskc.lint]`` in ``pyproject.toml``.
Exit code: 0 no finding reaches ``--fail-on``, 1 one does, 2 bad invocation or unreadable
input, 3 internal error.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
import typer

import maskc
from maskc.artifacts.api import make_options
from maskc.cli import batch, findings
from maskc.cli.errors import EXIT_FAILED, EXIT_INPUT, EXIT_INTERNAL, INTERNAL_ERROR, describe, \
    describe_internal, guard
from maskc.cli.findings import FailOn, FileReport
from maskc.cli.lint_config import LintConfig, load_config, parse_rules
from maskc.cli.options import JsonOpt, WhitespaceOpt
from maskc.cli.output import Output
from maskc.compiler.errors import MaskcError
from maskc.compiler.findings import rule_info
from maskc.compiler.lint import LintContext, all_rules, lint_schema
from maskc.compiler.lint.profiles import load_profile
from maskc.compiler.lint.walk import join
from maskc.compiler.options import DEFAULT_MAX_DEPTH, CompileOptions
from maskc.compiler.vocab import Vocabulary

__all__ = ["EPILOG", "lint_command"]

EPILOG = """\
[bold]Examples[/]

  maskc lint schemas/
  maskc lint order.json --select unbounded-string,ambiguous-union --fail-on warning
  maskc lint tools/*.json --profile openai-strict --format sarif > lint.sarif
  maskc lint order.json --tokenizer deepseek --json
  maskc lint order.json --semantics exact
  maskc lint --explain ambiguous-union
"""

LintFormat = Literal["human", "json", "sarif"]


def _profile(name: str | None) -> dict[str, Any] | None:
    return None if name is None else load_profile(name)


def _where(doc: Any, schema: Any) -> str:
    """The pointer to ``schema`` inside ``doc`` (where a wrapper holds it), "" for the root."""
    if doc is schema or not isinstance(doc, dict):
        return ""
    for key, value in doc.items():
        if value is schema:
            return join("", key)
        if isinstance(value, dict):
            for inner, deeper in value.items():
                if deeper is schema:
                    return join("", key, inner)
    return ""


def _lint_file(path: str, options: CompileOptions, vocab: Vocabulary | None, profile: dict[str, Any] | None,
               select: tuple[str, ...] | None, ignore: set[str]) -> FileReport:
    try:
        text = Path(path).read_text(encoding="utf-8")
        doc = orjson.loads(text)
        schema = batch.unwrap_schema(doc)
        ctx = LintContext(schema, options=options, tokenizer=vocab, profile=profile,
                          base_pointer=_where(doc, schema))
        found = lint_schema(ctx, select=select, ignore=sorted(ignore))
    except MaskcError as e:
        return FileReport(path, error=describe(e))
    except Exception as e:  # noqa: BLE001  (a bug: reported for this file, the others go on)
        return FileReport(path, error=describe_internal(e))
    return FileReport(path, [f.with_path(path) for f in found], text)


@guard
def lint_command(
    paths: Annotated[list[str] | None, typer.Argument(
        metavar="PATH", show_default=False,
        help="Schema .json files (tool definitions and MaskBench cases too), or directories of them.")] = None,
    tokenizer: Annotated[str | None, typer.Option(
        "--tokenizer", "-t", metavar="SPEC", rich_help_panel="Tokenizer",
        help="Count max-tokens-budget in this tokenizer's tokens (as maskc compile --tokenizer).")] = None,
    whitespace: WhitespaceOpt = "compact",
    max_depth: Annotated[int, typer.Option(
        "--max-depth", metavar="N", min=1, max=1024,
        help="Nesting bound of recursive schemas, as maskc compile --max-depth.")] = DEFAULT_MAX_DEPTH,
    semantics: Annotated[Literal["generation", "exact"], typer.Option(
        "--semantics", help="The JSON Schema semantics to lint, as maskc compile --semantics: generation (no "
             "undeclared keys unless the schema admits them, types inferred from keywords) or exact "
             "(exactly the schema's instances: unbounded-object and unsatisfiable read the schema "
             "as JSON Schema does).")] = "generation",
    profile: Annotated[str | None, typer.Option(
        metavar="NAME|FILE",
        help="Provider profile whose limits to check: a built-in name (openai-strict, ...) or a JSON "
             "profile file.")] = None,
    select: Annotated[str | None, typer.Option(
        metavar="RULES", help="Only these rules, comma-separated.", rich_help_panel="Rules")] = None,
    ignore: Annotated[str | None, typer.Option(
        metavar="RULES", help="Not these rules, comma-separated.", rich_help_panel="Rules")] = None,
    explain: Annotated[str | None, typer.Option(
        metavar="RULE", help="Print what RULE finds, why it matters, an example and the fix; lint nothing.",
        rich_help_panel="Rules")] = None,
    fail_on: Annotated[FailOn | None, typer.Option(
        show_default=False,
        help="Exit 1 when a finding is this serious or more (default: error, or fail-on in pyproject.toml).")] = None,
    fmt: Annotated[LintFormat, typer.Option(
        "--format", "-f", help="Output format: human (Rich), json (one document) or sarif (SARIF 2.1.0).",
        rich_help_panel="Output")] = "human",
    json_flag: JsonOpt = False,
) -> None:
    """Lint JSON Schemas for what hurts under constrained decoding: outputs that never end,
    ambiguous or mixed unions, free text where a closed set belongs, unenforced keywords."""
    fmt = "json" if json_flag else fmt
    out = Output("human" if fmt == "human" else "json")
    known = {r.id for r in all_rules()}
    if explain is not None:
        if explain not in known:
            raise typer.BadParameter(f"unknown rule {explain!r}; known: {', '.join(sorted(known))}",
                                     param_hint="--explain")
        info = rule_info(explain)
        if fmt == "human":
            findings.render_explain(out, info)
        else:
            out.document(findings.explain_document(info))
        return
    if not paths:
        raise typer.BadParameter("give schema files or directories to lint (or --explain RULE)",
                                 param_hint="PATH")
    config = load_config(Path.cwd(), known, out.warn)
    try:
        chosen = parse_rules(select, known, "--select") if select is not None else config.select
        ignored = parse_rules(ignore, known, "--ignore") if ignore is not None else config.ignore
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    threshold: FailOn = fail_on or config.fail_on or "error"
    context = (make_options(whitespace, max_depth=max_depth, semantics=semantics),
               maskc.load_tokenizer(tokenizer) if tokenizer else None, _profile(profile or config.profile))
    jobs, skipped = batch.collect_jobs(paths, "json_schema")
    for path in skipped:
        out.warn(f"skipped {path}: not a JSON Schema")
    reports = _lint_all(out, jobs, context, chosen, set(ignored), config)
    if fmt == "human":
        findings.render_human(out, reports)
    elif fmt == "json":
        out.document(findings.json_document(reports, tool="maskc lint"))
    else:
        sarif = findings.sarif_log(reports, all_rules())
        sys.stdout.write(orjson.dumps(sarif, option=orjson.OPT_INDENT_2).decode() + "\n")
    errors = [r.error for r in reports if r.error is not None]
    if any(e["type"] == INTERNAL_ERROR for e in errors):
        raise typer.Exit(EXIT_INTERNAL)
    if errors:
        raise typer.Exit(EXIT_INPUT)
    if findings.threshold_reached(reports, threshold):
        raise typer.Exit(EXIT_FAILED)


def _lint_all(out: Output, jobs: list[batch.Job], context: tuple[CompileOptions, Vocabulary | None, Any],
              select: tuple[str, ...] | None, ignore: set[str], config: LintConfig) -> list[FileReport]:
    reports = []
    with out.progress(len(jobs), "linting") as bar:
        for job in jobs:
            bar.working_on(job.stem)
            if job.kind != "json_schema":
                out.warn(f"skipped {job.label}: lint reads JSON Schemas, not GBNF")
            elif job.failure is not None:
                reports.append(FileReport(job.label, error=job.failure))
            else:
                reports.append(_lint_file(job.label, *context, select, ignore | config.ignored_for(job.label)))
            bar.advance()
    return reports
