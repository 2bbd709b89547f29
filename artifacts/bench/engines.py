"""Engines behind one interface for ``maskc bench``: maskc and the peers it is measured against.

An :class:`Engine` is built once per process from a maskc :class:`Vocabulary`, so every
engine sees the same token bytes, special ids and EOS ids (the peers get them in their raw
byte form: XGrammar ``VocabType.RAW``, llguidance a ``TokenizerWrapper``, outlines-core a
byte ``Vocabulary``). Every engine compiles compact JSON (no insignificant whitespace),
the grammar maskc's default policy emits, and judges instances by the schema's own
language: maskc in ``exact`` semantics, XGrammar without ``strict_mode`` (undeclared keys
admitted where the schema admits them), llguidance as it reads JSON Schema. A peer is
optional: :func:`missing_hint` says how to install one that is absent, without importing it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
from abc import ABC, abstractmethod
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from maskc.compiler.vocab import Vocabulary

__all__ = ["ENGINES", "PEERS", "Engine", "EngineMatcher", "make_engine", "missing_hint"]


def _bit(row: Any, token: int) -> bool:
    return bool((int(row[token >> 5]) >> (token & 31)) & 1)


class EngineMatcher(ABC):
    """One engine's matcher with its own one-row bitmask (int32 ``[1, ceil(V/32)]``)."""

    bitmask: Any

    @abstractmethod
    def fill(self) -> None:
        """Compute the next token mask into :attr:`bitmask`."""

    @abstractmethod
    def accept(self, token: int) -> bool:
        """Advance by ``token``; False when the engine refuses it."""

    @abstractmethod
    def reset(self) -> None:
        """Back to the start of the grammar."""

    def allowed(self, token: int) -> bool:
        """Whether the last :meth:`fill` allowed ``token``."""
        return _bit(self.bitmask[0], token)


class Engine(ABC):
    """A grammar engine for one vocabulary.

    Attributes:
        name: The name ``--engines`` takes.
        package: The distribution whose version is reported (and the pip name to install).
        module: The import name whose presence makes the engine available.
        serializable: Whether a compiled grammar can be saved and loaded again.
    """

    name: ClassVar[str]
    package: ClassVar[str]
    module: ClassVar[str]
    serializable: ClassVar[bool] = False

    def __init__(self, vocab: Vocabulary) -> None:
        self.vocab = vocab

    @abstractmethod
    def compile(self, schema: Any) -> Any:
        """Compile a JSON Schema; raises on a schema the engine refuses."""

    @abstractmethod
    def matcher(self, compiled: Any) -> EngineMatcher:
        """A matcher at the start of ``compiled``."""

    def save(self, compiled: Any, path: Path) -> int | None:
        """Write ``compiled`` to ``path``; its size in bytes, or None when not serializable."""
        return None

    def load(self, path: Path) -> Any:
        """Read back what :meth:`save` wrote."""
        raise NotImplementedError(f"{self.name} has no serialized form")

    def version(self) -> str:
        try:
            return version(self.package)
        except PackageNotFoundError:
            return "unknown"

    def info(self) -> dict[str, Any]:
        """Settings worth reporting beside the results (threads, options)."""
        return {}


# -- maskc ------------------------------------------------------------------------------------


class _MaskcMatcher(EngineMatcher):
    def __init__(self, art: Any) -> None:
        from maskc.artifacts.bitmask import allocate_bitmask_np

        self.m = art.matcher()
        self.bitmask = allocate_bitmask_np(1, art.vocab_size)

    def fill(self) -> None:
        self.m.fill_next_token_bitmask(self.bitmask, 0)

    def accept(self, token: int) -> bool:
        return bool(self.m.accept_token(token))

    def reset(self) -> None:
        self.m.reset()


class MaskcEngine(Engine):
    name = "maskc"
    package = "maskc"
    module = "maskc"
    serializable = True
    semantics: ClassVar[str] = "exact"
    """Instances are judged by JSON Schema's verdict: maskc compiles the schema's exact language."""

    def compile(self, schema: Any) -> Any:
        from maskc.artifacts.api import compile_json_schema

        return compile_json_schema(schema, self.vocab, cache=None, semantics=self.semantics)

    def matcher(self, compiled: Any) -> EngineMatcher:
        return _MaskcMatcher(compiled)

    def save(self, compiled: Any, path: Path) -> int | None:
        return compiled.save(path).stat().st_size  # type: ignore[no-any-return]

    def load(self, path: Path) -> Any:
        from maskc.artifacts.artifact import load_artifact

        return load_artifact(path, tokenizer=self.vocab)

    def version(self) -> str:
        from maskc.artifacts.artifact import COMPILER_VERSION

        return COMPILER_VERSION


# -- XGrammar ---------------------------------------------------------------------------------


class _XGrammarMatcher(EngineMatcher):
    def __init__(self, xgr: Any, compiled: Any, vocab_size: int) -> None:
        self.m = xgr.GrammarMatcher(compiled)
        self.bitmask = xgr.allocate_token_bitmask(1, vocab_size)

    def fill(self) -> None:
        self.m.fill_next_token_bitmask(self.bitmask)

    def accept(self, token: int) -> bool:
        return bool(self.m.accept_token(token))

    def reset(self) -> None:
        self.m.reset()


class XGrammarEngine(Engine):
    """XGrammar, its compiled grammar serialized with ``serialize_json``; special ids are
    given as empty tokens, which XGrammar treats as special.

    Args:
        vocab: The benchmark's vocabulary.
        strict: XGrammar's ``strict_mode``: True forbids undeclared object properties (and
            array items past ``prefixItems``) even where the schema admits them. None (the
            default) follows maskc's semantics: ``exact`` admits them, so strict is off.
    """

    name = "xgrammar"
    package = "xgrammar"
    module = "xgrammar"
    serializable = True

    def __init__(self, vocab: Vocabulary, *, strict: bool | None = None) -> None:
        super().__init__(vocab)
        import xgrammar as xgr

        self.xgr = xgr
        self.strict = MaskcEngine.semantics != "exact" if strict is None else bool(strict)
        special = vocab.special_ids
        encoded = [b"" if i in special else b for i, b in enumerate(vocab.token_bytes)]
        self.tokenizer_info = xgr.TokenizerInfo(encoded, xgr.VocabType.RAW, vocab_size=vocab.vocab_size,
                                                stop_token_ids=list(vocab.eos_ids))
        self.threads = os.cpu_count() or 1
        self.compiler = xgr.GrammarCompiler(self.tokenizer_info, max_threads=self.threads, cache_enabled=False)

    def compile(self, schema: Any) -> Any:
        return self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=False,
                                                 separators=(",", ":"), strict_mode=self.strict)

    def matcher(self, compiled: Any) -> EngineMatcher:
        return _XGrammarMatcher(self.xgr, compiled, self.vocab.vocab_size)

    def save(self, compiled: Any, path: Path) -> int | None:
        data = compiled.serialize_json().encode("utf-8")
        path.write_bytes(data)
        return len(data)

    def load(self, path: Path) -> Any:
        return self.xgr.CompiledGrammar.deserialize_json(path.read_text(encoding="utf-8"), self.tokenizer_info)

    def info(self) -> dict[str, Any]:
        return {"threads": self.threads, "strict_mode": self.strict}


# -- llguidance -------------------------------------------------------------------------------


class _TokenizerSource:
    """What ``llguidance.TokenizerWrapper`` reads: token bytes (special ones marked with a
    leading 0xFF byte, llguidance's convention), EOS, and an encoder."""

    def __init__(self, vocab: Vocabulary) -> None:
        special = vocab.special_ids
        self.eos_token_id = vocab.eos_ids[0] if vocab.eos_ids else None
        self.bos_token_id = None
        self.tokens = [b"\xff" + (b or f"<special_{i}>".encode()) if i in special else b
                       for i, b in enumerate(vocab.token_bytes)]
        self.special_token_ids = sorted(special)
        self._vocab = vocab

    def __call__(self, text: str | bytes) -> list[int]:
        s = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        try:
            return self._vocab.encode(s)
        except Exception:  # noqa: BLE001 - a vocabulary without an encoder: llguidance falls back
            return []


# llguidance's JsonCompileOptions (a TypedDict of the optional package): compact, not lenient
_LLGUIDANCE_JSON: Any = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":", "lenient": False}


class _LLGuidanceMatcher(EngineMatcher):
    def __init__(self, ll: Any, lln: Any, tokenizer: Any, grammar: str) -> None:
        self.lln = lln
        self.m = ll.LLMatcher(tokenizer, grammar, log_level=0)
        if self.m.is_error():
            raise ValueError(self.m.get_error())
        self.bitmask = lln.allocate_token_bitmask(1, tokenizer.vocab_size)

    def fill(self) -> None:
        self.lln.fill_next_token_bitmask(self.m, self.bitmask)

    def accept(self, token: int) -> bool:
        return bool(self.m.consume_token(token)) and not self.m.is_error()

    def reset(self) -> None:
        self.m.reset()


class LLGuidanceEngine(Engine):
    """llguidance: compile is ``grammar_from_json_schema`` and the ``LLMatcher`` built from it
    (its masks are computed lazily, so time to first mask is the comparable number).

    Its JSON options: no insignificant whitespace (``whitespace_flexible`` off, separators
    ``,`` and ``:``), not ``lenient`` (a keyword it does not implement is an error). It has no
    option for undeclared properties: it follows the schema (``additionalProperties``
    absent admits them, after the declared ones), as maskc's ``exact`` semantics does.
    """

    name = "llguidance"
    package = "llguidance"
    module = "llguidance"

    def __init__(self, vocab: Vocabulary) -> None:
        super().__init__(vocab)
        import llguidance
        import llguidance.numpy

        self.ll = llguidance
        self.lln = llguidance.numpy
        self.tokenizer = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_TokenizerSource(vocab)),
                                                n_vocab=vocab.vocab_size, eos_token=list(vocab.eos_ids))

    def compile(self, schema: Any) -> Any:
        grammar: str = self.ll.LLMatcher.grammar_from_json_schema(schema, defaults=_LLGUIDANCE_JSON)
        return grammar

    def info(self) -> dict[str, Any]:
        return {"json_options": dict(_LLGUIDANCE_JSON), "additional_properties": "as the schema says"}

    def matcher(self, compiled: Any) -> EngineMatcher:
        return _LLGuidanceMatcher(self.ll, self.lln, self.tokenizer, compiled)


# -- outlines-core ----------------------------------------------------------------------------


class _OutlinesMatcher(EngineMatcher):
    def __init__(self, oc: Any, index: Any, vocab_size: int) -> None:
        self.guide = oc.Guide(index)
        self.bitmask: NDArray[np.int32] = np.zeros((1, (vocab_size + 31) // 32), dtype=np.int32)

    def fill(self) -> None:
        self.guide.write_mask_into(self.bitmask.ctypes.data, self.bitmask.size, 4)

    def accept(self, token: int) -> bool:
        try:
            self.guide.advance(token, return_tokens=False)
        except ValueError:
            return False
        return True

    def reset(self) -> None:
        self.guide.reset()


class OutlinesEngine(Engine):
    """outlines-core: the schema becomes a regex (``build_regex_from_schema``, no
    whitespace), then an ``Index`` over the vocabulary; the index pickles (its binary form)."""

    name = "outlines"
    package = "outlines-core"
    module = "outlines_core"
    serializable = True

    def __init__(self, vocab: Vocabulary) -> None:
        super().__init__(vocab)
        import outlines_core

        self.oc = outlines_core
        if not vocab.eos_ids:
            raise ValueError("outlines-core needs an EOS token")
        by_bytes: dict[bytes, list[int]] = {}
        for i, b in enumerate(vocab.token_bytes):
            if i not in vocab.special_ids:
                by_bytes.setdefault(b, []).append(i)
        self.vocabulary = outlines_core.Vocabulary(vocab.eos_ids[0], by_bytes)

    def compile(self, schema: Any) -> Any:
        from outlines_core.json_schema import build_regex_from_schema

        regex = build_regex_from_schema(json.dumps(schema), "")
        return self.oc.Index(regex, self.vocabulary)

    def matcher(self, compiled: Any) -> EngineMatcher:
        return _OutlinesMatcher(self.oc, compiled, self.vocab.vocab_size)

    def save(self, compiled: Any, path: Path) -> int | None:
        data = pickle.dumps(compiled)
        path.write_bytes(data)
        return len(data)

    def load(self, path: Path) -> Any:
        return pickle.loads(path.read_bytes())  # noqa: S301 - a file this process wrote


ENGINES: dict[str, type[Engine]] = {e.name: e for e in (MaskcEngine, XGrammarEngine, LLGuidanceEngine, OutlinesEngine)}
"""Every engine by the name ``--engines`` takes, maskc first."""

PEERS = tuple(name for name in ENGINES if name != "maskc")


def make_engine(name: str, vocab: Vocabulary, options: Mapping[str, Any] | None = None) -> Engine:
    """Build engine ``name`` for ``vocab`` (imports the peer's package).

    Args:
        name: A key of :data:`ENGINES`.
        vocab: The benchmark's vocabulary.
        options: Keyword arguments of the engine's constructor (``{"strict": True}`` for
            XGrammar); None or empty for its defaults.

    Raises:
        TypeError: an option the engine does not take.
    """
    return ENGINES[name](vocab, **dict(options or {}))


def missing_hint(name: str) -> str | None:
    """None when engine ``name`` can be imported here, else the line that says how to install it."""
    cls = ENGINES[name]
    try:
        found = importlib.util.find_spec(cls.module) is not None
    except (ImportError, ValueError):
        found = False
    if found:
        return None
    extra = "pip install --no-deps xgrammar apache-tvm-ffi (it pins torch)" if name == "xgrammar" else \
        f"pip install {cls.package}"
    return f"{name} is not installed: {extra}, or pip install 'maskc[bench]'"
