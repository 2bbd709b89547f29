"""A pushdown grammar over a state limit whose only recursion is free-form values: the
pipeline compiles the regular grammar with those values nested a few levels deep (counted
loops count its bounded repeats), and lists the restriction."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

import maskc
from maskc.compiler.errors import StateLimitExceeded
from maskc.compiler.frontends.json_schema import schema_to_ir
from maskc.compiler.frontends.json_schema.refs import ONEOF_ANY_DEPTH
from maskc.compiler.options import CompileOptions, Limits
from maskc.compiler.vocab import byte_tokenizer
from tests.helpers import compact

VOCAB = byte_tokenizer()
OPTS = CompileOptions(limits=Limits(max_states=5_000))
# the string's 3,000 positions are copies in a pushdown grammar (over 5,000 states: each
# character's UTF-8 and escape states), one counted loop in a regular one
SCHEMA = {"type": "object",
          "properties": {"data": {}, "note": {"type": "string", "maxLength": 3000}},
          "required": ["data", "note"], "additionalProperties": False}


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def test_the_pushdown_grammar_is_over_the_limit() -> None:
    grammar, _ = schema_to_ir(SCHEMA, OPTS)
    assert len(grammar.rules) > 1  # free-form values are the recursive rule ``any``
    bounded, _ = schema_to_ir(SCHEMA, OPTS, bounded_free_form=True)
    assert len(bounded.rules) == 1


def test_bounded_free_form_values_compile_with_the_restriction_listed() -> None:
    art = maskc.compile_json_schema(SCHEMA, VOCAB, options=OPTS)
    assert art.pda is None and art.dfa.counters is not None  # regular, its string counted
    (entry,) = art.not_enforced
    assert entry["kind"] == "restricted" and entry["keyword"] == "free-form values"
    assert f"at most {ONEOF_ANY_DEPTH} levels" in entry["detail"] and "5000" in entry["detail"]
    validator = jsonschema.Draft202012Validator(SCHEMA)

    def accepts(value: Any) -> bool:
        m = art.matcher()
        return bool(m.accept_string(compact(value)) and m.can_terminate())

    for ok in ({"data": {"a": [True, None, "x"]}, "note": "n" * 3000},
               {"data": _nested(ONEOF_ANY_DEPTH), "note": ""}, {"data": "é", "note": "\\u00e9" * 10}):
        assert validator.is_valid(ok) and accepts(ok), ok
    for bad in ({"data": 1, "note": "n" * 3001}, {"data": 1}, {"data": 1, "note": 2}):
        assert not validator.is_valid(bad) and not accepts(bad), bad
    # the restriction: valid, but nested deeper than the bound
    deep = {"data": _nested(ONEOF_ANY_DEPTH + 1), "note": ""}
    assert validator.is_valid(deep) and not accepts(deep)


def test_a_recursive_schema_over_the_limit_is_still_refused() -> None:
    schema = {"$defs": {"node": {"type": "object", "properties": {
        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
        "note": {"type": "string", "maxLength": 3000}}, "additionalProperties": False}},
        "$ref": "#/$defs/node"}
    with pytest.raises(StateLimitExceeded) as e:
        maskc.compile_json_schema(schema, VOCAB, options=OPTS)
    assert "5000" in str(e.value)


def test_the_restriction_is_shown_by_compile_and_inspect(tmp_path: Any,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import string

    from typer.testing import CliRunner

    from maskc.cli import app

    monkeypatch.setenv("MASKC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "200")
    vocab = tmp_path / "vocab.json"
    tokens = [c for c in string.printable if c not in "\x0b\x0c"] + ["<eos>"]
    vocab.write_text(json.dumps({"tokens": tokens, "eos": "<eos>"}))
    src = tmp_path / "s.json"
    src.write_text(json.dumps(SCHEMA))
    out = tmp_path / "out"
    runner = CliRunner()
    args = ["compile", str(src), "-t", str(vocab), "--max-states", "5000", "-o", str(out)]
    got = runner.invoke(app, args)
    assert got.exit_code == 0, got.output
    assert "restricted: free-form values nested at most" in got.output
    (artifact,) = out.glob("*.safetensors")
    shown = runner.invoke(app, ["inspect", str(artifact)])
    assert shown.exit_code == 0
    assert "restricted: the masks admit less than the schema" in shown.output
    assert "every keyword is enforced by the masks" in shown.output


# A $ref cycle beside a free-form value, over the limit: bounding free-form values leaves the
# cycle, so the bounded form is not regular.
CYCLE = {"$defs": {"node": {"type": "object", "properties": {
    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}, "data": {},
    "note": {"type": "string", "maxLength": 3000}}, "additionalProperties": False}},
    "$ref": "#/$defs/node"}


def _front_ends(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The front-end forms a compile builds, by key."""
    from maskc.compiler import pipeline

    built: list[str] = []
    real = pipeline._front_end

    def front_end(key: tuple[str, str, str], *args: Any, **kwargs: Any) -> Any:
        built.append(key[0])
        return real(key, *args, **kwargs)

    monkeypatch.setattr(pipeline, "_front_end", front_end)
    return built


def test_a_form_that_keeps_another_cycle_is_not_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first form keeps a rule other than ``any``: its bounded form would keep it too, so
    it is not built, and the refusal is the one its build would have ended in."""
    from dataclasses import replace

    from maskc.compiler.frontends import registry

    built = _front_ends(monkeypatch)
    with pytest.raises(StateLimitExceeded) as skipped:
        maskc.compile_json_schema(CYCLE, VOCAB, options=OPTS)
    assert "json_schema bounded" not in built and built[0] == "json_schema"
    built.clear()
    maskc.compile_json_schema(SCHEMA, VOCAB, options=OPTS)  # free-form values its only recursion
    assert "json_schema bounded" in built
    fe = registry.FRONTENDS["json_schema"]
    monkeypatch.setitem(registry.FRONTENDS, "json_schema", replace(fe, bounded_keeps_rules=None))
    built.clear()
    with pytest.raises(StateLimitExceeded) as tried:
        maskc.compile_json_schema(CYCLE, VOCAB, options=OPTS)
    assert "json_schema bounded" in built  # (built, and not regular: the same refusal)
    assert str(tried.value) == str(skipped.value)


@pytest.mark.parametrize(("names", "start_calls", "calls", "keeps"), [
    (("#",), "", (), False), (("#", "any"), "any", (), False), (("#@0", "any@1", "any@2"), "any@1", (), False),
    (("#", "#/$defs/node"), "#/$defs/node", (), True), (("#", "any", "#/$defs/anything"), "any", (), True),
    (("any", "#"), "#", (), True), (("#/$defs/node", "any"), "#/$defs/node", (), True), (("#",), "#", (), True),
    # a counted item made a call (a grammar with rules): the bounded grammar may count it instead
    (("#", "any", "#/properties/xs/items"), "any", ("#/properties/xs/items",), False),
])
def test_the_rules_a_bounded_form_keeps(names: tuple[str, ...], start_calls: str, calls: tuple[str, ...],
                                        keeps: bool) -> None:
    from maskc.compiler.frontends.registry import FRONTENDS
    from maskc.compiler.ir import EMPTY, Grammar, RuleRef, seq
    from maskc.compiler.rules import ResolvedRules

    predicate = FRONTENDS["json_schema"].bounded_keeps_rules
    assert predicate is not None
    start = seq(RuleRef(start_calls), EMPTY) if start_calls else EMPTY
    bodies = (start, *(EMPTY for _ in names[1:]))
    grammar = Grammar(names[0], tuple(zip(names, bodies)), calls=frozenset(calls))
    assert predicate(grammar, ResolvedRules(names, bodies)) is keeps
