"""``maskc trace``: the golden teaching example, replays that stop at the rejected token, and
the errors a user can cause."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import maskc
from maskc.artifacts.decode import FixedLogits
from maskc.artifacts.trace import load_logits, trace_decode, trace_text
from maskc.cli.app import app
from maskc.compiler.errors import InputError
from maskc.compiler.vocab import Vocabulary

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
VOCAB = GOLDEN / "teaching_vocab.json"
LOGITS = GOLDEN / "teaching_logits.json"
REGEX = r'\{"[ab]":[12]\}'

runner = CliRunner()


def _trace(*args: str) -> tuple[int, str]:
    r = runner.invoke(app, ["trace", "--regex", REGEX, "-t", str(VOCAB), *args])
    return r.exit_code, r.stdout


@pytest.fixture(scope="module")
def teaching() -> tuple[Vocabulary, maskc.Artifact]:
    vocab = maskc.load_tokenizer(str(VOCAB))
    return vocab, maskc.compile_regex(REGEX, vocab)


def test_golden_teaching_trace_json() -> None:
    code, out = _trace("--logits", str(LOGITS), "--format", "json")
    assert code == 0
    assert json.loads(out) == json.loads((GOLDEN / "teaching_trace.json").read_text())


def test_golden_teaching_trace_picks_six_tokens(teaching: tuple[Vocabulary, maskc.Artifact]) -> None:
    vocab, art = teaching
    logits = load_logits(LOGITS, vocab, art.vocab_size)
    t = trace_decode(art, vocab, FixedLogits(logits), [], max_tokens=50)
    assert [r.picked.text for r in t.rows] == ["{", '"b"', ":", "1", "}", "EOS"]
    assert [r.picked.logit for r in t.rows] == [2.9, 2.6, 2.4, 2.2, 2.8, 1.9]
    assert t.output == b'{"b":1}' and t.finish == "eos"
    # the model preferred "{" (2.9) at every step after the first; the mask overruled it
    assert t.rows[0].vetoed is None
    assert all(r.vetoed is not None and r.vetoed.text == "{" for r in t.rows[1:])
    assert [r.allowed for r in t.rows] == [1, 2, 1, 2, 1, 1]
    assert [r.forced for r in t.rows] == ['{"', '"', ":", "", "}", ""]


def test_golden_teaching_trace_human() -> None:
    code, out = _trace("--logits", str(LOGITS))
    assert code == 0
    picked = []
    for line in out.splitlines():
        cells = line.split()
        if cells and cells[0].isdigit():
            picked.append(line)
    assert len(picked) == 6
    assert 'output {"b":1}  (eos)' in out


def test_jsonl_has_a_line_per_step_then_the_summary() -> None:
    code, out = _trace("--logits", str(LOGITS), "--format", "jsonl")
    lines = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and len(lines) == 7
    assert [x["step"] for x in lines[:6]] == list(range(6))
    assert lines[6] == {"output": '{"b":1}', "finish": "eos"}


def test_replay_stops_at_the_first_rejected_token(teaching: tuple[Vocabulary, maskc.Artifact]) -> None:
    vocab, art = teaching
    t = trace_text(art, vocab, '{"a",')
    assert t.finish == "rejected"
    assert t.prefix == b'{"a"' and t.rejected is not None and t.rejected.text == ","
    assert [c.text for c in t.allowed_there] == [":"]
    assert [r.accepted for r in t.rows] == [True, True, False]
    code, out = _trace("--text", '{"a",')
    assert code == 1
    assert "the grammar rejects" in out and "allowed there: :" in out


def test_replay_of_a_complete_output_ends_with_eos(teaching: tuple[Vocabulary, maskc.Artifact]) -> None:
    vocab, art = teaching
    t = trace_text(art, vocab, '{"a":2}')
    assert t.finish == "eos" and t.output == b'{"a":2}'
    assert [r.picked.text for r in t.rows] == ["{", '"a"', ":", "2", "}", "EOS"]


def test_replay_of_a_truncated_output_is_incomplete(teaching: tuple[Vocabulary, maskc.Artifact]) -> None:
    vocab, art = teaching
    t = trace_text(art, vocab, '{"a":2')
    assert t.finish == "incomplete"
    assert t.rejected is not None and t.rejected.text == "EOS"
    assert [c.text for c in t.allowed_there] == ["}"]
    assert _trace("--text", '{"a":2')[0] == 1


def test_replay_through_a_real_tokenizer(deepseek: Vocabulary) -> None:
    art = maskc.compile_json_schema({"type": "object", "properties": {"n": {"type": "integer"}},
                                     "required": ["n"]}, deepseek)
    ok = trace_text(art, deepseek, '{"n":12}')
    assert ok.finish == "eos" and ok.output == b'{"n":12}'
    bad = trace_text(art, deepseek, '{"n":1.5}')
    assert bad.finish == "rejected"
    assert bad.rejected is not None
    assert bad.prefix.startswith(b'{"n":1') and b"." in deepseek.token_bytes[bad.rejected.token]


def test_logits_file_errors(tmp_path: Path, teaching: tuple[Vocabulary, maskc.Artifact]) -> None:
    vocab, art = teaching
    cases = {"unknown.json": '{"zzz": 1.0}', "nan.json": '{"{": "high"}', "short.json": "[1, 2]",
             "broken.json": "{", "scalar.json": "3"}
    for name, body in cases.items():
        (tmp_path / name).write_text(body)
        with pytest.raises(InputError):
            load_logits(tmp_path / name, vocab, art.vocab_size)
        code, _ = _trace("--logits", str(tmp_path / name))
        assert code == 2
    with pytest.raises(InputError):
        load_logits(tmp_path / "missing.json", vocab, art.vocab_size)


def test_usage_errors_exit_2() -> None:
    assert _trace()[0] == 2  # nothing picks tokens
    assert _trace("--text", "{", "--model", "x")[0] == 2
    assert _trace("--prompt", "hi", "--logits", str(LOGITS))[0] == 2
    r = runner.invoke(app, ["trace", "-t", str(VOCAB), "--logits", str(LOGITS)])
    assert r.exit_code == 2  # no grammar
    r = runner.invoke(app, ["trace", "missing.json", "-t", str(VOCAB), "--logits", str(LOGITS)])
    assert r.exit_code == 2


def test_unencodable_text_is_a_tokenizer_error() -> None:
    assert _trace("--text", '{"c":1}')[0] == 2


def test_every_format_has_a_depth_column() -> None:
    code, out = _trace("--logits", str(LOGITS), "--format", "jsonl")
    assert code == 0
    steps = [json.loads(x) for x in out.splitlines()][:6]
    assert [s["depth"] for s in steps] == [1] * 6  # a regular grammar never pushes a frame
    code, out = _trace("--logits", str(LOGITS))
    header = next(line for line in out.splitlines() if "step" in line and "allowed" in line)
    assert header.split()[:4] == ["step", "state", "depth", "allowed"]
