"""Fixtures shared by the runtime tests."""

from __future__ import annotations

import pytest

from maskc.compiler.vocab import Vocabulary
from tests.compiler.test_pushdown import TOKENS


@pytest.fixture(scope="module")
def pda_vocab() -> Vocabulary:
    """The toy vocabulary the pushdown grammars of ``tests/compiler/test_pushdown.py`` spell."""
    return Vocabulary.from_tokens(TOKENS, eos="<eos>", name="pda-toy", vocab_size=len(TOKENS) + 3)
