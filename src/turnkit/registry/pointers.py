"""JSON pointers (RFC 6901): how a place inside a value is named in every message turnkit gives
(a schema violation, a value no checkpointer stores, a field of the web inbox's edit form)."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["pointer", "segment"]


def segment(key: object) -> str:
    """One reference token: ``~`` and ``/`` escaped.

    Examples:
        >>> segment("a/b~c")
        'a~1b~0c'
    """
    return str(key).replace("~", "~0").replace("/", "~1")


def pointer(parts: Iterable[object]) -> str:
    """The pointer of the path ``parts`` (``""`` for the whole value).

    Examples:
        >>> pointer(["prices", 0, "price"])
        '/prices/0/price'
    """
    return "".join("/" + segment(part) for part in parts)
