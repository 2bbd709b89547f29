"""The work behind ``maskc compile``: turn PATH arguments into jobs and compile each one.

A :class:`Job` is one input already read and parsed in the parent process; :func:`run_job`
compiles it and writes its artifact (``<stem>.<content key>.safetensors``), returning a
plain JSON-able result, so jobs run the same in-process or in a process pool whose workers
load the tokenizer once and die with the parent. The parent then records every written
artifact in the output folder's ``manifest.json``.
"""

from __future__ import annotations

import ctypes
import hashlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

import maskc
from maskc.artifacts.api import make_options
from maskc.artifacts.manifest import artifact_file_name, manifest_entry, update_manifest
from maskc.cli.errors import describe, describe_internal
from maskc.compiler.errors import InputError, MaskcError
from maskc.compiler.frontends.registry import kind_for_path
from maskc.compiler.options import DEFAULT_MAX_DEPTH, Limits
from maskc.compiler.vocab import Vocabulary

__all__ = ["Job", "Kind", "Settings", "collect_jobs", "load_vocabulary", "read_json", "run_all", "run_job",
           "unwrap_schema"]

Kind = Literal["json_schema", "regex", "choice", "gbnf"]
Result = dict[str, Any]

# Keywords that mark a JSON object as a schema when a directory is scanned; other JSON files
# there (examples, fixtures, token lists) are skipped with a warning.
_SCHEMA_KEYWORDS = frozenset({
    "$schema", "$id", "$ref", "$defs", "definitions", "type", "properties", "required",
    "additionalProperties", "patternProperties", "items", "prefixItems", "enum", "const",
    "anyOf", "oneOf", "allOf", "not", "if", "pattern", "format", "minimum", "maximum",
    "minLength", "maxLength", "minItems", "maxItems", "title", "description",
})


@dataclass(frozen=True, slots=True)
class Job:
    """One input: its label (path or pattern), artifact stem, kind and parsed source.

    Stems may repeat (``a/x.json``, ``b/x.json``): file names carry the content key, so
    artifacts of different inputs or options never share a name."""

    label: str
    stem: str
    kind: Kind
    source: Any = None
    failure: dict[str, Any] | None = None  # set when reading the input already failed


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a worker needs besides the job: picklable, no live objects."""

    tokenizer: str
    eos: tuple[int | str, ...] | None
    vocab_size: int | None
    whitespace: str
    lenient: bool
    cache: str | None
    out: str
    max_depth: int = DEFAULT_MAX_DEPTH
    limits: Limits = Limits()
    semantics: str = "generation"


def load_vocabulary(s: Settings) -> Vocabulary:
    eos = list(s.eos) if s.eos else None
    return maskc.load_tokenizer(s.tokenizer, eos=eos, vocab_size=s.vocab_size)


def read_json(path: Path) -> tuple[Any, dict[str, Any] | None]:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from e
    try:
        return orjson.loads(raw), None
    except orjson.JSONDecodeError as e:
        return None, describe(InputError(f"{path} is not valid JSON: {e}"))


def unwrap_schema(doc: Any) -> Any:
    """The schema a file's document holds: MaskBench cases and OpenAI/Anthropic tool
    definitions are unwrapped by the library's rules; a wrapper around something else than
    a schema is kept whole, so its compile reports the error with its pointer."""
    from maskc.compiler.frontends.json_schema.inputs import unwrap

    if not isinstance(doc, dict):
        return doc
    try:
        return unwrap(doc)
    except MaskcError:
        return doc


def _looks_like_schema(doc: Any) -> bool:
    if isinstance(doc, bool):
        return True
    return isinstance(doc, dict) and (not doc or not _SCHEMA_KEYWORDS.isdisjoint(doc))


def _schema_files(
    paths: Sequence[str], skipped: list[str], *, gbnf: bool = False
) -> Iterator[tuple[Path, Any, dict[str, Any] | None]]:
    for arg in paths:
        p = Path(arg)
        if p.is_dir():
            files = sorted(f for f in [*p.glob("*.json"), *p.glob("*.gbnf")] if f.is_file())
            found = 0
            for f in files:
                if gbnf or kind_for_path(str(f)) == "gbnf":
                    found += 1
                    yield (f, *read_text(f))
                    continue
                doc, failure = read_json(f)
                doc = unwrap_schema(doc)
                if failure is None and not _looks_like_schema(doc):
                    skipped.append(str(f))
                    continue
                found += 1
                yield f, doc, failure
            if not found:
                raise InputError(f"no JSON Schema or GBNF files in directory {p}",
                                 hint="compile takes schema .json or .gbnf files, or directories of them")
        elif p.is_file() and (gbnf or kind_for_path(str(p)) == "gbnf"):
            yield (p, *read_text(p))
        elif p.is_file():
            doc, failure = read_json(p)
            yield p, unwrap_schema(doc), failure
        else:
            raise InputError(f"no such file or directory: {arg}")


def collect_jobs(paths: Sequence[str], kind: Kind) -> tuple[list[Job], list[str]]:
    """Jobs in argument order (directories expanded, sorted) and the files skipped."""
    jobs: list[Job] = []
    skipped: list[str] = []
    if kind == "regex":
        for pattern in paths:
            digest = hashlib.sha256(pattern.encode()).hexdigest()[:8]
            jobs.append(Job(pattern, f"regex-{digest}", kind, pattern))
    elif kind == "choice":
        for arg in paths:
            p = Path(arg)
            if not p.is_file():
                raise InputError(f"no such file: {arg}",
                                 hint="--choice takes JSON files holding a list of strings")
            doc, failure = read_json(p)
            strings = isinstance(doc, list) and all(isinstance(c, str) for c in doc)
            if failure is None and not strings:
                failure = describe(InputError(f"{p} must hold a JSON list of strings"))
            jobs.append(Job(str(p), p.stem, kind, doc, failure))
    else:
        for p, doc, failure in _schema_files(paths, skipped, gbnf=kind == "gbnf"):
            file_kind: Kind = "gbnf" if kind == "gbnf" or kind_for_path(str(p)) == "gbnf" else "json_schema"
            jobs.append(Job(str(p), p.stem, file_kind, doc, failure))
    return jobs, skipped


def read_text(path: Path) -> tuple[Any, dict[str, Any] | None]:
    try:
        return path.read_text(encoding="utf-8"), None
    except UnicodeDecodeError as e:
        return None, describe(InputError(f"{path} is not UTF-8 text: {e}"))
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from e


_vocab: Vocabulary | None = None
_PR_SET_PDEATHSIG = 1
_WATCH_SECONDS = 0.5
MANIFEST_ENTRY = "_manifest_entry"  # a result's manifest record, taken out by run_all


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(_WATCH_SECONDS)
        if os.getppid() != parent:
            os._exit(1)


def die_with_parent(parent: int) -> None:
    """End this process when ``parent`` dies, even by SIGKILL: on Linux the kernel sends
    SIGKILL (``PR_SET_PDEATHSIG``); everywhere a daemon thread exits once the parent
    pid changes (the process was re-parented).

    The kernel's signal follows the *thread* that started the process: ProcessPoolExecutor
    starts spawned workers from the thread that submits (here the main thread, which
    lives as long as the process), never from a thread that ends before the pool.
    """
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent,), name="maskc-parent-watch", daemon=True).start()


def _init_worker(settings: Settings, parent: int) -> None:
    global _vocab
    die_with_parent(parent)
    _vocab = load_vocabulary(settings)


def _manifest_source(job: Job, out: Path) -> str:
    """A file input's path relative to the output folder (a regex: the pattern itself)."""
    if job.kind == "regex":
        return job.label
    try:
        return Path(os.path.relpath(Path(job.label).resolve(), out.resolve())).as_posix()
    except ValueError:  # another drive (Windows)
        return Path(job.label).resolve().as_posix()


def run_job(job: Job, settings: Settings) -> Result:
    """Compile one job and write its artifact; failures become the result's ``error``."""
    result: Result = {
        "path": job.label, "ok": False, "artifact": None, "states": None,
        "distinct_masks": None, "bytes": None, "compile_ms": None, "cache_hit": None,
        "not_enforced": [], "error": job.failure,
    }
    if job.failure is not None:
        return result
    vocab = _vocab if _vocab is not None else load_vocabulary(settings)
    try:
        opts = make_options(settings.whitespace, settings.lenient, max_depth=settings.max_depth,
                            limits=settings.limits, semantics=settings.semantics) \
            if job.kind == "json_schema" else make_options(max_depth=settings.max_depth, limits=settings.limits)
        art = maskc.compile_source(job.kind, job.source, vocab, options=opts, cache=settings.cache)
        name = artifact_file_name(job.stem, art)
        path = art.save(Path(settings.out) / name)
    except MaskcError as e:
        result["error"] = describe(e)
        return result
    except Exception as e:  # noqa: BLE001  (a bug: reported per input, the batch goes on)
        result["error"] = describe_internal(e)
        return result
    result.update(ok=True, artifact=str(path), states=art.num_states, distinct_masks=art.num_masks,
                  bytes=path.stat().st_size, compile_ms=round(art.compile_ms, 3),
                  cache_hit=art.cache_hit, not_enforced=art.not_enforced)
    result[MANIFEST_ENTRY] = manifest_entry(art, source=_manifest_source(job, Path(settings.out)),
                                            stem=job.stem, file_name=name)
    return result


def run_all(jobs: Sequence[Job], settings: Settings, vocab: Vocabulary, n_workers: int,
            started: Callable[[Job], None], finished: Callable[[Result], None]) -> list[Result]:
    """Results in job order; ``n_workers > 1`` uses a process pool (spawned workers that
    die with this process). Every artifact written is then recorded in ``manifest.json``.

    Raises:
        ArtifactError: the manifest cannot be updated.
    """
    results = _compile_all(jobs, settings, vocab, n_workers, started, finished)
    entries = [e for r in results if (e := r.pop(MANIFEST_ENTRY, None)) is not None]
    if entries:
        update_manifest(settings.out, entries)
    return results


def _compile_all(jobs: Sequence[Job], settings: Settings, vocab: Vocabulary, n_workers: int,
                 started: Callable[[Job], None], finished: Callable[[Result], None]) -> list[Result]:
    global _vocab
    if n_workers <= 1 or len(jobs) <= 1:
        _vocab = vocab
        results = []
        for job in jobs:
            started(job)
            results.append(run_job(job, settings))
            finished(results[-1])
        return results
    out: list[Result | None] = [None] * len(jobs)
    ctx = multiprocessing.get_context("spawn")  # no fork: the parent may run a progress thread
    with ProcessPoolExecutor(min(n_workers, len(jobs)), mp_context=ctx,
                             initializer=_init_worker, initargs=(settings, os.getpid())) as pool:
        futures = {pool.submit(run_job, job, settings): i for i, job in enumerate(jobs)}
        for future in as_completed(futures):
            out[futures[future]] = r = future.result()
            finished(r)
    return [r for r in out if r is not None]
