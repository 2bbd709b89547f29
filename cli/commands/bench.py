"""``maskc bench``: maskc and its peers side by side on the same schemas and tokenizer.

Reads schema files (MaskBench cases bring labelled instances; a bare schema gets random
walks of maskc's grammar), runs each engine in a child process under ``--timeout`` and
``--memory``, and renders times to first mask (cold, warm), time between masks, compile
peak memory, artifact size and pass counts, with peer / maskc ratios.
Exit code: 0 done, 1 maskc accepted an invalid instance, 2 bad invocation or input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from maskc.artifacts.bench import ENGINES, BenchSettings, TokenizerSpec, default_inputs, expand_paths, load_case
from maskc.artifacts.bench import missing_hint, run_bench
from maskc.cli.bench_render import bench_report
from maskc.cli.errors import EXIT_FAILED, guard
from maskc.cli.options import DEFAULT_TOKENIZER, FormatOpt, JsonOpt, TokenizerOpt, resolve_format
from maskc.cli.output import Output
from maskc.compiler.errors import InputError
from maskc.compiler.tokenizer import load_tokenizer

__all__ = ["EPILOG", "bench_command"]

EPILOG = """\
[bold]Examples[/]

  maskc bench ../shared/maskbench --sample 30 --engines maskc,xgrammar,llguidance
  maskc bench sample_schemas/ --engines maskc --walks 16 --json
  maskc bench order.json --tokenizer ./model/tokenizer.json --timeout 60 --memory 4096
"""


def _engines(value: str) -> list[str]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in ENGINES]
    if unknown:
        raise typer.BadParameter(f"unknown engine(s) {', '.join(unknown)}; choose from {', '.join(ENGINES)}",
                                 param_hint="--engines")
    if "maskc" not in names:
        raise typer.BadParameter("must include maskc (the ratios are against it)", param_hint="--engines")
    return ["maskc", *dict.fromkeys(n for n in names if n != "maskc")]


@guard
def bench_command(
    paths: Annotated[list[Path] | None, typer.Argument(
        metavar="PATH", show_default=False,
        help="Schema or MaskBench .json files, or directories of them. Default: the MaskBench "
             "folder when found ($MASKC_MASKBENCH_DIR), else sample_schemas/.")] = None,
    tokenizer: TokenizerOpt = DEFAULT_TOKENIZER,
    engines: Annotated[str, typer.Option(
        "--engines", "-e", metavar="LIST",
        help=f"Comma-separated, from {','.join(ENGINES)}; absent peers are skipped.")] = ",".join(ENGINES),
    sample: Annotated[int | None, typer.Option("--sample", "-n", min=1, metavar="N",
                                               help="Run N files drawn with --seed.")] = None,
    seed: Annotated[int, typer.Option("--seed", metavar="S", help="Seed of --sample and the random walks.")] = 0,
    timeout: Annotated[float, typer.Option(
        "--timeout", metavar="S", min=0.001, help="Seconds each engine may spend on one schema.",
        rich_help_panel="Limits")] = 120.0,
    memory: Annotated[int, typer.Option(
        "--memory", metavar="MB", min=0, help="Address-space cap of each engine's process (0: none).",
        rich_help_panel="Limits")] = 8192,
    walks: Annotated[int, typer.Option(
        "--walks", metavar="N", min=1, help="Random-walk instances for a schema that brings none.")] = 8,
    fmt: FormatOpt = "human",
    json_flag: JsonOpt = False,
) -> None:
    """Time maskc and its peers (XGrammar, llguidance, outlines-core) on the same schemas."""
    names = _engines(engines)
    out = Output(resolve_format(fmt, json_flag))
    vocab = load_tokenizer(tokenizer)
    skipped = {n: hint for n in names if (hint := missing_hint(n)) is not None}
    if "maskc" in skipped:
        raise InputError(skipped["maskc"])
    for hint in skipped.values():
        out.warn(f"skipped {hint}")
    files = expand_paths(paths or default_inputs(), sample=sample, seed=seed)
    cases = [load_case(f, vocab) for f in files]
    settings = BenchSettings(timeout_s=timeout, memory_mb=memory, walks=walks, seed=seed)
    with out.progress(len(cases), "benchmarking") as bar:
        report = run_bench(cases, [n for n in names if n not in skipped], TokenizerSpec(tokenizer), settings,
                           started=lambda c: bar.working_on(Path(c.path).name), finished=lambda c: bar.advance())
    report["skipped_engines"] = skipped
    report["tokenizer"] = {"spec": tokenizer, "name": vocab.name, "sha256": vocab.fingerprint,
                           "vocab_size": vocab.vocab_size, "eos_ids": list(vocab.eos_ids)}
    if out.format == "json":
        out.document(report)
    else:
        bench_report(out, report)
    if report["summary"]["maskc"]["invalid_accepted"]:
        raise typer.Exit(EXIT_FAILED)
