"""GBNF benchmark: maskc against XGrammar and llguidance on llama.cpp's grammars, one run.

usage: python benchmarks/gbnf_bench.py [--data DIR] [--strings N] [--seed S] [--peers xgrammar,llguidance]
                                       [--out results.json]

For every ``*.gbnf`` in ``../shared/gbnf`` (or ``--data``): strings generated from the
grammar (the test suite's independent generator, seeded), tokenized once with the DeepSeek
tokenizer (128k byte-level BPE); per engine, compile time and the per-token time of
``fill_next_token_bitmask`` + accept over all strings' tokens, twice: a cold pass on a
fresh compile, and a warm pass over the same strings (maskc's pushdown memo then holds the
contexts seen; the peers' caches likewise). Every token must be allowed by the mask and
accepted, and the string must be able to end: a failure is reported, not timed.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import maskc  # noqa: E402
from tests import gbnf_oracle  # noqa: E402

GBNF_DIR = REPO_ROOT.parent / "shared" / "gbnf"


def _bit(row: Any, t: int) -> bool:
    return bool((int(row[t >> 5]) >> (t & 31)) & 1)


def _walk(strings: list[list[int]], new: Callable[[], Any], fill: Callable[[Any], Any], accept: Callable[[Any, int], bool],
          row: Callable[[], Any], can_end: Callable[[Any], bool]) -> tuple[list[float], bool]:
    times: list[float] = []
    ok = True
    for ids in strings:
        m = new()
        for t in ids:
            t0 = time.perf_counter()
            fill(m)
            allowed = _bit(row(), t)
            good = accept(m, t)
            times.append(time.perf_counter() - t0)
            if not (allowed and good):
                ok = False
                break
        ok = ok and can_end(m)
    return times, ok


def _stats(times: list[float]) -> dict[str, float]:
    if not times:
        return {}
    a = np.asarray(times) * 1e6
    return {"tokens": int(a.size), "p50_us": float(np.percentile(a, 50)), "p90_us": float(np.percentile(a, 90)),
            "p99_us": float(np.percentile(a, 99)), "max_us": float(a.max())}


def run_maskc(text: str, strings: list[list[int]], tok: maskc.Vocabulary) -> dict[str, Any]:
    t0 = time.perf_counter()
    art = maskc.compile_gbnf(text, tok)
    out: dict[str, Any] = {"compile_ms": (time.perf_counter() - t0) * 1e3, "bytes": len(art.to_bytes()),
                           "states": art.num_states, "pushdown": art.is_pushdown}
    bm = maskc.allocate_bitmask_np(1, art.vocab_size)
    for label in ("cold", "warm"):
        times, ok = _walk(strings, art.matcher, lambda m: m.fill_next_token_bitmask(bm, 0),
                          lambda m, t: bool(m.accept_token(t)), lambda: bm[0], lambda m: bool(m.can_terminate()))
        out[label] = {**_stats(times), "ok": ok}
    return out


def run_xgrammar(text: str, strings: list[list[int]], hf: Any, vocab_size: int) -> dict[str, Any]:
    import xgrammar as xgr

    info = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=vocab_size)
    compiler = xgr.GrammarCompiler(info, cache_enabled=False)
    t0 = time.perf_counter()
    try:
        cg = compiler.compile_grammar(text)
    except Exception as e:  # noqa: BLE001 - a peer's failure is data
        return {"error": f"{type(e).__name__}: {str(e)[:200]}"}
    out: dict[str, Any] = {"compile_ms": (time.perf_counter() - t0) * 1e3}
    bm = xgr.allocate_token_bitmask(1, info.vocab_size)
    eos = list(info.stop_token_ids)

    def can_end(m: Any) -> bool:
        m.fill_next_token_bitmask(bm)
        return any(_bit(bm[0], e) for e in eos)

    for label in ("cold", "warm"):
        times, ok = _walk(strings, lambda: xgr.GrammarMatcher(cg), lambda m: m.fill_next_token_bitmask(bm),
                          lambda m, t: bool(m.accept_token(t)), lambda: bm[0], can_end)
        out[label] = {**_stats(times), "ok": ok}
    return out


def run_llguidance(text: str, strings: list[list[int]], hf: Any, vocab_size: int) -> dict[str, Any]:
    import llguidance
    import llguidance.hf
    import llguidance.numpy as lln

    ltok = llguidance.hf.from_tokenizer(hf, n_vocab=vocab_size)
    t0 = time.perf_counter()
    try:
        grammar = llguidance.grammar_from("gbnf", text)
        m0 = llguidance.LLMatcher(ltok, grammar, log_level=0)
        if m0.is_error():
            raise ValueError(m0.get_error())
    except Exception as e:  # noqa: BLE001
        return {"error": f"{type(e).__name__}: {str(e)[:200]}"}
    out: dict[str, Any] = {"compile_ms": (time.perf_counter() - t0) * 1e3}
    bm = lln.allocate_token_bitmask(1, ltok.vocab_size)
    eos = hf.eos_token_id

    def can_end(m: Any) -> bool:
        lln.fill_next_token_bitmask(m, bm)
        return _bit(bm[0], eos)

    for label in ("cold", "warm"):
        times, ok = _walk(strings, lambda: llguidance.LLMatcher(ltok, grammar, log_level=0),
                          lambda m: lln.fill_next_token_bitmask(m, bm), lambda m, t: bool(m.consume_token(t)),
                          lambda: bm[0], can_end)
        out[label] = {**_stats(times), "ok": ok}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--data", type=Path, default=GBNF_DIR)
    ap.add_argument("--strings", type=int, default=40, help="generated strings per grammar")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--peers", default="xgrammar,llguidance")
    ap.add_argument("--out", type=Path, default=Path("gbnf_results.json"))
    args = ap.parse_args(argv)
    files = sorted(args.data.glob("*.gbnf"))
    if not files:
        print(f"no .gbnf files in {args.data}", file=sys.stderr)
        return 2
    tok = maskc.load_tokenizer("deepseek")
    peers = [p for p in args.peers.split(",") if p]
    hf = None
    if peers:
        from benchmarks.maskbench_bench import load_hf

        hf = load_hf()
    results: dict[str, Any] = {}
    for f in files:
        text = f.read_text(encoding="utf-8")
        rng = random.Random(args.seed)
        strings = [tok.encode(gbnf_oracle.generate(text, rng, max_depth=8).decode("utf-8"))
                   for _ in range(args.strings)]
        row: dict[str, Any] = {"maskc": run_maskc(text, strings, tok)}
        if "xgrammar" in peers:
            row["xgrammar"] = run_xgrammar(text, strings, hf, tok.vocab_size)
        if "llguidance" in peers:
            row["llguidance"] = run_llguidance(text, strings, hf, tok.vocab_size)
        results[f.name] = row
        for engine, r in row.items():
            if "error" in r:
                print(f"{f.name:16} {engine:11} error: {r['error']}")
                continue
            c, w = r["cold"], r["warm"]
            print(f"{f.name:16} {engine:11} compile {r['compile_ms']:8.1f} ms  cold p50/p99 {c.get('p50_us', 0):6.1f}/"
                  f"{c.get('p99_us', 0):7.1f} us  warm p50/p99 {w.get('p50_us', 0):6.1f}/{w.get('p99_us', 0):7.1f} us"
                  f"  ok={c['ok'] and w['ok']}")
    args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
