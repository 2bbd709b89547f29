"""Real tokenizers: sample instances, tokenized by the tokenizer itself, walk to EOS.

For DeepSeek (128k byte-level BPE), SmolLM2 (GGUF, 49k) and a SentencePiece byte-fallback
model (Mistral, 32k, encoded without the dummy-prefix space as a continuation is), every
valid instance of the sample schemas is accepted token by token and ends where EOS is
allowed; every invalid one is rejected.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import maskc
from maskc.compiler.vocab import Vocabulary
from tests.maskbench import serialize

SAMPLES = Path(__file__).resolve().parents[2] / "sample_schemas"
# valid and invalid instances of each sample schema (kept out of sample_schemas/, which holds schemas only)
EXAMPLES: dict[str, dict[str, list[Any]]] = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "sample_examples.json").read_text())
# a spread of features: enums, formats, nested arrays, $ref, anyOf, patterns
CHOSEN = [
    "support_ticket_triage.json",
    "invoice_extraction.json",
    "calendar_event.json",
    "address_book_entry.json",
    "sql_query_plan.json",
    "user_profile.json",
]

_ARTS: dict[tuple[str, str], maskc.Artifact] = {}


def artifact(name: str, tok: Vocabulary) -> maskc.Artifact:
    key = (name, tok.fingerprint)
    if key not in _ARTS:
        schema = json.loads((SAMPLES / name).read_text())
        _ARTS[key] = maskc.compile_json_schema(schema, tok)
    return _ARTS[key]


def walk(art: maskc.Artifact, tok: Vocabulary, text: bytes) -> bool:
    """Accept token by token, checking each token is in the filled mask; then EOS."""
    ids = tok.encode(text.decode())
    assert b"".join(tok.token_bytes[i] for i in ids) == text
    m = art.matcher()
    bm = maskc.allocate_bitmask_np(1, art.vocab_size)
    for t in ids:
        m.fill_next_token_bitmask(bm)
        if not (bm[0, t // 32] >> (t % 32)) & 1:
            return False
        assert m.accept_token(t)
    m.fill_next_token_bitmask(bm)
    eos = tok.eos_ids[0]
    return bool((bm[0, eos // 32] >> (eos % 32)) & 1) and m.accept_token(eos)


def _check(name: str, tok: Vocabulary) -> None:
    art = artifact(name, tok)
    schema = json.loads((SAMPLES / name).read_text())
    for inst in EXAMPLES[name]["valid"]:
        assert walk(art, tok, serialize(inst, schema)), (name, inst)
    for inst in EXAMPLES[name]["invalid"]:
        assert not walk(art, tok, serialize(inst, schema)), (name, inst)


@pytest.mark.parametrize("name", CHOSEN)
def test_deepseek(name: str, deepseek: Vocabulary) -> None:
    _check(name, deepseek)


@pytest.mark.parametrize("name", CHOSEN[:4])
def test_smollm2_gguf(name: str, smollm2: Vocabulary) -> None:
    _check(name, smollm2)


@pytest.mark.parametrize("name", CHOSEN[:4])
def test_sentencepiece_byte_fallback(name: str, mistral_sp: Vocabulary) -> None:
    _check(name, mistral_sp)


def test_special_tokens_never_inside_strings(deepseek: Vocabulary) -> None:
    art = artifact("support_ticket_triage.json", deepseek)
    specials = np.fromiter(deepseek.special_ids, dtype=np.int64)
    eos = set(deepseek.eos_ids)
    for m in range(art.num_masks):
        leaked = set(np.intersect1d(art.masks.allowed_ids(m), specials).tolist())
        assert leaked <= eos, (m, sorted(leaked)[:5])
    # EOS exactly in accepting states
    eos_id = deepseek.eos_ids[0]
    has_eos = np.array([eos_id in set(art.masks.allowed_ids(m).tolist()) for m in range(art.num_masks)])
    assert np.array_equal(has_eos[art.state_mask], art.dfa.accepting)
