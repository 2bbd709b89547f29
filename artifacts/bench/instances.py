"""What ``maskc bench`` runs on: schema files, their instances as token ids, random walks.

A MaskBench-format file (``{"schema": ..., "tests": [{"data": ..., "valid": bool}]}``)
brings labelled instances, serialized as the compact grammar emits them
(:func:`~maskc.artifacts.bench.serialize.serialize`) and tokenized with the benchmark's
tokenizer. A bare schema (or a case without usable instances) brings none: the maskc
child draws valid ones from the compiled grammar itself by :func:`random_walks`.
"""

from __future__ import annotations

import os
import random
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from numpy.typing import NDArray

from maskc.artifacts.bench.serialize import serialize
from maskc.compiler.errors import InputError
from maskc.compiler.vocab import Vocabulary

__all__ = [
    "MASKBENCH_ENV",
    "Case",
    "Instance",
    "default_inputs",
    "expand_paths",
    "load_case",
    "maskbench_location",
    "random_walks",
]

MASKBENCH_ENV = "MASKC_MASKBENCH_DIR"
SHARED_ENV = "MASKC_SHARED_DIR"
_REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, slots=True)
class Instance:
    """One instance as token ids, and whether the schema accepts it."""

    ids: tuple[int, ...]
    valid: bool


@dataclass(frozen=True, slots=True)
class Case:
    """One schema file: its schema, its labelled instances, and how many were left out
    (an instance the tokenizer cannot spell or the serializer cannot order)."""

    path: str
    schema: Any
    instances: tuple[Instance, ...] = ()
    labelled: bool = False
    dropped: int = 0
    notes: tuple[str, ...] = field(default=())


def maskbench_location() -> Path:
    """Where the MaskBench folder is looked for: ``$MASKC_MASKBENCH_DIR``, else
    ``$MASKC_SHARED_DIR/maskbench``, else ``../shared/maskbench`` beside the source tree."""
    env = os.environ.get(MASKBENCH_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    shared = os.environ.get(SHARED_ENV, "").strip()
    if shared:
        return Path(shared).expanduser() / "maskbench"
    return _REPO_ROOT.parent / "shared" / "maskbench"


def default_inputs() -> list[Path]:
    """The MaskBench folder when present, else the bundled ``sample_schemas/``."""
    folder = maskbench_location()
    if folder.is_dir():
        return [folder]
    samples = _REPO_ROOT / "sample_schemas"
    if samples.is_dir():
        return [samples]
    raise InputError("no schema given and neither MaskBench nor sample_schemas/ was found",
                     hint=f"pass schema files or folders, or set {MASKBENCH_ENV}")


def expand_paths(paths: list[Path], *, sample: int | None, seed: int) -> list[Path]:
    """Files in argument order, folders expanded to their ``.json`` files (sorted); with
    ``sample``, that many of them drawn with ``seed`` (kept in order).

    Raises:
        InputError: a path that does not exist, or a folder without ``.json`` files.
    """
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(f for f in p.glob("*.json") if f.is_file())
            if not found:
                raise InputError(f"no .json files in directory {p}")
            files += found
        elif p.is_file():
            files.append(p)
        else:
            raise InputError(f"no such file or directory: {p}")
    if sample is not None and sample < len(files):
        picked = sorted(random.Random(seed).sample(range(len(files)), sample))
        files = [files[i] for i in picked]
    return files


def load_case(path: Path, vocab: Vocabulary) -> Case:
    """Read one schema file; a MaskBench case's instances become token ids.

    Raises:
        InputError: the file cannot be read or is not JSON.
    """
    try:
        doc = orjson.loads(path.read_bytes())
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from e
    except orjson.JSONDecodeError as e:
        raise InputError(f"{path} is not valid JSON: {e}") from e
    if not (isinstance(doc, dict) and "schema" in doc and isinstance(doc.get("tests"), list)):
        return Case(str(path), doc)
    schema = doc["schema"]
    instances: list[Instance] = []
    dropped = 0
    for test in doc["tests"]:
        if not (isinstance(test, dict) and isinstance(test.get("valid"), bool)):
            dropped += 1
            continue
        try:
            text = serialize(test.get("data"), schema).decode("utf-8")
            instances.append(Instance(tuple(vocab.encode(text)), test["valid"]))
        except Exception:  # noqa: BLE001 - an instance the serializer or tokenizer cannot take
            dropped += 1
    return Case(str(path), schema, tuple(instances), labelled=True, dropped=dropped)


# -- random walks -----------------------------------------------------------------------------


def _distance_to_end(art: Any) -> NDArray[np.int64]:
    """Per state, the fewest bytes to a state that may end its rule (breadth-first search
    backwards over byte transitions and, in a pushdown automaton, call-return edges; a
    counted loop's exit counts as one step)."""
    trans = art.dfa.trans
    n = trans.shape[0]
    src, cls = np.nonzero(trans >= 0)
    dst = trans[src, cls].astype(np.int64)
    srcs, dsts = [src.astype(np.int64)], [dst]
    pda = art.pda
    if pda is not None:
        counts = np.diff(pda.call_offsets)
        srcs.append(np.repeat(np.arange(n, dtype=np.int64), counts))
        dsts.append(pda.call_return.astype(np.int64))
    counters = art.dfa.counters
    if counters is not None:  # a counted loop's exit (after its arrivals)
        heads = np.flatnonzero(counters.exit >= 0)
        srcs.append(heads.astype(np.int64))
        dsts.append(counters.exit[heads].astype(np.int64))
    src_all, dst_all = np.concatenate(srcs), np.concatenate(dsts)
    order = np.argsort(dst_all, kind="stable")
    preds, starts = src_all[order], np.searchsorted(dst_all[order], np.arange(n + 1))
    dist = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    queue: deque[int] = deque()
    for s in np.flatnonzero(art.dfa.accepting).tolist():
        dist[s] = 0
        queue.append(s)
    while queue:
        s = queue.popleft()
        for p in preds[starts[s]:starts[s + 1]].tolist():
            if dist[p] > dist[s] + 1:
                dist[p] = dist[s] + 1
                queue.append(p)
    return dist


_CANDIDATES = 64


def random_walks(art: Any, vocab: Vocabulary, *, count: int, max_tokens: int, seed: int) -> list[tuple[int, ...]]:
    """Up to ``count`` token sequences the artifact accepts, each ending where EOS is allowed.

    A walk first takes uniformly random allowed tokens for a random number of steps (at most
    half of ``max_tokens``), then heads for the end: among a sample of allowed tokens (all
    one-byte ones included) it takes one that leaves the shallowest stack, then the fewest
    bytes to an accepting state, ties broken at random. A walk still open after
    ``max_tokens`` tokens is dropped; so at most ``4 * count`` walks are tried. The text of
    each walk is re-encoded with the tokenizer when that spells it the same way and the
    artifact accepts it, so instances read like a model's canonical tokens.

    Args:
        art: A compiled artifact with its tokenizer attached.
        vocab: The tokenizer of ``art``.
        count: Walks wanted.
        max_tokens: Longest walk kept.
        seed: Seed of the walks; the same seed gives the same walks.

    Returns:
        The walks, as token ids without EOS.
    """
    rng = random.Random(seed)
    dist = _distance_to_end(art)
    eos = set(vocab.eos_ids)
    one_byte = {i for i, b in enumerate(vocab.token_bytes) if len(b) == 1 and i not in vocab.special_ids}
    out: list[tuple[int, ...]] = []
    for _ in range(4 * count):
        if len(out) >= count:
            break
        walk = _walk(art, rng, dist, eos, one_byte, max_tokens)
        if walk is not None:
            out.append(_canonical(art, vocab, walk))
    return out


def _walk(art: Any, rng: random.Random, dist: NDArray[np.int64], eos: set[int], one_byte: set[int],
          max_tokens: int) -> tuple[int, ...] | None:
    m = art.matcher()
    ids: list[int] = []
    explore = rng.randint(0, max_tokens // 2)
    while len(ids) < max_tokens:
        if m.can_terminate() and (len(ids) >= explore or rng.random() < 0.05):
            return tuple(ids)
        allowed = [t for t in m.allowed_token_ids().tolist() if t not in eos]
        if not allowed:
            return tuple(ids) if m.can_terminate() else None
        if len(ids) < explore:
            token = rng.choice(allowed)
        else:
            token = _closest(m, rng, dist, allowed, one_byte)
        if not m.accept_token(token):
            return None
        ids.append(token)
    return None


def _closest(m: Any, rng: random.Random, dist: NDArray[np.int64], allowed: list[int], one_byte: set[int]) -> int:
    pool = [t for t in allowed if t in one_byte]
    pool += rng.sample(allowed, min(_CANDIDATES, len(allowed)))
    best: list[int] = []
    best_key: tuple[int, int] | None = None
    for t in set(pool):
        if not m.accept_token(t):
            continue
        key = (int(getattr(m, "depth", 1)), int(dist[m.state]))
        m.rollback(1)
        if best_key is None or key < best_key:
            best_key, best = key, [t]
        elif key == best_key:
            best.append(t)
    return rng.choice(sorted(best)) if best else rng.choice(allowed)


def _canonical(art: Any, vocab: Vocabulary, walk: tuple[int, ...]) -> tuple[int, ...]:
    text = vocab.decode(walk)
    try:
        ids = tuple(vocab.encode(text.decode("utf-8")))
    except Exception:  # noqa: BLE001 - no encoder, or text the tokenizer cannot take: keep the walk
        return walk
    if vocab.decode(ids) != text:
        return walk
    m = art.matcher()
    if all(m.accept_token(t) for t in ids) and m.can_terminate():
        return ids
    return walk
