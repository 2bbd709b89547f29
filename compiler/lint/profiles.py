"""Provider profiles, and the rules that read them: ``deep-nesting``, ``large-enum``, ``strict-mode``.

A profile is data (``profile_data/NAME.json``, or any JSON file of the same shape): the
limits an engine or a provider imposes, optionally the severity those limit rules take
under it, and optionally a ``strict`` section (the subset of JSON Schema a provider's strict
mode accepts). A new provider is a new file; :func:`validate_profile` says what a file must
hold. Without a profile the limit rules use ``default.json`` and ``strict-mode`` is silent.

Who reports what: ``deep-nesting`` owns the nesting limit, ``large-enum`` the enum limits
(per enum, across the schema, characters of a large enum); ``strict-mode`` owns the rest of
a strict profile (root, ``additionalProperties``, ``required``, keywords, formats, the
property-count and character limits), so one violation is one finding.
"""

from __future__ import annotations

import copy
import functools
import importlib.resources
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from maskc.compiler.errors import InputError
from maskc.compiler.findings import SEVERITIES, Finding, RuleInfo, Severity
from maskc.compiler.lint.strict import schema_types, string_chars, strict_findings
from maskc.compiler.lint.walk import join, resolve_local

if TYPE_CHECKING:
    from maskc.compiler.lint import LintContext

__all__ = ["LIMIT_KEYS", "RULES", "available_profiles", "check", "load_profile", "validate_profile"]

RULES: list[RuleInfo] = [
    RuleInfo(
        id="deep-nesting", severity="warning",
        summary="An object or array nested deeper than the profile's limit.",
        why="Every level of nesting is a level the model must keep open and close correctly, a "
            "frame the decoder's stack must hold and a factor in the automaton's size; providers "
            "refuse schemas past their documented depth (OpenAI: 10 levels). Levels are counted "
            "on the instance: the root object is level 1, each object or array inside it one more, "
            "through properties, items and local $refs (a recursion is followed once around).",
        example='{"type": "object", "properties": {"a": {"type": "object", "properties": '
                '{"b": {"type": "array", "items": {"type": "object"}}}}}}  (4 levels)',
        fix="flatten the structure (hoist inner fields to their parent, use an id instead of an "
            "embedded object) or raise max_nesting_depth in your profile",
    ),
    RuleInfo(
        id="large-enum", severity="warning",
        summary="An enum with more values than the profile allows (per enum, across the schema, "
                "or in characters).",
        why="A large enum costs prompt tokens when the schema is shown to the model, makes the "
            "model choose among values it may never have seen, and grows the compiled automaton; "
            "providers cap it (OpenAI: 1,000 enum values in a schema, and 15,000 characters for "
            "one enum of more than 250 values).",
        example='{"type": "string", "enum": ["v0", "v1", "...", "v600"]}',
        fix="replace the enum by a pattern or a free string validated after decoding, or split "
            "it by a discriminating field",
    ),
    RuleInfo(
        id="strict-mode", severity="error",
        summary="The schema breaks a provider's strict-mode rules (with a profile such as "
                "openai-strict).",
        why="A provider in strict mode refuses the whole request when the schema leaves its "
            "subset: the root must be an object, every object must set additionalProperties: "
            "false, every property must be required (optional = a union with null), only "
            "documented keywords and formats, and documented totals (properties, characters).",
        example='{"type": "object", "properties": {"name": {"type": "string", "minLength": 1}}}',
        fix="follow the named strict rule: add additionalProperties: false, list the property in "
            "required and make its type a union with null, or drop the unsupported keyword and "
            "validate it after decoding",
    ),
]

# Limits a profile may set; each a positive integer, or null for "no such limit".
LIMIT_KEYS: tuple[str, ...] = (
    "max_nesting_depth",       # object/array levels of an instance (root object = 1)
    "max_enum_values",         # values of one enum
    "max_total_enum_values",   # values of all enums of the schema
    "large_enum_threshold",    # an enum with more values than this is "large" ...
    "max_large_enum_chars",    # ... and may hold at most this many characters of string values
    "max_total_properties",    # entries of all `properties` maps
    "max_total_string_chars",  # property names + definition names + enum values + const values
)
_STRICT_BOOLS = ("root_object", "additional_properties_false", "all_required")
_STRICT_LISTS = ("keywords", "annotations", "formats")
_TOP_KEYS = {"name", "description", "source", "notes", "limits", "severity", "strict"}
_RULE_IDS = {r.id for r in RULES}
_DATA = "profile_data"
_DEFAULT = "default"


def available_profiles() -> list[str]:
    """The built-in profile names, sorted (``default``, ``openai-strict``, ...)."""
    folder = importlib.resources.files("maskc.compiler.lint").joinpath(_DATA)
    return sorted(p.name[: -len(".json")] for p in folder.iterdir() if p.name.endswith(".json"))


@functools.lru_cache(maxsize=None)
def _builtin_text(name: str) -> bytes:
    return importlib.resources.files("maskc.compiler.lint").joinpath(_DATA, f"{name}.json").read_bytes()


def load_profile(name: str) -> dict[str, Any]:
    """A built-in profile by name, or a profile file by path, validated.

    Raises:
        InputError: an unknown name (the message lists the built-in ones), an unreadable or
            malformed file, or a profile of the wrong shape.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"a profile name or path is a non-empty str, got {name!r}")
    known = available_profiles()
    if name in known:
        text = _builtin_text(name)
        origin = f"built-in profile '{name}'"
    elif name.endswith(".json") or "/" in name or "\\" in name or Path(name).is_file():
        try:
            text = Path(name).read_bytes()
        except OSError as e:
            raise InputError(f"cannot read profile file {name!r}: {e.strerror or e}",
                             hint=f"built-in profiles: {', '.join(known)}") from e
        origin = f"profile file {name!r}"
    else:
        raise InputError(f"unknown profile {name!r}", hint=f"built-in profiles: {', '.join(known)}; "
                         "or give the path of a JSON profile file")
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise InputError(f"{origin} is not valid JSON: {e}") from e
    return validate_profile(data, origin=origin)


def validate_profile(data: Any, *, origin: str = "profile") -> dict[str, Any]:
    """``data`` if it has a profile's shape (a deep copy, ``limits`` completed with nulls).

    Raises:
        InputError: naming the first field of the wrong shape.
    """
    def bad(what: str) -> InputError:
        return InputError(f"{origin}: {what}", hint="see compiler/lint/profile_data/openai-strict.json "
                          "for the shape of a profile")

    if not isinstance(data, dict):
        raise bad(f"a profile is a JSON object, got {type(data).__name__}")
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise bad(f"unknown field(s) {sorted(unknown)}; known: {sorted(_TOP_KEYS)}")
    for key in ("name", "description"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise bad(f"'{key}' must be a non-empty string")
    if "source" in data and not isinstance(data["source"], str):
        raise bad("'source' must be a string (the URL of the documentation the profile follows)")
    notes = data.get("notes", [])
    if not (isinstance(notes, str) or (isinstance(notes, list) and all(isinstance(n, str) for n in notes))):
        raise bad("'notes' must be a string or a list of strings")
    limits = data.get("limits")
    if not isinstance(limits, dict):
        raise bad("'limits' must be an object")
    for key, value in limits.items():
        if key not in LIMIT_KEYS:
            raise bad(f"unknown limit {key!r}; known: {', '.join(LIMIT_KEYS)}")
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise bad(f"limit {key!r} must be a positive integer or null, got {value!r}")
    if (limits.get("large_enum_threshold") is None) != (limits.get("max_large_enum_chars") is None):
        raise bad("'large_enum_threshold' and 'max_large_enum_chars' are set together or not at all")
    severity = data.get("severity", {})
    if not isinstance(severity, dict):
        raise bad("'severity' must be an object mapping rule ids to severities")
    for rule, sev in severity.items():
        if rule not in _RULE_IDS or sev not in SEVERITIES:
            raise bad(f"severity {rule!r}: {sev!r} must map one of {sorted(_RULE_IDS)} to one of {SEVERITIES}")
    strict = data.get("strict")
    if strict is not None:
        if not isinstance(strict, dict) or set(strict) != set(_STRICT_BOOLS) | set(_STRICT_LISTS):
            raise bad(f"'strict' must be an object with exactly {sorted(_STRICT_BOOLS + _STRICT_LISTS)}")
        for key in _STRICT_BOOLS:
            if not isinstance(strict[key], bool):
                raise bad(f"strict.{key} must be true or false")
        for key in _STRICT_LISTS:
            value = strict[key]
            if not (isinstance(value, list) and all(isinstance(v, str) for v in value)) and \
                    not (key == "formats" and value is None):
                raise bad(f"strict.{key} must be a list of strings" + (" or null (any format)" if key == "formats" else ""))
    out: dict[str, Any] = copy.deepcopy(data)
    out["limits"] = {key: limits.get(key) for key in LIMIT_KEYS}
    out.setdefault("severity", {})
    return out


def _default_profile() -> dict[str, Any]:
    return load_profile(_DEFAULT)


def _finding(profile: dict[str, Any], rule: str, pointer: str, message: str, **data: Any) -> Finding:
    default: Severity = next(r.severity for r in RULES if r.id == rule)
    severity: Severity = profile["severity"].get(rule, default)
    return Finding(rule=rule, severity=severity, pointer=pointer, message=message,
                   data={"profile": profile["name"], **data})


# ---------------------------------------------------------------- deep-nesting

_CONTAINER_KEYS = ("properties", "patternProperties", "additionalProperties", "unevaluatedProperties",
                   "items", "prefixItems", "additionalItems", "unevaluatedItems", "contains")
_SAME_INSTANCE_LISTS = ("anyOf", "oneOf", "allOf")
_SAME_INSTANCE_ONE = ("then", "else")


def _is_container(schema: dict[str, Any]) -> bool:
    """Whether the instance at this schema may be an object or an array."""
    types = schema_types(schema)
    if types:
        return bool(types & {"object", "array"})
    return any(k in schema for k in _CONTAINER_KEYS)


def _instance_children(schema: dict[str, Any], pointer: str) -> Iterator[tuple[Any, str, str]]:
    """(subschema, its pointer, the instance step) for each value inside this container."""
    for kw in ("properties", "patternProperties"):
        value = schema.get(kw)
        if isinstance(value, dict):
            for name, sub in value.items():
                yield sub, join(pointer, kw, name), name if kw == "properties" else "*"
    for kw in ("prefixItems", "items"):
        value = schema.get(kw)
        if isinstance(value, list):
            for i, sub in enumerate(value):
                yield sub, join(pointer, kw, i), str(i)
    for kw in ("items", "additionalProperties", "unevaluatedProperties", "additionalItems",
               "unevaluatedItems", "contains"):
        value = schema.get(kw)
        if isinstance(value, dict):
            yield value, join(pointer, kw), "*"


def nesting_violations(root: Any, limit: int) -> list[tuple[str, int, str]]:
    """(schema pointer, level, instance path) of each container first past ``limit`` levels.

    The root object is level 1; each object or array inside one is a level more. Unions and
    ``allOf`` keep the level; a local ``$ref`` is followed unless its target is already being
    expanded on the path (a recursion counts once around). Each (pointer, level) is visited
    once, so shared definitions cost nothing more.
    """
    found: list[tuple[str, int, str]] = []
    seen: set[tuple[str, int]] = set()
    # (subschema, pointer, levels above it, instance path, $ref targets being expanded)
    stack: list[tuple[Any, str, int, str, tuple[str, ...]]] = [(root, "", 0, "", ())]
    while stack:
        schema, pointer, above, ipath, refs = stack.pop()
        if not isinstance(schema, dict) or (pointer, above) in seen:
            continue
        seen.add((pointer, above))
        level = above
        if _is_container(schema):
            level = above + 1
            if level > limit:
                found.append((pointer, level, ipath or "/"))
                continue
        todo: list[tuple[Any, str, int, str, tuple[str, ...]]] = []
        ref = schema.get("$ref")
        target = resolve_local(root, ref) if isinstance(ref, str) else None
        if target is not None and target[0] not in refs:
            todo.append((target[1], target[0], above, ipath, refs + (target[0],)))
        for kw in _SAME_INSTANCE_LISTS:
            value = schema.get(kw)
            if isinstance(value, list):
                todo.extend((sub, join(pointer, kw, i), above, ipath, refs) for i, sub in enumerate(value))
        for kw in _SAME_INSTANCE_ONE:
            if isinstance(schema.get(kw), dict):
                todo.append((schema[kw], join(pointer, kw), above, ipath, refs))
        if isinstance(schema.get("dependentSchemas"), dict):
            todo.extend((sub, join(pointer, "dependentSchemas", k), above, ipath, refs)
                        for k, sub in schema["dependentSchemas"].items())
        if level > above:
            todo.extend((sub, p, level, join(ipath, step), refs)
                        for sub, p, step in _instance_children(schema, pointer))
        stack.extend(reversed(todo))
    return found


def _deep_nesting(root: Any, profile: dict[str, Any]) -> Iterator[Finding]:
    limit = profile["limits"]["max_nesting_depth"]
    if limit is None:
        return
    for pointer, level, ipath in nesting_violations(root, limit):
        yield _finding(profile, "deep-nesting", pointer,
                       f"this container is nesting level {level} of the instance (at {ipath}), past "
                       f"the limit of {limit} levels of profile '{profile['name']}'",
                       level=level, limit=limit, instance_path=ipath)


# ---------------------------------------------------------------- large-enum

def _large_enum(nodes: Iterable[tuple[str, Any]], profile: dict[str, Any]) -> Iterator[Finding]:
    limits = profile["limits"]
    per_enum, total_limit = limits["max_enum_values"], limits["max_total_enum_values"]
    threshold, max_chars = limits["large_enum_threshold"], limits["max_large_enum_chars"]
    name = profile["name"]
    total = 0
    for pointer, schema in nodes:
        values = schema.get("enum") if isinstance(schema, dict) else None
        if not isinstance(values, list):
            continue
        n = len(values)
        total += n
        where = join(pointer, "enum")
        if per_enum is not None and n > per_enum:
            yield _finding(profile, "large-enum", where,
                           f"this enum has {n} values, more than the {per_enum} of profile '{name}'",
                           kind="values", count=n, limit=per_enum)
        if threshold is not None and n > threshold:
            chars = string_chars(values, strings_only=True)
            if chars > max_chars:
                yield _finding(profile, "large-enum", where,
                               f"this enum has {n} values (more than {threshold}) totalling {chars} "
                               f"characters, more than the {max_chars} of profile '{name}'",
                               kind="chars", count=n, chars=chars, limit=max_chars)
    if total_limit is not None and total > total_limit:
        yield _finding(profile, "large-enum", "",
                       f"the schema's enums hold {total} values in all, more than the {total_limit} "
                       f"of profile '{name}'", kind="total", count=total, limit=total_limit)


# ---------------------------------------------------------------- check

_CAP = 50  # findings of one rule and kind before one "N more" finding stands for the rest


def _capped(findings: Iterable[Finding]) -> Iterator[Finding]:
    counts: dict[tuple[str, str], int] = {}
    last: dict[tuple[str, str], Finding] = {}
    for f in findings:
        key = (f.rule, str(f.data.get("kind", "")))
        counts[key] = counts.get(key, 0) + 1
        if counts[key] <= _CAP:
            yield f
        else:
            last[key] = f
    for key, f in last.items():
        more = counts[key] - _CAP
        yield Finding(rule=f.rule, severity=f.severity, pointer="",
                      message=f"{more} more {f.rule} finding(s) of this kind ({key[1] or 'same rule'}) "
                              f"not shown", data={"more": more, "kind": key[1]})


def check(ctx: LintContext) -> Iterable[Finding]:
    """The findings of the three rules over ``ctx.schema`` under ``ctx.profile`` (or the
    default profile when it is None; ``strict-mode`` needs a profile with a ``strict`` part)."""
    profile = ctx.profile
    if profile is None:
        profile = ctx.shared("profiles.default", _default_profile)
    else:
        profile = ctx.shared("profiles.validated", lambda: validate_profile(ctx.profile))
    nodes = [(n.pointer, n.schema) for n in ctx.nodes()]

    def found() -> Iterator[Finding]:
        yield from _deep_nesting(ctx.schema, profile)
        yield from _large_enum(nodes, profile)
        if profile.get("strict") is not None:
            for pointer, message, kind, data in strict_findings(ctx.schema, nodes, profile):
                yield _finding(profile, "strict-mode", pointer, message, kind=kind, **data)

    return list(_capped(found()))
