"""Answers stored at compile time for stack contexts (maskc.artifacts.contexts): each one
equals the live walk on every stack it matches, near the depth bound too; they spare the
first visits; a table that does not hold together is refused on load; an artifact without
them gives the same masks; and masks appended to a store decode to what was given."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

import maskc
from maskc.artifacts import format as fmt
from maskc.artifacts.artifact import Artifact
from maskc.artifacts import contexts as contexts_module
from maskc.artifacts.contexts import ANY_BELOW, NONE_BELOW, build_contexts
from maskc.artifacts.io import save_bytes
from maskc.artifacts.pushdown import Config, PushdownRuntime
from maskc.compiler import maskstore
from maskc.compiler.maskstore import MAX_DELTA_DEPTH, MaskStoreBuilder, pack_bool, unpack_bool
from maskc.compiler.vocab import Vocabulary
from tests.artifacts.test_pushdown_fast import _loaded
from tests.artifacts.test_pushdown_first_visit import GRAMMARS, _configs


def _single(configs: list[Config]) -> list[Config]:
    return list(dict.fromkeys(c for c in configs if len(c) == 1))


@pytest.mark.parametrize("name", sorted(GRAMMARS))
@pytest.mark.parametrize("max_depth", [2, 3, 6])
def test_stored_answers_equal_the_walk_on_every_stack_they_match(name: str, max_depth: int,
                                                                 pda_vocab: Vocabulary) -> None:
    """Stacks met on random walks that lean towards the depth bound: wherever a stored answer
    matches (its top frames and headroom), it is what the reference walk computes."""
    art = _loaded(GRAMMARS[name], pda_vocab, max_depth)
    assert art.contexts is not None and art.contexts.num_answers
    rt = PushdownRuntime(art)
    ref = PushdownRuntime(art, fast=False)
    hits = 0
    for config in _single(_configs(art, seed=max_depth + 5, walks=6, steps=30)):
        got = rt._context(config[0])
        if got is None:
            continue
        hits += 1
        row, end = got
        want_row, want_end = ref.mask(config)
        assert end == want_end, config
        assert np.array_equal(row, want_row), config
    assert hits


def _matching_stacks(art: Artifact, q: int, below: int, below2: int, lo: int, hi: int, rng: random.Random) -> list[tuple[int, ...]]:
    """Stacks an answer claims: its top state and frames below, over frames of any state
    (the ones it did not read), at every depth whose headroom lies in ``[lo, hi)``."""
    n = art.num_states
    out = []
    for depth in range(1, art.max_depth + 1):
        h = art.max_depth - depth
        if not lo <= h < hi:
            continue
        frames = [rng.randrange(n) for _ in range(depth)]
        frames[-1] = q
        fits = True
        for k, frame in enumerate((below, below2), start=2):  # the k-th frame from the top
            if frame == ANY_BELOW:
                break
            if frame == NONE_BELOW:
                fits = depth == k - 1
                break
            if depth < k:
                fits = False
                break
            frames[-k] = frame
        if not fits:
            continue
        out.append(tuple(frames))
    return out


@pytest.mark.parametrize("name", sorted(GRAMMARS))
@pytest.mark.parametrize("max_depth", [2, 3, 6])
def test_every_stored_answer_holds_under_frames_it_did_not_read(name: str, max_depth: int,
                                                                pda_vocab: Vocabulary) -> None:
    """Each answer of the table, checked on stacks it claims: its frames, anything below
    them, every depth of its headroom interval (and the lookup finds an answer there)."""
    art = _loaded(GRAMMARS[name], pda_vocab, max_depth)
    t = art.contexts
    assert t is not None
    rng = random.Random(max_depth)
    rt = PushdownRuntime(art)
    checked = 0
    kinds = set()
    for e in range(t.num_answers):
        q, below, below2 = t.state.item(e), t.below.item(e), t.below2.item(e)
        kinds.add("any" if below == ANY_BELOW else "none" if below == NONE_BELOW else
                  "pair" if below2 == ANY_BELOW else "triple")
        for s in _matching_stacks(art, q, below, below2, t.lo.item(e), t.hi.item(e), rng):
            want_row, want_end = PushdownRuntime(art, fast=False).mask((s,))
            row = art.mask_row_of(t.mask.item(e))
            assert bool(t.end.item(e)) == want_end, (e, s)
            assert np.array_equal(row, want_row), (e, s)
            got = rt._context(s)
            assert got is not None and np.array_equal(got[0], want_row) and got[1] == want_end, (e, s)
            checked += 1
    assert checked
    assert kinds - {"any"}, kinds  # some answers read a frame below the top (or its absence)


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_no_answer_is_taken_for_frames_it_does_not_name(name: str, pda_vocab: Vocabulary) -> None:
    """A top state over a frame none of its answers names (nor any frame): no answer."""
    art = _loaded(GRAMMARS[name], pda_vocab, 6)
    t = art.contexts
    assert t is not None
    rt = PushdownRuntime(art)
    tried = 0
    for q in sorted(set(t.state.tolist())):
        a, b = t.span(q)
        rows = list(zip(t.below[a:b].tolist(), t.below2[a:b].tolist()))
        if any(r == ANY_BELOW for r, _ in rows):
            continue
        named = {r for r, _ in rows} | {r2 for _, r2 in rows}
        for other in (x for x in range(art.num_states) if x not in named):
            for below2 in (other, *sorted(x for x in named if x >= 0)):
                assert rt._context((below2, other, q)) is None, (q, other)
                assert rt._context((other, q)) is None, (q, other)
                tried += 1
    assert tried


def test_stored_answers_spare_the_first_visits(pda_vocab: Vocabulary) -> None:
    """The same walks, with and without the table: fewer masks computed on the live stack,
    the same masks."""
    art = _loaded(GRAMMARS["objects"], pda_vocab, 6)
    configs = _single(_configs(art, seed=3, walks=4, steps=30))
    with_table, without = PushdownRuntime(art), PushdownRuntime(art, contexts=False)
    for config in configs:
        a, b = with_table.mask(config), without.mask(config)
        assert a[1] == b[1] and np.array_equal(a[0], b[0]), config
    assert without.misses > 0
    assert with_table.misses < without.misses


def test_a_recursive_schema_decodes_without_walking_the_stack(toy_vocab: Vocabulary) -> None:
    """A nested instance of a recursive schema, token by token: every mask came from the
    artifact (no mask walked on the live stack), and the instance is accepted."""
    schema = {"$defs": {"node": {"type": "object", "properties": {"a": {"type": "integer"},
                                                                   "b": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                                 "required": ["a"], "additionalProperties": False}},
              "$ref": "#/$defs/node"}
    art = maskc.compile_json_schema(schema, toy_vocab)
    assert art.contexts is not None
    loaded = Artifact.from_bytes(art.to_bytes())
    loaded.tokenizer = toy_vocab
    m = loaded.matcher()
    bitmask = maskc.allocate_bitmask_np(1, loaded.vocab_size)
    ref = PushdownRuntime(loaded, fast=False)
    for t in toy_vocab.encode('{"a":1,"b":[{"a":2,"b":[{"a":12,"b":[]}]},{"a":0}]}'):
        m.fill_next_token_bitmask(bitmask, 0)
        assert np.array_equal(bitmask[0], ref.mask(m.config)[0])
        assert m.accept_token(t)
    assert m.can_terminate()
    assert m._rt.misses == 0


# The stacks r2, r, q of a state that closes its rule and r's (a "]]" token) read below r2
# under some return points r2: the give-up cuts their siblings.
DEEP_CLOSE = 'root ::= "[" root "]" | "[" root "," root "]" | "[" root "," root "," root "]" | "1"'


def test_return_points_whose_answers_read_deeper_are_given_up(pda_vocab: Vocabulary,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Where stacks ``r2, r, q`` of two return points read below ``r2`` and none stored an
    answer, the other ``r2`` are not tried: fewer computations, and the same answers (those
    stacks would have read as deep)."""
    computed: list[Config] = []
    compute = PushdownRuntime.compute_mask

    def counting(self: PushdownRuntime, config: Config) -> Any:
        computed.append(config)
        return compute(self, config)

    monkeypatch.setattr(PushdownRuntime, "compute_mask", counting)
    runs = []
    for give_up in (contexts_module.GIVE_UP_DEEPER, 1 << 30):
        monkeypatch.setattr(contexts_module, "GIVE_UP_DEEPER", give_up)
        computed.clear()
        art = maskc.compile_gbnf(DEEP_CLOSE, pda_vocab)
        assert art.contexts is not None
        runs.append((len(computed), art))
    (cut, art), (full, whole) = runs
    assert cut < full
    assert art.contexts is not None and whole.contexts is not None
    for name, arr in art.contexts.tensors().items():
        if name != "ctx.mask":
            assert np.array_equal(arr, whole.contexts.tensors()[name]), name
    for a, b in zip(art.contexts.mask.tolist(), whole.contexts.mask.tolist()):
        assert np.array_equal(art.mask_row_of(a), whole.mask_row_of(b))


def _rehashed(art: Artifact, tensors: dict[str, np.ndarray]) -> bytes:
    meta = dict(art.metadata)
    meta["content_sha256"] = fmt.content_hash(tensors, meta)
    return save_bytes(tensors, meta)


@pytest.fixture(scope="module")
def pda_art(pda_vocab: Vocabulary) -> Artifact:
    art = _loaded(GRAMMARS["mutual"], pda_vocab, 6)
    assert art.contexts is not None and art.contexts.num_answers >= 2
    return art


TAMPERS = {
    "unsorted states": lambda t, n, m: t.update({"ctx.state": t["ctx.state"][::-1].copy()}),
    "state out of range": lambda t, n, m: t["ctx.state"].__setitem__(-1, n),
    "below out of range": lambda t, n, m: t["ctx.below"].__setitem__(0, -3),
    "below2 past the states": lambda t, n, m: t["ctx.below2"].__setitem__(0, n),
    "mask out of range": lambda t, n, m: t["ctx.mask"].__setitem__(0, m),
    "empty interval": lambda t, n, m: t["ctx.hi"].__setitem__(0, t["ctx.lo"][0]),
    "end not a flag": lambda t, n, m: t["ctx.end"].__setitem__(0, 2),
    "a tensor missing": lambda t, n, m: t.pop("ctx.below2"),
    "a tensor short": lambda t, n, m: t.update({"ctx.lo": t["ctx.lo"][:-1].copy()}),
    "a wrong dtype": lambda t, n, m: t.update({"ctx.lo": t["ctx.lo"].astype(np.int32)}),
}


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_a_table_that_does_not_hold_together_is_refused(tamper: str, pda_art: Artifact) -> None:
    tensors = {k: np.array(v) for k, v in pda_art.tensors.items()}
    if tamper == "unsorted states":
        assert tensors["ctx.state"][0] != tensors["ctx.state"][-1]
    TAMPERS[tamper](tensors, pda_art.num_states, pda_art.num_masks)
    with pytest.raises(maskc.ArtifactCorrupt, match="inconsistent tables"):
        Artifact.from_bytes(_rehashed(pda_art, tensors))
    Artifact.from_bytes(_rehashed(pda_art, {k: np.array(v) for k, v in pda_art.tensors.items()}))  # untouched: loads


def test_answers_in_a_regular_artifact_are_refused(toy_vocab: Vocabulary, pda_art: Artifact) -> None:
    art = maskc.compile_regex("a[bc]+", toy_vocab)
    tensors = {**art.tensors, **{k: v for k, v in pda_art.tensors.items() if k.startswith("ctx.")}}
    with pytest.raises(maskc.ArtifactCorrupt, match="inconsistent tables"):
        Artifact.from_bytes(_rehashed(art, tensors))


def test_an_artifact_without_answers_gives_the_same_masks(pda_art: Artifact, pda_vocab: Vocabulary) -> None:
    """What a reader that does not know the table computes: the same masks, walked."""
    tensors = {k: v for k, v in pda_art.tensors.items() if not k.startswith("ctx.")}
    bare = Artifact.from_bytes(_rehashed(pda_art, tensors))
    bare.tokenizer = pda_vocab
    assert bare.contexts is None
    a, b = PushdownRuntime(pda_art), PushdownRuntime(bare)
    for config in _configs(pda_art, seed=9, walks=3, steps=25):
        x, y = a.mask(config), b.mask(config)
        assert x[1] == y[1] and np.array_equal(x[0], y[0]), config
    assert b.misses > a.misses


def test_contexts_are_deterministic(pda_vocab: Vocabulary) -> None:
    one, two = (_loaded(GRAMMARS["ambiguous"], pda_vocab, 4) for _ in range(2))
    assert one.metadata["content_sha256"] == two.metadata["content_sha256"]
    again = build_contexts(one)
    assert again is not None
    store, table = again
    for name, arr in table.tensors().items():
        assert np.array_equal(arr, one.tensors[name]), name


@pytest.mark.parametrize("searched", [True, False])
def test_masks_added_after_a_store_decode_to_what_was_given(searched: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A builder resumed from a store, given masks near a base, near each other, equal to a
    stored mask, repeated, far from all: each decodes to itself, the store's own masks keep
    their ids and rows, and no delta chain passes ``MAX_DELTA_DEPTH`` (the store searched
    for each new mask, or too large to be)."""
    if not searched:
        monkeypatch.setattr(maskstore, "REUSE_LIMIT", 0)
    rng = np.random.default_rng(4)
    vocab = 300
    first = MaskStoreBuilder(vocab)
    base_masks = [rng.random(vocab) < p for p in (0.02, 0.5, 0.97)]
    chain = base_masks[1].copy()
    for _ in range(MAX_DELTA_DEPTH + 2):  # a long delta chain inside the store
        chain = chain.copy()
        chain[rng.integers(vocab)] ^= True
        base_masks.append(chain)
    base_ids = [first.add(m) for m in base_masks]
    store = first.build()
    deepest = max(range(store.num_masks), key=store.depth)
    assert store.depth(deepest) == MAX_DELTA_DEPTH
    builder = MaskStoreBuilder(vocab, store)
    wanted: list[np.ndarray] = []
    ids: list[int] = []
    for k in range(60):
        b = base_ids[k % len(base_ids)] if k % 7 else deepest
        mask = unpack_bool(store.dense_row(b), vocab)
        flips = rng.integers(vocab, size=int(rng.integers(0, 6))) if k % 11 else rng.integers(vocab, size=150)
        mask[flips] ^= True
        wanted.append(mask)
        ids.append(builder.add(mask, b))
    wanted.append(base_masks[0])  # equal to a stored mask, given another base
    ids.append(builder.add(base_masks[0], base_ids[2]))
    wanted.append(base_masks[1])  # equal to its base
    ids.append(builder.add(base_masks[1], base_ids[1]))
    wanted.append(wanted[3])  # given twice
    ids.append(builder.add(wanted[3], base_ids[0]))
    out = builder.build()
    for m in range(store.num_masks):
        assert np.array_equal(out.dense_row(m), store.dense_row(m))
    for mask, m in zip(wanted, ids):
        assert np.array_equal(out.dense_row(m), pack_bool(mask))
        assert out.depth(m) <= MAX_DELTA_DEPTH
    assert ids[-2] == base_ids[1] and ids[-1] == ids[3]
    if searched:
        assert ids[-3] == base_ids[0]
    new_kinds = out.kinds[store.num_masks:]
    assert (new_kinds == 3).any() and (new_kinds != 3).any()
