"""Registry names and the names a model sees (docs/architecture.md §5).

A registry name such as ``catalogue.list_products`` becomes the model name
``catalogue_list_products``; a tool of the ``local`` module (a developer's own function, see
``turnkit.agent.local_tools``) keeps its own name: ``local.get_weather`` is shown as
``get_weather``.
Model APIs accept 1-64 characters of ``[a-zA-Z0-9_-]``: a name that does not fit is left out, and
of two registry names with one model name the first wins.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import TypeVar

__all__ = ["is_model_name", "model_name", "model_names"]

_MODEL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
LOCAL_PREFIX = "local."

T = TypeVar("T")


def is_model_name(name: object) -> bool:
    """True when ``name`` is 1-64 characters of ``[a-zA-Z0-9_-]`` (what model APIs accept)."""
    return isinstance(name, str) and _MODEL_NAME.fullmatch(name) is not None


@lru_cache(maxsize=65536)
def model_name(registry_name: str) -> str | None:
    """The model name of ``registry_name`` (dots become underscores), or None when it is invalid.

    Examples:
        >>> model_name("catalogue.list_products")
        'catalogue_list_products'
    """
    if registry_name.startswith(LOCAL_PREFIX):
        candidate = registry_name[len(LOCAL_PREFIX) :]
    else:
        candidate = registry_name.replace(".", "_")
    return candidate if is_model_name(candidate) else None


def model_names(items: Iterable[T], name_of: Callable[[T], str]) -> dict[str, T]:
    """Map model names to ``items`` in order: invalid names left out, the first of a clash wins.

    Examples:
        >>> model_names(["a.b_c", "a_b.c", "x" * 70 + ".y_z"], name_of=str)
        {'a_b_c': 'a.b_c'}
    """
    chosen: dict[str, T] = {}
    for item in items:
        name = model_name(name_of(item))
        if name is not None and name not in chosen:
            chosen[name] = item
    return chosen
