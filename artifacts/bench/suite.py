"""A benchmark run: every schema through every engine's child, and the report as data.

:func:`run_bench` sends each :class:`~maskc.artifacts.bench.instances.Case` to maskc's
child first (which also draws the random-walk instances of a bare schema), then to each
peer's with the same token ids, and returns a JSON-able report: per schema and engine
the measurements, per engine a summary, and per peer its ratios to maskc (peer / maskc:
above 1, the peer is slower or larger).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from maskc.artifacts.bench.instances import Case, Instance
from maskc.artifacts.bench.runner import MEMORY_METHOD, EngineResult, EngineWorker, Job, TokenizerSpec

__all__ = ["METRICS", "BenchSettings", "run_bench", "stats", "summarize"]


@dataclass(frozen=True, slots=True)
class BenchSettings:
    """Limits and instance generation of a run.

    Attributes:
        timeout_s: Seconds one engine may spend on one schema (compile, load and steps).
        memory_mb: Address-space cap of each child in MiB (0: none).
        walks: Random-walk instances drawn for a schema that brings none.
        walk_tokens: Longest random walk kept, in tokens.
        seed: Seed of the random walks.
    """

    timeout_s: float = 120.0
    memory_mb: int = 8192
    walks: int = 8
    walk_tokens: int = 256
    seed: int = 0


METRICS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("cold_ms", "cold: compile + first mask", ("p50", "p90", "max")),
    ("warm_ms", "warm: load + first mask", ("p50", "p90", "max")),
    ("step_us", "per token: mask + accept", ("p50", "p90", "p99", "max")),
    ("peak_memory_bytes", "compile peak memory", ("p50", "max")),
    ("size_bytes", "artifact size", ("p50", "max")),
)
"""Summary metrics: key, what it measures, the statistics reported."""


def stats(values: Sequence[float]) -> dict[str, float | int | None]:
    """p50, p90, p99, max and count of ``values`` (None for an empty list)."""
    if not values:
        return {"p50": None, "p90": None, "p99": None, "max": None, "n": 0}
    a = np.asarray(values, dtype=np.float64)
    p50, p90, p99 = (float(x) for x in np.percentile(a, [50, 90, 99]))
    return {"p50": p50, "p90": p90, "p99": p99, "max": float(a.max()), "n": int(a.size)}


def _row(case: Case, instances: Sequence[Instance], source: str, results: dict[str, EngineResult]) -> dict[str, Any]:
    engines = {}
    for name, r in results.items():
        d = r.as_dict()
        d.pop("walks")
        d["step_us"] = stats(r.step_us)
        engines[name] = d
    return {
        "path": case.path,
        "instances": {"source": source, "valid": sum(i.valid for i in instances),
                      "invalid": sum(not i.valid for i in instances), "dropped": case.dropped},
        "engines": engines,
    }


def run_bench(cases: Sequence[Case], engines: Sequence[str], tokenizer: TokenizerSpec, settings: BenchSettings, *,
              started: Callable[[Case], None] = lambda c: None,
              finished: Callable[[Case], None] = lambda c: None) -> dict[str, Any]:
    """Run every case through every engine (``engines[0]`` must be ``maskc``).

    An engine whose child cannot start is reported under ``failed_engines`` and left out.

    Returns:
        ``{"engines", "failed_engines", "settings", "schemas", "summary", "ratios"}``.

    Raises:
        ValueError: ``engines`` does not start with ``maskc``.
        RuntimeError: maskc's own child cannot start.
    """
    if not engines or engines[0] != "maskc":
        raise ValueError(f"engines must start with 'maskc' (the ratios are against it), got {list(engines)}")
    workers: dict[str, EngineWorker] = {}
    failed: dict[str, str] = {}
    try:
        for name in engines:
            try:
                workers[name] = EngineWorker(name, tokenizer, timeout_s=settings.timeout_s,
                                             memory_mb=settings.memory_mb)
            except RuntimeError as e:
                if name == "maskc":
                    raise
                failed[name] = str(e)
        rows, steps = [], []
        for i, case in enumerate(cases):
            started(case)
            walks = 0 if case.instances else settings.walks  # a case without usable instances gets walks
            results = {"maskc": workers["maskc"].run(
                Job(case.schema, case.instances, walks, settings.walk_tokens, settings.seed + i))}
            instances = case.instances or tuple(Instance(w, True) for w in results["maskc"].walks)
            for name, worker in workers.items():
                if name != "maskc":
                    results[name] = worker.run(Job(case.schema, instances))
            rows.append(_row(case, instances, "labelled" if case.instances else "random walks", results))
            steps.append({name: r.step_us for name, r in results.items()})
            finished(case)
    finally:
        for w in workers.values():
            w.close()
    ran = list(workers)
    summary, ratios = summarize(rows, steps, ran)
    return {
        "engines": {name: {"version": w.info.get("version"), "setup_ms": w.info.get("setup_ms"),
                           **{k: v for k, v in w.info.items() if k not in ("version", "setup_ms")}}
                    for name, w in workers.items()},
        "failed_engines": failed,
        "settings": {"timeout_s": settings.timeout_s, "memory_mb": settings.memory_mb, "walks": settings.walks,
                     "walk_tokens": settings.walk_tokens, "seed": settings.seed, "memory_method": MEMORY_METHOD,
                     "whitespace": "compact"},
        "schemas": rows,
        "summary": summary,
        "ratios": ratios,
    }


def summarize(rows: Sequence[dict[str, Any]], steps: Sequence[dict[str, list[float]]],
              engines: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per engine: counts over every schema, metrics over the schemas every engine compiled
    (``common``); per peer: each metric's statistic divided by maskc's."""
    common = [i for i, r in enumerate(rows) if all(r["engines"][e]["ok"] for e in engines)]
    summary: dict[str, Any] = {}
    for e in engines:
        runs = [r["engines"][e] for r in rows]
        errors: dict[str, int] = {}
        for x in runs:
            if not x["ok"] and x["error"]:
                kind = x["error"].split(":", 1)[0]
                errors[kind] = errors.get(kind, 0) + 1
        s: dict[str, Any] = {
            "schemas": len(rows),
            "compiled": sum(x["ok"] for x in runs),
            "errors": sum(not x["ok"] for x in runs),
            "error_kinds": dict(sorted(errors.items(), key=lambda kv: (-kv[1], kv[0]))),
            "common": len(common),
        }
        for k in ("valid_accepted", "valid_rejected", "invalid_rejected", "invalid_accepted"):
            s[k] = sum(x[k] for x in runs)
        s["passed"] = s["valid_accepted"] + s["invalid_rejected"]
        s["failed"] = s["valid_rejected"] + s["invalid_accepted"]
        for key, _, _ in METRICS:
            if key == "step_us":
                values = [t for i in common for t in steps[i][e]]
            else:
                values = [v for i in common if (v := rows[i]["engines"][e][key]) is not None]
            s[key] = stats(values)
        s["cold_ms"]["total"] = float(sum(rows[i]["engines"][e]["cold_ms"] for i in common))
        summary[e] = s
    ratios: dict[str, Any] = {}
    base = summary.get("maskc")
    for e in engines:
        if e == "maskc" or base is None:
            continue
        ratios[e] = {f"{key}_{q}": _ratio(summary[e][key][q], base[key][q])
                     for key, _, qs in METRICS for q in qs}
        ratios[e]["cold_ms_total"] = _ratio(summary[e]["cold_ms"]["total"], base["cold_ms"]["total"])
    return summary, ratios


def _ratio(peer: float | None, maskc: float | None) -> float | None:
    if peer is None or not maskc:
        return None
    return float(peer) / float(maskc)
