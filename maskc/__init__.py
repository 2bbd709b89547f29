"""maskc: the mask compiler for grammar-constrained LLM decoding.

Compile a JSON Schema, regex or choice list into a precomputed token-mask artifact for one
tokenizer, then drive decoding with a :class:`Matcher`::

    import maskc
    tok = maskc.load_tokenizer("deepseek")
    art = maskc.compile_json_schema(schema, tok)
    m = art.matcher()
    bitmask = maskc.allocate_token_bitmask(1, art.vocab_size)
    m.fill_next_token_bitmask(bitmask)
"""

from __future__ import annotations

from typing import Any

from maskc.artifacts.api import compile_choice, compile_gbnf, compile_json_schema, compile_regex, compile_source
from maskc.artifacts.artifact import COMPILER_VERSION, Artifact, load_artifact
from maskc.artifacts.bitmask import allocate_bitmask_np, unpack_bitmask
from maskc.artifacts.matcher import CountingMatcher, Matcher, NestedCountingMatcher, fill_next_token_bitmasks
from maskc.artifacts.pushdown import PushdownMatcher
from maskc.compiler.errors import (
    ArtifactCorrupt,
    ArtifactError,
    ArtifactVersionMismatch,
    EmptyLanguage,
    GrammarError,
    GrammarSyntaxError,
    LimitExceeded,
    MaskcError,
    RegexSyntaxError,
    SchemaError,
    UnsupportedRegex,
    TokenizerError,
    TokenizerMismatch,
    UnsupportedKeyword,
    UnspellableGrammar,
)
from maskc.compiler.options import CompileOptions, Limits
from maskc.compiler.tokenizer import load_tokenizer
from maskc.compiler.vocab import Vocabulary

__version__ = COMPILER_VERSION

__all__ = [
    "__version__",
    "load_tokenizer",
    "Vocabulary",
    "compile_json_schema",
    "compile_regex",
    "compile_choice",
    "compile_gbnf",
    "compile_source",
    "load_artifact",
    "Artifact",
    "Matcher",
    "CountingMatcher",
    "NestedCountingMatcher",
    "PushdownMatcher",
    "CompileOptions",
    "Limits",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "fill_next_token_bitmasks",
    "allocate_bitmask_np",
    "unpack_bitmask",
    "LogitsProcessor",
    "MaskcError",
    "SchemaError",
    "UnsupportedKeyword",
    "RegexSyntaxError",
    "UnsupportedRegex",
    "EmptyLanguage",
    "UnspellableGrammar",
    "GrammarError",
    "GrammarSyntaxError",
    "LimitExceeded",
    "TokenizerError",
    "ArtifactError",
    "ArtifactCorrupt",
    "ArtifactVersionMismatch",
    "TokenizerMismatch",
]


def allocate_token_bitmask(batch_size: int, vocab_size: int) -> Any:
    """Torch int32 ``[batch, ceil(vocab/32)]`` bitmask, all allowed (needs torch)."""
    _need("maskc.allocate_token_bitmask", transformers=False)
    from maskc.artifacts.torch import allocate_token_bitmask as f

    return f(batch_size, vocab_size)


def apply_token_bitmask_inplace(logits: Any, bitmask: Any, indices: list[int] | None = None, *,
                                vocab_size: int | None = None) -> None:
    """Set disallowed logits to -inf in place (torch, CPU or CUDA); pass the artifact's
    ``vocab_size`` to refuse logits narrower than the vocabulary (see ``maskc.artifacts.torch``)."""
    _need("maskc.apply_token_bitmask_inplace", transformers=False)
    from maskc.artifacts.torch import apply_token_bitmask_inplace as f

    f(logits, bitmask, indices, vocab_size=vocab_size)


def _need(feature: str, *, transformers: bool) -> None:
    """``ModuleNotFoundError`` naming the extra to install, instead of a bare missing torch."""
    from maskc.artifacts.extras import TORCH_EXTRA_HINT, missing_modules

    absent = missing_modules(("torch", "transformers") if transformers else ("torch",))
    if absent:
        raise ModuleNotFoundError(f"{feature} needs {' and '.join(absent)}: {TORCH_EXTRA_HINT}", name=absent[0])


def __getattr__(name: str) -> Any:
    if name == "LogitsProcessor":
        _need("maskc.LogitsProcessor", transformers=True)
        from maskc.artifacts.hf import MaskcLogitsProcessor

        return MaskcLogitsProcessor
    raise AttributeError(f"module 'maskc' has no attribute {name!r}")
