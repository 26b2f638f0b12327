"""Tools without ceremony: functions, tool objects and LangChain tools (docs/get-started.md,
"A five-minute tour").

Each becomes a registry tool of the ``local`` module, which needs no rights configuration: local
tools are public (any caller may use them) and run without a confirmation unless declared with
``danger``. Their registry name is ``local.<name>`` and the model sees ``<name>`` itself
(lower-cased, anything but letters, digits and ``_`` turned into ``_``).

Three ways to write one:

- a decorated function, its schema from the type hints (pydantic)::

      @tool
      def get_weather(city: str, units: Literal["celsius", "fahrenheit"] = "celsius") -> str:
          "Get current weather conditions for a city."

- an object (or class) with ``name``, ``description``, ``parameters_schema`` and
  ``execute(args, opts)`` returning text (or ``("ok", text)``), raising ``ToolError`` (or returning
  ``("error", reason)``) for a failure the model should read;
- any LangChain ``BaseTool``.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable
from typing import Any, Literal, overload

from pydantic import BaseModel, create_model

from turnkit.errors import ToolDeclarationError, ToolError
from turnkit.registry.tool import Tool

__all__ = ["LOCAL_MODULE", "LocalModule", "local_tool", "tool"]

LOCAL_MODULE = "local"


class LocalModule:
    """The module of an Agent's (or a ``chat`` call's) own tools."""

    key = LOCAL_MODULE

    def __init__(self, tools: Iterable[object] = ()) -> None:
        self._tools = [local_tool(item) for item in tools]

    def api_tools(self) -> list[Tool]:
        """The local tools, as given."""
        return list(self._tools)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    danger: Literal["always"] | Callable[..., bool] | None = None,
    preview: Callable[..., Any] | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    danger: Literal["always"] | Callable[..., bool] | None = None,
    preview: Callable[..., Any] | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a local tool of a function; its parameters' type hints become the input schema.
    ``preview``: a function taking the same arguments that says, without writing, what a held
    call would change (shown to the person deciding, never to the model).

    Examples:
        >>> @tool(read_only=True)
        ... def get_weather(city: str) -> str:
        ...     "Get current weather conditions for a city."
        ...     return f"{city}: 22°C"
        >>> get_weather.name, get_weather.input_schema["required"]
        ('local.get_weather', ['city'])
    """

    def wrap(function: Callable[..., Any]) -> Tool:
        about = description or inspect.getdoc(function) or ""
        problems = _undeclared(function, about)
        if problems:
            raise ToolDeclarationError(name or function.__name__, problems)
        model = _signature_model(function)
        return _build(
            name=name or function.__name__,
            description=about,
            input_schema=model,
            handler=_call_with_model(function, model),
            read_only=read_only,
            danger=danger,
            preview=None if preview is None else _call_with_model(preview, model),
        )

    return wrap(fn) if fn is not None else wrap


def local_tool(item: object) -> Tool:
    """A local ``Tool`` from a ``Tool``, a decorated function, a tool object or class,
    a LangChain ``BaseTool``, or a plain function (wrapped as by ``@tool``).

    Raises:
        ToolDeclarationError: the object is none of those, or breaks a tool rule.
    """
    if isinstance(item, Tool):
        return item
    if _is_langchain_tool(item):
        return _from_langchain(item)
    if isinstance(item, type) and _is_tool_object(item):
        item = item()
    if _is_tool_object(item):
        return _from_tool_object(item)
    if inspect.isfunction(item) or inspect.ismethod(item):
        return tool(item)
    raise ToolDeclarationError(
        repr(item)[:60],
        [
            "not a tool: pass a function, an object with name, description, parameters_schema"
            " and execute(args, opts), a LangChain BaseTool, or a turnkit Tool"
        ],
    )


def _build(
    *,
    name: str,
    description: str,
    input_schema: Any,
    handler: Callable[..., Any],
    read_only: bool = False,
    danger: Any = None,
    preview: Callable[..., Any] | None = None,
) -> Tool:
    return Tool(
        name=f"{LOCAL_MODULE}.{_snake(name)}",
        audience="public",
        title=name,
        description=description,
        input_schema=input_schema,
        handler=handler,
        annotations={"read_only": read_only},
        danger=danger,
        preview=preview,
        module=LOCAL_MODULE,
    )


def _snake(name: str) -> str:
    """A tool's own name as a model-safe lower-case name: ``Get Weather`` -> ``get_weather``."""
    return re.sub(r"[^a-z0-9_]", "_", name.strip().lower())


def _undeclared(function: Callable[..., Any], description: str) -> list[str]:
    """What a function lacks to be a tool a model can use: a description, parameter types."""
    problems = []
    if not description.strip():
        problems.append(
            f"{function.__name__}() has no docstring: add one saying what the tool does (the"
            " model reads it to choose the tool), or pass @tool(description=...)"
        )
    hints = inspect.get_annotations(function, eval_str=True)
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            problems.append(
                f"parameter {parameter.name!r}: *args and **kwargs cannot be described to a"
                " model; name each parameter"
            )
        elif parameter.name not in hints:
            problems.append(
                f"parameter {parameter.name!r} has no type hint: write e.g. {parameter.name}: str"
                " (its type becomes the input schema the model fills in)"
            )
    return problems


def _signature_model(function: Callable[..., Any]) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    hints = inspect.get_annotations(function, eval_str=True)
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        annotation = hints.get(parameter.name, Any)
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (annotation, default)
    model = create_model(f"{function.__name__}_input", **fields)
    model.model_config["extra"] = "forbid"
    model.model_rebuild(force=True)
    return model


def _call_with_model(function: Callable[..., Any], model: type[BaseModel]) -> Callable[..., Any]:
    """A handler ``(input, ctx)`` calling ``function(**fields)`` with pydantic-parsed values."""
    if inspect.iscoroutinefunction(function):

        async def run_async(input: dict[str, Any], ctx: Any) -> Any:
            parsed = model.model_validate(input)
            return _jsonable(await function(**dict(parsed)))

        return run_async

    def run(input: dict[str, Any], ctx: Any) -> Any:
        parsed = model.model_validate(input)
        return _jsonable(function(**dict(parsed)))

    return run


def _jsonable(value: Any) -> Any:
    """Pydantic results as JSON data; everything else as it is."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


def _is_tool_object(item: object) -> bool:
    return all(hasattr(item, attr) for attr in ("name", "parameters_schema", "execute"))


def _attr(item: object, attr: str) -> Any:
    value = getattr(item, attr, None)
    return value() if callable(value) else value


def _from_tool_object(item: object) -> Tool:
    execute = item.execute  # type: ignore[attr-defined]  # checked by _is_tool_object

    if inspect.iscoroutinefunction(execute):

        async def run_async(input: dict[str, Any], ctx: Any) -> Any:
            return _tool_object_result(await execute(input, _opts(ctx)))

        handler: Callable[..., Any] = run_async
    else:

        def handler(input: dict[str, Any], ctx: Any) -> Any:
            return _tool_object_result(execute(input, _opts(ctx)))

    return _build(
        name=str(_attr(item, "name")),
        description=str(_attr(item, "description") or ""),
        input_schema=_json_schema(_attr(item, "parameters_schema")),
        handler=handler,
        read_only=bool(getattr(item, "read_only", False)),
        danger=getattr(item, "danger", None),
    )


def _opts(ctx: Any) -> dict[str, Any]:
    """The ``opts`` of a tool object's ``execute``: who calls, and the call's id."""
    caller = getattr(ctx, "caller", None)
    return {"caller": caller, "call_id": getattr(ctx, "call_id", None)}


def _tool_object_result(value: Any) -> Any:
    """``("ok", x)`` is x; ``("error", reason)`` is a ``ToolError``; anything else is the result."""
    if isinstance(value, tuple) and len(value) == 2 and value[0] in ("ok", "error"):
        if value[0] == "error":
            raise ToolError(str(value[1]))
        return value[1]
    return value


def _json_schema(schema: Any) -> Any:
    """A parameters schema with its keys made strings (a dict may use others), default object."""
    if schema is None:
        return None
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema
    return _stringify(schema)


def _stringify(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _stringify(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_stringify(v) for v in value]
    return value


def _is_langchain_tool(item: object) -> bool:
    try:
        from langchain_core.tools import BaseTool
    except ImportError:  # pragma: no cover - langchain-core is a dependency
        return False
    return isinstance(item, BaseTool)


def _from_langchain(item: Any) -> Tool:
    schema = item.get_input_schema()
    input_schema: Any = (
        schema if isinstance(schema, type) and issubclass(schema, BaseModel) else None
    )
    if isinstance(item.args_schema, dict):
        input_schema = item.args_schema

    async def run_async(input: dict[str, Any], ctx: Any) -> Any:
        return await item.ainvoke(input)

    def run(input: dict[str, Any], ctx: Any) -> Any:
        return item.invoke(input)

    coroutine = getattr(item, "coroutine", None)
    return _build(
        name=item.name,
        description=item.description or "",
        input_schema=input_schema,
        handler=run_async if coroutine is not None else run,
    )
