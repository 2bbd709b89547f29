"""``$ref`` resolution and recursive schemas: grammar rules (IR level) and end to end.

IR level: regular schemas stay one rule, exactly their inlined form; recursion becomes
rules named by JSON pointer. End to end: seeded random instances of each recursive schema,
serialized compactly and tokenized by real tokenizers, go through a matcher token by
token; the matcher's verdict must agree with ``jsonschema`` on every instance.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest

import maskc
from maskc.compiler.errors import EmptyLanguage, SchemaError, UnsupportedKeyword
from maskc.compiler.frontends.json_schema import schema_to_ir
from maskc.compiler.frontends.json_schema.refs import has_ref
from maskc.compiler.ir import Grammar
from maskc.compiler.options import CompileOptions, parse_whitespace
from maskc.compiler.rules import resolve_rules
from maskc.compiler.vocab import Vocabulary

Gen = Callable[[random.Random, int], Any]

# -- the recursive schemas --------------------------------------------------------------

TREE: dict[str, Any] = {
    "$defs": {"tree": {
        "type": "object",
        "properties": {"value": {"type": "integer"}, "left": {"$ref": "#/$defs/tree"}, "right": {"$ref": "#/$defs/tree"}},
        "required": ["value"], "additionalProperties": False,
    }},
    "$ref": "#/$defs/tree",
}

LINKED_LIST: dict[str, Any] = {
    "$defs": {"node": {
        "type": "object",
        "properties": {"value": {"type": "string", "maxLength": 8},
                       "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
        "required": ["value", "next"], "additionalProperties": False,
    }},
    "type": "object",
    "properties": {"head": {"$ref": "#/$defs/node"}},
    "required": ["head"], "additionalProperties": False,
}

COMMENTS: dict[str, Any] = {
    "$defs": {"comment": {
        "type": "object",
        "properties": {"author": {"type": "string", "maxLength": 12}, "text": {"type": "string"},
                       "score": {"type": "integer", "minimum": 0},
                       "replies": {"type": "array", "items": {"$ref": "#/$defs/comment"}, "maxItems": 4}},
        "required": ["author", "text", "replies"], "additionalProperties": False,
    }},
    "type": "object",
    "properties": {"title": {"type": "string"}, "comments": {"type": "array", "items": {"$ref": "#/$defs/comment"}}},
    "required": ["title", "comments"], "additionalProperties": False,
}

JSON_LD: dict[str, Any] = {
    "$defs": {"node": {
        "type": "object",
        "properties": {"@id": {"type": "string", "pattern": "^_:b[0-9]+$"},
                       "@type": {"enum": ["Person", "Organization", "Place"]},
                       "name": {"type": "string", "maxLength": 16},
                       "knows": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                       "@graph": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        "required": ["@id", "@type"], "additionalProperties": False,
    }},
    "type": "object",
    "properties": {"@context": {"const": "https://schema.org"}, "@graph": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
    "required": ["@context", "@graph"], "additionalProperties": False,
}

FREE_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "meta": {}, "tags": {"type": "array"}},
    "required": ["id", "meta"], "additionalProperties": False,
}

ROOT_REF: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 10}, "children": {"type": "array", "items": {"$ref": "#"}}},
    "required": ["name"], "additionalProperties": False,
}

MUTUAL: dict[str, Any] = {
    "$defs": {
        "A": {"type": "object", "properties": {"n": {"type": "integer"}, "b": {"$ref": "#/$defs/B"}},
              "required": ["n"], "additionalProperties": False},
        "B": {"type": "array", "items": {"$ref": "#/$defs/A"}, "maxItems": 3},
    },
    "$ref": "#/$defs/A",
}
# B is entered through A and used twice: one rule, called from both places, not two copies
SHARED_CYCLE: dict[str, Any] = {
    "$defs": {
        "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}, "c": {"$ref": "#/$defs/B"}},
              "additionalProperties": False},
        "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}, "s": {"type": "string", "maxLength": 40}},
              "additionalProperties": False},
    },
    "type": "object", "properties": {"x": {"$ref": "#/$defs/A"}, "y": {"$ref": "#/$defs/A"}},
    "additionalProperties": False,
}

# (schema, start rule, rule names) under compact and flexible whitespace
# (schema, start rule, the front end's rules, the rules left after resolution)
RECURSIVE: dict[str, tuple[dict[str, Any], str, set[str], set[str]]] = {
    "tree": (TREE, "#/$defs/tree", {"#/$defs/tree"}, {"#/$defs/tree"}),
    "linked_list": (LINKED_LIST, "root", {"root", "#/$defs/node"}, {"root", "#/$defs/node"}),
    "comments": (COMMENTS, "root", {"root", "#/$defs/comment"}, {"root", "#/$defs/comment"}),
    "json_ld": (JSON_LD, "root", {"root", "#/$defs/node"}, {"root", "#/$defs/node"}),
    "free_form": (FREE_FORM, "root", {"root", "any"}, {"root", "any"}),
    "root_ref": (ROOT_REF, "#", {"#"}, {"#"}),
    # B lies on A's cycle, so it is a rule; used once, from A, it is inlined there
    "mutual": (MUTUAL, "#/$defs/A", {"#/$defs/A", "#/$defs/B"}, {"#/$defs/A"}),
    "shared": (SHARED_CYCLE, "root", {"root", "#/$defs/A", "#/$defs/B"}, {"root", "#/$defs/A", "#/$defs/B"}),
}


def grammar_of(schema: Any, ws: str = "compact", **kw: Any) -> Grammar:
    grammar, _ = schema_to_ir(schema, CompileOptions(parse_whitespace(ws), **kw))
    return grammar


# -- IR level ---------------------------------------------------------------------------

REGULAR_WITH_REFS: dict[str, Any] = {
    "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                        "required": ["x", "y"], "additionalProperties": False},
              "label": {"type": "string", "maxLength": 5}},
    "type": "object",
    "properties": {"a": {"$ref": "#/$defs/point"}, "b": {"$ref": "#/$defs/point"},
                   "l": {"$ref": "#/$defs/label", "description": "annotations do not matter"},
                   "m": {"$ref": "#/$defs/label", "minLength": 2}},
    "required": ["a"], "additionalProperties": False,
}
REGULAR_INLINED = {
    "type": "object",
    "properties": {"a": REGULAR_WITH_REFS["$defs"]["point"], "b": REGULAR_WITH_REFS["$defs"]["point"],
                   "l": REGULAR_WITH_REFS["$defs"]["label"],
                   "m": {"allOf": [REGULAR_WITH_REFS["$defs"]["label"], {"minLength": 2}]}},
    "required": ["a"], "additionalProperties": False,
}


@pytest.mark.parametrize("ws", ["compact", "pretty:2", "flexible:2"])
def test_regular_schema_is_one_rule_equal_to_its_inlined_form(ws: str) -> None:
    g = grammar_of(REGULAR_WITH_REFS, ws)
    assert len(g.rules) == 1 and not has_ref(g.body)
    assert g.body == grammar_of(REGULAR_INLINED, ws).body


@pytest.mark.parametrize("ws", ["compact", "flexible:2"])
@pytest.mark.parametrize("name", list(RECURSIVE))
def test_recursive_schemas_become_rules(name: str, ws: str) -> None:
    schema, start, rules, resolved = RECURSIVE[name]
    g = grammar_of(schema, ws)
    assert g.start == start and g.rules[0][0] == start
    assert {n for n, _ in g.rules} == rules
    assert any(has_ref(body) for _, body in g.rules)
    assert set(resolve_rules(g).names) == resolved


def test_free_form_root_is_the_any_rule() -> None:
    schema: Any
    for schema in ({}, True):
        g = grammar_of(schema)
        assert g.start == "any" and [n for n, _ in g.rules] == ["any"]


def test_pretty_makes_rules_per_depth_up_to_max_depth() -> None:
    g = grammar_of(TREE, "pretty:2", max_depth=6)
    assert g.start == "#/$defs/tree@0"
    assert {n for n, _ in g.rules} == {f"#/$defs/tree@{d}" for d in range(7)}
    g = grammar_of({}, "pretty:2", max_depth=4)
    assert {n for n, _ in g.rules} == {f"any@{d}" for d in range(5)}


def test_ref_with_recursive_siblings_is_a_rule_of_its_own() -> None:
    schema = {"$defs": {"node": {"type": "object",
                                 "properties": {"id": {"type": "integer"},
                                                "kids": {"type": "array", "items": {"$ref": "#/$defs/node", "required": ["id"]}}},
                                 "additionalProperties": False}},
              "$ref": "#/$defs/node"}
    # the merge (node and required id) recurses, node itself is only reached once: inlined
    names = {n for n, _ in grammar_of(schema).rules}
    assert names == {"root", "#/$defs/node/properties/kids/items/$ref"}


def test_oneof_over_rules_needs_disjoint_branches() -> None:
    disjoint = {"$defs": {"e": {"oneOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#/$defs/e"}}]}},
                "$ref": "#/$defs/e"}
    assert {n for n, _ in grammar_of(disjoint).rules} == {"#/$defs/e"}
    overlapping = {"$defs": {"e": {"oneOf": [{"type": "array", "items": {"$ref": "#/$defs/e"}},
                                             {"type": "array", "maxItems": 1}]}},
                   "$ref": "#/$defs/e"}
    with pytest.raises(UnsupportedKeyword) as e:
        grammar_of(overlapping)
    assert e.value.keyword == "oneOf" and e.value.pointer == "/$defs/e/oneOf"
    _, dropped = schema_to_ir(overlapping, CompileOptions(lenient=True))
    assert [d["keyword"] for d in dropped] == ["oneOf"]


def test_allof_that_contains_itself_is_refused() -> None:
    schema = {"$defs": {"t": {"allOf": [{"$ref": "#/$defs/t"}], "type": "object"}}, "$ref": "#/$defs/t"}
    with pytest.raises(UnsupportedKeyword) as e:
        grammar_of(schema)
    assert e.value.keyword == "allOf" and e.value.pointer == "/$defs/t/allOf/0"


def test_recursion_without_a_finite_instance_is_empty() -> None:
    with pytest.raises(EmptyLanguage):
        grammar_of({"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]})


def test_unproductive_branches_are_pruned() -> None:
    # the "loop" branch can never finish: its reference is replaced by the empty language
    schema = {"$defs": {"loop": {"type": "array", "items": {"$ref": "#/$defs/loop"}, "minItems": 1}},
              "type": "object", "properties": {"x": {"$ref": "#/$defs/loop"}, "y": {"type": "integer"}},
              "additionalProperties": False}
    g = grammar_of(schema)
    assert len(g.rules) == 1 and not has_ref(g.body)


# -- resolution -------------------------------------------------------------------------

ESCAPES: dict[str, Any] = {
    "$defs": {"a/b": {"type": "integer"}, "c~d": {"type": "string", "maxLength": 2}, "e%f": {"type": "null"},
              'g"h': {"type": "boolean"}, "sp ace": {"enum": [1, 2]}},
    "type": "object",
    "properties": {"v": {"$ref": "#/$defs/a~1b"}, "w": {"$ref": "#/$defs/c~0d"}, "x": {"$ref": "#/$defs/e%25f"},
                   "y": {"$ref": "#/$defs/g%22h"}, "z": {"$ref": "#/$defs/sp%20ace"}},
    "additionalProperties": False,
}


def test_pointer_escapes_resolve() -> None:
    d = ESCAPES["$defs"]
    inlined = {**ESCAPES, "properties": {"v": d["a/b"], "w": d["c~d"], "x": d["e%f"], "y": d['g"h'], "z": d["sp ace"]}}
    assert grammar_of(ESCAPES).body == grammar_of(inlined).body


def test_anchor_resolves_anywhere() -> None:
    by_anchor = {"$defs": {"deep": {"$defs": {"x": {"$anchor": "item", "type": "integer", "maximum": 9}}}},
                 "type": "array", "items": {"$ref": "#item"}}
    by_pointer = {**by_anchor, "items": {"$ref": "#/$defs/deep/$defs/x"}}
    assert grammar_of(by_anchor).body == grammar_of(by_pointer).body
    recursive = {"$defs": {"n": {"$anchor": "node", "type": "array", "items": {"$ref": "#node"}}}, "$ref": "#node"}
    assert [n for n, _ in grammar_of(recursive).rules] == ["#/$defs/n"]  # named by its pointer


def test_root_ref_and_definitions() -> None:
    schema = {"definitions": {"leaf": {"type": "boolean"}},
              "type": "array", "items": {"anyOf": [{"$ref": "#/definitions/leaf"}, {"$ref": "#"}]}}
    g = grammar_of(schema)
    assert g.start == "#" and [n for n, _ in g.rules] == ["#"]


@pytest.mark.parametrize("ref,err,detail", [
    ("#/$defs/missing", SchemaError, "points nowhere"),
    ("#/$defs/a/0", SchemaError, "points nowhere"),
    ("#nowhere", SchemaError, "no $anchor"),
    ("https://example.com/schemas/a.json#/$defs/a", UnsupportedKeyword, "another document"),
    ("a.json", UnsupportedKeyword, "another document"),
    ("other#/$defs/a", UnsupportedKeyword, "another document"),
])
def test_unresolvable_refs_name_the_pointer(ref: str, err: type[SchemaError], detail: str) -> None:
    schema = {"$defs": {"a": {"type": "integer"}}, "type": "object", "properties": {"p": {"$ref": ref}}}
    with pytest.raises(err) as e:
        grammar_of(schema)
    assert e.value.pointer == "/properties/p" and detail in e.value.reason


def test_ref_to_the_documents_own_id_is_local() -> None:
    schema = {"$id": "https://example.com/tree.json", "$defs": {"n": {"type": "integer"}},
              "type": "array", "items": {"$ref": "https://example.com/tree.json#/$defs/n"}}
    assert grammar_of(schema).body == grammar_of({**schema, "items": {"$ref": "#/$defs/n"}}).body


def test_pure_ref_cycles_are_schema_errors() -> None:
    schema = {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
              "allOf": [{"$ref": "#/$defs/a"}]}
    with pytest.raises(SchemaError) as e:
        grammar_of(schema)
    assert "loops" in e.value.reason


# -- instance generators (seeded; recursion at most 6 deep) -----------------------------------

_WORDS = ["a", "bob", "x y", "héllo", "q\"t", "", "line\nbreak", "日本"]


def _word(rng: random.Random, max_len: int | None = None) -> str:
    w = rng.choice(_WORDS)
    return w if max_len is None else w[:max_len]


def gen_tree(rng: random.Random, depth: int) -> Any:
    node: dict[str, Any] = {"value": rng.randint(-50, 50)}
    for side in ("left", "right"):
        if depth > 0 and rng.random() < 0.45:
            node[side] = gen_tree(rng, depth - 1)
    return node


def gen_list_node(rng: random.Random, depth: int) -> Any:
    nxt = gen_list_node(rng, depth - 1) if depth > 0 and rng.random() < 0.7 else None
    return {"value": _word(rng, 8), "next": nxt}


def gen_comment(rng: random.Random, depth: int) -> Any:
    c: dict[str, Any] = {"author": _word(rng, 12), "text": _word(rng)}
    if rng.random() < 0.4:
        c["score"] = rng.randint(0, 99)
    c["replies"] = [gen_comment(rng, depth - 1) for _ in range(rng.randint(0, 2))] if depth > 0 else []
    return c


def gen_ld_node(rng: random.Random, depth: int) -> Any:
    n: dict[str, Any] = {"@id": f"_:b{rng.randint(0, 999)}", "@type": rng.choice(["Person", "Organization", "Place"])}
    if rng.random() < 0.5:
        n["name"] = _word(rng, 16)
    for key in ("knows", "@graph"):
        if depth > 0 and rng.random() < 0.4:
            n[key] = [gen_ld_node(rng, depth - 1) for _ in range(rng.randint(0, 2))]
    return n


def gen_any(rng: random.Random, depth: int) -> Any:
    kind = rng.randrange(7 if depth > 0 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice([0, -7, 12345, 1.5, -0.25, 1e-07, 3e20])
    if kind in (3, 4):
        return _word(rng)
    if kind == 5:
        return [gen_any(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    return {_word(rng) + str(i): gen_any(rng, depth - 1) for i in range(rng.randint(0, 3))}


def gen_root_ref(rng: random.Random, depth: int) -> Any:
    v: dict[str, Any] = {"name": _word(rng, 10)}
    if depth > 0 and rng.random() < 0.6:
        v["children"] = [gen_root_ref(rng, depth - 1) for _ in range(rng.randint(0, 2))]
    return v


def gen_mutual(rng: random.Random, depth: int) -> Any:
    a: dict[str, Any] = {"n": rng.randint(0, 9)}
    if depth > 0 and rng.random() < 0.6:
        a["b"] = [gen_mutual(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    return a


def gen_shared_a(rng: random.Random, depth: int) -> Any:
    a: dict[str, Any] = {}
    for key in ("b", "c"):
        if depth > 0 and rng.random() < 0.5:
            a[key] = gen_shared_b(rng, depth - 1)
    return a


def gen_shared_b(rng: random.Random, depth: int) -> Any:
    b: dict[str, Any] = {}
    if rng.random() < 0.7:
        b["a"] = gen_shared_a(rng, depth)
    if rng.random() < 0.7:
        b["s"] = _word(rng) * rng.randint(1, 4)  # up to the 40 characters of maxLength, and past them
    return b


GENERATORS: dict[str, Gen] = {
    "tree": gen_tree,
    "linked_list": lambda rng, d: {"head": gen_list_node(rng, d)},
    "comments": lambda rng, d: {"title": _word(rng), "comments": [gen_comment(rng, d - 1) for _ in range(rng.randint(0, 3))]},
    "json_ld": lambda rng, d: {"@context": "https://schema.org", "@graph": [gen_ld_node(rng, d - 1) for _ in range(rng.randint(1, 3))]},
    "free_form": lambda rng, d: {"id": rng.randint(0, 99), "meta": gen_any(rng, d - 1),
                                 **({"tags": [gen_any(rng, d - 2) for _ in range(rng.randint(0, 2))]} if rng.random() < 0.5 else {})},
    "root_ref": gen_root_ref,
    "mutual": gen_mutual,
    "shared": lambda rng, d: {k: gen_shared_a(rng, d - 1) for k in ("x", "y") if rng.random() < 0.8},
}


def _containers(value: Any) -> list[Any]:
    """Every object and array inside ``value`` (itself included), outermost first."""
    out = [value] if isinstance(value, (dict, list)) else []
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    for c in children:
        out += _containers(c)
    return out


def mutate(rng: random.Random, value: Any) -> Any:
    """A copy of ``value`` with one random edit deep inside (a wrong type, a dropped or an extra key)."""
    v = json.loads(json.dumps(value))
    objs = [c for c in _containers(v) if isinstance(c, dict) and c]
    if not objs:
        return [v]
    obj = rng.choice(objs)
    key = rng.choice(list(obj))
    edit = rng.randrange(4)
    if edit == 0:
        del obj[key]  # a required key missing (when it was required)
    elif edit == 1:
        obj["zz_extra"] = 1  # an extra key where additionalProperties is false
    elif edit == 2:
        obj[key] = {"wrong": True} if not isinstance(obj[key], dict) else "wrong"
    else:
        obj[key] = [obj[key]] if not isinstance(obj[key], list) else 17
    return v


def instances(name: str, n: int = 20) -> tuple[list[Any], list[Any]]:
    """``n`` valid and ``n`` mutated instances of the schema ``name`` (seeded, nesting <= 6)."""
    schema = RECURSIVE[name][0]
    rng = random.Random(name)
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    valid = [GENERATORS[name](rng, rng.randint(0, 5)) for _ in range(n)]
    invalid: list[Any] = []
    while len(invalid) < n:
        m = mutate(rng, rng.choice(valid))
        if not validator.is_valid(m):
            invalid.append(m)
    return valid, invalid


@pytest.mark.parametrize("name", list(RECURSIVE))
def test_generators_produce_labelled_instances(name: str) -> None:
    schema = RECURSIVE[name][0]
    valid, invalid = instances(name)
    for v in valid:
        jsonschema.validate(v, schema, format_checker=jsonschema.FormatChecker())
    # recursion at most 6 deep: an object and an array per level at most
    assert max(_depth(v) for v in valid) <= 13 and len(invalid) == len(valid)


def _depth(v: Any) -> int:
    if isinstance(v, dict):
        return 1 + max((_depth(x) for x in v.values()), default=0)
    if isinstance(v, list):
        return 1 + max((_depth(x) for x in v), default=0)
    return 0


# -- end to end: compile, tokenize, match ----------------------------------------------

def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def matches(art: Any, tok: Vocabulary, text: str) -> bool:
    """Whether the matcher accepts ``text``'s tokens one by one and can then terminate."""
    m = art.matcher()
    return all(m.accept_token(t) for t in tok.encode(text)) and bool(m.can_terminate())


def check_end_to_end(name: str, tok: Vocabulary) -> None:
    schema = RECURSIVE[name][0]
    art = maskc.compile_json_schema(schema, tok)
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    valid, invalid = instances(name)
    for value in valid + invalid:
        text = compact(value)
        assert matches(art, tok, text) == validator.is_valid(value), text


@pytest.mark.parametrize("name", list(RECURSIVE))
def test_end_to_end_deepseek(name: str, deepseek: Vocabulary) -> None:
    check_end_to_end(name, deepseek)


@pytest.mark.parametrize("name", list(RECURSIVE))
def test_end_to_end_smollm2(name: str, smollm2: Vocabulary) -> None:
    check_end_to_end(name, smollm2)


@pytest.mark.parametrize("name", list(RECURSIVE))
def test_end_to_end_mistral_sp(name: str, mistral_sp: Vocabulary) -> None:
    check_end_to_end(name, mistral_sp)


def test_an_empty_language_in_generation_semantics_says_exact_semantics_may_not_be_empty(byte_vocab: Vocabulary) -> None:
    """A schema without ``type`` whose objects can never finish (a required property that
    recurses forever) has no instance that generation semantics writes, which takes it to be
    an object; its instances are the other kinds of values, which exact semantics compiles.
    The error in generation semantics says so; the schema's own emptiness does not."""
    schema = {"$defs": {"foo": {"type": "object", "properties": {"c": {"$ref": "#/$defs/foo"}}, "required": ["c"]}},
              "properties": {"foo": {"$ref": "#/$defs/foo"}}, "required": ["foo"]}
    with pytest.raises(EmptyLanguage) as e:
        maskc.compile_json_schema(schema, byte_vocab)
    assert e.value.hint is not None and "--semantics exact" in e.value.hint
    art = maskc.compile_json_schema(schema, byte_vocab, options=CompileOptions(semantics="exact"))

    def accepts(text: bytes) -> bool:
        m = art.matcher()
        return m.accept_string(text) and m.can_terminate()

    assert accepts(b"1") and accepts(b'"x"') and accepts(b"[]") and not accepts(b'{"foo":{}}')
    with pytest.raises(EmptyLanguage) as e2:  # exact semantics: the schema's own emptiness, no such hint
        maskc.compile_json_schema({"type": "object", "properties": {"n": {"$ref": "#"}}, "required": ["n"]},
                                  byte_vocab, options=CompileOptions(semantics="exact"))
    assert e2.value.hint is None


@pytest.mark.parametrize("schema,cycles", [
    ({"type": "string"}, False),
    ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"type": "integer"}}, "$ref": "#/$defs/a"}, False),
    ({"$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/b"}}, "b": {"type": "integer"}},
      "properties": {"x": {"$ref": "#/$defs/a"}, "y": {"$ref": "#/$defs/a"}}}, False),
    ({"type": "array", "items": {"$ref": "#"}}, True),
    ({"$defs": {"a": {"properties": {"b": {"$ref": "#/$defs/b"}}},
                "b": {"items": {"$ref": "#/$defs/a"}}}, "$ref": "#/$defs/a"}, True),
    ({"$defs": {"a": {"properties": {"self": {"$ref": "#/$defs/a/properties/self"}}}}}, True),
    ({"$dynamicAnchor": "x", "items": {"$dynamicRef": "#x"}}, True),
])
def test_references_that_may_cycle_are_known_up_front(schema: Any, cycles: bool) -> None:
    from maskc.compiler.frontends.json_schema import SchemaCompiler

    assert SchemaCompiler(schema, CompileOptions()).refs_may_cycle() is cycles


# -- inlined targets built once ------------------------------------------------------------

ADDRESS: dict[str, Any] = {
    "type": "object",
    "properties": {"street": {"type": "string", "maxLength": 30}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
                   "tags": {"type": "array", "items": {"enum": ["home", "work"]}, "maxItems": 3}},
    "required": ["street"], "additionalProperties": False,
}

# one definition used at several places and depths; beside a free-form value (a rule, which
# changes how a later count is built), recursion, and a target used inside an allOf, a not
# and an if (compiled in another context, never reused there)
MANY_USES: list[dict[str, Any]] = [
    {"$defs": {"addr": ADDRESS}, "type": "object",
     "properties": {k: {"$ref": "#/$defs/addr"} for k in ("home", "work", "billing", "shipping")},
     "additionalProperties": False},
    {"$defs": {"addr": ADDRESS}, "type": "array", "maxItems": 3,
     "items": {"type": "object", "properties": {"a": {"$ref": "#/$defs/addr"}, "b": {"$ref": "#/$defs/addr"},
                                                "nested": {"type": "object", "properties": {
                                                    "c": {"$ref": "#/$defs/addr"}}}}}},
    {"$defs": {"addr": ADDRESS, "item": {"type": "array", "items": {"$ref": "#/$defs/addr"}, "maxItems": 1000}},
     "type": "object", "properties": {"first": {"$ref": "#/$defs/item"}, "free": {},
                                      "then": {"$ref": "#/$defs/item"}, "also": {"$ref": "#/$defs/addr"},
                                      "again": {"$ref": "#/$defs/item"}}},
    {"$defs": {"addr": ADDRESS, "tree": {
        "type": "object", "properties": {"at": {"$ref": "#/$defs/addr"}, "kids": {
            "type": "array", "items": {"$ref": "#/$defs/tree"}}}}},
     "type": "object", "properties": {"t": {"$ref": "#/$defs/tree"}, "a": {"$ref": "#/$defs/addr"},
                                      "b": {"$ref": "#/$defs/addr"}}},
    {"$defs": {"addr": ADDRESS}, "type": "object", "properties": {
        "a": {"$ref": "#/$defs/addr"},
        "b": {"allOf": [{"$ref": "#/$defs/addr"}, {"required": ["zip"]}]},
        "c": {"$ref": "#/$defs/addr", "not": {"required": ["tags"]}},
        "d": {"if": {"$ref": "#/$defs/addr"}, "then": {"required": ["zip"]}},
        "e": {"$ref": "#/$defs/addr"}, "f": {"$ref": "#/$defs/addr"}}},
]


class _Forgetful(dict[Any, Any]):
    """A memo that keeps nothing: every expansion builds its target again."""

    def __setitem__(self, key: Any, value: Any) -> None:
        pass


@pytest.mark.parametrize("ws", ["compact", "pretty"])
@pytest.mark.parametrize("k", range(len(MANY_USES)))
def test_an_inlined_target_is_built_once_per_context_and_the_grammar_is_unchanged(
        k: int, ws: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from maskc.compiler.frontends.json_schema import SchemaCompiler

    schema, options = MANY_USES[k], CompileOptions(parse_whitespace(ws), semantics="exact")
    built: list[tuple[str, int, bool]] = []  # the builds of the target where it compiles as at the top
    value, init = SchemaCompiler.value, SchemaCompiler.__init__

    def counting(self: SchemaCompiler, sub: Any, pointer: str, depth: int) -> Any:
        if pointer == "/$defs/addr" and self.inlines_alike():
            built.append((pointer, depth, self.with_rules))
        return value(self, sub, pointer, depth)

    monkeypatch.setattr(SchemaCompiler, "value", counting)
    once = schema_to_ir(schema, options)
    memo_builds = list(built)
    assert memo_builds and len(set(memo_builds)) == len(memo_builds)

    def forgetful(self: SchemaCompiler, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.inlined = _Forgetful()

    built.clear()
    monkeypatch.setattr(SchemaCompiler, "__init__", forgetful)
    every = schema_to_ir(schema, options)
    assert len(built) > len(memo_builds)  # (each schema uses the target more than once in one context)
    assert once[1] == every[1]  # the same not_enforced
    # The same rules, names and bodies; but where the item of a count became a call (schema
    # 2's maxItems, once the free-form value made rules), each build made a rule of its own:
    # the same body twice, called once each. Built once, the item is one rule.
    assert once[0] == _one_rule_per_body(every[0])
    assert (len(once[0].rules) < len(every[0].rules)) is (k == 2)


def _one_rule_per_body(g: Grammar) -> Grammar:
    """``g`` with each rule whose body repeats an earlier rule's body dropped, its references
    renamed to the earlier rule (the bodies compared as they are: one pass)."""
    from dataclasses import replace

    from maskc.compiler.frontends.json_schema.refs import map_refs
    from maskc.compiler.ir import RuleRef

    first: dict[Any, str] = {}
    rename: dict[str, str] = {}
    for name, body in g.rules:
        rename[name] = first.setdefault(body, name)
    rules = tuple((name, map_refs(body, lambda r: RuleRef(rename[r.name]))) for name, body in g.rules
                  if rename[name] == name)
    return replace(g, rules=rules, calls=frozenset(rename[n] for n in g.calls),
                   shared=frozenset(rename[n] for n in g.shared))
