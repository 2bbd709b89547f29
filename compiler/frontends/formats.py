"""Regular expressions for the JSON Schema ``format`` keyword.

This module owns the mapping from a ``format`` name to a regular expression that
describes the *content* of a JSON string of that format: the characters between
the quotes, after unescaping. :func:`format_node` turns it into IR in the canonical
JSON spelling (each character escaped as ``json.dumps`` does). The regexes are ASCII;
the formats with non-ASCII characters (``iri``, ``iri-reference``, ``uri-template``,
``idn-email``) name each non-ASCII set by a placeholder control character that
:func:`format_node` expands.

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
    (A third tier: up to 3 labels of up to 63 characters.) Labels with ``--`` in
    their third and fourth characters are rejected: RFC 5891 reserves them, and
    whether an ``xn--`` A-label decodes to a valid U-label is not a regular
    question, so every A-label is rejected (a sound restriction).
``idn-hostname``
    A subset: the ``hostname`` language (ASCII NR-LDH labels, which are valid in
    IDNA2008). U-labels and A-labels are not accepted: IDNA2008's contextual
    rules, the Bidi rule and the 63-octet limit on the A-label form are not regular
    in any useful size.
``email`` / ``idn-email``
    ``idn-email`` adds, as a second local-part form, up to 12 characters from
    ``atext`` and every non-ASCII code point (RFC 6532 ``UTF8-non-ascii``) with
    single dots between them: at most 59 octets, within the 64-octet limit.
    The domain is ``email``'s (ASCII).
``uri-reference``, ``iri``, ``iri-reference``
    RFC 3986 ``URI-reference`` and RFC 3987 ``IRI``/``IRI-reference``, exact
    (``ucschar`` in the unreserved characters, ``iprivate`` in the query).
``uri-template``
    RFC 6570 (level 4), exact.
``json-pointer``, ``relative-json-pointer``
    RFC 6901; a relative pointer is a non-negative integer then ``#`` or a JSON
    pointer (the 2020-12 index manipulation ``+n``/``-n`` is not accepted).
``duration``
    RFC 3339 appendix A, exact with upper-case designators (``P1D``, ``PT1H30M``,
    ``P2W``; no fractions, no weeks with other units).
``regex``
    A subset that both ECMA-262 (with and without the ``u`` flag) and Python's
    ``re`` compile (see ``_regex_subset``): literals, escaped syntax characters,
    class escapes, classes with ``a-z``-style ranges, groups nested two deep,
    ``|``, anchors and quantifiers with single-digit counts. Which strings are
    ECMA-262 regexes is not a regular language (nesting, ``\\1`` references), so no
    exact automaton exists; a superset would be unsound.
``byte``
    OpenAPI base64 (RFC 4648 section 4) with padding, canonical: unused bits of the
    last character are zero.

Known formats that constrain nothing on a string (``binary``, ``password``, and the
numeric ``int32``, ``float``, ...) are listed in :data:`ANNOTATION_FORMATS`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from maskc.compiler.frontends.json_text import canonical_chars
from maskc.compiler.frontends.regex import regex_to_ir
from maskc.compiler.ir import Node

__all__ = ["FORMAT_REGEXES", "ANNOTATION_FORMATS", "format_regex", "format_node"]


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
    """A DNS label of 1 to ``max_len`` characters without an edge hyphen and without
    ``--`` in its third and fourth characters (RFC 5891 section 4.2.3.1 reserves those
    labels, ``xn--`` A-labels among them, for encodings a regex cannot check).

    Args:
        max_len: The longest label accepted, at least 5.
        first: The class of the first character.

    Returns:
        The regex.
    """
    # lengths 1-3, then 4 and more: c3 c4 is never "--"; a label of exactly 4 ends in c4
    short = f"{first}(?:{_LDH}?{_LET_DIG})?"
    tail = f"(?:{_LET_DIG}{_LDH}|-{_LET_DIG}){_LDH}{{0,{max_len - 5}}}{_LET_DIG}"
    return f"(?:{short}|{first}{_LDH}(?:{_LDH}{_LET_DIG}|{tail}))"


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


_HOSTNAME = _domain(253, (3, 4, 12), min_labels=1, letter_tld=False)

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
_IP_LITERAL = f"\\[(?:{_IPV6}|[vV][0-9A-Fa-f]+\\.[{_UNRESERVED_SUB}:]+)\\]"
_AUTHORITY = f"(?:{_USERINFO}@)?(?:{_IP_LITERAL}|{_REG_NAME})(?::[0-9]*)?"
_SEGMENTS = f"(?:/{_PCHAR}*)*"
_HIER_PART = f"(?://{_AUTHORITY}{_SEGMENTS}|/(?:{_PCHAR}+{_SEGMENTS})?|{_PCHAR}+{_SEGMENTS})?"
_QUERY_CHAR = f"(?:{_PCHAR}|[/?])"
_URI = f"[A-Za-z][A-Za-z0-9+.-]*:{_HIER_PART}(?:\\?{_QUERY_CHAR}*)?(?:#{_QUERY_CHAR}*)?"

def _uri_family(*, iri: bool) -> tuple[str, str]:
    """RFC 3986 ``URI`` and ``URI-reference`` (``iri``: RFC 3987 ``IRI`` and
    ``IRI-reference``, which add the non-ASCII ``ucschar`` to the unreserved characters and
    ``iprivate`` to the query).

    Returns:
        The absolute form and the reference form.
    """
    ucs = _UCSCHAR if iri else ""
    unreserved_sub = _UNRESERVED_SUB + ucs
    pchar = f"(?:[{unreserved_sub}:@]|{_PCT})"
    pchar_nc = f"(?:[{unreserved_sub}@]|{_PCT})"  # segment-nz-nc: no colon
    userinfo = f"(?:[{unreserved_sub}:]|{_PCT})*"
    reg_name = f"(?:[{unreserved_sub}]|{_PCT})*"
    authority = f"(?:{userinfo}@)?(?:{_IP_LITERAL}|{reg_name})(?::[0-9]*)?"
    segments = f"(?:/{pchar}*)*"
    absolute_path = f"/(?:{pchar}+{segments})?"
    hier_part = f"(?://{authority}{segments}|{absolute_path}|{pchar}+{segments})?"
    query = f"(?:\\?(?:{pchar}|[/?{_IPRIVATE if iri else ''}])*)?"
    fragment = f"(?:#(?:{pchar}|[/?])*)?"
    absolute = f"[A-Za-z][A-Za-z0-9+.-]*:{hier_part}{query}{fragment}"
    relative_part = f"(?://{authority}{segments}|{absolute_path}|{pchar_nc}+{segments})?"
    return absolute, f"(?:{absolute}|{relative_part}{query}{fragment})"


# Non-ASCII character sets are spelled in the regexes by one placeholder control
# character each (a character no format using them admits), expanded to their code-point
# ranges when the regex becomes IR (see format_node): a regex engine would enumerate them.
_UCSCHAR = "\x01"
"""RFC 3987 ``ucschar`` (placeholder inside a character class)."""
_IPRIVATE = "\x02"
"""RFC 3987 ``iprivate`` (placeholder inside a character class)."""
_NON_ASCII = "\x03"
"""Every non-ASCII code point (placeholder inside a character class)."""

_PLACEHOLDER_RANGES: dict[int, list[tuple[int, int]]] = {
    0x01: [(0xA0, 0xD7FF), (0xF900, 0xFDCF), (0xFDF0, 0xFFEF)]
    + [(p << 16, (p << 16) | 0xFFFD) for p in range(1, 14)] + [(0xE1000, 0xEFFFD)],
    0x02: [(0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD)],
    0x03: [(0x80, 0xD7FF), (0xE000, 0x10FFFF)],
}

_URI_REFERENCE = _uri_family(iri=False)[1]
_IRI, _IRI_REFERENCE = _uri_family(iri=True)

_URI_TEMPLATE_LITERAL = f"(?:[!#$&(-;=?-\\[\\]_a-z~{_UCSCHAR}{_IPRIVATE}]|{_PCT})"
_VARCHAR = f"(?:[A-Za-z0-9_]|{_PCT})"
_VARSPEC = f"{_VARCHAR}(?:\\.?{_VARCHAR})*(?::[1-9][0-9]{{0,3}}|\\*)?"
_URI_TEMPLATE = f"(?:{_URI_TEMPLATE_LITERAL}|\\{{[+#./;?&=,!@|]?{_VARSPEC}(?:,{_VARSPEC})*\\}})*"

# ------------------------------------------------------------ pointers, durations

_JSON_POINTER = "(?:/(?:[^/~]|~[01])*)*"
_RELATIVE_JSON_POINTER = f"(?:0|[1-9][0-9]*)(?:#|{_JSON_POINTER})"


def _duration() -> str:
    """RFC 3339 appendix A ``duration`` (ISO 8601), upper-case designators."""
    n = "[0-9]+"
    second = f"{n}S"
    minute = f"{n}M(?:{second})?"
    hour = f"{n}H(?:{minute})?"
    time = f"T(?:{hour}|{minute}|{second})"
    month = f"{n}M(?:{n}D)?"
    year = f"{n}Y(?:{month})?"
    date = f"(?:{n}D|{month}|{year})(?:{time})?"
    return f"P(?:{date}|{time}|{n}W)"


_DURATION = _duration()

# ------------------------------------------------------------------ IDN, base64

_ULOCAL_CHAR = f"[A-Za-z0-9!#$%&'*+/=?^_`{{|}}~\\-{_NON_ASCII}]"
# at most 12 characters of up to 4 UTF-8 bytes and 11 dots: within 64 octets
_IDN_EMAIL = f"(?:{_LOCAL_PART}|{_ULOCAL_CHAR}(?:\\.?{_ULOCAL_CHAR}){{0,11}})@{_EMAIL_DOMAIN}"

_B64 = "[A-Za-z0-9+/]"
_BYTE = f"(?:{_B64}{{4}})*(?:{_B64}[AQgw]==|{_B64}{{2}}[AEIMQUYcgkosw048]=)?"

# ------------------------------------------------------------------------ regex


def _regex_subset(depth: int) -> str:
    """A subset of the regular expressions that both ECMA-262 (``u`` flag or not) and
    Python's ``re`` compile: literal characters, escaped syntax characters, the class
    escapes ``\\d \\D \\w \\W \\s \\S`` and ``\\n \\r \\t \\f \\v``, ``.``, ``^``, ``$``,
    non-empty classes of such characters and ascending ``a-z``/``A-Z``/``0-9`` ranges,
    groups ``(...)`` and ``(?:...)`` nested at most ``depth`` deep, ``|``, and the
    quantifiers ``* + ? {n} {n,} {n,m}`` (single-digit ``n <= m``), each optionally lazy.
    """
    syntax = "\\\\^$.|?*+()\\[\\]{}"
    escape = f"\\\\(?:[{syntax}/]|[dDwWsSnrtfv])"
    literal = f"[^{syntax}]"
    ranges = []
    for lo, hi in (("0", "9"), ("a", "z"), ("A", "Z")):
        for c in range(ord(lo), ord(hi) + 1):
            ranges.append(f"{chr(c)}-[{chr(c)}-{hi}]")
    class_item = f"(?:[^\\\\\\[\\]^&~|\\-]|\\\\(?:[dDwWsSnrtfv\\\\\\[\\]^\\-/.])|{'|'.join(ranges)})"
    char_class = f"\\[\\^?{class_item}+\\]"
    counted = [f"\\{{{n}\\}}|\\{{{n},\\}}" for n in range(10)]
    counted += [f"\\{{{n},{m}\\}}" for n in range(10) for m in range(n, 10)]
    quantifier = f"(?:[*+?]|{'|'.join(counted)})\\??"
    body = ""
    for _ in range(depth + 1):
        group = f"|\\((?:\\?:)?{body}\\)" if body else ""
        atom = f"(?:{literal}|{escape}|\\.|{char_class}{group})"
        body = f"(?:{atom}(?:{quantifier})?|[$^|])*"  # an empty alternative is valid
    return body


_REGEX = _regex_subset(2)

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
    "uri-reference": _URI_REFERENCE,
    "iri": _IRI,
    "iri-reference": _IRI_REFERENCE,
    "uri-template": _URI_TEMPLATE,
    "idn-hostname": _HOSTNAME,
    "idn-email": _IDN_EMAIL,
    "json-pointer": _JSON_POINTER,
    "relative-json-pointer": _RELATIVE_JSON_POINTER,
    "duration": _DURATION,
    "regex": _REGEX,
    "byte": _BYTE,
}
"""Supported ``format`` names and the regex of each one's string content."""


ANNOTATION_FORMATS: dict[str, str] = {
    "binary": "OpenAPI: any octets (a JSON string of any content)",
    "password": "OpenAPI: a hint to obscure the value",
    "int8": "an integer format: on a string it constrains nothing",
    "int16": "an integer format: on a string it constrains nothing",
    "int32": "an integer format: on a string it constrains nothing",
    "int64": "an integer format: on a string it constrains nothing",
    "uint8": "an integer format: on a string it constrains nothing",
    "uint16": "an integer format: on a string it constrains nothing",
    "uint32": "an integer format: on a string it constrains nothing",
    "uint64": "an integer format: on a string it constrains nothing",
    "float": "OpenAPI: a number's precision, not a range or a spelling",
    "double": "OpenAPI: a number's precision, not a range or a spelling",
}
"""Known ``format`` names that constrain no string: compiled as annotations."""

_PLACEHOLDER_FORMATS = frozenset({"iri", "iri-reference", "uri-template", "idn-email"})


def _expand_placeholders(ranges: list[tuple[int, int]]) -> Node:
    """:func:`canonical_chars` of ``ranges`` with each placeholder replaced by its set."""
    out: list[tuple[int, int]] = []
    for lo, hi in ranges:
        cur = lo
        for p in sorted(_PLACEHOLDER_RANGES):
            if cur <= p <= hi:
                if cur < p:
                    out.append((cur, p - 1))
                out.extend(_PLACEHOLDER_RANGES[p])
                cur = p + 1
        if cur <= hi:
            out.append((cur, hi))
    return canonical_chars(out)


@functools.lru_cache(maxsize=None)
def format_node(name: str) -> Node | None:
    """The IR of the content of a JSON string of ``format`` ``name`` (canonical spelling:
    each character escaped as ``json.dumps`` does), or ``None`` if the format is not
    asserted (see :data:`ANNOTATION_FORMATS` and :func:`format_regex`)."""
    regex = FORMAT_REGEXES.get(name)
    if regex is None:
        return None
    return regex_to_ir(regex, _expand_placeholders if name in _PLACEHOLDER_FORMATS else canonical_chars)


def format_regex(name: str) -> str | None:
    """The regex for the content of a string of JSON Schema ``format`` ``name``.

    Args:
        name: The value of the ``format`` keyword.

    Returns:
        A regex over the unescaped string content (see the module docstring for
        each format's exact language), or ``None`` if the format is unsupported.
    """
    return FORMAT_REGEXES.get(name)
