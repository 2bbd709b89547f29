"""The public compile API: pipeline, content-addressed cache and :class:`Artifact` in one call.

``compile_json_schema``, ``compile_regex``, ``compile_gbnf``, ``compile_choice`` mirror
XGrammar's compiler names and all go through :func:`compile_source`; each returns an
:class:`Artifact` with its tokenizer attached, ready for ``artifact.matcher()``.
"""

from __future__ import annotations

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
from maskc.compiler.frontends.json_schema.inputs import EXPECTED, pydantic_schema
from maskc.compiler.frontends.registry import frontend, grammar_sha256
from maskc.compiler.options import DEFAULT_MAX_DEPTH, CompileOptions, Limits, parse_whitespace
from maskc.compiler.vocab import Vocabulary

__all__ = ["compile_source", "compile_json_schema", "compile_regex", "compile_gbnf", "compile_choice", "make_options"]

log = logging.getLogger("maskc")

CacheArg = bool | str | os.PathLike[str] | ArtifactCache | None


def make_options(whitespace: str = "compact", lenient: bool = False, limits: Limits | None = None,
                 max_depth: int | None = None, semantics: str = "generation") -> CompileOptions:
    """Compile options from their user-facing spellings.

    Raises:
        ValueError: a bad whitespace spec, ``max_depth`` or ``semantics``.
    """
    return CompileOptions(parse_whitespace(whitespace), lenient, limits=limits or Limits(),
                          max_depth=DEFAULT_MAX_DEPTH if max_depth is None else max_depth,
                          semantics=semantics)  # type: ignore[arg-type]  # checked by CompileOptions


def _cache_of(cache: CacheArg) -> ArtifactCache | None:
    if cache is None or cache is False:
        return None
    if cache is True:
        return ArtifactCache()
    if isinstance(cache, ArtifactCache):
        return cache
    return ArtifactCache(Path(cache))


def compile_source(
    kind: str,
    source: Any,
    tokenizer: Vocabulary,
    *,
    options: CompileOptions | None = None,
    cache: CacheArg = None,
    progress: Callable[[int, int], None] | None = None,
) -> Artifact:
    """Compile a source of any registered kind (``json_schema``, ``regex``, ``choice``, ``gbnf``).

    The grammar's identity (kind + canonical source text) is hashed once and used for both
    the cache key and the artifact header.

    Raises:
        InputError, LimitExceeded: as the kind's ``compile_*`` function.
    """
    opts = options or make_options()
    fe = frontend(kind)
    canonical = fe.canonical(source)
    gsha = grammar_sha256(kind, canonical)
    store = _cache_of(cache)
    key = cache_key(gsha, tokenizer.fingerprint, opts.canonical_json(), COMPILER_VERSION)
    t0 = time.perf_counter()
    if store is not None:
        art = store.load(key, kind=kind, grammar_sha256=gsha, tokenizer=tokenizer, options_json=opts.canonical_json())
        if art is not None:
            art.compile_ms = (time.perf_counter() - t0) * 1e3
            return art
    compiled = pipeline.compile_source(kind, source, tokenizer, opts, progress=progress)
    art = Artifact.from_compiled(compiled, tokenizer)
    if art.nbytes > opts.limits.max_artifact_bytes:
        raise SizeLimitExceeded("artifact bytes", limit=opts.limits.max_artifact_bytes, got=art.nbytes)
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
    max_depth: int | None = None,
    semantics: str = "generation",
    options: CompileOptions | None = None,
    cache: CacheArg = None,
    progress: Callable[[int, int], None] | None = None,
) -> Artifact:
    """Compile a JSON Schema into an artifact for ``tokenizer``.

    Args:
        schema: a parsed schema (dict or bool) or its JSON text; or what holds one: a
            pydantic model class or ``TypeAdapter`` (pydantic >= 2, the ``pydantic`` extra),
            an OpenAI or Anthropic tool definition, an OpenAI ``response_format``, a
            MaskBench case (see :func:`maskc.compiler.frontends.json_schema.inputs.unwrap`).
        tokenizer: from :func:`maskc.load_tokenizer`.
        whitespace: ``compact`` | ``pretty[:INDENT]`` | ``flexible[:N]``.
        lenient: compile without keywords it cannot enforce, recording them in
            ``artifact.not_enforced`` instead of failing.
        max_depth: nesting bound of recursive schemas and free-form values, in stack
            frames (default 32); a token that would nest deeper is rejected.
        semantics: ``generation`` (the default: no undeclared keys unless the schema
            admits them, types inferred from keywords) or ``exact`` (the language is
            exactly the schema's instances); see :data:`maskc.compiler.options.SEMANTICS`.
            Recorded in the artifact's options.
        options: full options (overrides ``whitespace``, ``lenient``, ``max_depth`` and
            ``semantics``).
        cache: ``True`` for the user cache, a directory, or ``None`` for no cache.
        progress: called as ``progress(done, total)`` during mask computation.

    Returns:
        The artifact, its tokenizer attached.

    Raises:
        SchemaError, UnsupportedKeyword, RegexSyntaxError, EmptyLanguage, LimitExceeded.
        TypeError: ``schema`` is none of the above.

    Example:
        >>> tok = maskc.load_tokenizer("deepseek")
        >>> art = maskc.compile_json_schema({"type": "boolean"}, tok)
        >>> m = art.matcher()
    """
    opts = options or make_options(whitespace, lenient, max_depth=max_depth, semantics=semantics)
    if isinstance(schema, (str, bytes)):
        try:
            schema = orjson.loads(schema)
        except orjson.JSONDecodeError as e:
            raise SchemaError(f"schema is not valid JSON: {e}") from e
    elif not isinstance(schema, (dict, bool)) and pydantic_schema(schema) is None:
        raise TypeError(f"compile_json_schema expects {EXPECTED}; got {type(schema).__name__}")
    return compile_source("json_schema", schema, tokenizer, options=opts, cache=cache, progress=progress)


def compile_regex(
    pattern: str,
    tokenizer: Vocabulary,
    *,
    options: CompileOptions | None = None,
    cache: CacheArg = None,
    progress: Callable[[int, int], None] | None = None,
) -> Artifact:
    """Compile a regular expression that the whole output must match."""
    return compile_source("regex", pattern, tokenizer, options=options, cache=cache, progress=progress)


def compile_gbnf(
    text: str,
    tokenizer: Vocabulary,
    *,
    max_depth: int | None = None,
    options: CompileOptions | None = None,
    cache: CacheArg = None,
    progress: Callable[[int, int], None] | None = None,
) -> Artifact:
    """Compile a GBNF grammar (llama.cpp's format; the start rule is ``root``).

    Args:
        text: the grammar text.
        tokenizer: from :func:`maskc.load_tokenizer`.
        max_depth: nesting bound of recursive rules in stack frames (default 32).

    Raises:
        GrammarSyntaxError: with line, column and a caret. GrammarError: left recursion.
        EmptyLanguage: ``root`` can never finish. LimitExceeded.

    Example:
        >>> art = maskc.compile_gbnf('root ::= "(" root ")" | "x"', tok)
    """
    opts = options or make_options(max_depth=max_depth)
    return compile_source("gbnf", text, tokenizer, options=opts, cache=cache, progress=progress)


def compile_choice(
    choices: Sequence[str],
    tokenizer: Vocabulary,
    *,
    options: CompileOptions | None = None,
    cache: CacheArg = None,
    progress: Callable[[int, int], None] | None = None,
) -> Artifact:
    """Compile a closed list of literal outputs.

    Raises:
        TypeError: ``choices`` is a string (not a list of them) or holds a non-string.
    """
    if isinstance(choices, (str, bytes)):
        raise TypeError(f"compile_choice expects a list of strings, got a single {type(choices).__name__} "
                        f"{choices[:40]!r}; wrap it in a list: [{choices[:40]!r}]")
    items = list(choices)
    for i, c in enumerate(items):
        if not isinstance(c, str):
            raise TypeError(f"compile_choice expects a list of strings; item {i} is {type(c).__name__} {c!r}")
    return compile_source("choice", items, tokenizer, options=options, cache=cache, progress=progress)

