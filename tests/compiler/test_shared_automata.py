"""Compiles of one source for several tokenizers share what does not depend on the tokenizer
(:func:`maskc.compiler.pipeline.sharing_automata`): the front end's output and, for a
recursive grammar, its pushdown automaton. The artifacts are those of compiling alone."""

from __future__ import annotations

from typing import Any

import pytest

import maskc
from maskc.compiler import pipeline
from maskc.compiler.align import TokenTable
from maskc.compiler.errors import StateLimitExceeded
from maskc.compiler.options import CompileOptions, Limits
from maskc.compiler.vocab import Vocabulary

# ``data: {}`` is any JSON value: a recursive grammar (a pushdown automaton); the counted
# array makes the front end ask the vocabulary how many items a token can complete
RECURSIVE: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 6}, "data": {},
                   "xs": {"type": "array", "items": {"type": "integer"}, "maxItems": 300}},
    "required": ["name"],
}
REGULAR: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", "yz"]}}}


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the pushdown automata built (one entry per build)."""
    calls: list[int] = []
    real = pipeline.build_pda

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "build_pda", counting)
    return calls


def _hash(schema: Any, vocab: Vocabulary, options: CompileOptions | None = None) -> str:
    return maskc.compile_source("json_schema", schema, vocab, options=options).metadata["content_sha256"]


@pytest.mark.parametrize("schema", [RECURSIVE, REGULAR], ids=["recursive", "regular"])
def test_shared_compiles_give_the_artifacts_of_separate_ones(
        schema: dict[str, Any], toy_vocab: Vocabulary, byte_vocab: Vocabulary, builds: list[int]) -> None:
    alone = [_hash(schema, v) for v in (toy_vocab, byte_vocab, toy_vocab)]
    recursive = schema is RECURSIVE
    assert len(builds) == (3 if recursive else 0)
    builds.clear()
    with pipeline.sharing_automata():
        arts = [maskc.compile_source("json_schema", schema, v) for v in (toy_vocab, byte_vocab, toy_vocab)]
    assert [a.metadata["content_sha256"] for a in arts] == alone
    assert alone[0] != alone[1]  # (two vocabularies: two artifacts, one automaton)
    assert len(builds) == (1 if recursive else 0)
    assert ["shared_automaton" in a.timings for a in arts] == [False, recursive, recursive]


# many items of a few dozen states: the front end plans counted loops, asking the vocabulary
# how many items one token can complete
COUNTED: dict[str, Any] = {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 3000}


@pytest.fixture
def front_ends(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the front end's runs (one entry per run)."""
    calls: list[int] = []
    real = pipeline.frontend

    class Counting:
        def __init__(self, kind: str) -> None:
            self.fe = real(kind)

        def canonical(self, source: Any) -> str:
            return self.fe.canonical(source)

        def to_grammar(self, source: Any, options: CompileOptions) -> Any:
            calls.append(1)
            return self.fe.to_grammar(source, options)

    monkeypatch.setattr(pipeline, "frontend", Counting)
    return calls


def test_the_front_end_questions_are_asked_again(
        toy_vocab: Vocabulary, front_ends: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """A vocabulary that answers the front end's questions alike reuses its output; one that
    answers otherwise gets a front end of its own."""
    with pipeline.sharing_automata():
        first = maskc.compile_source("json_schema", COUNTED, toy_vocab)
        slot = pipeline._SHARED.get()
        assert slot and slot[0].asked  # the counted array asked
        again = maskc.compile_source("json_schema", COUNTED, toy_vocab)
        assert len(front_ends) == 1 and again.metadata["content_sha256"] == first.metadata["content_sha256"]
        real = TokenTable.items_reach
        monkeypatch.setattr(TokenTable, "items_reach",
                            lambda self, completing, shortest: real(self, completing, shortest) + 1)
        other = maskc.compile_source("json_schema", COUNTED, toy_vocab)
    assert len(front_ends) == 2
    assert other.metadata["content_sha256"] == _hash(COUNTED, toy_vocab)  # (the answers still shifted)


def test_another_source_or_options_start_over(toy_vocab: Vocabulary, byte_vocab: Vocabulary,
                                              builds: list[int]) -> None:
    other = dict(RECURSIVE, required=["name", "data"])
    with pipeline.sharing_automata():
        maskc.compile_source("json_schema", RECURSIVE, toy_vocab)
        maskc.compile_source("json_schema", other, byte_vocab)
        maskc.compile_source("json_schema", RECURSIVE, byte_vocab)  # (only the last compile is kept)
        maskc.compile_source("json_schema", RECURSIVE, toy_vocab, options=CompileOptions(max_depth=9))
        assert len(builds) == 4
        maskc.compile_source("json_schema", RECURSIVE, byte_vocab, options=CompileOptions(max_depth=9))
    assert len(builds) == 4
    maskc.compile_source("json_schema", RECURSIVE, toy_vocab)  # (outside the block: nothing kept)
    assert len(builds) == 5


def test_a_refused_automaton_is_refused_again_without_a_rebuild(
        toy_vocab: Vocabulary, byte_vocab: Vocabulary, builds: list[int]) -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 60}, "data": {}}}
    tight = CompileOptions(limits=Limits(max_states=200))  # (the subset construction passes it)
    with pytest.raises(StateLimitExceeded) as alone:
        maskc.compile_source("json_schema", schema, byte_vocab, options=tight)
    assert len(builds) == 1
    builds.clear()
    with pipeline.sharing_automata():
        for vocab in (toy_vocab, byte_vocab):
            with pytest.raises(StateLimitExceeded) as shared:
                maskc.compile_source("json_schema", schema, vocab, options=tight)
            assert str(shared.value) == str(alone.value)
    assert len(builds) == 1
