"""API misuse raises TypeError/ValueError saying expected vs got; model behaviour never raises.

Every matcher case runs on both kinds: a :class:`Matcher` (a flat JSON Schema) and a
:class:`PushdownMatcher` (a recursive GBNF grammar), with numpy arrays and torch tensors.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import maskc
from maskc.compiler.vocab import Vocabulary

torch = pytest.importorskip("torch")

PAREN_TOKENS = ["(", ")", "x", "((", "))", "<eos>"]


@pytest.fixture(scope="module")
def flat_art(toy_vocab: Vocabulary) -> maskc.Artifact:
    schema = {"type": "object", "properties": {"a": {"enum": [1, 2]}}, "required": ["a"]}
    return maskc.compile_json_schema(schema, toy_vocab)


@pytest.fixture(scope="module")
def paren_vocab() -> Vocabulary:
    # vocab_size 40: two bitmask words per row, padding ids 6..39
    return Vocabulary.from_tokens(PAREN_TOKENS, eos="<eos>", name="paren", vocab_size=40)


@pytest.fixture(scope="module")
def pda_art(paren_vocab: Vocabulary) -> maskc.Artifact:
    return maskc.compile_gbnf('root ::= "(" root ")" | "x"', paren_vocab)


@pytest.fixture(params=["flat", "pushdown"])
def art(request: pytest.FixtureRequest, flat_art: maskc.Artifact, pda_art: maskc.Artifact) -> maskc.Artifact:
    return flat_art if request.param == "flat" else pda_art


def first_allowed(m: Any) -> int:
    return int(m.allowed_token_ids()[0])


ZEROS: dict[str, Callable[..., Any]] = {
    "numpy": lambda shape, dtype=np.int32: np.zeros(shape, dtype=dtype),
    "torch": lambda shape, dtype=None: torch.zeros(shape, dtype=dtype or torch.int32),
}


# -- bitmasks ----------------------------------------------------------------------------------


def test_matcher_kinds(flat_art: maskc.Artifact, pda_art: maskc.Artifact) -> None:
    assert type(flat_art.matcher()).__name__ == "Matcher"
    assert type(pda_art.matcher()).__name__ == "PushdownMatcher"


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, np.uint32, np.dtype(">i4")])
def test_numpy_bitmask_of_wrong_dtype_is_refused(art: maskc.Artifact, dtype: Any) -> None:
    words = (art.vocab_size + 31) // 32
    bm = np.zeros((1, words), dtype=dtype)
    with pytest.raises(TypeError, match="int32.*got " + re.escape(str(np.dtype(dtype)))):
        art.matcher().fill_next_token_bitmask(bm)
    assert not bm.any()  # nothing written


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "uint8"])
def test_torch_bitmask_of_wrong_dtype_is_refused(art: maskc.Artifact, dtype: str) -> None:
    words = (art.vocab_size + 31) // 32
    bm = torch.zeros((1, words), dtype=getattr(torch, dtype))
    with pytest.raises(TypeError, match=f"int32, got torch.{dtype}"):
        art.matcher().fill_next_token_bitmask(bm)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("shape", [(1, 1), (1, 3), (2,), (1, 2, 1)])
def test_bitmask_of_wrong_shape_is_refused(art: maskc.Artifact, kind: str, shape: tuple[int, ...]) -> None:
    words = (art.vocab_size + 31) // 32
    assert words == 2
    with pytest.raises(ValueError, match=re.escape("shape [batch, 2]") + ".*" + re.escape(f"got {list(shape)}")):
        art.matcher().fill_next_token_bitmask(ZEROS[kind](shape))


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_non_contiguous_bitmask_is_refused(art: maskc.Artifact, kind: str) -> None:
    wide = ZEROS[kind]((2, 4))
    view = wide[:, ::2]  # shape [2, 2], strided
    with pytest.raises(ValueError, match="contiguous"):
        art.matcher().fill_next_token_bitmask(view, 1)
    assert not wide.any()


def test_read_only_bitmask_is_refused(art: maskc.Artifact) -> None:
    bm = np.zeros((1, 2), dtype=np.int32)
    bm.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        art.matcher().fill_next_token_bitmask(bm)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_bitmask_index_out_of_range_or_not_int(art: maskc.Artifact, kind: str) -> None:
    m = art.matcher()
    bm = ZEROS[kind]((2, 2))
    for index in (2, -1, 10**6):
        with pytest.raises(ValueError, match=rf"index must lie in \[0, 2\).*got {index}"):
            m.fill_next_token_bitmask(bm, index)
    for bad in (0.0, "1", None, True):
        with pytest.raises(TypeError, match="index must be an int"):
            m.fill_next_token_bitmask(bm, bad)  # type: ignore[arg-type]
    m.fill_next_token_bitmask(bm, np.int64(1))  # type: ignore[arg-type]  # a numpy integer is an int
    assert bm[1].any() and not bm[0].any()


def test_bitmask_that_is_not_an_array(art: maskc.Artifact) -> None:
    with pytest.raises(TypeError, match="numpy array or a torch tensor.*got list"):
        art.matcher().fill_next_token_bitmask([[0, 0]])


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_valid_bitmask_is_filled_both_kinds(art: maskc.Artifact, kind: str) -> None:
    m = art.matcher()
    bm = ZEROS[kind]((2, 2))
    m.fill_next_token_bitmask(bm, 1)
    row = np.asarray(bm[1]).astype(np.int32)
    assert maskc.unpack_bitmask(row, art.vocab_size).nonzero()[0].tolist() == m.allowed_token_ids().tolist()


# -- tokens and rollback -----------------------------------------------------------------------


def test_accept_token_refuses_non_integers(art: maskc.Artifact) -> None:
    m = art.matcher()
    for bad in (1.0, "1", None, True, np.bool_(True), torch.tensor(1.0)):
        with pytest.raises(TypeError, match="token_id must be an int"):
            m.accept_token(bad)  # type: ignore[arg-type]
    assert m.num_accepted == 0


def test_accept_token_refuses_ids_outside_the_vocabulary(art: maskc.Artifact) -> None:
    m = art.matcher()
    for bad in (-1, art.vocab_size, 10**12):
        with pytest.raises(ValueError, match=rf"\[0, {art.vocab_size}\).*got {bad}"):
            m.accept_token(bad)
    assert m.num_accepted == 0


def test_accept_token_model_behaviour_returns_false(art: maskc.Artifact) -> None:
    m = art.matcher()
    allowed = set(m.allowed_token_ids().tolist())
    rejected = next(t for t in range(art.vocab_size) if t not in allowed)
    assert not m.accept_token(rejected)
    assert not m.accept_token(art.vocab_size - 1)  # a padding id
    assert m.num_accepted == 0


def test_accept_token_takes_numpy_and_torch_integers(art: maskc.Artifact) -> None:
    m = art.matcher()
    t = first_allowed(m)
    assert m.accept_token(np.int64(t))  # type: ignore[arg-type]
    m.reset()
    assert m.accept_token(torch.tensor(t))


def test_misuse_raises_even_once_terminated(pda_art: maskc.Artifact, paren_vocab: Vocabulary) -> None:
    m = pda_art.matcher()
    assert m.accept_token(paren_vocab.token_id("x"))  # type: ignore[arg-type]
    assert m.accept_token(paren_vocab.eos_ids[0]) and m.is_terminated()
    assert not m.accept_token(paren_vocab.token_id("x"))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        m.accept_token(-5)


def test_rollback_misuse(art: maskc.Artifact) -> None:
    m = art.matcher()
    assert m.accept_token(first_allowed(m))
    for bad in (-1, 2, 100):
        with pytest.raises(ValueError, match=r"can roll back 0\.\.1 tokens.*got"):
            m.rollback(bad)
    for bad_type in (0.5, 1.0, "1", None):
        with pytest.raises(TypeError, match="num_tokens must be an int"):
            m.rollback(bad_type)  # type: ignore[arg-type]
    assert m.num_accepted == 1
    m.rollback(np.int64(1))  # type: ignore[arg-type]
    assert m.num_accepted == 0


def test_accept_string_refuses_non_text(art: maskc.Artifact) -> None:
    m = art.matcher()
    for bad in (1, None, ["x"]):
        with pytest.raises(TypeError, match="str or bytes"):
            m.accept_string(bad)  # type: ignore[arg-type]
    assert not m.accept_string("\x00\x00")  # rejected text is model behaviour
    opening = bytearray(b"{" if art.grammar_kind == "json_schema" else b"(")
    assert m.accept_string(opening)  # type: ignore[arg-type]


def test_allocate_misuse() -> None:
    with pytest.raises(TypeError, match="vocab_size must be an int, got str"):
        maskc.allocate_token_bitmask(1, "64")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive"):
        maskc.allocate_token_bitmask(0, 64)


# -- applying to logits ------------------------------------------------------------------------


def _complete(art: maskc.Artifact, toy_vocab: Vocabulary) -> Any:
    """A matcher where only EOS (id 36, in the second bitmask word) may come next."""
    m = art.matcher()
    for t in ('{"', "a", '":', "1", "}"):
        assert m.accept_token(toy_vocab.token_id(t))  # type: ignore[arg-type]
    assert m.allowed_token_ids().tolist() == list(toy_vocab.eos_ids) == [36]
    return m


def test_logits_narrower_than_the_vocabulary_are_refused(flat_art: maskc.Artifact, toy_vocab: Vocabulary) -> None:
    m = _complete(flat_art, toy_vocab)
    bm = maskc.allocate_token_bitmask(1, flat_art.vocab_size)
    m.fill_next_token_bitmask(bm)
    # 32 columns cut the EOS column: the row would be all -inf
    with pytest.raises(ValueError, match="32 columns.*cut.*-inf"):
        maskc.apply_token_bitmask_inplace(torch.zeros(1, 32), bm)
    # 40 columns reach the bitmask's last word; with the artifact's vocab_size it is refused too
    with pytest.raises(ValueError, match="40 columns, narrower than vocab_size 64"):
        maskc.apply_token_bitmask_inplace(torch.zeros(1, 40), bm, vocab_size=flat_art.vocab_size)
    with pytest.raises(ValueError, match="expected ceil"):
        maskc.apply_token_bitmask_inplace(torch.zeros(1, 200), bm, vocab_size=200)
    logits = torch.zeros(1, flat_art.vocab_size + 5)  # wider: the extra columns are masked
    maskc.apply_token_bitmask_inplace(logits, bm, vocab_size=flat_art.vocab_size)
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [36]


def test_apply_misuse(flat_art: maskc.Artifact) -> None:
    bm = maskc.allocate_token_bitmask(2, flat_art.vocab_size)
    with pytest.raises(TypeError, match="floating-point"):
        maskc.apply_token_bitmask_inplace(torch.zeros(2, 64, dtype=torch.int64), bm)
    with pytest.raises(TypeError, match="floating-point"):
        maskc.apply_token_bitmask_inplace(np.zeros((2, 64), dtype=np.float32), bm)
    with pytest.raises(TypeError, match="int32, got torch.int64"):
        maskc.apply_token_bitmask_inplace(torch.zeros(2, 64), bm.long())
    with pytest.raises(ValueError, match=r"indices must lie in \[0, 2\).*\[5\]"):
        maskc.apply_token_bitmask_inplace(torch.zeros(2, 64), bm, [0, 5])
    with pytest.raises(TypeError, match="indices must be a list of ints"):
        maskc.apply_token_bitmask_inplace(torch.zeros(2, 64), bm, [0.5])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="bitmask has 2 rows for 3 logits rows"):
        maskc.apply_token_bitmask_inplace(torch.zeros(3, 64), bm)
    with pytest.raises(ValueError, match=r"\[batch, W\]"):
        maskc.apply_token_bitmask_inplace(torch.zeros(1, 2, 64), bm)


def test_apply_takes_a_numpy_bitmask(flat_art: maskc.Artifact, toy_vocab: Vocabulary) -> None:
    m = _complete(flat_art, toy_vocab)
    bm = maskc.allocate_bitmask_np(1, flat_art.vocab_size)
    m.fill_next_token_bitmask(bm)
    logits = torch.zeros(1, flat_art.vocab_size)
    maskc.apply_token_bitmask_inplace(logits, bm)
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [36]
    with pytest.raises(TypeError, match="int32, got int64"):
        maskc.apply_token_bitmask_inplace(logits, bm.astype(np.int64))


# -- the transformers LogitsProcessor ----------------------------------------------------------


def test_logits_processor_refuses_a_batch_change(art: maskc.Artifact) -> None:
    proc = maskc.LogitsProcessor(art)
    prompt = torch.tensor([[1, 2], [1, 2]])
    proc(prompt, torch.zeros(2, art.vocab_size))
    tok = first_allowed(art.matcher())
    step = torch.tensor([[1, 2, tok]] * 3)
    with pytest.raises(ValueError, match="batch changed.*2 sequences.*got 3"):
        proc(step, torch.zeros(3, art.vocab_size))
    with pytest.raises(ValueError, match="same batch"):
        proc(torch.tensor([[1, 2, tok]] * 2), torch.zeros(3, art.vocab_size))
    fixed = maskc.LogitsProcessor(art, batch_size=2)
    with pytest.raises(ValueError, match="batch_size 2, got a batch of 1"):
        fixed(torch.tensor([[1, 2]]), torch.zeros(1, art.vocab_size))


def test_logits_processor_refuses_narrow_scores(art: maskc.Artifact) -> None:
    proc = maskc.LogitsProcessor(art)
    with pytest.raises(ValueError, match=f"scores have 33 columns, narrower than the artifact's vocab_size "
                                         f"{art.vocab_size}"):
        proc(torch.tensor([[1, 2]]), torch.zeros(1, 33))


def test_logits_processor_out_of_vocabulary_token_fails_the_sequence(art: maskc.Artifact) -> None:
    proc = maskc.LogitsProcessor(art)
    width = art.vocab_size + 8  # padded logits: a caller's own processor could pick a padded id
    proc(torch.tensor([[1, 2]]), torch.zeros(1, width))
    out = proc(torch.tensor([[1, 2, art.vocab_size + 3]]), torch.zeros(1, width))
    assert proc.failed == [True] and proc.rejected == [art.vocab_size + 3]
    assert torch.isfinite(out[0]).nonzero().flatten().tolist() == list(art.eos_token_ids)


# -- short reprs -------------------------------------------------------------------------------


def test_artifact_repr_is_short_and_informative(art: maskc.Artifact) -> None:
    text = repr(art)
    sha = art.metadata["grammar_sha256"]
    kind = "pushdown" if art.is_pushdown else "dfa"
    for part in (art.grammar_kind, sha[:12], repr(art.metadata["tokenizer_name"]), f"vocab_size={art.vocab_size}",
                 f"states={art.num_states}", kind):
        assert part in text, (part, text)
    assert sha not in text and len(text) < 200 and "\n" not in text


def test_artifact_repr_stays_short_for_a_large_vocabulary(deepseek: Vocabulary) -> None:
    art = maskc.compile_regex("[ab]+", deepseek)
    text = repr(art)
    assert len(text) < 200 and f"vocab_size={deepseek.vocab_size}" in text
    assert len(repr(art.matcher())) < 200


def test_matcher_repr_shows_state_and_termination(flat_art: maskc.Artifact, toy_vocab: Vocabulary) -> None:
    m = flat_art.matcher()
    text = repr(m)
    assert text.startswith("<Matcher json_schema:") and "state=0" in text and "accepted=0" in text
    assert "terminated=False" in text and flat_art.metadata["grammar_sha256"][:12] in text
    m = _complete(flat_art, toy_vocab)
    assert "can_terminate=True" in repr(m)
    assert m.accept_token(36)
    assert "terminated=True" in repr(m) and "state=-" in repr(m) and len(repr(m)) < 200


def test_pushdown_matcher_repr_shows_depth(pda_art: maskc.Artifact, paren_vocab: Vocabulary) -> None:
    m = pda_art.matcher()
    assert isinstance(m, maskc.PushdownMatcher)
    for t in ("((", "("):
        assert m.accept_token(paren_vocab.token_id(t))  # type: ignore[arg-type]
    text = repr(m)
    assert text.startswith("<PushdownMatcher gbnf:") and f"depth={m.depth}" in text and m.depth >= 3
    assert f"state={m.state}" in text and "accepted=2" in text and "terminated=False" in text
    assert len(text) < 200


@pytest.mark.parametrize("args", [(1.0, 40), (1, "40"), (True, 40), (1, None)])
def test_allocate_bitmask_np_refuses_non_ints(args: tuple[object, object]) -> None:
    with pytest.raises(TypeError, match="must be an int"):
        maskc.allocate_bitmask_np(*args)  # type: ignore[arg-type]


def test_allocate_bitmask_np_refuses_non_positive_sizes() -> None:
    with pytest.raises(ValueError, match="positive"):
        maskc.allocate_bitmask_np(0, 40)
