"""``maskc cache ls|path|clear``: the content-addressed artifact cache.

The cache lives in ``$MASKC_CACHE_DIR`` or the user cache directory; ``compile`` reads and
writes it unless given ``--no-cache``. Entries are named by their content address.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table
from rich.text import Text
from safetensors import safe_open

from maskc.artifacts.cache import ArtifactCache, cached_models, folder_bytes, model_cache_root
from maskc.cli.command import MaskcCommand, MaskcGroup
from maskc.cli.errors import guard
from maskc.cli.options import FormatOpt, JsonOpt, resolve_format
from maskc.cli.output import Output, human_bytes
from maskc.compiler.errors import ArtifactError

__all__ = ["cache_app"]

EPILOG = """\
[bold]Examples[/]

  maskc cache ls
  maskc cache path
  MASKC_CACHE_DIR=.maskc-cache maskc cache clear --json
"""

cache_app = typer.Typer(
    name="cache", cls=MaskcGroup, no_args_is_help=True, rich_markup_mode="rich", epilog=EPILOG,
    help="List, locate or clear the artifact cache ($MASKC_CACHE_DIR or the user cache directory).",
)


def _describe(path: Path) -> dict[str, str]:
    """Grammar kind and tokenizer of a cache entry, from its header alone."""
    try:
        with safe_open(str(path), framework="numpy") as f:
            meta = f.metadata() or {}
    except Exception:  # noqa: BLE001  (a damaged entry is listed, and rebuilt on next use)
        return {"kind": "unreadable", "tokenizer": ""}
    return {"kind": meta.get("grammar_kind", "?"), "tokenizer": meta.get("tokenizer_name", "?")}


@cache_app.command("ls", cls=MaskcCommand, epilog=EPILOG)
@guard
def ls_command(fmt: FormatOpt = "human", json_flag: JsonOpt = False) -> None:
    """List cached artifacts: grammar kind, tokenizer and size."""
    out, cache = Output(resolve_format(fmt, json_flag)), ArtifactCache()
    entries: list[dict[str, object]] = [
        {"path": str(p), "bytes": p.stat().st_size, **_describe(p)} for p in cache.entries()
    ]
    models: list[dict[str, object]] = [
        {"path": str(p), "bytes": folder_bytes(p), "kind": "model", "tokenizer": p.name.split("-", 1)[-1]}
        for p in cached_models()
    ]
    total = sum(int(str(e["bytes"])) for e in entries)
    if out.format == "json":
        out.document({"root": str(cache.root), "total_bytes": total, "entries": entries,
                      "models_root": str(model_cache_root()), "models": models})
        return
    table = Table(title=f"cache [bold]{cache.root}[/]", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for header in ("entry", "kind", "tokenizer", "size"):
        table.add_column(header, justify="right" if header == "size" else "left", no_wrap=True)
    for e in entries:
        stem = Path(str(e["path"])).stem
        key = stem if len(stem) <= 16 else stem[:16] + "…"
        table.add_row(key, str(e["kind"]), str(e["tokenizer"]), human_bytes(int(str(e["bytes"]))))
    for m in models:
        table.add_row(Path(str(m["path"])).name[:16] + "…", "model (dequantized)", str(m["tokenizer"]),
                      human_bytes(int(str(m["bytes"]))))
    out.show(table)
    out.show(Text(f"{len(entries)} entries, {human_bytes(total)}", style="bold"))
    if models:
        size = human_bytes(sum(int(str(m["bytes"])) for m in models))
        out.show(Text(f"{len(models)} dequantized model{'s' * (len(models) != 1)}, {size} "
                      f"in {model_cache_root()} (maskc cache clear --models)", style="bold"))


@cache_app.command("path", cls=MaskcCommand, epilog=EPILOG)
@guard
def path_command(fmt: FormatOpt = "human", json_flag: JsonOpt = False) -> None:
    """Print the cache directory."""
    out, cache = Output(resolve_format(fmt, json_flag)), ArtifactCache()
    if out.format == "json":
        out.document({"root": str(cache.root)})
    else:
        out.show(Text(str(cache.root)))


@cache_app.command("clear", cls=MaskcCommand, epilog=EPILOG)
@guard
def clear_command(
    models: Annotated[bool, typer.Option("--models", help="Also delete dequantized models.")] = False,
    fmt: FormatOpt = "human",
    json_flag: JsonOpt = False,
) -> None:
    """Delete every cached artifact (and, with --models, the dequantized models)."""
    out, cache = Output(resolve_format(fmt, json_flag)), ArtifactCache()
    removed = cache.clear()
    gone = 0
    if models:
        for p in cached_models():
            try:
                shutil.rmtree(p)
            except OSError as e:
                raise ArtifactError(f"cannot remove cached model {p}: {e.strerror or e}") from e
            gone += 1
    if out.format == "json":
        out.document({"root": str(cache.root), "removed": removed, "models_removed": gone})
    else:
        out.show(Text(f"removed {removed} cached artifact{'s' * (removed != 1)} from {cache.root}"))
        if models:
            out.show(Text(f"removed {gone} dequantized model{'s' * (gone != 1)} from {model_cache_root()}"))
