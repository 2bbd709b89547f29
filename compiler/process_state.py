"""A change to process-wide state for the length of a block: made where the outermost of
nested blocks begins, undone where it ends (nested compiles and threads share one count).
Compiles use two (:mod:`maskc.compiler.collector`, :mod:`maskc.compiler.hugepages`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["ProcessSetting"]


class ProcessSetting:
    """``change()`` makes the change and returns what undoes it (None: nothing to undo);
    calling the setting gives a context manager (and decorator) for a block under it."""

    def __init__(self, change: Callable[[], Callable[[], None] | None]) -> None:
        self._change = change
        self._lock = threading.Lock()
        self._depth = 0
        self._undo: Callable[[], None] | None = None

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                self._undo = self._change()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0 and self._undo is not None:
                    undo, self._undo = self._undo, None
                    undo()
