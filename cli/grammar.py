"""One grammar argument for the commands that decode: a schema file, an artifact, or a regex.

``check`` and ``trace`` take ``SCHEMA|ARTIFACT`` (or ``--regex RX``): a ``.safetensors``
file is loaded and verified against the tokenizer; anything else is read as a JSON Schema
and compiled through the artifact cache.
"""

from __future__ import annotations

from pathlib import Path

import maskc
from maskc.artifacts.artifact import Artifact
from maskc.cli.batch import read_json, unwrap_schema
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
    doc, failure = read_json(path)
    if failure is not None:
        raise InputError(failure["message"])
    schema = unwrap_schema(doc)
    return maskc.compile_json_schema(schema, vocab, whitespace=whitespace, lenient=lenient,
                                     cache=True if cache else None)
