"""JSON-Schema-Test-Suite conformance: every case compiled, every labelled instance judged.

usage: python benchmarks/jsts_conformance.py [--data DIR] [--draft draft2020-12] [--seconds S] [--out FILE]

Each case's schema is compiled (compact whitespace, strict, a byte vocabulary so the masks
are the automaton's own); each instance is serialized in the schema's property order
(``tests.maskbench.serialize``) and judged by a matcher (bytes accepted, then EOS
allowed). A refused schema is a refusal, not a verdict; an invalid instance accepted is a
wrong verdict (a soundness bug); a valid instance rejected is a restriction (for example
undeclared keys, which the default generation semantics does not produce).
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

import maskc  # noqa: E402
from maskc.compiler.vocab import byte_tokenizer  # noqa: E402
from tests.maskbench import serialize  # noqa: E402


def judge(case: dict[str, Any], vocab: maskc.Vocabulary, seconds: float,
          semantics: str = "exact") -> dict[str, Any]:
    out: dict[str, Any] = {"valid_acc": 0, "valid_rej": 0, "invalid_acc": 0, "invalid_rej": 0, "wrong": []}
    opts = maskc.CompileOptions(limits=maskc.Limits(max_seconds=seconds), semantics=semantics)  # type: ignore[arg-type]
    try:
        art = maskc.compile_json_schema(case["schema"], vocab, options=opts)
    except maskc.MaskcError as e:
        out["refused"] = type(e).__name__ + (f":{e.keyword}" if hasattr(e, "keyword") else "")
        return out
    for t in case["tests"]:
        try:
            text = serialize(t["data"], case["schema"])
        except (TypeError, ValueError):
            continue  # an instance JSON cannot carry as given (e.g. NaN); not a verdict
        m = art.matcher()
        ok = bool(m.accept_string(text) and m.can_terminate())
        key = ("valid_" if t["valid"] else "invalid_") + ("acc" if ok else "rej")
        out[key] += 1
        if ok and not t["valid"]:
            out["wrong"].append(f"{case['description']} / {t['description']}")
        if not ok and t["valid"]:
            out.setdefault("rejected", []).append(f"{case['description']} / {t['description']}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--data", type=Path, default=REPO_ROOT.parent / "shared" / "jsts")
    ap.add_argument("--draft", default="draft2020-12")
    ap.add_argument("--seconds", type=float, default=10.0, help="compile limit per schema")
    ap.add_argument("--semantics", choices=("exact", "generation"), default="exact")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    folder = args.data / args.draft
    files = sorted(folder.glob("*.json"))
    if not files:
        print(f"no test files in {folder}", file=sys.stderr)
        return 2
    vocab = byte_tokenizer()
    totals: Counter[str] = Counter()
    refusals: Counter[str] = Counter()
    wrong: list[str] = []
    rejected: list[str] = []
    for f in files:
        for case in json.loads(f.read_text()):
            r = judge(case, vocab, args.seconds, args.semantics)
            totals["cases"] += 1
            if "refused" in r:
                totals["refused"] += 1
                refusals[r["refused"]] += 1
                continue
            totals["compiled"] += 1
            for k in ("valid_acc", "valid_rej", "invalid_acc", "invalid_rej"):
                totals[k] += r[k]
            wrong += [f"{f.stem}: {w}" for w in r["wrong"]]
            rejected += [f"{f.stem}: {w}" for w in r.get("rejected", [])]
    summary = {"draft": args.draft, "semantics": args.semantics, **totals, "refusals": dict(refusals.most_common()),
               "wrong_verdicts": wrong, "valid_rejected": rejected}
    print(json.dumps({k: v for k, v in summary.items() if k not in ("wrong_verdicts", "valid_rejected")}, indent=1))
    print(f"wrong verdicts (invalid accepted): {len(wrong)}")
    for w in wrong:
        print("  ", w)
    print(f"valid instances rejected: {len(rejected)}")
    for w in rejected[:40]:
        print("  ", w)
    if args.out is not None:
        args.out.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
