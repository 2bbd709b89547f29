"""The cycle collector's oldest-generation threshold during a compile, and after it."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from maskc.compiler.collector import FULL_EVERY, fewer_full_collections
from maskc.compiler.errors import MaskcError
from maskc.compiler.options import CompileOptions
from maskc.compiler import pipeline
from maskc.compiler.align import TokenTable
from maskc.compiler.vocab import Vocabulary


@pytest.fixture(autouse=True)
def _thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)


def test_raised_inside_and_restored_after() -> None:
    with fewer_full_collections():
        assert gc.get_threshold() == (700, 10, FULL_EVERY)
    assert gc.get_threshold() == (700, 10, 10)


def test_nested_blocks_restore_once_at_the_outermost_end() -> None:
    with fewer_full_collections():
        with fewer_full_collections():
            assert gc.get_threshold()[2] == FULL_EVERY
        assert gc.get_threshold()[2] == FULL_EVERY
    assert gc.get_threshold() == (700, 10, 10)


def test_restored_after_an_error() -> None:
    with pytest.raises(RuntimeError):
        with fewer_full_collections():
            raise RuntimeError("boom")
    assert gc.get_threshold() == (700, 10, 10)


def test_a_higher_threshold_and_a_disabled_collector_are_left_alone() -> None:
    gc.set_threshold(700, 10, 5000)
    with fewer_full_collections():
        assert gc.get_threshold() == (700, 10, 5000)
    gc.set_threshold(0, 10, 10)
    with fewer_full_collections():
        assert gc.get_threshold() == (0, 10, 10)
    assert gc.get_threshold() == (0, 10, 10)


def test_a_threshold_set_inside_the_block_is_kept() -> None:
    with fewer_full_collections():
        gc.set_threshold(500, 5, 50)
    assert gc.get_threshold() == (500, 5, 50)


def test_threads_share_one_count() -> None:
    inside = threading.Event()
    leave = threading.Event()

    def hold() -> None:
        with fewer_full_collections():
            inside.set()
            leave.wait(10)

    worker = threading.Thread(target=hold)
    worker.start()
    assert inside.wait(10)
    with fewer_full_collections():
        pass
    assert gc.get_threshold()[2] == FULL_EVERY  # (the other thread's compile still runs)
    leave.set()
    worker.join(10)
    assert gc.get_threshold() == (700, 10, 10)


def test_a_compile_raises_it_and_gives_it_back(byte_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    real = pipeline.token_table

    def watched(vocab: Vocabulary) -> TokenTable:
        seen.append(gc.get_threshold()[2])
        return real(vocab)

    monkeypatch.setattr(pipeline, "token_table", watched)
    compiled = pipeline.compile_source("regex", "[a-c]{2,4}x", byte_vocab, CompileOptions())
    assert compiled.dfa is not None
    assert seen and set(seen) == {FULL_EVERY}
    assert gc.get_threshold() == (700, 10, 10)
    with pytest.raises(MaskcError):
        pipeline.compile_source("json_schema", {"type": "no-such-type"}, byte_vocab, CompileOptions())
    assert gc.get_threshold() == (700, 10, 10)
