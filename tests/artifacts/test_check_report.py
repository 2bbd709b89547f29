"""What ``maskc check`` reports about time and prompts: per-step medians and p90s with the
prefill apart, and the prompt the model read. Durations come from a fake clock, so every
number is exact; the model test at the end is slow (one sample, a few tokens)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import maskc
from maskc.artifacts import decode as decode_module
from maskc.artifacts.check import ModeReport, StepTimes, run_check, step_times
from maskc.artifacts.decode import FixedLogits
from maskc.cli import render
from maskc.cli.app import app
from maskc.cli.output import Output
from maskc.compiler.vocab import Vocabulary

SMALL = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def test_step_times_are_median_and_nearest_rank_p90() -> None:
    ten = [0.001 * t for t in (9, 1, 8, 2, 7, 3, 6, 4, 5, 10)]
    t = step_times(ten)
    assert t is not None and t.count == 10
    assert t.median_ms == pytest.approx(5.5) and t.p90_ms == pytest.approx(9.0)
    t = step_times([0.004, 0.001, 0.002])
    assert t == StepTimes(3, pytest.approx(2.0), pytest.approx(4.0))  # type: ignore[arg-type]
    eleven = [0.001] * 10 + [1.0]  # one slow step: the median and p90 do not move
    t = step_times(eleven)
    assert t is not None and t.median_ms == pytest.approx(1.0) and t.p90_ms == pytest.approx(1.0)
    assert step_times([]) is None


def test_mode_timing_keeps_the_prefill_apart() -> None:
    mode = ModeReport("constrained", [], steps=4, model_seconds=2.0 + 0.03, mask_seconds=0.004,
                      wall_seconds=2.1, forced_bytes=0, output_bytes=0, prefill_seconds=[2.0],
                      model_step_seconds=[0.01, 0.01, 0.01], mask_step_seconds=[0.001] * 4)
    doc = mode.to_json()
    timing = doc["timing"]
    assert timing["model_ms"] == {"count": 3, "median": pytest.approx(10.0), "p90": pytest.approx(10.0)}
    assert timing["mask_ms"] == {"count": 4, "median": pytest.approx(1.0), "p90": pytest.approx(1.0)}
    assert timing["prefill_ms"] == {"count": 1, "median": pytest.approx(2000.0), "p90": pytest.approx(2000.0)}
    # the old means stay for old readers (the model's includes the prefill)
    assert doc["model_ms_per_step"] == pytest.approx(1e3 * 2.03 / 4)


class _Clock:
    """Stands in for the ``time`` module of the decode loop: time moves only when told."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class _TimedSource:
    """Fixed logits; the prefill takes 1 s on the fake clock, step k takes (10 + k) ms."""

    def __init__(self, logits: FixedLogits, clock: _Clock) -> None:
        self.inner, self.clock, self.width, self.k = logits, clock, logits.width, 0

    def start(self, prompts: Sequence[Sequence[int]]) -> torch.Tensor:
        self.clock.now += 1.0
        return self.inner.start(prompts)

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        self.clock.now += 0.010 + 0.001 * self.k
        self.k += 1
        return self.inner.step(tokens)


def _report(byte_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    clock = _Clock()
    monkeypatch.setattr(decode_module, "time", SimpleNamespace(perf_counter=clock.perf_counter))
    art = maskc.compile_json_schema(SMALL, byte_vocab)
    row = np.random.default_rng(0).normal(size=byte_vocab.vocab_size).astype(np.float32)
    report = run_check(art, byte_vocab, lambda: _TimedSource(FixedLogits(row), clock), ["Say ok.\nThen stop."],
                       lambda p: list(b"<u>" + p.encode() + b"</u>"), eos_ids=byte_vocab.eos_ids, samples=1,
                       temperature=0.0, baseline=False)
    return report.to_json(byte_vocab)


def test_decode_times_steps_apart_from_the_prefill(byte_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = _report(byte_vocab, monkeypatch)
    c = doc["modes"]["constrained"]  # type: ignore[index]
    tokens = c["samples"][0]["tokens"]
    assert c["finish"] == {"eos": 1} and tokens in (len('{"ok":false}') + 1, len('{"ok":true}') + 1)
    steps = tokens - 1  # no model call after the EOS
    expected = [10 + k for k in range(steps)]
    assert c["timing"]["prefill_ms"]["median"] == pytest.approx(1000.0)
    assert c["timing"]["model_ms"]["count"] == steps
    assert c["timing"]["model_ms"]["median"] == pytest.approx(float(np.median(expected)))
    assert c["timing"]["model_ms"]["p90"] == pytest.approx(sorted(expected)[-(-9 * steps // 10) - 1])
    assert c["timing"]["mask_ms"]["count"] == tokens  # every step ran under the mask


def test_report_carries_the_prompt(byte_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    doc = _report(byte_vocab, monkeypatch)
    assert doc["prompts"] == ["Say ok.\nThen stop."]
    assert doc["rendered_prompts"] == ["<u>Say ok.\nThen stop.</u>"]
    assert doc["prompt_tokens"] == [len("<u>Say ok.\nThen stop.</u>")]
    meta = {"model": {"name": "fake", "source": "test", "device": "cpu", "dtype": "float32"},
            "grammar": {"kind": "json_schema", "states": 9, "not_enforced": []}}
    render.check_report(Output("human"), meta, doc)
    shown = capsys.readouterr().out
    assert "prompt 'Say ok.' (18 chars, 25 tokens" in shown
    assert "Then stop." not in shown
    assert "mask ms/step (median / p90)" in shown and "prefill ms/batch" in shown


def test_gguf_conversion_bar_is_silenced_unless_asked(capfd: pytest.CaptureFixture[str]) -> None:
    gguf_utils = pytest.importorskip("transformers.modeling_gguf_pytorch_utils")
    from maskc.artifacts.model import _loading_bars

    original = gguf_utils.tqdm
    with _loading_bars(False):
        for _ in gguf_utils.tqdm(range(3), desc="Converting and de-quantizing GGUF tensors..."):
            pass
    assert gguf_utils.tqdm is original
    assert "de-quantizing" not in capfd.readouterr().err
    with _loading_bars(True):
        assert gguf_utils.tqdm is original


@pytest.mark.slow
def test_check_with_the_model_reports_step_times_and_prompt(smollm2_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    from tests.conftest import REPO

    monkeypatch.setenv("MASKC_MODEL_CACHE_DIR", str(REPO / "tests" / ".assets" / "models"))
    schema = tmp_path / "ok.json"
    schema.write_text(json.dumps(SMALL))
    r = CliRunner().invoke(app, ["check", str(schema), "--model", str(smollm2_path), "--json", "--samples", "1",
                                 "--no-baseline", "--device", "cpu", "--temperature", "0",
                                 "--prompt", "Is it ok?"])
    assert r.exit_code == 0, r.output
    assert "de-quantizing" not in r.stderr
    doc = json.loads(r.stdout)
    assert doc["prompts"][0].startswith("Is it ok?\n")
    assert "<|im_start|>user\nIs it ok?" in doc["rendered_prompts"][0]
    assert doc["prompt_tokens"][0] > 20
    timing = doc["modes"]["constrained"]["timing"]
    tokens = doc["modes"]["constrained"]["samples"][0]["tokens"]
    assert timing["prefill_ms"]["count"] == 1 and timing["prefill_ms"]["median"] > 0
    assert timing["model_ms"]["count"] == tokens - 1 and timing["mask_ms"]["count"] == tokens
    assert 0 < timing["mask_ms"]["median"] <= timing["mask_ms"]["p90"]
