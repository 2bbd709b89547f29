"""GBNF front end: tables of (grammar, accepted, rejected), errors with their place, the
llama.cpp grammars, and the independent oracle of ``tests/gbnf_oracle.py``.

Languages are checked on the IR itself by a small recognizer (a least fixpoint over
(rule, position) → end positions), so these tests need no compiler core.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from maskc.compiler.errors import GrammarSyntaxError, InputError
from maskc.compiler.frontends.gbnf import GBNF_EXTENSIONS, canonical_gbnf, gbnf_to_grammar
from maskc.compiler.ir import Alt, ByteSet, Grammar, Node, Repeat, RuleRef, Seq
from tests import gbnf_oracle as oracle


def shared_gbnf_dir() -> Path:
    env = os.environ.get("MASKC_SHARED_DIR")
    base = Path(env) if env else Path(__file__).resolve().parents[3] / "shared"
    return base / "gbnf"


def shared_grammars() -> list[Path]:
    d = shared_gbnf_dir()
    return sorted(d.glob("*.gbnf")) if d.is_dir() else []


def need_shared() -> None:
    if not shared_grammars():
        pytest.skip(f"no GBNF grammars at {shared_gbnf_dir()} (set MASKC_SHARED_DIR to ../shared)")


# -- a recognizer over the IR ---------------------------------------------------------------


class _IrRecognizer:
    def __init__(self, grammar: Grammar, data: bytes) -> None:
        self.rules = grammar.rule_map
        self.data = data
        self.table: dict[tuple[str, int], frozenset[int]] = {}
        self.visited: set[tuple[str, int]] = set()
        self.memo: dict[tuple[int, int], frozenset[int]] = {}
        self.changed = False

    def rule(self, name: str, i: int) -> frozenset[int]:
        key = (name, i)
        old = self.table.get(key, frozenset())
        if key in self.visited:
            return old
        self.visited.add(key)
        new = old | self.ends(self.rules[name], i)
        if new != old:
            self.table[key] = new
            self.changed = True
        return new

    def ends(self, node: Node, i: int) -> frozenset[int]:
        key = (id(node), i)
        if key not in self.memo:
            self.memo[key] = self._ends(node, i)
        return self.memo[key]

    def _ends(self, node: Node, i: int) -> frozenset[int]:
        if isinstance(node, ByteSet):
            ok = i < len(self.data) and self.data[i] in node
            return frozenset([i + 1]) if ok else frozenset()
        if isinstance(node, RuleRef):
            return self.rule(node.name, i)
        if isinstance(node, Seq):
            cur = frozenset([i])
            for item in node.items:
                cur = frozenset(e for s in cur for e in self.ends(item, s))
            return cur
        if isinstance(node, Alt):
            return frozenset(e for item in node.items for e in self.ends(item, i))
        assert isinstance(node, Repeat), node
        cur = frozenset([i])
        for _ in range(node.min):
            cur = frozenset(e for s in cur for e in self.ends(node.item, s))
        result, frontier, k = set(cur), set(cur), node.min
        while frontier and (node.max is None or k < node.max):
            k += 1
            step = {e for s in frontier for e in self.ends(node.item, s)}
            frontier = step - result if node.max is None else step
            result |= step
        return frozenset(result)


def ir_accepts(grammar: Grammar, data: bytes) -> bool:
    r = _IrRecognizer(grammar, data)
    while True:
        r.changed, r.visited, r.memo = False, set(), {}
        r.rule(grammar.start, 0)
        if not r.changed:
            return len(data) in r.table.get((grammar.start, 0), frozenset())


# -- languages ------------------------------------------------------------------------------

TABLE: list[tuple[str, list[str | bytes], list[str | bytes]]] = [
    ('root ::= "abc"', ["abc"], ["ab", "abcd", ""]),
    ('root ::= "a" | "bc"', ["a", "bc"], ["abc", "b", ""]),
    ('root ::= ""', [""], ["a"]),
    ('root ::= "é日😀"', ["é日😀"], ["é日", "e"]),
    (r'root ::= "\x41\u00e9\U0001F600\n\r\t\\\"\[\]\-"', ['Aé😀\n\r\t\\"[]-'], ["A"]),
    (r'root ::= "\x85"', [b"\xc2\x85"], [b"\x85"]),  # escapes are code points, not bytes
    ("root ::= [a-c]+", ["a", "cab"], ["", "d"]),
    ("root ::= [^a]", ["b", "é", "日", "😀", "\n"], ["a", "", "bb"]),
    (r"root ::= [^\x00-\x7f]", ["é", "😀"], ["a", b"\x80", b"\xed\xa0\x80"]),
    (r"root ::= [\x20\x23-\x25\U0010FFFF]", [" ", "#", "%", "\U0010ffff"], ["$x", "!", "&"]),
    ("root ::= [a-]", ["a", "-"], ["b"]),
    ("root ::= [-a]", ["a", "-"], ["b"]),
    (r"root ::= [a\-z]", ["a", "-", "z"], ["b"]),
    (r"root ::= [\]\[]", ["]", "["], ["\\"]),
    ("root ::= [ぁ-ゟ]", ["ぁ", "ゟ", "ひ"], ["ァ", "a"]),
    ("root ::= .", ["a", "é", "\n", "😀"], ["", "ab", b"\xff", b"\xed\xa0\x80", b"\xc0\xaf"]),
    ('root ::= "a"{3}', ["aaa"], ["aa", "aaaa"]),
    ('root ::= "a"{2,}', ["aa", "aaaaa"], ["a"]),
    ('root ::= "a"{1,3}', ["a", "aaa"], ["", "aaaa"]),
    ('root ::= "a"{0}', [""], ["a"]),
    ('root ::= "a" { 1 , 2 } "b"', ["ab", "aab"], ["b", "aaab"]),
    ('root ::= ("ab")? "c"*', ["", "ab", "abccc", "c"], ["abab", "a"]),
    ('root ::= ("a" | "b")+ "!"', ["a!", "abba!"], ["!", "ab"]),
    ('root ::= "a"*?', ["", "aaa"], ["b"]),  # stacked repetitions
    ('root ::= "(" root ")" | ""', ["", "()", "((()))"], ["(", "())", ")("]),
    ('root ::= expr\nexpr ::= term ("+" term)*\nterm ::= [0-9] | "(" expr ")"',
     ["1", "1+2", "(1+2)+3", "((1))"], ["", "1+", "(1", "1++2"]),
    ('root ::= x\nx ::= "a" y | ""\ny ::= "b" x', ["", "ab", "abab"], ["a", "aba", "b"]),
    ('root ::= a-rule2\na-rule2 ::= "z"  # names take letters, digits and hyphens', ["z"], ["a"]),
    ('root ::=\n  "a"\n  "b" |\n  "c"\n# a comment\nother ::= "x"', ["ab", "c"], ["a", "x"]),
    ('root ::= ( "a" # inside a group\n | "b" )', ["a", "b"], ["ab"]),
    ('root ::= "a" |', ["a", ""], ["b"]),  # an empty alternative is the empty string
    ('root ::= [] | "x"', ["x"], [""]),  # an empty class matches nothing
    ('root ::= "#" "|"', ["#|"], ["#"]),
    ('\r\nroot ::= "a"\r\n  "b"\r\n', ["ab"], ["a"]),
]


@pytest.mark.parametrize("text,accepted,rejected", TABLE)
def test_gbnf_table(text: str, accepted: list[str | bytes], rejected: list[str | bytes]) -> None:
    g = gbnf_to_grammar(text)
    ref = oracle.parse(text)
    for s in accepted:
        data = s.encode() if isinstance(s, str) else s
        assert ir_accepts(g, data), (text, s)
        assert oracle.recognize(ref, data), ("oracle", text, s)
    for s in rejected:
        data = s.encode() if isinstance(s, str) else s
        assert not ir_accepts(g, data), (text, s)
        assert not oracle.recognize(ref, data), ("oracle", text, s)


def test_references_stay_rule_refs_and_unreachable_rules_are_dropped() -> None:
    g = gbnf_to_grammar('root ::= "(" root ")" | leaf\nleaf ::= "x"\nunused ::= "y"')
    assert g.start == "root"
    assert [n for n, _ in g.rules] == ["root", "leaf"]
    body = g.rule_map["root"]
    assert isinstance(body, Alt) and isinstance(body.items[0], Seq)
    assert RuleRef("root") in body.items[0].items
    assert RuleRef("leaf") in body.items


def test_extensions_and_canonical_text() -> None:
    assert GBNF_EXTENSIONS == (".gbnf",)
    assert canonical_gbnf('root ::= "a"  \r\n  | "b"\t\r\n') == 'root ::= "a"\n  | "b"\n'
    text = 'root ::= "x"\n'
    assert canonical_gbnf(canonical_gbnf(text)) == canonical_gbnf(text) == text


# -- errors ---------------------------------------------------------------------------------

ERRORS = [
    ("root ::= foo", "undefined rule 'foo'", 1, 10),
    ('root ::= "a"\n  | "b" other', "undefined rule 'other'", 2, 9),
    ('item ::= "a"', "no 'root' rule", 1, 1),
    ("", "no 'root' rule", 1, 1),
    ('root ::= ("a" | "b"', "unbalanced '('", 1, 10),
    ('root ::= ("a"\nx ::= "b"', "unbalanced '('", 1, 10),
    ('root ::= "a")', "unbalanced ')'", 1, 13),
    ('root ::= [a-z "x"', "unbalanced '['", 1, 10),
    ('root ::= "a" ]', "unbalanced ']'", 1, 14),
    ('root ::= "abc\nx ::= "y"', "unterminated string literal", 1, 10),
    ('root ::= "a" "b', "unterminated string literal", 1, 14),
    (r'root ::= "a\q"', "bad escape", 1, 12),
    (r'root ::= "\x4g"', "bad escape", 1, 11),
    (r'root ::= [\u12]', "bad escape", 1, 11),
    (r'root ::= "\uD800"', "surrogate", 1, 11),
    (r'root ::= "\U00110000"', "beyond U+10FFFF", 1, 11),
    ("root ::= [z-a]", "bad range", 1, 11),
    ("root ::= [0-9a-Z]", "bad range", 1, 14),
    ('root ::= "a"{3,1}', "bad repetition bounds {3,1}", 1, 13),
    ('root ::= "a"{,3}', "expected a number", 1, 14),
    ('root ::= "a"{2', "unbalanced '{'", 1, 13),
    ('root ::= "a" | *', "has no item to repeat", 1, 16),
    ('root ::= "a"\nroot ::= "b"', "rule 'root' is defined twice (first on line 1)", 2, 1),
    ('root ::= a\n\na ::= "x" a', "rule 'a' can never finish", 3, 1),
    ('root ::= "x" root', "rule 'root' can never finish", 1, 1),
    ('root ::= b\nb ::= c "x"\nc ::= b | []', "rule 'b' can never finish", 2, 1),
    ('root = "a"', "expected '::='", 1, 6),
    ("root ::= <think>", "token references", 1, 10),
    ('root ::= "a" ; "b"', "unexpected character ';'", 1, 14),
    ('root ::= "a"\n!x ::= "b"', "unexpected character '!'", 2, 1),
    ("::= x", "expected a rule name", 1, 1),
    # the brief's example: an error deep in a multi-line rule
    ('root ::= obj\nobj ::=\n  "{" ws  (pair | "x") ws "}"\nws ::= [ ]*', "undefined rule 'pair'", 3, 12),
]


@pytest.mark.parametrize("text,reason,line,column", ERRORS)
def test_gbnf_errors(text: str, reason: str, line: int, column: int) -> None:
    with pytest.raises(GrammarSyntaxError) as info:
        gbnf_to_grammar(text)
    e = info.value
    assert reason in e.reason, e.reason
    assert (e.line, e.column) == (line, column), str(e)
    assert e.line_text == text.split("\n")[line - 1]
    assert isinstance(e, InputError)


def test_error_renders_a_caret_under_the_place() -> None:
    with pytest.raises(GrammarSyntaxError) as info:
        gbnf_to_grammar('root ::= "a"\n\tx ::= [z-a]')
    assert str(info.value).split("\n") == [
        "bad range: U+007A-U+0061 is reversed (its end is below its start) (line 2, column 9)",
        "    \tx ::= [z-a]",
        "    \t       ^",
    ]


def test_malformed_text_never_escapes_as_a_traceback() -> None:
    need_shared()
    rng = random.Random(7)
    alphabet = '"[]()|*+?{},-\\#:=.^\n xa0'
    for path in shared_grammars():
        text = path.read_text(encoding="utf-8")
        for _ in range(150):
            chars = list(text)
            for _ in range(rng.randint(1, 3)):
                i = rng.randrange(len(chars))
                op = rng.randrange(3)
                if op == 0:
                    del chars[i]
                elif op == 1:
                    chars.insert(i, rng.choice(alphabet))
                else:
                    chars[i] = rng.choice(alphabet)
            try:
                gbnf_to_grammar("".join(chars))
            except GrammarSyntaxError as e:
                assert e.line >= 1 and e.column >= 1


def test_deep_nesting_is_an_error_not_a_recursion_error() -> None:
    with pytest.raises(GrammarSyntaxError, match="nested deeper"):
        gbnf_to_grammar("root ::= " + "(" * 5000 + '"a"' + ")" * 5000)


# -- the llama.cpp grammars -----------------------------------------------------------------


def test_shared_grammars_parse() -> None:
    need_shared()
    names = {p.name: p for p in shared_grammars()}
    assert {"chess.gbnf", "japanese.gbnf", "json.gbnf", "list.gbnf"} <= set(names)
    for path in names.values():
        g = gbnf_to_grammar(path.read_text(encoding="utf-8"))
        assert g.start == "root"
    json_g = gbnf_to_grammar(names["json.gbnf"].read_text(encoding="utf-8"))
    assert {"root", "value", "object", "array", "string", "number", "boolean", "ws"} == set(json_g.rule_map)


SAMPLES = {
    "json.gbnf": ([b'{}', b'{"a": [1, -2, true, {"b": "x\\n\\u00e9"}]}', '{"é": "日本"}'.encode()],
                  [b"", b"[]", b'{"a" 1}', b'{"a": 01.5}', b'{"a": "\\q"}']),
    "list.gbnf": ([b"- a\n", "- é\n- b c\n".encode()], [b"", b"- \n", b"- a", b"- a\rb\n", "- \u2028\n".encode()]),
    "chess.gbnf": ([b"1. e4 e5\n2. Nf3 Nc6\n", b"1. O-O-O exd8=Q+\n2. a1 h8#\n"], [b"1. e4 e5\n", b"1. e9 e5\n2. a1 a2\n"]),
    "japanese.gbnf": (["ひらがな カタカナ\n漢字".encode()], [b"", b"abc", "ひ  ら".encode()]),
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_shared_grammar_samples(name: str) -> None:
    need_shared()
    text = (shared_gbnf_dir() / name).read_text(encoding="utf-8")
    g, ref = gbnf_to_grammar(text), oracle.parse(text)
    accepted, rejected = SAMPLES[name]
    for s in accepted:
        assert ir_accepts(g, s) and oracle.recognize(ref, s), s
    for s in rejected:
        assert not ir_accepts(g, s) and not oracle.recognize(ref, s), s


def test_front_end_agrees_with_the_oracle_on_generated_and_mutated_strings() -> None:
    need_shared()
    for path in shared_grammars():
        text = path.read_text(encoding="utf-8")
        g, ref = gbnf_to_grammar(text), oracle.parse(text)
        rng = random.Random(path.name)
        for _ in range(25):
            s = oracle.generate(ref, rng, max_depth=8)
            assert ir_accepts(g, s), (path.name, s)
            for _ in range(2):
                m = oracle.mutate(s, rng)
                assert ir_accepts(g, m) == oracle.recognize(ref, m), (path.name, m)


# -- the oracle on its own ------------------------------------------------------------------

ORACLE_TABLE = [
    ('root ::= "a" root | ""', [b"", b"aaa"], [b"b", b"ab"]),
    ('root ::= root "a" | "b"', [b"b", b"baa"], [b"", b"a", b"ab"]),  # left recursion
    ("root ::= x\nx ::= y \"+\" x | y\ny ::= x \"*\" | [0-9]", [b"1", b"1*", b"1+2**"], [b"+", b"1+"]),
    ('root ::= "a"{2,3} [^a]?', [b"aa", b"aaab", "aaé".encode()], [b"a", b"aaaa", b"aa\xff"]),
    ('root ::= ("x"?){2}', [b"", b"x", b"xx"], [b"xxx"]),
]


@pytest.mark.parametrize("text,accepted,rejected", ORACLE_TABLE)
def test_oracle_table(text: str, accepted: list[bytes], rejected: list[bytes]) -> None:
    for s in accepted:
        assert oracle.recognize(text, s), s
    for s in rejected:
        assert not oracle.recognize(text, s), s


@pytest.mark.parametrize("text", [t for t, _, _ in ORACLE_TABLE] + [t for t, _, _ in TABLE[:28]])
def test_oracle_recognizes_what_it_generates(text: str) -> None:
    ref = oracle.parse(text)
    rng = random.Random(text)
    for _ in range(20):
        s = oracle.generate(ref, rng, max_depth=6)
        assert oracle.recognize(ref, s), s


def test_mutate_changes_one_byte() -> None:
    rng = random.Random(3)
    for _ in range(200):
        s = bytes(rng.randrange(256) for _ in range(rng.randrange(5)))
        m = oracle.mutate(s, rng)
        assert abs(len(m) - len(s)) <= 1
        if len(m) == len(s):
            assert sum(a != b for a, b in zip(m, s)) <= 1
