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

__all__ = ["artifact_summary", "check_report", "compile_summary", "show_token", "trace_table"]

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


def trace_table(out: Output, doc: dict[str, Any], tokenizer: str) -> None:
    """The ``maskc trace`` view: a row per step, then the output and how it ended."""
    table = Table(title=f"[bold]trace[/] · {tokenizer}", title_justify="left", box=box.SIMPLE_HEAD)
    for name, kw in (("step", {"justify": "right"}), ("state", {"justify": "right"}),
                     ("depth", {"justify": "right"}), ("allowed", {"justify": "right"}),
                     ("top allowed", {"overflow": "fold"}),
                     ("picked", {}), ("vetoed (model preferred)", {}), ("forced", {"overflow": "fold"})):
        table.add_column(name, **kw)  # type: ignore[arg-type]
    for r in doc["steps"]:
        top = Text(", ").join(_choice(c) for c in r["top"])
        if r["allowed"] > len(r["top"]):
            top.append(f", … {r['allowed'] - len(r['top']):,} more", style="dim")
        picked = _choice(r["picked"])
        if not r["accepted"]:
            picked.stylize("bold red")
            picked.append(" ✗ rejected", style="bold red")
        table.add_row(str(r["step"]), str(r["state"]), str(r["depth"]), f"{r['allowed']:,}", top, picked,
                      _choice(r["vetoed"]), show_token(r["forced"]))
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
    if g["not_enforced"]:
        names = ", ".join(f"{i['keyword']} at {i['pointer'] or '/'}" for i in g["not_enforced"])
        out.show(Text.assemble(("not enforced ", "bold yellow"), names, " (schema failures there are expected)"))
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
    row("model ms/step", lambda d: f"{d['model_ms_per_step']:.1f}")
    row("mask ms/step", lambda d: f"{d['mask_ms_per_step']:.2f}" if d["mode"] != "unconstrained" else "–")
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


def _passed(s: dict[str, Any]) -> bool:
    return (s["finish"] == "eos" and s["parsed"] is not False and s["valid"] is not False
            and s["grammar_ok"] is not False)
