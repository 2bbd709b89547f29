"""Regex front end: tables of (pattern, accepted, rejected) and generated strings."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from maskc.compiler.errors import RegexSyntaxError, UnsupportedRegex
from tests.helpers import regex_dfa

TABLE = [
    (r"abc", ["abc"], ["ab", "abcd", ""]),
    (r"a|bc", ["a", "bc"], ["abc", "b"]),
    (r"[a-c]+", ["a", "cab"], ["", "d"]),
    (r"[^a]", ["b", "é", "日", "😀"], ["a", "", "bb"]),
    (r"\d{2,3}", ["12", "123"], ["1", "1234", "١٢"]),
    (r"x?y*", ["", "x", "yyy", "xy"], ["xx", "yx"]),
    (r"(ab){2}", ["abab"], ["ab", "ababab"]),
    (r"\u00e9+", ["é", "éé"], ["e", ""]),
    (r"[\u4e00-\u9fff]{2}", ["日本"], ["日", "ab"]),
    (r".", ["a", "é", " "], ["\n", "\r", "\u2028", ""]),
    (r"\s", [" ", "\t", "\u00a0", "\u3000"], ["a", ""]),
    (r"\S", ["a"], [" ", "\u00a0"]),
    (r"\w+", ["abc_1"], ["a-b"]),
    (r"[-.]", ["-", "."], ["a"]),
    (r"^ab$", ["ab"], ["xab"]),
]


@pytest.mark.parametrize("pattern,accepted,rejected", TABLE)
def test_regex_table(pattern: str, accepted: list[str], rejected: list[str]) -> None:
    dfa = regex_dfa(pattern)
    for s in accepted:
        assert dfa.accepts(s.encode()), (pattern, s)
    for s in rejected:
        assert not dfa.accepts(s.encode()), (pattern, s)


def test_surrogates_and_invalid_utf8_rejected() -> None:
    dfa = regex_dfa(r".*")
    assert dfa.accepts("a😀".encode())
    assert not dfa.accepts(b"\xed\xa0\x80")  # an encoded surrogate
    assert not dfa.accepts(b"\xc0\xaf")  # overlong '/'
    assert not dfa.accepts(b"\xff")


@pytest.mark.parametrize("bad", [r"a(b", r"[b-a]", r"a{2,1}x("])
def test_bad_regex_is_a_clear_error(bad: str) -> None:
    with pytest.raises(RegexSyntaxError) as e:
        regex_dfa(bad)
    assert repr(bad)[1:-1] in str(e.value) or bad in str(e.value)


@pytest.mark.parametrize("unsupported", [r"(?<=a)b", r"a^b", r"a(?=b)"])
def test_unsupported_construct_is_not_a_syntax_error(unsupported: str) -> None:
    with pytest.raises(UnsupportedRegex) as e:
        regex_dfa(unsupported)
    assert not isinstance(e.value, RegexSyntaxError)
    assert unsupported in str(e.value) and e.value.hint


PATTERNS = [r"[a-z]{1,5}(-[0-9]+)?", r"(foo|bar)+baz", r"[^\n]{0,4}x", r"\d+(\.\d{1,2})?", r"[αβγ]*日?"]


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_generated_strings_accepted(pattern: str, data: st.DataObject) -> None:
    # ECMA-262 classes are ASCII (\d, \w), as Python's re.ASCII
    s = data.draw(st.from_regex(re.compile(pattern, re.ASCII), fullmatch=True).filter(lambda x: "\n" not in x))
    assert regex_dfa(pattern).accepts(s.encode())


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=60, deadline=None)
@given(s=st.text(alphabet="abfoxyz-0123.9αβγ日\n", max_size=8))
def test_agrees_with_python_re(pattern: str, s: str) -> None:
    assert regex_dfa(pattern).accepts(s.encode()) == (re.fullmatch(pattern, s, re.ASCII) is not None)


@pytest.mark.parametrize("pattern,accepted,rejected", [
    (r"^$|(^(?:\S+\s+){0,2}\S+$)", ["", "a b", "ab cd ef"], [" a", "a b c d"]),
    (r"(^([0-9]+)\.([0-9]+)$)|(^x$)", ["1.2", "x"], ["1.2.3", "ax"]),
    (r"^([0-9x]+\.[0-9x]+$|\%V\%)", ["1.x", "%V%", "%V%tail"], ["1.2.3", "a%V%"]),
    (r"^([^,]|$)", ["", "a", "ab"], [",", ",a"]),
])
def test_anchors_inside_whole_branch_groups(pattern: str, accepted: list[str], rejected: list[str]) -> None:
    from maskc.compiler.frontends.regex import regex_to_ir
    from tests.helpers import dfa_of

    dfa = dfa_of(regex_to_ir(pattern, search=True))
    for s in accepted:
        assert dfa.accepts(s.encode()), (pattern, s)
        assert re.search(pattern, s), (pattern, s)
    for s in rejected:
        assert not dfa.accepts(s.encode()), (pattern, s)
        assert not re.search(pattern, s), (pattern, s)


SEARCH_PATTERNS = [r"ab|ba|c", r"^ab|ba|c$|^c$|b", r"^a|^b|x$|y$", r"(^ab$|ba)|c+", r"a|^|b", r"^(ab|c)|d$"]


@pytest.mark.parametrize("pattern", SEARCH_PATTERNS)
@settings(max_examples=120, deadline=None)
@given(s=st.text(alphabet="abcdxy", max_size=6))
def test_search_over_branches_agrees_with_python_re(pattern: str, s: str) -> None:
    """A search wraps each group of equally anchored branches once: the language is every
    branch's search, as Python's ``re.search`` finds it (no line terminators drawn)."""
    from maskc.compiler.frontends.regex import regex_to_ir
    from tests.helpers import dfa_of

    assert dfa_of(regex_to_ir(pattern, search=True)).accepts(s.encode()) == (re.search(pattern, s) is not None)


def test_a_search_for_many_keywords_stays_small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unanchored branches share one ``.*`` on each side: the subset construction does not
    track, branch by branch, which keyword has been seen (2^17 subsets for 17 keywords)."""
    from maskc.compiler import dfa as dfa_module
    from maskc.compiler.frontends.regex import regex_to_ir
    from tests.helpers import dfa_of

    words = [f"INTERVAL_{w}" for w in "TICK M1 M2 M3 M4 M5 M6 M10 M15 M20 M30 H1 H2 H4 D1 W1 MN1".split()]
    sizes: list[int] = []
    real = dfa_module._subsets

    def counted(*args: object, **kwargs: object) -> object:
        got = real(*args, **kwargs)  # type: ignore[arg-type]
        sizes.append(int(got[0].shape[0]))
        return got

    monkeypatch.setattr(dfa_module, "_subsets", counted)
    dfa = dfa_of(regex_to_ir("|".join(words), search=True))
    assert max(sizes) < 1000
    assert dfa.accepts(b"xxINTERVAL_M15yy") and dfa.accepts(b"INTERVAL_MN1")
    assert not dfa.accepts(b"INTERVAL_M7") and not dfa.accepts(b"INTERVAL_")
