"""Loading a causal LM for ``check`` and ``trace``, and running it as a :class:`LogitsSource`.

A model spec is a Hugging Face model folder (safetensors), a ``.gguf`` file (dequantized by
transformers, then cached as safetensors under the maskc cache so later loads take
seconds), or a hub id where a network exists. Device ``auto`` picks CUDA when present; the
dtype follows the device (float32 on CPU, bfloat16 on GPUs that support it, else float16).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from maskc.artifacts.cache import MODEL_MARKER, model_cache_root
from maskc.compiler.errors import InputError, TokenizerError
from maskc.compiler.tokenizer import load_tokenizer
from maskc.compiler.vocab import Vocabulary

__all__ = ["LoadedModel", "ModelError", "ModelSource", "load_model", "quiet_transformers", "resolve_device"]

log = logging.getLogger("maskc.model")

_MARKER = MODEL_MARKER


class ModelError(InputError):
    """A model spec that cannot be loaded (missing, not a causal LM, no network for a hub id)."""


def resolve_device(device: str) -> torch.device:
    """``auto`` → CUDA when available, else CPU; ``cuda`` without a GPU is an input error."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError("--device cuda was asked for, but torch sees no CUDA device",
                         hint="use --device auto or cpu")
    try:
        return torch.device(device)
    except RuntimeError as e:
        raise ModelError(f"unknown device {device!r}", hint="use auto, cpu or cuda") from e


def _dtype_for(device: torch.device) -> torch.dtype:
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


@dataclass
class LoadedModel:
    """A causal LM, its transformers tokenizer (for chat templates) and its maskc vocabulary."""

    name: str
    model: Any
    hf_tokenizer: Any
    vocab: Vocabulary
    device: torch.device
    dtype: torch.dtype
    source: str  # "folder", "gguf (dequantized, cached)", "gguf (cache hit)", "hub"

    @property
    def width(self) -> int:
        return int(self.model.get_output_embeddings().weight.shape[0])

    @property
    def eos_ids(self) -> tuple[int, ...]:
        ids = set(self.vocab.eos_ids)
        gen = getattr(self.model, "generation_config", None)
        extra = getattr(gen, "eos_token_id", None) if gen is not None else None
        if isinstance(extra, int):
            ids.add(extra)
        elif isinstance(extra, list):
            ids.update(int(i) for i in extra)
        return tuple(sorted(ids))

    def chat_prompt(self, text: str) -> list[int]:
        """Token ids of ``text`` as a user turn (chat template where the model has one)."""
        tok = self.hf_tokenizer
        if getattr(tok, "chat_template", None):
            ids = tok.apply_chat_template([{"role": "user", "content": text}],
                                          add_generation_prompt=True, tokenize=True)
            if hasattr(ids, "keys"):
                ids = ids["input_ids"]
            return [int(i) for i in ids]
        return [int(i) for i in tok(text, add_special_tokens=True)["input_ids"]]

    def source_for(self) -> ModelSource:
        return ModelSource(self)


class ModelSource:
    """Batched next-token logits with a KV cache; prompts are left-padded."""

    def __init__(self, loaded: LoadedModel) -> None:
        self.loaded = loaded
        self.width = loaded.width
        self._past: Any = None
        self._mask: torch.Tensor | None = None
        self._pos: torch.Tensor | None = None
        params = inspect.signature(loaded.model.forward).parameters
        # transformers renamed ``past_key_values`` to ``cache``; speak whichever it takes
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._extra = {"logits_to_keep": 1} if "logits_to_keep" in params else {}

    @staticmethod
    def _cache_of(out: Any) -> Any:
        cache = getattr(out, "cache", None)
        return cache if cache is not None else getattr(out, "past_key_values", None)

    @torch.inference_mode()
    def start(self, prompts: Sequence[Sequence[int]]) -> torch.Tensor:
        dev = self.loaded.device
        pad = self.loaded.eos_ids[0] if self.loaded.eos_ids else 0
        longest = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), longest), pad, dtype=torch.long)
        mask = torch.zeros((len(prompts), longest), dtype=torch.long)
        for i, p in enumerate(prompts):
            if p:
                ids[i, longest - len(p):] = torch.tensor(list(p), dtype=torch.long)
                mask[i, longest - len(p):] = 1
        ids, mask = ids.to(dev), mask.to(dev)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.loaded.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True,
                                **self._extra)
        self._past, self._mask, self._pos = self._cache_of(out), mask, pos[:, -1:]
        logits: torch.Tensor = out.logits[:, -1, :].float()
        return logits

    def select(self, rows: Sequence[int]) -> bool:
        """Keep only these rows of the batch, KV cache included (False if the cache can't)."""
        pick = getattr(self._past, "batch_select_indices", None)
        if pick is None or self._mask is None or self._pos is None:
            return False
        idx = torch.tensor(list(rows), dtype=torch.long, device=self.loaded.device)
        pick(idx)
        self._mask, self._pos = self._mask[idx], self._pos[idx]
        return True

    @torch.inference_mode()
    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        assert self._mask is not None and self._pos is not None
        dev = self.loaded.device
        self._mask = torch.cat([self._mask, torch.ones((self._mask.shape[0], 1), dtype=torch.long, device=dev)], 1)
        self._pos = self._pos + 1
        out = self.loaded.model(input_ids=tokens.view(-1, 1).to(dev), attention_mask=self._mask,
                                position_ids=self._pos, use_cache=True,
                                **{self._cache_kw: self._past}, **self._extra)
        self._past = self._cache_of(out)
        logits: torch.Tensor = out.logits[:, -1, :].float()
        return logits


def _transformers() -> Any:
    try:
        import transformers
    except ImportError as e:  # pragma: no cover - torch extra installs it
        raise ModelError("loading a model needs transformers",
                         hint="pip install 'maskc[torch]'") from e
    return transformers


def quiet_transformers() -> None:
    """Silence transformers' progress bars and warnings (the CLI reports loading itself)."""
    tf = _transformers()
    tf.utils.logging.disable_progress_bar()
    tf.utils.logging.set_verbosity_error()


@contextmanager
def _loading_bars(show: bool) -> Iterator[None]:
    """Let the bars drawn while a model loads through, or silence them for the block.

    transformers converts GGUF tensors under a bare ``tqdm`` that its own progress switch
    does not reach, so its module-level ``tqdm`` is swapped for a disabled one; the hub's
    download bars have a switch of their own.
    """
    if show:
        yield
        return
    try:
        gguf_utils: Any = importlib.import_module("transformers.modeling_gguf_pytorch_utils")
    except ImportError:  # pragma: no cover - a transformers without GGUF support
        gguf_utils = None
    bar = getattr(gguf_utils, "tqdm", None)
    if bar is not None:
        gguf_utils.tqdm = functools.partial(bar, disable=True)
    hub: Any = importlib.import_module("huggingface_hub.utils")
    hub_was_on = not hub.are_progress_bars_disabled()
    if hub_was_on:
        hub.disable_progress_bars()
    try:
        yield
    finally:
        if bar is not None:
            gguf_utils.tqdm = bar
        if hub_was_on:
            hub.enable_progress_bars()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def _gguf_in(folder: Path) -> Path | None:
    if (folder / "config.json").exists():
        return None
    ggufs = sorted(folder.glob("*.gguf"))
    return ggufs[0] if len(ggufs) == 1 else None


def model_cache_dir(gguf: Path) -> Path:
    """Where the dequantized copy of a GGUF file lives, keyed by the file's sha256:
    ``$MASKC_MODEL_CACHE_DIR``, else ``models/`` under the artifact cache."""
    return _cache_folder(gguf, _sha256(gguf))


def _cache_folder(gguf: Path, digest: str) -> Path:
    return model_cache_root() / f"{digest[:24]}-{gguf.stem}"


def _dequantize(gguf: Path, dest: Path, digest: str, *, progress: bool = False) -> None:
    """Load a GGUF file through transformers and save its weights as safetensors in ``dest``."""
    tf = _transformers()
    from safetensors.torch import save_model

    try:
        with _loading_bars(progress):
            model = tf.AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                                            dtype=torch.float32)
            tok = tf.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    except ImportError as e:
        raise ModelError(f"reading {gguf.name} needs a package that is missing: {e}",
                         hint="pip install gguf accelerate") from e
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        raise ModelError(f"cannot load {gguf} as a causal LM: {e}") from e
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=dest.parent))
    try:
        # the weights are plain tensors now; drop the quantization note so they load as such
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        save_model(model, str(tmp / "model.safetensors"))
        model.config.save_pretrained(tmp)
        model.generation_config.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / _MARKER).write_text(json.dumps({"gguf": gguf.name, "sha256": digest}))
        if (dest / _MARKER).exists():  # another process finished first: keep its copy
            return
        if dest.exists():  # a partial copy from a crash
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    except OSError as e:
        log.warning("could not cache the dequantized model in %s: %s", dest, e)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load_model(spec: str, *, device: str = "auto", tokenizer: Vocabulary | None = None,
               progress: bool = False) -> LoadedModel:
    """Load a causal LM by spec; see the module docstring for the forms a spec takes.

    Args:
        spec: Model folder, ``.gguf`` file (or a folder holding exactly one and no
            config.json), or hub id.
        device: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
        tokenizer: The maskc vocabulary to use; default: loaded from ``spec`` itself.
        progress: Let the GGUF dequantization and hub download bars draw on stderr (the
            CLI asks for them only for a human on a terminal).

    Raises:
        ModelError: The spec cannot be loaded.
    """
    tf = _transformers()
    dev = resolve_device(device)
    dtype = _dtype_for(dev)
    path = Path(spec).expanduser()
    gguf = path if path.is_file() and path.suffix == ".gguf" else _gguf_in(path) if path.is_dir() else None
    if not path.exists() and (spec.endswith((".gguf", ".safetensors")) or spec.startswith((".", "/", "~"))
                              or spec.count("/") != 1):
        raise ModelError(f"no such model file or folder: {spec}",
                         hint="pass a Hugging Face model folder, a .gguf file or a hub id org/name")
    if path.exists() and gguf is None and not path.is_dir():
        raise ModelError(f"{spec} is neither a model folder nor a .gguf file",
                         hint="pass a Hugging Face model folder, a .gguf file or a hub id")
    kwargs: dict[str, Any]
    if gguf is not None:
        digest = _sha256(gguf)
        folder = _cache_folder(gguf, digest)
        how = "gguf (cache hit)"
        if not (folder / _MARKER).exists():
            _dequantize(gguf, folder, digest, progress=progress)
            how = "gguf (dequantized, cached)"
        if not (folder / _MARKER).exists():  # cache not writable: load straight from the file
            load_from, kwargs = str(gguf.parent), {"gguf_file": gguf.name}
            how = "gguf (dequantized, not cached)"
        else:
            load_from, kwargs = str(folder), {}
    elif path.is_dir():
        load_from, kwargs, how = str(path), {"local_files_only": True}, "folder"
    else:
        load_from, kwargs, how = spec, {}, "hub"
    try:
        with _loading_bars(progress):
            model = tf.AutoModelForCausalLM.from_pretrained(load_from, dtype=dtype, **kwargs)
            hf_tok = tf.AutoTokenizer.from_pretrained(load_from, **kwargs)
    except (OSError, ValueError, KeyError) as e:
        hint = ("a hub id needs a network and huggingface access" if how == "hub"
                else "the folder needs config.json, weights and a tokenizer")
        raise ModelError(f"cannot load model {spec}: {str(e).splitlines()[0] if str(e) else e}", hint=hint) from e
    model.to(dev)
    model.eval()
    try:
        vocab = tokenizer if tokenizer is not None else load_tokenizer(str(gguf) if gguf else load_from)
    except TokenizerError as e:
        raise ModelError(f"cannot read the tokenizer of {spec}: {e.message}", hint=e.hint) from e
    return LoadedModel(Path(spec).name or spec, model, hf_tok, vocab, dev, dtype, how)
