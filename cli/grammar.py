"""One grammar argument for the commands that decode: a schema, a GBNF file, an artifact, or a regex.

``check`` and ``trace`` take ``SCHEMA|GRAMMAR|ARTIFACT`` (or ``--regex RX``, ``--gbnf FILE``):
a ``.safetensors`` file is loaded and verified against the tokenizer; a ``.gbnf`` file is a
GBNF grammar; anything else is read as a JSON Schema; sources compile through the artifact
cache.
"""

from __future__ import annotations

from pathlib import Path

import maskc
from maskc.artifacts.artifact import Artifact
from maskc.artifacts.api import make_options
from maskc.cli.batch import read_json, read_text, unwrap_schema
from maskc.compiler.frontends.registry import kind_for_path
from maskc.compiler.options import DEFAULT_MAX_DEPTH, Limits
from maskc.compiler.errors import InputError
from maskc.compiler.vocab import Vocabulary

__all__ = ["load_grammar"]


def load_grammar(spec: str | None, regex: str | None, vocab: Vocabulary, *, whitespace: str = "compact",
                 lenient: bool = False, cache: bool = True, gbnf: str | None = None,
                 max_depth: int = DEFAULT_MAX_DEPTH, limits: Limits | None = None,
                 semantics: str = "generation") -> Artifact:
    """The artifact for ``spec`` (or ``regex``, or the GBNF file ``gbnf``) and ``vocab``,
    compiled under ``limits`` (default :class:`Limits`) unless ``spec`` is an artifact.

    Raises:
        InputError: none or several given, unreadable file, not JSON.
        TokenizerMismatch: an artifact built for another tokenizer.
    """
    if (spec is not None) + (regex is not None) + (gbnf is not None) != 1:
        raise InputError("give a SCHEMA, GRAMMAR or ARTIFACT file, --regex RX or --gbnf FILE (one of them)")
    store = True if cache else None
    if regex is not None:
        return maskc.compile_regex(regex, vocab, cache=store,
                                   options=make_options(max_depth=max_depth, limits=limits))
    if gbnf is not None or kind_for_path(str(spec)) == "gbnf":
        gpath = Path(gbnf if gbnf is not None else str(spec))
        text, failure = read_text(gpath) if gpath.is_file() else (None, {"message": f"no such file: {gpath}"})
        if failure is not None or not isinstance(text, str):
            raise InputError(failure["message"] if failure is not None else f"cannot read {gpath}")
        return maskc.compile_gbnf(text, vocab, cache=store, options=make_options(max_depth=max_depth, limits=limits))
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
    return maskc.compile_json_schema(schema, vocab, cache=store,
                                     options=make_options(whitespace, lenient, limits=limits, max_depth=max_depth,
                                                          semantics=semantics))
