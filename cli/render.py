"""Human (Rich) renderings of command results that are too long for a command module.

Each function takes the same plain data that the command prints as JSON, so the two
formats never disagree. Tables go to stdout; per-item details and hints go to stderr.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson
from rich import box
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from maskc.cli.output import Output, human_bytes

__all__ = ["artifact_summary", "compile_summary"]

Result = dict[str, Any]

_SOURCE_PREVIEW = 160


def _status(r: Result, width: int) -> Text:
    if r["error"] is not None:
        kind, message = r["error"]["type"], r["error"]["message"].splitlines()[0]
        if width < len(kind) + 12:  # no room for any of the message: the class alone
            text = Text(kind, "bold red")
        else:
            text = Text.assemble((kind, "bold red"), f": {message}")
    elif r["not_enforced"]:
        keywords = ", ".join(sorted({n["keyword"] for n in r["not_enforced"]}))
        text = Text.assemble(("ok", "green"), (f" · not enforced: {keywords}", "yellow"))
    else:
        text = Text("ok", style="green")
    text.truncate(max(width, 8), overflow="ellipsis")
    return text


def _compile_table(results: Sequence[Result], status: Sequence[Text], label: Callable[[str], str],
                   title: str, caption: str) -> Table:
    t = Table(title=title, caption=caption, title_justify="left", caption_justify="left",
              box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
    for i, header in enumerate(("input", "states", "masks", "size", "ms")):
        t.add_column(header, justify="right" if i else "left", no_wrap=True)
    t.add_column("cache", justify="center", no_wrap=True)
    t.add_column("status", no_wrap=True)
    for r, s in zip(results, status):
        ok = r["error"] is None
        t.add_row(
            label(r["path"])[:40],
            f"{r['states']:,}" if ok else "–",
            f"{r['distinct_masks']:,}" if ok else "–",
            human_bytes(r["bytes"]),
            f"{r['compile_ms']:,.0f}" if ok else "–",
            Text("✓", "green") if r["cache_hit"] else Text("–", "dim"),
            s,
        )
    return t


def compile_summary(out: Output, results: Sequence[Result], title: str, caption: str,
                    label: Callable[[str], str] = str) -> None:
    """The ``maskc compile`` table, the "N compiled, M failed" line, then details on stderr.

    Each input takes one line: the status gets the width the other columns leave, and
    stderr repeats every failure in full.
    """
    probe = _compile_table(results, [Text("status")] * len(results), label, title, caption)
    used = Measurement.get(out.out, out.out.options, probe).maximum - len("status")
    out.show(_compile_table(results, [_status(r, out.out.width - used) for r in results],
                            label, title, caption))
    failed = [r for r in results if r["error"] is not None]
    out.show(Text.assemble((f"{len(results) - len(failed)} compiled", "bold green"), ", ",
                           (f"{len(failed)} failed", "bold red" if failed else "dim")))
    for r in results:
        if r["not_enforced"]:
            items = ", ".join(f"{n['keyword']} at {n['pointer'] or '/'}" for n in r["not_enforced"])
            out.err.print(Text.assemble(("! ", "yellow"), (label(r["path"]), "bold"),
                                        f": not enforced: {items} (validate after decoding)"))
    hints: dict[str, list[str]] = {}
    for r in failed:
        out.err.print(Text.assemble(("✗ ", "red"), (label(r["path"]), "bold"),
                                    f": {r['error']['message']}"))
        if "traceback" in r["error"]:
            out.err.print(Text(r["error"]["traceback"], style="dim"))
        if r["error"]["hint"]:
            hints.setdefault(r["error"]["hint"], []).append(label(r["path"]))
    for hint, names in hints.items():
        out.hint(f"{hint} ({', '.join(names)})" if len(results) > 1 else hint)


def _preview(source: str) -> str:
    return source if len(source) <= _SOURCE_PREVIEW else source[: _SOURCE_PREVIEW - 1] + "…"


def artifact_summary(out: Output, path: Path, s: dict[str, Any], verified: str | None) -> None:
    """The ``maskc inspect`` view: provenance, sizes, then the keywords left to validate."""
    table = Table(title=f"[bold]{path}[/]", title_justify="left", show_header=False, box=None,
                  padding=(0, 2, 0, 0))
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column(overflow="fold")
    kinds = s["masks_by_kind"]
    masks = (f"{s['distinct_masks']:,}: {kinds['allow_list']:,} allow-list, "
             f"{kinds['reject_list']:,} reject-list, {kinds['dense']:,} dense, {kinds['delta']:,} delta")
    sizes = f"{human_bytes(s['table_bytes'])} of tables, {human_bytes(s['file_bytes'])} on disk"
    rows: list[tuple[str, str | Text]] = [
        ("grammar", f"{s['grammar_kind']}  sha256 {s['grammar_sha256'][:16]}…"),
        ("source", _preview(s["grammar_source"])),
        ("options", orjson.dumps(s["options"], option=orjson.OPT_SORT_KEYS).decode()),
        ("tokenizer", f"{s['tokenizer_name']}  sha256 {s['tokenizer_sha256'][:16]}…"),
        ("vocab size", f"{s['vocab_size']:,} (logits width)"),
        ("eos ids", ", ".join(map(str, s["eos_token_ids"])) or "–"),
        ("states", f"{s['states']:,} ({s['byte_classes']} byte classes)"),
        ("distinct masks", masks),
        ("size", sizes),
        ("versions", f"format {s['format_version']}, compiler {s['compiler_version']}"),
    ]
    if verified is not None:
        rows.append(("verified", Text(f"built for {verified} ✓", style="green")))
    for key, value in rows:
        table.add_row(key, value)
    out.show(table)
    if not s["not_enforced"]:
        out.show(Text("every keyword is enforced by the masks", style="green"))
        return
    out.show(Text("not enforced: validate after decoding", style="bold yellow"))
    for item in s["not_enforced"]:
        out.show(Text.assemble("  ", (item["keyword"], "yellow"), f" at {item['pointer'] or '/'}"))
