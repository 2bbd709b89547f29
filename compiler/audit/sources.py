"""Format readers behind :func:`~maskc.compiler.audit.facts.tokenizer_facts`.

Each reader re-reads one kind of tokenizer source the way
:func:`~maskc.compiler.tokenizer.load_tokenizer` does, for what the vocabulary does not keep:
normalizer steps, byte-fallback and added ids, the served encoder for the probes, and the EOS
candidates of the model folder's config files and chat template.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from maskc.compiler.audit.facts import (
    EosCandidate,
    EosRole,
    TokenizerFacts,
    end_of_turn_token,
    run_probes,
)
from maskc.compiler.tokenizer_common import read_json
from maskc.compiler.tokenizer_hf import detect_decoding
from maskc.compiler.tokenizer_sp import _proto_fields, _varint
from maskc.compiler.vocab import METASPACE, Vocabulary

__all__ = ["json_alterations", "read_facts"]

_BYTE_PIECE = ("<0x", ">")


def read_facts(spec: str, vocab: Vocabulary | None) -> TokenizerFacts:
    """The facts of ``spec``; see :func:`~maskc.compiler.audit.facts.tokenizer_facts`."""
    from maskc.compiler import tokenizer as loader

    path = Path(spec).expanduser()
    if spec != "deepseek" and not path.exists():  # a hub id: nothing local to re-read
        return TokenizerFacts(
            source=spec,
            notes=("facts are read from local files only: pass the model folder to audit its "
                   "normalizer, byte fallback and EOS candidates",),
        )
    if vocab is None:
        vocab = loader._load(spec)  # the loader's in-process cache; no EOS required here
    if spec == "deepseek":
        path = loader._deepseek_path()
        return _json_facts(spec, path, path.parent, vocab)
    if path.is_dir():
        if (path / "tokenizer.json").is_file():
            return _json_facts(spec, path / "tokenizer.json", path, vocab)
        if (path / "tokenizer.model").is_file():
            return _sp_facts(spec, path / "tokenizer.model", path, vocab)
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return _gguf_facts(spec, ggufs[0], vocab)
        return TokenizerFacts(source=spec, notes=(f"no single tokenizer file in '{path}'",))
    if path.is_file():
        with path.open("rb") as f:
            head = f.read(4096)
        if head.startswith(b"GGUF"):
            return _gguf_facts(spec, path, vocab)
        if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
            data = read_json(path)
            if "model" in data:
                return _json_facts(spec, path, path.parent, vocab, data)
            return _token_list_facts(spec, data, vocab)
        return _sp_facts(spec, path, None, vocab)
    return TokenizerFacts(source=spec, notes=(f"'{spec}' is neither a file nor a folder",))


# -- tokenizer.json ---------------------------------------------------------------------------


def _nodes(node: object) -> Iterator[Mapping[str, Any]]:
    if isinstance(node, Mapping):
        yield node
        for key in ("normalizers", "pretokenizers"):
            for child in node.get(key) or ():
                yield from _nodes(child)


_NORMALIZER_STEPS = {
    "NFC": "NFC normalization", "NFD": "NFD normalization (splits accents)",
    "NFKC": "NFKC normalization (ligatures, full-width and circled characters)",
    "NFKD": "NFKD normalization", "Lowercase": "lowercasing", "StripAccents": "strips accents",
    "Precompiled": "a precompiled SentencePiece normalization map (usually NFKC)",
    "Nmt": "NMT normalization (control characters removed)",
}


def json_alterations(data: Mapping[str, Any]) -> tuple[str, ...]:
    """The steps of a ``tokenizer.json``'s normalizer and pre-tokenizer that can alter bytes."""
    out: list[str] = []
    for node in _nodes(data.get("normalizer")):
        kind = node.get("type")
        if kind in _NORMALIZER_STEPS:
            out.append(f"normalizer: {_NORMALIZER_STEPS[str(kind)]}")
        elif kind == "Strip":
            out.append("normalizer: strips whitespace")
        elif kind == "Prepend":
            out.append(f"normalizer: prepends {node.get('prepend', '')!r} (dummy prefix)")
        elif kind == "Replace":
            pattern = node.get("pattern") or {}
            old = pattern.get("String", pattern.get("Regex")) if isinstance(pattern, Mapping) else None
            if (old, node.get("content")) != (" ", METASPACE):  # metaspace: decoded back
                out.append(f"normalizer: replaces {old!r} with {node.get('content')!r}")
        elif kind == "BertNormalizer":
            if node.get("lowercase", True):
                out.append("normalizer: lowercasing (BertNormalizer)")
            if node.get("strip_accents") or (node.get("strip_accents") is None and node.get("lowercase", True)):
                out.append("normalizer: strips accents (BertNormalizer)")
            if node.get("clean_text", True):
                out.append("normalizer: removes control characters (BertNormalizer)")
        elif kind not in (None, "Sequence", "ByteLevel"):
            out.append(f"normalizer: {kind}")
    for node in _nodes(data.get("pre_tokenizer")):
        kind = node.get("type")
        if kind == "Metaspace" and (
            node.get("prepend_scheme", "always") != "never" if "prepend_scheme" in node
            else node.get("add_prefix_space", True)
        ):
            out.append(f"pre-tokenizer: Metaspace prepends {METASPACE} (dummy prefix)")
        elif kind == "ByteLevel" and node.get("add_prefix_space"):
            out.append("pre-tokenizer: ByteLevel adds a prefix space")
        elif kind in ("Whitespace", "WhitespaceSplit", "BertPreTokenizer"):
            out.append(f"pre-tokenizer: {kind} drops whitespace")
        elif kind == "Split" and node.get("behavior") == "Removed":
            out.append("pre-tokenizer: Split removes what its pattern matches")
    return tuple(out)


def _json_facts(
    spec: str, path: Path, folder: Path, vocab: Vocabulary, data: dict[str, Any] | None = None
) -> TokenizerFacts:
    from tokenizers import Tokenizer

    data = read_json(path) if data is None else data
    model = data.get("model") or {}
    pieces = model.get("vocab")
    fallback = detect_decoding(data).byte_fallback
    byte_ids: set[int] = set()
    if fallback and isinstance(pieces, Mapping):
        byte_ids = {i for p, i in pieces.items() if _is_byte_piece(p) and isinstance(i, int)}
    elif fallback and isinstance(pieces, list):
        byte_ids = {i for i, p in enumerate(pieces) if isinstance(p, list) and p and _is_byte_piece(p[0])}
    added = {
        t["id"] for t in data.get("added_tokens") or ()
        if isinstance(t, Mapping) and not t.get("special") and isinstance(t.get("id"), int)
    }
    notes: list[str] = []
    served: Callable[[str], list[int]] | None = None
    try:
        tok = Tokenizer.from_file(str(path))
        served = lambda text: list(tok.encode(text, add_special_tokens=False).ids)  # noqa: E731
    except Exception as e:  # the Rust side raises plain Exceptions
        notes.append(f"the tokenizers library cannot load {path.name}: {e}")
    candidates, model_width, more = _folder_facts(folder, vocab, added)
    return TokenizerFacts(
        source=spec, format="tokenizer.json", alterations=json_alterations(data),
        probes=run_probes(served, vocab), byte_fallback_ids=frozenset(byte_ids),
        added_ids=frozenset(added), eos_candidates=candidates, model_vocab_size=model_width,
        notes=tuple(notes + more),
    )


def _is_byte_piece(piece: object) -> bool:
    return (isinstance(piece, str) and len(piece) == 6 and piece.startswith(_BYTE_PIECE[0])
            and piece.endswith(_BYTE_PIECE[1]) and all(c in "0123456789abcdefABCDEF" for c in piece[3:5]))


# -- model folder: config files and chat template ---------------------------------------------


def _candidate(source: str, role: EosRole, item: int | str, vocab: Vocabulary) -> EosCandidate:
    if isinstance(item, str):
        return EosCandidate(source, role, item, vocab.token_id(item))
    if 0 <= item < vocab.token_count:
        return EosCandidate(source, role, vocab.token_bytes[item].decode("utf-8", "replace"), item)
    return EosCandidate(source, role, "", None)


def _config_items(data: Mapping[str, Any]) -> list[int | str]:
    out: list[int | str] = []
    ids = data.get("eos_token_id")
    for i in ids if isinstance(ids, list) else [ids]:
        if isinstance(i, int) and not isinstance(i, bool):
            out.append(i)
    token = data.get("eos_token")
    if isinstance(token, Mapping):
        token = token.get("content")
    if isinstance(token, str):
        out.append(token)
    return out


def _chat_template(folder: Path, tokenizer_config: Mapping[str, Any]) -> str | None:
    template = tokenizer_config.get("chat_template")
    if isinstance(template, list):  # named templates: the default one, else the first
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, Mapping)}
        template = named.get("default", next(iter(named.values()), None))
    if isinstance(template, str):
        return template
    if (folder / "chat_template.jinja").is_file():
        return (folder / "chat_template.jinja").read_text(encoding="utf-8", errors="replace")
    if (folder / "chat_template.json").is_file():
        found = read_json(folder / "chat_template.json").get("chat_template")
        return found if isinstance(found, str) else None
    return None


def _folder_facts(
    folder: Path, vocab: Vocabulary, added: set[int]
) -> tuple[tuple[EosCandidate, ...], int | None, list[str]]:
    """EOS candidates, the config's logits width and notes, from a model folder's files."""
    configs = {}
    for name in ("tokenizer_config.json", "special_tokens_map.json", "config.json", "generation_config.json"):
        if (folder / name).is_file():
            configs[name] = read_json(folder / name)
    roles: dict[str, EosRole] = {"generation_config.json": "generation"}
    out = [
        _candidate(f"{name} {'eos_token_id' if isinstance(item, int) else 'eos_token'}",
                   roles.get(name, "eos"), item, vocab)
        for name, data in configs.items() for item in _config_items(data)
    ]
    eos_text = next((c.text for c in out if c.source.endswith("eos_token")), None)
    template = _chat_template(folder, configs.get("tokenizer_config.json", {}))
    if template is not None:
        turn = end_of_turn_token(template, vocab, extra_ids=added, eos_text=eos_text)
        if turn is not None:
            out.append(_candidate("chat template (end of turn)", "end-of-turn", turn, vocab))
    config = configs.get("config.json", {})
    width = config.get("vocab_size", (config.get("text_config") or {}).get("vocab_size"))
    width = width if isinstance(width, int) and not isinstance(width, bool) else None
    return tuple(out), width, []


# -- SentencePiece ----------------------------------------------------------------------------

_SP_NORMAL, _SP_USER_DEFINED = 1, 4


def _sp_facts(spec: str, path: Path, folder: Path | None, vocab: Vocabulary) -> TokenizerFacts:
    import sentencepiece

    proto = path.read_bytes()
    steps: list[str] = []
    added: set[int] = set()
    piece_id = 0
    for number, wire, _, payload in _proto_fields(proto):
        if number == 1 and wire == 2:  # pieces, in id order
            for n, w, whole, _ in _proto_fields(payload):
                if n == 3 and w == 0 and _varint(whole, 1)[0] == _SP_USER_DEFINED:
                    added.add(piece_id)
            piece_id += 1
        elif number == 3 and wire == 2:  # normalizer_spec
            steps = _sp_normalizer_steps(payload)
    sp = sentencepiece.SentencePieceProcessor(model_file=str(path))
    byte_ids = {i for i in range(sp.get_piece_size()) if sp.is_byte(i)}
    candidates: list[EosCandidate] = []
    width: int | None = None
    notes: list[str] = []
    if folder is not None:
        found, width, notes = _folder_facts(folder, vocab, added)
        candidates.extend(found)
    if sp.eos_id() >= 0:
        candidates.append(_candidate("SentencePiece eos_id", "eos", int(sp.eos_id()), vocab))
    return TokenizerFacts(
        source=spec, format="sentencepiece", alterations=tuple(steps),
        probes=run_probes(lambda text: list(sp.encode(text)), vocab),
        byte_fallback_ids=frozenset(byte_ids), added_ids=frozenset(added),
        eos_candidates=tuple(candidates), model_vocab_size=width, notes=tuple(notes),
    )


def _sp_normalizer_steps(spec: bytes) -> list[str]:
    name, flags = "", {3: True, 4: True}  # add_dummy_prefix, remove_extra_whitespaces default on
    for n, w, whole, payload in _proto_fields(spec):
        if n == 1 and w == 2:
            name = payload.decode("utf-8", "replace")
        elif n in flags and w == 0:
            flags[n] = bool(_varint(whole, 1)[0])
    steps = []
    if name and name != "identity":
        steps.append(f"SentencePiece normalizer {name!r}" + (" (NFKC)" if "nfkc" in name.lower() else ""))
    if flags[3]:
        steps.append(f"SentencePiece dummy prefix ({METASPACE} before the text)")
    if flags[4]:
        steps.append("SentencePiece removes leading, trailing and repeated spaces")
    return steps


# -- GGUF and token lists ---------------------------------------------------------------------

_GGUF_BYTE, _GGUF_USER_DEFINED = 6, 4
_GGUF_EOS_KEYS: tuple[tuple[str, EosRole], ...] = (
    ("eos_token_id", "eos"), ("eot_token_id", "end-of-turn"), ("eom_token_id", "end-of-turn"),
)


def _gguf_facts(spec: str, path: Path, vocab: Vocabulary) -> TokenizerFacts:
    from maskc.compiler.tokenizer_gguf import read_gguf_metadata

    meta = read_gguf_metadata(path)
    model = meta.get("tokenizer.ggml.model")
    prefix = meta.get("tokenizer.ggml.add_space_prefix", model == "llama")
    types = meta.get("tokenizer.ggml.token_type")
    types = types if isinstance(types, np.ndarray) else np.zeros(0, dtype=np.int32)
    candidates = []
    for key, role in _GGUF_EOS_KEYS:
        value = meta.get(f"tokenizer.ggml.{key}")
        if isinstance(value, int) and not isinstance(value, bool):
            candidates.append(_candidate(f"GGUF tokenizer.ggml.{key}", role, value, vocab))
    added = set(np.flatnonzero(types == _GGUF_USER_DEFINED).tolist())
    template = meta.get("tokenizer.chat_template")
    if isinstance(template, str):
        eos_text = candidates[0].text if candidates and candidates[0].role == "eos" else None
        turn = end_of_turn_token(template, vocab, extra_ids=added, eos_text=eos_text)
        if turn is not None:
            candidates.append(_candidate("chat template (end of turn)", "end-of-turn", turn, vocab))
    width = meta.get(f"{meta.get('general.architecture')}.vocab_size")
    return TokenizerFacts(
        source=spec, format="gguf",
        alterations=("llama.cpp dummy prefix (a space before the text)",) if prefix else (),
        probes=run_probes(vocab.encode, vocab, prefix=" " if prefix else ""),
        byte_fallback_ids=frozenset(np.flatnonzero(types == _GGUF_BYTE).tolist()),
        added_ids=frozenset(added), eos_candidates=tuple(candidates),
        model_vocab_size=width if isinstance(width, int) else None,
    )


def _token_list_facts(spec: str, data: Mapping[str, Any], vocab: Vocabulary) -> TokenizerFacts:
    eos = data.get("eos")
    candidates = (_candidate("token list eos", "eos", eos, vocab),) if isinstance(eos, str) else ()
    return TokenizerFacts(
        source=spec, format="token-list", probes=run_probes(vocab.encode, vocab),
        byte_fallback_ids=frozenset(), added_ids=frozenset(), eos_candidates=candidates,
    )
