"""``maskc cache ls|path|clear``: the content-addressed artifact cache.

The cache lives in ``$MASKC_CACHE_DIR`` or the user cache directory; ``compile`` reads and
writes it unless given ``--no-cache``. Entries are named by their content address.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich import box
from rich.table import Table
from rich.text import Text
from safetensors import safe_open

from maskc.artifacts.cache import ArtifactCache
from maskc.cli.errors import guard
from maskc.cli.options import FormatOpt, JsonOpt, resolve_format
from maskc.cli.output import Output, human_bytes

__all__ = ["cache_app"]

EPILOG = """\
[bold]Examples[/]

  maskc cache ls
  maskc cache path
  MASKC_CACHE_DIR=.maskc-cache maskc cache clear --json
"""

cache_app = typer.Typer(
    name="cache", no_args_is_help=True, rich_markup_mode="rich", epilog=EPILOG,
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


@cache_app.command("ls", epilog=EPILOG)
@guard
def ls_command(fmt: FormatOpt = "human", json_flag: JsonOpt = False) -> None:
    """List cached artifacts: grammar kind, tokenizer and size."""
    out, cache = Output(resolve_format(fmt, json_flag)), ArtifactCache()
    entries: list[dict[str, object]] = [
        {"path": str(p), "bytes": p.stat().st_size, **_describe(p)} for p in cache.entries()
    ]
    total = sum(int(str(e["bytes"])) for e in entries)
    if out.format == "json":
        out.document({"root": str(cache.root), "total_bytes": total, "entries": entries})
        return
    table = Table(title=f"cache [bold]{cache.root}[/]", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for header in ("entry", "kind", "tokenizer", "size"):
        table.add_column(header, justify="right" if header == "size" else "left", no_wrap=True)
    for e in entries:
        stem = Path(str(e["path"])).stem
        key = stem if len(stem) <= 16 else stem[:16] + "…"
        table.add_row(key, str(e["kind"]), str(e["tokenizer"]), human_bytes(int(str(e["bytes"]))))
    out.show(table)
    out.show(Text(f"{len(entries)} entries, {human_bytes(total)}", style="bold"))


@cache_app.command("path", epilog=EPILOG)
@guard
def path_command(fmt: FormatOpt = "human", json_flag: JsonOpt = False) -> None:
    """Print the cache directory."""
    out, cache = Output(resolve_format(fmt, json_flag)), ArtifactCache()
    if out.format == "json":
        out.document({"root": str(cache.root)})
    else:
        out.show(Text(str(cache.root)))


@cache_app.command("clear", epilog=EPILOG)
@guard
def clear_command(fmt: FormatOpt = "human", json_flag: JsonOpt = False) -> None:
    """Delete every cached artifact."""
    out, cache = Output(resolve_format(fmt, json_flag)), ArtifactCache()
    removed = cache.clear()
    if out.format == "json":
        out.document({"root": str(cache.root), "removed": removed})
    else:
        out.show(Text(f"removed {removed} cached artifact{'s' * (removed != 1)} from {cache.root}"))
