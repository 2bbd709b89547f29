"""Work functions for testing :func:`maskc.cli.workers.run_tasks` in real spawned workers.

A task is ``(name, action)``: ``ok`` answers ``(name, pid)``; ``die`` kills its own process
with SIGKILL (what the system's out-of-memory killer does); ``exit`` leaves with status 7;
``retire`` answers and asks for a fresh process; ``hang`` sleeps for an hour.
"""

from __future__ import annotations

import os
import signal
import sys
import time


def work(name: str, action: str) -> tuple[tuple[str, int], bool]:
    if action == "die":
        if sys.platform == "win32":
            os._exit(9)
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "exit":
        os._exit(7)
    if action == "hang":
        time.sleep(3600)
    return (name, os.getpid()), action == "retire"


def allocate(limit_mb: int, sizes_mb: list[int]) -> list[str]:
    """Under a memory cap of ``limit_mb`` MiB above what this process holds now, allocate and
    touch each of ``sizes_mb`` MiB in turn (each freed before the next): ``ok`` or
    ``MemoryError`` for each; ``["unenforced"]`` where the cap cannot be set."""
    from maskc.cli.workers import limit_memory

    held = 0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmData:"):
                held = int(line.split()[1]) // 1024
    if not limit_memory(held + limit_mb):
        return ["unenforced"]
    out = []
    for size in sizes_mb:
        try:
            block = bytearray(size << 20)
            block[::4096] = bytes(len(range(0, len(block), 4096)))
            out.append("ok")
        except MemoryError:
            out.append("MemoryError")
        block = bytearray()
    return out
