"""``maskc compile``: JSON Schemas, regexes or choice lists → one artifact per input.

Reads the inputs, compiles each for every ``--tokenizer`` (optionally one ``--shard`` of
them, in parallel processes, through the artifact cache; an artifact the output folder
still holds is reused), indexes the artifacts in ``manifest.json`` and renders one summary:
a Rich table per tokenizer for humans, one JSON document for machines.
Exit code: 0 all compiled, 1 some input failed to compile, 2 bad invocation or input, 130
interrupted (Ctrl-C, SIGTERM).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from maskc.artifacts.cache import ArtifactCache
from maskc.cli import batch, render
from maskc.cli.errors import EXIT_FAILED, EXIT_INTERNAL, EXIT_INTERRUPTED, INTERNAL_ERROR, guard
from maskc.cli.options import (
    DEFAULT_TOKENIZER,
    EosOpt,
    FormatOpt,
    JobsOpt,
    JsonOpt,
    LenientOpt,
    MaxDepthOpt,
    MaxMemoryOpt,
    MaxSecondsOpt,
    MaxStatesOpt,
    NoCacheOpt,
    OutOpt,
    SemanticsOpt,
    ShardOpt,
    TokenizersOpt,
    VocabSizeOpt,
    WhitespaceOpt,
    parse_shard,
    resolve_format,
)
from maskc.cli.output import Output
from maskc.cli.workers import MEMORY_LIMIT_ENFORCED, terminate_as_interrupt
from maskc.compiler.errors import InputError
from maskc.compiler.options import DEFAULT_MAX_DEPTH, Limits

__all__ = ["EPILOG", "compile_command"]

EPILOG = """\
[bold]Examples[/]

  maskc compile schemas/ --tokenizer deepseek -o build/masks
  maskc compile order.json --whitespace flexible:4 --lenient --json
  maskc compile schemas/ --jobs 8 --tokenizer ./model/tokenizer.json --eos "<|im_end|>"
  maskc compile schemas/ -t deepseek -t model.gguf --shard 2/4 --json
  maskc compile --regex '[0-9]{3}-[0-9]{4}' --tokenizer model.gguf
  maskc compile --choice labels.json
  maskc compile grammar.gbnf --max-depth 16
  maskc compile big.json --max-states 1000000 --max-seconds 900
  maskc compile schemas/ --jobs 2 --max-memory 4096
"""


_ASCII_ID = re.compile(r"[0-9]+")


_LABEL_WIDTH = 40


def _file_label(path: str) -> str:
    """An input as the user finds it: its path relative to the working directory (so
    ``a/x.json`` and ``b/x.json`` stay apart), its end kept when it is long."""
    p = Path(path)
    if p.is_absolute():
        try:
            p = p.relative_to(Path.cwd())
        except ValueError:
            pass
    text = p.as_posix()
    return text if len(text) <= _LABEL_WIDTH else "…" + text[-(_LABEL_WIDTH - 1):]


def _eos(values: list[str] | None) -> tuple[int | str, ...] | None:
    # ASCII digits only: str.isdecimal() also accepts other scripts' digits ("٣" would be id 3),
    # which are token texts here.
    return tuple(int(v) if _ASCII_ID.fullmatch(v) else v for v in values) if values else None


@guard
def compile_command(
    paths: Annotated[list[str], typer.Argument(
        metavar="PATH", show_default=False,
        help="Schema .json files, GBNF .gbnf grammars, or directories of them (not recursive); "
             "regexes with --regex; JSON lists of strings with --choice.")],
    tokenizer: TokenizersOpt = None,
    out_dir: OutOpt = Path("maskc-artifacts"),
    whitespace: WhitespaceOpt = "compact",
    semantics: SemanticsOpt = "generation",
    jobs: JobsOpt = 1,
    lenient: LenientOpt = False,
    regex: Annotated[bool, typer.Option(help="Each PATH is a regular expression.")] = False,
    choice: Annotated[bool, typer.Option(help="Each PATH is a JSON list of strings.")] = False,
    gbnf: Annotated[bool, typer.Option(help="Each PATH is a GBNF grammar (also implied by a .gbnf name).")] = False,
    max_depth: MaxDepthOpt = DEFAULT_MAX_DEPTH,
    max_states: MaxStatesOpt = Limits().max_states,
    max_seconds: MaxSecondsOpt = Limits().max_seconds,
    max_memory: MaxMemoryOpt = None,
    eos: EosOpt = None,
    vocab_size: VocabSizeOpt = None,
    no_cache: NoCacheOpt = False,
    shard: ShardOpt = None,
    fmt: FormatOpt = "human",
    json_flag: JsonOpt = False,
) -> None:
    """Compile schemas, regexes or choice lists into token-mask artifacts for each tokenizer.

    Each artifact is written as OUT/<stem>.<content key>.safetensors (other options or
    another tokenizer give another file); OUT/manifest.json maps each input, tokenizer and
    options to its file. An input whose artifact OUT already holds is not compiled again.
    """
    if regex + choice + gbnf > 1:
        raise typer.BadParameter("use one of --regex, --choice, --gbnf", param_hint="--regex/--choice/--gbnf")
    out = Output(resolve_format(fmt, json_flag))
    kind: batch.Kind = "regex" if regex else "choice" if choice else "gbnf" if gbnf else "json_schema"
    if kind != "json_schema" and (lenient or whitespace != "compact" or semantics != "generation"):
        out.warn("--whitespace, --lenient and --semantics apply to JSON Schemas only; ignored")
    jobs_list, skipped = batch.collect_jobs(paths, kind)
    base = batch.Settings(DEFAULT_TOKENIZER, _eos(eos), vocab_size, whitespace, lenient,
                          None if no_cache else str(ArtifactCache().root), str(out_dir), max_depth,
                          Limits.scaled(max_states, max_seconds), semantics, max_memory_mb=max_memory)
    if max_memory is not None and not MEMORY_LIMIT_ENFORCED:
        out.warn("--max-memory is enforced on Linux only: compiling without a memory limit")
    tokenizers, same = batch.load_tokenizers(base, tokenizer or [DEFAULT_TOKENIZER])
    for spec, first in same:
        out.warn(f"--tokenizer {spec} is the same tokenizer as {first}; compiled once")
    work = [(job, s) for _, s in tokenizers for job in jobs_list]
    if shard is not None:
        work = batch.shard(work, *parse_shard(shard))
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create output directory {out_dir}: {e.strerror or e}") from e
    for path in skipped:
        out.warn(f"skipped {path}: not a JSON Schema")
    done = 0

    def finished(_: object) -> None:
        nonlocal done
        done += 1
        bar.advance()

    try:
        with terminate_as_interrupt(), out.progress(len(work), "compiling") as bar:
            results = batch.run_all(work, [v for v, _ in tokenizers], jobs,
                                    started=lambda job: bar.working_on(job.stem), finished=finished)
    except KeyboardInterrupt:
        out.err.print(Text.assemble(("interrupted: ", "bold red"),
                                    f"{done} of {len(work)} compiles finished; their artifacts are recorded in "
                                    f"{out_dir / 'manifest.json'}"))
        raise typer.Exit(EXIT_INTERRUPTED) from None
    failed = sum(not r["ok"] for r in results)
    if out.format == "json":
        described = [{"name": v.name, "sha256": v.fingerprint, "vocab_size": v.vocab_size,
                      "eos_ids": list(v.eos_ids)} for v, _ in tokenizers]
        out.document({
            "tokenizer": described[0] if len(described) == 1 else None,
            "tokenizers": described,
            "shard": None if shard is None else dict(zip(("index", "count"), parse_shard(shard))),
            "results": results,
            "skipped": skipped,
            "summary": {"compiled": len(results) - failed, "failed": failed},
        })
    for vocab, _ in tokenizers if out.format != "json" else ():
        mine = [r for r in results if r["tokenizer_sha256"] == vocab.fingerprint]
        if not mine and results:  # another tokenizer's table shows this shard's work
            continue
        title = f"[bold]{vocab.name}[/] · {vocab.vocab_size:,} ids · {vocab.fingerprint[:12]}"
        title += f" · {whitespace}" if kind == "json_schema" else ""
        title += f" · shard {shard}" if shard is not None else ""
        written = any(r["ok"] for r in mine)
        render.compile_summary(out, mine, title, f"artifacts in {out_dir}/" if written else "",
                               label=str if kind == "regex" else _file_label)
    if any(r["error"] is not None and r["error"]["type"] == INTERNAL_ERROR for r in results):
        raise typer.Exit(EXIT_INTERNAL)
    if failed:
        raise typer.Exit(EXIT_FAILED)
