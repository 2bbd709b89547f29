"""NumPy's huge-page advice during a compile, a lint and a CLI command, and after them."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator

import pytest

from maskc.compiler import hugepages, pipeline
from maskc.compiler.align import TokenTable
from maskc.compiler.errors import MaskcError
from maskc.compiler.hugepages import no_huge_pages
from maskc.compiler.options import CompileOptions
from maskc.compiler.vocab import Vocabulary


def _numpy_switch() -> tuple[Callable[[bool], bool], Callable[[], bool]] | None:
    for name in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "_get_madvise_hugepage") and hasattr(module, "_set_madvise_hugepage"):
            return module._set_madvise_hugepage, module._get_madvise_hugepage
    return None


_SWITCH = _numpy_switch()
pytestmark = pytest.mark.skipif(_SWITCH is None, reason="this NumPy has no huge-page switch")


def _advised() -> bool:
    assert _SWITCH is not None
    return bool(_SWITCH[1]())


@pytest.fixture(autouse=True)
def _advice_on() -> Iterator[None]:
    assert _SWITCH is not None
    saved = _SWITCH[0](True)
    yield
    _SWITCH[0](saved)


def test_off_inside_and_back_after() -> None:
    with no_huge_pages():
        assert not _advised()
    assert _advised()


def test_nested_blocks_give_it_back_once_at_the_outermost_end() -> None:
    with no_huge_pages():
        with no_huge_pages():
            assert not _advised()
        assert not _advised()
    assert _advised()


def test_back_after_an_error_and_left_off_where_it_was_off() -> None:
    with pytest.raises(RuntimeError):
        with no_huge_pages():
            raise RuntimeError("boom")
    assert _advised()
    assert _SWITCH is not None
    _SWITCH[0](False)
    with no_huge_pages():
        assert not _advised()
    assert not _advised()


def test_a_numpy_without_the_switch_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hugepages, "_SET", None)
    with no_huge_pages():
        assert _advised()
    assert _advised()


def test_a_compile_switches_it_off_and_gives_it_back(byte_vocab: Vocabulary,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    real = pipeline.token_table

    def watched(vocab: Vocabulary) -> TokenTable:
        seen.append(_advised())
        return real(vocab)

    monkeypatch.setattr(pipeline, "token_table", watched)
    compiled = pipeline.compile_source("regex", "[a-c]{2,4}x", byte_vocab, CompileOptions())
    assert compiled.dfa is not None
    assert seen and not any(seen)
    assert _advised()
    with pytest.raises(MaskcError):
        pipeline.compile_source("json_schema", {"type": "no-such-type"}, byte_vocab, CompileOptions())
    assert _advised()


def test_a_cli_command_runs_with_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    cli_app = importlib.import_module("maskc.cli.app")
    seen: list[bool] = []
    monkeypatch.setattr(cli_app, "app", lambda **_: seen.append(_advised()))
    cli_app.main()
    assert seen == [False]
    assert _advised()
