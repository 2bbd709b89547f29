"""Cold compile time on a seeded sample of MaskBench schemas, with an artifact fingerprint.

    python benchmarks/compile_speed.py [--n 40] [--seed 7] [--tokenizer deepseek]
                                       [--out times.json] [--profile compile.prof]

Prints per-schema wall milliseconds and a fingerprint of the artifact's tensors (equal
fingerprints: identical tables and masks), then p50/p90/p99/max. Two runs' ``--out``
files compare a change: the fingerprints must agree, the times should drop. The
per-tokenizer tables are built before timing starts (one warm-up compile).
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import maskc  # noqa: E402
from maskc.artifacts.api import make_options  # noqa: E402
from tests.maskbench import MASKBENCH_HOWTO, maskbench_dir, schema_files  # noqa: E402


def fingerprint(art: maskc.Artifact) -> str:
    h = hashlib.sha256()
    for name in sorted(art.tensors):
        a = np.ascontiguousarray(art.tensors[name])
        h.update(f"{name}|{a.dtype}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--tokenizer", default="deepseek")
    ap.add_argument("--max-seconds", type=float, default=20.0)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--profile", type=Path)
    args = ap.parse_args()
    folder = maskbench_dir()
    if folder is None:
        sys.exit(MASKBENCH_HOWTO)
    files = schema_files(folder)
    random.Random(args.seed).shuffle(files)
    files = files[: args.n]
    tok = maskc.load_tokenizer(args.tokenizer)
    opts = make_options(limits=maskc.Limits(max_seconds=args.max_seconds))
    maskc.compile_json_schema({"type": "string"}, tok, options=opts)
    prof = cProfile.Profile() if args.profile else None
    results: dict[str, dict[str, Any]] = {}
    for path in files:
        schema = json.loads(path.read_text(encoding="utf-8"))["schema"]
        t0 = time.perf_counter()
        if prof:
            prof.enable()
        try:
            fp = fingerprint(maskc.compile_json_schema(schema, tok, options=opts))
        except maskc.MaskcError as e:
            fp = "ERR:" + type(e).__name__
        finally:
            if prof:
                prof.disable()
        ms = (time.perf_counter() - t0) * 1e3
        results[path.name] = {"ms": ms, "fp": fp}
        print(f"{ms:9.1f}  {fp}  {path.name}", flush=True)
    times = np.array([r["ms"] for r in results.values()])
    p50, p90, p99 = np.percentile(times, [50, 90, 99])
    print(f"n={len(times)} p50={p50:.0f} p90={p90:.0f} p99={p99:.0f} max={times.max():.0f} ms "
          f"total={times.sum() / 1e3:.1f} s")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1), encoding="utf-8")
    if prof and args.profile:
        prof.dump_stats(str(args.profile))


if __name__ == "__main__":
    main()
