"""JSON pointers (RFC 6901): escaping reference tokens and following a pointer in a document."""

from __future__ import annotations

from typing import Any

__all__ = ["escape", "join", "resolve", "tokens"]


def escape(token: str) -> str:
    """One reference token, escaped (``~`` → ``~0``, ``/`` → ``~1``)."""
    return token.replace("~", "~0").replace("/", "~1")


def join(pointer: str, *parts: str | int) -> str:
    """``pointer`` extended by ``parts`` (each escaped)."""
    return pointer + "".join("/" + escape(str(t)) for t in parts)


def tokens(pointer: str) -> list[str]:
    """The unescaped reference tokens of ``pointer`` (``""`` is the whole document)."""
    return [raw.replace("~1", "/").replace("~0", "~") for raw in pointer.split("/")[1:]] if pointer else []


def resolve(document: Any, pointer: str) -> Any:
    """The value ``pointer`` names in ``document``.

    Array indexes are ASCII digits only (other scripts' digits name nothing).

    Raises:
        LookupError: the pointer names nothing in the document.
    """
    target = document
    for part in tokens(pointer):
        if isinstance(target, dict) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isascii() and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            raise LookupError(pointer)
    return target
