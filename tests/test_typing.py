"""``mypy --strict`` over the whole package, as installed (one import name, four roots)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_mypy_strict(tmp_path: Path) -> None:
    if shutil.which("mypy") is None and subprocess.run([sys.executable, "-m", "mypy", "--version"], capture_output=True).returncode:
        pytest.skip("mypy is not installed")
    # mypy cannot follow setuptools' package-dir mapping: lay the package out as installed.
    pkg = tmp_path / "maskc"
    shutil.copytree(REPO / "maskc", pkg)
    for sub in ("compiler", "artifacts", "cli"):
        (pkg / sub).symlink_to(REPO / sub, target_is_directory=True)
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--ignore-missing-imports", "--no-incremental", "-p", "maskc"],
        cwd=tmp_path, capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stdout[-4000:]


def test_layering_compiler_and_loader_import_without_torch_typer_rich() -> None:
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('torch', 'typer', 'rich', 'transformers'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import maskc\n"
        "from maskc.compiler.vocab import byte_tokenizer\n"
        "art = maskc.compile_json_schema({'type': 'boolean'}, byte_tokenizer())\n"
        "m = art.matcher(); assert m.accept_token(ord('t'))\n"
        "from maskc.artifacts.analysis import eos_reachability, worst_case_length\n"
        "assert worst_case_length(art.dfa).max_bytes == 5\n"
        "assert eos_reachability(art, byte_tokenizer()).proved\n"
        "from maskc.artifacts.trace import trace_text\n"
        "assert trace_text(art, byte_tokenizer(), 'true').finish == 'eos'\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
