"""Objects: ``properties``, ``required``, ``additionalProperties``, ``patternProperties``.

Properties are emitted in definition order (then required names not listed); optional
ones may be skipped (:class:`~maskc.compiler.ir.Fields`). Keys are matched in their single
canonical JSON spelling, so a key cannot hide a listed name behind an escape.
"""

from __future__ import annotations

from typing import Any

from maskc.compiler.errors import RegexSyntaxError, SchemaError, UnsupportedRegex
from maskc.compiler.frontends.json_schema.base import Base, JsonValue, dumps_layout
from maskc.compiler.frontends.json_schema.base import ptr as _ptr
from maskc.compiler.frontends.json_text import CANONICAL_ANY_CHAR, Layout, canonical_chars
from maskc.compiler.frontends.regex import regex_to_ir
from maskc.compiler.ir import NOTHING, Fields, Node, Product, alt, lit, rep, seq

__all__ = ["ObjectsMixin"]


class ObjectsMixin(Base):
    """The ``object`` type."""

    def object(self, schema: dict[str, JsonValue], pointer: str, depth: int) -> Node:
        props = schema.get("properties", {})
        if not isinstance(props, dict):
            raise SchemaError("properties must be an object", pointer=_ptr(pointer, "properties"))
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise SchemaError("required must be an array of strings", pointer=_ptr(pointer, "required"))
        layout = Layout(self.options.whitespace, depth)
        pattern_props = schema.get("patternProperties", {})
        if not isinstance(pattern_props, dict):
            raise SchemaError("patternProperties must be an object", pointer=_ptr(pointer, "patternProperties"))
        declared = "properties" in schema or bool(pattern_props)
        # generation: a schema that declares its keys means those keys only; exact: JSON Schema
        addl = schema.get("additionalProperties", False if declared and not self.exact else True)
        # key content languages of the patterns (JSON Schema: a pattern matches anywhere)
        patterns: list[tuple[str, Node, Any]] = []
        for pat, psub in pattern_props.items():
            pptr = _ptr(pointer, "patternProperties", pat)
            try:
                content = regex_to_ir(pat, canonical_chars, search=True)
            except UnsupportedRegex as e:
                self.unsupported("patternProperties", pptr, e.reason)
                continue
            except RegexSyntaxError as e:
                raise RegexSyntaxError(e.reason, pattern=pat, offset=e.offset, pointer=pptr) from e
            patterns.append((pat, content, psub))
        items: list[tuple[Node, bool]] = []
        names = list(props)
        for name in required:
            if name not in props:
                names.append(name)
        for name in names:
            key_bytes = dumps_layout(name, layout)
            matching = [psub for pat, content, psub in patterns if _content_matches(content, key_bytes)]
            if name in props:
                sub: JsonValue = props[name]
                if matching:
                    sub = {"allOf": [sub, *matching]}
            elif matching:
                sub = {"allOf": matching} if len(matching) > 1 else matching[0]
            elif addl is False:
                return NOTHING  # a required property that no schema admits
            else:
                sub = addl
            key = lit(key_bytes)
            vnode = self.value(sub, _ptr(pointer, "properties", name), depth + 1)
            req = name in required
            if vnode == NOTHING:
                if req:
                    return NOTHING
                continue
            items.append((seq(key, layout.colon, vnode), req))
        rest_parts: list[Node] = []
        listed = alt(*(lit(dumps_layout(n, layout)) for n in names)) if names else NOTHING
        pattern_keys = [seq(lit('"'), content, lit('"')) for _, content, _ in patterns]
        for i, (pat, _, psub) in enumerate(patterns):
            vnode = self.value(psub, _ptr(pointer, "patternProperties", pat), depth + 1)
            if vnode == NOTHING:
                continue
            # keys of this pattern only: a key two patterns match would need both schemas
            # at once, so it is not generated (a sound restriction)
            others = alt(listed, *(k for j, k in enumerate(pattern_keys) if j != i))
            key = pattern_keys[i] if others == NOTHING else Product(pattern_keys[i], others, "minus")
            rest_parts.append(seq(key, layout.colon, vnode))
        if addl is not False:
            vnode = self.value(addl, _ptr(pointer, "additionalProperties"), depth + 1)
            if vnode != NOTHING:
                any_key = seq(lit('"'), rep(CANONICAL_ANY_CHAR, 0, None), lit('"'))
                excluded = alt(listed, *pattern_keys)
                if excluded != NOTHING:
                    any_key = Product(any_key, excluded, "minus")
                rest_parts.append(seq(any_key, layout.colon, vnode))
        rest: Node | None = alt(*rest_parts) if rest_parts else None
        has_required = any(r for _, r in items)
        return seq(
            lit("{"),
            Fields(
                tuple(items),
                layout.first,
                layout.sep,
                layout.close("}"),
                None if has_required else layout.close_empty("}"),
                rest,
            ),
        )


def _content_matches(content: Node, key_json: bytes) -> bool:
    """Whether a property name (as canonical JSON, quotes included) is in ``content``'s language."""
    from maskc.compiler.dfa import determinize
    from maskc.compiler.nfa import lower

    return determinize(lower(content)).accepts(key_json[1:-1])
