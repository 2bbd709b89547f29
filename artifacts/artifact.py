"""The :class:`Artifact`: a compiled grammar's tables plus its self-describing metadata.

Built from a :class:`~maskc.compiler.pipeline.CompiledGrammar` at compile time or read
back from a file; either way it verifies its tables once and then hands out matchers.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from maskc.artifacts import format as fmt
from maskc.artifacts.bitmask import write_ids
from maskc.artifacts.contexts import ContextTable, build_contexts
from maskc.artifacts.io import (map_artifact_file, parse_artifact_bytes, remember_verified, save_bytes, verified_file,
                                write_atomic)
from maskc.artifacts.metadata import parse_metadata
from maskc.compiler.counters import Counters
from maskc.compiler.dfa import Dfa
from maskc.compiler.errors import ArtifactCorrupt, TokenizerMismatch
from maskc.compiler.maskstore import KIND_ALLOW, KIND_DELTA, KIND_DENSE, MaskStore, bitmask_words
from maskc.compiler.pda import Pda
from maskc.compiler.pipeline import CompiledGrammar
from maskc.compiler.vocab import Vocabulary

__all__ = ["Artifact", "Tables", "load_artifact", "verify_tables", "COMPILER_VERSION"]

COMPILER_VERSION = fmt.COMPILER_VERSION
ROW_CACHE_LIMIT = 4096  # decoded rows kept per artifact (16 KiB each for a 128k vocabulary)
PLAN_CACHE_LIMIT = 1 << 16  # states whose fill plan is kept
_ONE = np.uint32(1)
_SCATTER_MAX = 256
_SMALL = 16
_SCALAR_FLIPS = 24


@dataclass(frozen=True, slots=True)
class Tables:
    """What verifying an artifact's tensors and metadata yields: typed metadata and the
    immutable tables a matcher runs on (shared by every load of one unchanged file)."""

    vocab_size: int
    eos_token_ids: tuple[int, ...]
    options: dict[str, Any]
    not_enforced: list[dict[str, str]]
    dfa: Dfa
    state_mask: NDArray[np.int32]
    masks: MaskStore
    pda: Pda | None
    uncertain_mask: NDArray[np.int32] | None
    flat_mask: NDArray[np.int32] | None
    inline_depth: int
    contexts: ContextTable | None = None


def verify_tables(tensors: dict[str, NDArray[Any]], metadata: dict[str, str], where: str) -> Tables:
    """Check the header, the content hash and every table; the typed result.

    Raises:
        ArtifactCorrupt: tampered, truncated or inconsistent. ArtifactVersionMismatch:
        another format version.
    """
    fmt.check_metadata(metadata, where)
    check = _ContentCheck(tensors, metadata)
    try:
        tables = _typed_tables(tensors, metadata, where)
    except Exception as e:
        check.verify(where, cause=e)  # a damaged file says so first, whatever table broke
        raise
    except BaseException:
        check.wait()
        raise
    check.verify(where)
    return tables


_SPARSE_TABLE_BYTES = 4 << 20
"""From this many bytes of dense transition table on, a load keeps the table as stored (each
row's default target and exceptions) and a matcher converts the rows it visits. Decoding
costs about 1 ms per 4 MiB (3 to 5 ms for 115,458 states x 53 classes), and a row converted
from the stored form 0.25 us more than from the dense table: below this size a decode is
cheaper than the extra cost of the rows a typical decode visits."""

_PARALLEL_HASH_BYTES = 1 << 20
"""From this many bytes of tensors, the content hash runs on other threads while the
tables are checked (hashlib and numpy's copies release the GIL): a multi-megabyte artifact
loads in about the longer of the two instead of their sum. From format version 5 on, the
hash's pieces are shared by up to :data:`_HASH_THREADS` threads."""

_HASH_THREADS = min(4, os.cpu_count() or 1)


class _ContentCheck:
    """The sha256 of an artifact's content, computed at once for a small artifact and on
    helper threads beside the table checks for a large one (the caller's thread takes the
    pieces left when it comes to :meth:`verify`); :meth:`verify` raises on a mismatch. Tables
    decoded from a file that fails its check are dropped: nothing reaches a caller before the
    hash matched."""

    def __init__(self, tensors: dict[str, NDArray[Any]], metadata: dict[str, str]) -> None:
        self._expected = metadata["content_sha256"]
        self._digest: str | None = None
        self._hasher: fmt.ContentHasher | None = None
        self._error: BaseException | None = None
        if sum(a.nbytes for a in tensors.values()) < _PARALLEL_HASH_BYTES:
            self._digest = fmt.content_hash(tensors, metadata)
        else:
            self._hasher = fmt.ContentHasher(tensors, metadata, max(2, _HASH_THREADS))
            self._hasher.start()

    def wait(self) -> None:
        """Finish the hash (every helper joined); an error it raised is kept for :meth:`verify`."""
        if self._hasher is not None:
            hasher, self._hasher = self._hasher, None
            try:
                self._digest = hasher.finish()
            except BaseException as e:
                self._error = e

    def verify(self, where: str, cause: BaseException | None = None) -> None:
        self.wait()
        if self._error is not None:
            raise self._error
        if self._digest != self._expected:
            raise ArtifactCorrupt(
                f"{where} failed its content check: the tables or metadata were modified or damaged") from cause


def _typed_tables(tensors: dict[str, NDArray[Any]], metadata: dict[str, str], where: str) -> Tables:
    """Every table of a header already checked, validated and typed (the content hash aside)."""
    info = parse_metadata(metadata, where)
    vocab_size = info.vocab_size
    counted = metadata["format_version"] in fmt.COUNTED_VERSIONS
    nested = metadata["format_version"] == fmt.NESTED_FORMAT_VERSION
    trans = fmt.check_tables(tensors, vocab_size, where, counted, nested)
    if (info.num_states is not None and info.num_states != trans.num_states) or (
        info.num_masks is not None and info.num_masks != tensors["mask.kind"].shape[0]
    ):
        raise ArtifactCorrupt(f"{where}: num_states or num_masks differs from the tables")
    if ("pda.call_offsets" in tensors) != (info.rule_names is not None):
        raise ArtifactCorrupt(f"{where}: pushdown tables and pushdown metadata must come together")
    counters: Counters | None = None
    if counted:
        try:
            counters = Counters(np.array(tensors["count.region"], dtype=np.int32),
                                np.array(tensors["count.exit"], dtype=np.int32),
                                np.array(tensors["count.span"], dtype=np.int32),
                                np.array(tensors[fmt.NEST_TENSOR], dtype=np.int32) if nested else None)
        except ValueError as e:
            raise ArtifactCorrupt(f"{where} has malformed counted loops") from e
    # check_tables kept every target in [-1, states). A large table stays as stored: a matcher
    # converts the rows it visits, and the dense table is built only for whoever asks for it.
    large = trans.num_states * trans.num_classes * 4 >= _SPARSE_TABLE_BYTES
    dfa = Dfa(
        None if large else trans.decode(),
        np.array(tensors["dfa.byte_class"], dtype=np.uint8),
        np.asarray(tensors["dfa.accepting"]).astype(np.bool_),
        counters,
        targets_checked=True,
        sparse=trans if large else None,
    )
    masks = MaskStore(
        vocab_size,
        np.asarray(tensors["mask.kind"], dtype=np.uint8),
        np.asarray(tensors["mask.offsets"], dtype=np.int64),
        np.asarray(tensors["mask.data"], dtype=np.int32),
        checked=True,
    )
    pda: Pda | None = None
    uncertain: NDArray[np.int32] | None = None
    flat: NDArray[np.int32] | None = None
    inline_depth = 0
    if info.rule_names is not None:
        if len(info.rule_names) != tensors["pda.rule_start"].shape[0]:
            raise ArtifactCorrupt(f"{where}: rule_names does not name every rule of the pushdown tables")
        try:
            inline_depth = int(info.inline_depth or 0)
            pda = Pda(
                dfa,
                np.asarray(tensors["pda.call_offsets"], dtype=np.int64),
                np.asarray(tensors["pda.call_rule"], dtype=np.int32),
                np.asarray(tensors["pda.call_return"], dtype=np.int32),
                np.asarray(tensors["pda.rule_start"], dtype=np.int32),
                np.asarray(tensors["pda.need"], dtype=np.int32),
                info.rule_names,
                checked=True,
            )
        except (ValueError, TypeError) as e:
            raise ArtifactCorrupt(f"{where} has malformed pushdown tables") from e
        uncertain = np.asarray(tensors["mask.uncertain"], dtype=np.int32)
        flat = np.asarray(tensors["mask.flat"], dtype=np.int32)
    contexts = ContextTable.from_tensors(tensors) if "ctx.state" in tensors else None
    return Tables(vocab_size, info.eos_token_ids, info.options, info.not_enforced, dfa,
                  np.asarray(tensors["mask.state"], dtype=np.int32), masks, pda, uncertain, flat, inline_depth,
                  contexts)


class Artifact:
    """Token masks for one (grammar, tokenizer, options), ready to drive a :class:`Matcher`."""

    def __init__(self, tensors: dict[str, NDArray[Any]], metadata: dict[str, str], *, where: str = "artifact",
                 tables: Tables | None = None) -> None:
        t = tables if tables is not None else verify_tables(tensors, metadata, where)
        self.tensors = tensors
        self.metadata = dict(metadata)
        self.vocab_size = t.vocab_size
        self.eos_token_ids: tuple[int, ...] = t.eos_token_ids
        self.not_enforced: list[dict[str, str]] = [dict(n) for n in t.not_enforced]
        self.options: dict[str, Any] = {k: dict(v) if isinstance(v, dict) else v for k, v in t.options.items()}
        self.dfa = t.dfa
        self.state_mask = t.state_mask
        self.masks = t.masks
        self.pda: Pda | None = t.pda
        self.uncertain_mask: NDArray[np.int32] | None = t.uncertain_mask
        self.flat_mask: NDArray[np.int32] | None = t.flat_mask
        self.inline_depth = t.inline_depth
        self.contexts: ContextTable | None = t.contexts
        self.max_depth = int(self.options["max_depth"])
        self._runtime: Any = None
        self._rows: dict[int, NDArray[np.int32]] = {}  # mask id -> decoded row
        self._state_rows: dict[int, NDArray[np.int32]] = {}  # state -> its mask's row
        self._full: NDArray[np.uint32] | None = None
        self._plans: dict[int, NDArray[np.int32] | list[int]] = {}  # state -> fill_plan
        self._mask_plans: dict[int, NDArray[np.int32] | list[int]] = {}  # mask -> fill_plan
        self._torch_rows: dict[tuple[int, str], Any] = {}
        self._step_cache: dict[tuple[int, int], int] = {}
        self._forced: dict[int, bytes] = {}
        self._counted_room: list[int] | None = None  # CountingMatcher: per state, the count a token may exit at
        self._counted_step_cache: dict[tuple[int, int], tuple[int, int, bool]] = {}
        self._nested_chains: list[tuple[int, ...]] = []  # NestedCountingMatcher: per loop, its loops
        self._nested_spans: list[tuple[int, ...]] | None = None  # per state, the spans of its loops
        self._nested_step_cache: dict[tuple[int, int], tuple[int, tuple[int, ...], int]] = {}
        self.tokenizer: Vocabulary | None = None
        self.cache_hit = False
        self.cache_path: Path | None = None
        self.compile_ms = 0.0
        self.timings: dict[str, float] = {}

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def from_compiled(cls, g: CompiledGrammar, vocab: Vocabulary) -> Artifact:
        tensors: dict[str, NDArray[Any]] = {
            **fmt.encode_trans(g.dfa.trans.astype(np.int32)),
            "dfa.byte_class": g.dfa.byte_class.astype(np.uint8),
            "dfa.accepting": g.dfa.accepting.astype(np.uint8),
            "mask.state": g.state_mask.astype(np.int32),
            "mask.kind": g.masks.kinds.astype(np.uint8),
            "mask.offsets": g.masks.offsets.astype(np.int64),
            "mask.data": g.masks.data.astype(np.int32),
        }
        extra: dict[str, str] = {}
        version = fmt.FORMAT_VERSION
        if g.dfa.counters is not None:
            c = g.dfa.counters
            tensors.update({"count.region": c.region.astype(np.int32), "count.exit": c.exit.astype(np.int32),
                            "count.span": c.span.astype(np.int32)})
            version = fmt.COUNTED_FORMAT_VERSION
            if c.nested:
                assert c.parent is not None
                tensors[fmt.NEST_TENSOR] = c.parent.astype(np.int32)
                version = fmt.NESTED_FORMAT_VERSION
        if g.pda is not None and g.uncertain_mask is not None:
            p = g.pda
            tensors.update({
                "pda.call_offsets": p.call_offsets.astype(np.int64),
                "pda.call_rule": p.call_rule.astype(np.int32),
                "pda.call_return": p.call_return.astype(np.int32),
                "pda.rule_start": p.rule_start.astype(np.int32),
                "pda.need": p.need.astype(np.int32),
                "mask.uncertain": g.uncertain_mask.astype(np.int32),
                "mask.flat": (g.flat_mask if g.flat_mask is not None else g.state_mask).astype(np.int32),
            })
            extra = {"rule_names": fmt.canonical_json(list(p.rule_names)), "inline_depth": str(g.inline_depth),
                     "max_depth": str(g.options.max_depth)}
        meta = {
            "format": fmt.FORMAT,
            "format_version": version,
            "compiler_version": COMPILER_VERSION,
            "grammar_kind": g.kind,
            "grammar_sha256": g.source_sha256,
            "grammar_source": g.source,
            "options": g.options.canonical_json(),
            "tokenizer_sha256": vocab.fingerprint,
            "tokenizer_name": vocab.name,
            "vocab_size": str(vocab.vocab_size),
            "eos_token_ids": fmt.canonical_json(list(vocab.eos_ids)),
            "not_enforced": fmt.canonical_json(g.not_enforced),
            "num_states": str(g.dfa.num_states),
            "num_masks": str(g.masks.num_masks),
            **extra,
        }
        meta["content_sha256"] = fmt.content_hash(tensors, meta)
        art = cls(tensors, meta)
        art.tokenizer = vocab
        if art.pda is not None:
            t0 = time.perf_counter()
            built = build_contexts(art)
            if built is not None:
                store, table = built
                tensors.update({"mask.kind": store.kinds.astype(np.uint8), "mask.offsets": store.offsets.astype(np.int64),
                                "mask.data": store.data.astype(np.int32), **table.tensors()})
                meta["num_masks"] = str(store.num_masks)
                meta["content_sha256"] = fmt.content_hash(tensors, meta)
                art = cls(tensors, meta)
                art.tokenizer = vocab
            g.timings["context_ms"] = (time.perf_counter() - t0) * 1e3
        return art

    @classmethod
    def from_bytes(cls, raw: bytes, *, where: str = "artifact") -> Artifact:
        tensors, meta = parse_artifact_bytes(raw, where)
        return cls(tensors, meta, where=where)

    # -- output -----------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        return save_bytes(self.tensors, self.metadata)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the artifact atomically (temporary file, then rename)."""
        return write_atomic(path, self.to_bytes())

    def __repr__(self) -> str:
        meta = self.metadata
        kind = "pushdown" if self.pda is not None else "dfa"
        depth = f" max_depth={self.max_depth}" if self.pda is not None else ""
        attached = "" if self.tokenizer is not None else " (no tokenizer attached)"
        return (f"<Artifact {meta.get('grammar_kind', '?')} sha256={meta.get('grammar_sha256', '?')[:12]} "
                f"tokenizer={meta.get('tokenizer_name', '?')[:40]!r} vocab_size={self.vocab_size} {kind} "
                f"states={self.num_states} masks={self.num_masks}{depth}{attached}>")

    # -- facts ------------------------------------------------------------------------------

    @property
    def grammar_kind(self) -> str:
        return self.metadata["grammar_kind"]

    @property
    def tokenizer_sha256(self) -> str:
        return self.metadata["tokenizer_sha256"]

    @property
    def content_key(self) -> str:
        """The content address: sha256 of grammar, tokenizer, options, format and compiler
        versions (the cache key; its first characters name the artifact file)."""
        m = self.metadata
        return fmt.content_address(m["grammar_sha256"], m["tokenizer_sha256"], m["options"], m["compiler_version"])

    @property
    def num_states(self) -> int:
        return self.dfa.num_states

    @property
    def num_masks(self) -> int:
        return self.masks.num_masks

    @cached_property
    def nbytes(self) -> int:
        return sum(int(np.asarray(t).nbytes) for t in self.tensors.values())

    def verify_tokenizer(self, vocab: Vocabulary) -> None:
        """Raise :class:`TokenizerMismatch` unless ``vocab`` is the tokenizer this was built for."""
        if vocab.fingerprint != self.tokenizer_sha256:
            raise TokenizerMismatch(
                expected_name=self.metadata["tokenizer_name"],
                expected_sha=self.tokenizer_sha256,
                got_name=vocab.name,
                got_sha=vocab.fingerprint,
            )

    def mask_row(self, state: int) -> NDArray[np.int32]:
        """The int32 bitmask row of ``state`` (read-only; decoded on first use, then cached)."""
        row = self._state_rows.get(state)
        if row is None:
            row = self.mask_row_of(int(self.state_mask[state]))
            self._state_rows[state] = row
        return row

    def fill_plan(self, state: int) -> NDArray[np.int32] | list[int]:
        """What writing the row of ``state`` takes, cached per state and per mask: the token
        ids of its mask when that is a short allow list (a list), else its row.

        Most masks allow a few tokens: writing them is a clear and a bit set per token into
        the caller's bitmask (:func:`write_ids`), and no 16 KiB row (for a 128k vocabulary)
        is decoded or kept. The ids are read from the store as they are: a first visit does
        no more than that.
        """
        plan = self._plans.get(state)
        if plan is None:
            m = self.state_mask.item(state)
            plan = self._mask_plans.get(m)
            if plan is None:
                masks = self.masks
                a, b = masks.offsets.item(m), masks.offsets.item(m + 1)
                if b - a <= _SMALL and masks.kinds.item(m) == KIND_ALLOW:
                    plan = masks.data[a:b].tolist()
                else:
                    plan = self.mask_row_of(m)
                self._mask_plans[m] = plan
            if len(self._plans) >= PLAN_CACHE_LIMIT:
                self._plans.clear()
            self._plans[state] = plan
        return plan

    def row_plan(self, state: int) -> NDArray[np.int32]:
        """The row of ``state`` as its fill plan from now on (a state visited again: one row
        copy per fill beats a clear and a bit set per token), shared by the states of its mask."""
        m = self.state_mask.item(state)
        plan = self._mask_plans.get(m)
        if type(plan) is list and m not in self._rows:  # its ids are known: set, not decoded
            row = np.zeros(bitmask_words(self.vocab_size), dtype=np.int32)
            write_ids(row, plan)
            row = self._keep_row(m, row)
        else:
            row = self.mask_row_of(m)
        self._mask_plans[m] = row
        self._plans[state] = row
        return row

    def mask_row_of(self, m: int) -> NDArray[np.int32]:
        """Mask ``m`` of the store as a read-only int32 bitmask row, cached."""
        row = self._rows.get(m)
        if row is None:
            row = self._keep_row(m, self._decode(m).view(np.int32))
        return row

    def _keep_row(self, m: int, row: NDArray[np.int32]) -> NDArray[np.int32]:
        """``row``, read-only, cached as mask ``m``'s (the caches emptied when full)."""
        if len(self._rows) >= ROW_CACHE_LIMIT:
            self._rows.clear()
            self._state_rows.clear()
            self._plans.clear()
            self._mask_plans.clear()
        row.setflags(write=False)
        self._rows[m] = row
        return row

    def _decode(self, m: int) -> NDArray[np.uint32]:
        """Mask ``m`` as a uint32 row, in a few array operations whatever its form.

        A delta mask is its base's row with the listed bits flipped; the flips of the whole
        chain (at most ``MAX_DELTA_DEPTH`` links down to a row already decoded or a
        self-contained mask, which is decoded and kept: its other deltas start from it) are
        applied in one scatter. Nothing per token runs in Python.
        """
        kinds, offsets, data = self.masks.kinds, self.masks.offsets, self.masks.data
        flips: list[NDArray[np.int32]] = []
        row: NDArray[np.uint32] | None = None
        k = m
        while row is None:
            kind, a, b = int(kinds[k]), int(offsets[k]), int(offsets[k + 1])
            if kind == KIND_DELTA:  # check_tables proved the base id is smaller: the chain ends
                flips.append(data[a + 1 : b])
                k = int(data[a])
                cached = self._rows.get(k)
                if cached is not None:
                    row = cached.view(np.uint32).copy()
            elif flips:  # the chain's root: kept decoded, since the masks built on it share it
                row = self.mask_row_of(k).view(np.uint32).copy()
            elif kind == KIND_DENSE:
                row = data[a:b].view(np.uint32)
            elif kind == KIND_ALLOW:
                row = _bits(data[a:b], bitmask_words(self.vocab_size))
            else:  # KIND_REJECT: every id of the vocabulary but the listed ones
                row = self._full_row() ^ _bits(data[a:b], bitmask_words(self.vocab_size))
        small = [f for f in flips if f.shape[0] <= _SCATTER_MAX]
        for f in flips:
            if f.shape[0] > _SCATTER_MAX:
                row ^= _bits(f, row.shape[0])
        if small:  # ids may repeat across links: each occurrence flips its bit once
            ids = small[0] if len(small) == 1 else np.concatenate(small)
            if ids.shape[0] <= _SCALAR_FLIPS:  # a few flips: word stores beat a scatter's fixed cost
                words = row.data  # a writable memoryview of the fresh row
                for i in ids.tolist():
                    w = i >> 5
                    words[w] = words[w] ^ 1 << (i & 31)
            else:
                np.bitwise_xor.at(row, ids >> 5, _ONE << (ids & 31).astype(np.uint32))
        return row

    def _full_row(self) -> NDArray[np.uint32]:
        """Every id of ``[0, vocab_size)`` allowed (the padding bits of the last word clear)."""
        if self._full is None:
            words = bitmask_words(self.vocab_size)
            full = np.full(words, 0xFFFFFFFF, dtype=np.uint32)
            tail = self.vocab_size - 32 * (words - 1)
            full[-1] = np.uint32((1 << tail) - 1)
            full.setflags(write=False)
            self._full = full
        return self._full

    def forced_bytes(self, state: int) -> bytes:
        """Bytes forced from ``state``: while exactly one byte continues and the state cannot end."""
        got = self._forced.get(state)
        if got is not None:
            return got
        dfa = self.dfa
        out = bytearray()
        s = state
        seen = set()
        while s >= 0 and not dfa.accepting[s] and s not in seen:
            seen.add(s)
            row = dfa.rows[s]
            live = [c for c, t in enumerate(row) if t >= 0]
            if len(live) != 1:
                break
            members = np.flatnonzero(dfa.byte_class == live[0])
            if members.size != 1:
                break
            out.append(int(members[0]))
            s = row[live[0]]
        self._forced[state] = bytes(out)
        return bytes(out)

    def allowed_tokens(self, state: int) -> NDArray[np.int64]:
        return self.masks.allowed_ids(int(self.state_mask[state]))

    @property
    def is_pushdown(self) -> bool:
        """Whether the grammar is recursive (a matcher then keeps a stack of rule states)."""
        return self.pda is not None

    def step(self, state: int, byte: int) -> int:
        """The state after ``byte`` inside the current rule, or -1."""
        return self.dfa.step(state, byte)

    def accepting(self, state: int) -> bool:
        """Whether ``state`` may end its rule (for the start rule: the output may end)."""
        return bool(self.dfa.accepting[state])

    def runtime(self) -> Any:
        """The shared pushdown runtime (memo tables), built on first use."""
        if self._runtime is None:
            from maskc.artifacts.pushdown import PushdownRuntime

            self._runtime = PushdownRuntime(self)
        return self._runtime

    def matcher(self) -> Matcher | PushdownMatcher:
        """A fresh matcher at the start (needs the tokenizer attached): a :class:`Matcher`,
        or a :class:`~maskc.artifacts.pushdown.PushdownMatcher` for a recursive grammar."""
        if self.pda is not None:
            from maskc.artifacts.pushdown import PushdownMatcher

            return PushdownMatcher(self)
        if self.dfa.counters is not None and self.dfa.counters.nested:
            return NestedCountingMatcher(self)
        if self.dfa.counters is not None:
            return CountingMatcher(self)
        return Matcher(self)

    def summary(self) -> dict[str, Any]:
        """Metadata and table sizes, for ``maskc inspect``."""
        kinds = np.bincount(self.masks.kinds, minlength=4).tolist() if self.num_masks else [0, 0, 0, 0]
        return {
            "format_version": self.metadata["format_version"],
            "compiler_version": self.metadata["compiler_version"],
            "grammar_kind": self.grammar_kind,
            "grammar_sha256": self.metadata["grammar_sha256"],
            "tokenizer_name": self.metadata["tokenizer_name"],
            "tokenizer_sha256": self.tokenizer_sha256,
            "vocab_size": self.vocab_size,
            "eos_token_ids": list(self.eos_token_ids),
            "options": self.options,
            "not_enforced": self.not_enforced,
            "states": self.num_states,
            "rules": list(self.pda.rule_names) if self.pda is not None else [],
            "max_depth": self.max_depth if self.pda is not None else None,
            "byte_classes": self.dfa.num_classes,
            "counted_loops": self.dfa.counters.num_loops if self.dfa.counters is not None else 0,
            "nested_loops": (int((self.dfa.counters.parent >= 0).sum())
                             if self.dfa.counters is not None and self.dfa.counters.parent is not None else 0),
            "context_answers": self.contexts.num_answers if self.contexts is not None else 0,
            "distinct_masks": self.num_masks,
            "masks_by_kind": {"allow_list": kinds[0], "reject_list": kinds[1], "dense": kinds[2], "delta": kinds[3]},
            "table_bytes": self.nbytes,
        }


def _bits(ids: NDArray[np.int32], words: int) -> NDArray[np.uint32]:
    """A row with the bits of ``ids`` set (ids distinct, as every stored list is)."""
    if ids.shape[0] <= _SMALL:  # a few ids: scalar stores beat the fixed cost of a scatter
        row = np.zeros(words, dtype=np.uint32)
        write_ids(row.view(np.int32), ids.tolist())
        return row
    shift = (ids & 31).astype(np.uint32)
    if ids.shape[0] > _SCATTER_MAX:  # long lists: one pass over the row beats a scatter per id
        sums = np.bincount(ids >> 5, weights=_ONE << shift, minlength=words)  # distinct bits: sum == or
        return sums.astype(np.uint32)
    row = np.zeros(words, dtype=np.uint32)
    np.bitwise_or.at(row, ids >> 5, _ONE << shift)
    return row


def load_artifact(path: str | os.PathLike[str], *, tokenizer: Vocabulary | None = None) -> Artifact:
    """Read an artifact file and verify it.

    A file is verified in full (content hash, metadata, tables) the first time a process
    loads it; a later load of the same unchanged file (same device, inode, size, mtime and
    ctime, settled for a while: see :func:`~maskc.artifacts.io.verified_file`) reuses that
    verification and the mapped tables, and starts with fresh row caches and memos.

    Args:
        path: the ``.safetensors`` file.
        tokenizer: when given, the artifact must have been built for exactly this tokenizer.

    Raises:
        ArtifactError: unreadable file. ArtifactCorrupt: truncated, tampered or not an
        artifact. ArtifactVersionMismatch: another format version. TokenizerMismatch: built
        for another tokenizer.
    """
    where = str(path)
    hit = verified_file(path)
    if hit is not None:
        tensors, meta, tables = hit
    else:
        tensors, meta, identity = map_artifact_file(path)
        tables = verify_tables(tensors, meta, where)
        remember_verified(identity, (tensors, meta, tables))
    art = Artifact(tensors, meta, where=where, tables=tables)
    if tokenizer is not None:
        art.verify_tokenizer(tokenizer)
        art.tokenizer = tokenizer
    return art


from maskc.artifacts.matcher import CountingMatcher, Matcher, NestedCountingMatcher  # noqa: E402  (type for Artifact.matcher)
from maskc.artifacts.pushdown import PushdownMatcher  # noqa: E402
