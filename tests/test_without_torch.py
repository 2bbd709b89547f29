"""The main job needs no torch: ``pip install -e .`` (no extras) compiles, inspects and traces.

One subprocess with torch and transformers blocked at import runs the commands the README's
quick start and trace examples use; the ones that decode (``check``, ``trace --model`` /
``--logits``) must fail as a user's mistake (exit 2) naming the extra to install, not with an
internal error.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

BLOCK = (
    "import sys\n"
    "class Block:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] in ('torch', 'transformers', 'accelerate'):\n"
    "            raise ImportError('blocked: ' + name)\n"
    "sys.meta_path.insert(0, Block())\n"
)

RUN = BLOCK + (
    "import json\n"
    "from typer.testing import CliRunner\n"
    "from maskc.cli.app import app\n"
    "runs = json.loads(sys.argv[1])\n"
    "out = []\n"
    "for args in runs:\n"
    "    r = CliRunner().invoke(app, args)\n"
    "    out.append({'args': args, 'code': r.exit_code, 'output': r.output,\n"
    "                'exc': None if r.exception is None or isinstance(r.exception, SystemExit) else repr(r.exception)})\n"
    "out.append({'loaded': sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers'))})\n"
    "print(json.dumps(out))\n"
)

VOCAB = str(REPO / "tests" / "golden" / "teaching_vocab.json")
LOGITS = str(REPO / "tests" / "golden" / "teaching_logits.json")
REGEX = '\\{"[ab]":[12]\\}'
WEATHER = str(REPO / "sample_schemas" / "tool_call_get_weather.json")


def _run(runs: list[list[str]], cwd: Path) -> tuple[list[dict[str, Any]], list[str]]:
    proc = subprocess.run([sys.executable, "-c", RUN, json.dumps(runs)], cwd=cwd, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    *results, last = json.loads(proc.stdout.strip().splitlines()[-1])
    return results, last["loaded"]


def test_compile_inspect_and_trace_text_need_no_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASKC_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "out"
    runs = [
        ["compile", WEATHER, "-o", str(out)],  # the default tokenizer, as in the quick start
        ["compile", "--regex", REGEX, "-t", VOCAB, "-o", str(out / "regex")],
        ["trace", "--regex", REGEX, "-t", VOCAB, "--text", '{"a":1}'],
        ["trace", WEATHER, "--text", '{"location":"Paris"}'],
    ]
    results, loaded = _run(runs, tmp_path)
    for r in results:
        assert (r["code"], r["exc"]) == (0, None), r
    artifacts = sorted(out.rglob("*.safetensors"))
    assert len(artifacts) == 2
    inspected, loaded_after = _run([["inspect", str(a)] for a in artifacts], tmp_path)
    for r in inspected:
        assert (r["code"], r["exc"]) == (0, None), r
        assert "states" in r["output"]
    assert loaded == loaded_after == []


@pytest.mark.parametrize(
    ("args", "feature"),
    [
        (["check", WEATHER, "--model", "any-model"], "maskc check"),
        (["trace", "--regex", REGEX, "-t", VOCAB, "--model", "any-model"], "maskc trace --model"),
        (["trace", "--regex", REGEX, "-t", VOCAB, "--logits", LOGITS], "maskc trace --logits"),
    ],
)
def test_decoding_without_torch_names_the_extra(args: list[str], feature: str, tmp_path: Path) -> None:
    (result,), _ = _run([args], tmp_path)
    assert result["code"] == 2 and result["exc"] is None, result
    text = " ".join(result["output"].split())
    assert f"{feature} needs torch" in text
    assert "pip install 'maskc[torch]'" in text
    assert "internal error" not in text and "Traceback" not in text


def test_import_maskc_loads_no_torch(tmp_path: Path) -> None:
    code = BLOCK + (
        "import maskc\n"
        "vocab = maskc.Vocabulary.from_tokens(['a', 'b', '<eos>'], eos='<eos>')\n"
        "m = maskc.compile_regex('ab', vocab).matcher()\n"
        "bitmask = maskc.allocate_bitmask_np(1, vocab.vocab_size)\n"
        "m.fill_next_token_bitmask(bitmask)\n"
        "print(maskc.unpack_bitmask(bitmask[0], vocab.vocab_size).tolist())\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["[True,", "False,", "False]"]


def test_the_torch_helpers_name_the_extra_without_torch() -> None:
    code = BLOCK + (
        "import maskc\n"
        "for call in (lambda: maskc.allocate_token_bitmask(1, 8), lambda: maskc.LogitsProcessor,\n"
        "             lambda: maskc.apply_token_bitmask_inplace(None, None)):\n"
        "    try:\n"
        "        call()\n"
        "    except ModuleNotFoundError as e:\n"
        "        print('refused:', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True).stdout
    lines = out.splitlines()
    assert len(lines) == 3, out
    assert all("maskc[torch]" in line for line in lines), out
    assert "LogitsProcessor needs torch and transformers" in lines[1]
