"""The inputs people already have, given to ``compile_json_schema``: pydantic types, tool
definitions and wrapper documents compile to the schema they hold; anything else is a
``TypeError`` (a Python object) or a ``SchemaError`` (JSON that holds no schema)."""

from __future__ import annotations

from typing import Any

import pytest

import maskc
from maskc.compiler.errors import SchemaError
from maskc.compiler.frontends.json_schema.inputs import schema_from, unwrap
from maskc.compiler.vocab import Vocabulary

PARAMS = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 3}}, "required": ["city"]}

WRAPPERS: list[tuple[str, dict[str, Any]]] = [
    ("openai-chat-tool", {"type": "function", "function": {"name": "get_weather", "description": "d",
                                                           "parameters": PARAMS, "strict": True}}),
    ("openai-responses-tool", {"type": "function", "name": "get_weather", "parameters": PARAMS}),
    ("anthropic-tool", {"name": "get_weather", "description": "d", "input_schema": PARAMS}),
    ("openai-response-format", {"type": "json_schema",
                                "json_schema": {"name": "weather", "strict": True, "schema": PARAMS}}),
    ("maskbench-case", {"schema": PARAMS, "tests": [{"data": {"city": "Rio"}, "valid": True}]}),
]


def _walk(art: maskc.Artifact, text: str) -> bool:
    """Whether the matcher takes ``text`` byte by byte (byte vocabulary) and may then end."""
    m = art.matcher()
    return all(m.accept_token(b) for b in text.encode()) and bool(m.can_terminate())


@pytest.mark.parametrize(("name", "doc"), WRAPPERS, ids=[n for n, _ in WRAPPERS])
def test_wrapper_compiles_to_the_schema_it_holds(name: str, doc: dict[str, Any], byte_vocab: Vocabulary) -> None:
    assert unwrap(doc) == PARAMS
    art = maskc.compile_json_schema(doc, byte_vocab)
    bare = maskc.compile_json_schema(PARAMS, byte_vocab)
    assert art.metadata["grammar_sha256"] == bare.metadata["grammar_sha256"]
    assert _walk(art, '{"city":"Rio"}')
    assert not _walk(art, '{"city":"Lisbon"}')


def test_openai_tool_without_parameters_takes_no_arguments(byte_vocab: Vocabulary) -> None:
    art = maskc.compile_json_schema({"type": "function", "function": {"name": "ping"}}, byte_vocab)
    assert _walk(art, "{}")
    assert not _walk(art, '{"a":1}')


def test_wrapper_around_no_schema_says_where() -> None:
    with pytest.raises(SchemaError) as e:
        unwrap({"type": "function", "function": {"name": "f", "parameters": [1, 2]}})
    assert e.value.pointer == "/function/parameters"
    with pytest.raises(SchemaError) as e:
        unwrap({"name": "f", "input_schema": "object"})
    assert e.value.pointer == "/input_schema"


def test_plain_schemas_are_not_unwrapped() -> None:
    # "schema" without "tests", "name" without "input_schema": property names, not wrappers
    for doc in ({"type": "object", "properties": {"schema": {}}},
                {"schema": {"type": "string"}}, {"name": "x", "type": "string"}, {"type": "string"}):
        assert unwrap(doc) is doc


def test_pydantic_model_class_and_type_adapter(byte_vocab: Vocabulary) -> None:
    pydantic = pytest.importorskip("pydantic")

    class Weather(pydantic.BaseModel):  # type: ignore[misc, name-defined]
        city: str = pydantic.Field(max_length=3)
        celsius: int

    art = maskc.compile_json_schema(Weather, byte_vocab)
    assert _walk(art, '{"city":"Rio","celsius":21}')
    assert not _walk(art, '{"city":"Lisbon","celsius":21}')
    adapter = pydantic.TypeAdapter(list[int])
    art = maskc.compile_json_schema(adapter, byte_vocab)
    assert _walk(art, "[1,2]") and not _walk(art, '["a"]')
    with pytest.raises(TypeError, match="pass the class Weather"):
        maskc.compile_json_schema(Weather(city="Rio", celsius=1), byte_vocab)


@pytest.mark.parametrize("value", [[{"type": "string"}], 3, None, object(), {"type"}])
def test_other_values_are_a_type_error_saying_what_was_expected(value: Any, byte_vocab: Vocabulary) -> None:
    with pytest.raises(TypeError, match="pydantic model class"):
        maskc.compile_json_schema(value, byte_vocab)
    # JSON text is the input's content: text that holds no schema is a SchemaError
    with pytest.raises(SchemaError, match="not valid JSON"):
        maskc.compile_json_schema(b"{", byte_vocab)
    with pytest.raises(SchemaError, match="got array"):
        maskc.compile_json_schema("[1]", byte_vocab)


def test_schema_from_distinguishes_json_from_python_objects(byte_vocab: Vocabulary) -> None:
    assert schema_from(True) is True
    with pytest.raises(SchemaError, match="got array"):
        schema_from([1])
    with pytest.raises(TypeError, match="expected a JSON Schema"):
        schema_from(object())
    # compile_source takes the same inputs: a JSON value that is no schema is the input's fault
    with pytest.raises(SchemaError):
        maskc.compile_source("json_schema", "a string", byte_vocab)


def test_integer_bounds_past_64_bits_compile() -> None:
    import maskc
    from maskc.compiler.vocab import byte_tokenizer

    art = maskc.compile_json_schema({"type": "integer", "maximum": 18446744073709551615}, byte_tokenizer())
    for text, ok in [(b"18446744073709551615", True), (b"18446744073709551616", False)]:
        m = art.matcher()
        assert bool(m.accept_string(text) and m.can_terminate()) is ok
