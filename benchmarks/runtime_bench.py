"""Runtime benchmark: load, first mask and per-token fill + accept of saved artifacts.

usage: python benchmarks/runtime_bench.py [--regular N] [--recursive N] [--seed S]
                                          [--artifacts DIR] [--out results.json]

Compiles a few MaskBench schemas (regular ones drawn per split, recursive ones from
``recursive_schemas.txt``) for the DeepSeek tokenizer, saves each artifact under
``--artifacts`` (reused on the next run), then measures on freshly loaded artifacts, so
every first visit of a state is included:

* load: ``load_artifact(path, tokenizer=tok)``, the median of several loads, each the
  first of that file in the process (its content hash and tables verified);
* reload: a second load of the same unchanged file, which reuses that verification where
  the file has been left alone for a while (see ``maskc.artifacts.io.verified_file``);
* warm start: load (the first in the process) + the first ``fill_next_token_bitmask``;
* per token: ``fill_next_token_bitmask`` + ``accept_token`` over the tokens of the
  schema's first valid instance, through a numpy bitmask and a torch bitmask (each on
  its own fresh load), pooled over schemas: p50, p99, max;
* per token, warm (``numpy_warm_us``): the same walk a third time, through the numpy
  bitmask, on a new matcher of the artifact just walked, every mask, row and step
  memoized: the least a step costs this runtime.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import maskc
from maskc.artifacts.bench.runner import frozen_heap
from maskc.artifacts.io import forget_verified
from tests.maskbench import (SchemaResult, compile_case, load_case, schema_files, serialize, split_of,
                             stratified, token_walk)


def _pick(regular: int, recursive: int, seed: int) -> list[Path]:
    pool = schema_files()
    names = (REPO_ROOT / "benchmarks" / "recursive_schemas.txt").read_text().split()
    rec = set(names)
    by_name = {f.name: f for f in pool}
    files = [f for f in stratified([f for f in pool if f.name not in rec], 3, seed)][:regular]
    files += [by_name[n] for n in names if n in by_name][:recursive]
    return files


def _prepare(files: list[Path], tok: maskc.Vocabulary, folder: Path) -> list[tuple[str, Path, list[int], bool]]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for f in files:
        case = load_case(f)
        path = folder / (f.stem + ".safetensors")
        if not path.exists():
            art = compile_case(case, tok, SchemaResult(split=split_of(f), name=f.name, status="compiled"))
            if art is None:
                continue
            art.save(path)
        art = maskc.load_artifact(path, tokenizer=tok)
        for t in case.get("tests") or []:  # the first valid instance the matcher takes token by token
            if isinstance(t, dict) and t.get("valid"):
                text = serialize(t["data"], case["schema"])
                if token_walk(art, tok, text, check_mask=False):
                    out.append((f.name, path, tok.encode(text.decode()), art.is_pushdown))
                    break
    return out


def _walk(path: Path, tok: maskc.Vocabulary, ids: list[int], bitmask: Any,
          warm: list[float] | None = None) -> tuple[list[float], bool]:
    """Fill + accept per token of ``ids`` on a fresh load (first visits included); with
    ``warm``, the third walk on a new matcher of that artifact is timed into it (every mask,
    row and step then memoized, a state's row built on its second visit: what a step costs
    at least)."""
    art = maskc.load_artifact(path, tokenizer=tok)
    times: list[float] = []
    ok = True
    for out in ([times] if warm is None else [times, [], warm]):
        m = art.matcher()
        with frozen_heap():  # (as maskc bench times steps: no collection of the process's heap lands in one)
            for t in ids:
                t0 = time.perf_counter()
                m.fill_next_token_bitmask(bitmask, 0)
                good = m.accept_token(t)
                out.append((time.perf_counter() - t0) * 1e6)
                if not good or not (int(bitmask[0, t >> 5]) >> (t & 31)) & 1:
                    ok = False
                    break
        if not ok:
            break
    return times, ok


def _stats(xs: list[float]) -> dict[str, float]:
    a = np.asarray(xs, dtype=np.float64)
    return {"p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)), "max": float(a.max()),
            "n": float(a.size)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--regular", type=int, default=8)
    ap.add_argument("--recursive", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--artifacts", type=Path, default=Path("runtime_bench_artifacts"))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    tok = maskc.load_tokenizer("deepseek")
    cases = _prepare(_pick(args.regular, args.recursive, args.seed), tok, args.artifacts)
    try:
        import torch
    except ModuleNotFoundError:
        torch = None
    rows: dict[str, dict[str, list[float]]] = {}
    failures = []
    for name, path, ids, pushdown in cases:
        group = rows.setdefault("pushdown" if pushdown else "regular",
                                {"load_ms": [], "reload_ms": [], "warm_start_ms": [], "numpy_us": [],
                                 "numpy_warm_us": [], "torch_us": []})
        loads, reloads = [], []
        for _ in range(5):
            forget_verified()  # (else every load after the first reuses its verification)
            t0 = time.perf_counter()
            maskc.load_artifact(path, tokenizer=tok)
            loads.append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter()
            maskc.load_artifact(path, tokenizer=tok)
            reloads.append((time.perf_counter() - t0) * 1e3)
        group["load_ms"].append(float(np.median(loads)))
        group["reload_ms"].append(float(np.median(reloads)))
        bm = maskc.allocate_bitmask_np(1, tok.vocab_size)
        forget_verified()
        t0 = time.perf_counter()
        art = maskc.load_artifact(path, tokenizer=tok)
        art.matcher().fill_next_token_bitmask(bm, 0)
        group["warm_start_ms"].append((time.perf_counter() - t0) * 1e3)
        times, ok = _walk(path, tok, ids, maskc.allocate_bitmask_np(1, tok.vocab_size), group["numpy_warm_us"])
        group["numpy_us"] += times
        if not ok:
            failures.append(f"{name} (numpy)")
        if torch is not None:
            times, ok = _walk(path, tok, ids, maskc.allocate_token_bitmask(1, tok.vocab_size))
            group["torch_us"] += times
            if not ok:
                failures.append(f"{name} (torch)")
    report: dict[str, Any] = {"schemas": [c[0] for c in cases], "failures": failures}
    for kind, g in rows.items():
        report[kind] = {k: _stats(v) for k, v in g.items() if v}
        print(f"{kind}: {sum(1 for c in cases if c[3] == (kind == 'pushdown'))} schemas")
        for k, v in g.items():
            if v:
                s = _stats(v)
                print(f"  {k:14s} p50 {s['p50']:9.3f}  p99 {s['p99']:9.3f}  max {s['max']:9.3f}  (n={int(s['n'])})")
    if failures:
        print("FAILED:", ", ".join(failures))
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
