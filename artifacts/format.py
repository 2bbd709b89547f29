"""The artifact format: tensor names and dtypes, metadata keys, encode and decode.

An artifact is a safetensors file. Header metadata is ``dict[str, str]`` (JSON values
canonical, keys sorted); tensors are the DFA tables and the mask store, plus, for a
recursive grammar, the pushdown tables (call edges, rule starts, depth needs, uncertain
masks). ``content_sha256`` covers every metadata value (all but itself) and every
tensor's bytes, so a tampered or truncated file is refused on load: a flipped bit in an EOS
id or in the options is caught like one in a mask.

Format versions: 5 hashes the content in pieces of 1 MiB (hashed side by side on load), 6 is
5 with counted loops, 7 is 6 with loops nested in loops (``count.parent``); 3 and 4 (read
still) are the same tables with the content hashed as one stream, 4 with counted loops; 2
hashed the tensors only (refused, recompile).
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import orjson
from numpy.typing import NDArray

from maskc.compiler.dfa import SparseTable
from maskc.compiler.errors import ArtifactCorrupt, ArtifactVersionMismatch
from maskc.compiler.maskstore import bitmask_words

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "COUNTED_FORMAT_VERSION",
    "NESTED_FORMAT_VERSION",
    "NEST_TENSOR",
    "COUNTED_VERSIONS",
    "READ_VERSIONS",
    "TENSORS",
    "PDA_TENSORS",
    "COUNT_TENSORS",
    "CTX_TENSORS",
    "REQUIRED_METADATA",
    "TABLE_METADATA",
    "content_hash",
    "content_address",
    "canonical_json",
    "check_tables",
]

FORMAT = "maskc-artifact"
FORMAT_VERSION = "5"
COUNTED_FORMAT_VERSION = "6"  # version 5 plus counted loops (the count.* tensors); older readers refuse it
NESTED_FORMAT_VERSION = "7"  # version 6 plus loops inside loops (count.parent); older readers refuse it
PIECE_VERSIONS = (FORMAT_VERSION, COUNTED_FORMAT_VERSION, NESTED_FORMAT_VERSION)  # the content hashed in pieces
WHOLE_STREAM_VERSIONS = ("3", "4")  # read still: 3 as 5 and 4 as 6, the content hashed whole
COUNTED_VERSIONS = ("4", COUNTED_FORMAT_VERSION, NESTED_FORMAT_VERSION)
READ_VERSIONS = (*WHOLE_STREAM_VERSIONS, *PIECE_VERSIONS)
COMPILER_VERSION = "0.3.5"

# name -> (dtype, ndim)
TENSORS: dict[str, tuple[np.dtype[np.generic], int]] = {
    # The transition table, row by row: a default target plus exceptions (class, target).
    "dfa.shape": (np.dtype(np.int64), 1),
    "dfa.default": (np.dtype(np.int32), 1),
    "dfa.exc_offsets": (np.dtype(np.int64), 1),
    "dfa.exc_class": (np.dtype(np.uint8), 1),
    "dfa.exc_target": (np.dtype(np.int32), 1),
    "dfa.byte_class": (np.dtype(np.uint8), 1),
    "dfa.accepting": (np.dtype(np.uint8), 1),
    "mask.state": (np.dtype(np.int32), 1),
    "mask.kind": (np.dtype(np.uint8), 1),
    "mask.offsets": (np.dtype(np.int64), 1),
    "mask.data": (np.dtype(np.int32), 1),
}

# Present together, and only in the artifact of a recursive grammar.
PDA_TENSORS: dict[str, tuple[np.dtype[np.generic], int]] = {
    "pda.call_offsets": (np.dtype(np.int64), 1),  # [states + 1] CSR over the call edges
    "pda.call_rule": (np.dtype(np.int32), 1),
    "pda.call_return": (np.dtype(np.int32), 1),
    "pda.rule_start": (np.dtype(np.int32), 1),  # [rules], -1 for a rule never called
    "pda.need": (np.dtype(np.int32), 1),  # [states] frames needed above a state to finish its rule
    "mask.uncertain": (np.dtype(np.int32), 1),  # [states] mask id of the tokens the stack decides
    "mask.flat": (np.dtype(np.int32), 1),  # [states] mask id of the accepted tokens that make no call
}
# Present together, exactly in a version-4 artifact: counted loops (maskc.compiler.counters).
COUNT_TENSORS: dict[str, tuple[np.dtype[np.generic], int]] = {
    "count.region": (np.dtype(np.int32), 1),  # [states] the loop a state is in, -1: none
    "count.exit": (np.dtype(np.int32), 1),  # [states] a loop head's exit state, -1 elsewhere
    "count.span": (np.dtype(np.int32), 1),  # [loops] arrivals at the head before the exit
}
# Present exactly in a version-7 artifact, beside COUNT_TENSORS: [loops] the loop whose item
# holds each loop (numbered before it), -1: none.
NEST_TENSOR = "count.parent"
# Optional beside the pushdown tables: the runtime's answers for listed stack contexts
# (maskc.artifacts.contexts), sorted by top state. Readers that do not know them compute the
# same answers on the live stack, so they do not change the format version.
CTX_TENSORS: dict[str, tuple[np.dtype[np.generic], int]] = {
    "ctx.state": (np.dtype(np.int32), 1),  # [answers] the top state, sorted
    "ctx.below": (np.dtype(np.int32), 1),  # [answers] the frame below the top: a state, -1 any, -2 none
    "ctx.below2": (np.dtype(np.int32), 1),  # [answers] the frame below that one, alike
    "ctx.mask": (np.dtype(np.int32), 1),  # [answers] mask id of the answer's row (EOS included)
    "ctx.lo": (np.dtype(np.int16), 1),  # [answers] the answer holds for headroom in [lo, hi)
    "ctx.hi": (np.dtype(np.int16), 1),
    "ctx.end": (np.dtype(np.uint8), 1),  # [answers] 1 where the output may end
}
PDA_METADATA = ("rule_names", "inline_depth", "max_depth")
TABLE_METADATA = ("num_states", "num_masks")

REQUIRED_METADATA = (
    "format",
    "format_version",
    "compiler_version",
    "grammar_kind",
    "grammar_sha256",
    "grammar_source",
    "options",
    "tokenizer_sha256",
    "tokenizer_name",
    "vocab_size",
    "eos_token_ids",
    "not_enforced",
    "content_sha256",
)


def canonical_json(value: object) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


_HASH_COPY_LIMIT = 1 << 14
"""Tensors up to this many bytes are joined into one hashed piece; larger ones are hashed from
their own buffers."""

_HASH_DTYPES: dict[np.dtype[np.generic], str] = {
    dt: dt.str
    for t in (np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64, np.float32,
              np.float64)
    for dt in (np.dtype(t), np.dtype(t).newbyteorder("<"), np.dtype(t).newbyteorder(">"))
}
"""``dtype.str`` of the plain numeric dtypes, looked up rather than rebuilt for every tensor."""


PIECE = 1 << 20
"""The piece size of the content hash of versions 5 and 6."""


def content_hash(tensors: Mapping[str, NDArray[np.generic]], metadata: Mapping[str, str], *, threads: int = 1) -> str:
    """The content hash of an artifact, as its ``format_version`` defines it.

    The content stream is every metadata (key, value) but ``content_sha256`` itself, then
    (name, dtype, shape, bytes) of every tensor; both in name order, lengths prefixed. Versions
    3 and 4 (and a header without a version) hash the stream whole. Versions 5 and 6 cut it
    into pieces of :data:`PIECE` bytes and hash the pieces' sha256 digests after a prefix and
    the stream's length: the pieces hash independently, on up to ``threads`` threads, so a
    large artifact's check takes a fraction of the time.
    """
    hasher = ContentHasher(tensors, metadata, threads)
    hasher.start()
    return hasher.finish()


class ContentHasher:
    """:func:`content_hash` in two halves, so that the caller works while it runs: :meth:`start`
    sets helper threads to hash, :meth:`finish` takes the pieces left, waits and returns the
    hex digest. (The whole-stream hash of versions 3 and 4 runs on one helper.)"""

    def __init__(self, tensors: Mapping[str, NDArray[np.generic]], metadata: Mapping[str, str], threads: int) -> None:
        self._parts = _content_stream(tensors, metadata)
        self._pieces = _cut(self._parts, PIECE) if metadata.get("format_version") in PIECE_VERSIONS else None
        self._threads = max(1, threads)
        self._helpers: list[threading.Thread] = []
        self._errors: list[BaseException] = []
        self._whole: str | None = None
        self._digests: list[bytes] = []
        self._next: Iterator[int] = iter(())

    def start(self) -> None:
        if self._pieces is None:
            if self._threads > 1:
                self._spawn(self._hash_whole)
            return
        self._digests = [b""] * len(self._pieces)
        self._next = iter(range(len(self._pieces)))  # shared: each next() is atomic under the GIL
        for _ in range(min(self._threads, len(self._pieces)) - 1):
            self._spawn(self._hash_pieces)

    def finish(self) -> str:
        try:
            if self._pieces is None:
                if not self._helpers:
                    self._hash_whole()
            else:
                self._hash_pieces()  # the pieces no helper has taken yet
        finally:  # (every helper joined, whatever the caller's share raised)
            for t in self._helpers:
                t.join()
            self._helpers.clear()
        if self._errors:
            raise self._errors[0]
        if self._pieces is None:
            assert self._whole is not None
            return self._whole
        top = hashlib.sha256(b"maskc-artifact-pieces\0")
        top.update(sum(len(p) for p in self._parts).to_bytes(8, "little"))
        for digest in self._digests:
            top.update(digest)
        return top.hexdigest()

    def _spawn(self, target: Callable[[], None]) -> None:
        t = threading.Thread(target=self._guarded, args=(target,), daemon=True, name="maskc-content-hash")
        self._helpers.append(t)
        t.start()

    def _guarded(self, target: Callable[[], None]) -> None:
        try:
            target()
        except BaseException as e:  # re-raised by finish, on the caller's thread
            self._errors.append(e)

    def _hash_whole(self) -> None:
        h = hashlib.sha256()
        for part in self._parts:
            h.update(part)
        self._whole = h.hexdigest()

    def _hash_pieces(self) -> None:
        assert self._pieces is not None
        for i in self._next:
            h = hashlib.sha256()
            for s in self._pieces[i]:
                h.update(s)
            self._digests[i] = h.digest()


_KEY_BYTES: dict[str, bytes] = {}
"""A metadata key's length prefix and bytes in the content stream (a format has a few keys)."""


def _content_stream(tensors: Mapping[str, NDArray[np.generic]], metadata: Mapping[str, str]) -> list[memoryview]:
    """The content stream as byte buffers, in order: small pieces joined, a large tensor's
    bytes in place (no copy)."""
    keys = sorted(metadata)
    if "content_sha256" in metadata:
        keys.remove("content_sha256")
    small: list[bytes | memoryview] = [b"maskc-artifact-content\0", len(keys).to_bytes(8, "little")]
    for key in keys:
        k = _KEY_BYTES.get(key)
        if k is None:
            k = key.encode()
            k = len(k).to_bytes(8, "little") + k
            if len(_KEY_BYTES) < 256:
                _KEY_BYTES[key] = k
        v = metadata[key].encode("utf-8", "surrogatepass")
        small += (k, len(v).to_bytes(8, "little"), v)
    out: list[memoryview] = []
    for name in sorted(tensors):
        arr = tensors[name]
        code = _HASH_DTYPES.get(arr.dtype) if type(arr) is np.ndarray and arr.ndim else None
        if code is None or not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)  # a 0-d array hashes as shape (1,), as it always has
            small.append(f"{name}|{arr.dtype.str}|{arr.shape}|".encode())
            small.append(arr.reshape(-1).view(np.uint8).tobytes())
            continue
        shape = arr.shape
        # (a shape's text as Python writes the tuple: "(5,)" for one dimension)
        small.append(f"{name}|{code}|({shape[0]},)|".encode() if len(shape) == 1 else
                     f"{name}|{code}|{shape}|".encode())
        if arr.nbytes <= _HASH_COPY_LIMIT:
            small.append(arr.data)  # copied by the join, from its buffer
        else:
            out.append(memoryview(b"".join(small)))
            small.clear()
            out.append(arr.reshape(-1).view(np.uint8).data)
    out.append(memoryview(b"".join(small)))
    return out


def _cut(parts: list[memoryview], size: int) -> list[list[memoryview]]:
    """The stream of ``parts`` cut into pieces of ``size`` bytes (the last one shorter; one
    empty piece for an empty stream), each a list of slices of the parts (no copy)."""
    pieces: list[list[memoryview]] = []
    piece: list[memoryview] = []
    room = size
    for part in parts:
        i, n = 0, len(part)
        while i < n:
            take = min(room, n - i)
            piece.append(part[i : i + take])
            i += take
            room -= take
            if not room:
                pieces.append(piece)
                piece, room = [], size
    if piece or not pieces:
        pieces.append(piece)
    return pieces


def content_address(grammar_sha256: str, tokenizer_sha256: str, options_json: str, compiler_version: str) -> str:
    """The hex sha256 naming an artifact by what it is built from: grammar, tokenizer,
    canonical options, format and compiler versions (the cache key; its prefix names files)."""
    h = hashlib.sha256()
    for part in (grammar_sha256, tokenizer_sha256, options_json, FORMAT_VERSION, compiler_version):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def check_metadata(meta: Mapping[str, str], where: str) -> None:
    """The header is a maskc artifact of this format version with every required key."""
    missing = [k for k in REQUIRED_METADATA if k not in meta]
    if meta.get("format") != FORMAT:
        raise ArtifactCorrupt(f"{where} is not a maskc artifact (format={meta.get('format')!r})")
    version = meta.get("format_version")
    if version not in READ_VERSIONS:
        older = version is not None and version.isdecimal() and int(version) < int(READ_VERSIONS[0])
        age = "an older" if older else "another"
        raise ArtifactVersionMismatch(
            f"{where} is in {age} artifact format (version {version!r}, written by maskc "
            f"{meta.get('compiler_version', '?')}); this maskc {COMPILER_VERSION} reads versions "
            f"{', '.join(READ_VERSIONS[:-1])} and {READ_VERSIONS[-1]}",
            hint=f"recompile with maskc {COMPILER_VERSION}: maskc compile SCHEMA --tokenizer SPEC",
        )
    if missing:
        raise ArtifactCorrupt(f"{where} lacks metadata {', '.join(missing)}")


def _row_modes(table: NDArray[np.int32]) -> NDArray[np.int32]:
    """Each row's most frequent value, the least of those tied. Worked on the runs of the
    sorted rows, flat: a few arrays of the runs' size (rows are mostly one value), where
    per-cell counts took several tables of eight bytes a cell (180 MiB for 115,000 states)."""
    n, c = table.shape
    srt = np.sort(table, axis=1).reshape(-1)
    change = np.empty(n * c, dtype=np.bool_)
    change[0] = True
    np.not_equal(srt[1:], srt[:-1], out=change[1:])
    change[::c] = True  # every row starts a run
    starts = np.flatnonzero(change)
    del change
    lengths = np.diff(starts, append=n * c)
    first = np.flatnonzero(starts % c == 0)  # each row's first run (one per row, in row order)
    longest = np.maximum.reduceat(lengths, first)
    row = np.repeat(np.arange(n), np.diff(first, append=starts.shape[0]))
    best = np.flatnonzero(lengths == longest[row])
    # the first best run of each row: runs are in row order, and ties go to the least value
    keep = np.ones(best.shape[0], dtype=np.bool_)
    keep[1:] = row[best[1:]] != row[best[:-1]]
    return srt[starts[best[keep]]].astype(np.int32)


def encode_trans(trans: NDArray[np.int32]) -> dict[str, NDArray[np.generic]]:
    """Row-wise default + exceptions: most rows send most classes to one state."""
    n, c = trans.shape
    if n == 0 or c == 0:
        default = np.full(n, -1, dtype=np.int32)
    else:
        default = _row_modes(trans)
    exc = trans != default[:, None]
    rows, cls = np.nonzero(exc)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(exc.sum(axis=1), out=offsets[1:])
    return {
        "dfa.shape": np.array([n, c], dtype=np.int64),
        "dfa.default": default,
        "dfa.exc_offsets": offsets,
        "dfa.exc_class": cls.astype(np.uint8),
        "dfa.exc_target": trans[rows, cls].astype(np.int32),
    }


def sparse_trans(tensors: Mapping[str, NDArray[np.generic]], where: str, bounds: _Bounds | None = None) -> SparseTable:
    """The transition table of :func:`encode_trans` as it is stored, every index validated
    (every target in ``[-1, states)``, every class below the class count).

    With ``bounds``, only the shapes are checked here and the ranges go to ``bounds``: the
    table is valid once ``bounds.bad()`` has found nothing (:func:`check_tables`, which
    checks every table's ranges in one pass)."""
    shape = tensors["dfa.shape"]
    if shape.shape != (2,):
        raise ArtifactCorrupt(f"{where}: bad dfa.shape")
    n, c = int(shape[0]), int(shape[1])
    default: NDArray[Any] = tensors["dfa.default"]
    offsets: NDArray[Any] = tensors["dfa.exc_offsets"]
    cls: NDArray[Any] = tensors["dfa.exc_class"]
    tgt: NDArray[Any] = tensors["dfa.exc_target"]
    ok = (
        0 < n <= 1 << 31 and 0 < c <= 256 and default.shape == (n,) and offsets.shape == (n + 1,)
        and int(offsets[0]) == 0 and int(offsets[-1]) == cls.shape[0] == tgt.shape[0]
    )
    if not ok:
        raise ArtifactCorrupt(f"{where}: inconsistent transition table")
    checks = _Bounds() if bounds is None else bounds
    checks.add(offsets[1:] - offsets[:-1], 0, math.inf, "transition offset")  # (from 0 to the exceptions' count)
    checks.add(default, -1, n, "transition target")
    checks.add(tgt, -1, n, "transition target")
    checks.add(cls, 0, c, "transition class")
    if bounds is None:
        bad = checks.bad()
        if bad is not None:
            raise ArtifactCorrupt(f"{where}: a {bad} out of range")
    return SparseTable(c, default, offsets, cls, tgt)


class _Bounds:
    """Range checks of several tables, made in one pass: every value of an array added must
    lie in ``[lo, hi)`` (``hi`` infinite: no upper bound). A load checks a dozen small tables, and
    a reduction of a small array costs its call: one pass over all of them costs about what
    two reductions cost."""

    __slots__ = ("entries", "size")

    def __init__(self) -> None:
        self.entries: list[tuple[NDArray[Any], int, float, str, int]] = []  # (array, lo, hi, name, start)
        self.size = 0  # where the next array begins in the concatenation of those added

    def add(self, arr: NDArray[Any], lo: int, hi: float, name: str) -> None:
        """Require every value of the 1-d integer array ``arr`` (``name``, for the error) to
        lie in ``[lo, hi)``."""
        n = arr.shape[0]
        if n:
            self.entries.append((arr, lo, hi, name, self.size))
            self.size += n

    def bad(self) -> str | None:
        """The name of the first array that holds a value outside its range, or None."""
        entries = self.entries
        if not entries:
            return None
        values = np.concatenate([e[0] for e in entries], dtype=np.int64)
        starts = np.array([e[4] for e in entries], dtype=np.intp)
        lows = np.minimum.reduceat(values, starts).tolist()
        highs = np.maximum.reduceat(values, starts).tolist()
        for low, high, (_, lo, hi, name, _) in zip(lows, highs, entries):
            if low < lo or high >= hi:
                return name
        return None


def check_tables(tensors: Mapping[str, NDArray[np.generic]], vocab_size: int, where: str,
                 counted: bool = False, nested: bool = False) -> SparseTable:
    """Structural checks that make every later index safe; returns the transition table as
    stored (validated, not decoded). ``counted``: the header says version 4, 6 or 7, so the
    count tensors must be there (and must not be otherwise); ``nested``: version 7, so the
    loops' parents must be there too (and must not be otherwise)."""
    for name, (dtype, ndim) in TENSORS.items():
        arr = tensors.get(name)
        if arr is None:
            raise ArtifactCorrupt(f"{where} lacks tensor {name!r}")
        if arr.dtype != dtype or arr.ndim != ndim:
            raise ArtifactCorrupt(f"{where}: tensor {name!r} has {arr.dtype}[{arr.ndim}d], expected {dtype}[{ndim}d]")
    bounds = _Bounds()
    trans = sparse_trans(tensors, where, bounds)  # its ranges checked with the others' below
    n, c = trans.num_states, trans.num_classes
    byte_class, state = tensors["dfa.byte_class"], tensors["mask.state"]
    kinds: NDArray[Any] = tensors["mask.kind"]
    offsets: NDArray[Any] = tensors["mask.offsets"]
    data: NDArray[Any] = tensors["mask.data"]
    m = kinds.shape[0]
    # m == 0 leaves no mask for a state; offsets[0] != 0 would leave data outside every mask
    bad = (
        n == 0
        or byte_class.shape != (256,)
        or tensors["dfa.accepting"].shape != (n,)
        or state.shape != (n,)
        or offsets.shape != (m + 1,)
        or m == 0
        or int(offsets[0]) != 0
        or int(offsets[-1]) != data.shape[0]
    )
    out_of_range: str | None = None
    if not bad:
        # the shapes hold: every range at once (nothing before this indexes by a value)
        lens = offsets[1:] - offsets[:-1]
        dense = kinds == 2
        delta = kinds == 3
        words = bitmask_words(vocab_size)
        bounds.add(byte_class, 0, c, "byte class")
        bounds.add(state, 0, m, "mask id")
        bounds.add(kinds, 0, 4, "mask kind")
        bounds.add(lens, 0, math.inf, "mask offset")  # (offsets[0] = 0 to the data's size: each indexes the data)
        # without dense masks (bit words), every entry is a token id or a delta's base mask id
        # (< m <= vocab_size; that it precedes its mask is checked below): all checked at once
        ids_checked = m <= vocab_size and not dense.any()
        if ids_checked:
            bounds.add(data, 0, vocab_size, "token id")
        else:
            bounds.add(lens[dense], words, words + 1, "dense mask length")
        bounds.add(lens[delta], 1, math.inf, "delta mask length")
        bad = (_pda_bounds(tensors, n, m, bounds) or _count_bounds(tensors, n, counted, nested, bounds)
               or _context_bounds(tensors, n, m, bounds))
        if not bad:
            out_of_range = bounds.bad()
    if not bad and out_of_range is None:
        has_delta = bool(delta.any())
        if has_delta:
            bases = data[offsets[:-1][delta]]
            bad = int(bases.min()) < 0 or bool((bases >= np.flatnonzero(delta)).any())
        bad = (bad or (not ids_checked and _bad_token_ids(data, offsets, lens, dense, delta if has_delta else None,
                                                          vocab_size))
               or _bad_calls(tensors))
    if out_of_range is not None:
        raise ArtifactCorrupt(f"{where}: inconsistent tables: a {out_of_range} out of range (vocab_size {vocab_size})")
    if bad:
        raise ArtifactCorrupt(f"{where}: inconsistent tables (vocab_size {vocab_size})")
    return trans


def _bad_token_ids(data: NDArray[np.int32], offsets: NDArray[np.int64], lens: NDArray[np.int64],
                   dense: NDArray[np.bool_], delta: NDArray[np.bool_] | None, vocab_size: int) -> bool:
    """Whether a token id of a sparse or delta mask lies outside [0, vocab_size).

    Dense masks hold bit words and a delta mask's first entry is a base mask id (already
    checked to lie in [0, its own id)), so neither is a token id.
    """
    m = dense.shape[0]
    if m <= vocab_size <= 1 << 31:
        # every base id is < m <= vocab_size, so delta masks may be checked whole: the largest
        # entry of each non-empty mask (reduceat over their starts), seen unsigned
        nonempty = np.flatnonzero(lens)
        if not nonempty.size:
            return False
        largest = np.maximum.reduceat(data.view(np.uint32), offsets[nonempty])
        return bool((largest[~dense[nonempty]] >= vocab_size).any())
    sparse = np.repeat(~dense, lens)
    if delta is not None:
        sparse[offsets[:-1][delta]] = False
    ids = data[sparse]
    return bool(ids.size and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size))


def _group(tensors: Mapping[str, NDArray[np.generic]], group: Mapping[str, tuple[np.dtype[np.generic], int]]) -> bool | None:
    """Whether a group of tensors that come together is malformed: None where none is
    present, True where one is missing or has another dtype or rank, else False."""
    present = [k for k in group if k in tensors]
    if not present:
        return None
    if len(present) != len(group):
        return True
    return any(tensors[name].dtype != dtype or tensors[name].ndim != ndim for name, (dtype, ndim) in group.items())


def _count_bounds(tensors: Mapping[str, NDArray[np.generic]], n: int, counted: bool, nested: bool,
                  bounds: _Bounds) -> bool:
    """Whether the count tensors are malformed in shape, or present where the version says
    none (and the other way round); their ranges go to ``bounds``. Counted loops live only
    in regular artifacts."""
    bad = _group(tensors, COUNT_TENSORS)
    parent: NDArray[Any] | None = tensors.get(NEST_TENSOR)
    if (parent is not None) != (counted and nested):
        return True
    if not counted:
        return bad is not None
    if bad is not False or any(k in tensors for k in PDA_TENSORS):
        return True
    region: NDArray[Any] = tensors["count.region"]
    exit_: NDArray[Any] = tensors["count.exit"]
    span: NDArray[Any] = tensors["count.span"]
    loops = span.shape[0]
    if region.shape != (n,) or exit_.shape != (n,) or loops == 0 or bool(((exit_ >= 0) & (region < 0)).any()):
        return True
    bounds.add(region, -1, loops, "counted loop id")
    bounds.add(exit_, -1, n, "counted loop exit")
    bounds.add(span, 1, math.inf, "counted loop span")
    if parent is not None:  # a loop's parent numbered before it: the nesting has no cycle
        return (parent.dtype != np.int32 or parent.shape != (loops,) or int(parent.min()) < -1
                or bool((parent >= np.arange(loops)).any()))
    return False


def _pda_bounds(tensors: Mapping[str, NDArray[np.generic]], n: int, m: int, bounds: _Bounds) -> bool:
    """Whether the pushdown tables are malformed in shape (all absent is fine: a regular
    grammar); their ranges go to ``bounds``."""
    bad = _group(tensors, PDA_TENSORS)
    if bad is not False:
        return bool(bad)
    off: NDArray[Any] = tensors["pda.call_offsets"]
    rule, ret = tensors["pda.call_rule"], tensors["pda.call_return"]
    start, need = tensors["pda.rule_start"], tensors["pda.need"]
    unc, flat = tensors["mask.uncertain"], tensors["mask.flat"]
    r = start.shape[0]
    if (off.shape != (n + 1,) or int(off[0]) != 0 or int(off[-1]) != rule.shape[0] or ret.shape != rule.shape
            or need.shape != (n,) or unc.shape != (n,) or flat.shape != (n,) or r == 0 or int(start[0]) != 0):
        return True
    bounds.add(off[1:] - off[:-1], 0, math.inf, "call offset")
    bounds.add(rule, 0, r, "called rule")
    bounds.add(ret, 0, n, "return state")
    bounds.add(start, -1, n, "rule start state")
    bounds.add(need, 0, math.inf, "stack need")
    bounds.add(unc, 0, m, "mask id")
    bounds.add(flat, 0, m, "mask id")
    return False


def _bad_calls(tensors: Mapping[str, NDArray[np.generic]]) -> bool:
    """Whether a call edge calls a rule without a start state (-1: a rule never called);
    the rule ids are already checked to be in range."""
    rule = tensors.get("pda.call_rule")
    return rule is not None and rule.shape[0] > 0 and int(tensors["pda.rule_start"][rule].min()) < 0


def _context_bounds(tensors: Mapping[str, NDArray[np.generic]], n: int, m: int, bounds: _Bounds) -> bool:
    """Whether the context answers are malformed in shape, or present without the pushdown
    tables; their ranges (and order) go to ``bounds``."""
    bad = _group(tensors, CTX_TENSORS)
    if bad is None:
        return False
    if bad or "pda.call_offsets" not in tensors:
        return True
    state: NDArray[Any] = tensors["ctx.state"]
    p = state.shape[0]
    if any(tensors[k].shape != (p,) for k in CTX_TENSORS):
        return True
    if p:
        bounds.add(state, 0, n, "context state")
        bounds.add(state[1:] - state[:-1], 0, math.inf, "context state order")  # sorted (no wrap-around in [0, n))
        bounds.add(tensors["ctx.below"], -2, n, "context stack state")
        bounds.add(tensors["ctx.below2"], -2, n, "context stack state")
        bounds.add(tensors["ctx.mask"], 0, m, "mask id")
        bounds.add(tensors["ctx.end"], 0, 2, "context end flag")
        lo: NDArray[Any] = tensors["ctx.lo"]
        bounds.add(np.asarray(tensors["ctx.hi"], dtype=np.int32) - lo, 1, math.inf, "context range")  # lo < hi
    return False
