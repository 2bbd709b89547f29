"""The public compile API: pipeline, content-addressed cache and :class:`Artifact` in one call.

``compile_json_schema``, ``compile_regex``, ``compile_choice`` mirror XGrammar's compiler
names; each returns an :class:`Artifact` with its tokenizer attached, ready for
``artifact.matcher()``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from maskc.artifacts.artifact import COMPILER_VERSION, Artifact
from maskc.artifacts.cache import ArtifactCache, cache_key
from maskc.compiler import pipeline
from maskc.compiler.errors import ArtifactError, SchemaError, SizeLimitExceeded
from maskc.compiler.options import CompileOptions, Limits, parse_whitespace
from maskc.compiler.vocab import Vocabulary

__all__ = ["compile_json_schema", "compile_regex", "compile_choice", "make_options"]

log = logging.getLogger("maskc")

CacheArg = bool | str | os.PathLike[str] | ArtifactCache | None


def make_options(whitespace: str = "compact", lenient: bool = False, limits: Limits | None = None,
                 any_depth: int = 3) -> CompileOptions:
    return CompileOptions(parse_whitespace(whitespace), lenient, any_depth, limits or Limits())


def _cache_of(cache: CacheArg) -> ArtifactCache | None:
    if cache is None or cache is False:
        return None
    if cache is True:
        return ArtifactCache()
    if isinstance(cache, ArtifactCache):
        return cache
    return ArtifactCache(Path(cache))


def _compile(kind: str, grammar: Any, tokenizer: Vocabulary, options: CompileOptions, cache: CacheArg,
             build: Callable[[], pipeline.CompiledGrammar]) -> Artifact:
    store = _cache_of(cache)
    source = pipeline.source_of(kind, grammar)
    gsha = hashlib.sha256(f"{kind}\n{source}".encode()).hexdigest()
    key = cache_key(gsha, tokenizer.fingerprint, options.canonical_json(), COMPILER_VERSION)
    t0 = time.perf_counter()
    if store is not None:
        raw = store.get(key)
        if raw is not None:
            try:
                art = Artifact.from_bytes(raw, where=str(store.path(key)))
                art.verify_tokenizer(tokenizer)
                art.tokenizer = tokenizer
                art.cache_hit = True
                art.cache_path = store.path(key)
                art.compile_ms = (time.perf_counter() - t0) * 1e3
                return art
            except ArtifactError as e:
                log.warning("cache entry %s is unusable (%s); rebuilding", store.path(key), e.message)
                store.discard(key)
    compiled = build()
    art = Artifact.from_compiled(compiled, tokenizer)
    if art.nbytes > options.limits.max_artifact_bytes:
        raise SizeLimitExceeded("artifact bytes", limit=options.limits.max_artifact_bytes, got=art.nbytes)
    art.cache_hit = False
    art.timings = compiled.timings
    art.compile_ms = (time.perf_counter() - t0) * 1e3
    if store is not None:
        try:
            art.cache_path = art.save(store.path(key))
        except ArtifactError as e:
            log.warning("could not write cache entry: %s", e.message)
    return art


def compile_json_schema(
    schema: Any,
    tokenizer: Vocabulary,
    *,
    whitespace: str = "compact",
    lenient: bool = False,
    options: CompileOptions | None = None,
    cache: CacheArg = None,
    progress: Callable[[int, int], None] | None = None,
) -> Artifact:
    """Compile a JSON Schema into an artifact for ``tokenizer``.

    Args:
        schema: a parsed schema (dict or bool) or its JSON text.
        tokenizer: from :func:`maskc.load_tokenizer`.
        whitespace: ``compact`` | ``pretty[:INDENT]`` | ``flexible[:N]``.
        lenient: compile without keywords it cannot enforce, recording them in
            ``artifact.not_enforced`` instead of failing.
        options: full options (overrides ``whitespace`` and ``lenient``).
        cache: ``True`` for the user cache, a directory, or ``None`` for no cache.
        progress: called as ``progress(done, total)`` during mask computation.

    Returns:
        The artifact, its tokenizer attached.

    Raises:
        SchemaError, UnsupportedKeyword, RegexSyntaxError, EmptyLanguage, LimitExceeded.

    Example:
        >>> tok = maskc.load_tokenizer("deepseek")
        >>> art = maskc.compile_json_schema({"type": "boolean"}, tok)
        >>> m = art.matcher()
    """
    opts = options or make_options(whitespace, lenient)
    if isinstance(schema, (str, bytes)):
        try:
            schema = orjson.loads(schema)
        except orjson.JSONDecodeError as e:
            raise SchemaError(f"schema is not valid JSON: {e}") from e
    return _compile("json_schema", schema, tokenizer, opts, cache,
                    lambda: pipeline.compile_json_schema(schema, tokenizer, opts, progress=progress))


def compile_regex(
    pattern: str,
    tokenizer: Vocabulary,
    *,
    options: CompileOptions | None = None,
    cache: CacheArg = None,
    progress: Callable[[int, int], None] | None = None,
) -> Artifact:
    """Compile a regular expression that the whole output must match."""
    opts = options or make_options()
    return _compile("regex", pattern, tokenizer, opts, cache,
                    lambda: pipeline.compile_regex(pattern, tokenizer, opts, progress=progress))


def compile_choice(
    choices: Sequence[str],
    tokenizer: Vocabulary,
    *,
    options: CompileOptions | None = None,
    cache: CacheArg = None,
    progress: Callable[[int, int], None] | None = None,
) -> Artifact:
    """Compile a closed list of literal outputs."""
    opts = options or make_options()
    return _compile("choice", list(choices), tokenizer, opts, cache,
                    lambda: pipeline.compile_choice(choices, tokenizer, opts, progress=progress))

