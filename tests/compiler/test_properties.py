"""Property tests: generated instances are accepted; random walks through a matcher validate."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

import maskc
from maskc.compiler.vocab import Vocabulary
from tests.helpers import ecma_schema, schema_dfa
from tests.maskbench import serialize

SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 999},
                                      "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
                                      "note": {"type": ["string", "null"], "maxLength": 6}},
     "required": ["id"], "additionalProperties": False},
    {"type": "array", "prefixItems": [{"type": "boolean"}, {"type": "number", "minimum": -1, "maximum": 1}],
     "items": False},
    {"anyOf": [{"type": "string", "pattern": "^[a-z]{1,4}$"}, {"type": "integer", "exclusiveMinimum": 10}]},
    {"type": "object", "properties": {"when": {"type": "string", "format": "date"},
                                      "who": {"type": "object", "properties": {"n": {"type": "string", "minLength": 1, "maxLength": 3}},
                                              "required": ["n"], "additionalProperties": False}},
     "required": ["when", "who"], "additionalProperties": False},
]

WHITESPACE = ["compact", "pretty:2", "flexible:1"]


def dump(value: Any, schema: Any, ws: str) -> bytes:
    ordered = json.loads(serialize(value, schema))
    if ws.startswith("pretty"):
        return json.dumps(ordered, indent=int(ws.split(":")[1]), ensure_ascii=False).encode()
    return json.dumps(ordered, separators=(",", ":"), ensure_ascii=False).encode()


@pytest.mark.parametrize("ws", WHITESPACE)
@pytest.mark.parametrize("idx", range(len(SCHEMAS)))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_generated_instances_accepted(idx: int, ws: str, data: st.DataObject) -> None:
    schema = SCHEMAS[idx]
    value = data.draw(from_schema(ecma_schema(schema)))
    dfa = _dfa(idx, ws)
    assert dfa.accepts(dump(value, schema, ws)), value


_DFAS: dict[tuple[int, str], Any] = {}


def _dfa(idx: int, ws: str) -> Any:
    key = (idx, ws)
    if key not in _DFAS:
        _DFAS[key] = schema_dfa(SCHEMAS[idx], ws)
    return _DFAS[key]


@pytest.mark.parametrize("idx", range(len(SCHEMAS)))
def test_random_walks_validate(idx: int, deepseek: Vocabulary) -> None:
    """Sample uniformly among allowed tokens until EOS: every output validates."""
    schema = SCHEMAS[idx]
    art = maskc.compile_json_schema(schema, deepseek)
    rng = np.random.default_rng(idx)
    eos = set(deepseek.eos_ids)
    checker = jsonschema.Draft202012Validator(ecma_schema(schema), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    finished = 0
    for _ in range(25):
        m = art.matcher()
        out = bytearray()
        for _step in range(400):
            allowed = m.allowed_token_ids()
            assert allowed.size, bytes(out)
            # prefer ending once possible, so walks stay short
            if m.can_terminate() and rng.random() < 0.5:
                tok = next(iter(eos))
            else:
                tok = int(rng.choice(allowed))
            assert m.accept_token(tok)
            if tok in eos:
                break
            out += deepseek.token_bytes[tok]
        if not m.is_terminated():
            continue  # uniform sampling can wander (e.g. unbounded fraction digits)
        finished += 1
        value = json.loads(out.decode("utf-8"))
        assert checker.is_valid(value), (bytes(out), list(checker.iter_errors(value))[:1])
    assert finished >= 5
