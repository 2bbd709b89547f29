"""``maskc trace``: every decode step under the mask, or why a given output was rejected.

With ``--text`` the output is replayed token by token (no model needed) and the trace stops
at the first token the grammar rejects. With ``--model`` (or fixed ``--logits``) tokens are
picked greedily under the mask and each row shows what the mask allowed, the pick, and the
model's preferred token the mask vetoed. Exit 1 when the output is rejected or does not end.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal

import orjson
import typer

from maskc.cli import render
from maskc.cli.errors import EXIT_FAILED, guard
from maskc.cli.grammar import load_grammar
from maskc.cli.options import DEFAULT_TOKENIZER, JsonOpt, LenientOpt, MaxDepthOpt, NoCacheOpt, SemanticsOpt, WhitespaceOpt
from maskc.cli.options import MaxSecondsOpt, MaxStatesOpt
from maskc.cli.output import Output
from maskc.compiler.errors import InputError
from maskc.compiler.options import DEFAULT_MAX_DEPTH, Limits

__all__ = ["EPILOG", "trace_command"]

EPILOG = """\
[bold]Examples[/]

  maskc trace order.json --tokenizer model.gguf --text '{"id": 7}'
  maskc trace --regex '\\{"\\[ab]":[12]\\}' --tokenizer vocab.json --logits logits.json
  maskc trace order.json --model ./SmolLM2-135M-Instruct.Q4_1.gguf --prompt "Order 3 apples" --top 3
  maskc trace order.json -t deepseek --text "$(cat output.json)" --format jsonl
"""

TraceFormat = Literal["human", "json", "jsonl"]

_DEFAULT_STEPS = 256


@guard
def trace_command(
    grammar: Annotated[str | None, typer.Argument(
        metavar="SCHEMA|GRAMMAR|ARTIFACT", show_default=False,
        help="A JSON Schema file, a .gbnf grammar or a .safetensors artifact (or use --regex/--gbnf).")] = None,
    regex: Annotated[str | None, typer.Option("--regex", metavar="RX",
                                              help="Trace a regular expression instead.")] = None,
    gbnf: Annotated[str | None, typer.Option("--gbnf", metavar="FILE",
                                             help="A GBNF grammar file (llama.cpp's format) instead.")] = None,
    max_depth: MaxDepthOpt = DEFAULT_MAX_DEPTH,
    max_states: MaxStatesOpt = Limits().max_states,
    max_seconds: MaxSecondsOpt = Limits().max_seconds,
    tokenizer: Annotated[str | None, typer.Option(
        "--tokenizer", "-t", metavar="SPEC",
        help="tokenizer.json, model folder, .gguf, SentencePiece .model, JSON token list "
             "{\"tokens\": [...], \"eos\": ...}, or 'deepseek' (default: the model's, else deepseek).",
        rich_help_panel="Tokenizer")] = None,
    text: Annotated[str | None, typer.Option(
        "--text", metavar="OUTPUT", help="Replay this output and stop at the first rejected token.",
        rich_help_panel="Source of tokens")] = None,
    model: Annotated[str | None, typer.Option(
        "--model", "-m", metavar="SPEC", help="Let this model pick tokens (folder, .gguf, hub id).",
        rich_help_panel="Source of tokens")] = None,
    prompt: Annotated[str | None, typer.Option(
        "--prompt", "-p", metavar="TEXT", help="The instruction for --model (the grammar is appended).",
        rich_help_panel="Source of tokens")] = None,
    logits: Annotated[Path | None, typer.Option(
        "--logits", metavar="FILE", help="Fixed logits: JSON {token: logit} (absent tokens: -inf) "
        "or a list with one number per id.", rich_help_panel="Source of tokens")] = None,
    top: Annotated[int, typer.Option("--top", "-k", min=1, metavar="K",
                                     help="Allowed tokens shown per step.")] = 5,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, metavar="N",
                                            help="Steps to decode at most.")] = _DEFAULT_STEPS,
    device: Annotated[str, typer.Option("--device", metavar="auto|cpu|cuda",
                                        help="Where the model runs.")] = "auto",
    whitespace: WhitespaceOpt = "compact",
    semantics: SemanticsOpt = "generation",
    lenient: LenientOpt = False,
    no_cache: NoCacheOpt = False,
    fmt: Annotated[TraceFormat, typer.Option(
        "--format", "-f", help="human (Rich table), json (one document) or jsonl (a line per step).",
        rich_help_panel="Output")] = "human",
    json_flag: JsonOpt = False,
) -> None:
    """Show each decode step: allowed tokens, the pick, the model's choice the mask vetoed."""
    import maskc
    from maskc.artifacts import trace as tr

    if json_flag:
        fmt = "json"

    if text is not None and model is not None:
        raise InputError("use --text OUTPUT or --model SPEC, not both")
    if text is None and model is None and logits is None:
        raise InputError("nothing picks the tokens: give --text OUTPUT, --model SPEC, or --logits FILE")
    if prompt is not None and model is None:
        raise InputError("--prompt needs --model")
    if model is not None or text is None:  # decoding (a model's logits or a fixed table) runs on torch
        from maskc.artifacts.extras import require_torch

        require_torch("maskc trace --model" if model is not None else "maskc trace --logits",
                      transformers=model is not None)
    out = Output("json" if fmt == "jsonl" else fmt)
    loaded = None
    if model is not None:
        from maskc.artifacts.model import load_model, quiet_transformers

        quiet_transformers()
        vocab = maskc.load_tokenizer(tokenizer) if tokenizer is not None else None
        loaded = load_model(model, device=device, tokenizer=vocab, progress=out.human and out.err.is_terminal)
        vocab = loaded.vocab
    else:
        vocab = maskc.load_tokenizer(tokenizer or DEFAULT_TOKENIZER)
    art = load_grammar(grammar, regex, vocab, whitespace=whitespace, lenient=lenient, semantics=semantics, cache=not no_cache,
                       gbnf=gbnf, max_depth=max_depth, limits=Limits.scaled(max_states, max_seconds))
    fixed = tr.load_logits(logits, vocab, art.vocab_size) if logits is not None else None
    if text is not None:
        trace = tr.trace_text(art, vocab, text, logits=fixed, top_k=top)
    elif loaded is not None:
        from maskc.artifacts.check import default_prompt

        source = loaded.source_for()
        ids = loaded.chat_prompt(default_prompt(art, prompt))
        trace = tr.trace_decode(art, vocab, source, ids, max_tokens=max_tokens, top_k=top)
    else:
        from maskc.artifacts.decode import FixedLogits

        assert fixed is not None
        trace = tr.trace_decode(art, vocab, FixedLogits(fixed), [], max_tokens=max_tokens, top_k=top)
    doc = trace.to_json()
    if fmt == "jsonl":
        for row in doc["steps"]:
            sys.stdout.write(orjson.dumps(row).decode() + "\n")
        sys.stdout.write(orjson.dumps({k: v for k, v in doc.items() if k != "steps"}).decode() + "\n")
    elif fmt == "json":
        out.document({"tokenizer": vocab.name, "grammar_kind": art.grammar_kind, **doc})
    else:
        render.trace_table(out, doc, vocab.name)
    if trace.finish not in ("eos", "complete"):
        raise typer.Exit(EXIT_FAILED)
