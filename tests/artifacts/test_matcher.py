"""Runtime matcher, torch bitmasks and the transformers LogitsProcessor."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import maskc
from maskc.compiler.vocab import Vocabulary


@pytest.fixture
def art(toy_vocab: Vocabulary) -> maskc.Artifact:
    schema = {"type": "object", "properties": {"a": {"enum": [1, 2]}, "b": {"type": "boolean"}}, "required": ["a", "b"]}
    return maskc.compile_json_schema(schema, toy_vocab)


def ids(v: Vocabulary, *toks: str) -> list[int]:
    out = []
    for t in toks:
        i = v.token_id(t)
        assert i is not None, t
        out.append(i)
    return out


def test_accept_rollback_reset(art: maskc.Artifact, toy_vocab: Vocabulary) -> None:
    m = art.matcher()
    seq = ids(toy_vocab, '{"', "a", '":', "1", ",", '"b', '":', "true", "}")
    for t in seq[:4]:
        assert m.accept_token(t)
    before = m.state
    assert not m.accept_token(ids(toy_vocab, "2")[0])  # rejected: state unchanged
    assert m.state == before
    m.rollback(2)
    assert m.num_accepted == 2
    for t in seq[2:]:
        assert m.accept_token(t)
    assert m.can_terminate() and not m.is_terminated()
    assert m.accept_token(toy_vocab.eos_ids[0])
    assert m.is_terminated()
    assert not m.accept_token(seq[0])
    m.reset()
    assert m.num_accepted == 0 and m.accept_token(seq[0])


def test_eos_only_when_complete(art: maskc.Artifact, toy_vocab: Vocabulary) -> None:
    m = art.matcher()
    assert not m.accept_token(toy_vocab.eos_ids[0])
    assert not m.accept_token(toy_vocab.token_id("<pad>"))  # type: ignore[arg-type]
    assert not m.accept_token(art.vocab_size - 1)  # a padding id: model behaviour, not misuse


def test_jump_forward(art: maskc.Artifact, toy_vocab: Vocabulary) -> None:
    m = art.matcher()
    assert m.find_jump_forward_string() == '{"a":'
    assert m.accept_token(ids(toy_vocab, '{"')[0])
    assert m.find_jump_forward_string() == 'a":'


def test_numpy_bitmask_fill(art: maskc.Artifact, toy_vocab: Vocabulary) -> None:
    m = art.matcher()
    bm = maskc.allocate_bitmask_np(2, art.vocab_size)
    m.fill_next_token_bitmask(bm, 1)
    allowed = np.flatnonzero(maskc.unpack_bitmask(bm[1], art.vocab_size))
    assert set(allowed.tolist()) == set(ids(toy_vocab, "{", '{"'))
    assert (bm[0] == -1).all()
    with pytest.raises(ValueError):
        m.fill_next_token_bitmask(np.zeros((1, 3), dtype=np.int32))


def test_torch_bitmask_apply(art: maskc.Artifact, toy_vocab: Vocabulary) -> None:
    torch = pytest.importorskip("torch")
    m = art.matcher()
    bm = maskc.allocate_token_bitmask(1, art.vocab_size)
    m.fill_next_token_bitmask(bm)
    logits = torch.zeros(1, art.vocab_size + 7)  # padded logits width
    maskc.apply_token_bitmask_inplace(logits, bm)
    finite = torch.isfinite(logits[0]).nonzero().flatten().tolist()
    assert set(finite) == set(ids(toy_vocab, "{", '{"'))


def test_logits_processor_never_crashes_on_rejected_token(art: maskc.Artifact, toy_vocab: Vocabulary) -> None:
    torch = pytest.importorskip("torch")
    proc = maskc.LogitsProcessor(art)
    prompt = torch.tensor([[5, 6], [5, 6]])
    scores = torch.zeros(2, art.vocab_size)
    out = proc(prompt, scores.clone())
    assert torch.isfinite(out[0]).sum() == 2
    bad = ids(toy_vocab, "}")[0]
    good = ids(toy_vocab, '{"')[0]
    step = torch.cat([prompt, torch.tensor([[good], [bad]])], dim=1)
    out = proc(step, torch.zeros(2, art.vocab_size))
    assert proc.failed == [False, True] and proc.rejected[1] == bad
    assert torch.isfinite(out[1]).nonzero().flatten().tolist() == list(toy_vocab.eos_ids)
    assert torch.isfinite(out[0]).nonzero().flatten().tolist() == ids(toy_vocab, "a")


def test_matcher_needs_tokenizer(tmp_path: Path, art: maskc.Artifact) -> None:
    p = art.save(tmp_path / "a.safetensors")
    bare = maskc.load_artifact(p)
    with pytest.raises(ValueError, match="tokenizer"):
        bare.matcher()
