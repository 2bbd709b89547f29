"""``maskc inspect``: what an artifact holds, and whether it fits a tokenizer.

Loads the artifact (which verifies its header, tables and content hash) and renders
:meth:`Artifact.summary`: provenance, options, table sizes, and the keywords that are not
enforced and must be validated after decoding. Corrupt files and tokenizer mismatches exit 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

import maskc
from maskc.cli import render
from maskc.cli.errors import guard
from maskc.cli.options import FormatOpt, JsonOpt, VerifyTokenizerOpt, resolve_format
from maskc.cli.output import Output

__all__ = ["EPILOG", "inspect_command"]

EPILOG = """\
[bold]Examples[/]

  maskc inspect maskc-artifacts/order.3f2a9c81d0e4.safetensors
  maskc inspect order.safetensors --tokenizer ./model/tokenizer.json
  maskc inspect order.safetensors --json | jq .not_enforced
"""


@guard
def inspect_command(
    artifact: Annotated[Path, typer.Argument(
        metavar="ARTIFACT", show_default=False,
        help="A .safetensors artifact written by maskc compile.")],
    tokenizer: VerifyTokenizerOpt = None,
    fmt: FormatOpt = "human",
    json_flag: JsonOpt = False,
) -> None:
    """Show an artifact's metadata, table sizes and not-enforced keywords."""
    out = Output(resolve_format(fmt, json_flag))
    vocab = maskc.load_tokenizer(tokenizer) if tokenizer is not None else None
    art = maskc.load_artifact(artifact, tokenizer=vocab)
    summary = {**art.summary(), "grammar_source": art.metadata["grammar_source"],
               "file_bytes": artifact.stat().st_size}
    if out.format == "json":
        out.document({"path": str(artifact), "tokenizer_verified": vocab is not None, **summary})
    else:
        render.artifact_summary(out, artifact, summary, vocab.name if vocab is not None else None)
