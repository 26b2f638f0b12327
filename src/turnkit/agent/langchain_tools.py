"""Registry tools as LangChain tools: each call goes through the executor, rights and all.

Use them in any LangChain agent (``create_agent``, ``ToolNode``); the answer the tool returns is the
executor's JSON answer, so a held write shows up as ``confirmation_required`` and nothing pauses for
a person. In ``create_agent``, ``turnkit.TurnkitMiddleware`` governs the registry's tools instead:
visible tools per caller, held writes asked in an interrupt and run once.

Examples:
    >>> tools = as_langchain_tools(executor, Caller.session("u_1"))  # doctest: +SKIP
    >>> agent = create_agent(model, tools)  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import StructuredTool

from turnkit.executor.executor import Executor
from turnkit.registry.caller import Caller
from turnkit.registry.names import model_name
from turnkit.registry.visibility import Allow

__all__ = ["as_langchain_tool", "as_langchain_tools"]


def as_langchain_tool(
    executor: Executor, name: str, *, caller: Caller, allow: Allow = "all"
) -> StructuredTool:
    """The registry tool ``name`` as a ``StructuredTool`` that runs it for ``caller``.

    Raises:
        UnknownToolError: no tool ``name`` is registered.
        ValueError: the tool's name cannot be shown to a model (longer than 64 characters).
    """
    tool = executor.registry[name]
    shown = model_name(tool.name)
    if shown is None:
        raise ValueError(f"tool {tool.name!r} has no valid model name (1-64 of [a-zA-Z0-9_-])")

    def run(**arguments: Any) -> dict[str, Any]:
        return executor.execute(caller, tool.name, arguments, allow=allow)

    async def arun(**arguments: Any) -> dict[str, Any]:
        return await executor.aexecute(caller, tool.name, arguments, allow=allow)

    return StructuredTool.from_function(
        func=run,
        coroutine=arun,
        name=shown,
        description=tool.description or tool.title or tool.name,
        args_schema=executor.input_schema(tool),
    )


def as_langchain_tools(
    executor: Executor, caller: Caller, *, allow: Allow = "all"
) -> list[StructuredTool]:
    """Every tool ``caller`` may see now, as LangChain tools."""
    return [
        as_langchain_tool(executor, tool.name, caller=caller, allow=allow)
        for tool in executor.visible_for(caller, allow)
        if model_name(tool.name) is not None
    ]
