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


@pytest.mark.parametrize("source", [
    ("gbnf", 'root ::= "[" root "]" | "a" | "[" root "," root "]"'),
    ("json_schema", {"$defs": {"n": {"type": "object", "properties": {
        "a": {"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 3},
        "b": {"type": "string", "maxLength": 4}}}}, "$ref": "#/$defs/n"}),
    ("json_schema", {"type": "object", "properties": {"x": {}, "y": {"type": "array", "items": {}}}}),
    ("regex", "(-(a{3,30}|1{20,50}):){5,40}"),
    ("json_schema", {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 14}),
], ids=["gbnf", "recursive schema", "free-form values", "nested counts", "counted strings"])
def test_any_sequence_of_calls_leaves_what_replaying_its_input_gives(source: tuple[str, object],
                                                                     toy_vocab: Vocabulary) -> None:
    # Random tokens, raw bytes, rollbacks, resets and fills (one row, and a batch): after
    # each call the matcher answers as a new one that is given again what it accepted.
    import random

    from maskc.artifacts.matcher import fill_next_token_bitmasks

    kind, text = source
    compile_ = {"gbnf": maskc.compile_gbnf, "json_schema": maskc.compile_json_schema, "regex": maskc.compile_regex}
    art = compile_[kind](text, toy_vocab, cache=False)
    rng = random.Random(3)
    pieces = ["a", "[", "]", ",", '{"', '"a":', "[[", "ab", "-", "1", ":", '"b":"ab"', "}", "null", "true", '"a"']
    one, batch = np.zeros((3, 2), dtype=np.int32), np.zeros((3, 2), dtype=np.int32)
    for _walk in range(10):
        m = art.matcher()
        given: list[tuple[str, object]] = []  # since the last reset: ("token", id) or ("bytes", text)
        for step in range(120):
            op = rng.random()
            if op < 0.6:
                allowed = m.allowed_token_ids().tolist()
                t = rng.choice(allowed) if allowed and rng.random() < 0.9 else rng.randrange(toy_vocab.vocab_size)
                if m.accept_token(t):
                    given.append(("token", t))
            elif op < 0.7:  # (raw bytes are not undone: only the tokens after the last of them)
                tokens = next((k for k, (what, _) in enumerate(reversed(given)) if what != "token"), len(given))
                n = rng.randint(0, tokens)
                m.rollback(n)
                del given[len(given) - n:]
            elif op < 0.75:
                m.reset()
                given = []
            elif op < 0.85:
                piece = rng.choice(pieces)
                if m.accept_string(piece):
                    given.append(("bytes", piece))
            else:
                i = rng.randrange(3)
                m.fill_next_token_bitmask(one, i)
                fill_next_token_bitmasks([m], batch, [i])
                assert np.array_equal(one[i], batch[i]), step
                bits = np.unpackbits(one[i].view(np.uint8), bitorder="little")[: toy_vocab.vocab_size]
                assert np.array_equal(np.flatnonzero(bits), m.allowed_token_ids()), step
            again = art.matcher()
            for what, x in given:
                assert again.accept_token(x) if what == "token" else again.accept_string(x)  # type: ignore[arg-type]
            assert np.array_equal(again.allowed_token_ids(), m.allowed_token_ids()), (step, given[-4:])
            assert (again.can_terminate(), again.is_terminated(), again.find_jump_forward_bytes()) == \
                (m.can_terminate(), m.is_terminated(), m.find_jump_forward_bytes()), step
