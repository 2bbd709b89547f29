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
from rich.cells import cell_len, set_cell_size
from rich.measure import Measurement
from rich.table import Table
from rich.text import Span, Text

from maskc.cli.output import Output, human_bytes

__all__ = ["artifact_summary", "check_report", "compile_summary", "show_token", "trace_table"]

Result = dict[str, Any]

_SOURCE_PREVIEW = 160


def _restricted(entries: list[dict[str, str]]) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """``not_enforced`` entries split: restrictions (``kind: "restricted"``: the masks admit
    less than the schema) and the rest (the masks admit more, or an annotation)."""
    restricted = [n for n in entries if n.get("kind") == "restricted"]
    return restricted, [n for n in entries if n.get("kind") != "restricted"]


def _status(r: Result, width: int) -> Text:
    if r["error"] is not None:
        kind, message = r["error"]["type"], r["error"]["message"].splitlines()[0]
        if width < len(kind) + 12:  # no room for any of the message: the class alone
            text = Text(kind, "bold red")
        else:
            text = Text.assemble((kind, "bold red"), f": {message}")
    elif r["not_enforced"]:
        restricted, loose = _restricted(r["not_enforced"])
        parts = [f"{what}: {', '.join(sorted({n['keyword'] for n in group}))}"
                 for what, group in (("not enforced", loose), ("restricted", restricted)) if group]
        text = Text.assemble(("cached" if r.get("cached") else "ok", "green"),
                             (f" · {' · '.join(parts)}", "yellow"))
    else:
        text = Text("cached" if r.get("cached") else "ok", style="green")
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
        restricted, loose = _restricted(r["not_enforced"])
        if loose:
            items = ", ".join(f"{n['keyword']} at {n['pointer'] or '/'}" for n in loose)
            out.err.print(Text.assemble(("! ", "yellow"), (label(r["path"]), "bold"),
                                        f": not enforced: {items} (validate after decoding)"))
        for n in restricted:
            what = f": restricted: {n['keyword']} {n.get('detail', '')}".rstrip()
            out.err.print(Text.assemble(("! ", "yellow"), (label(r["path"]), "bold"), what))
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
        ("states", f"{s['states']:,} ({s['byte_classes']} byte classes"
                   + (f", {s['counted_loops']} counted loops" if s.get("counted_loops") else "")
                   + (f", {s['nested_loops']} of them inside another)" if s.get("nested_loops") else ")")),
        ("distinct masks", masks),
        *([("stack contexts", f"{s['context_answers']:,} answers stored (first visits that need no walk)")]
          if s.get("context_answers") else []),
        ("size", sizes),
        ("versions", f"format {s['format_version']}, compiler {s['compiler_version']}"),
    ]
    if verified is not None:
        rows.append(("verified", Text(f"built for {verified} ✓", style="green")))
    for key, value in rows:
        table.add_row(key, value)
    out.show(table)
    restricted, loose = _restricted(s["not_enforced"])
    if not loose:
        out.show(Text("every keyword is enforced by the masks", style="green"))
    else:
        out.show(Text("not enforced: validate after decoding", style="bold yellow"))
        for item in loose:
            where = f" at {item['pointer'] or '/'}"
            out.show(Text.assemble("  ", (item["keyword"], "yellow"), where))
    if restricted:
        out.show(Text("restricted: the masks admit less than the schema", style="bold yellow"))
        for item in restricted:
            detail = f" {item.get('detail', '')}".rstrip()
            out.show(Text.assemble("  ", (item["keyword"], "yellow"), detail))


def show_token(text: str) -> str:
    """A token's text with whitespace and control characters made visible."""
    out = []
    for ch in text:
        if ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    s = "".join(out)
    if s != s.strip(" "):
        s = s.replace(" ", "␣")
    return s


def _choice(c: dict[str, Any] | None, with_logit: bool = True) -> Text:
    if c is None:
        return Text("–", style="dim")
    t = Text(show_token(c["token"]))
    if with_logit and c["logit"] is not None:
        t.append(" " + f"{c['logit']:.2f}".rstrip("0").rstrip("."), style="dim")
    return t


_TRACE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("step", "right"), ("state", "right"), ("depth", "right"), ("allowed", "right"), ("top allowed", "fold"),
    ("picked", "left"), ("vetoed (model preferred)", "left"), ("forced", "fold"),
)
_RICH_TABLE_ROWS = 300  # past this, plain columns: a Rich table costs about a millisecond a row
_PLAIN_CHUNK = 1000  # rows printed at once in plain columns


def _trace_cells(r: dict[str, Any]) -> list[Text]:
    top = Text(", ").join(_choice(c) for c in r["top"])
    if r["allowed"] > len(r["top"]):
        top.append(f", … {r['allowed'] - len(r['top']):,} more", style="dim")
    picked = _choice(r["picked"])
    if not r["accepted"]:
        picked.stylize("bold red")
        picked.append(" ✗ rejected", style="bold red")
    return [Text(str(r["step"])), Text(str(r["state"])), Text(str(r["depth"])), Text(f"{r['allowed']:,}"),
            top, picked, _choice(r["vetoed"]), Text(show_token(r["forced"]))]


Cell = tuple[str, list[tuple[int, int, str]]]  # plain text and its (start, end, style) spans


def _choice_cell(c: dict[str, Any] | None) -> Cell:
    if c is None:
        return "–", [(0, 1, "dim")]
    t = show_token(c["token"])
    if c["logit"] is None:
        return t, []
    extra = " " + f"{c['logit']:.2f}".rstrip("0").rstrip(".")
    return t + extra, [(len(t), len(t) + len(extra), "dim")]


def _plain_cells(r: dict[str, Any]) -> list[Cell]:
    """:func:`_trace_cells` as plain strings and spans: Rich ``Text`` costs too much per cell here."""
    top, spans = "", []
    for i, c in enumerate(r["top"]):
        text, sp = _choice_cell(c)
        at = len(top) + (2 if i else 0)
        top += (", " if i else "") + text
        spans += [(s + at, e + at, st) for s, e, st in sp]
    if r["allowed"] > len(r["top"]):
        more = f", … {r['allowed'] - len(r['top']):,} more"
        spans.append((len(top), len(top) + len(more), "dim"))
        top += more
    picked = _choice_cell(r["picked"])
    if not r["accepted"]:
        text = picked[0] + " ✗ rejected"
        picked = text, [(0, len(text), "bold red")]
    return [(str(r["step"]), []), (str(r["state"]), []), (str(r["depth"]), []), (f"{r['allowed']:,}", []),
            (top, spans), picked, _choice_cell(r["vetoed"]), (show_token(r["forced"]), [])]


def _plain_columns(out: Output, title: str, rows: list[list[Cell]]) -> None:
    """The trace rows as fixed-width columns, linear in the rows (long replays: 100 KB of text).

    Numbers and tokens keep their width; "top allowed" and "forced" share what the console
    leaves and are cut with an ellipsis instead of folded.
    """
    heads = [h for h, _ in _TRACE_COLUMNS]
    widths = [max([len(h)] + [cell_len(c[0]) for c in col]) for h, col in zip(heads, zip(*rows))]
    for i in (5, 6):
        widths[i] = min(widths[i], 30)
    widths[7] = min(widths[7], 16)
    spare = out.out.width - 2 * (len(widths) - 1) - sum(w for i, w in enumerate(widths) if i != 4)
    widths[4] = max(min(widths[4], spare), 20)

    def line(cells: list[Cell], base: int, spans: list[Span]) -> str:
        parts: list[str] = []
        at = base
        for (_, how), (text, sp), w in zip(_TRACE_COLUMNS, cells, widths):
            if cell_len(text) > w:
                text = set_cell_size(text, w - 1) + "…"
            gap = " " * (w - cell_len(text))
            start = at + (len(gap) if how == "right" else 0)
            spans.extend(Span(start + s, start + min(e, len(text)), st) for s, e, st in sp if s < len(text))
            parts.append(gap + text if how == "right" else text + gap)
            at += len(parts[-1]) + 2
        return "  ".join(parts)

    out.out.print(Text.from_markup(title), no_wrap=True, crop=False)
    head_spans: list[Span] = []
    head = line([(h, [(0, len(h), "bold")]) for h in heads], 0, head_spans)
    out.out.print(Text(head, spans=head_spans), no_wrap=True, overflow="ignore", crop=False)
    out.out.print(Text("─" * min(out.out.width, len(head))), no_wrap=True, crop=False)
    for first in range(0, len(rows), _PLAIN_CHUNK):
        lines: list[str] = []
        spans: list[Span] = []
        base = 0
        for cells in rows[first : first + _PLAIN_CHUNK]:
            lines.append(line(cells, base, spans))
            base += len(lines[-1]) + 1
        out.out.print(Text("\n".join(lines), spans=spans), no_wrap=True, overflow="ignore", crop=False)


def trace_table(out: Output, doc: dict[str, Any], tokenizer: str) -> None:
    """The ``maskc trace`` view: a row per step, then the output and how it ended.

    Up to a few hundred steps this is a Rich table; a longer trace is printed as plain
    columns, which cost a fraction of the time (the table's cost is per row, and large).
    """
    title = f"[bold]trace[/] · {tokenizer}"
    if len(doc["steps"]) > _RICH_TABLE_ROWS:
        _plain_columns(out, title, [_plain_cells(r) for r in doc["steps"]])
    else:
        rows = [_trace_cells(r) for r in doc["steps"]]
        table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
        for name, how in _TRACE_COLUMNS:
            if how == "fold":
                table.add_column(name, overflow="fold")
            else:
                table.add_column(name, justify="right" if how == "right" else "left")
        for cells in rows:
            table.add_row(*cells)
        out.show(table)
    finish = doc["finish"]
    style = "green" if finish in ("eos", "complete") else "bold red"
    out.show(Text.assemble(("output ", "bold"), doc["output"], "  ", (f"({finish})", style)))
    if finish in ("rejected", "incomplete"):
        allowed = Text(", ").join(_choice(c) for c in doc["allowed_there"]) or Text("nothing", style="red")
        what = "the grammar rejects" if finish == "rejected" else "the grammar cannot end with"
        out.show(Text.assemble(("why: ", "bold"), f"after {doc['prefix']!r} ", what, " ",
                               (show_token(doc["rejected"]["token"]) if doc["rejected"] else "EOS", "bold red"),
                               "; allowed there: ", allowed))


_MODES = ("constrained", "unconstrained", "adversarial")


def _rate(n: int, total: int) -> str:
    return f"{n}/{total}" if total else "–"


def check_report(out: Output, meta: dict[str, Any], doc: dict[str, Any]) -> None:
    """The ``maskc check`` view: static facts, one column per mode, then failing outputs."""
    m, g = meta["model"], meta["grammar"]
    out.show(Text.assemble(("model ", "bold"), f"{m['name']} ({m['source']}, {m['device']}, {m['dtype']})   ",
                           ("grammar ", "bold"), f"{g['kind']}, {g['states']:,} states"))
    b = doc["budget"]
    base = b["baseline_max_tokens"]
    extra = f" (baseline: {base:,})" if base is not None and base != b["max_tokens"] else ""
    out.show(Text.assemble(("budget ", "bold"), f"{b['max_tokens']:,} tokens: {b['reason']}{extra}"))
    r = doc["eos_reachability"]
    if r["proved"]:
        out.show(Text.assemble(("EOS reachability ", "bold"), ("proved", "green"), f" ({r['method']}): {r['detail']}"))
    else:
        cx = r["counterexample"]
        tail = f"; counterexample prefix {cx['text']!r} (ids {cx['token_ids']})" if cx else ""
        out.show(Text.assemble(("EOS reachability ", "bold"), ("NOT proved", "bold red"), f": {r['detail']}{tail}"))
    restricted, loose = _restricted(g["not_enforced"])
    if loose:
        names = ", ".join(f"{i['keyword']} at {i['pointer'] or '/'}" for i in loose)
        out.show(Text.assemble(("not enforced ", "bold yellow"), names, " (schema failures there are expected)"))
    for i in restricted:
        detail = f"{i['keyword']} {i.get('detail', '')}".rstrip()
        out.show(Text.assemble(("restricted ", "bold yellow"), detail))
    out.show(_prompt_line(doc))
    modes = [doc["modes"][k] for k in _MODES if k in doc["modes"]]
    table = Table(box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("")
    for md in modes:
        table.add_column(md["mode"], justify="right")

    def row(label: str, cell: Callable[[dict[str, Any]], str]) -> None:
        table.add_row(label, *(cell(md) for md in modes))

    row("outputs", lambda d: str(d["outputs"]))
    row("ended with EOS", lambda d: _rate(d["finish"].get("eos", 0), d["outputs"]))
    row("hit the budget", lambda d: _rate(d["finish"].get("length", 0), d["outputs"]))
    row("stuck (no token allowed)", lambda d: _rate(d["finish"].get("dead", 0), d["outputs"]))
    row("not JSON", lambda d: _rate(d["json_failures"], d["outputs"]))
    row("schema failures", lambda d: _rate(d["schema_failures"], d["outputs"]))
    row("maxLength violations", lambda d: str(d["limit_violations"]["maxLength"]))
    row("maxItems violations", lambda d: str(d["limit_violations"]["maxItems"]))
    row("failure rate", lambda d: f"{100 * d['failure_rate']:.0f}%")
    row("tokens per output (mean/max)", lambda d: f"{d['tokens_mean']:.1f} / {d['tokens_max']}")
    row("tokens/s", lambda d: f"{d['tokens_per_second']:.1f}")
    row("mask ms/step (median / p90)", lambda d: _times(d["timing"]["mask_ms"], 3))
    row("model ms/step (median / p90)", lambda d: _times(d["timing"]["model_ms"], 1))
    row("prefill ms/batch (median)", lambda d: _times(d["timing"]["prefill_ms"], 1, p90=False))
    row("forced bytes", lambda d: f"{100 * d['forced_byte_share']:.0f}%" if d["mode"] != "unconstrained" else "–")
    out.show(table)
    for md in modes:
        bad = [s for s in md["samples"] if not _passed(s)]
        show = bad[:3] if bad else md["samples"][:1]
        for s in show:
            style = "red" if not _passed(s) else "green"
            label = f"{md['mode']} ({s['finish']}, {s['tokens']} tokens)"
            out.show(Text.assemble((label, f"bold {style}"), " ", _preview(s["text"])))
            for e in s["errors"][:3]:
                out.show(Text(f"    {e}", style="dim"))
    verdict = ("PASS: every constrained output ended with EOS within the budget and is valid"
               if doc["passed"] else "FAIL: see the constrained and adversarial columns above")
    out.show(Text(verdict, style="bold green" if doc["passed"] else "bold red"))


def _times(t: dict[str, Any] | None, digits: int, *, p90: bool = True) -> str:
    """``median / p90`` of a ``timing`` entry of the check report; ``–`` when nothing was timed."""
    if t is None:
        return "–"
    return f"{t['median']:.{digits}f} / {t['p90']:.{digits}f}" if p90 else f"{t['median']:.{digits}f}"


def _prompt_line(doc: dict[str, Any]) -> Text:
    """The first line of the (first) user turn, and how long the prompt the model read was."""
    prompts, tokens = doc["prompts"], doc.get("prompt_tokens") or []
    first = prompts[0].splitlines()[0] if prompts and prompts[0] else ""
    more = f"; {len(prompts)} prompts" if len(prompts) > 1 else ""
    size = f"{len(prompts[0]):,} chars" if prompts else "empty"
    if tokens:
        size += f", {tokens[0]:,} tokens with the chat template"
    return Text.assemble(("prompt ", "bold"), repr(first[:_SOURCE_PREVIEW]),
                         f" ({size}{more}; the full text is in --json)")


def _passed(s: dict[str, Any]) -> bool:
    return (s["finish"] == "eos" and s["parsed"] is not False and s["valid"] is not False
            and s["grammar_ok"] is not False)
