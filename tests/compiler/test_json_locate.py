"""JSON pointer → (line, column) of the key in the document's text, positions counted by hand."""

from __future__ import annotations

import json

import pytest

from maskc.compiler.json_locate import Locator, locate, split_pointer

DOC = """{
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "tags": {
      "type": "array",
      "items": [ {"const": 1}, {"const": 2} ]
    }
  }
}"""


@pytest.mark.parametrize(("pointer", "expected"), [
    ("", (1, 1)),
    ("/type", (2, 3)),
    ("/properties", (3, 3)),
    ("/properties/name", (4, 5)),
    ("/properties/name/type", (4, 14)),
    ("/properties/tags/items", (7, 7)),
    ("/properties/tags/items/0", (7, 18)),
    ("/properties/tags/items/1", (7, 32)),
    ("/properties/tags/items/1/const", (7, 33)),
])
def test_positions_of_keys_and_elements(pointer: str, expected: tuple[int, int]) -> None:
    assert locate(DOC, pointer) == expected


@pytest.mark.parametrize(("pointer", "expected"), [
    ("/properties/missing", (3, 3)),  # the deepest existing ancestor
    ("/properties/name/type/deeper", (4, 14)),  # a string has no members
    ("/properties/tags/items/2", (7, 7)),  # past the end
    ("/properties/tags/items/01", (7, 7)),  # not an index (leading zero)
    ("/properties/tags/items/-", (7, 7)),
    ("/nowhere/at/all", (1, 1)),
])
def test_a_missing_pointer_gives_its_deepest_existing_ancestor(pointer: str, expected: tuple[int, int]) -> None:
    assert locate(DOC, pointer) == expected


def test_tokens_are_unescaped_and_keys_decoded() -> None:
    text = '{"a/b": 1, "m~n": 2, "q\\"q": 3, "\\u00e9t\\u00e9": 4, "x\\/y": 5}'
    assert json.loads(text)["été"] == 4
    assert locate(text, "/a~1b") == (1, 2)
    assert locate(text, "/m~0n") == (1, 12)
    assert locate(text, '/q"q') == (1, 22)
    assert locate(text, "/été") == (1, 33)
    assert locate(text, "/x~1y") == (1, 53)  # "\/" decodes to "/"


def test_tilde_one_is_unescaped_after_tilde_zero() -> None:
    # "~01" is "~1" literally (RFC 6901: ~1 first, then ~0), not "/".
    assert split_pointer("/~01") == ["~1"]
    text = '{"/": 1, "~1": 2}'
    assert locate(text, "/~01") == (1, 10)
    assert locate(text, "/~1") == (1, 2)


def test_columns_count_code_points() -> None:
    # "😀" is one code point (two UTF-16 units) and "é" one: columns count code points.
    text = '{"😀é": {"k": 1}}'
    assert locate(text, "/😀é/k") == (1, 9)


def test_strings_holding_brackets_and_escaped_quotes_are_skipped_whole() -> None:
    text = '{"a": "}]{[\\"", "b": ["]", {"c": "\\\\"}], "d": 0}'
    assert locate(text, "/d") == (1, 42)
    assert locate(text, "/b/1/c") == (1, 29)


def test_the_last_duplicate_key_wins() -> None:
    text = '{"a": 1,\n "a": 2}'
    assert locate(text, "/a") == (2, 2)


def test_line_breaks_crlf_and_cr() -> None:
    assert locate('{\r\n"a": 1}', "/a") == (2, 1)
    assert locate('{\r"a":\r\n{"b": 1}}', "/a/b") == (3, 2)


def test_a_byte_order_mark_is_not_counted() -> None:
    assert locate('\ufeff{"a": 1}', "/a") == (1, 2)
    assert locate('\ufeff{"a": 1}', "") == (1, 1)


def test_numbers_literals_and_empty_containers_are_skipped() -> None:
    text = '{"n": -1.5e+3, "t": true, "z": null, "o": {}, "l": [], "k": [[], {}, 3]}'
    assert locate(text, "/k/2") == (1, 70)
    assert locate(text, "/o/x") == (1, 38)
    assert locate(text, "/l/0") == (1, 47)


def test_malformed_text_never_raises() -> None:
    assert locate('{"a": {"b": ', "/a/b") == (1, 8)
    assert locate('{"a": [1, ', "/a/1") == (1, 2)
    assert locate("", "/a") == (1, 1)
    assert locate('{"a" 1}', "/a") == (1, 1)


def test_a_locator_answers_many_pointers() -> None:
    loc = Locator(DOC)
    assert [loc.position(p) for p in ("/type", "/properties/name")] == [(2, 3), (4, 5)]


@pytest.mark.parametrize("bad", ["a", "#/a"])
def test_a_pointer_must_start_with_a_slash(bad: str) -> None:
    with pytest.raises(ValueError, match="JSON pointer"):
        locate("{}", bad)


def _pointers(value: object, prefix: str = "") -> list[str]:
    """Every pointer into ``value``, and one past each container's members."""
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _pointers(v, prefix + "/" + k.replace("~", "~0").replace("/", "~1"))
        out.append(prefix + "/absent")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _pointers(v, f"{prefix}/{i}")
        out.append(f"{prefix}/{len(value)}")
    return out


@pytest.mark.parametrize("text", [
    DOC,
    '\ufeff{"a\\"}": {"b": [1, {"c": "x\\\\"}, "]"]}, "a\\"}": {"d": "{"}}',  # a duplicate key wins last
    '{ "é/~": [ [], {}, [[ "\\u00e9" ]] ] ,\r\n "n" : -1.5e3 , "t":true,"z":null }',
    json.dumps({"defs": {f"k{i}": {"enum": [i, str(i), {"x": [i]}]} for i in range(40)}}, indent=2),
])
def test_an_indexed_document_places_every_pointer_as_the_scanner_does(text: str) -> None:
    fast = Locator(text)
    slow = Locator(text)
    slow._ends = None  # the scanner of a text that is not JSON, step by step
    assert fast._ends is not None
    doc = json.loads(text.lstrip("\ufeff"))
    for pointer in _pointers(doc):
        assert fast.offset(pointer) == slow.offset(pointer), pointer


def test_each_container_of_a_large_document_is_indexed_once() -> None:
    doc = {"definitions": {f"d{i}": {"properties": {f"p{j}": {"type": "string"} for j in range(20)}}
                           for i in range(500)}}
    text = json.dumps(doc, indent=1)
    locator = Locator(text)
    last = locator.position("/definitions/d499/properties/p19/type")
    assert text.splitlines()[last[0] - 1].strip() == '"type": "string"'
    assert len(locator._keys) == 5  # (the five objects on the path)
    assert locator.position("/definitions/d499/properties/p3") < last
    assert len(locator._keys) == 5
