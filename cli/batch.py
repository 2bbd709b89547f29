"""The work behind ``maskc compile``: turn PATH arguments into jobs and compile each one.

A :class:`Job` is one input already read and parsed in the parent process; :func:`run_job`
compiles it for one tokenizer (its :class:`Settings`) and writes its artifact
(``<stem>.<content key>.safetensors``), returning a plain JSON-able result, so jobs run the
same in-process or in a process pool whose workers die with the parent. A process builds
each tokenizer's vocabulary and tables once; workers load them from the tables the parent
cached under the tokenizer's fingerprint instead of parsing the tokenizer again.

Before any compile, the parent looks each (input, tokenizer) up in the output folder's
``manifest.json`` by its source key (:func:`source_key`); an artifact still there, byte for
byte, is reused without running the front end (``"cached": true``). The parent then records
every artifact in the manifest.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import orjson

import maskc
from maskc.artifacts.api import make_options
from maskc.artifacts.cache import TokenizerTables
from maskc.artifacts.format import COMPILER_VERSION, FORMAT_VERSION, canonical_json
from maskc.artifacts.manifest import (
    artifact_file_name,
    file_sha256,
    manifest_entry,
    read_manifest,
    reusable_artifact,
    update_manifest,
)
from maskc.cli.errors import describe, describe_internal
from maskc.cli.workers import run_tasks
from maskc.compiler.errors import (ArtifactError, InputError, MaskcError, MemoryLimitExceeded, TimeLimitExceeded,
                                  WorkerLost)
from maskc.compiler.frontends.registry import kind_for_path
from maskc.compiler.options import DEFAULT_MAX_DEPTH, CompileOptions, Limits
from maskc.compiler.pipeline import sharing_automata
from maskc.compiler.tokenizer import tokenizer_source
from maskc.compiler.vocab import Vocabulary

__all__ = ["Job", "Kind", "Settings", "Work", "collect_jobs", "job_options", "load_tokenizers", "load_vocabulary",
           "read_json", "run_all", "run_job", "run_jobs", "shard", "source_key", "unwrap_schema", "vocabulary"]

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
    tokenizer_sha256: str | None = None  # the parent's fingerprint: workers load its cached tables
    max_memory_mb: int | None = None  # each compiling process's memory cap (compiles then run in workers)


Work = tuple[Job, Settings]
"""One compile: an input and the settings (tokenizer, options) to compile it with."""


def load_vocabulary(s: Settings) -> Vocabulary:
    """The tokenizer of ``s``, parsed from its file (cached in this process)."""
    eos = list(s.eos) if s.eos else None
    return maskc.load_tokenizer(s.tokenizer, eos=eos, vocab_size=s.vocab_size)


def _source_key(s: Settings) -> str | None:
    """A hash of what names the tokenizer of ``s`` as its files are now (path, modification
    time and size of each file its load reads), with its overrides and this compiler's
    version: where its fingerprint is filed. None where ``s`` names no local files."""
    try:
        source = tokenizer_source(s.tokenizer)
    except MaskcError:
        return None
    if source is None:
        return None
    what = [list(source), list(s.eos) if s.eos else None, s.vocab_size, COMPILER_VERSION]
    return hashlib.sha256(orjson.dumps(what)).hexdigest()


def cached_vocabulary(s: Settings) -> Vocabulary:
    """The tokenizer of ``s``: from the tables cached for its files as they are now (no
    tokenizer file parsed; the text encoder is built on first use), else parsed from its
    files, its tables then cached for the next process. Without a cache, parsed.

    Raises:
        TokenizerError: the tokenizer cannot be loaded.
    """
    key = _source_key(s) if s.cache is not None else None
    if key is None:
        return load_vocabulary(s)
    tables = TokenizerTables(s.cache)
    fingerprint = tables.source(key)
    if fingerprint is not None:
        vocab = tables.load(fingerprint, encoder=_LazyEncoder(s))
        if vocab is not None:
            return vocab
    vocab = load_vocabulary(s)
    if tables.save(vocab) is not None:
        tables.file_source(key, vocab.fingerprint)
    return vocab


def load_tokenizers(base: Settings, specs: Sequence[str]
                    ) -> tuple[list[tuple[Vocabulary, Settings]], list[tuple[str, str]]]:
    """Each distinct tokenizer of ``specs`` with ``base`` made its settings, in order, and the
    (spec, earlier spec) pairs left out because they name a tokenizer already there (same
    fingerprint).

    Raises:
        TokenizerError: a spec cannot be loaded.
    """
    loaded: list[tuple[Vocabulary, Settings]] = []
    same: list[tuple[str, str]] = []
    for spec in specs:
        s = replace(base, tokenizer=spec)
        vocab = cached_vocabulary(s)
        first = next((t.tokenizer for v, t in loaded if v.fingerprint == vocab.fingerprint), None)
        if first is not None:
            same.append((spec, first))
            continue
        _vocabs.setdefault(_tokenizer_id(s), vocab)  # (this process's compiles use it as it is)
        loaded.append((vocab, replace(s, tokenizer_sha256=vocab.fingerprint)))
    return loaded, same


_vocabs: dict[tuple[str, tuple[int | str, ...] | None, int | None], Vocabulary] = {}


def _tokenizer_id(s: Settings) -> tuple[str, tuple[int | str, ...] | None, int | None]:
    return s.tokenizer, s.eos, s.vocab_size


class _LazyEncoder:
    """The text encoder of a vocabulary rebuilt from cached tables: the tokenizer file is
    parsed on first use only (a compile never encodes)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def __call__(self, text: str) -> list[int]:
        ids: list[int] = load_vocabulary(self._settings).encode(text)
        return ids


def vocabulary(s: Settings) -> Vocabulary:
    """The tokenizer of ``s``, built once per process: from the tables cached under
    ``s.tokenizer_sha256`` when they are there and hash to it, else parsed from its file."""
    key = _tokenizer_id(s)
    vocab = _vocabs.get(key)
    if vocab is None:
        if s.cache is not None and s.tokenizer_sha256 is not None:
            vocab = TokenizerTables(s.cache).load(s.tokenizer_sha256, encoder=_LazyEncoder(s))
        if vocab is None:
            vocab = load_vocabulary(s)
        _vocabs[key] = vocab
    return vocab


def job_options(job: Job, s: Settings) -> CompileOptions:
    """The compile options of ``job`` (whitespace, leniency and semantics: JSON Schemas only).

    Raises:
        ValueError: a bad option value.
    """
    if job.kind == "json_schema":
        return make_options(s.whitespace, s.lenient, max_depth=s.max_depth, limits=s.limits, semantics=s.semantics)
    return make_options(max_depth=s.max_depth, limits=s.limits)


def source_key(job: Job, options: CompileOptions, tokenizer_sha256: str) -> str:
    """What decides a job's artifact, hashed before any front end runs.

    sha256 over the source value as read (its JSON, or a pattern's or grammar's text), its
    kind, the tokenizer fingerprint, the canonical options and the compiler and format
    versions: equal keys give byte-identical artifacts but for the tokenizer's display name.
    """
    value = hashlib.sha256(orjson.dumps(job.source)).hexdigest()
    return hashlib.sha256(canonical_json({
        "kind": job.kind, "source_sha256": value, "tokenizer_sha256": tokenizer_sha256,
        "options": options.canonical_json(), "compiler_version": COMPILER_VERSION,
        "format_version": FORMAT_VERSION,
    }).encode()).hexdigest()


def shard(work: Sequence[Work], index: int, count: int) -> list[Work]:
    """Shard ``index`` (1-based) of ``count``: every ``count``-th input of the list sorted by
    input path, from the ``index``-th on, with all its tokenizers (which share the work that
    does not depend on the tokenizer); kept in ``work``'s order.

    The shards of one list are disjoint and together hold all of it, whatever order the
    arguments came in, so a CI matrix of ``count`` machines compiles every job once.

    Raises:
        ValueError: not ``1 <= index <= count``.
    """
    if not 1 <= index <= count:
        raise ValueError(f"shard index must lie in 1..{count}, got {index}")
    groups = sorted(_by_input(work), key=lambda g: (work[g[0]][0].label, g[0]))
    mine = {i for rank, g in enumerate(groups) if rank % count == index - 1 for i in g}
    return [w for i, w in enumerate(work) if i in mine]


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


MANIFEST_ENTRY = "_manifest_entry"  # a result's manifest record, taken out by run_all


def _manifest_source(job: Job, out: Path) -> str:
    """A file input's path relative to the output folder (a regex: the pattern itself)."""
    if job.kind == "regex":
        return job.label
    try:
        return Path(os.path.relpath(Path(job.label).resolve(), out.resolve())).as_posix()
    except ValueError:  # another drive (Windows)
        return Path(job.label).resolve().as_posix()


def _result(job: Job, settings: Settings) -> Result:
    return {
        "path": job.label, "ok": False, "artifact": None, "states": None,
        "distinct_masks": None, "bytes": None, "compile_ms": None, "cache_hit": None, "cached": None,
        "tokenizer_sha256": settings.tokenizer_sha256, "not_enforced": [], "error": job.failure,
        "elapsed_ms": 0.0,
    }


def run_job(job: Job, settings: Settings) -> Result:
    """Compile one job and write its artifact; failures become the result's ``error``.

    ``cached`` (and ``cache_hit``) is true when the artifact came from the artifact cache.
    ``elapsed_ms`` is the time the job took, a failed one included (``compile_ms`` is the
    compile's, None when it failed).
    """
    result = _result(job, settings)
    if job.failure is not None:
        return result
    t0 = time.perf_counter()
    try:
        _compile_into(job, settings, result)
    finally:
        result["elapsed_ms"] = round((time.perf_counter() - t0) * 1e3, 3)
    return result


def _compile_into(job: Job, settings: Settings, result: Result) -> None:
    """:func:`run_job`'s compile and write, recorded in ``result``."""
    try:
        vocab = vocabulary(settings)
        opts = job_options(job, settings)
        art = maskc.compile_source(job.kind, job.source, vocab, options=opts, cache=settings.cache)
        name = artifact_file_name(job.stem, art)
        path = art.save(Path(settings.out) / name)
        size, digest = path.stat().st_size, file_sha256(path)
    except MemoryLimitExceeded as e:  # past --max-memory (or the system's memory): the worker then retires
        result["error"] = describe(e.with_limit(settings.max_memory_mb))
        return
    except MaskcError as e:
        result["error"] = describe(e)
        return
    except MemoryError:  # (outside the compile: writing the artifact)
        result["error"] = describe(MemoryLimitExceeded(settings.max_memory_mb))
        return
    except Exception as e:  # noqa: BLE001  (a bug: reported per input, the batch goes on)
        result["error"] = describe_internal(e)
        return
    result.update(ok=True, artifact=str(path), states=art.num_states, distinct_masks=art.num_masks,
                  bytes=size, compile_ms=round(art.compile_ms, 3), cache_hit=art.cache_hit,
                  cached=art.cache_hit, tokenizer_sha256=vocab.fingerprint, not_enforced=art.not_enforced)
    result[MANIFEST_ENTRY] = manifest_entry(
        art, source=_manifest_source(job, Path(settings.out)), stem=job.stem, file_name=name,
        source_key=source_key(job, opts, vocab.fingerprint), file_bytes=size, sha256=digest,
        compile_ms=0.0 if art.cache_hit else art.compile_ms)


def _reused(job: Job, settings: Settings, recorded: dict[tuple[str, str], dict[str, Any]]) -> Result | None:
    """The result of ``job`` when the output folder still holds its artifact, else None."""
    if job.failure is not None or settings.tokenizer_sha256 is None:
        return None
    t0 = time.perf_counter()
    try:
        key = source_key(job, job_options(job, settings), settings.tokenizer_sha256)
    except (ValueError, TypeError):  # an option or a source the compile itself reports
        return None
    entry = recorded.get((_manifest_source(job, Path(settings.out)), key))
    path = reusable_artifact(settings.out, entry) if entry is not None else None
    if entry is None or path is None:
        return None
    result = _result(job, settings)
    took = round((time.perf_counter() - t0) * 1e3, 3)
    result.update(ok=True, artifact=str(path), states=entry.get("states"),
                  distinct_masks=entry.get("distinct_masks"), bytes=entry["bytes"],
                  compile_ms=took, elapsed_ms=took, cache_hit=True, cached=True,
                  not_enforced=entry.get("not_enforced", []))
    result[MANIFEST_ENTRY] = entry
    return result


def _recorded(out: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The output folder's manifest entries by (source, source key); none when it is unreadable."""
    try:
        entries = read_manifest(out)
    except ArtifactError:
        return {}
    return {(str(e.get("source")), e["source_key"]): e for e in entries if isinstance(e.get("source_key"), str)}


MANIFEST_FLUSH_SECONDS = 10.0
"""How often a running batch writes what it finished to the manifests (and once at its end)."""


class _ManifestWriter:
    """The manifest entries of finished compiles, merged into their folders' manifests every
    :data:`MANIFEST_FLUSH_SECONDS` while the batch runs, at its end, and when it is
    interrupted: a batch stopped by Ctrl-C or a CI's cancel keeps the record of what it
    finished, one killed outright most of it, and its next run reuses those artifacts."""

    def __init__(self) -> None:
        self._pending: dict[str, list[dict[str, Any]]] = {}
        self._last = time.monotonic()

    def add(self, result: Result, folder: str) -> None:
        entry: dict[str, Any] | None = result.pop(MANIFEST_ENTRY, None)
        if entry is None:
            return
        self._pending.setdefault(folder, []).append(entry)
        if time.monotonic() - self._last >= MANIFEST_FLUSH_SECONDS:
            self.flush(strict=False)

    def flush(self, *, strict: bool = True) -> None:
        """Write the pending entries. ``strict``: raise when a manifest cannot be written
        (else its entries wait for the next flush)."""
        self._last = time.monotonic()
        for folder in list(self._pending):
            try:
                update_manifest(folder, self._pending[folder])
            except ArtifactError:
                if strict:
                    raise
                continue
            del self._pending[folder]


def run_all(work: Sequence[Work], vocabs: Sequence[Vocabulary], n_workers: int,
            started: Callable[[Job], None], finished: Callable[[Result], None]) -> list[Result]:
    """Results in ``work`` order. An artifact the output folder still holds is reused (see
    :func:`source_key`); the rest compile, in worker processes when ``n_workers > 1`` or a
    memory cap is set (spawned workers that die with this process). Every artifact is
    recorded in the output folder's ``manifest.json``, while the batch runs (every
    :data:`MANIFEST_FLUSH_SECONDS`) and at its end.

    Args:
        work: the compiles; each one's settings carry its tokenizer's fingerprint.
        vocabs: the tokenizers already loaded in this process (reused, never reloaded).

    Raises:
        ArtifactError: the manifest cannot be updated.
    """
    by_fingerprint = {v.fingerprint: v for v in vocabs}
    for _, s in work:
        if s.tokenizer_sha256 in by_fingerprint:
            _vocabs[_tokenizer_id(s)] = by_fingerprint[s.tokenizer_sha256]
    results: list[Result | None] = [None] * len(work)
    recorded = {out: _recorded(out) for out in {s.out for _, s in work}}
    writer = _ManifestWriter()

    def record(r: Result) -> None:
        if r["ok"] and r["artifact"] is not None:
            writer.add(r, str(Path(r["artifact"]).parent))
        finished(r)

    todo: list[int] = []
    try:
        for i, (job, s) in enumerate(work):
            reused = _reused(job, s, recorded[s.out])
            if reused is None:
                todo.append(i)
                continue
            started(job)
            results[i] = reused
            record(reused)
        for i, compiled in zip(todo, _compile_all([work[i] for i in todo], vocabs, n_workers, started, record)):
            results[i] = compiled
    except BaseException:  # interrupted (Ctrl-C, a CI's cancel): what finished stays on the record
        writer.flush(strict=False)
        raise
    writer.flush()
    return [r for r in results if r is not None]


def run_jobs(job: Job, settings: Sequence[Settings], started: Callable[[Job], None] | None = None,
             finished: Callable[[Result], None] | None = None) -> list[Result]:
    """:func:`run_job` for each of ``settings`` in turn: an input's tokenizers one after the
    other, sharing what does not depend on the tokenizer (:func:`~maskc.compiler.pipeline.sharing_automata`).
    ``started`` and ``finished`` are called around each compile (in-process only)."""
    out: list[Result] = []
    with sharing_automata(_vocabularies(job, settings)):
        for s in settings:
            if started is not None:
                started(job)
            out.append(run_job(job, s))
            if finished is not None:
                finished(out[-1])
    return out


def _vocabularies(job: Job, settings: Sequence[Settings]) -> list[Vocabulary]:
    """The tokenizers ``job`` compiles for (loaded once per process), where there are
    several and they load: their short tokens are then walked once for all. One that fails
    to load is left out here; its compile reports why."""
    if job.failure is not None or len(settings) < 2:
        return []
    out: list[Vocabulary] = []
    for s in settings:
        try:
            vocab = vocabulary(s)
        except Exception:  # noqa: BLE001 - its compile reports it
            continue
        if isinstance(vocab, Vocabulary):
            out.append(vocab)
    return out


def _source_size(job: Job) -> int:
    """The size of ``job``'s source, in bytes of its JSON (a proxy for its compile time)."""
    try:
        return len(orjson.dumps(job.source))
    except TypeError:
        return 0


def _by_input(work: Sequence[Work]) -> list[list[int]]:
    """The positions of ``work`` grouped by input (in the order each input first appears)."""
    groups: dict[int, list[int]] = {}
    for i, (job, _) in enumerate(work):
        groups.setdefault(id(job), []).append(i)
    return list(groups.values())


def _compile_all(work: Sequence[Work], vocabs: Sequence[Vocabulary], n_workers: int,
                 started: Callable[[Job], None], finished: Callable[[Result], None]) -> list[Result]:
    """Each input's compiles run together, one tokenizer after the other (:func:`run_jobs`):
    the inputs are what the workers share out. They run in this process when one worker
    suffices and no memory cap is set; else in worker processes (:mod:`maskc.cli.workers`),
    where a worker that dies fails its input alone."""
    groups = _by_input(work)
    out: list[Result | None] = [None] * len(work)
    memory_mb = work[0][1].max_memory_mb if work else None
    if memory_mb is None and (n_workers <= 1 or len(groups) <= 1):
        for g in groups:
            for i, r in zip(g, run_jobs(work[g[0]][0], [work[i][1] for i in g], started, finished)):
                out[i] = r
        return [r for r in out if r is not None]
    for vocab in vocabs:  # the workers load these tables rather than parse the tokenizers
        cache = next((s.cache for _, s in work if s.tokenizer_sha256 == vocab.fingerprint), None)
        if cache is not None:
            TokenizerTables(cache).save(vocab)
    # the largest sources first (the likeliest to compile longest: a long one started last
    # would keep the others waiting)
    groups.sort(key=lambda g: -_source_size(work[g[0]][0]))
    tasks = [(work[g[0]][0], [work[i][1] for i in g]) for g in groups]

    def lost(k: int, how: str, overdue: bool) -> list[Result]:
        job, settings = tasks[k]
        results = [_result(job, s) for s in settings]
        for s, r in zip(settings, results):
            if overdue:
                r["error"] = describe(TimeLimitExceeded(
                    f"the compile of {job.label}, still running after {_hard_seconds(settings):g} s,",
                    limit=s.limits.max_seconds,
                    hint="its worker was stopped: this compile did not stop at its limit by itself "
                    "(rerun with MASKC_DEBUG=1 and report it with the input if it persists)"))
            else:
                r["error"] = describe(WorkerLost(job.label, how))
        return results

    def done(k: int, results: list[Result]) -> None:
        for i, r in zip(groups[k], results):
            out[i] = r
            finished(r)

    run_tasks(tasks, max(1, min(n_workers, len(groups))), _work, lost, done, memory_mb=memory_mb,
              seconds=[_hard_seconds(settings) for _, settings in tasks])
    return [r for r in out if r is not None]


OVERRUN_FACTOR = 1.5
OVERRUN_GRACE = 10.0
"""A worker still compiling an input ``OVERRUN_FACTOR`` times its compiles' ``--max-seconds``
(summed over its tokenizers) plus ``OVERRUN_GRACE`` seconds after it took it is stopped: a
compile checks its time limit as it goes and stops within it, so one still running then
never would (a backstop: the input fails with ``TimeLimitExceeded``, the batch goes on)."""


def _hard_seconds(settings: Sequence[Settings]) -> float:
    return OVERRUN_FACTOR * sum(s.limits.max_seconds for s in settings) + OVERRUN_GRACE


def _work(job: Job, settings: Sequence[Settings]) -> tuple[list[Result], bool]:
    """A worker's task: :func:`run_jobs`, and whether the worker should retire after it (it
    ran out of memory: a fresh process takes the next input)."""
    results = run_jobs(job, settings)
    retire = any(r["error"] is not None and r["error"]["type"] == MemoryLimitExceeded.__name__ for r in results)
    return results, retire
