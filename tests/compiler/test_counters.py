"""Counted loops: bounded repetitions compiled in a size that does not grow with the bound.

Every test here compares against the same grammar unrolled into copies (``COUNTED_LOOPS``
off), whose masks and language are the reference: a counted artifact must allow exactly
the tokens the unrolled one allows, at every step of every walk, and accept exactly the
same strings.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import numpy as np
import pytest

import maskc
from maskc.artifacts import format as fmt
from maskc.artifacts.analysis import eos_reachability
from maskc.artifacts.artifact import Artifact
from maskc.artifacts.io import save_bytes
from maskc.compiler import pipeline
from maskc.compiler.analysis import worst_case_length
from maskc.compiler.counters import Counters
from maskc.compiler.errors import StateLimitExceeded
from maskc.compiler.nfa import MIN_SPAN, _loop_plan
from maskc.compiler.vocab import Vocabulary


def _pair(kind: str, source: object, vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> tuple[Artifact, Artifact]:
    compile_ = {"json_schema": maskc.compile_json_schema, "regex": maskc.compile_regex}[kind]
    monkeypatch.setattr(pipeline, "COUNTED_LOOPS", True)
    counted = compile_(source, vocab, cache=False)
    monkeypatch.setattr(pipeline, "COUNTED_LOOPS", False)
    unrolled = compile_(source, vocab, cache=False)
    monkeypatch.setattr(pipeline, "COUNTED_LOOPS", True)
    return counted, unrolled


def _walk_both(a: Artifact, b: Artifact, vocab: Vocabulary, *, walks: int, seed: int, every_token: bool,
               steps: int | None = None) -> int:
    """Random walks of both artifacts' matchers in lockstep (long tokens preferred, so the
    walks reach the bounds; some rollbacks; at most ``steps`` tokens each where given): the
    same mask, the same verdict on every token tried, the same ``can_terminate``. Returns
    the highest loop count seen."""
    rng = random.Random(seed)
    lens = np.array([len(t) for t in vocab.token_bytes] + [0] * (vocab.vocab_size - len(vocab.token_bytes)))
    highest = 0
    for _ in range(walks):
        ma, mb = a.matcher(), b.matcher()
        for _step in itertools.count() if steps is None else range(steps):
            ia, ib = ma.allowed_token_ids(), mb.allowed_token_ids()
            assert np.array_equal(ia, ib)
            assert ma.can_terminate() == mb.can_terminate()
            if not ia.size:
                break
            allowed = set(ia.tolist())
            tries = range(vocab.vocab_size) if every_token else [rng.randrange(vocab.vocab_size) for _ in range(8)]
            for u in tries:
                ok = ma.accept_token(u)
                assert ok == (u in allowed), u
                if ok:
                    ma.rollback(1)
            if rng.random() < 0.9:  # long tokens that do not close an array: deep walks
                open_ = ia[[b"]" not in vocab.token_bytes[i] for i in ia.tolist()]] if ia.max() < len(vocab.token_bytes) else ia
                ia = open_ if open_.size else ia
                ia = ia[lens[ia] >= max(1, int(lens[ia].max()) // 2)]
            t = int(rng.choice(ia))
            assert ma.accept_token(t) and mb.accept_token(t)
            highest = max(highest, getattr(ma, "count", 0))
            if ma.is_terminated():
                break
            if rng.random() < 0.05 and ma.num_accepted > 2:
                k = rng.randint(1, 2)
                ma.rollback(k)
                mb.rollback(k)
    return highest


def _rewritten(art: Artifact, tensors: dict[str, np.ndarray], folder: Path, **meta: str) -> Path:
    """A file of ``art`` with ``tensors`` and ``meta`` in place of its own, hashed anew."""
    md = {**art.metadata, **meta}
    md["content_sha256"] = fmt.content_hash(tensors, md)
    path = folder / f"t{len(list(folder.iterdir()))}.safetensors"
    path.write_bytes(save_bytes(tensors, md))
    return path


def test_loop_plan_keeps_loops_a_token_away_from_the_bounds() -> None:
    # gap 6: a loop where a bound is a gap and two positions away or more
    assert _loop_plan(0, 20, 6) == [("loop", 14), ("copies", 6)]
    assert _loop_plan(13, 40, 6) == [("loop", 7), ("copies", 6), ("loop", 21), ("copies", 6)]
    assert _loop_plan(13, None, 6) == [("loop", 7), ("copies", 6)]
    assert _loop_plan(3, 14, 6) == [("copies", 3), ("loop", 5), ("copies", 6)]
    assert _loop_plan(8, 8, 6) == [("loop", 2), ("copies", 6)]
    assert _loop_plan(3, 10, 6) is None  # nothing to gain
    assert _loop_plan(0, 7, 6) is None
    assert _loop_plan(7, None, 6) is None
    for lo, hi in [(0, 8), (5, 100), (12, 12), (30, None), (0, 1000)]:
        plan = _loop_plan(lo, hi, 6)
        assert plan is not None
        assert sum(n for _, n in plan) == (hi if hi is not None else lo)
        assert all(n >= MIN_SPAN for kind, n in plan if kind == "loop")
        assert all(n == 6 for kind, n in plan[1:] if kind == "copies")  # every loop a gap from its bound


# Tokens of up to 8 items: a loop of fewer positions is passed, exit and all, by one token.
_RUNS = ["a", "aa", "aaaa", "aaaaaaaa", "aaaaaaaa\"", 'a"', '"', '"a', "[", "]", ",", "1", "1,", "1,1,1,1,",
         '"a",', '"aa","', "<eos>", "<pad>"]


@pytest.mark.parametrize(("kind", "source", "opening", "step"), [
    ("json_schema", {"type": "string", "maxLength": 12}, '"', "a"),
    ("json_schema", {"type": "string", "minLength": 12, "maxLength": 30}, '"', "a"),
    ("json_schema", {"type": "string", "minLength": 13}, '"', "a"),
    ("json_schema", {"type": "array", "items": {"const": 1}, "minItems": 6, "maxItems": 13}, "[ 1", ","),
    ("json_schema", {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 9}, '[ "', "a"),
    ("regex", "a{12,29}", "", "a"),
])
def test_a_loop_shorter_than_a_token_is_walked_exactly(kind: str, source: object, opening: str, step: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    vocab = Vocabulary.from_tokens(_RUNS, eos="<eos>", special=["<pad>"], name="runs")
    counted, unrolled = _pair(kind, source, vocab, monkeypatch)
    c = counted.dfa.counters
    assert c is not None and counted.num_states < unrolled.num_states
    assert int(c.span.min()) < 8  # a loop that the longest token can cross
    assert worst_case_length(counted.dfa).max_bytes == worst_case_length(unrolled.dfa).max_bytes
    # From every position reached one short step at a time (into and through the loops,
    # with "1" and "," alternating for the array of ones), every token: the same verdict,
    # state by state the same mask and end.
    ids = {t: vocab.token_bytes.index(t.encode()) for t in {"1", ",", step, *opening.split()}}
    looped = 0
    for k in range(40):
        ma, mb = counted.matcher(), unrolled.matcher()
        path = [ids[t] for t in opening.split()] + [ids[step] if step != "," or j % 2 == 0 else ids["1"]
                                                    for j in range(k)]
        if not all(ma.accept_token(t) == mb.accept_token(t) for t in path) or ma.num_accepted < len(path):
            break
        looped += int(c.region[ma.state]) >= 0
        assert np.array_equal(ma.allowed_token_ids(), mb.allowed_token_ids()), k
        for u in range(vocab.vocab_size):
            ok = ma.accept_token(u)
            assert ok == mb.accept_token(u), (k, vocab.token_bytes[u] if u < len(vocab.token_bytes) else u)
            if ok:
                assert ma.can_terminate() == mb.can_terminate()
                assert np.array_equal(ma.allowed_token_ids(), mb.allowed_token_ids()), (k, u)
                ma.rollback()
                mb.rollback()
    assert looped >= 2
    _walk_both(counted, unrolled, vocab, walks=40, seed=4, every_token=True)
    for n in range(0, 40):
        for text in ('"' + "a" * n + '"', "a" * n, "[" + ",".join(["1"] * n) + "]",
                     "[" + ",".join(['"aaaa"'] * n) + "]", "[" + ",".join(['"' + "a" * n + '"'] * 3) + "]"):
            assert counted.dfa.accepts(text.encode()) == unrolled.dfa.accepts(text.encode()), text


@pytest.mark.parametrize("schema", [
    {"type": "string", "minLength": 13, "maxLength": 40},
    {"type": "string", "maxLength": 30},
    {"type": "string", "minLength": 20},
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 25},
                                      "b": {"type": "array", "items": {"type": "string", "maxLength": 14}}}},
    {"anyOf": [{"type": "string", "maxLength": 25}, {"enum": ["ab", 12]}]},
    {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
     "maxItems": 40},
    {"type": "array", "items": {"enum": ["ab", "b", True]}, "minItems": 10, "maxItems": 30},
])
def test_counted_masks_equal_the_unrolled_masks(schema: dict[str, object], toy_vocab: Vocabulary,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    counted, unrolled = _pair("json_schema", schema, toy_vocab, monkeypatch)
    assert counted.dfa.counters is not None and unrolled.dfa.counters is None
    assert counted.metadata["format_version"] == fmt.COUNTED_FORMAT_VERSION
    assert unrolled.metadata["format_version"] == fmt.FORMAT_VERSION
    assert worst_case_length(counted.dfa).max_bytes == worst_case_length(unrolled.dfa).max_bytes
    highest = _walk_both(counted, unrolled, toy_vocab, walks=40, seed=1, every_token=True)
    assert highest >= 2  # the walks ran through loops, not only past them


@pytest.mark.parametrize("schema", [
    {"type": "string", "pattern": "^[ab]+$", "maxLength": 40},
    {"type": "string", "pattern": "^(ab|b)*$", "minLength": 14, "maxLength": 45},
    {"type": "string", "pattern": "b", "maxLength": 30},
    # `.+b.+a.bbb` needs up to 7 more characters to finish: the loop keeps that room from
    # the bound, so that no token walked inside it leaves too few
    {"type": "string", "pattern": ".+b.+a.bbb", "minLength": 10, "maxLength": 60},
    {"type": "string", "pattern": "^a.b.+a.bbb", "maxLength": 50},
])
def test_a_pattern_under_a_length_bound_counts(schema: dict[str, object], toy_vocab: Vocabulary,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # The product of the pattern's automaton with the counted characters: one head per
    # pattern state in each loop.
    counted, unrolled = _pair("json_schema", schema, toy_vocab, monkeypatch)
    assert counted.dfa.counters is not None and counted.num_states < unrolled.num_states
    assert (worst_case_length(counted.dfa).max_bytes or 0) >= (worst_case_length(unrolled.dfa).max_bytes or 0)
    assert _walk_both(counted, unrolled, toy_vocab, walks=40, seed=5, every_token=True) >= 6
    for n in range(0, 64):
        for text in ("a" * n, "b" * n, "ab" * (n // 2), "ba" * (n // 2), "a" * n + "baaaabbb", "ab" * n + "bbb"):
            data = f'"{text}"'.encode()
            assert counted.dfa.accepts(data) == unrolled.dfa.accepts(data), text


def test_a_pattern_without_finishing_room_is_unrolled(toy_vocab: Vocabulary) -> None:
    # After `a+`, the pattern can only finish with exactly `bbb`: whether it still fits
    # depends on the exact position, so the product keeps its copies.
    schema = {"type": "string", "pattern": "^a+bbb$", "minLength": 10, "maxLength": 60}
    art = maskc.compile_json_schema(schema, toy_vocab, cache=False)
    assert art.dfa.counters is None
    for text, ok in [("a" * 7 + "bbb", True), ("a" * 57 + "bbb", True), ("a" * 58 + "bbb", False),
                     ("a" * 6 + "bbb", False), ("a" * 60, False)]:
        m = art.matcher()
        assert (m.accept_string(f'"{text}"') and m.can_terminate()) == ok, text
    m = art.matcher()  # 58 characters of a: no way to finish within 60
    assert m.accept_string('"' + "a" * 50) and not m.accept_string("a" * 8 + "b")


@pytest.mark.parametrize("pattern", ["[ab]{20,60}", "(ab){10,30}", "a{0,50}", "[ab]{0,40}b"])
def test_counted_regexes_equal_the_unrolled_ones(pattern: str, toy_vocab: Vocabulary,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    counted, unrolled = _pair("regex", pattern, toy_vocab, monkeypatch)
    assert counted.dfa.counters is not None
    _walk_both(counted, unrolled, toy_vocab, walks=40, seed=2, every_token=True)
    for n in range(0, 70):
        for s in ("a" * n, "ab" * (n // 2), "b" * n):
            assert counted.dfa.accepts(s.encode()) == unrolled.dfa.accepts(s.encode()), s


def test_the_language_is_exact_at_every_length(toy_vocab: Vocabulary) -> None:
    art = maskc.compile_json_schema({"type": "string", "minLength": 13, "maxLength": 40}, toy_vocab, cache=False)
    assert art.dfa.counters is not None and art.dfa.counters.num_loops == 2
    for n in range(0, 50):
        for text in ("a" * n, "é" * n, "\\n" * n, "\\u00e9" * n):  # n characters each
            m = art.matcher()
            ok = m.accept_string('"' + text + '"') and m.can_terminate()
            assert ok == (13 <= n <= 40), (text, n)


def test_conflicting_counts_fall_back_to_copies(toy_vocab: Vocabulary) -> None:
    # Two loops live at once, and a loop re-entered while it may still run: copies instead.
    for pattern in ["a{0,50}a{0,50}", "(a{0,40}b)*"]:
        art = maskc.compile_regex(pattern, toy_vocab, cache=False)
        assert art.dfa.counters is None, pattern
    art = maskc.compile_regex("a{0,50}a{0,50}", toy_vocab, cache=False)
    assert art.dfa.accepts(b"a" * 100) and not art.dfa.accepts(b"a" * 101)


def test_a_conflict_unrolls_only_the_loops_it_names(toy_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    # The two loops of a{0,50}a{0,50} would be live at once: they unroll, and the string of
    # b's after them still counts (as the digits of an integer range beside a long string).
    pattern = "(a{0,50}a{0,50}-|1)b{0,400}"
    counted, unrolled = _pair("regex", pattern, toy_vocab, monkeypatch)
    assert counted.dfa.counters is not None and counted.dfa.counters.num_loops == 1
    assert counted.num_states * 3 < unrolled.num_states
    for n_a, n_b in [(0, 0), (100, 400), (101, 0), (0, 401), (37, 399), (100, 401), (-1, 400), (-1, 401)]:
        text = ("1" if n_a < 0 else "a" * n_a + "-") + "b" * n_b
        m = counted.matcher()
        ok = m.accept_string(text) and m.can_terminate()
        assert ok == (n_a <= 100 and n_b <= 400) == unrolled.dfa.accepts(text.encode()), (n_a, n_b)
    _walk_both(counted, unrolled, toy_vocab, walks=6, seed=3, every_token=True)


def test_an_integer_range_unrolls_beside_a_counted_string(byte_vocab: Vocabulary) -> None:
    # One byte a token: the digits of the range would count too, and conflict with one
    # another; the string's characters still count (not 2,048 copies).
    schema = {"type": "object", "additionalProperties": False, "required": ["n", "s"],
              "properties": {"n": {"type": ["integer", "null"], "minimum": 0, "maximum": 2147483647},
                             "s": {"type": "string", "maxLength": 2048}}}
    art = maskc.compile_json_schema(schema, byte_vocab, cache=False)
    assert art.dfa.counters is not None and art.num_states < 1000
    for n, length, ok in [(2147483647, 2048, True), (2147483648, 1, False), (0, 2049, False), (1999999999, 0, True),
                          ("null", 7, True), (21474836470, 3, False)]:
        m = art.matcher()
        got = m.accept_string('{"n":%s,"s":"%s"}' % (n, "x" * length)) and m.can_terminate()
        assert got == ok, (n, length)


def test_size_does_not_grow_with_the_bound(deepseek: Vocabulary) -> None:
    sizes = set()
    for n in (2_000, 100_000, 1_000_000):
        art = maskc.compile_json_schema({"type": "string", "maxLength": n}, deepseek, cache=False)
        assert art.dfa.counters is not None
        sizes.add((art.num_states, art.num_masks))
    assert len(sizes) == 1
    m = art.matcher()
    assert m.accept_string('"' + "x" * 999_999)
    assert m.accept_string("x") and not m.accept_string("x")  # the millionth character, then no more
    assert m.accept_string('"') and m.can_terminate()


def test_a_long_walk_counts_across_tokens_and_rollback(deepseek: Vocabulary) -> None:
    art = maskc.compile_json_schema({"type": "string", "maxLength": 1000}, deepseek, cache=False)
    m = art.matcher()
    quote = deepseek.token_id('"')
    ten = next(i for i, t in enumerate(deepseek.token_bytes) if t == b"x" * 10) if b"x" * 10 in deepseek.token_bytes else None
    piece = ten if ten is not None else deepseek.token_id("x")
    width = len(deepseek.token_bytes[piece])
    assert m.accept_token(quote)
    written = 0
    while written + width <= 1000:
        assert m.accept_token(piece)
        written += width
    assert not m.accept_token(piece) or written + width <= 1000
    m.rollback(3)
    written -= 3 * width
    assert m.count <= written
    while written + width <= 1000:
        assert m.accept_token(piece)
        written += width
    assert not m.accept_token(piece)
    assert m.accept_token(quote) and m.can_terminate()


def test_check_proves_eos_reachable(toy_vocab: Vocabulary) -> None:
    art = maskc.compile_json_schema({"type": "string", "minLength": 20, "maxLength": 60}, toy_vocab, cache=False)
    assert art.dfa.counters is not None
    assert eos_reachability(art, toy_vocab).proved


def test_counted_artifacts_round_trip_and_refuse_tampering(toy_vocab: Vocabulary, tmp_path: Path) -> None:
    art = maskc.compile_json_schema({"type": "string", "maxLength": 30}, toy_vocab, cache=False)
    back = maskc.load_artifact(art.save(tmp_path / "a.safetensors"), tokenizer=toy_vocab)
    assert back.dfa.counters is not None
    for name in ("region", "exit", "span"):
        assert np.array_equal(getattr(back.dfa.counters, name), getattr(art.dfa.counters, name))
    m = back.matcher()
    assert m.accept_string('"' + "a" * 30) and not m.accept_string("a")

    def rewrite(tensors: dict[str, np.ndarray], **meta: str) -> Path:
        return _rewritten(art, tensors, tmp_path, **meta)

    no_counts = {k: v for k, v in art.tensors.items() if not k.startswith("count.")}
    with pytest.raises(maskc.ArtifactCorrupt):  # version 4 without its loops
        maskc.load_artifact(rewrite(no_counts))
    with pytest.raises(maskc.ArtifactCorrupt):  # loops in a version-3 file
        maskc.load_artifact(rewrite(dict(art.tensors), format_version=fmt.FORMAT_VERSION))
    bad_exit = dict(art.tensors, **{"count.exit": np.full_like(art.tensors["count.exit"], art.num_states)})
    bad_span = dict(art.tensors, **{"count.span": np.zeros_like(art.tensors["count.span"])})
    bad_region = dict(art.tensors, **{"count.region": np.full_like(art.tensors["count.region"], 7)})
    for tensors in (bad_exit, bad_span, bad_region):
        with pytest.raises(maskc.ArtifactCorrupt):
            maskc.load_artifact(rewrite(tensors))
    with pytest.raises(maskc.ArtifactCorrupt):  # version 7 without the loops' parents
        maskc.load_artifact(rewrite(dict(art.tensors), format_version=fmt.NESTED_FORMAT_VERSION))
    with pytest.raises(maskc.ArtifactVersionMismatch):
        maskc.load_artifact(rewrite(dict(art.tensors), format_version="8"))


def test_counters_validate_their_tables() -> None:
    i32 = np.int32
    Counters(np.array([-1, 0, 0], i32), np.array([-1, 2, -1], i32), np.array([5], i32))
    with pytest.raises(ValueError):
        Counters(np.array([-1, 0, 0], i32), np.array([-1, 3, -1], i32), np.array([5], i32))  # exit out of range
    with pytest.raises(ValueError):
        Counters(np.array([-1, -1, 0], i32), np.array([-1, 2, -1], i32), np.array([5], i32))  # head outside loops
    with pytest.raises(ValueError):
        Counters(np.array([-1, 0, 0], i32), np.array([-1, 2, -1], i32), np.array([0], i32))  # empty span


@pytest.mark.parametrize("schema", [
    {"type": "string", "minLength": 13, "maxLength": 40},
    {"type": "string", "pattern": "^(ab|b)*$", "minLength": 14, "maxLength": 45},
    {"type": "array", "items": {"enum": ["ab", "b", True]}, "minItems": 10, "maxItems": 30},
])
def test_audit_prefixes_reach_every_state_through_loop_exits(schema: dict[str, object], toy_vocab: Vocabulary) -> None:
    from maskc.compiler.audit.states import Prefixes

    art = maskc.compile_json_schema(schema, toy_vocab, cache=False)
    counters = art.dfa.counters
    assert counters is not None
    prefixes = Prefixes(art.dfa)
    for s in range(art.num_states):
        assert prefixes.reachable(s)
        assert counters.walk(art.dfa, 0, 0, prefixes.prefix(s))[0] == s


def test_jump_forward_at_the_bound(toy_vocab: Vocabulary) -> None:
    art = maskc.compile_json_schema({"type": "object", "properties": {"a": {"type": "string", "maxLength": 30}},
                                     "required": ["a"]}, toy_vocab, cache=False)
    assert art.dfa.counters is not None
    m = art.matcher()
    assert m.accept_string('{"a":"' + "a" * 29)
    assert m.find_jump_forward_string() == ""  # one more character, or the end of the string
    assert m.accept_string("b")
    assert m.find_jump_forward_string() == '"}'  # the bound is reached: only the close is left
    assert not m.accept_string("a") and m.accept_string('"}') and m.can_terminate()


# Real schemas (MaskBench, DeepSeek): strings bounded by maxLength 500..8192 among other
# members, counted against the same schema unrolled, through walks that reach the bounds.
@pytest.mark.slow
def test_a_pattern_keeps_its_finishing_room_on_a_real_vocabulary(deepseek: Vocabulary,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # Tokens of up to 128 bytes walked inside the loop must leave `.+[@].+[.]___` room to
    # finish under the bound (a loop one token's reach away from it allowed tokens that did not).
    schema = {"type": "string", "pattern": ".+[@].+[.]___", "minLength": 10, "maxLength": 400}
    counted, unrolled = _pair("json_schema", schema, deepseek, monkeypatch)
    assert counted.summary()["counted_loops"] == 1 and counted.summary()["states"] < unrolled.summary()["states"]
    for seed in range(4):
        assert _walk_both(counted, unrolled, deepseek, walks=4, seed=seed, every_token=False) > 150


REAL_COUNTED = ["Github_easy---o9900.json", "Github_trivial---o48167.json", "Snowplow---sp_66_Normalized.json"]


@pytest.mark.slow
@pytest.mark.parametrize("name", REAL_COUNTED)
def test_real_schemas_count_as_they_unroll(name: str, deepseek: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.maskbench import MASKBENCH_HOWTO, maskbench_dir

    folder = maskbench_dir()
    if folder is None:
        pytest.skip(MASKBENCH_HOWTO)
    import json

    schema = json.loads((folder / name).read_text())["schema"]
    counted, unrolled = _pair("json_schema", schema, deepseek, monkeypatch)
    assert counted.summary()["counted_loops"] >= 1 and unrolled.summary()["counted_loops"] == 0
    assert counted.summary()["states"] < unrolled.summary()["states"]
    assert _walk_both(counted, unrolled, deepseek, walks=3, seed=11, every_token=False, steps=400) > 300


def test_min_bytes_bounds_the_shortest_string() -> None:
    # exact through sequences, unions, repeats, automata and object members; a lower bound
    # through an intersection; nothing known of a reference
    from maskc.compiler.ir import Automaton, Fields, Product, RuleRef, alt, lit, rep, seq
    from maskc.compiler.nfa import min_bytes

    two = Automaton((((97, 97, 1),), ((98, 98, 2),), ()), frozenset({2}))  # "ab"
    member = seq(lit('"k":'), alt(lit("1"), lit("22")))
    fields = Fields(((member, True), (lit('"o":0'), False), (member, True)), lit("{"), lit(","), lit("}"), lit("{}"))
    for node, expected in [
        (seq(lit("abc"), alt(lit("x"), lit("yz"))), 4),
        (rep(lit("ab"), 3, 9), 6),
        (rep(lit("ab"), 0, 9), 0),
        (two, 2),
        (fields, 1 + 5 + 1 + 5 + 1),  # both required members, one separator
        (Fields(((member, False),), lit("{"), lit(","), lit("}"), lit("{}")), 2),  # the empty object
        (Product(lit("abcd"), rep(lit("a"), 0, None), "and"), 4),  # (empty in fact: a bound)
        (seq(lit("ab"), RuleRef("x")), 2),
    ]:
        assert min_bytes(node) == expected, node


def test_last_bytes_holds_every_last_byte() -> None:
    # exact where the node says (the bytes into an accepting state of its minimal DFA), a
    # superset through a difference; every byte for a reference
    from maskc.compiler.ir import Automaton, Fields, Product, RuleRef, alt, lit, rep, seq
    from maskc.compiler.nfa import _completing_bytes, last_bytes
    from maskc.compiler.product import operand_dfa

    two = Automaton((((97, 97, 1),), ((98, 98, 2),), ()), frozenset({2}))  # "ab"
    member = seq(lit('"k":'), alt(lit("1"), lit("22")))
    fields = Fields(((member, False), (lit('"o":0'), False)), lit("{"), lit(","), lit("}"), lit("[]"))
    for node, expected in [
        (seq(lit("ab"), rep(lit("c"), 0, 2), alt(lit("x"), lit(""))), b"bcx"),  # back past the optional parts
        (seq(lit("ab"), lit("c")), b"c"),
        (alt(lit("1"), seq(lit("2"), rep(lit("34"), 1, 3))), b"14"),
        (two, b"b"),
        (fields, b"]}"),
        (Product(rep(alt(lit("a"), lit("b")), 1, None), rep(lit("a"), 0, None), "and"), b"a"),
        (Product(rep(alt(lit("a"), lit("b")), 1, None), rep(lit("a"), 0, None), "minus"), b"ab"),
    ]:
        got = last_bytes(node)
        assert got == expected, node
        assert set(_completing_bytes(operand_dfa(node, max_states=10_000, deadline=None))) <= set(got), node
    assert last_bytes(seq(lit("ab"), RuleRef("x"))) == bytes(range(256))


# Items of a few bytes under a long token: the horizon alone would keep 14 items between a
# loop and a bound, while no token here completes more than three `{}` items.
_BRACES = ["[", "]", "{", "}", ",", "{}", "},{", "},{}", "{},", "{},{", "{},{},{},{", "[],[],[],[", "}]", "]}",
           "}}}}}}", "x" * 40, "<eos>", "<pad>"]


def test_items_reach_counts_spaced_completing_bytes() -> None:
    vocab = Vocabulary.from_tokens(_BRACES + ["},{},{}" + "<"], eos="<eos>", special=["<pad>"], name="braces")
    table = pipeline.token_table(vocab)
    assert table.items_reach(b"}", 1) == 6  # "}}}}}}": one-byte items end at every brace
    assert table.items_reach(b"}", 2) == 3  # ... every other one
    assert table.items_reach(b"}", 3) == 3  # "},{},{}<": braces at 0, 3 and 6
    assert table.items_reach(b"}", 4) == 2
    assert table.items_reach(b"<", 3) == 1
    assert table.items_reach(b"]", 3) == 3  # "[],[],[],["
    assert table.items_reach(b"q", 1) == 0
    special = Vocabulary.from_tokens(["{", "}", "<eos>", "}}}}"], eos="<eos>", special=["}}}}"], name="special")
    assert pipeline.token_table(special).items_reach(b"}", 1) == 1  # a special token is never walked


@pytest.mark.parametrize("schema", [
    {"type": "array", "items": {"type": "object", "additionalProperties": False}, "maxItems": 20},
    {"type": "array", "items": {"type": "object", "additionalProperties": False}, "minItems": 9, "maxItems": 24},
    {"type": "array", "items": {"type": "array", "maxItems": 0}, "maxItems": 20},
])
def test_loops_keep_what_the_tokens_can_complete_from_a_bound(schema: dict[str, object],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    vocab = Vocabulary.from_tokens(_BRACES, eos="<eos>", special=["<pad>"], name="braces")
    counted, unrolled = _pair("json_schema", schema, vocab, monkeypatch)
    # a loop only because the tokens complete at most three items (the horizon alone: none)
    assert counted.dfa.counters is not None and counted.num_states < unrolled.num_states
    assert _walk_both(counted, unrolled, vocab, walks=60, seed=3, every_token=True) >= 3
    for n in range(0, 30):
        for item in ("{}", "[]"):
            data = ("[" + ",".join([item] * n) + "]").encode()
            assert counted.dfa.accepts(data) == unrolled.dfa.accepts(data), (schema, n)


@pytest.mark.parametrize("limit", [500, 600])
def test_an_item_past_the_state_budget_reports_the_budget_set(limit: int, toy_vocab: Vocabulary) -> None:
    # The counted item's DFA is built within what the states before it left of the budget;
    # the error names the budget a user set (and can raise), not the part of it that was left.
    schema = {"type": "object", "additionalProperties": False, "required": ["a", "b"],
              "properties": {"a": {"type": "string", "maxLength": 30},
                             "b": {"type": "array", "items": {"type": "string", "pattern": "^" + "[a-f][0-9]" * 100 + "$"},
                                   "maxItems": 1000}}}  # (no repeat of its own: the item is not counted inside)
    opts = maskc.CompileOptions(limits=maskc.Limits(max_states=5000, max_nfa_states=limit))
    with pytest.raises(StateLimitExceeded) as err:
        maskc.compile_json_schema(schema, toy_vocab, options=opts)
    assert err.value.limit == limit and f"limit of {limit}" in str(err.value)


@pytest.mark.parametrize(("name", "counted"), [
    ("long run of a two-byte item", True),
    ("item not prefix-free", False),
    ("bounds within a token's reach", False),
    ("long run inside a sequence", True),
])
def test_holds_counted_loop_says_what_the_lowering_does(name: str, counted: bool) -> None:
    # what a refusal's hint claims of an item ("alone it compiles as a counted loop") is
    # what compiling the item alone with the same horizon builds
    from maskc.compiler.ir import alt, lit, rep, seq
    from maskc.compiler.nfa import holds_counted_loop
    from maskc.compiler.options import CompileOptions

    node = {
        "long run of a two-byte item": rep(lit("ab"), 0, 5000),
        "item not prefix-free": rep(alt(lit("a"), lit("ab")), 0, 5000),
        "bounds within a token's reach": rep(lit("ab"), 0, 34),
        "long run inside a sequence": seq(lit("["), rep(lit("xy"), 10, 3000), lit("]")),
    }[name]
    built = pipeline.grammar_dfa(node, CompileOptions(), horizon=64)
    assert (built.counters is not None) is counted
    assert holds_counted_loop(node, 64) is counted


@pytest.mark.parametrize("schema", [
    {"type": "array", "items": {"type": "string", "maxLength": 30}, "maxItems": 40},
    {"type": "array", "items": {"type": "string", "minLength": 14, "maxLength": 30}, "minItems": 13, "maxItems": 40},
    {"type": "array", "items": {"type": "string", "maxLength": 30}, "minItems": 20},
    # three levels: arrays of arrays of strings, each bound far beyond a token
    {"type": "array", "items": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 20},
     "maxItems": 20},
])
def test_counted_loops_nest_with_the_unrolled_masks(schema: dict[str, object], toy_vocab: Vocabulary,
                                                    monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # An item with a counted loop of its own is counted with it: the outer loop's copy holds
    # the inner loop (its parent), and the runtime keeps a count per loop the state is in.
    counted, unrolled = _pair("json_schema", schema, toy_vocab, monkeypatch)
    c = counted.dfa.counters
    assert c is not None and c.nested and c.parent is not None
    assert counted.metadata["format_version"] == fmt.NESTED_FORMAT_VERSION
    assert counted.summary()["nested_loops"] == int((c.parent >= 0).sum()) > 0
    assert counted.num_states * 10 < unrolled.num_states
    assert worst_case_length(counted.dfa).max_bytes == worst_case_length(unrolled.dfa).max_bytes
    back = maskc.load_artifact(counted.save(tmp_path / "a.safetensors"), tokenizer=toy_vocab)
    assert back.dfa.counters is not None and np.array_equal(back.dfa.counters.parent, c.parent)
    assert _walk_both(back, unrolled, toy_vocab, walks=30, seed=1, every_token=True) >= 2
    rng = random.Random(7)
    inner = [0, 1, 13, 14, 19, 20, 21, 29, 30, 31]
    for _ in range(1500):
        n = rng.choice([0, 1, 12, 13, 19, 20, 21, 39, 40, 41])
        items = ['"' + "ab"[rng.randrange(2)] * rng.choice(inner) + '"' for _ in range(n)]
        if rng.random() < 0.3:  # the third schema's items are arrays of strings
            items = ["[" + ",".join(items[:rng.choice([0, 1, 19, 20, 21])]) + "]" for _ in range(n)]
        data = ("[" + ",".join(items) + "]").encode()
        if rng.random() < 0.2:
            data = data[:rng.randrange(len(data) + 1)]
        assert counted.dfa.accepts(data) == unrolled.dfa.accepts(data), data[:60]


def test_nested_counts_are_a_stack(toy_vocab: Vocabulary) -> None:
    # [ up to 40 strings of up to 30 characters ]: inside a string the matcher counts the
    # items before it and the characters of the string; leaving the string drops its count.
    art = maskc.compile_json_schema({"type": "array", "items": {"type": "string", "maxLength": 30},
                                     "maxItems": 40}, toy_vocab, cache=False)
    m = art.matcher()
    assert m.accept_string("[" + '"a",' * 25 + '"' + "b" * 20)
    depths = [len(m.counts), m.count]
    assert m.accept_string('",')
    assert len(m.counts) < depths[0]
    assert not m.accept_string('"' + "b" * 31) and m.accept_string('"' + "b" * 30 + '"')
    assert m.accept_string(',"a"' * 13) and not m.accept_string(',"a"') and m.accept_string("]")
    assert m.can_terminate()


def test_nested_counters_validate_their_parents(toy_vocab: Vocabulary, tmp_path: Path) -> None:
    i32 = np.int32
    region, exit_, span = np.array([-1, 0, 1], i32), np.array([-1, 2, 1], i32), np.array([5, 6], i32)
    assert Counters(region, exit_, span, np.array([-1, 0], i32)).chains() == [(0,), (0, 1)]
    for parent in ([0, -1], [-1, 1], [-1, 2], [-2, 0], [-1]):  # a parent after its loop, itself, out of range
        with pytest.raises(ValueError):
            Counters(region, exit_, span, np.array(parent, i32))
    art = maskc.compile_json_schema({"type": "array", "items": {"type": "string", "maxLength": 30},
                                     "maxItems": 40}, toy_vocab, cache=False)
    assert art.metadata["format_version"] == fmt.NESTED_FORMAT_VERSION

    def rewrite(tensors: dict[str, np.ndarray], **meta: str) -> Path:
        return _rewritten(art, tensors, tmp_path, **meta)

    no_parent = {k: v for k, v in art.tensors.items() if k != fmt.NEST_TENSOR}
    with pytest.raises(maskc.ArtifactCorrupt):  # version 7 without its parents
        maskc.load_artifact(rewrite(no_parent))
    with pytest.raises(maskc.ArtifactCorrupt):  # parents in a version-6 file
        maskc.load_artifact(rewrite(dict(art.tensors), format_version=fmt.COUNTED_FORMAT_VERSION))
    parent = art.tensors[fmt.NEST_TENSOR]
    for bad in (np.full_like(parent, parent.shape[0]), np.arange(parent.shape[0], dtype=i32), parent[:-1]):
        with pytest.raises(maskc.ArtifactCorrupt):
            maskc.load_artifact(rewrite(dict(art.tensors, **{fmt.NEST_TENSOR: bad})))


@pytest.mark.parametrize("pattern", ["(b[ab]{0,40}-){0,30}", "(-(a{3,30}|1{20,50}):){5,40}", "2(\\[(ab|1){0,25}\\]){10,}"])
def test_a_regex_nests_its_counts(pattern: str, toy_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    counted, unrolled = _pair("regex", pattern, toy_vocab, monkeypatch)
    assert counted.dfa.counters is not None and counted.dfa.counters.nested
    assert counted.num_states * 10 < unrolled.num_states
    assert _walk_both(counted, unrolled, toy_vocab, walks=25, seed=2, every_token=True) >= 4


def _random_array(rng: random.Random, depth: int = 0) -> dict[str, object]:
    """An array schema whose items may hold counts of their own (strings, objects, arrays),
    beside items that do not (integers, enums, patterns)."""

    def string() -> dict[str, object]:
        lo = rng.choice([0, 0, 1, 5, 14, 20])
        out: dict[str, object] = {"type": "string", "minLength": lo}
        if rng.random() < 0.5:
            out["maxLength"] = lo + rng.randrange(0, 40)
        return out

    def item(d: int) -> dict[str, object]:
        r = rng.random()
        if r < 0.1:
            return {"type": "integer"}
        if r < 0.15:
            return {"enum": ["ab", "b", 12]}
        if r < 0.2:
            return {"type": "string", "pattern": "^[ab]+$", "maxLength": rng.choice([5, 30, 45])}
        if d > 1 or r < 0.45:
            return string()
        if r < 0.7:
            props = {k: item(d + 1) for k in rng.sample("ab1", rng.randrange(1, 4))}
            return {"type": "object", "properties": props, "additionalProperties": False,
                    "required": list(props)[:rng.randrange(0, len(props) + 1)]}
        return _random_array(rng, d + 1)

    lo = rng.choice([0, 0, 1, 10, 13])
    out: dict[str, object] = {"type": "array", "items": item(depth), "minItems": lo}
    if rng.random() < 0.5:
        out["maxItems"] = lo + rng.randrange(5, 40)
    return out


def test_random_nested_counts_match_the_unrolled_grammar(toy_vocab: Vocabulary,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # Generated arrays whose counts nest, each compared token by token with its unrolled
    # grammar (every token at every step of a few walks), and their worst-case lengths.
    rng = random.Random(11)
    nested = 0
    while nested < 10:
        schema = _random_array(rng)
        counted, unrolled = _pair("json_schema", schema, toy_vocab, monkeypatch)
        c = counted.dfa.counters
        if c is None or not c.nested:
            continue
        nested += 1
        assert worst_case_length(counted.dfa).max_bytes == worst_case_length(unrolled.dfa).max_bytes, schema
        _walk_both(counted, unrolled, toy_vocab, walks=4, seed=nested, every_token=True, steps=200)


def _zeros_at_start(art: Artifact) -> tuple[int, ...]:
    c = art.dfa.counters
    assert c is not None
    return (0,) * len(c.chains()[int(c.region[0])]) if int(c.region[0]) >= 0 else ()


@pytest.mark.parametrize(("pattern", "kind"), [("a{0,40}b", maskc.CountingMatcher),
                                               ("(b[ab]{0,40}-){0,30}", maskc.NestedCountingMatcher)])
def test_a_reset_counting_matcher_starts_over(pattern: str, kind: type, toy_vocab: Vocabulary) -> None:
    # reset() empties the counts as a new matcher has them (a regression: it once put the
    # matcher's all-zero bitmask row in place of the counts, and the next token raised)
    art = maskc.compile_regex(pattern, toy_vocab, cache=False)
    m = art.matcher()
    assert type(m) is kind
    text = [toy_vocab.token_bytes.index(t) for t in (b"b", b"ab", b"ab", b"a", b"-", b"b", b"a")]
    walked = [m.accept_token(t) for t in text]
    assert any(walked)
    m.reset()
    fresh = art.matcher()
    assert (m.state, m.count, m.num_accepted) == (fresh.state, 0, 0)
    if kind is maskc.NestedCountingMatcher:
        assert m.counts == fresh.counts == _zeros_at_start(art)
    for t in text:
        assert m.accept_token(t) == fresh.accept_token(t)
        assert (m.state, m.count) == (fresh.state, fresh.count)
        assert np.array_equal(m.allowed_token_ids(), fresh.allowed_token_ids())


@pytest.mark.parametrize("pattern", ["(-(a{3,30}|1{20,50}):){5,40}", "(-a{3,30}:){60,90}"])
def test_a_grammar_that_begins_inside_nested_loops(pattern: str, toy_vocab: Vocabulary,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # The first state is inside a loop: every walk from it starts with a count for that
    # loop (a regression: raw bytes walked from the start lost the inner loop's count, and
    # `1` twenty times no longer allowed the `:` after it)
    counted, unrolled = _pair("regex", pattern, toy_vocab, monkeypatch)
    c = counted.dfa.counters
    assert c is not None and c.nested and int(c.region[0]) >= 0
    one, colon = (toy_vocab.token_bytes.index(t) for t in (b"1", b":"))
    for first in ("-", "-aaa:-", "-aaa:-aaaa:-"):
        ma, mb = counted.matcher(), unrolled.matcher()
        assert ma.accept_string(first) and mb.accept_string(first)
        for k in range(55):
            assert np.array_equal(ma.allowed_token_ids(), mb.allowed_token_ids()), (first, k)
            if not mb.accept_token(one):
                assert not ma.accept_token(one)
                break
            assert ma.accept_token(one)
        assert (colon in ma.allowed_token_ids()) == (colon in mb.allowed_token_ids())
    for n in range(0, 60, 3):
        for text in ("-" + "1" * n + ":", ("-aaa:" * n), "-aaa:" * n + "-" + "1" * 20 + ":"):
            assert counted.dfa.accepts(text.encode()) == unrolled.dfa.accepts(text.encode()), text
    with pytest.raises(ValueError, match="one per loop"):
        c.walk_stack(counted.dfa, 0, (), b"-")


@pytest.mark.parametrize(("kind", "source"), [
    ("regex", "(-(a{3,30}|1{20,50}):){5,40}"),
    ("regex", "(a{10,20}b){4,}"),
    ("json_schema", {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 14}),
    ("json_schema", {"type": "string", "pattern": "^(ab|b)*$", "minLength": 14, "maxLength": 45}),
])
def test_every_matcher_call_agrees_with_the_unrolled_grammar(kind: str, source: object, toy_vocab: Vocabulary,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # Random sequences of the whole API (tokens, raw bytes, rollbacks, resets, fills) on the
    # counted and the unrolled artifact side by side: the calls a serving loop makes, not
    # only token steps (a reset and raw bytes from the start each once lost a count).
    counted, unrolled = _pair(kind, source, toy_vocab, monkeypatch)
    assert counted.dfa.counters is not None
    rng = random.Random(7)
    pieces = ["a", "b", "ab", "-", ":", '"', "1", "aaaa", "]", ",", '"a"', "[", '["ab",']
    rows = np.zeros((2, 2), dtype=np.int32), np.zeros((2, 2), dtype=np.int32)
    for _walk in range(12):
        ma, mb = counted.matcher(), unrolled.matcher()
        for step in range(150):
            op = rng.random()
            if op < 0.6:
                allowed = mb.allowed_token_ids().tolist()
                t = rng.choice(allowed) if allowed and rng.random() < 0.9 else rng.randrange(toy_vocab.vocab_size)
                assert ma.accept_token(t) == mb.accept_token(t), step
            elif op < 0.7:
                n = rng.randint(0, min(3, mb.num_accepted))
                ma.rollback(n)
                mb.rollback(n)
            elif op < 0.75:
                ma.reset()
                mb.reset()
            elif op < 0.85:
                piece = rng.choice(pieces)
                assert ma.accept_string(piece) == mb.accept_string(piece), (step, piece)
            else:
                i = rng.randrange(2)
                ma.fill_next_token_bitmask(rows[0], i)
                mb.fill_next_token_bitmask(rows[1], i)
                assert np.array_equal(rows[0][i], rows[1][i]), step
            assert np.array_equal(ma.allowed_token_ids(), mb.allowed_token_ids()), step
            assert (ma.can_terminate(), ma.is_terminated(), ma.num_accepted) == \
                (mb.can_terminate(), mb.is_terminated(), mb.num_accepted), step
            forced = ma.find_jump_forward_bytes()
            assert mb.find_jump_forward_bytes().startswith(forced), step  # (a loop may stop it early)


# The toy's tokens and runs reaching 12 to 24 bytes: loops planned for them keep more copies
# from a bound than the toy's own 5-byte tokens need.
LONGER = ["{", "}", "[", "]", ":", ",", '"', "a", "b", "1", "2", "-", " ", '",', '"a"', "ab", "ab" * 6,
          '"ab","ab",' * 2, "1," * 8, " " * 24, "<eos>"]


@pytest.mark.parametrize("schema", [
    {"type": "string", "maxLength": 40},
    {"type": "array", "items": {"type": "string", "maxLength": 5}, "minItems": 3, "maxItems": 50},
    {"type": "array", "items": {"enum": ["ab", "b", 12]}, "maxItems": 150},
    {"type": "string", "pattern": "^(ab|b)*$", "minLength": 14, "maxLength": 45},
])
def test_a_plan_for_another_tokenizers_longer_tokens_keeps_each_ones_masks(
        schema: dict[str, object], toy_vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    """Compiled together, tokenizers plan their counted loops for the longest token among
    them (one automaton for all): for the tokenizer with shorter tokens, that automaton keeps
    more copies from each bound than its own plan, and gives the same masks as its own plan
    and as the unrolled grammar at every step."""
    longer = Vocabulary.from_tokens(LONGER, eos="<eos>", name="longer")
    own, unrolled = _pair("json_schema", schema, toy_vocab, monkeypatch)
    with pipeline.sharing_automata([longer, toy_vocab]):
        first = maskc.compile_json_schema(schema, longer, cache=False)
        joint = maskc.compile_json_schema(schema, toy_vocab, cache=False)
    assert first.timings.get("shared_automaton") is None and joint.timings.get("shared_automaton") == 1.0
    assert joint.dfa.counters is not None
    assert joint.summary()["states"] > own.summary()["states"]  # (copies for 24-byte tokens)
    assert first.metadata["content_sha256"] == maskc.compile_json_schema(schema, longer, cache=False).metadata[
        "content_sha256"]  # (the longest tokenizer's plan is its own)
    assert _walk_both(joint, own, toy_vocab, walks=20, seed=3, every_token=True) >= 2
    assert _walk_both(joint, unrolled, toy_vocab, walks=20, seed=4, every_token=True) >= 2
