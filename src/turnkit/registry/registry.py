"""``Registry``: the tools of every module, collected once, in a deterministic order (§3 of
docs/architecture.md).

A module is any object with a ``key`` and ``api_tools()`` (optionally ``enabled()``), passed in or
found through the entry-point group ``turnkit.modules``. ``api_tools()`` returns ``Tool`` objects or
declaration dicts; prefer dicts (or ``Tool.build``) so that one bad declaration does not take the
module's other tools down. A module's problems — bad declarations, tools under the reserved
``system.`` namespace, names another module registered first — are collected into **one** warning
per module, logged and kept in ``Registry.warnings``; its good tools still work.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

from turnkit.errors import ModuleError, UnknownToolError
from turnkit.registry.references import instance_of
from turnkit.registry.tool import Tool

__all__ = ["ENTRY_POINT_GROUP", "Module", "ModuleWarning", "Registry"]

ENTRY_POINT_GROUP = "turnkit.modules"
SYSTEM_MODULE = "system"

log = logging.getLogger("turnkit.registry")


@runtime_checkable
class Module(Protocol):
    """What the registry needs of a module: a key and its tool declarations."""

    key: str

    def api_tools(self) -> Iterable[Tool | Mapping[str, Any]]:
        """The module's tools: ``Tool`` objects or declaration dicts (``Tool`` fields)."""
        ...


@dataclass(frozen=True, slots=True)
class ModuleWarning:
    """Everything that was ignored of one module, reported once."""

    module: str
    """The module's key (or the entry point's name when the module did not load)."""
    problems: tuple[str, ...]
    """One line per ignored tool or failure."""

    def __str__(self) -> str:
        lines = "\n".join(f"  - {p}" for p in self.problems)
        return f"module {self.module!r}: {len(self.problems)} problem(s), ignored:\n{lines}"


class Registry:
    """The tools of the given modules, plus turnkit's own ``system.*`` tools.

    Examples:
        >>> class Shop:
        ...     key = "shop"
        ...     def api_tools(self):
        ...         return [{"name": "shop.list_orders", "scope": "shop.orders:read",
        ...                  "permission": "shop.view", "handler": lambda i, c: []}]
        >>> Registry([Shop()]).names()
        ['shop.list_orders']
    """

    def __init__(
        self,
        modules: Iterable[object] = (),
        *,
        entry_points: bool = False,
        system_tools: Iterable[Tool] = (),
    ) -> None:
        """Collect ``modules`` (in order; a module class is instantiated), then, if
        ``entry_points``, those installed under ``turnkit.modules`` (sorted by entry-point name).

        Raises:
            ModuleError: an object in ``modules`` is not a module (no ``key`` or ``api_tools``).
            ValueError: a tool in ``system_tools`` is not named ``system.*``.
        """
        self._tools: dict[str, Tool] = {}
        self._modules: dict[str, object] = {}
        self._warnings: list[ModuleWarning] = []
        for tool in system_tools:
            if not tool.is_system:
                raise ValueError(f"system tool {tool.name!r} must be named 'system.<verb>_<noun>'")
            self._tools.setdefault(tool.name, tool.with_module(SYSTEM_MODULE))
        for given in modules:
            module = instance_of(given)  # a module class is instantiated
            if not isinstance(module, Module) or not isinstance(module.key, str) or not module.key:
                raise ModuleError(
                    f"{module!r} is not a module: give it a non-empty string 'key' and an"
                    " 'api_tools()' method returning Tool objects or declaration dicts"
                )
            self._add(module)
        if entry_points:
            for name, module in _discover():
                if isinstance(module, str):
                    self._warn(name, [module])
                else:
                    self._add(module)

    def _add(self, module: Module) -> None:
        key = module.key
        if key in self._modules:
            self._warn(key, [f"module key {key!r} is already registered; this module is ignored"])
            return
        self._modules[key] = module
        problems: list[str] = []
        for item in _declarations(module, problems):
            tool = _as_tool(item, problems)
            if tool is None:
                continue
            if tool.is_system:
                problems.append(
                    f"tool {tool.name!r} ignored: the 'system.' namespace is reserved for turnkit"
                )
            elif tool.name in self._tools:
                first = self._tools[tool.name].module
                problems.append(f"tool {tool.name!r} ignored: module {first!r} registered it first")
            else:
                self._tools[tool.name] = tool.with_module(key)
        if problems:
            self._warn(key, problems)

    def _warn(self, module: str, problems: list[str]) -> None:
        warning = ModuleWarning(module, tuple(problems))
        self._warnings.append(warning)
        log.warning("%s", warning)

    @property
    def tools(self) -> tuple[Tool, ...]:
        """Every registered tool: system tools first, then each module's in declaration order."""
        return tuple(self._tools.values())

    @property
    def warnings(self) -> tuple[ModuleWarning, ...]:
        """One entry per module that had something ignored."""
        return tuple(self._warnings)

    @property
    def modules(self) -> Mapping[str, object]:
        """The registered modules by key."""
        return dict(self._modules)

    def names(self) -> list[str]:
        """The registry names, in order."""
        return list(self._tools)

    def get(self, name: str) -> Tool | None:
        """The tool registered as ``name``, or None."""
        return self._tools.get(name)

    def __getitem__(self, name: str) -> Tool:
        tool = self._tools.get(name)
        if tool is None:
            raise UnknownToolError(name, self.names())
        return tool

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools)

    def __len__(self) -> int:
        return len(self._tools)

    def asks_enabled(self, module_key: str | None) -> bool:
        """True when the module has an ``enabled()`` of its own (application code to call)."""
        module = self._modules.get(module_key or "")
        return module is not None and getattr(module, "enabled", None) is not None

    def is_enabled(self, module_key: str | None) -> bool:
        """Whether a module is enabled now (its ``enabled()``, asked on every call; default True).

        A module whose ``enabled()`` raises counts as disabled, and the error is logged.
        """
        if module_key == SYSTEM_MODULE:
            return True
        module = self._modules.get(module_key or "")
        if module is None:
            return False
        enabled = getattr(module, "enabled", None)
        if enabled is None:
            return True
        try:
            return bool(enabled())
        except Exception:  # a module's own bug must not take the registry down
            log.exception("module %r: enabled() raised; treated as disabled", module_key)
            return False

    def __repr__(self) -> str:
        return f"Registry({len(self._tools)} tools from {len(self._modules)} modules)"


def _declarations(module: Module, problems: list[str]) -> list[object]:
    """What ``api_tools()`` yields; if it fails part-way, what came before the failure."""
    items: list[object] = []
    try:
        items.extend(module.api_tools())
    except Exception as exc:  # the module's failure becomes its warning
        problems.append(f"api_tools() raised {type(exc).__name__}: {exc}")
    return items


def _as_tool(item: object, problems: list[str]) -> Tool | None:
    if isinstance(item, Tool):
        return item
    if isinstance(item, Mapping):
        built = Tool.build(item)
        if built.tool is None:
            problems.append(f"tool {item.get('name')!r} ignored: " + "; ".join(built.problems))
        return built.tool
    problems.append(f"{item!r} ignored: api_tools() must return Tool objects or declaration dicts")
    return None


def _discover() -> list[tuple[str, Module | str]]:
    """The modules of the ``turnkit.modules`` entry points, or the reason each failed to load."""
    found: list[tuple[str, Module | str]] = []
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: (p.name, p.value)):
        try:
            obj = instance_of(point.load())
            if not isinstance(obj, Module) and callable(obj):  # a factory
                obj = obj()
        except Exception as exc:  # a broken plugin must not stop the others
            found.append((point.name, f"entry point {point.value!r} failed to load: {exc!r}"))
            continue
        if not isinstance(obj, Module) or not isinstance(obj.key, str) or not obj.key:
            found.append((point.name, f"entry point {point.value!r} is not a module"))
        else:
            found.append((point.name, obj))
    return found
