"""MaskBench benchmark: maskc against XGrammar and llguidance on the same schemas and tokenizer.

usage: python benchmarks/maskbench_bench.py [--per-split K | --files LIST] [--limit N] [--seed S]
                                            [--peers xgrammar,llguidance] [--out results.json]
                                            [--no-memory] [--no-correctness] [--xgrammar-strict]
                                            [--max-seconds S]

Reads the MaskBench slice at ``../shared/maskbench`` (relative to the repository root, or
``--data``), draws up to K schemas per split, and measures per schema, with the DeepSeek
tokenizer (128k byte-level BPE) and compact JSON (no insignificant whitespace):

* maskc: compile time (no cache), artifact size and load time (``Artifact.from_bytes``),
  per-token time (``fill_next_token_bitmask`` + ``accept_token``, numpy bitmask) over the
  tokens of the schema's first valid instance, peak memory of a compile, and the harness's
  correctness counts (valid accepted / rejected, invalid accepted / rejected).
* Peers (XGrammar, llguidance; outlines-core with ``--peers outlines``): the adapters of
  ``maskc.artifacts.bench`` (the engines of ``maskc bench``), built from maskc's own
  vocabulary: compile = time to the first mask (compile, matcher, first mask), the
  serialized form's size and load-to-first-mask time where the peer has one, per-token
  time over the same instance, the growth of the peak RSS over the compile, and the same
  four correctness counts.

Every engine is judged on the same instances: each labelled instance of the schema,
serialized as the harness's check serializes it (compact JSON, maskc's key order) and
tokenized with the same vocabulary; one the serializer or the tokenizer cannot take is
left out for all. An instance passes when each of its tokens is allowed by the step's mask
and accepted, and the engine may then end (maskc's check: an invalid instance counts
accepted when the byte-level automaton accepts it). Per-token times come from the first
valid instance alone, walked first after the first mask, for every engine; the other
instances are judged, not timed. A schema is *sound* for an engine when it compiled and no
invalid instance was accepted, and *passed* when besides no valid instance was rejected:
the table gives both counts over all schemas beside "compiled", the lines after the tables
name each engine's failing schemas, and ``--out`` lists them with their counts
(``aggregate.engines.<engine>.failed_schemas``).

The schema's language is JSON Schema's: maskc compiles in ``exact`` semantics (undeclared
keys admitted where the schema admits them), XGrammar runs with ``strict_mode`` off to match
(``--xgrammar-strict`` turns it on: no undeclared keys), llguidance follows the schema.

Each peer runs in its own child process (``maskc.artifacts.bench.EngineWorker``: address
space capped by ``--peer-mem-gb``, killed after ``--peer-timeout``), which times itself; a
crash or timeout counts as that schema's compile error. maskc runs in the main process.

maskc's peak memory is ``tracemalloc``'s peak over a second, traced compile of the same schema
(the timed compile runs untraced): it covers Python objects and numpy arrays, not native
allocations of other libraries. The process's ``ru_maxrss`` is reported as a whole.
"""

from __future__ import annotations

import argparse
import fnmatch
import gc
import json
import os
import platform
import re
import resource
import sys
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from maskc.artifacts.artifact import Artifact
from maskc.artifacts.bench import EngineResult, EngineWorker, Instance, Job, TokenizerSpec
from maskc.artifacts.bench.runner import frozen_heap

import maskc
from tests.maskbench import (
    COMPILE_SECONDS,
    MASKBENCH_DIR,
    SEMANTICS,
    SchemaResult,
    Verdicts,
    check_artifact,
    compile_case,
    compile_options,
    load_case,
    schema_files,
    serialize,
    split_of,
    stratified,
    summarize,
)

PEERS = ("xgrammar", "llguidance", "outlines")
NAMED = 20  # failing instance descriptions kept per engine and schema (as the harness keeps)


# -- instances -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Labelled:
    """One labelled instance of a schema, as every engine sees it."""

    desc: str  # "#<index among the labelled tests> <description>", as the harness names it
    valid: bool
    ids: tuple[int, ...]


def labelled_instances(case: dict[str, Any], tok: maskc.Vocabulary) -> tuple[list[Labelled], int]:
    """The labelled instances of ``case`` as the harness's check serializes them (compact JSON,
    maskc's key order: ``serialize``) and tokenizes them (``tok.encode``), with the number left
    out: those the serializer or the tokenizer cannot take, which the harness cannot check either."""
    tests = [t for t in case.get("tests") or [] if isinstance(t, dict) and "valid" in t]
    out: list[Labelled] = []
    skipped = 0
    for i, test in enumerate(tests):
        try:
            text = serialize(test.get("data"), case["schema"]).decode("utf-8")
            ids = tuple(tok.encode(text))
        except Exception:  # noqa: BLE001 - an instance the serializer or the tokenizer cannot take
            skipped += 1
            continue
        out.append(Labelled(f"#{i} {test.get('description', '')}"[:160], bool(test["valid"]), ids))
    return out, skipped


# -- per-engine results ----------------------------------------------------------------------


@dataclass
class EngineRun(Verdicts):
    """One engine on one schema."""

    compiled: bool = False
    error: str = ""
    compile_ms: float | None = None
    size_bytes: int | None = None
    load_ms: float | None = None
    token_us: list[float] = field(default_factory=list)  # fill + accept, per token
    tokens_accepted: int = 0
    instance_tokens: int = 0
    instance_accepted: bool | None = None  # every token allowed and accepted, then can end
    peak_mem_bytes: int | None = None
    # the labelled instances (all of the schema's, unless --no-correctness): counts, and the
    # descriptions of the failing ones
    judged: bool = False

    @property
    def sound(self) -> bool | None:
        """Compiled and accepted no invalid instance; None when the instances were not judged."""
        return self.compiled and self.invalid_accepted == 0 if self.judged else None

    @property
    def passed(self) -> bool | None:
        """Compiled and judged every instance right; None when the instances were not judged."""
        return bool(self.sound) and self.valid_rejected == 0 if self.judged else None

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        t = d.pop("token_us")
        d["token_us_p50"] = _pct(t, 50)
        d["token_us_p99"] = _pct(t, 99)
        d["token_us_max"] = max(t) if t else None
        d["token_count_timed"] = len(t)
        d["sound"], d["passed"] = self.sound, self.passed
        return d


def _pct(xs: Sequence[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(xs, dtype=np.float64), q)) if len(xs) else None


def _bit(bitmask_row: Any, t: int) -> bool:
    return bool((int(bitmask_row[t >> 5]) >> (t & 31)) & 1)


def _timed_walk(run: Any, ids: list[int], bitmask: Any, fill: Any, accept: Any) -> bool:
    """Fill the mask and accept each token in turn, timing each step; False at the first refusal."""
    run.instance_tokens = len(ids)
    for t in ids:
        t0 = time.perf_counter()
        fill()
        accepted = _bit(bitmask[0], t) and accept(t)
        run.token_us.append((time.perf_counter() - t0) * 1e6)
        if not accepted:
            return False
        run.tokens_accepted += 1
    return True


# -- maskc -----------------------------------------------------------------------------------


def run_maskc(case: dict[str, Any], res: SchemaResult, tok: maskc.Vocabulary, ids: list[int] | None, *,
              memory: bool, correctness: bool, max_seconds: float = COMPILE_SECONDS) -> EngineRun:
    run = EngineRun(judged=correctness)
    art = compile_case(case, tok, res, max_seconds=max_seconds)
    run.compile_ms = res.compile_ms
    if art is None:
        run.error = res.error
        return run
    run.compiled = True
    raw = art.to_bytes()
    run.size_bytes = len(raw)
    t0 = time.perf_counter()
    loaded = Artifact.from_bytes(raw)
    run.load_ms = (time.perf_counter() - t0) * 1e3
    loaded.tokenizer = tok
    if ids is not None:
        m = loaded.matcher()
        bitmask = maskc.allocate_bitmask_np(1, loaded.vocab_size)
        # as the peers' steps (``maskc.artifacts.bench.runner.measure``): from a clean collector,
        # over a frozen heap, not collected first (this process holds every schema's run so far:
        # full passes over it took 70 to 110 ms and landed in a schema's steps)
        with frozen_heap():
            ok = _timed_walk(run, ids, bitmask, lambda: m.fill_next_token_bitmask(bitmask, 0), m.accept_token)
        run.instance_accepted = ok and m.can_terminate()
    if correctness:
        check_artifact(art, case, tok, res, token_level=True)
        run.valid_accepted, run.valid_rejected = res.valid_accepted, res.valid_rejected
        run.invalid_accepted, run.invalid_rejected = res.invalid_accepted, res.invalid_rejected
        run.valid_rejected_tests = list(res.valid_rejected_tests)
        run.invalid_accepted_tests = list(res.invalid_accepted_tests)
    del art, loaded, raw
    if memory:
        gc.collect()
        tracemalloc.start()
        try:
            maskc.compile_json_schema(case["schema"], tok, options=compile_options(max_seconds))
            run.peak_mem_bytes = tracemalloc.get_traced_memory()[1]
        except maskc.MaskcError:
            pass
        finally:
            tracemalloc.stop()
    return run


# -- peers -----------------------------------------------------------------------------------


class PeerProcess:
    """A peer in its own process (``maskc.artifacts.bench``'s engine child): address space
    capped, killed after ``timeout_s`` per schema, restarted after a crash or a timeout.
    ``options`` go to the engine's constructor (``{"strict": False}`` for XGrammar)."""

    def __init__(self, name: str, *, mem_gb: float, timeout_s: float, options: dict[str, Any] | None = None,
                 tokenizer: TokenizerSpec = TokenizerSpec("deepseek")) -> None:
        self.name = name
        self._settings = (tokenizer, timeout_s, int(mem_gb * 1024), options)
        self.worker = self._new_worker()
        self.setup_ms: float | None = self.worker.info.get("setup_ms")
        self.threads: int | None = self.worker.info.get("threads")
        self.broken = False  # the child could not be restarted after a crash or a timeout

    def _new_worker(self) -> EngineWorker:
        tokenizer, timeout_s, memory_mb, options = self._settings
        return EngineWorker(self.name, tokenizer, timeout_s=timeout_s, memory_mb=memory_mb, options=options)

    def _job(self, job: Job) -> EngineResult:
        """The worker's result; a child that cannot be restarted fails this schema, and the next
        schema gets a fresh worker."""
        try:
            if self.broken:
                self.worker = self._new_worker()
                self.broken = False
            return self.worker.run(job)
        except RuntimeError as e:
            self.broken = True
            return EngineResult(error=f"restart failed: {e}")

    def run(self, schema: Any, instances: Sequence[Labelled], timed: int | None, *, judged: bool) -> EngineRun:
        """Judge ``instances`` (with ``judged``; else walk ``instances[timed]`` alone), timing the
        steps of ``instances[timed]`` only: it is walked first, right after the first mask."""
        if not judged:
            instances = [instances[timed]] if timed is not None else []
            timed = 0 if timed is not None else None
        r = self._job(Job(schema, tuple(Instance(x.ids, x.valid) for x in instances), timed=timed))
        n = len(instances[timed].ids) if timed is not None else 0
        accepted = r.verdicts[timed] if r.ok and timed is not None and len(r.verdicts) == len(instances) else None
        run = EngineRun(compiled=r.ok, error=r.error or "", compile_ms=r.cold_ms, size_bytes=r.size_bytes,
                        load_ms=r.warm_ms, token_us=list(r.step_us), instance_tokens=n, judged=judged,
                        # the last timed step of a refused instance is (mostly) the refused token
                        tokens_accepted=n if accepted else max(len(r.step_us) - 1, 0),
                        instance_accepted=accepted, peak_mem_bytes=r.peak_memory_bytes)
        if judged and r.ok:
            run.valid_accepted, run.valid_rejected = r.valid_accepted, r.valid_rejected
            run.invalid_accepted, run.invalid_rejected = r.invalid_accepted, r.invalid_rejected
            wrong = [x for x, ok in zip(instances, r.verdicts) if ok != x.valid]
            run.valid_rejected_tests = [x.desc for x in wrong if x.valid][:NAMED]
            run.invalid_accepted_tests = [x.desc for x in wrong if not x.valid][:NAMED]
        return run

    def close(self) -> None:
        if not self.broken:
            self.worker.close()


# -- report ----------------------------------------------------------------------------------


def _stats(xs: Sequence[float]) -> dict[str, float | None]:
    return {"p50": _pct(xs, 50), "p90": _pct(xs, 90), "p99": _pct(xs, 99),
            "max": float(max(xs)) if xs else None, "n": len(xs)}


def aggregate(rows: list[dict[str, Any]], engines: Sequence[str]) -> dict[str, Any]:
    """Per-engine metrics over the schemas every engine compiled, plus counts over all schemas:
    compiled, sound and passed, the instance outcomes, and the schemas compiled but failed."""
    common = [r for r in rows if all(r["engines"].get(e, {}).get("compiled") for e in engines)]
    out: dict[str, Any] = {"schemas": len(rows), "common_compiled": len(common), "engines": {}}
    for e in engines:
        runs = [r["engines"][e] for r in common]
        tokens = [x for r in common for x in r["_token_us"][e]]
        sizes = [x["size_bytes"] for x in runs if x["size_bytes"] is not None]
        loads = [x["load_ms"] for x in runs if x["load_ms"] is not None]
        mems = [x["peak_mem_bytes"] for x in runs if x.get("peak_mem_bytes") is not None]
        with_inst = [x for x in runs if x["instance_accepted"] is not None]
        out["engines"][e] = {
            "compiled": sum(r["engines"][e]["compiled"] for r in rows),
            "compile_ms": _stats([x["compile_ms"] for x in runs]),
            "compile_ms_total": sum(x["compile_ms"] for x in runs),
            "size_bytes": _stats(sizes),
            "load_ms": _stats(loads),
            "token_us": _stats(tokens),
            "peak_mem_bytes": _stats(mems),
            "first_valid_instance_accepted": f"{sum(bool(x['instance_accepted']) for x in with_inst)}/{len(with_inst)}",
            "errors": _error_counts(r["engines"][e] for r in rows),
            **_verdicts(rows, e),
        }
    return out


COUNTS = ("valid_accepted", "valid_rejected", "invalid_accepted", "invalid_rejected")


def _verdicts(rows: list[dict[str, Any]], e: str) -> dict[str, Any]:
    """Engine ``e``'s judged schemas: how many are sound and passed, the instance outcomes over
    the compiled ones, and each schema compiled but failed with its counts."""
    runs = [(r["name"], r["engines"][e]) for r in rows if r["engines"][e]["judged"]]
    named = ("valid_rejected_tests", "invalid_accepted_tests")
    failed = [{"name": name, **{k: x[k] for k in (*COUNTS, *named)}}
              for name, x in runs if x["compiled"] and not x["passed"]]
    return {
        "judged": len(runs),
        "sound": sum(bool(x["sound"]) for _, x in runs),
        "passed": sum(bool(x["passed"]) for _, x in runs),
        "instances": {k: sum(x[k] for _, x in runs if x["compiled"]) for k in COUNTS},
        "failed_schemas": failed,
    }


def _error_counts(runs: Any) -> dict[str, int]:
    """Errors by reason (message cut at its first digits or quote, so like errors group)."""
    out: dict[str, int] = {}
    for x in runs:
        if x["error"]:
            key = re.split(r"[0-9'\"(\[]", x["error"], maxsplit=1)[0].strip()[:90] or x["error"][:90]
            out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _fmt(v: Any, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "B":
        for u, s in (("MiB", 2**20), ("KiB", 2**10)):
            if v >= s:
                return f"{v / s:.1f} {u}"
        return f"{v:.0f} B"
    if unit == "ms":
        return f"{v:.1f} ms" if v < 1000 else f"{v / 1000:.2f} s"
    if unit == "us":
        return f"{v:.1f} µs"
    return str(v)


def table_rows(agg: dict[str, Any], engines: Sequence[str]) -> list[list[str]]:
    metrics = [("compile time", "compile_ms", "ms", ("p50", "p90", "p99", "max")),
               ("artifact / serialized size", "size_bytes", "B", ("p50", "max")),
               ("load time", "load_ms", "ms", ("p50", "p99")),
               ("per-token mask+accept", "token_us", "us", ("p50", "p99")),
               ("compile peak memory (maskc: tracemalloc, peers: RSS growth)", "peak_mem_bytes", "B",
                ("p50", "max"))]
    pad = [""] * (len(engines) - 1)
    rows = [["compiled (all schemas)", *[str(agg["engines"][e]["compiled"]) + f"/{agg['schemas']}" for e in engines],
             *pad]]
    for label, key in (("sound (compiled, no invalid accepted)", "sound"),
                       ("passed (compiled, every instance right)", "passed")):
        rows.append([label, *[f"{agg['engines'][e][key]}/{agg['schemas']}" if agg["engines"][e]["judged"] else "-"
                              for e in engines], *pad])
    rows.append(["first valid instance accepted", *[agg["engines"][e]["first_valid_instance_accepted"] for e in engines],
                 *pad])
    for label, key, unit, qs in metrics:
        for q in qs:
            vals = [agg["engines"][e][key][q] for e in engines]
            base = vals[0]
            ratios = [f"{v / base:.2f}×" if v is not None and base else "-" for v in vals[1:]]
            rows.append([f"{label} {q}", *[_fmt(v, unit) for v in vals], *ratios])
    rows.append(["compile time total", *[_fmt(agg["engines"][e]["compile_ms_total"], "ms") for e in engines],
                 *[f"{agg['engines'][e]['compile_ms_total'] / agg['engines'][engines[0]]['compile_ms_total']:.2f}×"
                   if agg["engines"][engines[0]]["compile_ms_total"] else "-" for e in engines[1:]]])
    return rows


def print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(title)
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        for r in [header, *rows]:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
        return
    t = Table(title=title)
    for i, h in enumerate(header):
        t.add_column(h, justify="left" if i == 0 else "right")
    for r in rows:
        t.add_row(*r)
    Console(width=160).print(t)


def failure_lines(agg: dict[str, Any], engines: Sequence[str], shown: int = 5) -> list[str]:
    """One line per judged engine: the schemas where it accepted an invalid instance or
    rejected a valid one (the first ``shown`` names of each)."""
    lines = []
    for e in engines:
        a = agg["engines"][e]
        if not a["judged"]:
            continue
        parts = []
        for what, key in (("accepted an invalid instance", "invalid_accepted"),
                          ("rejected a valid instance", "valid_rejected")):
            names = [f["name"].removesuffix(".json") for f in a["failed_schemas"] if f[key]]
            if names:
                more = f", +{len(names) - shown} more" if len(names) > shown else ""
                parts.append(f"{what} in {len(names)}: {', '.join(names[:shown])}{more}")
        lines.append(f"{e}: " + ("; ".join(parts) if parts else
                                 f"every instance right on the {a['compiled']} compiled schema(s)"))
    return lines


def print_correctness(summary: dict[str, dict[str, Any]]) -> None:
    header = ["split", "schemas", "compiled", "crashes", "limit overruns", "valid acc", "valid rej", "invalid acc", "invalid rej", "compile errors"]
    rows = []
    for split, s in summary.items():
        errs = ", ".join(f"{k}×{v}" for k, v in sorted(s["compile_errors"].items(), key=lambda kv: -kv[1]))
        rows.append([split, str(s["schemas"]), str(s["compiled"]), str(s["crashes"]),
                     str(s["limit_overruns"]), str(s["valid_accepted"]), str(s["valid_rejected"]),
                     str(s["invalid_accepted"]), str(s["invalid_rejected"]), errs])
    print_table("maskc correctness per split (compact JSON, DeepSeek tokenizer)", header, rows)


# -- main ------------------------------------------------------------------------------------


def _marks(run: EngineRun) -> str:
    """`` !ia=N`` / `` !vr=N`` after a compiled engine that accepted invalid or rejected valid instances."""
    return (f" !ia={run.invalid_accepted}" if run.invalid_accepted else "") + \
        (f" !vr={run.valid_rejected}" if run.valid_rejected else "")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=MASKBENCH_DIR, help="the MaskBench folder")
    ap.add_argument("--per-split", type=int, default=10, help="schemas drawn per split")
    ap.add_argument("--limit", type=int, default=None, help="at most this many schemas in all")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="*", help="file-name glob applied before drawing (e.g. 'Kubernetes---*')")
    ap.add_argument("--files", type=Path, default=None,
                    help="a text file of MaskBench file names (one per line): run exactly these, in order")
    ap.add_argument("--peers", default="xgrammar,llguidance", help="comma-separated: xgrammar,llguidance,outlines ('' for none)")
    ap.add_argument("--out", type=Path, default=Path("maskbench_results.json"))
    ap.add_argument("--max-seconds", type=float, default=60.0,
                    help="compile time limit per schema, the same for every engine: maskc's Limits.max_seconds, "
                         "and the time after which a peer's child is killed")
    ap.add_argument("--peer-timeout", type=float, default=None,
                    help="seconds per schema before a peer is killed (default: --max-seconds)")
    ap.add_argument("--peer-mem-gb", type=float, default=8.0, help="address-space cap of each peer process (0: none)")
    ap.add_argument("--no-memory", action="store_true", help="skip the traced compile for peak memory")
    ap.add_argument("--no-correctness", action="store_true",
                    help="skip the instance checks (every engine then walks the first valid instance only)")
    ap.add_argument("--xgrammar-strict", action="store_true",
                    help="XGrammar with strict_mode (no undeclared keys); default: follow maskc's semantics "
                         f"({SEMANTICS}: strict_mode off)")
    args = ap.parse_args(argv)

    if not args.data.is_dir():
        print(f"MaskBench data not found at {args.data}; pass --data", file=sys.stderr)
        return 2
    pool = [f for f in schema_files(args.data) if fnmatch.fnmatch(f.name, args.only)]
    if args.files is not None:
        wanted = [n.strip() for n in args.files.read_text().splitlines() if n.strip()]
        by_name = {f.name: f for f in pool}
        files = [by_name[n] for n in wanted if n in by_name]
    else:
        files = stratified(pool, args.per_split, args.seed)
    if args.limit is not None:
        files = files[: args.limit]
    peers_wanted = [p.strip() for p in args.peers.split(",") if p.strip()]
    unknown = set(peers_wanted) - set(PEERS)
    if unknown:
        print(f"unknown peers: {sorted(unknown)}; choose from {PEERS}", file=sys.stderr)
        return 2

    wall0 = time.perf_counter()
    t0 = time.perf_counter()
    tok = maskc.load_tokenizer("deepseek")
    setup: dict[str, float | None] = {"maskc_tokenizer_ms": (time.perf_counter() - t0) * 1e3}
    maskc.compile_json_schema({"type": "boolean"}, tok)  # warm the per-tokenizer tables
    xgrammar_strict = args.xgrammar_strict or SEMANTICS != "exact"
    peer_options: dict[str, dict[str, Any]] = {"xgrammar": {"strict": xgrammar_strict}}
    peer_timeout = args.peer_timeout if args.peer_timeout is not None else args.max_seconds
    peers = [PeerProcess(name, mem_gb=args.peer_mem_gb, timeout_s=peer_timeout,
                         options=peer_options.get(name)) for name in peers_wanted]
    for p in peers:
        setup[f"{p.name}_setup_ms"] = p.setup_ms
    engines = ["maskc", *[p.name for p in peers]]
    versions = {"maskc": maskc.__version__}
    for p in peers:
        versions[p.name] = p.worker.info.get("version")

    results: list[SchemaResult] = []
    rows: list[dict[str, Any]] = []
    for i, path in enumerate(files):
        case = load_case(path)
        res = SchemaResult(split=split_of(path), name=path.name, status="compiled")
        instances, skipped = labelled_instances(case, tok)
        timed = next((k for k, x in enumerate(instances) if x.valid), None)  # the first valid instance
        ids = list(instances[timed].ids) if timed is not None else None
        runs = {"maskc": run_maskc(case, res, tok, ids, memory=not args.no_memory, max_seconds=args.max_seconds,
                                   correctness=not args.no_correctness)}
        for p in peers:
            runs[p.name] = p.run(case["schema"], instances, timed, judged=not args.no_correctness)
        results.append(res)
        rows.append({"name": path.name, "split": res.split,
                     "instances": {"valid": sum(x.valid for x in instances),
                                   "invalid": sum(not x.valid for x in instances), "skipped": skipped},
                     "engines": {e: r.as_dict() for e, r in runs.items()},
                     "_token_us": {e: r.token_us for e, r in runs.items()}})
        line = "  ".join(f"{e}=" + (f"{r.compile_ms:.0f}ms" + _marks(r) if r.compiled else "ERR")
                         for e, r in runs.items())
        print(f"[{i + 1}/{len(files)}] {path.name[:60]:60s} {line}"
              + (f"  maskc:{res.error}" if res.error else ""), flush=True)

    for p in peers:
        p.close()
    agg = aggregate(rows, engines)
    summary = summarize(results)
    wall = time.perf_counter() - wall0
    header = ["metric", *engines, *[f"{e}/maskc" for e in engines[1:]]]
    print()
    print_table(f"MaskBench slice: {len(files)} schemas, {agg['common_compiled']} compiled by every engine "
                f"(metrics over those)", header, table_rows(agg, engines))
    print()
    print_correctness(summary)
    unsound = [r for r in results if r.invalid_accepted]
    misaligned = [r for r in results if r.token_mismatch_tests]
    for r in unsound:
        print(f"SOUNDNESS: {r.name}: {r.invalid_accepted} invalid instance(s) accepted: {r.invalid_accepted_tests}")
    for r in results:
        if r.status == "crash":
            print(f"CRASH: {r.name}: {r.error}: {r.message[:200]}")
        if r.limit_overrun:
            print(f"LIMIT OVERRUN: {r.name}: {r.compile_ms / 1e3:.1f} s against max_seconds={args.max_seconds:g} "
                  f"({r.error or 'compiled'})")
    for r in misaligned:
        print(f"ALIGNMENT: {r.name}: valid instance(s) the DFA accepts but the tokens do not: {r.token_mismatch_tests}")
    for e in engines[1:]:
        errs = agg["engines"][e]["errors"]
        if errs:
            print(f"{e} errors: " + "; ".join(f"{k} ×{v}" for k, v in list(errs.items())[:8]))
    print()
    for line in failure_lines(agg, engines):
        print(line)
    maxrss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\ntotal runtime {wall:.1f} s; process ru_maxrss {maxrss_mib:.0f} MiB; setup {setup}")

    for row in rows:
        del row["_token_us"]
    out = {
        "meta": {"schemas": len(files), "per_split": args.per_split, "seed": args.seed, "limit": args.limit,
                 "tokenizer": "deepseek", "max_seconds": args.max_seconds, "peer_timeout_s": peer_timeout,
                 "vocab_size": len(tok.token_bytes), "whitespace": "compact",
                 "versions": versions, "cpus": os.cpu_count(), "python": platform.python_version(),
                 "platform": platform.platform(), "runtime_s": wall, "ru_maxrss_mib": maxrss_mib,
                 "setup_ms": setup, "xgrammar_threads": next((p.threads for p in peers if p.name == "xgrammar"), None),
                 "semantics": SEMANTICS, "peer_settings": {p.name: p.worker.info for p in peers},
                 "timed_instance": "the first valid instance (every engine); the others are judged, not timed",
                 "memory": "tracemalloc peak over a second, traced maskc compile (Python objects and numpy arrays)"},
        "aggregate": agg,
        "correctness": summary,
        "schemas": rows,
        "maskc_results": [r.as_dict() for r in results],
    }
    args.out.write_text(json.dumps(out, indent=1, default=str))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
