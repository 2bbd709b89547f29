"""The decode loop and ``check`` judged without a model: fixed or random logits over exact
vocabularies, so every number asserted here is computed by hand or by an oracle."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import orjson
import pytest
import torch
from typer.testing import CliRunner

import maskc
from maskc.artifacts.analysis import worst_case_length
from maskc.artifacts.check import (
    AUTO_TOKEN_CAP,
    UNBOUNDED_BUDGET,
    Judge,
    Verdict,
    count_text,
    default_prompt,
    resolve_budget,
    run_check,
)
from maskc.artifacts.decode import FixedLogits, Output, decode
from maskc.cli.app import app
from maskc.cli.commands.check import read_prompts
from maskc.compiler.errors import InputError
from maskc.compiler.vocab import Vocabulary
from tests.helpers import regex_dfa

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
runner = CliRunner()

SMALL = {"type": "object", "properties": {"ok": {"type": "boolean"},
                                          "n": {"type": "integer", "minimum": 0, "maximum": 99}},
         "required": ["ok", "n"]}


def _random_logits(vocab: Vocabulary, seed: int) -> FixedLogits:
    return FixedLogits(np.random.default_rng(seed).normal(size=vocab.vocab_size).astype(np.float32))


def test_greedy_decode_under_the_mask_counts_forced_bytes() -> None:
    vocab = maskc.load_tokenizer(str(GOLDEN / "teaching_vocab.json"))
    art = maskc.compile_regex(r'\{"[ab]":[12]\}', vocab)
    from maskc.artifacts.trace import load_logits

    logits = load_logits(GOLDEN / "teaching_logits.json", vocab, art.vocab_size)
    run = decode(FixedLogits(logits), [[]], artifact=art, eos_ids=art.eos_token_ids,
                 token_bytes=vocab.token_bytes, max_tokens=20)
    out = run.outputs[0]
    assert out.finish == "eos" and vocab.decode(out.tokens) == b'{"b":1}'
    # forced: `{` of `{"`, `"` of `"b"`, `:`, `}`; the digit was a free choice
    assert out.forced_bytes == 4
    assert run.steps == 6


def test_unconstrained_decode_runs_to_the_budget() -> None:
    vocab = maskc.load_tokenizer(str(GOLDEN / "teaching_vocab.json"))
    row = np.zeros(vocab.vocab_size, dtype=np.float32)
    row[vocab.token_id(",")] = 5.0
    run = decode(FixedLogits(row), [[], []], artifact=None, eos_ids=vocab.eos_ids,
                 token_bytes=vocab.token_bytes, max_tokens=7)
    assert [o.finish for o in run.outputs] == ["length", "length"]
    assert [vocab.decode(o.tokens) for o in run.outputs] == [b",,,,,,,"] * 2


def test_a_token_dead_end_finishes_as_dead() -> None:
    vocab = Vocabulary.from_tokens(["a", "ab", "b", "EOS"], eos="EOS")
    art = maskc.compile_regex("ab?c|b", vocab)
    row = np.array([3.0, 0.0, 1.0, 0.0], dtype=np.float32)  # the model wants "a": a dead end
    out = decode(FixedLogits(row), [[]], artifact=art, eos_ids=art.eos_token_ids,
                 token_bytes=vocab.token_bytes, max_tokens=10).outputs[0]
    # "a", then "b" (still a valid prefix of "abc"), then nothing: no token carries the "c"
    assert out.finish == "dead" and out.tokens == [0, 2]


@pytest.mark.parametrize("seed", range(6))
def test_sampled_constrained_outputs_are_valid_and_end(byte_vocab: Vocabulary, seed: int) -> None:
    art = maskc.compile_json_schema(SMALL, byte_vocab)
    budget = worst_case_length(art.dfa).max_tokens
    assert budget is not None
    gen = torch.Generator().manual_seed(seed)
    run = decode(_random_logits(byte_vocab, seed), [[]] * 4, artifact=art, eos_ids=art.eos_token_ids,
                 token_bytes=byte_vocab.token_bytes, max_tokens=budget, temperature=1.0, generator=gen)
    for o in run.outputs:
        assert o.finish == "eos"
        value = json.loads(byte_vocab.decode(o.tokens))
        assert isinstance(value["ok"], bool) and 0 <= value["n"] <= 99
    again = decode(_random_logits(byte_vocab, seed), [[]] * 4, artifact=art, eos_ids=art.eos_token_ids,
                   token_bytes=byte_vocab.token_bytes, max_tokens=budget, temperature=1.0,
                   generator=torch.Generator().manual_seed(seed))
    assert [o.tokens for o in again.outputs] == [o.tokens for o in run.outputs]


def test_run_check_reports_every_mode(byte_vocab: Vocabulary) -> None:
    art = maskc.compile_json_schema(SMALL, byte_vocab)
    report = run_check(art, byte_vocab, lambda: _random_logits(byte_vocab, 1), ["give me one"],
                       lambda p: [], eos_ids=byte_vocab.eos_ids, samples=3, temperature=1.0,
                       adversarial=True)
    assert report.passed
    doc = report.to_json(byte_vocab)
    bound = worst_case_length(art.dfa)
    assert doc["budget"]["max_tokens"] == bound.max_tokens == len('{"ok":false,"n":99}') + 1
    assert doc["eos_reachability"]["proved"]
    c, u, a = (doc["modes"][k] for k in ("constrained", "unconstrained", "adversarial"))
    assert c["outputs"] == 3 and c["finish"] == {"eos": 3} and c["failures"] == 0
    assert u["outputs"] == 3 and u["json_failures"] == 3 and u["failure_rate"] == 1.0
    # the adversary walks the longest path byte by byte: exactly the worst case, then EOS
    assert a["outputs"] == 1 and a["finish"] == {"eos": 1} and a["tokens_max"] == bound.max_tokens
    assert 0 < c["forced_byte_share"] < 1
    assert all(json.loads(s["text"])["n"] <= 99 for s in c["samples"])


def test_run_check_fails_when_the_budget_is_too_small(byte_vocab: Vocabulary) -> None:
    art = maskc.compile_json_schema(SMALL, byte_vocab)
    report = run_check(art, byte_vocab, lambda: _random_logits(byte_vocab, 2), ["x"], lambda p: [],
                       eos_ids=byte_vocab.eos_ids, samples=2, max_tokens=5, baseline=False)
    assert not report.passed
    assert report.to_json(byte_vocab)["modes"]["constrained"]["finish"] == {"length": 2}


def test_adversary_exposes_an_unbounded_schema(byte_vocab: Vocabulary) -> None:
    art = maskc.compile_json_schema({"type": "object", "properties": {"x": {"type": "number"}},
                                     "required": ["x"]}, byte_vocab)
    report = run_check(art, byte_vocab, lambda: _random_logits(byte_vocab, 3), ["x"], lambda p: [],
                       eos_ids=byte_vocab.eos_ids, samples=1, max_tokens=40, baseline=False,
                       adversarial=True)
    assert not report.passed
    adv = report.mode("adversarial")
    assert adv is not None and adv.finish == {"length": 1}
    assert report.budget_reason == "given"
    assert resolve_budget("auto", report.bound) == (UNBOUNDED_BUDGET, resolve_budget("auto", report.bound)[1])
    assert "unbounded" in resolve_budget("auto", report.bound)[1]


def test_auto_budget_is_capped() -> None:
    bound = worst_case_length(regex_dfa("a{5000}"))
    assert resolve_budget("auto", bound)[0] == AUTO_TOKEN_CAP
    assert "--max-tokens 5001" in resolve_budget("auto", bound)[1]
    assert resolve_budget(123, bound) == (123, "given")


def test_astronomical_counts_are_written_as_powers_of_ten() -> None:
    assert count_text(1234) == "1,234"
    assert count_text(10**18 - 1) == "999,999,999,999,999,999"
    assert count_text(123 * 10**40) == "about 1.23e42"


def test_judge_names_length_violations(byte_vocab: Vocabulary) -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string", "maxLength": 3},
                                               "l": {"type": "array", "maxItems": 1}}}
    art = maskc.compile_json_schema(schema, byte_vocab)
    judge = Judge(art, byte_vocab)

    def verdict(text: str, finish: str = "eos") -> Verdict:
        return judge(Output(byte_vocab.encode(text), finish))

    v = verdict('{"s":"toolong","l":[1,2]}')
    assert v.parsed and v.valid is False and v.limit_violations == {"maxLength": 1, "maxItems": 1}
    assert v.grammar_ok is False and not v.passed
    assert verdict('{"s":"ok"}').passed
    assert verdict('{"s":"ok"}', finish="length").passed is False
    bad = verdict("Sure! {")
    assert bad.parsed is False and bad.errors[0].startswith("not JSON")


def test_judge_checks_formats(byte_vocab: Vocabulary) -> None:
    art = maskc.compile_json_schema({"type": "string", "format": "date"}, byte_vocab)
    judge = Judge(art, byte_vocab)
    assert judge(Output(byte_vocab.encode('"2024-02-30"'), "eos")).valid is False
    assert judge(Output(byte_vocab.encode('"2024-02-28"'), "eos")).valid is True


def test_default_prompt_shows_the_grammar(byte_vocab: Vocabulary) -> None:
    art = maskc.compile_json_schema(SMALL, byte_vocab)
    text = default_prompt(art, "Describe the order.")
    assert text.startswith("Describe the order.")
    assert json.loads(text.split("JSON Schema:\n", 1)[1]) == SMALL
    assert "[0-9]" in default_prompt(maskc.compile_regex("[0-9]", byte_vocab))
    assert "- yes" in default_prompt(maskc.compile_choice(["yes", "no"], byte_vocab))


def test_read_prompts(tmp_path: Path) -> None:
    (tmp_path / "lines.txt").write_text("first\n\n second \n")
    assert read_prompts(tmp_path / "lines.txt") == ["first", "second"]
    (tmp_path / "list.json").write_bytes(orjson.dumps(["a", "b"]))
    assert read_prompts(tmp_path / "list.json") == ["a", "b"]
    for name, body in {"empty.txt": "\n", "bad.json": "[1, 2]", "broken.json": "[oops"}.items():
        (tmp_path / name).write_text(body)
        with pytest.raises(InputError):
            read_prompts(tmp_path / name)


def test_check_usage_errors_exit_2(tmp_path: Path) -> None:
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps(SMALL))
    (tmp_path / "notes.txt").write_text("not a model")
    (tmp_path / "empty").mkdir()
    cases = [
        ["check", str(schema)],  # no --model
        ["check", str(schema), "--model", str(tmp_path / "missing.gguf")],
        ["check", str(schema), "--model", str(tmp_path / "notes.txt")],
        ["check", str(schema), "--model", str(tmp_path / "empty")],
        ["check", str(schema), "--model", "x", "--prompt", "a", "--prompts", str(schema)],
        ["check", str(schema), "--model", "x", "--max-tokens", "lots"],
        ["check", str(schema), "--model", "x", "--device", "tpu"],
    ]
    for args in cases:
        r = runner.invoke(app, args)
        assert r.exit_code == 2, (args, r.output)
        assert "Traceback" not in r.output


class _Counter:
    """A fake model: each row counts up from its prompt's last token and says EOS at 'z'.

    Its state is per row, so a batch that drops finished rows (``select``) must keep every
    surviving row's history attached to the right sequence.
    """

    def __init__(self, vocab: Vocabulary, *, can_select: bool) -> None:
        self.vocab, self.width = vocab, vocab.vocab_size
        self.calls: list[list[int]] = []
        self.eos = vocab.eos_ids[0]
        if not can_select:
            self.select = None  # type: ignore[assignment]

    def _logits(self) -> torch.Tensor:
        out = torch.full((len(self.last), self.width), -1.0)
        for r, t in enumerate(self.last):
            out[r, self.eos if t >= ord("z") else t + 1] = 1.0
        return out

    def start(self, prompts: Sequence[Sequence[int]]) -> torch.Tensor:
        self.last = [p[-1] for p in prompts]
        return self._logits()

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        self.last = [int(t) for t in tokens]
        return self._logits()

    def select(self, rows: Sequence[int]) -> bool:
        self.calls.append(list(rows))
        self.last = [self.last[r] for r in rows]
        return True


@pytest.mark.parametrize("can_select", [True, False])
def test_finished_rows_leave_the_batch_without_mixing_sequences(byte_vocab: Vocabulary, can_select: bool) -> None:
    src = _Counter(byte_vocab, can_select=can_select)
    prompts = [[ord("x")], [ord("p")], [ord("v")]]
    run = decode(src, prompts, artifact=None, eos_ids=byte_vocab.eos_ids, token_bytes=byte_vocab.token_bytes,
                 max_tokens=50)
    texts = [byte_vocab.decode(o.tokens) for o in run.outputs]
    assert texts == [b"yz", b"qrstuvwxyz", b"wxyz"]
    assert all(o.finish == "eos" for o in run.outputs)
    assert src.calls == ([[1, 2], [0]] if can_select else [])
