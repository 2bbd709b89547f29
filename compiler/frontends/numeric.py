"""Regular expressions for JSON numbers within bounds.

This module owns the translation of the JSON Schema numeric range keywords
(``minimum``, ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum``) on
``integer`` and ``number`` into regexes over JSON number text. The regexes use the
``interegular`` dialect (implicitly anchored, no lookarounds) and mean the same
under Python's ``re.fullmatch``.

The construction is the classic range-to-regex split by digit position: a
bound's digits are walked once, and each position contributes a constant number
of alternatives, so the regex has O(number of digits) size even for bounds such
as ``2**63``.

Decisions:

* ``-0`` (and ``-0.0``, ``-0.000`` ...) is valid JSON with the value zero. It is
  accepted exactly when zero is within the bounds, like ``0``; a text is judged
  by its numeric value only.
* :func:`integer_regex` accepts JSON integer syntax only: no fraction, no
  exponent, no leading zeros, no ``+``.
* :func:`multiple_of` (``multipleOf``) is an automaton, not a regex: divisibility of a
  decimal numeral by ``k`` takes ``k`` states, while a regex for it grows exponentially.
  It accepts decimal notation only (no exponent), like the bounded regexes.
* :func:`number_regex` with at least one bound accepts decimal notation only
  (``-?int(.frac)?``, any number of fraction digits, trailing zeros allowed) and
  never exponent notation such as ``1e3``. This is a sound restriction: every
  in-range value still has a decimal spelling. Without bounds it accepts the full
  JSON number grammar, exponent included.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from math import gcd
from typing import TypeAlias

from maskc.compiler.ir import Automaton

__all__ = ["JSON_INTEGER", "JSON_NUMBER", "integer_regex", "number_regex", "multiple_of", "multiple_of_size"]

JSON_INTEGER = "-?(?:0|[1-9][0-9]*)"
"""Every JSON integer (RFC 8259 ``int`` with an optional minus)."""

JSON_NUMBER = "-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
"""Every JSON number."""

_ANY_FRACTION = "(?:\\.[0-9]+)?"

_Frac: TypeAlias = tuple[str | None, bool]
"""A set of fraction digit strings: a regex of its non-empty members (``None`` if
there are none) and whether the empty string is a member."""


# ------------------------------------------------------------------- helpers


def _alt(parts: Sequence[str]) -> str:
    """Joins alternatives into one non-capturing group.

    Args:
        parts: The alternatives, at least one, none of them empty.

    Returns:
        ``parts[0]`` if there is only one, else ``(?:p1|p2|...)``.
    """
    if len(parts) == 1:
        return parts[0]
    return "(?:" + "|".join(parts) + ")"


def _digit_class(low: int, high: int) -> str:
    """The digits ``low`` to ``high`` as one atom.

    Args:
        low: The smallest digit.
        high: The largest digit, at least ``low``.

    Returns:
        A literal digit or a character class.
    """
    if low == high:
        return str(low)
    return f"[{low}-{high}]"


def _digits(low: int, high: int | None) -> str:
    """Between ``low`` and ``high`` arbitrary digits (``None``: no upper limit).

    Args:
        low: The least number of digits.
        high: The largest number of digits, or ``None``.

    Returns:
        The regex, empty when exactly zero digits are asked for.
    """
    if high is None:
        return "[0-9]*" if low == 0 else "[0-9]+" if low == 1 else f"[0-9]{{{low},}}"
    if high == 0:
        return ""
    if low == high:
        return "[0-9]" if low == 1 else f"[0-9]{{{low}}}"
    if (low, high) == (0, 1):
        return "[0-9]?"
    return f"[0-9]{{{low},{high}}}"


def _at_least_fixed(s: str) -> str:
    """Digit strings of length ``len(s)`` whose value is at least ``int(s)``.

    Args:
        s: A non-empty digit string (leading zeros allowed).

    Returns:
        The regex.
    """
    if len(s) == 1:
        return _digit_class(int(s), 9)
    if s.strip("0") == "":
        return _digits(len(s), len(s))
    head, rest = int(s[0]), s[1:]
    parts = [s[0] + _at_least_fixed(rest)]
    if head < 9:
        parts.append(_digit_class(head + 1, 9) + _digits(len(rest), len(rest)))
    return _alt(parts)


def _at_most_fixed(s: str) -> str:
    """Digit strings of length ``len(s)`` whose value is at most ``int(s)``.

    Args:
        s: A non-empty digit string (leading zeros allowed).

    Returns:
        The regex.
    """
    if len(s) == 1:
        return _digit_class(0, int(s))
    if s.strip("9") == "":
        return _digits(len(s), len(s))
    head, rest = int(s[0]), s[1:]
    parts: list[str] = []
    if head > 0:
        parts.append(_digit_class(0, head - 1) + _digits(len(rest), len(rest)))
    parts.append(s[0] + _at_most_fixed(rest))
    return _alt(parts)


def _range_fixed(low: str, high: str) -> str:
    """Digit strings of one length whose value lies in ``[low, high]``.

    Args:
        low: The lower bound as a digit string.
        high: The upper bound, a digit string of the same length, ``>= low``.

    Returns:
        The regex.
    """
    if low == high:
        return low
    common = 0
    while low[common] == high[common]:
        common += 1
    prefix = low[:common]
    lo_head, hi_head = int(low[common]), int(high[common])
    lo_rest, hi_rest = low[common + 1 :], high[common + 1 :]
    width = len(lo_rest)
    lo_full = lo_rest.strip("0") == ""
    hi_full = hi_rest.strip("9") == ""
    parts: list[str] = []
    if not lo_full:
        parts.append(str(lo_head) + _at_least_fixed(lo_rest))
    mid_low = lo_head if lo_full else lo_head + 1
    mid_high = hi_head if hi_full else hi_head - 1
    if mid_low <= mid_high:
        parts.append(_digit_class(mid_low, mid_high) + _digits(width, width))
    if not hi_full:
        parts.append(str(hi_head) + _at_most_fixed(hi_rest))
    return prefix + _alt(parts)


def _natural_range(low: int, high: int | None) -> str:
    """Canonical decimal spellings (no leading zeros) of the integers in a range.

    Args:
        low: The least integer, non-negative.
        high: The largest integer (``>= low``), or ``None`` for no upper bound.

    Returns:
        The regex.
    """
    lo = str(low)
    if high is not None and len(str(high)) == len(lo):
        return _range_fixed(lo, str(high))
    parts = [_range_fixed(lo, "9" * len(lo))]
    if high is None:
        parts.append("[1-9]" + _digits(len(lo), None))
        return _alt(parts)
    hi = str(high)
    if len(hi) - len(lo) >= 2:
        parts.append("[1-9]" + _digits(len(lo), len(hi) - 2))
    parts.append(_range_fixed("1" + "0" * (len(hi) - 1), hi))
    return _alt(parts)


# ------------------------------------------------------------------- integers


def integer_regex(minimum: int | None, maximum: int | None) -> str:
    """The JSON integers ``n`` with ``minimum <= n <= maximum``.

    The regex accepts JSON integer syntax only (``-?(0|[1-9][0-9]*)``); ``-0``
    is accepted exactly when 0 is in range.

    Args:
        minimum: The inclusive lower bound, or ``None`` for none.
        maximum: The inclusive upper bound, or ``None`` for none.

    Returns:
        A regex of size O(number of digits of the bounds).

    Raises:
        ValueError: If ``minimum > maximum`` (the range is empty).
    """
    if minimum is not None and maximum is not None and minimum > maximum:
        raise ValueError(f"empty integer range: minimum {minimum} > maximum {maximum}")
    if minimum is None and maximum is None:
        return JSON_INTEGER
    parts: list[str] = []
    # Unsigned spellings d, value d: max(minimum, 0) <= d <= maximum.
    low = 0 if minimum is None else max(minimum, 0)
    if maximum is None or low <= maximum:
        parts.append(_natural_range(low, maximum))
    # Spellings -d, value -d: max(-maximum, 0) <= d <= -minimum.
    low = 0 if maximum is None else max(-maximum, 0)
    high = None if minimum is None else -minimum
    if high is None or low <= high:
        parts.append("-" + _natural_range(low, high))
    return _alt(parts)


# -------------------------------------------------------------------- numbers


def _split(value: Decimal) -> tuple[int, str]:
    """Splits a non-negative finite decimal into integer part and fraction digits.

    Args:
        value: The decimal, ``>= 0``.

    Returns:
        The integer part and the fraction digits without trailing zeros (``""``
        for an integral value).
    """
    text = format(abs(value), "f")
    whole, _, fraction = text.partition(".")
    return int(whole), fraction.rstrip("0")


def _after(digit: str, rest: _Frac) -> str | None:
    """The strings ``digit + e`` for ``e`` in ``rest``.

    Args:
        digit: A literal digit or a digit class.
        rest: The continuation set.

    Returns:
        The regex, or ``None`` if ``rest`` is empty.
    """
    nonempty, empty = rest
    if nonempty is None:
        return digit if empty else None
    return f"{digit}(?:{nonempty})?" if empty else digit + nonempty


def _frac(parts: Sequence[str | None], empty: bool) -> _Frac:
    """Builds a fraction set from optional alternatives.

    Args:
        parts: Regexes of non-empty strings; ``None`` entries are skipped.
        empty: Whether the empty string is a member.

    Returns:
        The set.
    """
    present = [part for part in parts if part is not None]
    return (_alt(present) if present else None, empty)


def _frac_at_least(bound: str, strict: bool) -> _Frac:
    """Digit strings ``e`` with ``0.e >= 0.bound`` (``>`` when ``strict``).

    Args:
        bound: Fraction digits without trailing zeros.
        strict: Whether equality is excluded.

    Returns:
        The set.
    """
    if not bound:
        return ("[0-9]*[1-9][0-9]*", False) if strict else ("[0-9]+", True)
    head = int(bound[0])
    above = _digit_class(head + 1, 9) + "[0-9]*" if head < 9 else None
    return _frac([above, _after(bound[0], _frac_at_least(bound[1:], strict))], False)


def _frac_at_most(bound: str, strict: bool) -> _Frac:
    """Digit strings ``e`` with ``0.e <= 0.bound`` (``<`` when ``strict``).

    Args:
        bound: Fraction digits without trailing zeros.
        strict: Whether equality is excluded.

    Returns:
        The set.
    """
    if not bound:
        return (None, False) if strict else ("0+", True)
    head = int(bound[0])
    below = _digit_class(0, head - 1) + "[0-9]*" if head > 0 else None
    return _frac([below, _after(bound[0], _frac_at_most(bound[1:], strict))], True)


def _frac_positive_at_most(bound: str, strict: bool) -> _Frac:
    """Digit strings ``e`` with ``0 < 0.e <= 0.bound`` (``<`` when ``strict``).

    Args:
        bound: Fraction digits without trailing zeros.
        strict: Whether equality with ``bound`` is excluded.

    Returns:
        The set.
    """
    if not bound:
        return (None, False)
    head = int(bound[0])
    if head == 0:
        return _frac([_after("0", _frac_positive_at_most(bound[1:], strict))], False)
    parts = ["0[0-9]*[1-9][0-9]*"]
    if head > 1:
        parts.append(_digit_class(1, head - 1) + "[0-9]*")
    return _frac([*parts, _after(bound[0], _frac_at_most(bound[1:], strict))], False)


def _frac_between(low: str, low_strict: bool, high: str, high_strict: bool) -> _Frac:
    """Digit strings ``e`` with ``0.low <= 0.e <= 0.high`` (``<`` where strict).

    Args:
        low: Lower fraction digits without trailing zeros.
        low_strict: Whether equality with ``low`` is excluded.
        high: Upper fraction digits without trailing zeros, ``0.high >= 0.low``.
        high_strict: Whether equality with ``high`` is excluded.

    Returns:
        The set.
    """
    if not low:
        if low_strict:
            return _frac_positive_at_most(high, high_strict)
        return _frac_at_most(high, high_strict)
    lo_head, hi_head = int(low[0]), int(high[0])
    if lo_head == hi_head:
        rest = _frac_between(low[1:], low_strict, high[1:], high_strict)
        return _frac([_after(low[0], rest)], False)
    middle = None
    if lo_head + 1 <= hi_head - 1:
        middle = _digit_class(lo_head + 1, hi_head - 1) + "[0-9]*"
    return _frac(
        [
            _after(low[0], _frac_at_least(low[1:], low_strict)),
            middle,
            _after(high[0], _frac_at_most(high[1:], high_strict)),
        ],
        False,
    )


def _fraction_suffix(fractions: _Frac) -> str | None:
    """The optional ``.digits`` suffix whose digits are in ``fractions``.

    Args:
        fractions: The allowed fraction digit strings; the empty string stands
            for no fraction at all.

    Returns:
        The regex (possibly empty), or ``None`` if no suffix is allowed.
    """
    nonempty, empty = fractions
    if nonempty is None:
        return "" if empty else None
    return f"(?:\\.{nonempty})?" if empty else "\\." + nonempty


def _unsigned_range(
    low: Decimal, low_strict: bool, high: Decimal | None, high_strict: bool
) -> str | None:
    """Unsigned decimal spellings ``int(.frac)?`` whose value is within bounds.

    Args:
        low: The lower bound, ``>= 0``.
        low_strict: Whether the lower bound is exclusive.
        high: The upper bound, or ``None`` for none.
        high_strict: Whether the upper bound is exclusive.

    Returns:
        The regex, or ``None`` if no value is in range.
    """
    if high is not None and (low > high or (low == high and (low_strict or high_strict))):
        return None
    low_int, low_frac = _split(low)
    if high is None:
        first = _fraction_suffix(_frac_at_least(low_frac, low_strict))
        assert first is not None
        rest = _natural_range(low_int + 1, None) + _ANY_FRACTION
        return _alt([str(low_int) + first, rest])
    high_int, high_frac = _split(high)
    if low_int == high_int:
        only = _fraction_suffix(_frac_between(low_frac, low_strict, high_frac, high_strict))
        assert only is not None
        return str(low_int) + only
    parts: list[str] = []
    first = _fraction_suffix(_frac_at_least(low_frac, low_strict))
    assert first is not None
    parts.append(str(low_int) + first)
    if low_int + 1 <= high_int - 1:
        parts.append(_natural_range(low_int + 1, high_int - 1) + _ANY_FRACTION)
    last = _fraction_suffix(_frac_at_most(high_frac, high_strict))
    if last is not None:
        parts.append(str(high_int) + last)
    return _alt(parts)


def _as_decimal(value: Decimal | int | None, name: str) -> Decimal | None:
    """Checks a bound and converts it to :class:`~decimal.Decimal`.

    Args:
        value: The bound, or ``None``.
        name: The keyword name, for the error message.

    Returns:
        The bound as a decimal, or ``None``.

    Raises:
        ValueError: If the bound is not finite.
    """
    if value is None:
        return None
    result = Decimal(value)
    if not result.is_finite():
        raise ValueError(f"{name} must be finite, got {value}")
    return result


def number_regex(
    minimum: Decimal | int | None,
    maximum: Decimal | int | None,
    *,
    exclusive_minimum: bool = False,
    exclusive_maximum: bool = False,
) -> str:
    """The JSON numbers whose value lies within the bounds.

    Without bounds this is the whole JSON number grammar. With at least one
    bound only decimal notation is accepted, ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?``,
    never an exponent; within that notation the regex is exact: a text is
    accepted if and only if its value satisfies the bounds (trailing zeros in
    the fraction and ``-0`` are judged by value).

    Args:
        minimum: The lower bound, or ``None`` for none.
        maximum: The upper bound, or ``None`` for none.
        exclusive_minimum: Whether the value must be strictly above ``minimum``.
        exclusive_maximum: Whether the value must be strictly below ``maximum``.

    Returns:
        A regex of size O(number of digits of the bounds).

    Raises:
        ValueError: If a bound is not finite or no number satisfies the bounds.
    """
    low = _as_decimal(minimum, "minimum")
    high = _as_decimal(maximum, "maximum")
    if low is None and high is None:
        return JSON_NUMBER
    zero = Decimal(0)
    parts: list[str] = []
    # Unsigned spellings d, value d >= 0.
    if low is None or low < 0:
        positive = _unsigned_range(zero, False, high, exclusive_maximum)
    else:
        positive = _unsigned_range(low, exclusive_minimum, high, exclusive_maximum)
    if positive is not None:
        parts.append(positive)
    # Spellings -d, value -d: -maximum <|<= d <|<= -minimum, d >= 0.
    neg_high = None if low is None else -low
    if high is None or high > 0:
        negative = _unsigned_range(zero, False, neg_high, exclusive_minimum)
    else:
        negative = _unsigned_range(-high, exclusive_maximum, neg_high, exclusive_minimum)
    if negative is not None:
        parts.append("-" + negative)
    if not parts:
        raise ValueError(
            f"empty number range: minimum {minimum} (exclusive: {exclusive_minimum}),"
            f" maximum {maximum} (exclusive: {exclusive_maximum})"
        )
    return _alt(parts)


# ---------------------------------------------------------------- multipleOf

_State: TypeAlias = tuple[int, ...]
# Abstract states of the multipleOf automaton: (_START,), (_SIGNED,), (_ZERO,) the integer
# part "0", (_INT, r, c) inside a non-zero integer part, (_DOT, r) just after ".",
# (_FRAC, r, j) after j fraction digits.
_START, _SIGNED, _ZERO, _INT, _DOT, _FRAC = range(6)


def _split_step(k: Decimal) -> tuple[int, int]:
    """``k`` as ``K * 10**e`` with ``K`` a positive integer not divisible by 10.

    Raises:
        ValueError: If ``k`` is not a positive finite number.
    """
    if not k.is_finite() or k <= 0:
        raise ValueError(f"multipleOf must be a positive finite number, got {k}")
    sign, digits, exp = k.normalize().as_tuple()
    assert isinstance(exp, int)
    big = int("".join(map(str, digits)))
    while big % 10 == 0:
        big //= 10
        exp += 1
    return big, exp


def multiple_of_size(k: Decimal, *, integer: bool) -> int:
    """About how many states :func:`multiple_of` builds for ``k`` (before minimization).

    Args:
        k: The ``multipleOf`` value, positive.
        integer: Whether only integers are spelled (``type: integer``).

    Returns:
        The number of states.
    """
    big, e = _split_step(k)
    if e >= 0:
        return big * (e + 1) + 5
    if integer:
        return big // gcd(big, 10**-e) + 4
    return big * (-e + 2) + 4


def multiple_of(k: Decimal, *, integer: bool) -> Automaton:
    """The JSON numbers in decimal notation whose value is an integer multiple of ``k``.

    Write ``k = K * 10**e`` with ``K`` not divisible by 10. For ``e >= 0`` a value is a
    multiple exactly when it is an integer whose digits are ``0`` or ``P`` followed by
    ``e`` zeros with ``P`` divisible by ``K``: the states track ``P mod K`` and the run
    of trailing zeros (up to ``e``), so ``multipleOf: 1e9`` takes ten states, not 10**9.
    For ``e < 0`` the value times ``10**-e`` must be an integer divisible by ``K``: the
    states track that integer's residue over the integer digits and the first ``-e``
    fraction digits (missing ones count as zeros); later fraction digits must be ``0``.
    ``-0``, trailing fraction zeros and a zero value are judged by value. No exponent.

    Args:
        k: The ``multipleOf`` value, positive and finite.
        integer: Whether only JSON integer syntax is spelled (``type: integer``).

    Returns:
        The automaton; its size is :func:`multiple_of_size` (see there before calling
        with a large ``K``).

    Raises:
        ValueError: If ``k`` is not positive and finite.

    Example:
        >>> a = multiple_of(Decimal("0.5"), integer=False)   # 1.5, -2, 0.50, but not 0.25
        >>> len(a.edges) > 0
        True
    """
    big, e = _split_step(k)
    z = max(e, 0)
    s = max(-e, 0)
    if integer and s:
        # an integer times 10**s is divisible by K exactly when it is by K / gcd(K, 10**s)
        big, s, e = big // gcd(big, 10**s), 0, 0
    pow10 = [pow(10, i, big) for i in range(max(z, s) + 2)]

    def digit(st: _State, d: int) -> _State | None:
        kind = st[0]
        if kind in (_START, _SIGNED):
            return (_ZERO,) if d == 0 else (_INT, d % big, 0)
        if kind == _INT:
            r, c = st[1], st[2]
            if e >= 0:
                if d == 0:
                    return (_INT, r, c + 1) if c < z else (_INT, r * 10 % big, z)
                return (_INT, (r * pow10[c + 1] + d) % big, 0)
            return (_INT, (r * 10 + d) % big, 0)
        if kind == _DOT or kind == _FRAC:
            r = st[1]
            j = 0 if kind == _DOT else st[2]
            if e >= 0 or j == s:  # every digit from here on must be 0, and r already 0
                if d != 0 or (e < 0 and r != 0):
                    return None
                return st if kind == _FRAC else (_FRAC, r, j)
            return (_FRAC, (r * 10 + d) % big, j + 1)
        return None  # _ZERO: no digit may follow a leading zero

    def accepting(st: _State) -> bool:
        kind = st[0]
        if kind == _ZERO:
            return True
        if kind == _INT:
            r, c = st[1], st[2]
            return (c == z and r == 0) if e >= 0 else r * pow10[s] % big == 0
        if kind == _FRAC:
            return st[1] * pow10[s - st[2]] % big == 0 if e < 0 else True
        return False

    def dot(st: _State) -> _State | None:
        if integer or st[0] not in (_ZERO, _INT):
            return None
        if e >= 0:  # only zero fractions: the integer part must already be a multiple
            return (_DOT, 0) if accepting(st) else None
        return (_DOT, 0 if st[0] == _ZERO else st[1])

    return _explore((_START,), digit, dot, accepting)


def _explore(
    start: _State,
    digit: Callable[[_State, int], _State | None],
    dot: Callable[[_State], _State | None],
    accepting: Callable[[_State], bool],
) -> Automaton:
    """The reachable part of an automaton over ``-``, ``.`` and digits, numbered in BFS order."""
    ids: dict[_State, int] = {start: 0}
    order = [start]
    edges: list[tuple[tuple[int, int, int], ...]] = []

    def target(st: _State) -> int:
        got = ids.get(st)
        if got is None:
            got = ids[st] = len(order)
            order.append(st)
        return got

    i = 0
    while i < len(order):
        st = order[i]
        out: list[tuple[int, int, int]] = []
        if st[0] == _START:
            out.append((0x2D, 0x2D, target((_SIGNED,))))
        after_dot = dot(st)
        if after_dot is not None:
            out.append((0x2E, 0x2E, target(after_dot)))
        run: tuple[int, int, int] | None = None  # consecutive digits with one target
        for d in range(10):
            nxt = digit(st, d)
            if nxt is None:
                continue
            t = target(nxt)
            b = 0x30 + d
            if run is not None and run[2] == t and run[1] == b - 1:
                run = (run[0], b, t)
                continue
            if run is not None:
                out.append(run)
            run = (b, b, t)
        if run is not None:
            out.append(run)
        edges.append(tuple(out))
        i += 1
    return Automaton(tuple(edges), frozenset(i for i, st in enumerate(order) if accepting(st)))
