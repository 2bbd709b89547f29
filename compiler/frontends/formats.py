"""Regular expressions for the JSON Schema ``format`` keyword.

This module owns the mapping from a ``format`` name to a regular expression that
describes the *content* of a JSON string of that format: the characters between
the quotes, after unescaping. Every regex only uses characters that need no
escaping inside a JSON string (no ``"``, no ``\\``, no control characters), so the
front end can splice it between two literal quotes. All regexes are pure ASCII.

Dialect: the regexes are written for ``interegular.parse_pattern`` and describe the
whole string (no anchors, lookarounds, backreferences, lazy quantifiers or named
groups). They mean the same under Python's ``re.fullmatch``.

Soundness comes first: every string a regex accepts is a valid instance of the
format. Where the exact language would need a huge automaton the regex accepts a
documented subset instead (completeness is secondary):

``date``
    RFC 3339 ``full-date``, exact: years 0001-9999 (year 0000 is rejected, as by
    :func:`datetime.date.fromisoformat`), months 01-12, per-month day limits and
    February 29 only in Gregorian leap years. ``"2024-02-29"`` is accepted,
    ``"2023-02-29"`` and ``"2024-02-30"`` are rejected.
``time``
    RFC 3339 ``full-time``: ``HH:MM:SS(.frac)?(Z|z|+HH:MM|-HH:MM)`` with hour
    00-23, minute 00-59, second 00-59 and any number of fraction digits. Leap
    seconds (second ``60``) are not accepted: RFC 3339 only allows them at the
    instant of an actual leap second (23:59:60 UTC on particular days), which a
    regex cannot check, and the ``rfc3339-validator`` package that ``jsonschema``
    uses for this format rejects them outright.
``date-time``
    ``date`` then ``T`` or ``t`` then ``time``.
``email``
    A subset of RFC 5321 ``Mailbox``: ``local@domain``. The local part is a
    dot-atom (runs of ``atext`` characters ``[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]``
    separated by single dots, no leading/trailing/double dot); quoted local parts
    are not generated. The local part is at most 64 characters: either up to 64
    ``atext`` characters with no dot, or a dot-atom of at most 32 characters
    (longer dotted local parts with many dots are accepted up to 63 characters).
    The domain is a hostname of at least two labels whose last label starts with
    a letter (no address literals such as ``[192.0.2.1]``, no all-numeric top
    level label) and whose total length is at most 189, so that the whole
    address stays within the 254 characters a forward path allows. As for
    ``hostname`` the length bound comes from tiers: 2-3 labels of up to 62
    characters, or 2-8 labels of up to 22 characters.
    Consequently ``"a@b"`` (a single-label domain) is rejected.
``uuid``
    RFC 4122 text form ``8-4-4-4-12`` hex digits, either case; exact.
``uri``
    RFC 3986 ``URI`` (an absolute URI with optional query and fragment), exact:
    ``scheme ":" hier-part ["?" query] ["#" fragment]`` with the RFC's character
    sets, percent-encoding, bracketed IPv6 and IPvFuture hosts and numeric ports.
    Non-ASCII characters (IRIs) and spaces are not accepted.
``ipv4``
    Dotted quad, each part 0-255 written without leading zeros; exact.
``ipv6``
    RFC 4291 section 2.2 text forms, exact: eight groups of 1-4 hex digits, ``::``
    compression of one or more groups, and a dotted-quad suffix in place of the
    last two groups. Zone identifiers (``%eth0``) are not accepted.
``hostname``
    RFC 1123 host names: dot-separated labels of 1-63 characters from
    ``[A-Za-z0-9-]`` that neither start nor end with ``-``, no trailing dot. The
    253-character limit on the whole name is guaranteed by accepting only the
    names that fit one of two (number of labels, label length) tiers: up to 4
    labels of up to 62 characters, or up to 12 labels of up to 20 characters.
    Each tier's longest name is at most 253 characters (4 * 62 + 3 = 251 and
    12 * 20 + 11 = 251). A label of exactly 63 characters, or a name with more
    than 12 labels, is therefore rejected. The tiers keep the automaton near
    900 states; an exact length bound would need tens of thousands.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["FORMAT_REGEXES", "format_regex"]


def _alt(parts: Sequence[str]) -> str:
    """Joins alternatives into one non-capturing group.

    Args:
        parts: The alternatives, at least one.

    Returns:
        ``parts[0]`` if there is only one, else ``(?:p1|p2|...)``.
    """
    if len(parts) == 1:
        return parts[0]
    return "(?:" + "|".join(parts) + ")"


def _rep(atom: str, low: int, high: int) -> str:
    """Repeats ``atom`` between ``low`` and ``high`` times.

    Args:
        atom: A regex that binds as a single quantifier operand.
        low: The least number of repetitions.
        high: The largest number of repetitions.

    Returns:
        The repetition, or the empty string when ``high`` is 0.
    """
    if high == 0:
        return ""
    if low == high == 1:
        return atom
    if low == high:
        return f"{atom}{{{low}}}"
    if (low, high) == (0, 1):
        return f"{atom}?"
    return f"{atom}{{{low},{high}}}"


# ---------------------------------------------------------------- date and time

_YEAR = "(?:[0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})"
"""Years 0001-9999."""

_DIV4_NOT_00 = "(?:0[48]|[2468][048]|[13579][26])"
"""Two-digit numbers 04-96 divisible by four."""

_LEAP_YEAR = f"(?:[0-9]{{2}}{_DIV4_NOT_00}|{_DIV4_NOT_00}00)"
"""Gregorian leap years 0001-9999: divisible by 4 and not by 100, or by 400."""

_DATE = (
    f"(?:{_YEAR}-(?:"
    "(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))"
    f"|{_LEAP_YEAR}-02-29)"
)

_HOUR = "(?:[01][0-9]|2[0-3])"
_MINUTE = "[0-5][0-9]"
_TIME = f"{_HOUR}:{_MINUTE}:{_MINUTE}(?:\\.[0-9]+)?(?:[Zz]|[+-]{_HOUR}:{_MINUTE})"
_DATE_TIME = f"{_DATE}[Tt]{_TIME}"

# ------------------------------------------------------------------ IP addresses

_DEC_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = f"{_DEC_OCTET}(?:\\.{_DEC_OCTET}){{3}}"
_H16 = "[0-9A-Fa-f]{1,4}"


def _ipv6() -> str:
    """Builds the RFC 4291 IPv6 text-form regex.

    An address is eight 16-bit groups, or six groups and a dotted quad. ``::``
    stands for one or more zero groups, so a compressed form has ``k`` explicit
    groups before it and ``m`` after it with ``k + m`` at most one less than the
    number of group slots.

    Returns:
        The regex.
    """
    parts = [f"(?:{_H16}:){{7}}{_H16}", f"(?:{_H16}:){{6}}{_IPV4}"]
    for k in range(8):
        left = "" if k == 0 else f"{_H16}" + _rep(f"(?::{_H16})", k - 1, k - 1)
        right_max = 7 - k
        right = ""
        if right_max > 0:
            right = f"(?:{_H16}" + _rep(f"(?::{_H16})", 0, right_max - 1) + ")?"
        parts.append(f"{left}::{right}")
    for k in range(6):
        left = "" if k == 0 else f"{_H16}" + _rep(f"(?::{_H16})", k - 1, k - 1)
        right_max = 5 - k
        parts.append(f"{left}::" + _rep(f"(?:{_H16}:)", 0, right_max) + _IPV4)
    return _alt(parts)


_IPV6 = _ipv6()

# -------------------------------------------------------------------- hostnames

_LET_DIG = "[A-Za-z0-9]"
_LDH = "[A-Za-z0-9-]"


def _label(max_len: int, *, first: str = _LET_DIG) -> str:
    """A DNS label of 1 to ``max_len`` characters without an edge hyphen.

    Args:
        max_len: The longest label accepted, at least 2.
        first: The class of the first character.

    Returns:
        The regex.
    """
    return f"{first}(?:{_LDH}{{0,{max_len - 2}}}{_LET_DIG})?"


def _tier_max_label(max_total: int, labels: int) -> int:
    """The longest label length such that ``labels`` labels fit ``max_total``.

    Args:
        max_total: The largest total length, dots included.
        labels: The number of labels.

    Returns:
        The label length, at most 63.
    """
    return min(63, (max_total - (labels - 1)) // labels)


def _domain(
    max_total: int,
    label_counts: Sequence[int],
    *,
    min_labels: int,
    letter_tld: bool,
) -> str:
    """Dot-separated labels whose total length never exceeds ``max_total``.

    Each tier ``n`` of ``label_counts`` accepts ``min_labels`` to ``n`` labels of at
    most :func:`_tier_max_label` characters, so each tier is sound on its own.

    Args:
        max_total: The largest total length, dots included.
        label_counts: The largest number of labels of each tier, increasing.
        min_labels: The least number of labels.
        letter_tld: Whether the last label must start with a letter.

    Returns:
        The regex.
    """
    tiers = []
    for count in label_counts:
        size = _tier_max_label(max_total, count)
        assert count * size + count - 1 <= max_total
        last = _label(size, first="[A-Za-z]" if letter_tld else _LET_DIG)
        tiers.append(_rep(f"(?:{_label(size)}\\.)", min_labels - 1, count - 1) + last)
    return _alt(tiers)


_HOSTNAME = _domain(253, (4, 12), min_labels=1, letter_tld=False)

# ------------------------------------------------------------------------ email

_ATEXT = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_LOCAL_PART = f"(?:{_ATEXT}{{1,64}}|{_ATEXT}(?:\\.?{_ATEXT}){{0,31}})"
_EMAIL_DOMAIN = _domain(254 - 64 - 1, (3, 8), min_labels=2, letter_tld=True)
_EMAIL = f"{_LOCAL_PART}@{_EMAIL_DOMAIN}"

# -------------------------------------------------------------------------- uri

_PCT = "%[0-9A-Fa-f]{2}"
_UNRESERVED_SUB = "A-Za-z0-9._~!$&'()*+,;=\\-"
_PCHAR = f"(?:[{_UNRESERVED_SUB}:@]|{_PCT})"
_USERINFO = f"(?:[{_UNRESERVED_SUB}:]|{_PCT})*"
_REG_NAME = f"(?:[{_UNRESERVED_SUB}]|{_PCT})*"
_IP_LITERAL = f"\\[(?:{_IPV6}|v[0-9A-Fa-f]+\\.[{_UNRESERVED_SUB}:]+)\\]"
_AUTHORITY = f"(?:{_USERINFO}@)?(?:{_IP_LITERAL}|{_REG_NAME})(?::[0-9]*)?"
_SEGMENTS = f"(?:/{_PCHAR}*)*"
_HIER_PART = f"(?://{_AUTHORITY}{_SEGMENTS}|/(?:{_PCHAR}+{_SEGMENTS})?|{_PCHAR}+{_SEGMENTS})?"
_QUERY_CHAR = f"(?:{_PCHAR}|[/?])"
_URI = f"[A-Za-z][A-Za-z0-9+.-]*:{_HIER_PART}(?:\\?{_QUERY_CHAR}*)?(?:#{_QUERY_CHAR}*)?"

# ------------------------------------------------------------------------ table

_UUID = "[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"

FORMAT_REGEXES: dict[str, str] = {
    "date": _DATE,
    "time": _TIME,
    "date-time": _DATE_TIME,
    "email": _EMAIL,
    "uuid": _UUID,
    "uri": _URI,
    "ipv4": _IPV4,
    "ipv6": _IPV6,
    "hostname": _HOSTNAME,
}
"""Supported ``format`` names and the regex of each one's string content."""


def format_regex(name: str) -> str | None:
    """The regex for the content of a string of JSON Schema ``format`` ``name``.

    Args:
        name: The value of the ``format`` keyword.

    Returns:
        A regex over the unescaped string content (see the module docstring for
        each format's exact language), or ``None`` if the format is unsupported.
    """
    return FORMAT_REGEXES.get(name)
