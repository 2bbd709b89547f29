"""Worker processes of ``maskc compile``: a worker that dies fails its task alone, a memory cap
turns an allocation past it into a clean error, and either keeps the rest of the batch.

The workers here are real spawned processes running :mod:`tests.cli.workers_fake`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from maskc.cli import batch
from maskc.cli.workers import MEMORY_LIMIT_ENFORCED, process_end, run_tasks
from maskc.compiler.errors import MemoryLimitExceeded, WorkerLost
from tests.cli.workers_fake import work

ROOT = Path(__file__).resolve().parents[2]


def run(tasks: list[tuple[str, str]], workers: int,
        seconds: list[float | None] | None = None) -> tuple[dict[int, Any], list[tuple[int, str]]]:
    results: dict[int, Any] = {}
    lost: list[tuple[int, str]] = []

    def on_lost(i: int, how: str, overdue: bool) -> str:
        lost.append((i, how))
        assert overdue == (tasks[i][1] == "hang")
        return f"lost: {how}"

    def done(i: int, result: Any) -> None:
        assert i not in results, "a task answered twice"
        results[i] = result

    run_tasks(tasks, workers, work, on_lost, done, seconds=seconds)
    return results, lost


def test_a_worker_that_dies_fails_its_task_alone_and_a_fresh_one_goes_on() -> None:
    tasks = [("a", "ok"), ("b", "die"), ("c", "ok"), ("d", "exit"), ("e", "ok")]
    results, lost = run(tasks, workers=1)
    assert sorted(results) == [0, 1, 2, 3, 4]
    killed = "killed by SIGKILL" if sys.platform != "win32" else "exit status 9"
    assert lost == [(1, killed), (3, "exit status 7")]
    assert results[1] == f"lost: {killed}" and results[3] == "lost: exit status 7"
    names = {i: results[i][0] for i in (0, 2, 4)}
    assert names == {0: "a", 2: "c", 4: "e"}
    pids = [results[i][1] for i in (0, 2, 4)]
    assert len(set(pids)) == 3  # one worker at a time: each death brought a fresh one


def test_workers_are_reused_until_one_retires() -> None:
    tasks = [("a", "ok"), ("b", "ok"), ("c", "retire"), ("d", "ok"), ("e", "ok")]
    results, lost = run(tasks, workers=1)
    assert lost == []
    pids = [results[i][1] for i in range(5)]
    assert pids[0] == pids[1] == pids[2] != pids[3] == pids[4]


def test_two_workers_share_the_tasks_and_deaths_stay_apart() -> None:
    tasks = [(str(i), "die" if i in (2, 5) else "ok") for i in range(9)]
    results, lost = run(tasks, workers=2)
    assert sorted(results) == list(range(9))
    assert sorted(i for i, _ in lost) == [2, 5]
    assert all(results[i][0] == str(i) for i in range(9) if i not in (2, 5))


def test_a_worker_still_running_past_its_time_is_stopped_and_the_rest_goes_on() -> None:
    tasks = [("a", "ok"), ("b", "hang"), ("c", "ok"), ("d", "hang"), ("e", "ok")]
    results, lost = run(tasks, workers=2, seconds=[30.0, 0.5, 30.0, 0.5, None])
    assert sorted(results) == [0, 1, 2, 3, 4]
    assert lost == [(1, "still running past its time: stopped"), (3, "still running past its time: stopped")]
    assert [results[i][0] for i in (0, 2, 4)] == ["a", "c", "e"]


def test_process_end_in_words() -> None:
    assert process_end(-9) == "killed by SIGKILL"
    assert process_end(3) == "exit status 3"
    assert process_end(-200) == "killed by signal 200"
    assert process_end(None) == "ended without an exit status"


@pytest.mark.skipif(not MEMORY_LIMIT_ENFORCED, reason="the memory cap is enforced on Linux only")
def test_the_memory_cap_refuses_an_allocation_past_it_and_allows_what_fits() -> None:
    code = "from tests.cli.workers_fake import allocate; print(allocate(256, [1024, 64, 300, 128]))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['MemoryError', 'ok', 'MemoryError', 'ok']"


def test_running_out_of_memory_fails_the_compile_cleanly_and_retires_the_worker(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def no_memory(*args: Any, **kwargs: Any) -> Any:
        raise MemoryError

    monkeypatch.setattr(batch.maskc, "compile_source", no_memory)
    job = batch.Job("s.json", "s", "json_schema", {"type": "string"})
    capped = batch.Settings("deepseek", None, None, "compact", False, None, str(tmp_path), max_memory_mb=512)
    free = batch.Settings("deepseek", None, None, "compact", False, None, str(tmp_path))
    monkeypatch.setattr(batch, "vocabulary", lambda s: None)
    results, retire = batch._work(job, [capped, free])
    assert retire
    assert [r["ok"] for r in results] == [False, False]
    assert [r["error"]["type"] for r in results] == ["MemoryLimitExceeded"] * 2
    assert results[0]["error"]["message"] == "the compile needs more memory than its limit of 512 MiB"
    assert "--max-memory" in results[0]["error"]["hint"]
    assert results[1]["error"]["message"] == "the compile ran out of memory"
    assert batch.MANIFEST_ENTRY not in results[0]


def test_errors_of_lost_workers_and_memory_say_what_to_do() -> None:
    e = WorkerLost("schemas/big.json", "killed by SIGKILL")
    assert "schemas/big.json" in e.message and "out-of-memory killer" in e.message
    assert "--max-memory" in (e.hint or "")
    assert "out-of-memory" not in WorkerLost("x", "exit status 1").message
    m = MemoryLimitExceeded(4096)
    assert m.limit == 4096.0 and "4096 MiB" in m.message


def test_a_compile_still_running_past_its_hard_limit_fails_with_the_time_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.cli.test_batch_manifest import setup

    work_, vocabs, out = setup(tmp_path, 2)
    calls: list[int] = []

    def hard(settings: Any) -> float:  # (the parent's: it sets the deadlines) the first input's is short
        calls.append(len(settings))
        return 0.05 if len(calls) == 1 else 120.0

    monkeypatch.setattr(batch, "_hard_seconds", hard)
    results = batch.run_all(work_, vocabs, 2, started=lambda job: None, finished=lambda r: None)
    by_name = {Path(r["path"]).name: r for r in results}
    stopped = [r for r in results if not r["ok"]]
    assert len(stopped) == 1 and len(by_name) == 2
    err = stopped[0]["error"]
    assert err["type"] == "TimeLimitExceeded"
    assert "still running after" in err["message"] and "exceeds the limit of 300" in err["message"]
    assert "worker was stopped" in err["hint"]
    ok = [r for r in results if r["ok"]]
    assert len(ok) == 1
    from maskc.artifacts.manifest import read_manifest
    assert [Path(e["source"]).name for e in read_manifest(out)] == [Path(ok[0]["path"]).name]


def test_the_hard_limit_covers_every_tokenizer_of_an_input_with_room_to_spare() -> None:
    from maskc.compiler.options import Limits

    s = batch.Settings("deepseek", None, None, "compact", False, None, "out", limits=Limits.scaled(None, 60.0))
    assert batch._hard_seconds([s]) == batch.OVERRUN_FACTOR * 60.0 + batch.OVERRUN_GRACE
    assert batch._hard_seconds([s, s]) == batch.OVERRUN_FACTOR * 120.0 + batch.OVERRUN_GRACE
    assert batch._hard_seconds([s]) > 60.0
