"""``chat``: one turn, one call — an ``Agent`` made for it and closed after."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.messages import convert_to_messages

from turnkit.agent._agent import Agent
from turnkit.agent.response import Response
from turnkit.registry.caller import Caller
from turnkit.registry.registry import Registry

__all__ = ["chat"]


def chat(
    messages: Sequence[Any] | str,
    *,
    model: Any,
    tools: Iterable[object] = (),
    schema: Any = None,
    system: str | None = None,
    caller: Caller | None = None,
    registry: Registry | None = None,
    base_url: str | None = None,
    timeout: float = 60,
) -> Response:
    """One turn on ``messages`` (the last one is usually the user's): tools run, the answer comes.

    Keeps nothing afterwards; writes that wait for a person are listed in ``Response.pending``
    (decide them with an ``Agent`` instead when you need to resume the turn).

    Examples:
        >>> chat("Weather in Lisbon?", model=model, tools=[get_weather])  # doctest: +SKIP
    """
    history = [messages] if isinstance(messages, str) else list(messages)
    *before, last = convert_to_messages(history)
    agent = Agent(
        model,
        tools=tools,
        schema=schema,
        system=system,
        caller=caller,
        registry=registry,
        manage_history=False,
        base_url=base_url,
    )
    try:
        return agent.prompt(last.text, messages=before, timeout=timeout)
    finally:
        agent.close()
