"""``alt`` dedupes by hash (linear), keeping first occurrences in order; big enums and choice lists.

No timing here: the 10k-member enum only has to compile and hold exactly its members.
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

import maskc
from maskc.compiler.ir import NOTHING, Alt, ByteSet, Repeat, Seq, alt, byte_set, lit, seq, star
from maskc.compiler.vocab import Vocabulary
from tests.helpers import dfa_of


def test_alt_dedupes_in_first_occurrence_order_and_merges_byte_sets() -> None:
    abc, abd, q = lit("abc"), lit("abd"), star(lit("q"))
    got = alt(abc, abd, lit("abc"), byte_set(b"x"), alt(abd, q), byte_set(b"y"), Seq(tuple(lit("abc").items)))
    assert isinstance(got, Alt)
    assert got.items == (abc, abd, ByteSet(((120, 121),)), q)
    assert alt(lit("ab"), lit("ab")) == lit("ab") and alt() == NOTHING


def test_equal_nodes_hash_equal_and_survive_pickling() -> None:
    a = seq(lit("ab"), Repeat(alt(lit("x"), lit("yz")), 1, 3))
    b = seq(lit("ab"), Repeat(alt(lit("x"), lit("yz")), 1, 3))
    assert a is not b and a == b and hash(a) == hash(b)
    assert a != seq(lit("ab"), Repeat(alt(lit("x"), lit("yz")), 1, 4))
    assert pickle.loads(pickle.dumps(a)) == a and copy.deepcopy(a) == a
    assert len({a, b, lit("ab")}) == 2


def test_alt_compares_few_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    # a list membership test compared every new alternative with every kept one: n²/2 deep
    # comparisons for an n-member enum (a 10k enum took a minute); a hash lookup compares
    # only on a hash match
    calls = 0
    original = Seq.__eq__

    def counting(self: Seq, other: object) -> bool:
        nonlocal calls
        calls += 1
        return bool(original(self, other))

    monkeypatch.setattr(Seq, "__eq__", counting)
    words = [lit(f"w{i:04d}") for i in range(2000)]
    got = alt(*words, *words[:100])
    assert isinstance(got, Alt) and len(got.items) == 2000
    assert calls < 10 * len(words), calls


def test_dedup_keeps_the_language() -> None:
    words = ["ab", "abc", "b", "ab", "abc", "", "b"]
    dfa = dfa_of(alt(*(lit(w) for w in words)))
    for w in ["ab", "abc", "b", ""]:
        assert dfa.accepts(w.encode())
    for w in ["a", "abcd", "bb", "abab"]:
        assert not dfa.accepts(w.encode())


MEMBERS = [f"w{i:04d}" for i in range(10_000)]


@pytest.fixture(scope="module")
def digits_vocab() -> Vocabulary:
    return Vocabulary.from_tokens([*'"w0123456789x', "<eos>"], eos="<eos>", name="digits")


def _accepts(art: maskc.Artifact, vocab: Vocabulary, text: str) -> bool:
    m = art.matcher()
    return all(m.accept_token(t) for t in vocab.encode(text)) and m.accept_token(vocab.eos_ids[0])


def test_a_10k_member_enum_holds_exactly_its_members(digits_vocab: Vocabulary) -> None:
    art = maskc.compile_json_schema({"enum": MEMBERS + MEMBERS[:50]}, digits_vocab)
    for w in (MEMBERS[0], MEMBERS[4321], MEMBERS[-1]):
        assert _accepts(art, digits_vocab, f'"{w}"'), w
    for w in ("w10000", "w999", "x0000", "w0000x"):
        assert not _accepts(art, digits_vocab, f'"{w}"'), w


def test_a_10k_choice_list_holds_exactly_its_members(digits_vocab: Vocabulary) -> None:
    art = maskc.compile_choice(MEMBERS, digits_vocab)
    assert _accepts(art, digits_vocab, "w0000") and _accepts(art, digits_vocab, "w9999")
    assert not _accepts(art, digits_vocab, "w123") and not _accepts(art, digits_vocab, '"w0000"')


@pytest.mark.parametrize("bad,words", [("yes", "single str"), (b"yes", "single bytes"),
                                       (["a", 1], "item 1 is int"), (["a", "b", None], "item 2 is NoneType")])
def test_compile_choice_wants_a_list_of_strings(digits_vocab: Vocabulary, bad: Any, words: str) -> None:
    with pytest.raises(TypeError) as e:
        maskc.compile_choice(bad, digits_vocab)
    assert "list of strings" in str(e.value) and words in str(e.value)
