"""Compile refuses a grammar whole tokens cannot spell: no token path from the start reaches EOS."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import maskc
from maskc.cli import app
from maskc.cli.errors import EXIT_FAILED, rule_for
from maskc.compiler.errors import UnspellableGrammar
from maskc.compiler.vocab import Vocabulary

AB = ["a", "b", "<eos>"]


def _vocab(tokens: list[str]) -> Vocabulary:
    return Vocabulary.from_tokens(tokens, eos=tokens[-1], name="toy")


@pytest.mark.parametrize(("tokens", "pattern", "prefix", "example"), [
    (AB, "ü", "ü", "ü"),  # the start allows no token, not even EOS
    (AB, "a*ü", "ü", "ü"),  # tokens loop on "a" but never write the "ü" that ends it
    (["ab", "a", "c", "<eos>"], "abü", "abü", "abü"),  # "ab" is written, "ü" is not
    (["ab", "<eos>"], "a(ba)*", "", "a"),  # never stuck, but only even lengths: never an end
])
def test_unspellable_regex_is_refused(tokens: list[str], pattern: str, prefix: str,
                                      example: str) -> None:
    with pytest.raises(UnspellableGrammar) as info:
        maskc.compile_regex(pattern, _vocab(tokens))
    err = info.value
    assert err.prefix == prefix.encode() and err.example == example.encode()
    assert err.tokenizer == "toy" and "EOS is never allowed" in err.message and err.hint


def test_unspellable_schema_names_the_first_byte_it_needs() -> None:
    with pytest.raises(UnspellableGrammar, match="cannot spell") as info:
        maskc.compile_json_schema({"type": "boolean"}, _vocab(AB))
    assert info.value.prefix == b"t" and info.value.example == b"true"


@pytest.mark.parametrize(("tokens", "pattern"), [
    (["ab", "c", "EOS"], "(ab)+c"),  # no one-byte "a" or "b": the token search proves it
    (["ab", "a", "c", "<eos>"], "ab|aü"),  # one branch is unspellable, the other is enough
    (["a", "b", "<eos>"], "(a|b)*"),  # the start itself can end
])
def test_spellable_regex_compiles(tokens: list[str], pattern: str) -> None:
    vocab = _vocab(tokens)
    art = maskc.compile_regex(pattern, vocab)
    assert art.matcher().can_terminate() or art.allowed_tokens(0).size


def test_recursive_grammar_whose_start_allows_nothing_is_refused() -> None:
    gbnf = 'root ::= "(" root ")" | "x"'
    with pytest.raises(UnspellableGrammar, match="at the start of the output"):
        maskc.compile_gbnf(gbnf, _vocab(AB))
    assert maskc.compile_gbnf(gbnf, _vocab(["(", ")", "x", "<eos>"])).vocab_size == 4


def test_boolean_schema_true_on_a_two_letter_token_list(tmp_path: Path) -> None:
    # schema `true` (any JSON value) is recursive: the pushdown start check refuses it
    path = tmp_path / "ab.json"
    path.write_text(json.dumps({"tokens": AB, "eos": "<eos>"}))
    vocab = maskc.load_tokenizer(path)
    with pytest.raises(UnspellableGrammar):
        maskc.compile_json_schema(True, vocab)


def test_cli_exits_1_with_the_unspellable_prefix(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASKC_CACHE_DIR", str(tmp_path / "cache"))
    vocab = tmp_path / "ab.json"
    vocab.write_text(json.dumps({"tokens": AB, "eos": "<eos>"}))
    args = ["compile", "--regex", "ü", "-t", str(vocab), "-o", str(tmp_path / "out")]
    human = CliRunner().invoke(app, args)
    assert human.exit_code == 1 and "Traceback" not in human.output
    assert "cannot spell" in human.output
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 1
    doc: dict[str, Any] = json.loads(result.stdout)
    assert doc["results"][0]["error"]["type"] == "UnspellableGrammar"


def test_error_table_maps_unspellable_to_a_compile_failure() -> None:
    assert rule_for(UnspellableGrammar("x", tokenizer="t")).code == EXIT_FAILED


def test_normal_schema_still_compiles_on_deepseek(deepseek: Vocabulary) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "café": {"enum": ["ü", "東京"]}, "n": {"type": "integer"}},
        "required": ["name"],
    }
    art = maskc.compile_json_schema(schema, deepseek)
    m = art.matcher()
    for t in deepseek.encode('{"name":"Zoë","café":"東京"}'):
        assert m.accept_token(t)
    assert m.can_terminate()
