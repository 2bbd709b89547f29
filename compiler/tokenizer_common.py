"""What every tokenizer reader shares: config-file EOS detection and the final :class:`Vocabulary`.

Each format module (:mod:`~maskc.compiler.tokenizer_hf`, :mod:`~maskc.compiler.tokenizer_sp`,
:mod:`~maskc.compiler.tokenizer_gguf`) produces token bytes, special ids and configured EOS
entries; :func:`finish_vocabulary` turns them into a :class:`Vocabulary` with EOS ids resolved
the same way for all of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from maskc.compiler.errors import TokenizerError
from maskc.compiler.vocab import MAX_VOCAB_SIZE, Vocabulary

__all__ = [
    "CONFIG_FILES",
    "FORMATS_HINT",
    "WELL_KNOWN_EOS",
    "eos_from_configs",
    "finish_vocabulary",
    "read_json",
]

WELL_KNOWN_EOS = (
    "<\uff5cend\u2581of\u2581sentence\uff5c>",  # DeepSeek, with full-width bars
    "<|end\u2581of\u2581sentence|>",
    "<|endoftext|>",
    "</s>",
    "<|im_end|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<eos>",
)
"""Special-token texts taken as EOS when no configuration names one."""

FORMATS_HINT = (
    "pass a tokenizer.json, a model folder, a .gguf file, a SentencePiece .model file, "
    "a JSON token list, or 'deepseek'"
)
"""The hint for a spec or file that is no tokenizer maskc reads."""

CONFIG_FILES = (
    "generation_config.json",
    "config.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)
"""Hugging Face config files that may name the EOS token, in the order they are read."""


def read_json(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``.

    Raises:
        TokenizerError: the file cannot be read, is not valid JSON, or is not an object.
    """
    try:
        data = json.loads(path.read_bytes())
    except OSError as e:
        raise TokenizerError(f"cannot read '{path}': {e}") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TokenizerError(
            f"'{path}' is not valid JSON: {e}", hint="the file may be truncated or corrupt"
        ) from e
    if not isinstance(data, dict):
        raise TokenizerError(f"'{path}' holds a JSON {type(data).__name__}, not an object")
    return data


def eos_from_configs(folder: Path) -> list[int | str]:
    """EOS ids and token texts named by the Hugging Face config files in ``folder``.

    Reads ``eos_token_id`` (an id or a list) from ``generation_config.json`` and
    ``config.json``, and ``eos_token`` (text, or an object with ``content``) from
    ``tokenizer_config.json`` and ``special_tokens_map.json``; files that are absent are
    skipped.

    Raises:
        TokenizerError: a config file exists but is not valid JSON.
    """
    found: list[int | str] = []
    for name in CONFIG_FILES:
        path = folder / name
        if not path.is_file():
            continue
        data = read_json(path)
        ids = data.get("eos_token_id")
        for i in ids if isinstance(ids, list) else [ids]:
            if isinstance(i, int) and not isinstance(i, bool):
                found.append(i)
        token = data.get("eos_token")
        if isinstance(token, Mapping):
            token = token.get("content")
        if isinstance(token, str):
            found.append(token)
    return found


def finish_vocabulary(
    name: str,
    token_bytes: list[bytes],
    special: set[int],
    configured: Sequence[int | str],
    encoder: Callable[[str], list[int]],
) -> Vocabulary:
    """The :class:`Vocabulary` of a loaded tokenizer, with its EOS ids resolved.

    Empty tokens join ``special`` (which is updated in place). EOS ids are the
    ``configured`` entries (ids or token texts) that name a token of this vocabulary; when
    nothing is configured, the special tokens among :data:`WELL_KNOWN_EOS`. The result may
    have no EOS id; :func:`~maskc.compiler.tokenizer.load_tokenizer` refuses it then.
    """
    if len(token_bytes) > MAX_VOCAB_SIZE:
        raise TokenizerError(
            f"tokenizer '{name}' has {len(token_bytes):,} tokens, more than the supported "
            f"{MAX_VOCAB_SIZE:,}",
            hint="the file may be corrupt",
        )
    special.update(i for i, b in enumerate(token_bytes) if not b)
    vocab = Vocabulary(
        name=name,
        token_bytes=tuple(token_bytes),
        special_ids=frozenset(special),
        eos_ids=(),
        vocab_size=len(token_bytes),
        _encoder=encoder,
    )
    # Config entries that name no token of this vocabulary are skipped; when none is left,
    # load_tokenizer refuses rather than guess.
    eos: list[int] = []
    for item in configured:
        i = vocab.token_id(item) if isinstance(item, str) else item
        if i is not None and 0 <= i < vocab.token_count:
            eos.append(i)
    if not configured:
        eos = [i for t in WELL_KNOWN_EOS if (i := vocab.token_id(t)) is not None and i in special]
    return vocab.with_overrides(eos=eos) if eos else vocab
