"""``multipleOf``: the divisibility automaton of :mod:`maskc.compiler.frontends.numeric`
against decimal arithmetic, and the keyword through the JSON Schema front end (both
semantics, with bounds, refusals, and jsonschema's verdicts on generated instances)."""

from __future__ import annotations

import itertools
import json
from decimal import Decimal, localcontext
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

import maskc
from maskc.compiler.errors import UnsupportedKeyword
from maskc.compiler.frontends.numeric import JSON_NUMBER, multiple_of
from maskc.compiler.ir import Automaton
from maskc.compiler.vocab import byte_tokenizer
from tests.maskbench import serialize

_VOCAB = byte_tokenizer()


def _run(a: Automaton, text: str) -> bool:
    state = 0
    for b in text.encode():
        for lo, hi, t in a.edges[state]:
            if lo <= b <= hi:
                state = t
                break
        else:
            return False
    return state in a.accepting


def _numerals(max_len: int) -> list[str]:
    """Every JSON number in decimal notation of at most ``max_len`` characters."""
    import re

    pattern = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")
    out = []
    for n in range(1, max_len + 1):
        for chars in itertools.product("-.0123456789"[: 12], repeat=n):
            text = "".join(chars)
            if pattern.fullmatch(text):
                out.append(text)
    return out


_TEXTS = _numerals(4) + ["1000000000", "-3000000000", "12.50", "0.0075", "0.00751", "4.5", "-4.5", "35"]


@pytest.mark.parametrize("k", ["2", "3", "7", "1.5", "0.01", "0.5", "2.5", "0.0001", "1e9", "100", "40", "0.25", "1e-8", "12.5"])
@pytest.mark.parametrize("integer", [False, True])
def test_automaton_is_exact_on_short_numerals(k: str, integer: bool) -> None:
    step = Decimal(k)
    a = multiple_of(step, integer=integer)
    for text in _TEXTS:
        want = Decimal(text) % step == 0 and not (integer and "." in text)
        assert _run(a, text) == want, (k, integer, text)
    for text in ("", "-", ".", "1.", "01", "--2", "-.5", "1e3", "+2"):
        assert not _run(a, text), text


def test_structure_keeps_powers_of_ten_small() -> None:
    assert len(multiple_of(Decimal("1e9"), integer=True).edges) < 20
    assert len(multiple_of(Decimal("1e-8"), integer=True).edges) < 8


def _compile(schema: Any, semantics: str = "exact", **kw: Any) -> maskc.Artifact:
    opts = maskc.CompileOptions(semantics=semantics, **kw)  # type: ignore[arg-type]
    return maskc.compile_json_schema(schema, _VOCAB, options=opts)


def _accepts(art: maskc.Artifact, text: bytes) -> bool:
    m = art.matcher()
    return bool(m.accept_string(text) and m.can_terminate())


CASES = [
    ({"type": "integer", "multipleOf": 3, "minimum": -10, "maximum": 20},
     [b"-9", b"0", b"-0", b"3", b"18"], [b"-12", b"21", b"4", b"3.0", b"1e1", b"03"]),
    ({"type": "number", "multipleOf": 0.01},
     [b"1", b"1.5", b"-2.25", b"0.10", b"3.000"], [b"1.001", b"0.005", b"1e-2"]),
    ({"type": "number", "multipleOf": 2.5, "exclusiveMaximum": 10},
     [b"-5", b"7.5", b"2.50", b"0"], [b"10", b"12.5", b"1.25", b"8"]),
    ({"type": "integer", "multipleOf": 1e9}, [b"0", b"3000000000", b"-1000000000"], [b"100000000", b"1500000000"]),
    ({"type": "integer", "multipleOf": 0.5}, [b"7", b"-3"], [b"7.5"]),
]


@pytest.mark.parametrize("semantics", ["exact", "generation"])
@pytest.mark.parametrize(("schema", "good", "bad"), CASES)
def test_schema_instances(schema: Any, good: list[bytes], bad: list[bytes], semantics: str) -> None:
    art = _compile(schema, semantics)
    for text in good:
        assert _accepts(art, text), text
    for text in bad:
        assert not _accepts(art, text), text


def test_without_type_exact_admits_other_types() -> None:
    exact, generation = _compile({"multipleOf": 2}), _compile({"multipleOf": 2}, "generation")
    assert _accepts(exact, b'"foo"') and _accepts(exact, b"10") and not _accepts(exact, b"7")
    assert _accepts(generation, b"10") and not _accepts(generation, b'"foo"')


def test_a_huge_step_is_refused_by_name() -> None:
    schema = {"type": "integer", "multipleOf": 0.123456789}
    with pytest.raises(UnsupportedKeyword) as e:
        _compile(schema)
    assert e.value.keyword == "multipleOf" and e.value.pointer == "/multipleOf"
    art = _compile(schema, lenient=True)
    assert [d["keyword"] for d in art.not_enforced] == ["multipleOf"]


_PROPERTY_SCHEMAS = [
    {"type": "integer", "multipleOf": 7, "minimum": -100, "maximum": 1000},
    {"type": "number", "multipleOf": 0.25, "minimum": -3, "maximum": 12},
    {"type": "object", "properties": {"p": {"type": "number", "multipleOf": 0.05}}, "required": ["p"]},
]


def _decimal_valid(schema: dict[str, Any], text: bytes) -> bool:
    """jsonschema's verdict on ``text``, schema and instance read as decimals (exact
    division, where floats would round)."""
    exact_schema = json.loads(json.dumps(schema), parse_float=Decimal)
    with localcontext() as ctx:
        ctx.prec = 400  # 5e26 % 0.05 needs a 28-digit quotient: past the default precision
        return bool(jsonschema.Draft202012Validator(exact_schema).is_valid(json.loads(text, parse_float=Decimal)))


@pytest.mark.parametrize("schema", _PROPERTY_SCHEMAS)
def test_generated_and_mutated_instances(schema: dict[str, Any]) -> None:
    art = _compile(schema)

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(from_schema(schema), st.integers(-5, 5), st.sampled_from([Decimal("0.01"), Decimal("0.5"), Decimal(1)]))
    def check(value: Any, shift: int, unit: Decimal) -> None:
        text = serialize(value, schema)
        # float products such as 7 * 0.05 = 0.35000000000000003 are not multiples
        if b"e" not in text.lower() and _decimal_valid(schema, text):
            assert _accepts(art, text), text
        mutated: Any
        if isinstance(value, dict):
            mutated = {"p": float(Decimal(str(value["p"])) + shift * unit)}
        else:
            mutated = float(Decimal(str(value)) + shift * unit)
        mtext = serialize(mutated, schema)
        if _accepts(art, mtext):
            assert _decimal_valid(schema, mtext), mtext

    check()


def test_number_without_bounds_keeps_json_number_otherwise() -> None:
    assert "[eE]" in JSON_NUMBER
    art = _compile({"type": "number", "multipleOf": 1})
    assert _accepts(art, b"12.000") and not _accepts(art, b"1.2e1")
