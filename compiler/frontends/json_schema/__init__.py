"""JSON Schema (drafts 04 to 2020-12, see :mod:`.drafts`) to a :class:`~maskc.compiler.ir.Grammar`.

Output follows the schema's property order; optional properties may be skipped. A keyword
that the grammar cannot enforce raises :class:`UnsupportedKeyword` naming it and its JSON
pointer, or, in lenient mode, is recorded in ``not_enforced`` and compiled without.
A schema without recursion compiles to one regular rule; recursive ``$ref``s and
free-form values (``{}``, ``true``) become rules (see :mod:`.refs`). The semantics
(``generation`` or ``exact``) comes with the options. One module per keyword family:
:mod:`.refs`, :mod:`.combinators`, :mod:`.conditionals` (``not``, ``if``), :mod:`.objects`,
:mod:`.arrays` (with :mod:`.sequences` and :mod:`.complement`), :mod:`.scalars`.
"""

from __future__ import annotations

import time

from maskc.compiler.errors import EmptyLanguage, SchemaError, TimeLimitExceeded, UnsupportedKeyword
from maskc.compiler.jsonpointer import resolve as resolve_pointer
from maskc.compiler.frontends.json_schema.arrays import ArraysMixin
from maskc.compiler.frontends.json_schema.base import (
    ANNOTATIONS,
    ARRAY_KW,
    NUMBER_KW,
    OBJECT_KW,
    STRING_KW,
    TYPES,
    JsonValue,
    dumps_layout,
    ptr,
)
from maskc.compiler.frontends.json_schema.combinators import CombinatorsMixin
from maskc.compiler.frontends.json_schema.conditionals import ConditionalsMixin
from maskc.compiler.frontends.json_schema.drafts import DRAFT_NAMES, later_keywords
from maskc.compiler.frontends.json_schema.inputs import schema_from
from maskc.compiler.frontends.json_schema.objects import ObjectsMixin
from maskc.compiler.frontends.json_schema.refs import ANY_RULE, ONEOF_ANY_DEPTH, RefsMixin
from maskc.compiler.frontends.json_schema.scalars import ScalarsMixin
from maskc.compiler.frontends.json_schema.validate import check_schema
from maskc.compiler.ir import NOTHING, Grammar, Node, alt, lit
from maskc.compiler.options import CompileOptions

__all__ = ["schema_to_ir", "SchemaCompiler", "ANNOTATIONS", "dumps_layout", "ANY_RULE",
           "bounded_free_form_entry"]


class SchemaCompiler(ConditionalsMixin, RefsMixin, CombinatorsMixin, ObjectsMixin, ArraysMixin, ScalarsMixin):
    """Compiles one root schema; ``not_enforced`` collects what lenient mode dropped."""

    def __init__(self, root: JsonValue, options: CompileOptions) -> None:
        if not isinstance(root, (dict, bool)):
            raise SchemaError(f"a schema must be an object or a boolean, got {type(root).__name__}")
        super().__init__(root, options)
        self.root = self.absolutized()
        self._index, self.absolute = None, True  # one resource now, root-relative pointers
        draft = self.draft
        self.root, dropped = later_keywords(self.root, draft)
        if dropped:
            self._index = None  # (built again on the document as compiled)
        for keyword, where in dropped:
            name = DRAFT_NAMES[draft]
            self.annotation(keyword, where, f"not a {name} keyword (the draft $schema names): ignored, as {name} "
                            "validators ignore it; name a later draft in $schema to have it enforced")

    def compile(self) -> Grammar:
        """The grammar of the root schema (start rule first).

        Raises:
            EmptyLanguage: no value satisfies the schema.
        """
        # The root is expanded as the target of "#", so "$ref": "#" recurses into a rule.
        top = self.expand("#", lambda: self.value(self.root, "", 0), 0, "$ref", "")
        grammar = self.grammar(top)
        if grammar.body == NOTHING:
            raise EmptyLanguage("the schema admits no value")
        return grammar

    def compile_subschema(self, pointer: str, schema: JsonValue = None) -> Grammar:
        """The grammar of the subschema at ``pointer`` (RFC 6901; ``""`` is the root), its
        ``$ref``s resolved against the root, as if it were the document's top.

        ``schema``, when given, is compiled in place of the node at ``pointer`` (a union
        branch merged with its parent's keywords, say); ``pointer`` then only locates errors.
        Use a fresh compiler per call: the rules built are kept on ``self``.

        Raises:
            SchemaError: ``pointer`` names nothing in the document.
            EmptyLanguage: no value satisfies the subschema.
        """
        if schema is None:
            try:
                found: JsonValue = resolve_pointer(self.root, pointer)
            except LookupError:
                raise SchemaError(f"no subschema at {pointer!r}", pointer=pointer) from None
            # keyed like a "$ref": "#<pointer>", so a reference back to it recurses into a rule
            top = self.expand("#" + pointer, lambda: self.value(found, pointer or "#", 0), 0, "$ref", pointer)
        else:
            schema = later_keywords(schema, self.draft)[0]  # (read in the document's draft, as the root is)
            top = self.value(schema, pointer, 0)
        grammar = self.grammar(top)
        if grammar.body == NOTHING:
            raise EmptyLanguage(f"the subschema at {pointer or '/'} admits no value")
        return grammar

    def value(self, schema: JsonValue, pointer: str, depth: int) -> Node:
        if time.monotonic() > self.deadline:  # (merges and negations can nest without end in sight)
            raise TimeLimitExceeded("compile time (s)", limit=self.options.limits.max_seconds)
        if schema is True or schema == {}:
            return self.any_value(depth)
        if schema is False:
            return NOTHING
        if not isinstance(schema, dict):
            raise SchemaError(f"a schema must be an object or a boolean, got {type(schema).__name__}", pointer=pointer)
        if schema.get("type") == []:
            # No type left (a merge of disjoint types, or the not-an-object branch of a
            # negated condition on an object): no value, whatever else the schema says, and
            # nothing inside it (conditionals, negations, more merges) is worth building.
            return NOTHING
        if "unevaluatedProperties" in schema:
            schema = self.unevaluated(schema, pointer)
        if "$ref" in schema or "$dynamicRef" in schema or "$recursiveRef" in schema:
            return self.reference(schema, pointer, depth)
        if "not" in schema:
            schema = self.simplify_not(schema, pointer)
            if schema is False:
                return NOTHING
            if "not" in schema:
                if "const" in schema or isinstance(schema.get("enum"), list):
                    # Finitely many values: each is checked against the whole schema, its
                    # negations too (exact), where a difference of languages would be built
                    # and a chain of them split into combinations.
                    values = [schema["const"]] if "const" in schema else schema["enum"]
                    try:
                        return self.literals(values, schema, pointer, depth)
                    except UnsupportedKeyword:
                        pass  # (the validator cannot check them, a reference it cannot follow: as before)
                return self.negation(schema, pointer, depth)
        if "if" in schema or "then" in schema or "else" in schema:
            return self.conditional(schema, pointer, depth)
        if "allOf" in schema:
            return self.merged(schema, pointer, depth, "allOf")
        for kw in ("anyOf", "oneOf"):
            if kw in schema:
                return self.union(schema, kw, pointer, depth)
        if "const" in schema:
            return self.literals([schema["const"]], schema, pointer, depth)
        if "enum" in schema:
            if not isinstance(schema["enum"], list):
                raise SchemaError("enum must be an array", pointer=ptr(pointer, "enum"))
            return self.literals(schema["enum"], schema, pointer, depth)
        types = self.types_of(schema, pointer)
        # Bounds that no string (say) meets empty that type only: {"minLength": 5,
        # "maxLength": 2} still admits every number. All types empty: the first reason.
        parts: list[Node] = []
        empty: EmptyLanguage | None = None
        for t in types:
            try:
                parts.append(self.typed(t, schema, pointer, depth))
            except EmptyLanguage as e:
                empty = empty or e
        if not parts and empty is not None:
            raise empty
        return alt(*parts)

    def types_of(self, schema: dict[str, JsonValue], pointer: str) -> list[str]:
        t = schema.get("type")
        if t is None and self.exact:
            return list(TYPES[:-1])  # keywords of other types do not constrain: any value
        if t is None:
            keys = set(schema)
            inferred = [
                name
                for name, kws in (("object", OBJECT_KW), ("array", ARRAY_KW), ("string", STRING_KW), ("number", NUMBER_KW))
                if keys & kws
            ]
            return inferred or list(TYPES[:-1])
        types = [t] if isinstance(t, str) else t
        if not isinstance(types, list) or not all(isinstance(x, str) and x in TYPES for x in types):
            raise SchemaError(f"bad type {t!r}", pointer=ptr(pointer, "type"))
        if "number" in types and "integer" in types:
            types = [x for x in types if x != "integer"]
        return list(dict.fromkeys(types))

    def typed(self, t: str, schema: dict[str, JsonValue], pointer: str, depth: int) -> Node:
        if t == "null":
            return lit("null")
        if t == "boolean":
            return alt(lit("true"), lit("false"))
        if t == "string":
            return self.string(schema, pointer)
        if t in ("integer", "number"):
            return self.number(t, schema, pointer)
        if t == "object":
            return self.object(schema, pointer, depth)
        return self.array(schema, pointer, depth)


def schema_to_ir(schema: JsonValue, options: CompileOptions, *, bounded_free_form: bool = False,
                 shared_refs: bool = False) -> tuple[Grammar, list[dict[str, str]]]:
    """Compile a JSON Schema into a grammar.

    ``bounded_free_form``: free-form values (``{}``, a missing ``type``) are nested at most
    :data:`~.refs.ONEOF_ANY_DEPTH` levels deep, a regular language, rather than the
    recursive rule ``any`` (a sound restriction: what the pipeline falls back to where the
    pushdown grammar exceeds a state limit; see :func:`bounded_free_form_entry`).

    ``schema`` may also be a wrapper that holds one (a tool definition, a pydantic model
    class; see :func:`.inputs.schema_from`). It is first validated against its draft's
    metaschema (see :mod:`.validate`).

    A schema without recursion gives a one-rule grammar without references (its
    ``body`` is a regular language); recursive ``$ref``s and free-form values give rules
    named by JSON pointer (``#/$defs/node``, ``#`` for the root, ``any``), suffixed
    ``@depth`` under ``pretty`` whitespace.

    Returns:
        The grammar and the list of keywords compiled without enforcement (lenient mode).

    Raises:
        SchemaError: the schema is malformed or breaks its metaschema (``pointer`` says where).
        TypeError: ``schema`` is neither JSON nor a pydantic type.
        UnsupportedKeyword: a keyword cannot be enforced and ``lenient`` is off.
        EmptyLanguage: no value satisfies the schema.

    Example:
        >>> g, _ = schema_to_ir({"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
        ...                      "$ref": "#/$defs/n"}, CompileOptions())
        >>> [name for name, _ in g.rules]
        ['#/$defs/n']
    """
    schema = schema_from(schema)
    check_schema(schema)
    sc = SchemaCompiler(schema, options)
    if bounded_free_form:
        sc.bounded_any += 1
    sc.share_refs = shared_refs
    try:
        return sc.compile(), sc.not_enforced
    except RecursionError:
        raise SchemaError(
            "the schema nests too deeply (or its allOf/$ref chains loop)",
            hint="simplify the nesting of allOf/anyOf/$ref",
        ) from None
    except TimeLimitExceeded:
        raise TimeLimitExceeded("compile time (s)", limit=options.limits.max_seconds) from None


def bounded_free_form_entry(why: str) -> dict[str, str]:
    """The ``not_enforced`` entry (``kind: "restricted"``) of a grammar compiled with
    ``bounded_free_form`` because the pushdown grammar was refused (``why``)."""
    return {"keyword": "free-form values", "pointer": "",
            "detail": f"nested at most {ONEOF_ANY_DEPTH} levels deep (as one regular grammar, "
                      "whose counted loops count its bounded repeats): the pushdown grammar was "
                      f"refused ({why})",
            "kind": "restricted"}
