"""No transparent huge pages asked for NumPy's large arrays while a compile runs.

NumPy advises the kernel to back each array of 4 MiB or more with transparent huge pages
(``madvise(MADV_HUGEPAGE)``). Where the kernel's ``transparent_hugepage/defrag`` is
``madvise`` or ``defer+madvise`` (a common default), a page fault in such memory finds no
free huge page once memory is fragmented, and stalls on direct compaction instead of taking
a small page; the advice also stays on memory the allocator hands out again (NumPy issue
31590). A compile allocates and frees large temporaries all the time, so the stalls came at
random, in system time: the live states of ``kb_147``'s pushdown automaton took 82 ms in one
run and 1.0 to 1.1 s in another (95 % of it in the kernel), and 96 to 101 ms in every run
without the advice; eight of the slowest MaskBench inputs compiled in 89 to 92 s with it and
74 to 76 s without. Inside :func:`no_huge_pages` NumPy gives no such advice; the setting
comes back when the outermost block ends (nested blocks and threads share one count). The
CLI runs each command inside one block, so nothing it allocates is advised.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from maskc.compiler.process_state import ProcessSetting

__all__ = ["no_huge_pages"]


def _setter() -> Callable[[bool], bool] | None:
    """NumPy's switch for the advice (it returns the previous setting), or None where this
    NumPy has none (then nothing is switched)."""
    for name in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        setter = getattr(module, "_set_madvise_hugepage", None)
        if callable(setter):
            return setter  # type: ignore[no-any-return]
    return None


_SET = _setter()


def _advice_off() -> Callable[[], None] | None:
    setter = _SET
    if setter is None or not setter(False):  # (none, or off already: nothing to give back)
        return None

    def restore() -> None:
        setter(True)

    return restore


no_huge_pages = ProcessSetting(_advice_off)
"""Switch NumPy's huge-page advice off for the block."""
