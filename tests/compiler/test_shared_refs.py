"""A grammar over a state limit because its ``$ref`` targets are copied at every use: the
pipeline compiles the same language with each large target used more than once a rule of
its own, called rather than copied (a pushdown grammar), and lists no restriction."""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest

import maskc
from maskc.artifacts.artifact import Artifact
from maskc.compiler.errors import StateLimitExceeded, TimeLimitExceeded
from maskc.compiler.frontends.json_schema import schema_to_ir
from maskc.compiler.frontends.json_schema.refs import SHARED_REFS_INLINE_MAX_NODES
from maskc.compiler.options import CompileOptions, Limits
from maskc.compiler.pipeline import compile_grammar
from maskc.compiler.rules import resolve_rules
from maskc.compiler.vocab import byte_tokenizer
from tests.helpers import compact

VOCAB = byte_tokenizer()
# An object of ten optional enum members (required k0): each use follows its own key, so
# inlined, every copy stays in the minimal DFA (837 states for five uses).
ITEM = {"type": "object",
        "properties": {f"k{i}": {"enum": [f"value{i}x{j}" for j in range(8)]} for i in range(10)},
        "required": ["k0"], "additionalProperties": False}
SCHEMA = {"$defs": {"item": ITEM}, "type": "object",
          "properties": {f"p{i}": {"$ref": "#/$defs/item"} for i in range(5)},
          "required": ["p0", "p1"], "additionalProperties": False}
TIGHT = CompileOptions(limits=Limits(max_states=800))
ROOMY = CompileOptions(limits=Limits(max_states=100_000))


def _item(rng: random.Random, valid: bool) -> Any:
    value: dict[str, Any] = {f"k{i}": f"value{i}x{rng.randrange(8)}"
                             for i in range(10) if i == 0 or rng.random() < .3}
    if not valid:
        match rng.randrange(3):
            case 0:
                del value["k0"]
            case 1:
                value["k9"] = "value9x8"
            case _:
                value["extra"] = 1
    return value


def _accepts(art: Artifact, value: Any) -> bool:
    m = art.matcher()
    return bool(m.accept_string(compact(value)) and m.can_terminate())


def _shared_form(schema: Any, options: CompileOptions) -> Artifact:
    """The artifact of the shared form itself (what the pipeline falls back to)."""
    grammar, not_enforced = schema_to_ir(schema, options, shared_refs=True)
    text = json.dumps(schema)
    return Artifact.from_compiled(
        compile_grammar("json_schema", text, grammar, VOCAB, options, not_enforced=not_enforced),
        VOCAB)


def test_the_shared_form_makes_a_rule_of_each_target_and_calls_the_large_ones() -> None:
    grammar, _ = schema_to_ir(SCHEMA, ROOMY)
    assert len(grammar.rules) == 1  # no recursion: every use inlined
    shared, _ = schema_to_ir(SCHEMA, ROOMY, shared_refs=True)
    assert shared.inline_max_nodes == SHARED_REFS_INLINE_MAX_NODES
    rules = resolve_rules(shared)
    assert rules.names == ("#", "#/$defs/item") and rules.sized == {"#/$defs/item"}
    small = {"$defs": {"n": {"enum": ["a", "b"]}}, "type": "array", "items": {"$ref": "#/$defs/n"},
             "prefixItems": [{"$ref": "#/$defs/n"}]}
    rules = resolve_rules(schema_to_ir(small, ROOMY, shared_refs=True)[0])
    assert rules.regular and not rules.sized  # a small target is inlined at each use


def test_over_the_limit_the_same_language_compiles_as_calls() -> None:
    with pytest.raises(StateLimitExceeded):  # (the shared form's front end alone, compiled inline)
        compile_grammar("json_schema", "", schema_to_ir(SCHEMA, TIGHT)[0], VOCAB, TIGHT)
    art = maskc.compile_json_schema(SCHEMA, VOCAB, options=TIGHT)
    assert art.pda is not None and art.dfa.num_states < 800 and not art.not_enforced
    assert art.timings["refused_ms"] > 0 and "shared_frontend_ms" in art.timings
    inline = maskc.compile_json_schema(SCHEMA, VOCAB, options=ROOMY)
    assert inline.pda is None and inline.dfa.num_states > 800
    validator = jsonschema.Draft202012Validator(SCHEMA)
    rng = random.Random(5)
    seen = {True: 0, False: 0}
    for _ in range(300):
        value = {f"p{i}": _item(rng, rng.random() < .9)
                 for i in range(5) if i < 2 or rng.random() < .5}
        if rng.random() < .1:
            del value["p1"]
        ok = validator.is_valid(value)
        seen[ok] += 1
        assert _accepts(art, value) == ok == _accepts(inline, value), value
    assert min(seen.values()) > 50


@pytest.mark.parametrize("spec, indent", [("pretty", 2), ("flexible", 1)])
def test_shared_targets_keep_the_layout_of_each_depth(spec: str, indent: int) -> None:
    """Under ``pretty`` whitespace a target's indentation depends on its depth (a rule per
    depth); the shared form writes what the inline grammar writes."""
    from maskc.compiler.options import parse_whitespace

    options = CompileOptions(limits=ROOMY.limits, whitespace=parse_whitespace(spec))
    art = _shared_form(SCHEMA, options)
    inline = maskc.compile_json_schema(SCHEMA, VOCAB, options=options)
    assert art.pda is not None and art.dfa.num_states < inline.dfa.num_states
    validator = jsonschema.Draft202012Validator(SCHEMA)
    rng = random.Random(1)
    accepted = 0
    for _ in range(200):
        value = {f"p{i}": _item(rng, rng.random() < .9)
                 for i in range(5) if i < 2 or rng.random() < .5}
        text = json.dumps(value, indent=indent)
        got = []
        for a in (art, inline):
            m = a.matcher()
            got.append(bool(m.accept_string(text) and m.can_terminate()))
        assert got[0] == got[1] and (not got[0] or validator.is_valid(value)), text
        accepted += got[0]
    assert accepted > 100


def test_a_target_under_not_or_in_a_union_is_compiled_in_place() -> None:
    """Where a target must compile otherwise than at the top (the complement of ``not``, the
    over-approximations of an overlapping ``oneOf``), it is built there, never a call of
    its rule: the shared form accepts exactly the schema's instances."""
    const = {"type": "object", "properties": {"k0": {"const": "value0x1"}}, "required": ["k0"]}
    schema = {"$defs": {"item": ITEM}, "type": "object",
              "properties": {"a": {"$ref": "#/$defs/item"}, "b": {"$ref": "#/$defs/item"},
                             "c": {"not": {"$ref": "#/$defs/item"}},
                             "d": {"oneOf": [{"$ref": "#/$defs/item"}, const]}},
              "additionalProperties": False}
    for semantics in ("generation", "exact"):
        options = CompileOptions(limits=ROOMY.limits, semantics=semantics)
        art = _shared_form(schema, options)
        assert art.pda is not None
        validator = jsonschema.Draft202012Validator(schema)
        rng = random.Random(7)
        seen = {True: 0, False: 0}
        for _ in range(300):
            value: dict[str, Any] = {}
            for key in "abcd":
                if rng.random() < .7:
                    other = rng.choice([1, "x", {}])
                    value[key] = _item(rng, rng.random() < .7) if rng.random() < .8 else other
            if "d" in value and rng.random() < .3:
                value["d"] = {"k0": "value0x1"} if rng.random() < .5 else {"k0": "value0x2"}
            ok = validator.is_valid(value)
            seen[ok] += 1
            if semantics == "generation" and ok and not art.matcher().accept_string(compact(value)):
                continue  # (generation semantics may write less than the schema admits: never more)
            assert _accepts(art, value) == ok, (semantics, value)
        assert min(seen.values()) > 30


def test_the_refusal_stands_where_the_shared_form_is_over_the_limit_too() -> None:
    """The first refusal is raised, and its hint names the form compiled after it and why
    that failed too; compiled again, the hint is the same (nothing accumulates)."""
    from maskc.compiler import pipeline

    hints = []
    with pipeline.sharing_automata():  # (the second compile recalls the first's refusals)
        for _ in range(2):
            with pytest.raises(StateLimitExceeded) as err:
                maskc.compile_json_schema(SCHEMA, VOCAB,
                                          options=CompileOptions(limits=Limits(max_states=150)))
            assert err.value.limit == 150
            assert err.value.message.startswith("DFA states exceeds the limit of 150")
            hints.append(err.value.hint)
    assert hints[0] == hints[1]
    assert hints[0] is not None and hints[0].count("Also tried:") == 1
    assert "each $ref target used more than once as a called rule (" in hints[0]
    assert "exceeds the limit of 150" in hints[0].split("Also tried:")[1]


def test_without_time_left_no_other_form_is_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    """A form's front end and compile run within the compile's own time: a refusal that
    used it all is final."""
    import time
    import types

    from maskc.compiler import pipeline

    clock = [0.0]
    monkeypatch.setattr(pipeline, "time", types.SimpleNamespace(monotonic=lambda: clock[0],
                                                                perf_counter=time.perf_counter))
    built: list[str] = []
    real = pipeline._front_end

    def front_end(key: tuple[str, str, str], *args: Any, **kwargs: Any) -> Any:
        built.append(key[0])
        return real(key, *args, **kwargs)

    def over_the_limit(*args: Any, **kwargs: Any) -> Any:
        clock[0] = 1e9  # (the attempt took the compile's time)
        raise StateLimitExceeded("DFA states", limit=800)

    monkeypatch.setattr(pipeline, "_front_end", front_end)
    monkeypatch.setattr(pipeline, "compile_grammar", over_the_limit)
    with pytest.raises(StateLimitExceeded):
        maskc.compile_json_schema(SCHEMA, VOCAB, options=TIGHT)
    assert built == ["json_schema"]

    def over_in_time(*args: Any, **kwargs: Any) -> Any:
        raise StateLimitExceeded("DFA states", limit=800)

    built.clear()
    clock[0] = 0.0
    monkeypatch.setattr(pipeline, "compile_grammar", over_in_time)
    with pytest.raises(StateLimitExceeded):
        maskc.compile_json_schema(SCHEMA, VOCAB, options=TIGHT)
    assert built == ["json_schema", "json_schema shared"]  # (with time left: tried, refused too)


def test_a_form_out_of_time_names_the_compiles_own_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A time-out in another form (raised against that form's time left, or by a deadline
    check, which knows no limit) is reported against the compile's own ``max_seconds``: in
    the hint where the shared form timed out, and as the error where the first form, lowered
    again within the whole NFA limit, timed out."""
    from maskc.compiler import pipeline

    real = pipeline.compile_grammar
    calls = [0]

    def out_of_time(*args: Any, **kwargs: Any) -> Any:  # (the first form compiles as it does)
        calls[0] += 1
        if calls[0] == 1:
            return real(*args, **kwargs)
        raise TimeLimitExceeded("compile time (s)", limit=0)

    monkeypatch.setattr(pipeline, "compile_grammar", out_of_time)
    shared_form = "each $ref target used more than once as a called rule (compile time (s) exceeds the limit of 45)"
    for schema, max_states, tried in ((SCHEMA, 800, shared_form), (UNION_OF_BOUNDS, 300, None)):
        calls[0] = 0  # (both over the first NFA limit; only the first has a shared form that applies)
        options = CompileOptions(limits=Limits(max_states=max_states, max_seconds=45))
        with pytest.raises(TimeLimitExceeded) as timed_out:
            maskc.compile_json_schema(schema, VOCAB, options=options)
        assert timed_out.value.limit == 45
        assert str(timed_out.value).startswith("compile time (s) exceeds the limit of 45")
        assert "limit of 0" not in str(timed_out.value)
        also = str(timed_out.value.hint).split("Also tried:")
        assert (also[1].strip() if len(also) > 1 else None) == tried


def test_each_form_resolves_its_rules_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compiled alone (no block shares it), a form's rules are resolved once: a form resolved
    to decide whether it applies is compiled with those rules, and the first form lowered
    again within the whole NFA limit reuses its own."""
    from maskc.compiler import pipeline

    resolved: list[int] = []
    real = pipeline.resolve_rules

    def resolve(grammar: Any, **kwargs: Any) -> Any:
        resolved.append(id(grammar))
        return real(grammar, **kwargs)

    monkeypatch.setattr(pipeline, "resolve_rules", resolve)
    for schema, max_states in ((SCHEMA, 150), (UNION_OF_BOUNDS, 250)):  # (refused after every form)
        resolved.clear()
        with pytest.raises(StateLimitExceeded):
            maskc.compile_json_schema(schema, VOCAB, options=CompileOptions(limits=Limits(max_states=max_states)))
        assert len(resolved) >= 2 and len(set(resolved)) == len(resolved)


# Nine strings of 3 to 11 characters, unioned: 1,378 NFA states (each bound's copies), 157
# DFA states once its copies merge; no $ref, so no shared form applies.
UNION_OF_BOUNDS = {"anyOf": [{"type": "string", "maxLength": k} for k in range(3, 12)]}
# Four uses of an item holding such a union: each use inlined, the NFA has 1,964 states
# for a minimal DFA within 800.
USES = {"$defs": {"item": {"type": "object", "required": ["name", "kind"],
                           "properties": {"name": {"anyOf": [{"type": "string", "maxLength": k} for k in range(2, 6)]},
                                          "kind": {"enum": ["alpha", "beta", "gamma"]}, "n": {"type": "integer"}}}},
        "type": "object", "properties": {k: {"$ref": "#/$defs/item"} for k in "abcd"}, "required": list("abcd")}


def _nfa_limits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The NFA limit of each regular lowering, as the pipeline asks it."""
    from maskc.compiler import pipeline

    limits: list[int] = []
    real = pipeline.lower

    def lower(node: Any, **kwargs: Any) -> Any:
        limits.append(kwargs["max_states"])
        return real(node, **kwargs)

    monkeypatch.setattr(pipeline, "lower", lower)
    return limits


def _without_first_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from maskc.compiler import pipeline

    monkeypatch.setattr(pipeline, "FIRST_FORM_NFA_STATES", 10**9)


def test_a_first_form_over_its_nfa_limit_compiles_within_the_whole_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lowered within 2 NFA states per DFA state first, refused there, no other form: the
    first form is lowered again within the whole limit, and compiles as it did without the
    first limit, byte for byte and without a restriction."""
    options = CompileOptions(limits=Limits(max_states=300))
    limits = _nfa_limits(monkeypatch)
    art = maskc.compile_json_schema(UNION_OF_BOUNDS, VOCAB, options=options)
    assert 600 in limits and limits[-1] == options.limits.max_nfa_states
    assert art.pda is None and art.not_enforced == []
    _without_first_limit(monkeypatch)
    limits.clear()
    plain = maskc.compile_json_schema(UNION_OF_BOUNDS, VOCAB, options=options)
    assert set(limits) == {options.limits.max_nfa_states}
    assert art.metadata["content_sha256"] == plain.metadata["content_sha256"]


def test_a_refusal_over_the_first_nfa_limit_is_never_what_a_user_sees(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the first form is over the DFA limit too, the refusal is the whole limit's, as
    without the first limit: the first limit is the pipeline's own, not a user's."""
    options = CompileOptions(limits=Limits(max_states=250))
    with pytest.raises(StateLimitExceeded) as first:
        maskc.compile_json_schema(UNION_OF_BOUNDS, VOCAB, options=options)
    _without_first_limit(monkeypatch)
    with pytest.raises(StateLimitExceeded) as plain:
        maskc.compile_json_schema(UNION_OF_BOUNDS, VOCAB, options=options)
    assert str(first.value) == str(plain.value) and first.value.limit == 250
    assert "500" not in str(first.value)


def test_over_the_first_nfa_limit_the_shared_form_compiles_the_same_language(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inlined form is over its first NFA limit and the shared form applies: the shared
    form (pushdown) is compiled, where the inlined one (regular) would have been without
    the first limit. The same language, no restriction either way."""
    options = CompileOptions(limits=Limits(max_states=800))
    shared = maskc.compile_json_schema(USES, VOCAB, options=options)
    _without_first_limit(monkeypatch)
    inlined = maskc.compile_json_schema(USES, VOCAB, options=options)
    assert shared.pda is not None and inlined.pda is None
    assert shared.not_enforced == inlined.not_enforced == []
    validator = jsonschema.Draft202012Validator(USES)
    rng = random.Random(7)
    verdicts = []
    for value in (_uses_value(rng) for _ in range(300)):
        verdicts.append(validator.is_valid(value))
        assert _accepts(shared, value) == _accepts(inlined, value) == verdicts[-1], value
    assert min(verdicts.count(True), verdicts.count(False)) > 30


def _uses_value(rng: random.Random) -> dict[str, Any]:
    """Four items for :data:`USES`; half of the values with one fault: a long name, an
    unknown kind, a missing member or a missing item."""
    value: dict[str, Any] = {}
    for k in "abcd":
        item: dict[str, Any] = {"name": "x" * rng.randrange(6), "kind": rng.choice(["alpha", "beta", "gamma"])}
        if rng.random() < .3:
            item["n"] = rng.randrange(-50, 50)
        value[k] = item
    if rng.random() < .5:
        item = value[rng.choice("abcd")]
        match rng.randrange(4):
            case 0:
                item["name"] = "x" * rng.randrange(6, 9)
            case 1:
                item["kind"] = "delta"
            case 2:
                del item["kind"]
            case _:
                del value[rng.choice("abcd")]
    return value
