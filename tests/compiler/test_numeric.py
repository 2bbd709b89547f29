"""Tests for the numeric range regexes of :mod:`maskc.compiler.frontends.numeric`."""

from __future__ import annotations

import itertools
import json
import re
from decimal import Decimal

import interegular
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from maskc.compiler.frontends.numeric import (
    JSON_INTEGER,
    JSON_NUMBER,
    integer_regex,
    number_regex,
)

_JSON_INTEGER_RE = re.compile(JSON_INTEGER)
_DECIMAL_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")

_SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def _int_in_range(value: int, low: int | None, high: int | None) -> bool:
    return (low is None or value >= low) and (high is None or value <= high)


def _num_in_range(
    value: Decimal,
    low: Decimal | None,
    high: Decimal | None,
    low_strict: bool,
    high_strict: bool,
) -> bool:
    above = low is None or (value > low if low_strict else value >= low)
    below = high is None or (value < high if high_strict else value <= high)
    return above and below


def _plain(value: Decimal, extra_zeros: int = 0) -> str:
    """JSON decimal text of ``value``, optionally padded with fraction zeros."""
    text = format(value, "f")
    if extra_zeros:
        text += ("" if "." in text else ".") + "0" * extra_zeros
    return text


def _fsm_accepts(regex: str, texts: list[str]) -> list[bool]:
    fsm = interegular.parse_pattern(regex).to_fsm()
    return [fsm.accepts(text) for text in texts]


# ------------------------------------------------------------------- integers


@pytest.mark.parametrize(
    ("low", "high", "accepted", "rejected"),
    [
        (
            None,
            None,
            ["0", "-0", "7", "-12", "123456789012345678901"],
            ["01", "+1", "1.0", "1e3", "-"],
        ),
        (0, None, ["0", "-0", "1", "99999999999999999999"], ["-1", "00", "-01"]),
        (1, None, ["1", "10"], ["0", "-0", "-1"]),
        (None, -1, ["-1", "-1000"], ["0", "-0", "1"]),
        (-5, 5, ["-5", "-0", "0", "5"], ["-6", "6", "10", "-10"]),
        (10, 99, ["10", "55", "99"], ["9", "100", "010"]),
        (-100, -10, ["-100", "-10", "-55"], ["-9", "-101", "10"]),
        (7, 7, ["7"], ["6", "8", "70"]),
        (0, 0, ["0", "-0"], ["1", "-1", "00"]),
        (
            -(2**63),
            2**63 - 1,
            ["-9223372036854775808", "9223372036854775807", "0"],
            ["-9223372036854775809", "9223372036854775808", "10000000000000000000"],
        ),
    ],
)
def test_integer_examples(
    low: int | None, high: int | None, accepted: list[str], rejected: list[str]
) -> None:
    regex = integer_regex(low, high)
    for text in accepted:
        assert re.fullmatch(regex, text), (regex, text)
    for text in rejected:
        assert not re.fullmatch(regex, text), (regex, text)
    assert _fsm_accepts(regex, accepted + rejected) == [True] * len(accepted) + [False] * len(
        rejected
    )


def test_integer_exhaustive_small() -> None:
    bounds = [None, -101, -100, -99, -10, -9, -1, 0, 1, 9, 10, 11, 99, 100, 101, 999]
    texts = [str(n) for n in range(-1100, 1100)] + ["-0"]
    for low, high in itertools.product(bounds, bounds):
        if low is not None and high is not None and low > high:
            continue
        compiled = re.compile(integer_regex(low, high))
        for text in texts:
            expected = _int_in_range(int(text), low, high)
            assert bool(compiled.fullmatch(text)) == expected, (low, high, text)


def test_integer_empty_range_raises() -> None:
    with pytest.raises(ValueError):
        integer_regex(5, 4)
    with pytest.raises(ValueError):
        integer_regex(-(2**63), -(2**64))


_int_value = st.one_of(st.integers(-1000, 1000), st.integers(-(2**65), 2**65))
_int_bound = st.one_of(st.none(), _int_value)


@_SETTINGS
@given(low=_int_bound, high=_int_bound, data=st.data())
def test_integer_matches_iff_in_range(
    low: int | None, high: int | None, data: st.DataObject
) -> None:
    if low is not None and high is not None and low > high:
        low, high = high, low
    compiled = re.compile(integer_regex(low, high))
    anchors = [b for b in (low, high, 0) if b is not None]
    near = st.sampled_from(anchors).flatmap(lambda a: st.integers(-12, 12).map(lambda d: a + d))
    values = data.draw(
        st.lists(st.one_of(near, st.integers(), _int_value), min_size=1, max_size=25)
    )
    for value in values:
        text = str(value)
        assert bool(compiled.fullmatch(text)) == _int_in_range(value, low, high), (
            low,
            high,
            text,
        )
    zero_ok = _int_in_range(0, low, high)
    assert bool(compiled.fullmatch("-0")) == zero_ok
    for text in ("1.0", "-0.0", "01", "+1", "1e2", "", "-"):
        assert not compiled.fullmatch(text)


@_SETTINGS
@given(low=_int_bound, high=_int_bound, data=st.data())
def test_integer_samples_are_in_range(
    low: int | None, high: int | None, data: st.DataObject
) -> None:
    if low is not None and high is not None and low > high:
        low, high = high, low
    regex = integer_regex(low, high)
    text = data.draw(st.from_regex(regex, fullmatch=True))
    assert _JSON_INTEGER_RE.fullmatch(text), text
    value = json.loads(text)
    assert isinstance(value, int)
    assert _int_in_range(value, low, high), (low, high, text)


@pytest.mark.parametrize(
    ("low", "high"),
    [
        (-(2**63), 2**63 - 1),
        (0, 2**64 - 1),
        (-(2**31), 2**31 - 1),
        (None, 2**63 - 1),
        (-(2**63), None),
        (123456789, 987654321012),
    ],
)
def test_integer_interegular_compiles_fast(low: int | None, high: int | None) -> None:
    # (speed lives in the benchmarks; this checks the regex interegular builds)
    regex = integer_regex(low, high)
    fsm = interegular.parse_pattern(regex).to_fsm()
    probes = [str(b + d) for b in (low, high, 0) if b is not None for d in (-1, 0, 1)]
    probes += ["-0", "00", "1.0"]
    for text in probes:
        assert fsm.accepts(text) == bool(re.fullmatch(regex, text)), text


def test_integer_size_is_linear_in_digits() -> None:
    sizes = {}
    for digits in (10, 50, 200):
        high = int("7" * digits)
        low = -int("3" * digits)
        sizes[digits] = len(integer_regex(low, high))
        assert sizes[digits] < 60 * digits
    assert sizes[200] < 5 * sizes[50]


# -------------------------------------------------------------------- numbers


def _number_case(
    low: str | None, high: str | None, low_strict: bool = False, high_strict: bool = False
) -> str:
    regex: str = number_regex(
        None if low is None else Decimal(low),
        None if high is None else Decimal(high),
        exclusive_minimum=low_strict,
        exclusive_maximum=high_strict,
    )
    return regex


@pytest.mark.parametrize(
    ("low", "high", "low_strict", "high_strict", "accepted", "rejected"),
    [
        (
            "0.5",
            None,
            False,
            False,
            ["0.5", "0.50", "0.51", "1", "1.0", "12.25"],
            ["0.49999", "0.4", "0", "-0.5", "0.5e1"],
        ),
        ("0", None, True, False, ["0.0001", "1", "0.1"], ["0", "0.0", "-0", "-0.5", "-0.0"]),
        ("0", None, False, False, ["0", "-0", "0.000", "-0.00", "3.5"], ["-0.001", "-1"]),
        (
            None,
            "100",
            False,
            True,
            ["99.999", "-5", "0", "99", "-1000.5"],
            ["100", "100.0", "100.000", "100.0001", "1e1"],
        ),
        (None, "100", False, False, ["100", "100.0", "100.000", "-3"], ["100.0001", "101"]),
        (
            "1.5",
            "1.75",
            False,
            False,
            ["1.5", "1.50", "1.6", "1.75", "1.750"],
            ["1.4999", "1.7501", "1.8", "2", "1"],
        ),
        ("1.5", "1.75", True, True, ["1.50001", "1.7", "1.7499"], ["1.5", "1.500", "1.75"]),
        (
            "-1.5",
            "-0.25",
            False,
            True,
            ["-1.5", "-1", "-0.3", "-0.2500001"],
            ["-0.25", "-0.250", "-1.51", "0", "-0"],
        ),
        ("-2", "2", True, True, ["-1.999", "-0", "0", "1.999"], ["-2", "2", "-2.0", "2.00"]),
        ("0", "0", False, False, ["0", "-0", "0.0", "-0.000"], ["0.0001", "-0.0001", "1"]),
        ("1E+2", "1.0E+3", False, False, ["100", "1000.0", "555.5"], ["99.99", "1000.01"]),
    ],
)
def test_number_examples(
    low: str | None,
    high: str | None,
    low_strict: bool,
    high_strict: bool,
    accepted: list[str],
    rejected: list[str],
) -> None:
    regex = _number_case(low, high, low_strict, high_strict)
    for text in accepted:
        assert re.fullmatch(regex, text), (regex, text)
    for text in rejected:
        assert not re.fullmatch(regex, text), (regex, text)
    assert _fsm_accepts(regex, accepted + rejected) == [True] * len(accepted) + [False] * len(
        rejected
    )


def test_number_unbounded_is_full_json_number() -> None:
    regex = number_regex(None, None)
    assert regex == JSON_NUMBER
    for text in ("0", "-0", "1.5e10", "-2E-3", "1e+0", "12.0"):
        assert re.fullmatch(regex, text)
    for text in ("01", "+1", ".5", "1.", "1e", "--1"):
        assert not re.fullmatch(regex, text)


def test_number_bounded_has_no_exponent() -> None:
    regex = number_regex(Decimal(0), None)
    assert not re.fullmatch(regex, "1e3")
    assert not re.fullmatch(regex, "1E3")


def test_number_exhaustive_small() -> None:
    bounds = [None] + [
        Decimal(x)
        for x in (
            "-10",
            "-1.5",
            "-1",
            "-0.05",
            "0",
            "0.05",
            "0.5",
            "0.55",
            "1",
            "1.25",
            "9.99",
            "10",
            "10.01",
        )
    ]
    texts = sorted(
        {
            f"{sign}{whole}{frac}"
            for sign in ("", "-")
            for whole in range(12)
            for frac in (
                "",
                ".0",
                ".00",
                ".05",
                ".050",
                ".1",
                ".25",
                ".5",
                ".50",
                ".55",
                ".555",
                ".9",
                ".99",
                ".999",
                ".01",
                ".049",
                ".051",
            )
        }
    )
    for low, high in itertools.product(bounds, bounds):
        for low_strict, high_strict in itertools.product((False, True), repeat=2):
            empty = (
                low is not None
                and high is not None
                and (low > high or (low == high and (low_strict or high_strict)))
            )
            if empty:
                with pytest.raises(ValueError):
                    number_regex(
                        low, high, exclusive_minimum=low_strict, exclusive_maximum=high_strict
                    )
                continue
            compiled = re.compile(
                number_regex(low, high, exclusive_minimum=low_strict, exclusive_maximum=high_strict)
            )
            for text in texts:
                expected = _num_in_range(Decimal(text), low, high, low_strict, high_strict)
                assert bool(compiled.fullmatch(text)) == expected, (
                    low,
                    high,
                    low_strict,
                    high_strict,
                    text,
                )


def test_number_invalid_bounds_raise() -> None:
    with pytest.raises(ValueError):
        number_regex(Decimal(2), Decimal(1))
    with pytest.raises(ValueError):
        number_regex(Decimal(1), Decimal(1), exclusive_minimum=True)
    with pytest.raises(ValueError):
        number_regex(Decimal("1.0"), Decimal(1), exclusive_maximum=True)
    with pytest.raises(ValueError):
        number_regex(Decimal("Infinity"), None)
    with pytest.raises(ValueError):
        number_regex(None, Decimal("NaN"))


_dec_bound = st.one_of(
    st.none(),
    st.decimals(min_value=-1000, max_value=1000, places=3),
    st.integers(-50, 50).map(Decimal),
    st.decimals(min_value=-(10**20), max_value=10**20, places=0),
)


@st.composite
def _candidate_texts(draw: st.DrawFn, anchors: list[Decimal]) -> list[str]:
    near = st.tuples(
        st.sampled_from(anchors),
        st.sampled_from(
            [Decimal(x) for x in ("0", "0.001", "-0.001", "0.0005", "-0.0005", "1", "-1", "0.5")]
        ),
    ).map(lambda pair: pair[0] + pair[1])
    values = draw(
        st.lists(
            st.one_of(
                near,
                st.decimals(min_value=-2000, max_value=2000, places=4),
                st.integers(-(10**21), 10**21).map(Decimal),
            ),
            min_size=1,
            max_size=20,
        )
    )
    texts = [_plain(v, draw(st.integers(0, 3))) for v in values]
    texts += ["-0", "-0.0", "0.000"]
    return texts


@_SETTINGS
@given(
    low=_dec_bound,
    high=_dec_bound,
    low_strict=st.booleans(),
    high_strict=st.booleans(),
    data=st.data(),
)
def test_number_matches_iff_in_range(
    low: Decimal | None,
    high: Decimal | None,
    low_strict: bool,
    high_strict: bool,
    data: st.DataObject,
) -> None:
    if low is not None and high is not None:
        low, high = min(low, high), max(low, high)
        if low == high:
            low_strict = high_strict = False
    regex = number_regex(low, high, exclusive_minimum=low_strict, exclusive_maximum=high_strict)
    compiled = re.compile(regex)
    anchors = [b for b in (low, high, Decimal(0)) if b is not None]
    for text in data.draw(_candidate_texts(anchors)):
        assert _DECIMAL_RE.fullmatch(text), text
        expected = _num_in_range(Decimal(text), low, high, low_strict, high_strict)
        assert bool(compiled.fullmatch(text)) == expected, (
            low,
            high,
            low_strict,
            high_strict,
            text,
        )


@_SETTINGS
@given(
    low=_dec_bound,
    high=_dec_bound,
    low_strict=st.booleans(),
    high_strict=st.booleans(),
    data=st.data(),
)
def test_number_samples_are_in_range(
    low: Decimal | None,
    high: Decimal | None,
    low_strict: bool,
    high_strict: bool,
    data: st.DataObject,
) -> None:
    if low is not None and high is not None:
        low, high = min(low, high), max(low, high)
        if low == high:
            low_strict = high_strict = False
    regex = number_regex(low, high, exclusive_minimum=low_strict, exclusive_maximum=high_strict)
    text = data.draw(st.from_regex(regex, fullmatch=True))
    json.loads(text)
    if low is None and high is None:
        assert re.fullmatch(JSON_NUMBER, text)
        return
    assert _DECIMAL_RE.fullmatch(text), text
    assert _num_in_range(Decimal(text), low, high, low_strict, high_strict), (
        low,
        high,
        low_strict,
        high_strict,
        text,
    )


@pytest.mark.parametrize(
    ("low", "high", "low_strict", "high_strict"),
    [
        ("-9223372036854775808", "9223372036854775807", False, False),
        ("-9223372036854775808.125", "9223372036854775807.5", True, True),
        ("0", "18446744073709551615", True, False),
        ("0.001", None, False, False),
        (None, "-123456789.987654321", False, True),
        ("3.14159", "3.1416", False, False),
    ],
)
def test_number_interegular_compiles_fast(
    low: str | None, high: str | None, low_strict: bool, high_strict: bool
) -> None:
    regex = _number_case(low, high, low_strict, high_strict)
    fsm = interegular.parse_pattern(regex).to_fsm()
    anchors = [Decimal(b) for b in (low, high) if b is not None] + [Decimal(0)]
    deltas = [Decimal(x) for x in ("0", "0.0001", "-0.0001", "1", "-1")]
    probes = [_plain(a + d, z) for a in anchors for d in deltas for z in (0, 2)]
    for text in probes:
        assert fsm.accepts(text) == bool(re.fullmatch(regex, text)), text


def test_number_size_is_linear_in_digits() -> None:
    sizes = {}
    for digits in (10, 50, 200):
        low = Decimal("-" + "3" * digits + "." + "5" * digits)
        high = Decimal("7" * digits + "." + "2" * digits)
        sizes[digits] = len(number_regex(low, high, exclusive_minimum=True))
        assert sizes[digits] < 60 * 2 * digits
    assert sizes[200] < 5 * sizes[50]
