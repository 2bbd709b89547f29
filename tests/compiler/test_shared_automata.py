"""Compiles of one source for several tokenizers share what does not depend on the tokenizer
(:func:`maskc.compiler.pipeline.sharing_automata`): the front end's output, a recursive
grammar's pushdown automaton, and a regular grammar's automaton where the vocabularies answer
its lowering's questions alike; also what those stages raised, a time-out included. The
artifacts are those of compiling alone."""

from __future__ import annotations

import contextlib
import gc
import types
from collections.abc import Callable
from typing import Any

import pytest

import maskc
from maskc.compiler import pipeline
from maskc.compiler.align import TokenTable
from maskc.compiler.errors import StateLimitExceeded, TimeLimitExceeded
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


def _counted(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """Counts the calls of ``pipeline.<name>`` (one entry per call)."""
    calls: list[int] = []
    real = getattr(pipeline, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, name, counting)
    return calls


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the pushdown automata built (one entry per build)."""
    return _counted(monkeypatch, "build_pda")


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

    def counting(fe: Any, source: Any, options: CompileOptions) -> Any:
        calls.append(1)
        return fe.to_grammar(source, options)

    _front_end_through(monkeypatch, counting)
    return calls


def _front_end_through(monkeypatch: pytest.MonkeyPatch, to_grammar: Callable[[Any, Any, CompileOptions], Any]) -> None:
    """Every front end's ``to_grammar(source, options)`` becomes ``to_grammar(fe, source, options)``."""
    real = pipeline.frontend

    class Through:
        def __init__(self, kind: str) -> None:
            self.fe = real(kind)

        def canonical(self, source: Any) -> str:
            return self.fe.canonical(source)

        def to_grammar(self, source: Any, options: CompileOptions) -> Any:
            return to_grammar(self.fe, source, options)

        def __getattr__(self, name: str) -> Any:  # (the other forms of its grammar, as they are)
            return getattr(self.fe, name)

    monkeypatch.setattr(pipeline, "frontend", Through)


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
    # within the first form's NFA limit, then within the whole one (pipeline.FIRST_FORM_NFA_STATES)
    assert len(builds) == 2
    builds.clear()
    with pipeline.sharing_automata():
        for vocab in (toy_vocab, byte_vocab):
            with pytest.raises(StateLimitExceeded) as shared:
                maskc.compile_source("json_schema", schema, vocab, options=tight)
            assert str(shared.value) == str(alone.value)
    assert len(builds) == 2


# no bounded repetition: the lowering asks the vocabulary nothing, so every vocabulary shares it
UNCOUNTED: dict[str, Any] = {"type": "object", "properties": {"b": {"enum": ["a", "ab"]}, "a": {"type": "boolean"}},
                             "required": ["b"]}
# a string of at most 300 characters: a counted loop, planned for the longest token
LONG_STRING: dict[str, Any] = {"type": "object", "properties": {"s": {"type": "string", "maxLength": 300}}}


@pytest.fixture
def lowerings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the regular automata built (one entry per :func:`pipeline.grammar_dfa`)."""
    return _counted(monkeypatch, "grammar_dfa")


def test_a_regular_automaton_is_shared_where_the_vocabularies_answer_alike(
        toy_vocab: Vocabulary, byte_vocab: Vocabulary, lowerings: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    alone = [_hash(s, v) for s in (UNCOUNTED, LONG_STRING) for v in (toy_vocab, byte_vocab)]
    lowerings.clear()
    with pipeline.sharing_automata():
        arts = [maskc.compile_source("json_schema", UNCOUNTED, v) for v in (toy_vocab, byte_vocab)]
        slot = pipeline._SHARED.get()
        assert slot and slot[0].horizon_asked == []  # (nothing asked: any vocabulary answers alike)
        assert len(lowerings) == 1
        # the longest token bounds the items a token completes: 5 bytes for the toy, 1 for bytes
        arts += [maskc.compile_source("json_schema", LONG_STRING, v) for v in (toy_vocab, byte_vocab)]
        assert len(lowerings) == 3
        again = maskc.compile_source("json_schema", LONG_STRING, byte_vocab)  # (the same answers)
        assert len(lowerings) == 3 and "shared_automaton" in again.timings
        real = TokenTable.items_reach  # answers shifted: the lowering runs again
        monkeypatch.setattr(TokenTable, "items_reach", lambda self, c, s: min(real(self, c, s), 0))
        maskc.compile_source("json_schema", LONG_STRING, toy_vocab)
        assert len(lowerings) == 4
    assert [a.metadata["content_sha256"] for a in arts] == alone
    assert [a.timings.get("shared_automaton") for a in arts] == [None, 1.0, None, None]
    assert again.metadata["content_sha256"] == alone[3]


def _time_out(*args: Any, **kwargs: Any) -> Any:
    raise TimeLimitExceeded("compile time (s)", limit=0)


@pytest.mark.parametrize("stage", ["front end", "regular automaton", "pushdown automaton"])
def test_a_shared_stage_that_ran_out_of_time_is_not_run_again(
        stage: str, toy_vocab: Vocabulary, byte_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its work would be the same steps with the same budget: the next tokenizer's compile
    reports the time-out at once, and says why; another source starts over."""
    calls: list[int] = []

    def timing_out(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return _time_out()

    schema = RECURSIVE if stage == "pushdown automaton" else UNCOUNTED
    if stage == "front end":
        _front_end_through(monkeypatch, lambda fe, source, options: timing_out() if source is schema
                           else fe.to_grammar(source, options))
    else:
        name = "grammar_dfa" if stage == "regular automaton" else "build_pda"
        real_stage = getattr(pipeline, name)
        monkeypatch.setattr(pipeline, name, lambda rules_or_node, *a, **k: (
            timing_out() if not calls or calls[-1] else real_stage(rules_or_node, *a, **k)))
    with pipeline.sharing_automata():
        with pytest.raises(TimeLimitExceeded) as first:
            maskc.compile_source("json_schema", schema, toy_vocab)
        assert "previous tokenizer" not in str(first.value)
        with pytest.raises(TimeLimitExceeded) as second:
            maskc.compile_source("json_schema", schema, byte_vocab)
        assert len(calls) == 1
        limit = f"exceeds the limit of {CompileOptions().limits.max_seconds:g}"
        assert limit in str(second.value) and "previous tokenizer" in str(second.value)
        calls.append(0)  # (from here the stage runs for real)
        other = maskc.compile_source("json_schema", dict(schema, title="another source"), byte_vocab)
    assert other.metadata["content_sha256"]


@pytest.mark.parametrize("stage", ["regular automaton", "pushdown automaton"])
def test_a_shared_automaton_that_ran_out_of_memory_is_not_built_again(
        stage: str, toy_vocab: Vocabulary, byte_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    """An allocation that failed while the automaton was built is a MemoryLimitExceeded; the
    next tokenizer's compile reports it at once, and says why."""
    from maskc.compiler.errors import MemoryLimitExceeded

    calls: list[int] = []

    def out_of_memory(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        raise MemoryError

    schema = RECURSIVE if stage == "pushdown automaton" else UNCOUNTED
    monkeypatch.setattr(pipeline, "grammar_dfa" if stage == "regular automaton" else "build_pda", out_of_memory)
    with pipeline.sharing_automata():
        with pytest.raises(MemoryLimitExceeded) as first:
            maskc.compile_source("json_schema", schema, toy_vocab)
        assert not first.value.shared and first.value.message == "the compile ran out of memory"
        with pytest.raises(MemoryLimitExceeded) as second:
            maskc.compile_source("json_schema", schema, byte_vocab)
        assert second.value.shared and "previous tokenizer" in (second.value.hint or "")
    assert len(calls) == 1
    assert "512 MiB" in second.value.with_limit(512).message and second.value.with_limit(512).shared


def test_running_out_of_memory_anywhere_in_a_compile_is_a_memory_limit_error(
        toy_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    from maskc.compiler.errors import MemoryLimitExceeded

    def out_of_memory(*args: Any, **kwargs: Any) -> Any:
        raise MemoryError

    monkeypatch.setattr(pipeline, "align", out_of_memory)
    with pytest.raises(MemoryLimitExceeded, match="ran out of memory"):
        maskc.compile_source("json_schema", REGULAR, toy_vocab)


def _frames(error: BaseException) -> list[str]:
    """The files of the frames ``error`` was raised through."""
    out = []
    tb = error.__traceback__
    while tb is not None:
        out.append(tb.tb_frame.f_code.co_filename.replace("\\", "/").rsplit("/", 1)[-1])
        tb = tb.tb_next
    return out


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"s": {"type": "string", "pattern": "^[ab]*a[ab]{9}$"}}},  # regular
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 60}, "data": {}}},  # pushdown
], ids=["regular", "pushdown"])
def test_a_failed_automaton_leaves_no_cycle_holding_its_work(byte_vocab: Vocabulary, schema: dict[str, Any]) -> None:
    # The frames of the failed stage hold its automaton (millions of small objects on a large
    # schema): the error keeps none of them, and, compiled alone, nothing refers back to it.
    # (Shared, the error kept for the next tokenizer holds the pipeline's own frames, and they
    # hold it: the front end's output waits for the collector, not the automaton.)
    tight = CompileOptions(limits=Limits(max_states=200))
    gc.collect()
    for share in (False, True):
        with pipeline.sharing_automata() if share else contextlib.nullcontext():
            with pytest.raises(StateLimitExceeded) as info:
                maskc.compile_source("json_schema", schema, byte_vocab, options=tight)
            frames = _frames(info.value)
        assert "pipeline.py" in frames
        assert not {"dfa.py", "nfa.py", "pda.py"} & set(frames)  # (the stage's own frames are dropped)
        del info
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            gc.collect()
            left = [o for o in gc.garbage if isinstance(o, (types.FrameType, BaseException))]
            files = {o.f_code.co_filename.replace("\\", "/").rsplit("/", 1)[-1] for o in left
                     if isinstance(o, types.FrameType)}
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
        if share:
            assert files <= {"pipeline.py", "contextlib.py", "api.py"}
        else:
            assert left == []
        del left


def test_the_bounded_grammar_of_a_refused_pushdown_one_is_shared_too(
        byte_vocab: Vocabulary, builds: list[int], lowerings: list[int]) -> None:
    # the pushdown grammar is over the limit; so is the regular one with free-form values
    # bounded (pipeline's fallback): neither is built again for the next compile
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 60}, "data": {}}}
    tight = CompileOptions(limits=Limits(max_states=200))
    with pytest.raises(StateLimitExceeded) as alone:
        maskc.compile_source("json_schema", schema, byte_vocab, options=tight)
    assert (len(builds), len(lowerings)) == (2, 1)  # (the pushdown grammar within the first form's NFA limit too)
    builds.clear()
    lowerings.clear()
    with pipeline.sharing_automata():
        for _ in range(2):
            with pytest.raises(StateLimitExceeded) as shared:
                maskc.compile_source("json_schema", schema, byte_vocab, options=tight)
            assert str(shared.value) == str(alone.value)
        # with room for the bounded grammar: compiled once, then recalled
        roomy = CompileOptions(limits=Limits(max_states=5_000))
        big = dict(schema, properties=dict(schema["properties"], name={"type": "string", "maxLength": 3000}))
        arts = [maskc.compile_source("json_schema", big, byte_vocab, options=roomy) for _ in range(2)]
    assert (len(builds), len(lowerings)) == (4, 2)
    assert arts[0].metadata["content_sha256"] == arts[1].metadata["content_sha256"]
    assert [a.not_enforced[-1]["kind"] for a in arts] == ["restricted", "restricted"]
    assert "shared_automaton" in arts[1].timings
