"""``maskc compile`` as real processes: pool workers die with a killed parent; concurrent
and killed compiles into one folder and one cache leave only whole, loadable files.

Linux only (the process table is read from /proc). Deadlines below bound a wait for
something that must happen; no assertion is about how long it took.
"""

from __future__ import annotations

import json
import os
import signal
import string
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import maskc
from maskc.artifacts.cache import ArtifactCache
from maskc.artifacts.manifest import read_manifest

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads the process table in /proc")

DEADLINE = 60.0


def slow_schema(i: int, fields: int = 4) -> dict[str, object]:
    """Tens of milliseconds to compile against the printable vocabulary below."""
    props = {f"p{k}": {"type": "string", "maxLength": 60 + 7 * i + k} for k in range(fields)}
    return {"type": "object", "properties": props, "required": sorted(props)}


@pytest.fixture
def vocab(tmp_path: Path) -> Path:
    tokens = [c for c in string.printable if c not in "\x0b\x0c"] + ["<eos>"]
    path = tmp_path / "vocab.json"
    path.write_text(json.dumps({"tokens": tokens, "eos": "<eos>"}))
    return path


KILLED_BATCH = 24


def write_schemas(folder: Path, n: int, first: int = 0, fields: int = 4) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(first, first + n):
        paths.append(folder / f"s{i:02d}.json")
        paths[-1].write_text(json.dumps(slow_schema(i, fields)))
    return paths


def maskc_cmd(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "maskc", "compile", *map(str, args), "--json"]


def environment(cache: Path) -> dict[str, str]:
    return {**os.environ, "MASKC_CACHE_DIR": str(cache), "MASKC_DEBUG": ""}


def wait_for(what: str, done: Callable[[], bool]) -> None:
    end = time.monotonic() + DEADLINE
    while not done():
        if time.monotonic() > end:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.05)


def stat_of(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) from /proc/PID/stat, or None when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[1])


def children(parent: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdecimal():
            st = stat_of(int(entry.name))
            if st is not None and st[1] == parent and st[0] != "Z":
                out.append(int(entry.name))
    return out


def is_worker(pid: int) -> bool:
    try:
        return b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def alive(pid: int) -> bool:
    st = stat_of(pid)
    return st is not None and st[0] not in ("Z", "X")


def artifacts(folder: Path) -> set[str]:
    return {p.name for p in folder.glob("*.safetensors")} if folder.is_dir() else set()


def leftovers(*folders: Path) -> list[Path]:
    return [p for f in folders for p in f.rglob("*") if p.is_file() and p.name.endswith(".tmp")]


SLOW_PATTERN = "^[ab]*a[ab]{16}$"
"""A string pattern whose automaton has 2^17 states: seconds to compile, where the schemas
of :func:`write_schemas` take tens of milliseconds now."""


def write_batch(folder: Path) -> tuple[list[Path], list[Path]]:
    """Twelve fast schemas and two slow ones, which the workers take last (the largest
    sources go first): once the fast ones' artifacts are all there, both workers are busy
    with a slow one for seconds."""
    fast = write_schemas(folder, 12)
    slow = [folder / f"slow{k}.json" for k in range(2)]
    for k, path in enumerate(slow):
        path.write_text(json.dumps({"type": "string", "pattern": SLOW_PATTERN, "title": str(k)}))
    return fast, slow


def start_batch(tmp_path: Path, vocab: Path, output: int | None = subprocess.DEVNULL
                ) -> tuple[list[Path], list[Path], Path, subprocess.Popen[bytes]]:
    """:func:`write_batch` compiled by ``maskc compile -j 2``, once its two workers run."""
    fast, slow = write_batch(tmp_path / "schemas")
    out = tmp_path / "out"
    parent = subprocess.Popen(maskc_cmd(tmp_path / "schemas", "-t", vocab, "-o", out, "-j", "2", "--no-cache"),
                              env=environment(tmp_path / "cache"), stdout=output, stderr=subprocess.PIPE)
    wait_for("two pool workers", lambda: sum(map(is_worker, children(parent.pid))) == 2)
    return fast, slow, out, parent


def test_killing_the_parent_ends_its_workers(tmp_path: Path, vocab: Path) -> None:
    fast, slow, out, parent = start_batch(tmp_path, vocab)
    try:
        wait_for("a first artifact", lambda: bool(artifacts(out)))
        procs = children(parent.pid)  # the workers, and multiprocessing's resource tracker
        workers = [pid for pid in procs if is_worker(pid)]
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    assert len(workers) == 2
    wait_for("the workers to end with their parent", lambda: not any(map(alive, procs)))
    after_death = artifacts(out)
    assert len(after_death) < len(fast) + len(slow)  # the workers did not go on with the batch
    time.sleep(1.0)
    assert artifacts(out) == after_death
    for name in after_death:
        maskc.load_artifact(out / name)


def test_a_killed_worker_fails_its_input_alone_and_the_batch_is_kept(tmp_path: Path, vocab: Path) -> None:
    """What the system's out-of-memory killer does to a worker: that input fails, clearly;
    the others are kept, and the manifest records them."""
    fast, slow, out, parent = start_batch(tmp_path, vocab, subprocess.PIPE)
    try:
        wait_for("the fast artifacts", lambda: len(artifacts(out)) >= len(fast))
        time.sleep(0.5)  # (a worker writes its artifact, then sends its result: the last ones reach the parent)
        for pid in [p for p in children(parent.pid) if is_worker(p)]:
            os.kill(pid, signal.SIGKILL)
        stdout, stderr = parent.communicate(timeout=DEADLINE)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    assert parent.returncode == 1, stderr.decode()[-2000:]
    doc = json.loads(stdout)
    failed = [r for r in doc["results"] if not r["ok"]]
    assert sorted(r["path"] for r in failed) == sorted(map(str, slow))
    for r in failed:
        assert r["error"]["type"] == "WorkerLost"
        assert "killed by SIGKILL" in r["error"]["message"] and r["path"] in r["error"]["message"]
    assert doc["summary"] == {"compiled": len(fast), "failed": 2}
    entries = read_manifest(out)
    assert sorted(Path(e["source"]).name for e in entries) == sorted(p.name for p in fast)
    for name in artifacts(out):
        maskc.load_artifact(out / name)


def test_a_cancelled_batch_records_what_it_finished(tmp_path: Path, vocab: Path) -> None:
    """SIGTERM (a CI's cancel) stops ``maskc compile`` as Ctrl-C does: its workers end, and
    the manifest records the artifacts whose compiles had finished."""
    fast, _, out, parent = start_batch(tmp_path, vocab)
    try:
        procs = children(parent.pid)
        wait_for("the fast artifacts", lambda: len(artifacts(out)) >= len(fast))
        time.sleep(0.3)  # (their results reach the parent)
        parent.send_signal(signal.SIGTERM)
        _, stderr = parent.communicate(timeout=DEADLINE)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    assert parent.returncode == 130, stderr.decode()[-2000:]
    assert b"Traceback" not in stderr
    assert b"interrupted: 12 of 14 compiles finished" in stderr and b"manifest.json" in stderr
    wait_for("the workers to end", lambda: not any(alive(p) for p in procs))
    entries = read_manifest(out)
    assert sorted(Path(e["source"]).name for e in entries) == sorted(p.name for p in fast)
    for e in entries:
        maskc.load_artifact(out / e["artifact"])


def test_concurrent_and_killed_compiles_leave_only_whole_files(tmp_path: Path, vocab: Path) -> None:
    out, cache = tmp_path / "out", tmp_path / "cache"
    env = environment(cache)
    shared = write_schemas(tmp_path / "shared", 1, fields=1)[0]
    own = write_schemas(tmp_path / "own", 4, first=1, fields=1)
    procs = [subprocess.Popen(maskc_cmd(shared, own[i], "-t", vocab, "-o", out), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(4)]
    for p in procs:
        stdout, stderr = p.communicate()
        assert p.returncode == 0, stderr.decode()[-2000:]
        assert json.loads(stdout)["summary"] == {"compiled": 2, "failed": 0}

    # a compile killed midway, into the same folder and cache (a batch long enough that the
    # kill lands before its end on a loaded machine)
    batch = write_schemas(tmp_path / "batch", KILLED_BATCH, first=5, fields=2)
    cmd = maskc_cmd(tmp_path / "batch", "-t", vocab, "-o", out)
    before = artifacts(out)
    killed = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for("the killed compile's first artifact", lambda: len(artifacts(out)) > len(before))
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.wait()

    # whole files only, under every final name
    for name in artifacts(out):
        maskc.load_artifact(out / name)
    for entry in ArtifactCache(cache).entries():
        maskc.load_artifact(entry)
    entries = read_manifest(out)
    names = {Path(e["source"]).name for e in entries}
    assert {p.name for p in [shared, *own]} <= names  # the killed batch may have recorded some of its own
    assert names <= {p.name for p in [shared, *own, *batch]}
    for e in entries:
        maskc.load_artifact(out / e["artifact"])

    # the rerun finishes the batch and sweeps what the killed writer left
    rerun = subprocess.run(cmd, env=env, capture_output=True)
    assert rerun.returncode == 0, rerun.stderr.decode()[-2000:]
    assert leftovers(out, cache) == []
    entries = read_manifest(out)
    assert len(entries) == 1 + 4 + KILLED_BATCH
    assert {e["artifact"] for e in entries} == artifacts(out)
    for name in artifacts(out):
        maskc.load_artifact(out / name)
    assert len(ArtifactCache(cache).entries()) == 1 + 4 + KILLED_BATCH
    for entry in ArtifactCache(cache).entries():
        maskc.load_artifact(entry)
    assert not any(p.name.startswith(".") for p in out.iterdir())
    assert [p.name for p in batch] == sorted(p.name for p in batch)
