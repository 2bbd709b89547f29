"""MaskBench slice: real-world schemas with labelled instances, compiled and checked.

The corpus test runs over a stratified subset of the MaskBench folder (4 schemas per split):
``$MASKC_MASKBENCH_DIR``, else ``../shared/maskbench``; it skips, saying how to get the
files, where neither exists. The floors sit slightly below the measured
rates, so a regression fails; raise them as support grows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import maskc
from tests.maskbench import (
    MASKBENCH_ENV,
    MASKBENCH_HOWTO,
    SchemaResult,
    maskbench_dir,
    maskbench_location,
    run_schema,
    schema_files,
    serialize,
    split_of,
    stratified,
    summarize,
)

PER_SPLIT = 4
SEED = 0
# Compiled in exact semantics (the labels are JSON Schema's verdicts). Measured on the
# 60-schema subset: 48 compiled (80%; the rest refused by name or past the 20 s limit), every
# valid instance of a compiled schema accepted, no invalid one.
MIN_COMPILED_FRACTION = 0.7


# -- harness -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "split"),
    [
        ("Github_easy---o123.json", "Github_easy"),
        ("Kubernetes---kb_1_Normalized.json", "Kubernetes"),
        ("BFCL_simple_12.json", "BFCL"),
        ("BFCL_parallel_multiple_52.json", "BFCL"),
        ("JME_3.json", "JME"),
        ("Synthesized---draft2019_09_valid_enum_id15_subschema1_not_2.json", "Synthesized"),
    ],
)
def test_split_of(name: str, split: str) -> None:
    assert split_of(name) == split


def test_maskbench_folder_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "JME_1.json").write_text("{}")
    monkeypatch.setenv(MASKBENCH_ENV, str(tmp_path))
    assert maskbench_dir() == tmp_path
    assert schema_files() == [tmp_path / "JME_1.json"]
    monkeypatch.setenv(MASKBENCH_ENV, str(tmp_path / "absent"))
    assert maskbench_dir() is None
    assert maskbench_location() == tmp_path / "absent"
    assert MASKBENCH_ENV in MASKBENCH_HOWTO and "jsonschemabench" in MASKBENCH_HOWTO
    monkeypatch.delenv(MASKBENCH_ENV)
    monkeypatch.setenv("MASKC_SHARED_DIR", str(tmp_path / "shared"))
    assert maskbench_location() == tmp_path / "shared" / "maskbench"


def test_stratified_is_deterministic_and_capped() -> None:
    files = [Path(f"{s}---{i}.json") for s in ("A", "B") for i in range(5)] + [Path("JME_1.json")]
    one = stratified(files, 2, seed=7)
    assert one == stratified(list(reversed(files)), 2, seed=7)
    assert [split_of(f) for f in one] == ["A", "A", "B", "B", "JME"]


def _ser(instance: Any, schema: Any) -> str:
    return serialize(instance, schema).decode()


def test_serialize_follows_property_order() -> None:
    schema = {"type": "object", "properties": {"b": {}, "a": {"properties": {"y": {}, "x": {}}}}}
    assert _ser({"z": 1, "a": {"x": 1, "y": "é"}, "b": 2}, schema) == '{"b":2,"a":{"y":"é","x":1},"z":1}'


def test_serialize_through_ref_allof_and_required_extras() -> None:
    schema = {
        "$defs": {"base": {"properties": {"id": {}, "meta": {"$ref": "#/$defs/meta"}}}, "meta": {"properties": {"k": {}, "j": {}}}},
        "allOf": [{"$ref": "#/$defs/base"}, {"properties": {"name": {}}, "required": ["extra"]}],
    }
    inst = {"extra": 0, "name": "n", "meta": {"j": 1, "k": 2}, "id": 3}
    assert _ser(inst, schema) == '{"id":3,"meta":{"k":2,"j":1},"name":"n","extra":0}'


def test_serialize_picks_first_matching_branch_with_root_defs() -> None:
    schema = {
        "definitions": {"num": {"type": "integer"}},
        "items": {"anyOf": [
            {"properties": {"a": {"$ref": "#/definitions/num"}, "b": {}}, "required": ["a"]},
            {"properties": {"b": {}, "a": {}}},
        ]},
    }
    assert _ser([{"b": 1, "a": 2}, {"b": 1, "a": "s"}], schema) == '[{"a":2,"b":1},{"b":1,"a":"s"}]'


def test_serialize_tuple_items() -> None:
    schema = {"prefixItems": [{"properties": {"q": {}, "p": {}}}], "items": {"properties": {"s": {}, "r": {}}}}
    assert _ser([{"p": 1, "q": 2}, {"r": 1, "s": 2}], schema) == '[{"q":2,"p":1},{"s":2,"r":1}]'
    draft7 = {"items": [{"properties": {"q": {}, "p": {}}}], "additionalItems": {"properties": {"s": {}, "r": {}}}}
    assert _ser([{"p": 1, "q": 2}, {"r": 1, "s": 2}], draft7) == '[{"q":2,"p":1},{"s":2,"r":1}]'


# -- corpus --------------------------------------------------------------------------------


def _deepseek() -> maskc.Vocabulary:
    try:
        return maskc.load_tokenizer("deepseek")
    except maskc.TokenizerError as e:
        pytest.skip(f"DeepSeek tokenizer unavailable: {e}")


def _describe(r: SchemaResult, tests: list[str], texts: list[str] | None = None) -> str:
    lines = [f"  {r.name}:"]
    for i, t in enumerate(tests):
        lines.append(f"    {t}")
        if texts and i < len(texts):
            lines.append(f"      serialized: {texts[i][:200]}")
    return "\n".join(lines)


@pytest.mark.slow
def test_maskbench_slice() -> None:
    folder = maskbench_dir()
    if folder is None:
        pytest.skip(f"MaskBench data not found at {maskbench_location()}: {MASKBENCH_HOWTO}")
    tok = _deepseek()
    files = stratified(schema_files(folder), PER_SPLIT, SEED)
    results = [run_schema(f, tok, token_level=True) for f in files]
    compiled = [r for r in results if r.status == "compiled"]
    total = summarize(results)["ALL"]
    report = json.dumps(total, indent=1)

    problems = []
    unsound = [r for r in compiled if r.invalid_accepted]
    if unsound:
        problems.append("invalid instances accepted (soundness):\n" + "\n".join(
            _describe(r, r.invalid_accepted_tests, r.invalid_accepted_texts) for r in unsound))
    crashed = [r for r in results if r.status == "crash"]
    if crashed:
        problems.append("compiles that failed with an exception other than MaskcError:\n" + "\n".join(
            f"  {r.name}: {r.error}: {r.message[:200]}" for r in crashed))
    misaligned = [r for r in compiled if r.token_mismatch_tests]
    if misaligned:
        problems.append("valid instances the DFA accepts but the token walk rejects (alignment):\n"
                        + "\n".join(_describe(r, r.token_mismatch_tests) for r in misaligned))
    if len(compiled) < MIN_COMPILED_FRACTION * len(results):
        problems.append(f"only {len(compiled)} of {len(results)} schemas compiled "
                        f"(floor {MIN_COMPILED_FRACTION:.0%})")
    rejected = [r for r in compiled if r.valid_rejected]
    if rejected:
        problems.append("valid instances rejected (exact semantics admits every instance):\n"
                        + "\n".join(_describe(r, r.valid_rejected_tests) for r in rejected))
    assert not problems, "\n\n".join(problems) + "\n\nsummary:\n" + report


def test_serialize_puts_required_names_before_a_dependent_schemas_required() -> None:
    # the grammar places the object's required names, then the names its dependencies
    # mention; a dependent schema's own required names do not move ahead of them
    schema = {"type": "object", "patternProperties": {"^[a-e]$": True}, "additionalProperties": False,
              "allOf": [{"dependencies": {"a": {"anyOf": [{"required": ["c"]}, {"required": ["b"]}]}}},
                        {"required": ["a"]}]}
    assert _ser({"b": True, "a": True}, schema) == '{"a":true,"b":true}'
    art = maskc.compile_json_schema(schema, maskc.compiler.vocab.byte_tokenizer(), semantics="exact")
    m = art.matcher()
    assert m.accept_string(serialize({"b": True, "a": True}, schema)) and m.can_terminate()
