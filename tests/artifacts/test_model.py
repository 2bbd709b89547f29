"""A real model (SmolLM2-135M-Instruct, GGUF Q4_1) decoding under the mask on the CPU, and on
CUDA where a GPU exists. Slow: CI runs them; deselect locally with ``-m 'not slow'``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
import torch
from typer.testing import CliRunner

import maskc
from maskc.artifacts.model import LoadedModel, load_model, model_cache_dir
from maskc.cli.app import app
from tests.conftest import REPO

pytestmark = pytest.mark.slow

runner = CliRunner()

SAMPLES = REPO / "sample_schemas"
# the bounded sample schemas (every string and array has a maximum): auto budgets are proofs
CHECKED = ["tool_call_get_weather", "support_ticket_triage", "user_profile"]
SMALL = {"type": "object", "properties": {"ok": {"type": "boolean"},
                                          "n": {"type": "integer", "minimum": 0, "maximum": 99}},
         "required": ["ok", "n"]}


@pytest.fixture
def shared_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Dequantized weights next to the test assets, shared by workers and runs (artifacts
    stay in each test's own cache)."""
    root = REPO / "tests" / ".assets" / "models"
    monkeypatch.setenv("MASKC_MODEL_CACHE_DIR", str(root))
    yield root


@pytest.fixture
def smol(smollm2_path: Path, shared_cache: Path) -> LoadedModel:
    return load_model(str(smollm2_path), device="cpu")


def _check(schema: Path, model: Path, *args: str) -> tuple[int, dict]:
    r = runner.invoke(app, ["check", str(schema), "--model", str(model), "--json", *args])
    assert "Traceback" not in r.output, r.output
    return r.exit_code, json.loads(r.stdout)


def test_gguf_is_dequantized_once_and_cached_losslessly(smollm2_path: Path, shared_cache: Path) -> None:
    import transformers

    first = load_model(str(smollm2_path), device="cpu")
    folder = model_cache_dir(smollm2_path)
    assert (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file()
    second = load_model(str(smollm2_path), device="cpu")
    assert second.source == "gguf (cache hit)"
    assert second.vocab.fingerprint == maskc.load_tokenizer(str(smollm2_path)).fingerprint
    assert second.eos_ids == (second.vocab.token_id("<|im_end|>"),)
    direct = transformers.AutoModelForCausalLM.from_pretrained(
        str(smollm2_path.parent), gguf_file=smollm2_path.name, dtype=torch.float32).eval()
    ids = torch.tensor([second.chat_prompt("Name a colour.")])
    with torch.inference_mode():
        cached_logits = second.model(input_ids=ids).logits
        direct_logits = direct(input_ids=ids).logits
    assert torch.equal(cached_logits, direct_logits)
    assert first.width == second.width == 49152


@pytest.mark.parametrize("name", CHECKED)
def test_check_sample_schema_on_cpu(name: str, smollm2_path: Path, shared_cache: Path) -> None:
    schema = json.loads((SAMPLES / f"{name}.json").read_text())
    code, doc = _check(SAMPLES / f"{name}.json", smollm2_path, "--samples", "2", "--device", "cpu",
                       "--baseline-max-tokens", "160")
    assert code == 0, doc
    assert doc["passed"] and doc["eos_reachability"]["proved"]
    assert doc["budget"]["reason"].startswith("worst case")
    budget = doc["budget"]["max_tokens"]
    c = doc["modes"]["constrained"]
    assert c["outputs"] == 2 and c["finish"] == {"eos": 2}
    for s in c["samples"]:
        assert s["tokens"] <= budget
        jsonschema.validate(json.loads(s["text"]), schema)  # independent of maskc's judge
    u = doc["modes"]["unconstrained"]
    assert u["outputs"] == 2 and 0.0 <= u["failure_rate"] <= 1.0
    assert u["failures"] == sum(not (x["finish"] == "eos" and x["valid"]) for x in u["samples"])
    assert c["mask_ms_per_step"] > 0 and c["tokens_per_second"] > 0


def test_check_recursive_sample_schema_ends_every_output(smollm2_path: Path, shared_cache: Path) -> None:
    """A recursive $ref (a pushdown artifact) near a small nesting bound: EOS every time."""
    path = SAMPLES / "comment_thread.json"
    schema = json.loads(path.read_text())
    code, doc = _check(path, smollm2_path, "--samples", "2", "--device", "cpu", "--max-depth", "3",
                       "--max-tokens", "400", "--baseline-max-tokens", "40")
    assert code == 0, doc
    assert doc["eos_reachability"]["proved"]
    c = doc["modes"]["constrained"]
    assert c["outputs"] == 2 and c["finish"] == {"eos": 2}
    for s in c["samples"]:
        value = json.loads(s["text"])
        jsonschema.validate(value, schema)  # independent of maskc's judge

        def depth(v: dict) -> int:
            return 1 + max((depth(r) for r in v.get("replies", [])), default=0)

        assert depth(value) <= 3


def test_adversarial_check_is_bounded_by_the_worst_case(smollm2_path: Path, shared_cache: Path,
                                                         tmp_path: Path) -> None:
    path = tmp_path / "small.json"
    path.write_text(json.dumps(SMALL))
    code, doc = _check(path, smollm2_path, "--samples", "1", "--no-baseline", "--adversarial",
                       "--device", "cpu")
    assert code == 0
    adv = doc["modes"]["adversarial"]
    assert adv["finish"] == {"eos": 1}
    assert adv["tokens_max"] == doc["budget"]["max_tokens"] == len('{"ok":false,"n":99}') + 1


def test_adversarial_check_fails_an_unbounded_schema(smollm2_path: Path, shared_cache: Path,
                                                      tmp_path: Path) -> None:
    path = tmp_path / "free.json"
    path.write_text(json.dumps({"type": "object", "properties": {"note": {"type": "string"}},
                                "required": ["note"]}))
    code, doc = _check(path, smollm2_path, "--samples", "1", "--no-baseline", "--adversarial",
                       "--max-tokens", "48", "--device", "cpu", "--temperature", "0")
    assert code == 1
    assert doc["budget"]["worst_case_bytes"] is None and doc["budget"]["loop"]
    assert doc["modes"]["adversarial"]["finish"] == {"length": 1}


def test_trace_with_the_model(smollm2_path: Path, shared_cache: Path) -> None:
    r = runner.invoke(app, ["trace", str(SAMPLES / "tool_call_get_weather.json"), "--model", str(smollm2_path),
                            "--device", "cpu", "--format", "json", "--top", "3"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["finish"] == "eos"
    steps = doc["steps"]
    assert steps[-1]["picked"]["token"] == "<|im_end|>"
    assert all(s["allowed"] >= 1 and len(s["top"]) <= 3 for s in steps)
    assert all(s["picked"]["id"] in [c["id"] for c in s["top"]] for s in steps)  # greedy: the best allowed
    value = json.loads(doc["output"])
    jsonschema.validate(value, json.loads((SAMPLES / "tool_call_get_weather.json").read_text()))


def test_logits_processor_with_generate(smol: LoadedModel) -> None:
    schema = json.loads((SAMPLES / "sentiment_classification.json").read_text())
    art = maskc.compile_json_schema(schema, smol.vocab)
    proc = maskc.LogitsProcessor(art)
    prompt = torch.tensor([smol.chat_prompt("Classify: 'I love this phone.' Reply in JSON.")] * 2)
    torch.manual_seed(0)  # sampled: the schema's number fraction is unbounded, an unlucky draw runs long
    out = smol.model.generate(prompt, attention_mask=torch.ones_like(prompt), logits_processor=[proc],
                              max_new_tokens=120, do_sample=True, temperature=0.8,
                              pad_token_id=smol.eos_ids[0])
    for row in out[:, prompt.shape[1]:].tolist():
        body = [t for t in row if t not in smol.eos_ids]
        assert len(body) < len(row), "generation must end with EOS"
        jsonschema.validate(json.loads(smol.vocab.decode(body)), schema)
    assert not any(proc.failed)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_check_and_logits_processor_on_cuda(smollm2_path: Path, shared_cache: Path) -> None:
    lm = load_model(str(smollm2_path), device="cuda")
    assert lm.device.type == "cuda" and lm.dtype in (torch.bfloat16, torch.float16)
    schema = json.loads((SAMPLES / "tool_call_get_weather.json").read_text())
    art = maskc.compile_json_schema(schema, lm.vocab)
    proc = maskc.LogitsProcessor(art)
    prompt = torch.tensor([lm.chat_prompt("Weather in Paris? JSON only.")] * 4, device="cuda")
    out = lm.model.generate(prompt, attention_mask=torch.ones_like(prompt), logits_processor=[proc],
                            max_new_tokens=200, do_sample=True, pad_token_id=lm.eos_ids[0])
    for row in out[:, prompt.shape[1]:].tolist():
        body = [t for t in row if t not in lm.eos_ids]
        jsonschema.validate(json.loads(lm.vocab.decode(body)), schema)
    code, doc = _check(SAMPLES / "tool_call_get_weather.json", smollm2_path, "--samples", "8",
                       "--device", "cuda", "--adversarial")
    assert code == 0 and doc["model"]["device"].startswith("cuda")
    assert doc["modes"]["constrained"]["finish"] == {"eos": 8}


def test_check_refuses_an_artifact_built_for_another_tokenizer(smollm2_path: Path, shared_cache: Path,
                                                                tmp_path: Path, deepseek: maskc.Vocabulary) -> None:
    path = maskc.compile_json_schema(SMALL, deepseek).save(tmp_path / "small.safetensors")
    r = runner.invoke(app, ["check", str(path), "--model", str(smollm2_path), "--device", "cpu"])
    assert r.exit_code == 2
    assert "recompile" in r.output and "Traceback" not in r.output


def test_dropping_finished_rows_keeps_greedy_outputs(smol: LoadedModel) -> None:
    from maskc.artifacts.check import default_prompt
    from maskc.artifacts.decode import decode

    art = maskc.compile_json_schema(json.loads((SAMPLES / "tool_call_get_weather.json").read_text()), smol.vocab)
    prompts = [smol.chat_prompt(default_prompt(art, p)) for p in ("Weather in Oslo?", "Lisbon, in fahrenheit", "x")]

    class Plain:  # the same model without ``select``: every row stays to the end
        def __init__(self) -> None:
            self.inner = smol.source_for()
            self.width = self.inner.width

        def start(self, p: list[list[int]]) -> torch.Tensor:
            return self.inner.start(p)

        def step(self, t: torch.Tensor) -> torch.Tensor:
            return self.inner.step(t)

    runs = [decode(src, prompts, artifact=art, eos_ids=smol.eos_ids, token_bytes=smol.vocab.token_bytes,
                   max_tokens=80) for src in (smol.source_for(), Plain())]
    assert [o.tokens for o in runs[0].outputs] == [o.tokens for o in runs[1].outputs]
    assert len({o.num_tokens for o in runs[0].outputs}) > 1  # rows really finished at different steps
