"""``maskc check``: decode with a real model under the mask, and beside it, and judge the outputs.

Loads the model (a GGUF file is dequantized once and cached as safetensors), compiles or
loads the grammar for the model's tokenizer, proves EOS reachable by whole tokens, budgets
``--max-tokens auto`` from the schema's worst-case length, and decodes every prompt
constrained and unconstrained (and adversarially with ``--adversarial``). Exit 1 when a
constrained output does not end with EOS within the budget or fails the schema, or when EOS
reachability is refuted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import orjson
import typer

from maskc.cli import render
from maskc.cli.errors import EXIT_FAILED, guard
from maskc.cli.grammar import load_grammar
from maskc.cli.options import FormatOpt, JsonOpt, LenientOpt, MaxDepthOpt, NoCacheOpt, SemanticsOpt, WhitespaceOpt, resolve_format
from maskc.cli.options import MaxSecondsOpt, MaxStatesOpt
from maskc.cli.output import Output
from maskc.compiler.errors import InputError
from maskc.compiler.options import DEFAULT_MAX_DEPTH, Limits

__all__ = ["EPILOG", "check_command", "read_prompts"]

EPILOG = """\
[bold]Examples[/]

  maskc check sample_schemas/tool_call_get_weather.json --model SmolLM2-135M-Instruct.Q4_1.gguf
  maskc check order.json --model ./my-model --prompts prompts.txt --samples 8 --temperature 1.0
  maskc check order.safetensors --model ./my-model --max-tokens 512 --adversarial --json
"""


def read_prompts(path: Path) -> list[str]:
    """Prompts from a file: a JSON list of strings, or one prompt per non-empty line."""
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read prompts file {path}: {e}") from e
    if raw.lstrip().startswith("["):
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            raise InputError(f"prompts file {path} starts like JSON but is not: {e}") from e
        if not isinstance(doc, list) or not all(isinstance(p, str) for p in doc):
            raise InputError(f"prompts file {path} must be a JSON list of strings")
        prompts = doc
    else:
        prompts = [line.strip() for line in raw.splitlines() if line.strip()]
    if not prompts:
        raise InputError(f"prompts file {path} holds no prompt")
    return prompts


def _budget(value: str) -> int | str:
    if value == "auto":
        return value
    if value.isascii() and value.isdecimal() and int(value) > 0:  # not other scripts' digits
        return int(value)
    raise typer.BadParameter("must be a positive integer or 'auto'", param_hint="--max-tokens")


_GRAMMAR = "SCHEMA|GRAMMAR|ARTIFACT"


@guard
def check_command(
    model: Annotated[str, typer.Option(
        "--model", "-m", metavar="SPEC", show_default=False,
        help="Model folder (safetensors), .gguf file, or hub id.")],
    grammar: Annotated[str | None, typer.Argument(
        metavar=_GRAMMAR, show_default=False,
        help="A JSON Schema file, a .gbnf grammar or a .safetensors artifact built for the model's tokenizer. "
             "\\[required unless --regex or --gbnf]")] = None,
    regex: Annotated[str | None, typer.Option("--regex", metavar="RX",
                                              help="Check a regular expression instead.")] = None,
    gbnf: Annotated[str | None, typer.Option("--gbnf", metavar="FILE",
                                             help="A GBNF grammar file (llama.cpp's format) instead.")] = None,
    max_depth: MaxDepthOpt = DEFAULT_MAX_DEPTH,
    max_states: MaxStatesOpt = Limits().max_states,
    max_seconds: MaxSecondsOpt = Limits().max_seconds,
    prompt: Annotated[str | None, typer.Option(
        "--prompt", "-p", metavar="TEXT",
        help="The instruction; the grammar is appended to it.", rich_help_panel="Prompts")] = None,
    prompts: Annotated[Path | None, typer.Option(
        "--prompts", metavar="FILE", help="Several instructions: one per line, or a JSON list.",
        rich_help_panel="Prompts")] = None,
    samples: Annotated[int, typer.Option("--samples", "-n", min=1, metavar="N",
                                         help="Outputs per prompt and mode.")] = 4,
    temperature: Annotated[float, typer.Option("--temperature", min=0.0, metavar="T",
                                               help="0 = greedy.")] = 0.7,
    max_tokens: Annotated[str, typer.Option(
        "--max-tokens", metavar="N|auto",
        help="Token budget per output; auto = the schema's worst-case length + EOS.")] = "auto",
    baseline_tokens: Annotated[int | None, typer.Option(
        "--baseline-max-tokens", min=1, metavar="N",
        help="Budget of the unconstrained baseline (default: the same budget); an unconstrained "
        "model may ramble to the end of it.")] = None,
    batch: Annotated[int, typer.Option("--batch", "-b", min=1, metavar="N",
                                       help="Sequences decoded together.")] = 8,
    device: Annotated[str, typer.Option("--device", metavar="auto|cpu|cuda",
                                        help="auto = CUDA when present, else CPU.")] = "auto",
    seed: Annotated[int, typer.Option("--seed", metavar="S", help="Sampling seed.")] = 0,
    adversarial: Annotated[bool, typer.Option(
        "--adversarial", help="Also decode with a sampler that delays the end as long as the "
        "grammar allows (ties broken by the model), to show the worst case is bounded.")] = False,
    baseline: Annotated[bool, typer.Option(
        "--baseline/--no-baseline", help="Also decode unconstrained, for comparison.")] = True,
    whitespace: WhitespaceOpt = "compact",
    semantics: SemanticsOpt = "generation",
    lenient: LenientOpt = False,
    no_cache: NoCacheOpt = False,
    fmt: FormatOpt = "human",
    json_flag: JsonOpt = False,
) -> None:
    """Decode with a model under the mask and without it; report termination and validity."""
    from maskc.artifacts.extras import require_torch

    require_torch("maskc check")
    from maskc.artifacts.check import default_prompt, run_check
    from maskc.artifacts.model import load_model, quiet_transformers

    given = (grammar is not None) + (regex is not None) + (gbnf is not None)
    if given != 1:
        raise typer.BadParameter("missing; or give --regex RX or --gbnf FILE" if not given else
                                 "give it, --regex RX or --gbnf FILE: one of them, not several", param_hint=_GRAMMAR)
    if not model:
        raise InputError("--model SPEC must not be empty (a model folder, a .gguf file, or a hub id)")
    if prompt is not None and prompts is not None:
        raise InputError("use --prompt TEXT or --prompts FILE, not both")
    budget = _budget(max_tokens)
    out = Output(resolve_format(fmt, json_flag))
    instructions: list[str | None] = list(read_prompts(prompts)) if prompts is not None else [prompt]
    quiet_transformers()
    loaded = load_model(model, device=device, progress=out.human and out.err.is_terminal)
    art = load_grammar(grammar, regex, loaded.vocab, whitespace=whitespace, lenient=lenient, semantics=semantics,
                       cache=not no_cache, gbnf=gbnf, max_depth=max_depth,
                       limits=Limits.scaled(max_states, max_seconds))
    texts = [default_prompt(art, p) for p in instructions]
    total = len(texts) * samples * (2 if baseline else 1) + (len(texts) if adversarial else 0)
    with out.progress(total, "decoding") as bar:
        def tick(mode: str, n: int) -> None:
            bar.working_on(mode)
            for _ in range(n):
                bar.advance()

        report = run_check(art, loaded.vocab, loaded.source_for, texts, loaded.chat_prompt,
                           eos_ids=loaded.eos_ids, samples=samples, temperature=temperature,
                           max_tokens=budget, batch=batch, seed=seed, adversarial=adversarial,
                           baseline=baseline, baseline_tokens=baseline_tokens, progress=tick)
    doc = report.to_json(loaded.vocab)
    meta = {
        "model": {"spec": model, "name": loaded.name, "source": loaded.source, "device": str(loaded.device),
                  "dtype": str(loaded.dtype).removeprefix("torch.")},
        "grammar": {"kind": art.grammar_kind, "states": art.num_states, "sha256": art.metadata["grammar_sha256"],
                    "not_enforced": art.not_enforced},
        "settings": {"samples": samples, "temperature": temperature, "batch": batch, "seed": seed},
    }
    if out.format == "json":
        out.document({**meta, **doc})
    else:
        render.check_report(out, meta, doc)
    if not report.passed:
        raise typer.Exit(EXIT_FAILED)
