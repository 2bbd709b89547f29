"""A transformers ``LogitsProcessor`` that applies maskc masks, one matcher per sequence.

It never crashes on model behaviour: a token the grammar rejects (sampled outside the
mask by a caller's own processor, or forced by a prompt), or an id outside the artifact's
vocabulary, marks that sequence as failed and from then on only EOS is allowed for it, so
generation ends cleanly. Misuse raises ``ValueError``: scores narrower than the artifact's
``vocab_size`` (a model whose logits are narrower than the tokenizer the artifact was built
for), or a batch whose size changes in the middle of a generation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from maskc.artifacts.torch import allocate_token_bitmask, apply_token_bitmask_inplace
from maskc.compiler.maskstore import pack_bool

if TYPE_CHECKING:
    from maskc.artifacts.artifact import Artifact
    from maskc.artifacts.matcher import Matcher
    from maskc.artifacts.pushdown import PushdownMatcher

try:
    from transformers import LogitsProcessor as _Base
except ImportError:  # pragma: no cover - transformers is an optional extra
    _Base = object  # type: ignore[misc,assignment]

__all__ = ["MaskcLogitsProcessor"]


class MaskcLogitsProcessor(_Base):
    """Constrain ``model.generate`` to an artifact's grammar.

    Example:
        >>> proc = MaskcLogitsProcessor(artifact)
        >>> model.generate(**inputs, logits_processor=[proc], max_new_tokens=200)
    """

    def __init__(self, artifact: Artifact, *, batch_size: int | None = None) -> None:
        """One matcher per sequence, made on the first call of each generation.

        Args:
            artifact: with its tokenizer attached.
            batch_size: when given, every call must bring exactly this many sequences.
        """
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                       or batch_size < 1):
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        self.artifact = artifact
        self.batch_size = batch_size
        self.matchers: list[Matcher | PushdownMatcher] = []
        self.failed: list[bool] = []
        self.rejected: list[int | None] = []
        self._prompt_len: int | None = None
        self._bitmask: torch.Tensor | None = None
        # the row of a finished or failed sequence: EOS only (built once)
        bits = np.zeros(artifact.vocab_size, dtype=np.bool_)
        bits[list(artifact.eos_token_ids)] = True
        self._eos_row = torch.from_numpy(pack_bool(bits))
        if batch_size:
            self._ensure(batch_size)

    def _ensure(self, batch: int) -> None:
        while len(self.matchers) < batch:
            self.matchers.append(self.artifact.matcher())
            self.failed.append(False)
            self.rejected.append(None)
        if self._bitmask is None or self._bitmask.shape[0] != batch:
            self._bitmask = allocate_token_bitmask(batch, self.artifact.vocab_size)

    def reset(self) -> None:
        self.matchers, self.failed, self.rejected = [], [], []
        self._prompt_len = None

    def _check(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, starting: bool) -> None:
        if input_ids.dim() != 2 or scores.dim() != 2 or input_ids.shape[0] != scores.shape[0]:
            raise ValueError(f"expected input_ids [batch, seq] and scores [batch, vocab] with the same batch, got "
                             f"{list(input_ids.shape)} and {list(scores.shape)}")
        batch, width = scores.shape
        vocab_size = self.artifact.vocab_size
        if width < vocab_size:
            raise ValueError(
                f"scores have {width} columns, narrower than the artifact's vocab_size {vocab_size}: the mask would "
                "be cut (EOS can fall outside, leaving every logit -inf). The artifact was built for a wider "
                "vocabulary than this model's logits: compile with the model's logits width "
                "(tokenizer.with_overrides(vocab_size=...) or `--vocab-size`)")
        if self.batch_size is not None and batch != self.batch_size:
            raise ValueError(f"this processor was made for batch_size {self.batch_size}, got a batch of {batch}")
        if not starting and batch != len(self.matchers):
            raise ValueError(f"the batch changed in the middle of a generation: {len(self.matchers)} sequences "
                             f"were being tracked, got {batch}; call reset() (or use a fresh processor) per "
                             "generate call")

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        seq_len = input_ids.shape[-1]
        starting = self._prompt_len is None or seq_len <= self._prompt_len
        self._check(input_ids, scores, starting)
        batch = scores.shape[0]
        if starting:
            self.reset()
            self._prompt_len = seq_len
        self._ensure(batch)
        assert self._bitmask is not None
        assert self._prompt_len is not None
        new = seq_len - self._prompt_len
        vocab_size = self.artifact.vocab_size
        for i in range(batch):
            m = self.matchers[i]
            if new > 0 and not self.failed[i] and not m.is_terminated():
                tok = int(input_ids[i, -1])
                if m.num_accepted < new and not (0 <= tok < vocab_size and m.accept_token(tok)):
                    self.failed[i] = True
                    self.rejected[i] = tok
            if self.failed[i] or m.is_terminated():
                self._bitmask[i].copy_(self._eos_row)
            else:
                m.fill_next_token_bitmask(self._bitmask, i)
        apply_token_bitmask_inplace(scores, self._bitmask.to(scores.device), vocab_size=vocab_size)
        return scores
