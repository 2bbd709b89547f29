"""JSON-Schema-Test-Suite conformance: every case compiled, every labelled instance judged.

usage: python benchmarks/jsts_conformance.py [--draft draft2020-12|draft7|all] [--semantics exact|generation]
       [--seconds S] [--out FILE] [--write-expected] [--table]

Each case's schema is compiled (compact whitespace, a byte vocabulary so the masks are the
automaton's own; ``exact`` semantics unless told); each instance is serialized in the
grammar's property order (``tests.maskbench.serialize``) and judged by a matcher (bytes
accepted, then EOS allowed). A refused schema is a refusal, not a verdict; an invalid
instance accepted is a wrong verdict (a soundness bug); a valid instance rejected is a
deviation. ``--write-expected`` rewrites ``tests/data/jsts_expected.json`` (the refusals
and deviations ``tests/test_jsts.py`` holds the suite to; it refuses to write while any
wrong verdict remains); ``--table`` prints compiled/total per file as a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.jsts import DRAFTS, EXPECTED_FILE, jsts_location, keyed, run_file, suite_files  # noqa: E402

FORMAT_DEVIATION = ("maskc asserts the formats it knows (the format-assertion vocabulary); the suite's "
                    "default reads format as an annotation")


def deviation_reason(file: str, case: str, instance: str) -> str:
    """Why a valid instance is rejected, for the expected file (a person reviews the diff)."""
    if file == "format.json" or "format" in case:
        return FORMAT_DEVIATION
    if file == "vocabulary.json":
        return ("maskc reads no custom metaschema's $vocabulary: the validation keywords are enforced even "
                "where the metaschema leaves the validation vocabulary out")
    return "restriction: maskc does not generate this valid instance (review before listing)"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--data", type=Path, default=None, help="the suite's tests folder (default: ../shared/jsts)")
    ap.add_argument("--draft", default="draft2020-12", help="draft2020-12, draft7 or all")
    ap.add_argument("--seconds", type=float, default=10.0, help="compile limit per schema")
    ap.add_argument("--semantics", choices=("exact", "generation"), default="exact")
    ap.add_argument("--out", type=Path, default=None, help="write the summary as JSON")
    ap.add_argument("--write-expected", action="store_true", help=f"rewrite {EXPECTED_FILE.name}")
    ap.add_argument("--table", action="store_true", help="print compiled/total per file (Markdown)")
    args = ap.parse_args(argv)
    drafts = DRAFTS if args.draft == "all" else (args.draft,)
    expected: dict[str, Any] = {}
    summaries = []
    per_file: dict[str, dict[str, str]] = {}
    status = 0
    for draft in drafts:
        files = suite_files(draft, args.data or jsts_location())
        if not files:
            print(f"no test files for {draft} in {args.data or jsts_location()}", file=sys.stderr)
            return 2
        totals: Counter[str] = Counter()
        refusals: Counter[str] = Counter()
        wrong: list[str] = []
        rejected: list[str] = []
        compile_ms: list[float] = []
        for f in files:
            results = list(run_file(f, draft, semantics=args.semantics, seconds=args.seconds))
            entry: dict[str, Any] = {}
            n_ok = 0
            for key, r in zip(keyed([r.description for r in results]), results):
                totals["cases"] += 1
                if r.refused is not None:
                    totals["refused"] += 1
                    refusals[r.refused] += 1
                    entry.setdefault("refused", {})[key] = r.refused
                    continue
                n_ok += 1
                totals["compiled"] += 1
                totals["instances"] += r.instances
                compile_ms.append(r.compile_ms)
                wrong += [f"{f.name}: {key} / {i}" for i in r.invalid_accepted]
                rejected += [f"{f.name}: {key} / {i}" for i in r.valid_rejected]
                for i in r.valid_rejected:
                    entry.setdefault("deviations", {}).setdefault(key, {})[i] = deviation_reason(f.name, key, i)
            if entry:
                expected.setdefault(draft, {})[f.name] = entry
            per_file.setdefault(f.name, {})[draft] = f"{n_ok}/{len(results)}"
        compile_ms.sort()
        summary = {"draft": draft, "semantics": args.semantics, **totals, "refusals": dict(refusals.most_common()),
                   "compile_ms_p50": round(compile_ms[len(compile_ms) // 2], 1) if compile_ms else None,
                   "compile_ms_max": round(compile_ms[-1], 1) if compile_ms else None,
                   "wrong_verdicts": wrong, "valid_rejected": rejected}
        summaries.append(summary)
        print(json.dumps({k: v for k, v in summary.items() if k not in ("wrong_verdicts", "valid_rejected")}, indent=1))
        print(f"wrong verdicts (invalid accepted): {len(wrong)}")
        for w in wrong:
            print("  ", w)
        print(f"valid instances rejected: {len(rejected)}")
        for w in rejected[:60]:
            print("  ", w)
        if wrong:
            status = 1
    if args.table:
        print("\n| file | " + " | ".join(drafts) + " |\n| --- | " + " | ".join("---:" for _ in drafts) + " |")
        for name in sorted(per_file):
            print(f"| {name.removesuffix('.json')} | " + " | ".join(per_file[name].get(d, "—") for d in drafts) + " |")
    if args.out is not None:
        args.out.write_text(json.dumps(summaries if len(summaries) > 1 else summaries[0], indent=1))
    if args.write_expected:
        if status:
            print("not writing the expected file: wrong verdicts are bugs to fix, never expected", file=sys.stderr)
        elif args.semantics != "exact" or args.draft != "all":
            print("--write-expected needs --draft all and exact semantics", file=sys.stderr)
            status = 2
        else:
            EXPECTED_FILE.write_text(json.dumps(expected, indent=1, ensure_ascii=False, sort_keys=True) + "\n",
                                     encoding="utf-8")
            print(f"wrote {EXPECTED_FILE.relative_to(REPO_ROOT)}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
