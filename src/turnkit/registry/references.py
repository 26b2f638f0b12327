"""``"package.module:attribute"`` references: one grammar for handlers, modules and providers.

A tool's ``handler``, a module given to the command line (``--module``) or found as an entry
point, and a permission provider (``--permissions``) are all named this way and resolved here,
with ``pkgutil.resolve_name``.
"""

from __future__ import annotations

import pkgutil
from typing import Any

__all__ = ["instance_of", "resolve"]


def resolve(reference: str) -> Any:
    """The object ``reference`` (``"package.module:attribute"``, dots allowed after the colon)
    names.

    Raises:
        ValueError: the reference is malformed, or its module or attribute could not be loaded;
            the message names the reference and the cause.
    """
    module_name, sep, attribute = reference.partition(":")
    if not sep or not module_name.strip() or not attribute.strip():
        raise ValueError(f"{reference!r} must be written 'package.module:attribute'")
    try:
        return pkgutil.resolve_name(reference)
    except Exception as exc:  # any import-time failure is the reference's problem
        raise ValueError(f"{reference!r} could not be loaded: {type(exc).__name__}: {exc}") from exc


def instance_of(value: Any) -> Any:
    """``value``, or an instance of it when it is a class (a module or provider given by class)."""
    return value() if isinstance(value, type) else value
