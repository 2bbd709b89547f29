"""Every ``format`` maskc asserts, judged on the JSON-Schema-Test-Suite's optional/format
instances (draft 2020-12 and draft 7): no invalid instance is accepted, and the valid
instances accepted are counted (a drop is a regression, a rise updates the table).

The suite is read from ``../shared/jsts`` next to the repository (``$MASKC_SHARED_DIR``
overrides the shared folder); the tests skip when it is absent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from maskc.compiler.dfa import Dfa
from maskc.compiler.frontends.formats import FORMAT_REGEXES
from tests.helpers import schema_dfa
from tests.maskbench import REPO_ROOT

_SHARED = Path(os.environ.get("MASKC_SHARED_DIR", "").strip() or REPO_ROOT.parent / "shared")

# format -> valid string instances accepted (draft 2020-12); the rest of the valid ones are restrictions
# named in the formats module (A-labels, U-labels, quoted local parts, leap seconds, ...).
VALID_ACCEPTED = {
    "date": 17, "date-time": 6, "duration": 21, "email": 5, "hostname": 8, "idn-email": 7,
    "idn-hostname": 7, "ipv4": 5, "ipv6": 11, "iri": 12, "iri-reference": 5, "json-pointer": 22,
    "regex": 1, "relative-json-pointer": 7, "time": 7, "uri": 15, "uri-reference": 11,
    "uri-template": 18, "uuid": 9,
}
_DRAFT7_LESS = {"idn-hostname": 1}  # draft 7's file lacks one valid single-label case


def _accepts(dfa: Dfa, data: bytes) -> bool:
    state = 0
    trans, cls = dfa.trans, dfa.byte_class
    for b in data:
        state = int(trans[state, cls[b]])
        if state < 0:
            return False
    return bool(dfa.accepting[state])


def _cases(draft: str, name: str) -> list[dict[str, Any]]:
    path = _SHARED / "jsts" / draft / "optional" / "format" / f"{name}.json"
    if not path.exists():
        pytest.skip(f"no {path} (the JSON-Schema-Test-Suite is read from the shared folder)")
    cases: list[dict[str, Any]] = json.loads(path.read_text())
    return cases


@pytest.mark.parametrize("draft", ["draft2020-12", "draft7"])
@pytest.mark.parametrize("name", sorted(VALID_ACCEPTED))
def test_format_against_the_suite(draft: str, name: str) -> None:
    assert name in FORMAT_REGEXES
    if draft == "draft7" and name == "duration":
        pytest.skip("draft 7 defines no duration format")
    dfa = schema_dfa({"type": "string", "format": name})
    accepted, wrong = 0, []
    for case in _cases(draft, name):
        assert case["schema"].get("format") == name
        for t in case["tests"]:
            if not isinstance(t["data"], str):
                continue
            ok = _accepts(dfa, json.dumps(t["data"], ensure_ascii=False).encode())
            if ok and not t["valid"]:
                wrong.append(t["data"])
            accepted += ok and t["valid"]
    assert wrong == []
    want = VALID_ACCEPTED[name] - (_DRAFT7_LESS.get(name, 0) if draft == "draft7" else 0)
    assert accepted == want


def _annotations(schema: Any) -> list[dict[str, str]]:
    from maskc.compiler.frontends.json_schema import schema_to_ir
    from maskc.compiler.options import CompileOptions

    return schema_to_ir(schema, CompileOptions(semantics="exact"))[1]


def test_unknown_and_annotation_formats_compile_as_plain_strings() -> None:
    for fmt in ("no-such-format", "password", "binary", "int32"):
        schema = {"type": "string", "format": fmt}
        dfa = schema_dfa(schema)  # strict mode: no refusal
        for text in ('""', '"x y"', '"\\u0000"', '"é"'):
            assert _accepts(dfa, text.encode()), (fmt, text)
        [note] = _annotations(schema)
        assert note["keyword"] == "format" and note["kind"] == "annotation" and note["pointer"] == "/format"
        assert ("unknown format" in note["detail"]) == (fmt == "no-such-format")


def test_number_formats() -> None:
    dfa = schema_dfa({"type": "integer", "format": "int32"})
    assert _accepts(dfa, b"2147483647") and not _accepts(dfa, b"2147483648")
    assert _annotations({"type": "integer", "format": "int32"}) == []
    [note] = _annotations({"type": "number", "format": "double"})
    assert note["kind"] == "annotation"
    assert _accepts(schema_dfa({"type": "number", "format": "double"}), b"1e400")
