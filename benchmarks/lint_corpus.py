"""Lint every MaskBench schema with ``maskc lint``'s rules: rule frequencies, crashes, timeouts.

usage: python benchmarks/lint_corpus.py [--data DIR] [--sample N] [--seed S] [--timeout SECONDS]
                                        [--workers N] [--out results.json]

Each schema is linted (every rule, compact whitespace, no tokenizer, no profile) in a child
process of its own, under a time limit (default 60 s: the rules share a 30 s budget per schema,
the rest is reading, validation and the cheap rules), two at a time by default, so a hang
or a hard crash costs that schema only. Prints the table of findings per rule and of
schemas with at least one, then the crashes (an exception out of the rules: a bug, since a
schema the rules cannot read is the ``schema-error`` rule's finding) and the timeouts.
The folder is ``--data``, else the MaskBench folder the tests use
(``tests.maskbench.maskbench_location``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import sys
import time
import traceback
from collections import Counter
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from maskc.cli.batch import unwrap_schema  # noqa: E402
from maskc.compiler.lint import LintContext, lint_schema, load_rules  # noqa: E402
from tests.maskbench import maskbench_location  # noqa: E402

Result = dict[str, Any]


def lint_file(path: str) -> Result:
    """Lint one file in this process: ``{"path", "rules": {id: count}, "seconds", "error"}``."""
    start = time.perf_counter()
    result: Result = {"path": path, "rules": {}, "seconds": None, "error": None}
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        found = lint_schema(LintContext(unwrap_schema(doc)))
        result["rules"] = dict(Counter(f.rule for f in found))
    except Exception as e:  # noqa: BLE001  (what this benchmark is looking for)
        result["error"] = f"{type(e).__name__}: {e}"
        result["traceback"] = traceback.format_exc(limit=-6)
    result["seconds"] = round(time.perf_counter() - start, 3)
    return result


def _child(path: str, conn: Connection) -> None:
    conn.send(lint_file(path))
    conn.close()


def lint_all(paths: list[Path], *, timeout: float = 60.0, workers: int = 2,
             progress: bool = False) -> list[Result]:
    """Results in the order of ``paths``: each in a child process, killed after ``timeout``."""
    load_rules()  # imported once, before the children fork
    methods = multiprocessing.get_all_start_methods()
    mp: Any = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    pending = list(enumerate(paths))[::-1]
    running: dict[Any, tuple[int, Connection, float]] = {}
    results: list[Result | None] = [None] * len(paths)
    while pending or running:
        while pending and len(running) < workers:
            i, path = pending.pop()
            receive, send = mp.Pipe(duplex=False)
            proc = mp.Process(target=_child, args=(str(path), send), daemon=True)
            proc.start()
            send.close()
            running[proc] = (i, receive, time.monotonic())
        ready = wait([conn for _, conn, _ in running.values()], timeout=0.2)
        now = time.monotonic()
        for proc, (i, conn, started) in list(running.items()):
            done = conn in ready
            if not done and now - started < timeout:
                continue
            if done:
                try:
                    results[i] = conn.recv()
                except EOFError:  # the child died without a word (a segfault, killed for memory)
                    proc.join()
                    results[i] = {"path": str(paths[i]), "rules": {}, "seconds": None,
                                  "error": f"child exited with code {proc.exitcode}"}
            else:
                proc.kill()
                results[i] = {"path": str(paths[i]), "rules": {}, "seconds": None, "timeout": True, "error": None}
            proc.join()
            conn.close()
            del running[proc]
            if progress:
                finished = sum(r is not None for r in results)
                print(f"\r{finished}/{len(paths)}", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    return [r for r in results if r is not None]


def table(results: list[Result]) -> str:
    findings: Counter[str] = Counter()
    schemas: Counter[str] = Counter()
    for r in results:
        for rule, n in r["rules"].items():
            findings[rule] += n
            schemas[rule] += 1
    checked = sum(r["error"] is None and not r.get("timeout") for r in results)
    lines = [f"{'rule':<24} {'findings':>9} {'schemas':>8} {'% schemas':>10}"]
    for rule in sorted(findings, key=lambda k: (-schemas[k], k)):
        share = 100 * schemas[rule] / checked if checked else 0.0
        lines.append(f"{rule:<24} {findings[rule]:>9} {schemas[rule]:>8} {share:>9.1f}%")
    clean = sum(not r["rules"] and r["error"] is None and not r.get("timeout") for r in results)
    lines.append(f"{len(results)} schemas: {checked} linted, {clean} without findings, "
                 f"{sum(r['error'] is not None for r in results)} crashes, "
                 f"{sum(bool(r.get('timeout')) for r in results)} timeouts")
    timed = sorted((r for r in results if r["seconds"] is not None), key=lambda r: -r["seconds"])
    if timed:
        lines.append("slowest: " + ", ".join(f"{Path(r['path']).name} {r['seconds']:.1f}s" for r in timed[:5]))
    for r in results:
        if r["error"] is not None:
            lines.append(f"CRASH {Path(r['path']).name}: {r['error']}")
        elif r.get("timeout"):
            lines.append(f"TIMEOUT {Path(r['path']).name}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=None, help="MaskBench folder (default: the tests' location)")
    ap.add_argument("--sample", type=int, default=None, metavar="N", help="lint N schemas drawn at random")
    ap.add_argument("--seed", type=int, default=0, metavar="S")
    ap.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS", help="per schema (default 60)")
    ap.add_argument("--workers", type=int, default=2, metavar="N")
    ap.add_argument("--out", type=Path, default=None, help="write every result as JSON here")
    args = ap.parse_args(argv)
    folder = args.data or maskbench_location()
    paths = sorted(folder.glob("*.json"))
    if not paths:
        print(f"no MaskBench schemas in {folder}", file=sys.stderr)
        return 2
    if args.sample is not None and args.sample < len(paths):
        paths = sorted(random.Random(args.seed).sample(paths, args.sample))
    start = time.perf_counter()
    results = lint_all(paths, timeout=args.timeout, workers=args.workers, progress=sys.stderr.isatty())
    print(table(results))
    print(f"wall time {time.perf_counter() - start:.1f}s, {args.workers} workers, timeout {args.timeout:g}s")
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=1))
    return 1 if any(r["error"] is not None or r.get("timeout") for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
