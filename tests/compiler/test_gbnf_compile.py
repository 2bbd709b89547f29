"""GBNF end to end: ``maskc.compile_gbnf`` artifacts against the independent oracle.

For each llama.cpp grammar in ``../shared/gbnf``: strings the oracle generates are accepted
token by token (byte tokenizer and DeepSeek's BPE) and can end; one-byte mutants get the
matcher's verdict that the oracle gives; random walks under the mask only ever emit
strings of the language (soundness). Generation depth stays well below the artifact's
nesting bound (``max_depth`` 32).
"""

from __future__ import annotations

import random
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

import maskc
from maskc.compiler.errors import GrammarSyntaxError
from maskc.compiler.vocab import Vocabulary
from tests import gbnf_oracle as oracle
from tests.compiler.test_gbnf import shared_gbnf_dir, shared_grammars

GEN_DEPTH = 8  # rule nesting of generated strings; the artifact's bound is 32
NAMES = ["chess.gbnf", "japanese.gbnf", "json.gbnf", "list.gbnf"]


def grammar_text(name: str) -> str:
    path = shared_gbnf_dir() / name
    if not path.is_file():
        pytest.skip(f"{path} is absent (set MASKC_SHARED_DIR to ../shared)")
    return path.read_text(encoding="utf-8")


_ARTIFACTS: dict[tuple[str, int], tuple[Vocabulary, maskc.Artifact]] = {}


def _compiled(text: str, vocab: Vocabulary) -> maskc.Artifact:
    """One compile per (grammar, tokenizer) for the whole module."""
    key = (text, id(vocab))
    if key not in _ARTIFACTS:
        _ARTIFACTS[key] = (vocab, maskc.compile_gbnf(text, vocab))
    return _ARTIFACTS[key][1]


@lru_cache(maxsize=None)
def _reference(text: str) -> oracle.OracleGrammar:
    return oracle.parse(text)


def matcher_accepts(art: maskc.Artifact, token_ids: list[int]) -> bool:
    """All tokens accepted, in order, and the output can end there."""
    m = art.matcher()
    return all(m.accept_token(t) for t in token_ids) and m.can_terminate()


def check_mask_agrees(m: maskc.Matcher, art: maskc.Artifact, next_id: int | None) -> None:
    """The bitmask, ``allowed_token_ids`` and the next token of a known-good string agree."""
    bitmask = maskc.allocate_bitmask_np(2, art.vocab_size)
    m.fill_next_token_bitmask(bitmask, 1)
    allowed = maskc.unpack_bitmask(bitmask[1], art.vocab_size)
    assert np.array_equal(np.flatnonzero(allowed), np.sort(m.allowed_token_ids()))
    if next_id is not None:
        assert allowed[next_id], next_id


@pytest.mark.parametrize("name", NAMES)
def test_generated_strings_are_accepted_byte_by_byte(name: str, byte_vocab: Vocabulary) -> None:
    text = grammar_text(name)
    art, ref = _compiled(text, byte_vocab), _reference(text)
    rng = random.Random(f"gen-{name}")
    eos = byte_vocab.eos_ids[0]
    for k in range(30):
        data = oracle.generate(ref, rng, GEN_DEPTH)
        m = art.matcher()
        for i, b in enumerate(data):
            if k < 5:
                check_mask_agrees(m, art, b)
            assert m.accept_token(b), (name, data, i)
        assert m.can_terminate(), (name, data)
        if k < 5:
            check_mask_agrees(m, art, eos)
        assert m.accept_token(eos) and m.is_terminated()


@pytest.mark.parametrize("name", NAMES)
def test_mutants_get_the_oracle_verdict(name: str, byte_vocab: Vocabulary) -> None:
    text = grammar_text(name)
    art, ref = _compiled(text, byte_vocab), _reference(text)
    rng = random.Random(f"mut-{name}")
    for _ in range(30):
        data = oracle.mutate(oracle.generate(ref, rng, GEN_DEPTH), rng)
        assert matcher_accepts(art, list(data)) == oracle.recognize(ref, data), (name, data)


@pytest.mark.parametrize("name", NAMES)
def test_random_walks_under_the_mask_stay_in_the_language(name: str, byte_vocab: Vocabulary) -> None:
    """Soundness: from a prefix of a generated string, follow random allowed tokens."""
    text = grammar_text(name)
    art, ref = _compiled(text, byte_vocab), _reference(text)
    rng = random.Random(f"walk-{name}")
    eos = byte_vocab.eos_ids[0]
    ended = 0
    for k in range(20):
        data = oracle.generate(ref, rng, GEN_DEPTH)
        out = bytearray(data if k == 0 else data[: rng.randrange(len(data) + 1)])
        m = art.matcher()
        assert all(m.accept_token(b) for b in out)
        for _ in range(40):
            allowed = [int(t) for t in m.allowed_token_ids()]
            assert allowed, (name, bytes(out))  # termination: never stuck
            others = [t for t in allowed if t != eos]
            if eos in allowed and (not others or rng.random() < 0.5):
                break
            t = rng.choice(others)
            assert m.accept_token(t), (name, bytes(out), t)
            out.append(t)
        if m.can_terminate():
            ended += 1
            assert oracle.recognize(ref, bytes(out)), (name, bytes(out))
    assert ended >= 1


@pytest.mark.parametrize("name", NAMES)
def test_generated_strings_are_accepted_as_deepseek_tokens(name: str, deepseek: Vocabulary) -> None:
    text = grammar_text(name)
    art, ref = _compiled(text, deepseek), _reference(text)
    rng = random.Random(f"bpe-{name}")
    for k in range(10):
        data = oracle.generate(ref, rng, GEN_DEPTH)
        ids = deepseek.encode(data.decode("utf-8"))
        assert b"".join(deepseek.token_bytes[t] for t in ids) == data
        m = art.matcher()
        for i, t in enumerate(ids):
            if k < 2:
                check_mask_agrees(m, art, t)
            assert m.accept_token(t), (name, data, i, deepseek.token_bytes[t])
        assert m.can_terminate(), (name, data)
        assert m.accept_token(deepseek.eos_ids[0])


def test_rollback_then_the_same_tokens_again(byte_vocab: Vocabulary) -> None:
    text = grammar_text("json.gbnf")
    art, ref = _compiled(text, byte_vocab), _reference(text)
    rng = random.Random("rollback")
    for _ in range(10):
        data = oracle.generate(ref, rng, GEN_DEPTH)
        m = art.matcher()
        assert all(m.accept_token(b) for b in data)
        k = rng.randrange(len(data) + 1)
        m.rollback(k)
        assert m.num_accepted == len(data) - k
        assert all(m.accept_token(b) for b in data[len(data) - k :])
        assert m.can_terminate()


@pytest.mark.parametrize(
    "data,ok",
    [
        (b'{"a": ' + b"[" * 6 + b"]" * 6 + b"}", True),
        (b'{"a": [{"b": [1, {"c": []}]}]}', True),
        (b'{"a": [[[]]}', False),
        (b'{"a": [1,]}', False),
        (b'{"a": "\xff"}', False),
        (b'{"a": "\xc3\xa9"}', True),
    ],
)
def test_json_nesting(data: bytes, ok: bool, byte_vocab: Vocabulary) -> None:
    text = grammar_text("json.gbnf")
    assert oracle.recognize(_reference(text), data) == ok
    assert matcher_accepts(_compiled(text, byte_vocab), list(data)) == ok


def test_a_bad_grammar_is_a_syntax_error(byte_vocab: Vocabulary) -> None:
    with pytest.raises(GrammarSyntaxError) as info:
        maskc.compile_gbnf('root ::= "a" missing', byte_vocab)
    assert (info.value.line, info.value.column) == (1, 14)


def test_every_shared_grammar_compiles(byte_vocab: Vocabulary) -> None:
    paths: list[Path] = shared_grammars()
    if not paths:
        pytest.skip(f"no GBNF grammars at {shared_gbnf_dir()}")
    for path in paths:
        art = _compiled(path.read_text(encoding="utf-8"), byte_vocab)
        assert art.vocab_size == byte_vocab.vocab_size
