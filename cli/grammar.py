"""One grammar argument for the commands that decode: a schema file, an artifact, or a regex.

``check`` and ``trace`` take ``SCHEMA|ARTIFACT`` (or ``--regex RX``): a ``.safetensors``
file is loaded and verified against the tokenizer; anything else is read as a JSON Schema
and compiled through the artifact cache.
"""

from __future__ import annotations

from pathlib import Path

import orjson

import maskc
from maskc.artifacts.artifact import Artifact
from maskc.compiler.errors import InputError
from maskc.compiler.vocab import Vocabulary

__all__ = ["load_grammar"]


def load_grammar(spec: str | None, regex: str | None, vocab: Vocabulary, *, whitespace: str = "compact",
                 lenient: bool = False, cache: bool = True) -> Artifact:
    """The artifact for ``spec`` (or ``regex``) and ``vocab``.

    Raises:
        InputError: neither or both given, unreadable file, not JSON.
        TokenizerMismatch: an artifact built for another tokenizer.
    """
    if (spec is None) == (regex is None):
        raise InputError("give a SCHEMA or ARTIFACT file, or --regex RX (one of them)")
    if regex is not None:
        return maskc.compile_regex(regex, vocab, cache=True if cache else None)
    assert spec is not None
    path = Path(spec)
    if path.suffix == ".safetensors":
        if not path.is_file():
            raise InputError(f"no such artifact: {spec}")
        return maskc.load_artifact(path, tokenizer=vocab)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read {spec}: {e.strerror or e}") from e
    try:
        schema = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise InputError(f"{spec} is not valid JSON: {e}") from e
    if isinstance(schema, dict) and "schema" in schema and "tests" in schema:
        schema = schema["schema"]  # MaskBench files hold {"schema": ..., "tests": [...]}
    return maskc.compile_json_schema(schema, vocab, whitespace=whitespace, lenient=lenient,
                                     cache=True if cache else None)
