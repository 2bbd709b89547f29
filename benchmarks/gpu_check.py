"""GPU check: ``apply_token_bitmask_inplace`` on CUDA against the CPU reference, and timings.

usage: python benchmarks/gpu_check.py [--vocab 128000] [--batches 1,64,512] [--repeat 50]
                                      [--artifact PATH --tokenizer SPEC] [--out results.json]

For each batch size, with random bitmasks over a ``--vocab`` vocabulary (logits 256 columns
wider, as padded models have them):

* correctness: the masked logits from CUDA (the Triton kernel where triton imports, and the
  torch fallback) equal the CPU reference bit for bit (float32 and bfloat16, with and
  without ``indices``);
* timings (median of ``--repeat``, CUDA events): apply on CUDA (kernel and fallback), apply
  on CPU, the host-to-device copy of the bitmask, and ``fill_next_token_bitmasks`` into a
  CPU bitmask then the copy (with ``--artifact``, or a small regex artifact compiled for a
  byte tokenizer widened to ``--vocab``).

Without a GPU it says so and times the CPU only. Prints a table; writes JSON to ``--out``,
else to ``$OUT/gpu_check.json`` when ``$OUT`` is set. Runs in well under 3 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import maskc
from maskc.artifacts import torch as mt


def _random_bitmask(batch: int, vocab: int, seed: int) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    words = (vocab + 31) // 32
    bm = rng.integers(-(2**31), 2**31, size=(batch, words), dtype=np.int64).astype(np.int32)
    tail = vocab - 32 * (words - 1)
    if tail < 32:
        bm[:, -1] &= np.int32((1 << tail) - 1)
    return torch.from_numpy(bm)


def _time_cuda(fn: Callable[[], None], repeat: int) -> float:
    """Median microseconds per call, CUDA events around each call (after warm-up)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(repeat):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e3)
    return statistics.median(out)


def _time_host(fn: Callable[[], None], repeat: int) -> float:
    for _ in range(2):
        fn()
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(out)


def _matchers(args: argparse.Namespace, batch: int) -> tuple[list[Any], int]:
    if args.artifact:
        tok = maskc.load_tokenizer(args.tokenizer)
        art = maskc.load_artifact(args.artifact, tokenizer=tok)
    else:
        from maskc.compiler.vocab import byte_tokenizer

        art = maskc.compile_regex(r'\{"a":[0-9]{1,6}\}', byte_tokenizer().with_overrides(vocab_size=args.vocab))
    return [art.matcher() for _ in range(batch)], art.vocab_size


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", type=int, default=128000)
    ap.add_argument("--batches", default="1,64,512")
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--artifact", type=Path, default=None)
    ap.add_argument("--tokenizer", default="deepseek")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    cuda = torch.cuda.is_available()
    report: dict[str, Any] = {"cuda": cuda, "vocab": args.vocab, "torch": torch.__version__, "rows": []}
    if cuda:
        report["device"] = torch.cuda.get_device_name()
        probe = torch.zeros(1, 64, device="cuda")
        report["triton_kernel"] = mt._triton_ready(probe, torch.zeros(1, 2, dtype=torch.int32, device="cuda"))
    else:
        print("no CUDA device: checking nothing on a GPU, timing the CPU path only")
    width = args.vocab + 256
    failures: list[str] = []
    for batch in [int(b) for b in args.batches.split(",")]:
        row: dict[str, Any] = {"batch": batch}
        bm = _random_bitmask(batch, args.vocab, batch)
        logits = torch.randn(batch, width)
        ref = logits.clone()
        mt._apply_cpu(ref, bm, None, width)
        row["apply_cpu_us"] = _time_host(lambda: mt._apply_cpu(logits.clone(), bm, None, width),
                                         max(3, args.repeat // 10))
        if cuda:
            for dtype in (torch.float32, torch.bfloat16):
                src = logits.to(dtype)
                want = src.clone()
                mt._apply_cpu(want, bm, None, width)
                idx = [batch - 1, 0] if batch > 1 else [0]
                want_idx = src.clone()
                mt._apply_cpu(want_idx, bm, idx, width)
                for name, fn in (("kernel", maskc.apply_token_bitmask_inplace),
                                 ("fallback", lambda lg, b, i=None: mt.apply_on_device(lg, b, i, width))):
                    for indices, expect in ((None, want), (idx, want_idx)):
                        got = src.cuda()
                        fn(got, bm.cuda(), indices)
                        if not torch.equal(got.cpu(), expect):
                            failures.append(f"batch {batch} {dtype} {name} indices={indices is not None}")
            lg_dev, bm_dev = logits.cuda(), bm.cuda()
            row["apply_cuda_kernel_us"] = _time_cuda(lambda: maskc.apply_token_bitmask_inplace(lg_dev, bm_dev),
                                                     args.repeat)
            row["apply_cuda_fallback_us"] = _time_cuda(lambda: mt.apply_on_device(lg_dev, bm_dev, None, width),
                                                       args.repeat)
            pinned = bm.pin_memory()
            row["copy_h2d_us"] = _time_cuda(lambda: bm_dev.copy_(pinned, non_blocking=True), args.repeat)
        matchers, vocab = _matchers(args, batch)
        host = maskc.allocate_token_bitmask(batch, vocab)
        row["fill_us"] = _time_host(lambda: maskc.fill_next_token_bitmasks(matchers, host), args.repeat)
        if cuda:
            host = host.pin_memory()
            dev = host.cuda()

            def fill_and_copy() -> None:
                maskc.fill_next_token_bitmasks(matchers, host)
                dev.copy_(host, non_blocking=True)
                torch.cuda.current_stream().synchronize()

            row["fill_copy_us"] = _time_host(fill_and_copy, args.repeat)
            devfill = torch.empty_like(dev)
            row["fill_into_cuda_us"] = _time_host(
                lambda: (maskc.fill_next_token_bitmasks(matchers, devfill), torch.cuda.synchronize()), args.repeat)
        report["rows"].append(row)
    report["exact"] = not failures
    report["failures"] = failures
    cols = sorted({k for r in report["rows"] for k in r if k != "batch"})
    print("batch  " + "  ".join(f"{c:>22s}" for c in cols))
    for r in report["rows"]:
        print(f"{r['batch']:5d}  " + "  ".join(f"{r.get(c, float('nan')):22.1f}" for c in cols))
    if cuda:
        print("CUDA masked logits equal the CPU reference: " + ("yes" if not failures else "NO: " + "; ".join(failures)))
    out = args.out or (Path(os.environ["OUT"]) / "gpu_check.json" if os.environ.get("OUT") else None)
    if out is not None:
        out.write_text(json.dumps(report, indent=1))
        print(f"wrote {out}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
