"""The child processes of ``maskc bench``: one per engine, each schema timed inside it.

Each engine runs in its own spawned process with its address space capped
(``RLIMIT_AS``, where the platform has it). The process loads the tokenizer, builds the
engine, warms it up once on a small schema, then serves schemas one at a time
(:func:`measure`). The parent waits at most ``timeout_s`` per schema: a child that runs
late is killed, one that dies (out of memory, a native crash) is reported by its exit
code, and either is an error for that engine and schema, after which a fresh child starts.

Peak memory of a compile is the growth of the process's peak resident set (Linux: free
heap pages are handed back (``malloc_trim``), the peak is reset through
``/proc/self/clear_refs`` just before the compile and read from ``VmHWM`` after it, so
native allocations count); elsewhere it is ``tracemalloc``'s peak
over a second, traced compile (Python objects and numpy arrays only).
"""

from __future__ import annotations

import ctypes
import gc
import multiprocessing as mp
import os
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from maskc.artifacts.bench.engines import Engine, make_engine
from maskc.artifacts.bench.instances import Instance, random_walks
from maskc.compiler.vocab import Vocabulary

__all__ = ["MEMORY_METHOD", "EngineResult", "EngineWorker", "Job", "TokenizerSpec", "measure"]

_WARMUP_SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
                  "required": ["a"]}
_STARTUP_SECONDS = 600.0
_POISONED = ("MemoryError", "bad_alloc")


def _proc_status(key: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _release_free_memory() -> None:
    """Hand freed heap pages back to the system, so a compile that reuses them shows as growth."""
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        return False
    return True


def _rss_method_works() -> bool:
    return sys.platform.startswith("linux") and _proc_status("VmHWM") is not None and _reset_peak()


MEMORY_METHOD = "rss" if _rss_method_works() else "tracemalloc"
"""``rss``: growth of the peak resident set over the compile (all allocations);
``tracemalloc``: peak of Python allocations over a second, traced compile."""


@dataclass(frozen=True, slots=True)
class TokenizerSpec:
    """How a child loads the benchmark's tokenizer (picklable: children are spawned)."""

    spec: str
    eos: tuple[int | str, ...] | None = None
    vocab_size: int | None = None

    def load(self) -> Vocabulary:
        from maskc.compiler.tokenizer import load_tokenizer

        return load_tokenizer(self.spec, eos=list(self.eos) if self.eos else None, vocab_size=self.vocab_size)


@dataclass(frozen=True, slots=True)
class Job:
    """One schema for one engine. ``walks`` > 0 asks the maskc child for that many random
    walks of its compiled grammar (returned in :attr:`EngineResult.walks`) to time over.

    ``timed`` is the index in ``instances`` of the one instance whose steps are timed (it
    is walked first, right after the first mask; the others are judged, not timed); None,
    or random walks in place of the instances, times every instance.

    Raises:
        ValueError: ``timed`` is not an index of ``instances``.
    """

    schema: Any
    instances: tuple[Instance, ...]
    walks: int = 0
    walk_tokens: int = 256
    seed: int = 0
    timed: int | None = None

    def __post_init__(self) -> None:
        if self.timed is not None and not 0 <= self.timed < len(self.instances):
            raise ValueError(f"timed must index the {len(self.instances)} instances, got {self.timed}")


@dataclass
class EngineResult:
    """One engine on one schema. Times in milliseconds, steps in microseconds; None where
    the engine did not get that far or has no such thing (a peer without serialized form)."""

    ok: bool = False
    error: str | None = None
    cold_ms: float | None = None
    warm_ms: float | None = None
    size_bytes: int | None = None
    peak_memory_bytes: int | None = None
    step_us: list[float] = field(default_factory=list)
    verdicts: list[bool] = field(default_factory=list)  # per instance, in the job's order: passed
    valid_accepted: int = 0
    valid_rejected: int = 0
    invalid_rejected: int = 0
    invalid_accepted: int = 0
    walks: list[tuple[int, ...]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _first_mask(engine: Engine, compiled: Any) -> Any:
    m = engine.matcher(compiled)
    m.fill()
    return m


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Timed steps from a clean collector, over a frozen heap (see :func:`measure`); the
    collector is thawed after.

    Freezing resets the youngest generation's count and takes every object out of reach of
    the collections the steps bring on, so no collection of the process's heap is due or
    possible; it collects nothing itself. A collection right before the steps would: over a
    large heap (a MaskBench run's) it evicts the CPU caches the first steps' first visits
    use, and doubled maskc's per-token p99 (117 to 141 us against 53 to 58 without, the same
    14 schemas and walks interleaved)."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _walk(m: Any, inst: Instance, eos: tuple[int, ...], steps: list[float]) -> bool:
    """Feed ``inst`` token by token (each must be allowed by the step's mask and accepted),
    timing mask fill and accept of every step; then EOS must be allowed."""
    m.reset()
    clock = time.perf_counter
    for t in inst.ids:
        t0 = clock()
        m.fill()
        t1 = clock()
        allowed = m.allowed(t)
        t2 = clock()
        accepted = allowed and m.accept(t)
        steps.append(((t1 - t0) + (clock() - t2)) * 1e6)
        if not accepted:
            return False
    m.fill()
    return any(m.allowed(e) for e in eos)


def measure(engine: Engine, job: Job, workdir: Path) -> EngineResult:
    """Time one schema on one engine: cold compile to first mask, warm load to first mask,
    every step over the instances (or over ``job.timed`` alone), peak memory of the compile,
    and pass counts.

    Raises whatever the engine raises on a schema it refuses (the caller records it).
    """
    res = EngineResult()
    rss = MEMORY_METHOD == "rss"
    if rss:
        _release_free_memory()
    before = _proc_status("VmRSS") if rss and _reset_peak() else None
    t0 = time.perf_counter()
    compiled = engine.compile(job.schema)
    m = _first_mask(engine, compiled)
    res.cold_ms = (time.perf_counter() - t0) * 1e3
    peak = _proc_status("VmHWM") if before is not None else None
    if before is not None and peak is not None:
        res.peak_memory_bytes = max(peak - before, 0)
    else:
        tracemalloc.start()
        try:
            _first_mask(engine, engine.compile(job.schema))
            res.peak_memory_bytes = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    res.ok = True
    path = workdir / f"{engine.name}.compiled"
    loaded = None
    try:
        res.size_bytes = engine.save(compiled, path)
        if res.size_bytes is not None:
            t0 = time.perf_counter()
            loaded = engine.load(path)
            _first_mask(engine, loaded)
            res.warm_ms = (time.perf_counter() - t0) * 1e3
    except Exception as e:  # noqa: BLE001 - seen: XGrammar's std::bad_alloc on serializing a grammar it compiled
        res.error = f"save/load: {_describe(e)}"
    instances = job.instances
    if job.walks and loaded is not None:
        # Walks use the loaded copy, so the timed steps below still visit states first.
        res.walks = random_walks(loaded, engine.vocab, count=job.walks, max_tokens=job.walk_tokens, seed=job.seed)
        instances = tuple(Instance(w, True) for w in res.walks)
    eos = engine.vocab.eos_ids
    timed = job.timed if instances is job.instances else None  # random walks replaced them: time all
    order = list(range(len(instances)))
    if timed is not None:  # the timed instance first, right after the first mask, as if alone
        order.remove(timed)
        order.insert(0, timed)
    # Steps are timed from a clean collector: a collection the compile, the load or the walks
    # above left due would land in the first steps and time the process's heap (10 to 30 ms
    # for a full pass here), not the engine. The same for every engine; a collection the
    # engine's own steps bring on is still timed. What is alive then is frozen for the
    # steps (not collected first: see frozen_heap): a full collection they bring on scans the
    # objects they made, not the process's heap (in a MaskBench run a full pass took 70 to
    # 110 ms, and landed in one schema's steps or another's as the heap grew).
    verdicts = [False] * len(instances)
    with frozen_heap():
        for k in order:
            inst = instances[k]
            verdicts[k] = _walk(m, inst, eos, res.step_us if timed in (None, k) else [])
    for inst, passed in zip(instances, verdicts, strict=True):
        if inst.valid:
            res.valid_accepted += passed
            res.valid_rejected += not passed
        else:
            res.invalid_accepted += passed
            res.invalid_rejected += not passed
    res.verdicts = verdicts
    return res


def _describe(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {text[:300]}" if text else type(e).__name__


def _worker(name: str, tokenizer: TokenizerSpec, options: dict[str, Any], memory_mb: int, conn: Any) -> None:
    # Peers log warnings per approximated keyword on stderr; the report says what matters.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    if memory_mb > 0:
        try:
            import resource

            cap = memory_mb * 2**20
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        except (ImportError, ValueError, OSError):
            pass
    try:
        t0 = time.perf_counter()
        engine = make_engine(name, tokenizer.load(), options)
        with tempfile.TemporaryDirectory(prefix="maskc-bench-") as tmp:
            measure(engine, Job(_WARMUP_SCHEMA, ()), Path(tmp))
        info = {"setup_ms": (time.perf_counter() - t0) * 1e3, "version": engine.version(), **engine.info()}
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        conn.send(("error", _describe(e)))
        return
    conn.send(("ready", info))
    with tempfile.TemporaryDirectory(prefix="maskc-bench-") as tmp:
        while True:
            try:
                job = conn.recv()
            except EOFError:
                return
            if job is None:
                return
            try:
                result = measure(engine, job, Path(tmp))
            except MemoryError as e:
                result = EngineResult(error=_describe(e))
            except Exception as e:  # noqa: BLE001 - the engine refused the schema
                result = EngineResult(error=_describe(e))
            conn.send(("ok", result))


class EngineWorker:
    """The parent's handle on one engine's child process.

    ``options`` are the engine's constructor options (:func:`make_engine`; picklable, as the
    child is spawned), e.g. ``{"strict": True}`` for XGrammar.

    Raises:
        RuntimeError: from the constructor, when the child cannot load the tokenizer or
        build the engine (the message says why).
    """

    def __init__(self, name: str, tokenizer: TokenizerSpec, *, timeout_s: float, memory_mb: int,
                 options: Mapping[str, Any] | None = None) -> None:
        self.name, self.tokenizer, self.timeout_s, self.memory_mb = name, tokenizer, timeout_s, memory_mb
        self.options = dict(options or {})
        self.info: dict[str, Any] = {}
        self._proc: Any = None
        self._conn: Any = None
        self._start()

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_worker,
                                 args=(self.name, self.tokenizer, self.options, self.memory_mb, child),
                                 daemon=True, name=f"maskc-bench-{self.name}")
        self._proc.start()
        child.close()
        self._conn = parent
        if not parent.poll(_STARTUP_SECONDS):
            self._kill()
            raise RuntimeError(f"{self.name} did not start within {_STARTUP_SECONDS:.0f} s")
        try:
            kind, payload = parent.recv()
        except EOFError:
            self._proc.join(10)
            raise RuntimeError(f"{self.name} died while starting (exit code {self._proc.exitcode})") from None
        if kind != "ready":
            self._kill()
            raise RuntimeError(f"{self.name} failed to start: {payload}")
        if not self.info:
            self.info = payload

    def _kill(self) -> None:
        if self._proc.is_alive():
            self._proc.kill()
        self._proc.join(10)
        self._conn.close()

    def run(self, job: Job) -> EngineResult:
        """The engine's result for ``job``; a timeout or a dead child is an error result, and
        the next job gets a fresh child."""
        try:
            self._conn.send(job)
            if self._conn.poll(self.timeout_s):
                kind, payload = self._conn.recv()
                if kind == "ok":
                    result: EngineResult = payload
                    if result.error is None or not any(w in result.error for w in _POISONED):
                        return result
                    self._kill()  # a native allocation failure can leave the engine unusable
                    self._start()
                    return result
            error = f"timeout: no result within {self.timeout_s:g} s"
        except (EOFError, OSError):
            self._proc.join(10)
            code = self._proc.exitcode
            cap = f"; address space capped at {self.memory_mb} MB" if self.memory_mb > 0 else ""
            error = f"crashed: the child exited with code {code}{cap}"
        self._kill()
        self._start()
        return EngineResult(error=error)

    def close(self) -> None:
        try:
            self._conn.send(None)
        except OSError:
            pass
        self._proc.join(10)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(10)
