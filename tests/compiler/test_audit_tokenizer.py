"""The tokenizer report of ``maskc audit``: planted hazards, no false positives, real counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from maskc.compiler.audit.rules import RULES as TOKENIZER_RULES
from maskc.compiler.audit.classes import STRUCTURAL_CLASSES, printable
from maskc.compiler.audit.facts import EosCandidate, Probe, TokenizerFacts, end_of_turn_token
from maskc.compiler.audit.tokenizer import TokenizerAudit, audit_tokenizer
from maskc.compiler.vocab import Vocabulary

# -- a synthetic vocabulary with one planted hazard of each kind -------------------------------

CLEAN = ["a", "b", "c", "1", "2", '"', ",", ":", "{", "}", "[", "]", "é", "€", "<eos>"]

# category -> (token, extra Vocabulary role); each token is in exactly its own category
PLANTED: dict[str, str | bytes] = {
    "quote+comma": '",',
    "quote+colon": '":',
    "quote+brace": '"}',
    "brace+comma": "},",
    "brace+colon": "]:",
    "bracket-combo": "[{",
    "structure+newline": ",\n",
    "structure+space": ": ",
    "structure+text": "{a",
    "structure-other": '""',
    "whitespace-only": "\n\n",
    "incomplete-utf8": b"\xe2\x82",
    "lone-continuation": b"\xac",
    "byte-fallback": b"\x07",
    "special": "[END]",          # a special token, also the chat template's end of turn
    "added": "<tool>",
    "special-structure": "[END]",
    "empty": b"",
    "duplicate-bytes": "ab",
}


def _planted() -> tuple[Vocabulary, dict[str, int], TokenizerFacts]:
    tokens: list[str | bytes] = [*CLEAN, "ab"]
    for cid, tok in PLANTED.items():
        if tok not in tokens or cid == "duplicate-bytes":
            tokens.append(tok)
    vocab = Vocabulary.from_tokens(tokens, eos="<eos>", special=["[END]", ""],
                                   vocab_size=len(tokens) + 3)
    ids = {cid: (len(tokens) - 1 if cid == "duplicate-bytes" else tokens.index(tok))
           for cid, tok in PLANTED.items()}
    facts = TokenizerFacts(
        source="planted", byte_fallback_ids=frozenset({ids["byte-fallback"]}),
        added_ids=frozenset({ids["added"]}),
        alterations=("normalizer: NFKC normalization",),
        probes=(Probe("\ufb01", served=b"fi", continuation="\ufb01".encode()),
                Probe("a", served=b"a", continuation=b"a")),
        eos_candidates=(EosCandidate("tokenizer_config.json eos_token", "eos", "<eos>", CLEAN.index("<eos>")),
                        EosCandidate("chat template (end of turn)", "end-of-turn", "[END]", ids["special"])),
        model_vocab_size=len(tokens) + 3,
    )
    return vocab, ids, facts


def test_every_planted_hazard_is_reported_once_with_its_id() -> None:
    vocab, ids, facts = _planted()
    audit = audit_tokenizer(vocab, facts=facts)
    assert [c.id for c in audit.categories] == list(PLANTED)
    for c in audit.categories:
        assert (c.id, c.count, [e.id for e in c.examples]) == (c.id, 1, [ids[c.id]])
    assert audit.category("incomplete-utf8").examples[0].data == b"\xe2\x82"
    assert audit.category("incomplete-utf8").examples[0].text == "\\xe2\\x82"
    by_rule = {f.rule: f for f in audit.findings}
    assert set(by_rule) == {r.id for r in TOKENIZER_RULES}  # the grammar audit registers its own
    assert by_rule["whitespace-token"].data["longest_run"] == 2
    assert by_rule["duplicate-token-bytes"].pointer == f"/tokens/{ids['duplicate-bytes']}"
    lossy = by_rule["lossy-normalizer"]
    assert (lossy.severity, lossy.data["served"], lossy.data["continuation"]) == ("info", ["\ufb01"], [])
    eos = by_rule["eos-disagreement"]
    assert eos.severity == "warning" and "[END]" in eos.message and eos.data["ids"] == [ids["special"]]
    assert not audit.eos.agree
    padded = [f for f in audit.findings if f.rule == "padded-vocab"]
    assert [f.severity for f in padded] == ["info"]  # the config agrees with the padded width
    assert audit.summary["padding_columns"] == 3
    assert audit.summary["structural_tokens"] == len(STRUCTURAL_CLASSES)
    assert audit.summary["partial_utf8"] == 2 and audit.summary["lossy_probes"] == 1
    json.dumps(audit.as_dict())  # JSON-able


def test_a_clean_vocabulary_has_no_hazard() -> None:
    vocab = Vocabulary.from_tokens(CLEAN, eos="<eos>")
    facts = TokenizerFacts(
        byte_fallback_ids=frozenset(), added_ids=frozenset(),
        probes=(Probe("a", served=b"a", continuation=b"a"),),
        eos_candidates=(EosCandidate("token list eos", "eos", "<eos>", CLEAN.index("<eos>")),),
    )
    audit = audit_tokenizer(vocab, facts=facts)
    assert {c.id: c.count for c in audit.categories} == {cid: 0 for cid in PLANTED}
    assert audit.findings == [] and audit.eos.agree


def test_without_facts_the_facts_categories_are_unknown_not_zero() -> None:
    vocab, _, _ = _planted()
    audit = audit_tokenizer(vocab, show=0)
    assert audit.category("byte-fallback").count is None
    assert audit.category("added").count is None
    assert audit.category("quote+comma").count == 1 and audit.category("quote+comma").examples == ()
    assert audit.normalizer is None and audit.summary["lossy_probes"] is None
    with pytest.raises(ValueError, match="show"):
        audit_tokenizer(vocab, show=-1)


def test_near_misses_are_not_hazards() -> None:
    # one structural byte alone, complete UTF-8, a 4-byte character, text with inner spaces
    vocab = Vocabulary.from_tokens(["{", '"', "a b", "😀", "é", "x", "<eos>"], eos="<eos>")
    counts = {c.id: c.count for c in audit_tokenizer(vocab).categories}
    assert all(counts[c] == 0 for c in (*STRUCTURAL_CLASSES, "whitespace-only",
                                        "incomplete-utf8", "lone-continuation", "duplicate-bytes"))


def test_printable_escapes_what_is_invisible() -> None:
    assert printable(b'",\n\t\\') == '",\\n\\t\\\\'
    assert printable(b"\xc3\xa9 \xff\x00\xe2\x80\x8b") == "é \\xff\\x00\\u200b"


# -- chat templates ----------------------------------------------------------------------------

def _chat_vocab() -> Vocabulary:
    return Vocabulary.from_tokens(
        ["a", "<|im_start|>", "<|im_end|>", "<|eot_id|>", "[INST]", "[/INST]", "</s>"],
        eos="</s>", special=["<|im_start|>", "<|im_end|>", "<|eot_id|>", "[INST]", "[/INST]"])


@pytest.mark.parametrize(("template", "expected"), [
    ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
     "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}", "<|im_end|>"),
    ("{% for m in messages %}{{ '<|start|>' + m['role'] + m['content'] | trim + '<|eot_id|>' }}"
     "{% endfor %}", "<|eot_id|>"),
    # the assistant's turn ends with eos_token, the user's with [/INST]
    ("{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + "
     "message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
     "{{ message['content'] + eos_token }}{% endif %}{% endfor %}", "</s>"),
    ("{{ messages }}", None),
])
def test_the_chat_template_end_of_turn(template: str, expected: str | None) -> None:
    assert end_of_turn_token(template, _chat_vocab()) == expected


# -- a tokenizer.json folder with a lossy normalizer and disagreeing EOS -----------------------

def _write_folder(folder: Path) -> None:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|endoftext|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["hello world", '{"a": 1}'] * 20, trainer)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "eos_token": "<|endoftext|>",
        "chat_template": "{% for message in messages %}{{ message['content'] + '<|im_end|>' }}{% endfor %}",
    }))
    (folder / "config.json").write_text(json.dumps({"vocab_size": 320, "eos_token_id": 0}))


def test_facts_of_a_model_folder(tmp_path: Path) -> None:
    import maskc

    _write_folder(tmp_path)
    vocab = maskc.load_tokenizer(tmp_path)
    audit = audit_tokenizer(vocab, source=tmp_path)
    assert audit.normalizer is not None
    assert any("NFKC" in a for a in audit.normalizer.alterations)
    assert any("lowercasing" in a for a in audit.normalizer.alterations)
    failing = {p.text for p in audit.normalizer.failing}
    assert {"Hello WORLD", "\ufb01le", "\u2460", "\uff21"} <= failing
    assert not failing & {"hello", " hello", "\t", "\r\n", "a  b"}
    lossy = next(f for f in audit.findings if f.rule == "lossy-normalizer")
    assert lossy.severity == "warning"  # maskc's continuation encoder keeps the normalizer
    sources = {c.source: c.token_id for c in audit.eos.candidates}
    im_end = vocab.token_id("<|im_end|>")
    assert sources == {"tokenizer_config.json eos_token": 0, "config.json eos_token_id": 0,
                       "chat template (end of turn)": im_end}
    assert vocab.eos_ids == (0,) and not audit.eos.agree
    warnings = {f.rule for f in audit.findings if f.severity == "warning"}
    assert warnings == {"lossy-normalizer", "eos-disagreement", "padded-vocab"}
    assert audit.eos.model_vocab_size == 320


def test_facts_of_a_token_list_file(tmp_path: Path) -> None:
    from maskc.compiler.audit.facts import tokenizer_facts

    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"tokens": ["a", "b", "ab", "<eos>"], "eos": "<eos>"}))
    facts = tokenizer_facts(path)  # loads the vocabulary itself
    assert facts.format == "token-list" and facts.byte_fallback_ids == frozenset()
    assert facts.eos_candidates == (EosCandidate("token list eos", "eos", "<eos>", 3),)
    assert facts.probes and not any(p.lossy for p in facts.probes if p.served is not None)
    assert tokenizer_facts("no-such-org/no-such-model").notes  # a hub id: a note, no download


# -- real tokenizers: every count equals an independent count ----------------------------------

STRUCT = set(b'",:{}[]')
BRACES = set(b"{}[]")


def _expected(vocab: Vocabulary) -> dict[str, list[int]]:
    """Every byte class, by plain loops over the token bytes (not the audit's code)."""
    out: dict[str, list[int]] = {k: [] for k in (*STRUCTURAL_CLASSES, "whitespace-only",
                                                  "incomplete-utf8", "lone-continuation",
                                                  "duplicate-bytes", "empty")}
    seen: set[bytes] = set()
    for i, data in enumerate(vocab.token_bytes):
        if not data:
            out["empty"].append(i)
        if i in vocab.special_ids or not data:
            continue
        if data in seen:
            out["duplicate-bytes"].append(i)
        seen.add(data)
        if all(b in b" \t\n\r" for b in data):
            out["whitespace-only"].append(i)
        if 0x80 <= data[0] <= 0xBF:
            out["lone-continuation"].append(i)
        # walk back over up to three continuation bytes to the last lead byte
        j = len(data)
        while j > 0 and len(data) - j < 3 and 0x80 <= data[j - 1] <= 0xBF:
            j -= 1
        if j > 0:
            lead = data[j - 1]
            need = (2 if 0xC0 <= lead <= 0xDF else 3 if 0xE0 <= lead <= 0xEF
                    else 4 if 0xF0 <= lead <= 0xF7 else 0)
            if len(data) - (j - 1) < need:
                out["incomplete-utf8"].append(i)
        if len(data) < 2 or not STRUCT & set(data):
            continue
        has = set(data)
        q, c, k, b = ord('"') in has, ord(",") in has, ord(":") in has, bool(BRACES & has)
        found = {
            "quote+comma": q and c, "quote+colon": q and k, "quote+brace": q and b,
            "brace+comma": b and c, "brace+colon": b and k,
            "bracket-combo": sum(x in BRACES for x in data) >= 2,
            "structure+newline": bool(has & set(b"\n\r")),
            "structure+space": bool(has & set(b" \t")),
            "structure+text": bool(has - STRUCT - set(b" \t\n\r")),
        }
        for name, hit in found.items():
            if hit:
                out[name].append(i)
        if not any(found.values()):
            out["structure-other"].append(i)
    return out


def _check_counts(vocab: Vocabulary, audit: TokenizerAudit) -> None:
    expected = _expected(vocab)
    for cid, ids in expected.items():
        c = audit.category(cid)
        assert (cid, c.count, [e.id for e in c.examples]) == (cid, len(ids), ids[:5])


def test_deepseek_counts(deepseek: Vocabulary) -> None:
    audit = audit_tokenizer(deepseek, source="deepseek")
    _check_counts(deepseek, audit)
    assert audit.category("byte-fallback").count == 0
    assert audit.normalizer is not None and audit.normalizer.failing == ()
    assert [c.token_id for c in audit.eos.candidates] == list(deepseek.eos_ids) and audit.eos.agree


def test_smollm2_counts(smollm2: Vocabulary, smollm2_path: Path) -> None:
    audit = audit_tokenizer(smollm2, source=smollm2_path)
    _check_counts(smollm2, audit)
    assert audit.category("byte-fallback").count == 0
    im_end = smollm2.token_id("<|im_end|>")
    assert {c.source: c.token_id for c in audit.eos.candidates} == {
        "GGUF tokenizer.ggml.eos_token_id": im_end, "chat template (end of turn)": im_end}
    assert audit.eos.agree and audit.eos.model_vocab_size == smollm2.token_count == 49152


def test_mistral_sentencepiece_counts(mistral_sp: Vocabulary, mistral_path: Path) -> None:
    import sentencepiece

    audit = audit_tokenizer(mistral_sp, source=mistral_path)
    _check_counts(mistral_sp, audit)
    sp = sentencepiece.SentencePieceProcessor(model_file=str(mistral_path))
    byte_ids = [i for i in range(sp.get_piece_size()) if sp.is_byte(i)]
    fallback = audit.category("byte-fallback")
    assert (fallback.count, [e.id for e in fallback.examples]) == (256, byte_ids[:5])
    # the dummy prefix: served "hello" is " hello"; maskc's continuation encoding is exact
    assert audit.normalizer is not None
    assert any("dummy prefix" in a for a in audit.normalizer.alterations)
    hello = next(p for p in audit.normalizer.probes if p.text == "hello")
    assert (hello.served, hello.continuation) == (b" hello", b"hello")
    assert not any(p.continuation_lossy for p in audit.normalizer.probes)
    lossy = next(f for f in audit.findings if f.rule == "lossy-normalizer")
    assert lossy.severity == "info"
