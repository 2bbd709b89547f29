"""Worker processes for ``maskc compile --jobs N``: each compiles one input at a time.

The parent knows which input each worker holds, so a worker that dies (the system's
out-of-memory killer, a crash in a native library) fails that input alone: its results say
how the process ended, a fresh worker takes the next input, and the batch, its other
artifacts and the manifest are kept. ``--max-memory`` caps each worker's memory, so that an
input that needs more fails cleanly (:class:`~maskc.compiler.errors.MemoryLimitExceeded`)
before the system has to kill anything.

Workers are spawned (no fork: the parent may run a progress thread) and end with the parent
(:func:`die_with_parent`).
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any

__all__ = ["MEMORY_LIMIT_ENFORCED", "Task", "die_with_parent", "limit_memory", "process_end", "run_tasks",
           "terminate_as_interrupt"]

Task = tuple[Any, ...]
"""The arguments of one call of the work function (picklable)."""

MEMORY_LIMIT_ENFORCED = sys.platform.startswith("linux")
"""Where ``--max-memory`` is enforced: Linux caps a process's data (``RLIMIT_DATA``: its heap
and private mappings, what a compile allocates). Elsewhere the limit is not enforced, and the
CLI says so."""

_PR_SET_PDEATHSIG = 1
_WATCH_SECONDS = 0.5
_JOIN_SECONDS = 5.0


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(_WATCH_SECONDS)
        if os.getppid() != parent:
            os._exit(1)


def die_with_parent(parent: int) -> None:
    """End this process when ``parent`` dies, even by SIGKILL: on Linux the kernel sends
    SIGKILL (``PR_SET_PDEATHSIG``); everywhere a daemon thread exits once the parent
    pid changes (the process was re-parented).

    The kernel's signal follows the *thread* that started the process: workers are started
    from the thread that runs :func:`run_tasks` (the main thread of ``maskc compile``), which
    lives as long as they do.
    """
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent,), name="maskc-parent-watch", daemon=True).start()


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM (what a CI sends to cancel a job) stops this process as
    Ctrl-C does, by ``KeyboardInterrupt`` in the main thread, so cleanup code runs. A no-op
    off the main thread or where there is no SIGTERM."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def limit_memory(megabytes: int) -> bool:
    """Cap this process's data at ``megabytes`` MiB (never above a hard limit already set):
    an allocation past it raises ``MemoryError``. False where that cannot be enforced."""
    if not MEMORY_LIMIT_ENFORCED:
        return False
    import resource

    cap = megabytes << 20
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    try:
        resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    except (ValueError, OSError):
        return False
    return True


def process_end(exitcode: int | None) -> str:
    """How a process ended, in words: ``killed by SIGKILL``, ``exit status 1``."""
    if exitcode is None:
        return "ended without an exit status"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit status {exitcode}"


def _serve(conn: Connection, parent: int, memory_mb: int | None, work: Callable[..., tuple[Any, bool]]) -> None:
    """A worker: run ``work(*task)`` for each task the parent sends, send back its result;
    leave after a result that asks for a fresh process (``work`` returns ``(result, retire)``)."""
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the parent's to handle: it ends the workers
    if memory_mb is not None:
        limit_memory(memory_mb)
    from maskc.compiler.hugepages import no_huge_pages  # (numpy's, in the worker only)

    with no_huge_pages():  # (its tables and compiles: see maskc.compiler.hugepages)
        while True:
            try:
                task = conn.recv()
            except (EOFError, OSError):
                return
            if task is None:
                return
            result, retire = work(*task)
            conn.send((result, retire))
            if retire:
                return


class _Worker:
    def __init__(self, ctx: Any, parent: int, memory_mb: int | None, work: Callable[..., Any]) -> None:
        self.conn, child = ctx.Pipe()
        self.process: BaseProcess = ctx.Process(target=_serve, args=(child, parent, memory_mb, work),
                                                name="maskc-compile-worker", daemon=True)
        self.process.start()
        child.close()  # the parent's copy: the pipe reports EOF once the worker is gone

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass
        self.process.join(_JOIN_SECONDS)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


def run_tasks(tasks: Sequence[Task], workers: int, work: Callable[..., tuple[Any, bool]],
              lost: Callable[[int, str, bool], Any], done: Callable[[int, Any], None], *,
              memory_mb: int | None = None, seconds: Sequence[float | None] | None = None) -> None:
    """Run ``work(*tasks[i])`` for every ``i`` on up to ``workers`` spawned processes, in order
    of ``tasks``, calling ``done(i, result)`` as each ends (in the calling thread).

    ``work`` is a module-level function returning ``(result, retire)``; ``retire`` ends the
    worker after this task (a fresh one takes the next). A worker that dies while it holds
    task ``i`` gives ``done(i, lost(i, how, False))``, where ``how`` says how the process
    ended; one still running ``seconds[i]`` after it was handed task ``i`` is killed, and
    gives ``done(i, lost(i, how, True))``. The other tasks go on, on fresh workers.
    ``memory_mb`` caps each worker's memory (:func:`limit_memory`).
    """
    ctx = multiprocessing.get_context("spawn")
    parent = os.getpid()
    pending = deque(range(len(tasks)))
    idle: list[_Worker] = []
    busy: dict[_Worker, tuple[int, float]] = {}  # worker -> (task, when it must be done)
    try:
        while pending or busy:
            while pending and len(busy) < workers:
                w = idle.pop() if idle else _Worker(ctx, parent, memory_mb, work)
                if not w.process.is_alive():  # ended while idle: never handed a task
                    w.stop()
                    continue
                i = pending.popleft()
                try:
                    w.conn.send(tasks[i])
                except (OSError, ValueError):  # it died just now: the task goes to another
                    pending.appendleft(i)
                    w.stop()
                    continue
                limit = seconds[i] if seconds is not None else None
                busy[w] = (i, time.monotonic() + limit if limit is not None else math.inf)
            _settle(busy, idle, lost, done)
    finally:
        for w in [*idle, *busy]:
            if busy:  # an error or an interrupt: nothing waits for the workers' results
                w.process.kill()
            w.stop()


def _settle(busy: dict[_Worker, tuple[int, float]], idle: list[_Worker], lost: Callable[[int, str, bool], Any],
            done: Callable[[int, Any], None]) -> None:
    """Wait until a busy worker answers, dies or runs out of time; account for every one that did."""
    waitables: list[Any] = [w.conn for w in busy]
    waitables += [w.process.sentinel for w in busy]
    due = min(d for _, d in busy.values())
    wait(waitables, timeout=None if due == math.inf else max(0.0, due - time.monotonic()))
    now = time.monotonic()
    for w in list(busy):
        i, deadline = busy[w]
        gone = False
        reply: tuple[Any, bool] | None = None
        try:
            if w.conn.poll():
                reply = w.conn.recv()
        except (EOFError, OSError):  # its end of the pipe closed: it is exiting
            gone = True
        if reply is not None:
            result, retire = reply
            del busy[w]
            if retire:
                w.stop()
            else:
                idle.append(w)
            done(i, result)
        elif gone or not w.process.is_alive():
            del busy[w]
            w.process.join(_JOIN_SECONDS)
            how = process_end(w.process.exitcode)
            w.stop()
            done(i, lost(i, how, False))
        elif now >= deadline:
            del busy[w]
            w.process.kill()
            w.process.join(_JOIN_SECONDS)
            w.stop()
            done(i, lost(i, "still running past its time: stopped", True))
