"""Rich rendering of a ``maskc bench`` report: one row per schema, then the summary with
peer / maskc ratios. Reads the report dict of :func:`maskc.artifacts.bench.run_bench`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from maskc.artifacts.bench import METRICS
from maskc.cli.output import Output, human_bytes

__all__ = ["bench_report"]

_PER_SCHEMA_MAX = 60  # past this many schemas only the summary is shown


def _value(key: str, v: float | None) -> str:
    if v is None:
        return "—"
    if key.endswith("bytes"):
        return human_bytes(int(v))
    if key == "step_us":
        return f"{v:.1f} µs" if v < 1000 else f"{v / 1000:.2f} ms"
    return f"{v:.1f} ms" if v < 1000 else f"{v / 1000:.2f} s"


def _ratio(r: float | None) -> str:
    return "—" if r is None else f"{r:.2f}×"


def _cell(run: dict[str, Any]) -> str:
    if not run["ok"]:
        return f"[red]{(run['error'] or 'error').split(':', 1)[0]}[/]"
    fails = run["valid_rejected"] + run["invalid_accepted"]
    mark = f" [red]{fails} failed[/]" if fails else ""
    return f"{_value('cold_ms', run['cold_ms'])}{mark}"


def _schemas(out: Output, report: dict[str, Any], engines: list[str]) -> None:
    t = Table(title="time to first mask, cold, per schema", title_justify="left")
    t.add_column("schema", overflow="fold")
    t.add_column("instances", justify="right")
    for e in engines:
        t.add_column(e, justify="right")
    for row in report["schemas"]:
        inst = row["instances"]
        label = f"{inst['valid']}+{inst['invalid']}" if inst["source"] == "labelled" else f"{inst['valid']} walks"
        t.add_row(Path(row["path"]).name, label, *[_cell(row["engines"][e]) for e in engines])
    out.show(t)


def bench_report(out: Output, report: dict[str, Any]) -> None:
    """The per-schema table (up to 60 schemas), the summary table, and notes on stderr."""
    engines = list(report["summary"])
    peers = engines[1:]
    if len(report["schemas"]) <= _PER_SCHEMA_MAX:
        _schemas(out, report, engines)
    summary, ratios = report["summary"], report["ratios"]
    common = summary["maskc"]["common"]
    tok = report["tokenizer"]
    t = Table(title=f"{tok['name']} · {tok['vocab_size']:,} ids · compact JSON · {len(report['schemas'])} schemas, "
                    f"metrics over the {common} every engine compiled", title_justify="left")
    t.add_column("metric")
    for e in engines:
        t.add_column(f"{e} {report['engines'][e].get('version') or ''}".strip(), justify="right")
    for p in peers:
        t.add_column(f"{p}/maskc", justify="right")
    t.add_row("compiled", *[f"{summary[e]['compiled']}/{summary[e]['schemas']}" for e in engines], *[""] * len(peers))
    t.add_row("instances passed / failed", *[f"{summary[e]['passed']} / {summary[e]['failed']}" for e in engines],
              *[""] * len(peers))
    for key, label, qs in METRICS:
        for q in qs:
            t.add_row(f"{label} {q}", *[_value(key, summary[e][key][q]) for e in engines],
                      *[_ratio(ratios[p][f"{key}_{q}"]) for p in peers])
    t.add_row("compile total (cold)", *[_value("cold_ms", summary[e]["cold_ms"].get("total")) for e in engines],
              *[_ratio(ratios[p]["cold_ms_total"]) for p in peers])
    out.show(t)
    for e in engines:
        kinds = summary[e]["error_kinds"]
        if kinds:
            out.note(f"{e} errors: " + ", ".join(f"{k} ×{n}" for k, n in kinds.items()))
        if summary[e]["invalid_accepted"]:
            out.warn(f"{e} accepted {summary[e]['invalid_accepted']} invalid instance(s)")
    for name, why in report["failed_engines"].items():
        out.warn(f"{name} did not start: {why}")
    method = report["settings"]["memory_method"]
    out.note("compile peak memory: " + ("growth of the process's peak resident set (native allocations too)"
                                        if method == "rss" else "tracemalloc peak (Python and numpy allocations only)"))
    out.note("ratios are peer / maskc: above 1, the peer is slower or larger; — where an engine has no such "
             "number (llguidance has no serialized form)")
