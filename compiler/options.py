"""Compile options: the whitespace policy and the limits, frozen and canonically serialized.

The options are part of an artifact's content address, so :meth:`CompileOptions.canonical`
must change whenever the compiled language or masks could.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

import orjson

__all__ = ["Whitespace", "WhitespaceMode", "Semantics", "SEMANTICS", "CompileOptions", "Limits", "parse_whitespace",
           "DEFAULT_MAX_DEPTH"]

WhitespaceMode = Literal["compact", "pretty", "flexible"]
Semantics = Literal["generation", "exact"]
SEMANTICS: tuple[Semantics, ...] = ("generation", "exact")
"""JSON Schema semantics of a compile.

``generation`` (the default): what a model should write. No undeclared keys unless
``additionalProperties`` or ``patternProperties`` admits them; a schema without ``type``
takes the types its keywords imply. Sound: every output is an instance of the schema.
``exact``: the grammar's language is exactly the schema's instances (in maskc's property
order and whitespace policy) for every keyword maskc enforces: undeclared keys where JSON
Schema allows them, no types inferred from keywords, untyped values of any depth.
"""


@dataclass(frozen=True, slots=True)
class Whitespace:
    """Where insignificant whitespace may go.

    ``compact``: none (the default; every output is minimal JSON).
    ``pretty``: exactly the canonical indented layout (``json.dumps(indent=n)``), all forced.
    ``flexible``: JSON whitespace at every insignificant position, runs of at most ``n`` bytes.
    """

    mode: WhitespaceMode = "compact"
    n: int = 0

    def __post_init__(self) -> None:
        if self.mode not in ("compact", "pretty", "flexible"):
            raise ValueError(f"whitespace mode must be compact, pretty or flexible, got {self.mode!r}")
        if self.n < 0 or self.n > 64:
            raise ValueError(f"whitespace width must be in 0..64, got {self.n}")

    def __str__(self) -> str:
        return self.mode if self.mode == "compact" else f"{self.mode}:{self.n}"


def parse_whitespace(spec: str | Whitespace) -> Whitespace:
    """Parse ``compact``, ``pretty[:INDENT]`` (default 2) or ``flexible[:N]`` (default 4).

    Raises:
        ValueError: the spec is not one of those forms.
    """
    if isinstance(spec, Whitespace):
        return spec
    mode, _, arg = spec.strip().partition(":")
    if mode == "compact" and not arg:
        return Whitespace("compact", 0)
    if mode in ("pretty", "flexible"):
        default = 2 if mode == "pretty" else 4
        try:
            n = int(arg) if arg else default
        except ValueError:
            raise ValueError(f"bad whitespace width {arg!r} in {spec!r}: expected an integer") from None
        return Whitespace(mode, n)  # type: ignore[arg-type]
    raise ValueError(
        f"bad whitespace policy {spec!r}: expected compact, pretty[:INDENT] or flexible[:N]"
    )


DEFAULT_MAX_DEPTH = 32
"""Default bound on nesting through recursive rules: deep enough for real JSON documents
(trees, comment threads, ASTs), small enough that memory and the longest output stay bounded."""
MAX_MAX_DEPTH = 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource limits of one compile; exceeding one is a :class:`LimitExceeded` error.

    They are part of the options an artifact records (and so of its cache key): a compile
    that failed under one limit may succeed under another.
    """

    max_states: int = 200_000
    max_nfa_states: int = 2_000_000
    max_artifact_bytes: int = 512 * 1024 * 1024
    max_seconds: float = 300.0

    def __post_init__(self) -> None:
        for name in ("max_states", "max_nfa_states", "max_artifact_bytes"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        v = self.max_seconds
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 < v < math.inf:
            raise ValueError(f"max_seconds must be a positive finite number, got {v!r}")

    @classmethod
    def scaled(cls, max_states: int | None = None, max_seconds: float | None = None) -> Limits:
        """The default limits with ``max_states`` and ``max_seconds`` replaced where given;
        the NFA bound grows with ``max_states`` (10 NFA states per DFA state allowed), never
        below its default.

        Raises:
            ValueError: a limit that is not positive.
        """
        d = cls()
        states = d.max_states if max_states is None else max_states
        nfa = max(d.max_nfa_states, 10 * states) if isinstance(states, int) else d.max_nfa_states  # else refused below
        return cls(max_states=states, max_nfa_states=nfa, max_artifact_bytes=d.max_artifact_bytes,
                   max_seconds=d.max_seconds if max_seconds is None else max_seconds)

    def canonical(self) -> dict[str, object]:
        """The limits as JSON-able data (``max_seconds`` a float, so 300 and 300.0 agree)."""
        return {"max_states": self.max_states, "max_nfa_states": self.max_nfa_states,
                "max_artifact_bytes": self.max_artifact_bytes, "max_seconds": float(self.max_seconds)}


@dataclass(frozen=True, slots=True)
class CompileOptions:
    """Everything besides the grammar and tokenizer that decides an artifact's bytes."""

    whitespace: Whitespace = Whitespace()
    lenient: bool = False
    limits: Limits = Limits()
    max_depth: int = DEFAULT_MAX_DEPTH  # bound on rule nesting (pushdown stack frames) at run time
    semantics: Semantics = "generation"  # JSON Schema only; see SEMANTICS

    def __post_init__(self) -> None:
        if not isinstance(self.max_depth, int) or not 1 <= self.max_depth <= MAX_MAX_DEPTH:
            raise ValueError(f"max_depth must be an integer in 1..{MAX_MAX_DEPTH}, got {self.max_depth!r}")
        if self.semantics not in SEMANTICS:
            raise ValueError(f"semantics must be one of {', '.join(SEMANTICS)}, got {self.semantics!r}")

    def canonical(self) -> dict[str, object]:
        """The options that decide the output, or whether there is one, as canonical JSON-able data."""
        return {"whitespace": str(self.whitespace), "lenient": self.lenient, "max_depth": self.max_depth,
                "limits": self.limits.canonical(), "semantics": self.semantics}

    def canonical_json(self) -> str:
        return orjson.dumps(self.canonical(), option=orjson.OPT_SORT_KEYS).decode()

    def as_dict(self) -> dict[str, object]:
        return asdict(self)
