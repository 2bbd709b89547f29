"""The whole tree of user-facing errors, rooted at :class:`MaskcError`.

Each error carries data (a JSON pointer, an offset, a limit, a hint) rather than a
pre-rendered string, so the CLI and ``str(error)`` render it the same way. API misuse
raises ``ValueError`` / ``TypeError`` instead; those are bugs in the caller, not input.
"""

from __future__ import annotations

__all__ = [
    "MaskcError",
    "InputError",
    "SchemaError",
    "UnsupportedKeyword",
    "RegexSyntaxError",
    "UnsupportedRegex",
    "GrammarSyntaxError",
    "GrammarError",
    "EmptyLanguage",
    "NonTerminating",
    "UnspellableGrammar",
    "LimitExceeded",
    "MemoryLimitExceeded",
    "WorkerLost",
    "StateLimitExceeded",
    "TimeLimitExceeded",
    "SizeLimitExceeded",
    "TokenizerError",
    "ArtifactError",
    "ArtifactCorrupt",
    "ArtifactVersionMismatch",
    "TokenizerMismatch",
]


class MaskcError(Exception):
    """Root of every error a user can cause; the CLI maps each subclass to an exit code."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if self.hint is None else f"{self.message}\n  hint: {self.hint}"


class InputError(MaskcError):
    """The input (schema, regex, grammar, file) is malformed or unsupported."""


class SchemaError(InputError):
    """A JSON Schema is malformed at ``pointer`` (an RFC 6901 JSON pointer)."""

    def __init__(self, message: str, *, pointer: str = "", hint: str | None = None) -> None:
        super().__init__(f"{message} (at {pointer or '/'})", hint=hint)
        self.reason = message
        self.pointer = pointer


class UnsupportedKeyword(SchemaError):
    """A keyword the compiler cannot enforce; ``--lenient`` compiles without it."""

    def __init__(self, keyword: str, *, pointer: str = "", detail: str = "", hint: str | None = None) -> None:
        what = f"keyword '{keyword}' cannot be enforced by the grammar"
        if detail:
            what = f"{what}: {detail}"
        super().__init__(
            what,
            pointer=pointer,
            hint=hint
            or "compile with --lenient to drop it (recorded in the artifact's not_enforced "
            "list) and validate it after decoding",
        )
        self.keyword = keyword


class RegexSyntaxError(InputError):
    """A regular expression could not be parsed; ``offset`` indexes the pattern."""

    def __init__(
        self, message: str, *, pattern: str, offset: int | None = None, pointer: str = ""
    ) -> None:
        where = f" at offset {offset}" if offset is not None else ""
        loc = f" (at {pointer})" if pointer else ""
        caret = ""
        if offset is not None:
            caret = f"\n    {pattern}\n    {' ' * offset}^"
        super().__init__(f"bad regex {pattern!r}{where}{loc}: {message}{caret}")
        self.reason = message
        self.pattern = pattern
        self.offset = offset
        self.pointer = pointer


class GrammarSyntaxError(InputError):
    """A grammar text (GBNF) is malformed at ``line``, ``column`` (both 1-based).

    ``line_text`` is the source line, shown with a caret under ``column``; ``reason`` is
    the message without the location.
    """

    def __init__(
        self, message: str, *, line: int, column: int, line_text: str, hint: str | None = None
    ) -> None:
        # keep tabs in the caret's indent so the caret lines up under tab-indented text
        indent = "".join(c if c == "\t" else " " for c in line_text[: column - 1])
        super().__init__(
            f"{message} (line {line}, column {column})\n    {line_text}\n    {indent}^", hint=hint
        )
        self.reason = message
        self.line = line
        self.column = column
        self.line_text = line_text


class UnsupportedRegex(InputError):
    """A well-formed regular expression using a construct the grammar cannot express
    (lookaround, inline flags, anchors inside a branch): unsupported, not invalid."""

    def __init__(self, message: str, *, pattern: str, offset: int | None = None, pointer: str = "") -> None:
        loc = f" (at {pointer})" if pointer else ""
        super().__init__(f"regex {pattern!r}{loc}: {message}",
                         hint="rewrite the pattern without it, or validate it after decoding")
        self.reason = message
        self.pattern = pattern
        self.offset = offset
        self.pointer = pointer


class GrammarError(InputError):
    """The grammar is well formed but unusable for constrained decoding."""


class EmptyLanguage(GrammarError):
    """No string satisfies the grammar, so no mask could ever let EOS through."""


class NonTerminating(GrammarError):
    """A reachable state cannot reach an accepting state; ``witness`` is a prefix that gets there."""

    def __init__(self, message: str, *, witness: bytes = b"") -> None:
        super().__init__(message)
        self.witness = witness


class UnspellableGrammar(MaskcError):
    """No sequence of whole tokens of the tokenizer leads from the start to an end (EOS).

    ``prefix`` is a shortest prefix of the grammar's outputs that whole tokens cannot write:
    the bytes they can write, then the next character the grammar needs there (empty when
    tokens never get stuck yet never reach an end, and for a recursive grammar, which is only
    checked at its start). ``example`` is a shortest output that begins with it.
    """

    def __init__(self, message: str, *, tokenizer: str, prefix: bytes = b"", example: bytes = b"",
                 hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.tokenizer = tokenizer
        self.prefix = prefix
        self.example = example


def _number(x: float) -> str:
    """A limit or a count as a user types it: whole numbers in full (``2000000``, not
    ``2e+06``, which a ``--max-states`` does not take), others in short (``0.05``)."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


class LimitExceeded(MaskcError):
    """A compile limit (states, artifact bytes, seconds) was exceeded; ``pointer`` says
    where in a schema, when known."""

    raise_with = "the limit"  # how a user raises it, named in the default hint

    def __init__(self, what: str, *, limit: float, got: float | None = None, pointer: str = "",
                 hint: str | None = None) -> None:
        got_s = f" (got {_number(got)})" if got is not None else ""
        loc = f" (at {pointer})" if pointer else ""
        super().__init__(
            f"{what} exceeds the limit of {_number(limit)}{got_s}{loc}",
            hint=hint or "simplify the schema (smaller maxLength/maxItems, fewer alternatives) "
            f"or raise {self.raise_with}",
        )
        self.what = what
        self.limit = limit
        self.got = got
        self.pointer: str | None = pointer or None


class StateLimitExceeded(LimitExceeded):
    """The automaton grew past ``max_states``."""

    raise_with = "--max-states (Limits.max_states)"


class TimeLimitExceeded(LimitExceeded):
    """The compile ran longer than ``max_seconds``."""

    raise_with = "--max-seconds (Limits.max_seconds)"


class SizeLimitExceeded(LimitExceeded):
    """The artifact would be larger than ``max_artifact_bytes``."""

    raise_with = "Limits.max_artifact_bytes"


class MemoryLimitExceeded(LimitExceeded):
    """The compile needed more memory than its process may use (``--max-memory``), or than the
    system had (``limit_mb`` None). ``shared``: the automaton an input's tokenizers share ran
    out of memory in the compile for the previous tokenizer and was not built again."""

    raise_with = "--max-memory"

    def __init__(self, limit_mb: int | None, *, shared: bool = False) -> None:
        simplify = "simplify the schema (smaller maxLength/maxItems, fewer alternatives)"
        more = f"raise {self.raise_with}" if limit_mb is not None else "compile it on a machine with more memory"
        again = ("this input's automaton, which its tokenizers share, ran out of memory in the compile for the "
                 "previous tokenizer and is not built again; ") if shared else ""
        message = ("the compile ran out of memory" if limit_mb is None
                   else f"the compile needs more memory than its limit of {limit_mb} MiB")
        MaskcError.__init__(self, message, hint=f"{again}{simplify}, or {more}")
        self.limit = float("inf") if limit_mb is None else float(limit_mb)
        self.got = None
        self.pointer = None
        self.shared = shared

    def with_limit(self, limit_mb: int | None) -> MemoryLimitExceeded:
        """The same error, saying which cap the process had."""
        return MemoryLimitExceeded(limit_mb, shared=self.shared)


class WorkerLost(MaskcError):
    """The worker process compiling an input ended without a result (killed, crashed)."""

    def __init__(self, label: str, how: str) -> None:
        oom = " (a SIGKILL is most often the system's out-of-memory killer)" if "SIGKILL" in how else ""
        super().__init__(
            f"the process compiling {label} ended without a result: {how}{oom}",
            hint="compile with --max-memory MIB so that an input which needs too much memory fails "
            "cleanly, or compile this input alone on a machine with more memory")
        self.how = how


class TokenizerError(MaskcError):
    """A tokenizer could not be found, read or understood."""


class ArtifactError(MaskcError):
    """An artifact could not be read or used."""


class ArtifactCorrupt(ArtifactError):
    """The artifact is truncated, tampered with or not a maskc artifact."""


class ArtifactVersionMismatch(ArtifactError):
    """The artifact was written by an incompatible format version."""


class TokenizerMismatch(ArtifactError):
    """The artifact was built for another tokenizer than the one given."""

    def __init__(self, *, expected_name: str, expected_sha: str, got_name: str, got_sha: str) -> None:
        super().__init__(
            f"artifact was built for tokenizer '{expected_name}' (sha256 {expected_sha[:16]}…), "
            f"not '{got_name}' (sha256 {got_sha[:16]}…)",
            hint="recompile the schema for this tokenizer: maskc compile SCHEMA --tokenizer SPEC",
        )
        self.expected_name = expected_name
        self.expected_sha = expected_sha
        self.got_name = got_name
        self.got_sha = got_sha
