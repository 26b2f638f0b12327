"""Which declaration of a tool a held write was made under, so no other one is run for it.

A confirmation records the module that declared its tool and a **fingerprint** of the declaration:
the tool's name, its module's key, its input and output schemas, its ``max_items``, and where its
handler lives
(``package.module:qualified.name``, through ``functools.partial``, bound methods, ``__wrapped__``
and the functions a closure wraps). A door deciding the confirmation (the CLI, a server, another
application on the same ledger) runs the write only when its own registry declares the tool with
the same fingerprint: a different handler under the same name (another module's
``catalogue.set_prices``), a changed schema, or no such tool at all leaves it pending, with a line
naming the module that held it (docs/architecture.md §4, "Seven doors, one promise").

The handler is named by where it lives, not by its bytes: a release that fixes a bug inside the
handler still decides the writes that wait, while a handler from elsewhere does not.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import sys
from pathlib import Path
from typing import Any

from turnkit.registry.tool import Tool

__all__ = ["fingerprint", "handler_ref"]

_MAX_DEPTH = 4
"""How far ``handler_ref`` follows wrappers and the functions closures wrap."""


def fingerprint(tool: Tool) -> str:
    """The fingerprint of ``tool``'s declaration: 32 hex digits of a SHA-256.

    Examples:
        >>> tool = Tool(name="notes.set_note", permission="notes.write", scope="notes.notes:write",
        ...             handler="json:dumps", module="notes")
        >>> len(fingerprint(tool)), fingerprint(tool) == fingerprint(tool)
        (32, True)
    """
    declared = {
        "tool": tool.name,
        "module": tool.module,
        "input_schema": tool.input_schema,
        "output_schema": tool.output_schema,
        "max_items": tool.max_items,
        "handler": handler_ref(tool.handler),
    }
    text = json.dumps(declared, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def handler_ref(handler: object, depth: int = 0) -> str:
    """Where ``handler`` lives, as ``package.module:qualified.name``; for a wrapper (a partial, a
    bound method, a decorated or closure-made function) also what it wraps, in brackets.

    Examples:
        >>> import json
        >>> handler_ref(json.dumps)
        'json:dumps'
    """
    if depth > _MAX_DEPTH:
        return "..."
    if isinstance(handler, functools.partial):
        return f"partial[{handler_ref(handler.func, depth + 1)}]"
    if inspect.ismethod(handler):  # where the method is defined (an inherited one: its base)
        return handler_ref(handler.__func__, depth + 1)
    wrapped = getattr(handler, "__wrapped__", None)
    if wrapped is not None and wrapped is not handler:
        return f"{_name(handler)}[{handler_ref(wrapped, depth + 1)}]"
    if not inspect.isfunction(handler) and not inspect.isbuiltin(handler):
        return _name(type(handler))  # a callable object: its class
    inner = [ref for cell in _cells(handler) if (ref := _captured(cell.cell_contents, depth))]
    return _name(handler) + (f"[{','.join(inner)}]" if inner else "")


def _cells(handler: object) -> list[Any]:
    """The filled cells of a closure's ``__closure__`` (none for anything else)."""
    filled = []
    for cell in getattr(handler, "__closure__", None) or ():
        try:
            cell.cell_contents  # noqa: B018  # an empty cell raises
        except ValueError:
            continue
        filled.append(cell)
    return filled


def _captured(value: Any, depth: int) -> str:
    """What a closure wraps, when it says which code runs: a function, method or class, or an
    object of an application's class (a LangChain tool: its class and its ``name``); plain
    data (numbers, text, containers) says nothing and is left out."""
    if inspect.isfunction(value) or inspect.ismethod(value) or inspect.isclass(value):
        return handler_ref(value, depth + 1)
    kind = type(value)
    if kind.__module__ == "builtins":
        return ""
    named = getattr(value, "name", None)
    return _name(kind) + (f"({named})" if isinstance(named, str) else "")


def _name(thing: Any) -> str:
    module = getattr(thing, "__module__", None) or "?"
    if module == "__main__":  # a script run as `python app.py` or `python -m app`: its name
        module = _main_name()
    return f"{module}:{getattr(thing, '__qualname__', None) or getattr(thing, '__name__', '?')}"


def _main_name() -> str:
    """The importable name of the ``__main__`` module (``python -m app``: ``app``; ``python
    app.py``: ``app``), so a script and the command that imports it agree."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name:
        return str(spec.name)
    path = getattr(main, "__file__", None)
    return Path(path).stem if path else "__main__"
