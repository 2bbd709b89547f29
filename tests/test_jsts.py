"""The JSON-Schema-Test-Suite in ``exact`` semantics, held to ``tests/data/jsts_expected.json``.

Every instance of every case maskc compiles gets the suite's verdict; an invalid instance
accepted fails, always. A case maskc refuses must be listed in the expected file with the
reason it is refused for, and a listed case that compiles fails too, so the list stays
honest: rewrite it with ``python benchmarks/jsts_conformance.py --write-expected``. A valid
instance rejected must be listed as a deviation with why (maskc asserts the formats it
knows, where the suite's default reads ``format`` as an annotation), and a listed
deviation that no longer deviates fails the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.jsts import DRAFTS, EXPECTED_FILE, JSTS_HOWTO, jsts_location, keyed, load_expected, run_file, suite_files

pytestmark = pytest.mark.slow

_FILES = [(d, f) for d in DRAFTS for f in suite_files(d)]
_REWRITE = f"update {EXPECTED_FILE.name} with: python benchmarks/jsts_conformance.py --write-expected"


@pytest.mark.skipif(not _FILES, reason=f"JSON-Schema-Test-Suite not found at {jsts_location()}: {JSTS_HOWTO}")
@pytest.mark.parametrize("draft,path", _FILES, ids=[f"{d}/{p.name}" for d, p in _FILES])
def test_suite_file(draft: str, path: Path) -> None:
    expected: dict[str, Any] = load_expected().get(draft, {}).get(path.name, {})
    refused_ok: dict[str, str] = expected.get("refused", {})
    deviations_ok: dict[str, dict[str, str]] = expected.get("deviations", {})
    results = list(run_file(path, draft))
    problems: list[str] = []
    for key, r in zip(keyed([r.description for r in results]), results):
        for inst in r.invalid_accepted:
            problems.append(f"{key!r}: invalid instance accepted: {inst!r}")
        if r.refused is not None:
            if key not in refused_ok:
                problems.append(f"{key!r}: refused ({r.refused}: {r.message[:160]}) but not listed; {_REWRITE}")
            elif refused_ok[key] != r.refused:
                problems.append(f"{key!r}: refused for {r.refused}, listed as {refused_ok[key]}; {_REWRITE}")
            continue
        if key in refused_ok:
            problems.append(f"{key!r}: compiles now but is listed as refused ({refused_ok[key]}); {_REWRITE}")
        allowed = deviations_ok.get(key, {})
        for inst in r.valid_rejected:
            if inst not in allowed:
                problems.append(f"{key!r}: valid instance rejected: {inst!r}")
        for inst in set(allowed) - set(r.valid_rejected):
            problems.append(f"{key!r}: {inst!r} is listed as a deviation but gets the suite's verdict; {_REWRITE}")
    known = set(keyed([r.description for r in results]))
    for key in (set(refused_ok) | set(deviations_ok)) - known:
        problems.append(f"{key!r} is listed but is no case of {path.name}; {_REWRITE}")
    assert not problems, "\n".join(problems)


def test_expected_file_lists_real_suite_files() -> None:
    data = load_expected()
    assert set(data) <= set(DRAFTS)
    for draft, files in data.items():
        for name, entry in files.items():
            assert set(entry) <= {"refused", "deviations"}, (draft, name)
            for reason in entry.get("refused", {}).values():
                assert isinstance(reason, str) and reason, (draft, name)
            for why in (w for d in entry.get("deviations", {}).values() for w in d.values()):
                assert isinstance(why, str) and len(why) > 10, (draft, name)
