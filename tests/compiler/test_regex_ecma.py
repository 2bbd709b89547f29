"""The regex dialect is ECMA-262's (what JSON Schema ``pattern`` means), not Python's.

Rows of (pattern, accepted, rejected) for what ECMA-262 accepts and Python spells otherwise,
and refused patterns with the offset the error points at.
"""

from __future__ import annotations

import json
import re

import pytest

from maskc.compiler.errors import EmptyLanguage, RegexSyntaxError, UnsupportedRegex
from maskc.compiler.frontends.json_schema import schema_to_ir
from maskc.compiler.ir import Grammar
from maskc.compiler.options import CompileOptions
from tests.helpers import accepts, dfa_of, ecma_pattern, regex_dfa

ECMA_TABLE = [
    (r"(?<year>\d{4})-(?<m>\d\d)", ["2024-01"], ["2024-1", "year"]),
    (r"(?<a>x)|(?<b>y)+", ["x", "yy"], ["xy", ""]),
    (r"^^ab$$", ["ab"], ["a", "abab"]),
    (r"(^^a$$|b)", ["a", "b"], ["ab"]),
    (r"a*?b+?c??d{2}?", ["bdd", "aabbcdd"], ["bd", "bccdd"]),
    (r"\cJ\0", ["\n\x00"], ["cJ0", "\n"]),
    (r"[\cA-\cC]", ["\x01", "\x03"], ["\x04", "A"]),
    (r"a|[]", ["a"], ["", "]"]),
    (r"[^]", ["a", "\n", "\u2028", "😀"], ["", "ab"]),
    (r"\uD83D\uDE00", ["😀"], ["\ud83d", ""]),
    (r"[\uD83D\uDE00-\uD83D\uDE4F]", ["😀", "🙏"], ["a", "🚀"]),
    (r"\u{1F600}", ["😀"], ["u"]),
    (r"\d\w", ["1a", "9_"], ["١a", "1é"]),
    (r".", ["a", "\t", "é"], ["\n", "\r", "\u2028", "\u2029"]),
    (r"\s\S", ["\u00a0x", "\ufeffy"], ["xx", "  "]),
    (r"a\$\^", ["a$^"], ["a"]),
]


@pytest.mark.parametrize("pattern,accepted,rejected", ECMA_TABLE)
def test_ecma_table(pattern: str, accepted: list[str], rejected: list[str]) -> None:
    dfa = regex_dfa(pattern)
    for s in accepted:
        assert dfa.accepts(s.encode("utf-8", "surrogatepass")), (pattern, s)
    for s in rejected:
        assert not dfa.accepts(s.encode("utf-8", "surrogatepass")), (pattern, s)


REFUSED = [
    (r"(?P<x>a)", 0, "Python"),
    (r"a(?P=x)", 1, "Python"),
    (r"(?#note)a", 0, "comments"),
    (r"(?i)a", 0, "inline flags"),
    (r"a**", 2, "quantifier"),
    (r"a+*", 2, "quantifier"),
    (r"a{2}*", 4, "quantifier"),
    (r"a*??", 3, "quantifier"),
    (r"a?+", 2, "quantifier"),
    (r"*a", 0, "nothing to repeat"),
    (r"a|+", 2, "nothing to repeat"),
    (r"(*)", 1, "nothing to repeat"),
    (r"^*a", 1, "nothing to repeat"),
    (r"a{2,1}", 1, "out of order"),
    (r"xy{10,9}z", 2, "out of order"),
    (r"a{,3}", 1, "{0,3}"),
    (r"a{", 1, "quantifier"),
    (r"ab)", 2, "unmatched"),
    (r"a(b(c)", 1, "missing"),
    (r"a[bc", 1, "unterminated"),
    (r"[z-a]", 1, "out of order"),
    (r"x[\x62-\x61]", 2, "out of order"),
    (r"(?<1x>a)", 3, "group name"),
    (r"\A", 0, "ECMA-262 escape"),
    (r"ab\Z", 2, "ECMA-262 escape"),
    (r"a\\", None, None),  # an escaped backslash is fine: not refused
]


@pytest.mark.parametrize("pattern,offset,words", [r for r in REFUSED if r[1] is not None])
def test_refused_with_offset(pattern: str, offset: int, words: str) -> None:
    with pytest.raises(RegexSyntaxError) as e:
        regex_dfa(pattern)
    assert e.value.offset == offset, str(e.value)
    assert words in e.value.reason
    assert e.value.pattern == pattern


def test_escaped_backslash_is_not_refused() -> None:
    assert regex_dfa("a\\\\").accepts(b"a\\")


def test_named_backreference_is_unsupported_not_invalid() -> None:
    with pytest.raises(UnsupportedRegex) as e:
        regex_dfa(r"(?<x>a)\k<x>")
    assert not isinstance(e.value, RegexSyntaxError)


def test_empty_class_alone_is_an_empty_language() -> None:
    with pytest.raises(EmptyLanguage):
        regex_dfa(r"[]")


def test_bad_bounds_in_a_schema_pattern_point_at_the_keyword() -> None:
    with pytest.raises(RegexSyntaxError) as e:
        schema_to_ir({"type": "string", "pattern": "^a{2,1}$"}, CompileOptions())
    assert e.value.offset == 2 and e.value.pointer == "/pattern"


def test_named_group_in_a_schema_pattern() -> None:
    got, _ = schema_to_ir({"type": "string", "pattern": "^(?<k>[a-z]+)-\\d$"}, CompileOptions())
    dfa = dfa_of(got.body if isinstance(got, Grammar) else got)
    assert dfa.accepts(b'"ab-1"') and not dfa.accepts(b'"ab-x"')


@pytest.mark.parametrize("pattern", ["^[a-c]{1,2}$", "b$", "^[ab0-9]*$", "[$]$", r"a\$$", "^a$|b"])
def test_the_test_oracles_dollar_is_ecmas(pattern: str) -> None:
    """``tests.helpers.ecma_pattern`` (what the generated-instance tests hand to
    ``jsonschema`` and ``hypothesis-jsonschema``) agrees with maskc's ``pattern``, where
    Python's own ``$`` would also match before a final newline."""
    texts = ["", "a", "a\n", "ab", "ab\n", "b\n", "bb", "$", "$\n", "a$", "a$\n", "ba"]
    for text in texts:
        expected = re.search(ecma_pattern(pattern), text) is not None
        assert accepts({"type": "string", "pattern": pattern}, json.dumps(text)) == expected, (pattern, text)
    assert any(re.search(pattern, t) and not re.search(ecma_pattern(pattern), t) for t in texts)
