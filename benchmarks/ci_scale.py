"""CI scale: ``maskc compile --jobs N`` over a uniform sample of the MaskBench slice for
several tokenizers, timed end to end, with the whole slice's wall time estimated from it.

usage: python benchmarks/ci_scale.py [--sample 60] [--seed 0] [--jobs 2]
                                     [--tokenizer SPEC ...] [--max-seconds 60]
                                     [--semantics generation|exact] [--max-memory MIB]
                                     [--out result.json]

The sample is drawn uniformly (every schema equally likely), so the sample's total wall time
beyond a run's fixed cost (start-up, tokenizers, workers: a run over one trivial input),
times ``slice size / sample size``, estimates the whole slice's. Each schema is written to a
scratch folder as a bare schema file, and one ``maskc compile`` process compiles the folder
for every tokenizer (``--tokenizer`` repeated; default: DeepSeek and the SmolLM2 GGUF of the
test assets, fetched by ``python -m tests.assets``) with ``--no-cache``, ``--jobs N`` and
``--max-seconds S``, exactly as a CI job would. The report gives the wall time, the inputs
compiled and failed (by error), per-input compile p50/p90/max, and the estimate; and a
second estimate from the work (the time each compile took, failed ones included, summed,
shared by the workers and scaled the same way), which a small sample's longest input does
not skew.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.maskbench import load_case, schema_files  # noqa: E402


def _default_tokenizers() -> list[str]:
    specs = ["deepseek"]
    from tests.assets import smollm2_gguf

    gguf = smollm2_gguf()
    if gguf is not None:
        specs.append(str(gguf))
    else:
        print("SmolLM2 GGUF not available (python -m tests.assets fetches it): DeepSeek only", file=sys.stderr)
    return specs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sample", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--tokenizer", action="append", default=None)
    ap.add_argument("--max-seconds", type=float, default=60.0)
    ap.add_argument("--semantics", choices=["generation", "exact"], default="generation")
    ap.add_argument("--max-memory", type=int, default=None, metavar="MIB",
                    help="maskc compile --max-memory: each worker's memory cap (default: none)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    pool = schema_files()
    if not pool:
        print("MaskBench slice not found", file=sys.stderr)
        return 2
    picked = sorted(random.Random(args.seed).sample(pool, min(args.sample, len(pool))), key=lambda p: p.name)
    tokenizers = args.tokenizer or _default_tokenizers()
    with tempfile.TemporaryDirectory() as tmp:
        base = [sys.executable, "-m", "maskc", "compile", "--no-cache", "--json", "--jobs", str(args.jobs),
                "--max-seconds", str(args.max_seconds), "--semantics", args.semantics]
        for t in tokenizers:
            base += ["--tokenizer", t]
        if args.max_memory is not None:
            base += ["--max-memory", str(args.max_memory)]
        # the fixed cost of a run (start-up, tokenizers, workers): one trivial input
        trivial = Path(tmp) / "trivial"
        trivial.mkdir()
        (trivial / "flag.json").write_text('{"type": "boolean"}')
        t0 = time.perf_counter()
        subprocess.run([*base, str(trivial), "-o", str(Path(tmp) / "trivial_out")], capture_output=True, text=True)
        fixed = time.perf_counter() - t0
        src, out = Path(tmp) / "schemas", Path(tmp) / "out"
        src.mkdir()
        for f in picked:
            (src / f.name).write_text(json.dumps(load_case(f)["schema"]))
        t0 = time.perf_counter()
        proc = subprocess.run([*base, str(src), "-o", str(out)], capture_output=True, text=True)
        wall = time.perf_counter() - t0
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        print(proc.stderr[-2000:], file=sys.stderr)
        return 1
    results: list[dict[str, Any]] = doc["results"]
    ok = [r for r in results if r["ok"]]
    def reason(r: dict[str, Any]) -> str:
        err = r.get("error")
        return str(err.get("type")) if isinstance(err, dict) else str(err)

    errors = Counter(reason(r) for r in results if not r["ok"])
    ms = np.array([r["compile_ms"] for r in ok] or [0.0])
    estimate = fixed + max(0.0, wall - fixed) * len(pool) / len(picked)
    # from the work instead: the time the sample's compiles took (failed ones included), shared
    # by the workers, scaled. A small sample's wall waits on its longest input; the slice's
    # thousands of inputs keep the workers busy to the end, which this estimate assumes
    work_s = sum(r.get("elapsed_ms") or r.get("compile_ms") or 0.0 for r in results) / 1e3
    work_estimate = fixed + work_s / max(1, args.jobs) * len(pool) / len(picked)
    report = {
        "sample": len(picked), "slice": len(pool), "tokenizers": tokenizers, "jobs": args.jobs,
        "semantics": args.semantics, "max_seconds": args.max_seconds, "inputs": len(results),
        "compiled": len(ok), "failed": dict(errors), "wall_s": wall, "fixed_s": fixed,
        "compile_ms": {"p50": float(np.percentile(ms, 50)), "p90": float(np.percentile(ms, 90)),
                       "max": float(ms.max())},
        "estimated_slice_wall_s": estimate, "compile_s": work_s, "estimated_slice_work_s": work_estimate,
        "exit_code": proc.returncode,
        "results": [{"path": Path(r["path"]).name, "tokenizer_sha256": r.get("tokenizer_sha256"), "ok": r["ok"],
                     "compile_ms": r.get("compile_ms"), "elapsed_ms": r.get("elapsed_ms"),
                     "error": None if r["ok"] else reason(r)} for r in results],
    }
    print(f"{len(picked)} of {len(pool)} schemas x {len(tokenizers)} tokenizers, --jobs {args.jobs}, "
          f"{args.semantics} semantics: {len(ok)}/{len(results)} compiled in {wall:.1f} s (exit {proc.returncode})")
    if errors:
        print("  failed: " + ", ".join(f"{k} x{v}" for k, v in errors.most_common()))
    print(f"  per input compile p50 {report['compile_ms']['p50']:.0f} ms, p90 {report['compile_ms']['p90']:.0f} ms, "
          f"max {report['compile_ms']['max']:.0f} ms")
    print(f"  whole slice, estimated: {estimate / 60:.1f} min (goal: 10 min): the fixed {fixed:.1f} s of a run "
          f"(one trivial input) plus the rest scaled by {len(pool)}/{len(picked)}; from the work, "
          f"{work_estimate / 60:.1f} min: the fixed cost plus {work_s:.1f} s of compiles shared by "
          f"{args.jobs} workers, scaled alike")
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
