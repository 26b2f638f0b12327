"""``AgentPool``: named agents, each made once by its factory."""

from __future__ import annotations

import threading
from collections.abc import Callable

from turnkit.agent._agent import Agent

__all__ = ["AgentPool"]


class AgentPool:
    """Named agents: the same ``Agent`` for the same name, made once by its factory.

    Examples:
        >>> pool = AgentPool()
        >>> pool.get("support:42", lambda: Agent(model, system="You help."))  # doctest: +SKIP
    """

    def __init__(self) -> None:
        self._agents: dict[str, Agent] = {}
        self._lock = threading.Lock()

    def get(self, name: str, factory: Callable[[], Agent]) -> Agent:
        """The agent called ``name``, made by ``factory`` the first time."""
        with self._lock:
            agent = self._agents.get(name)
            if agent is None:
                agent = self._agents[name] = factory()
            return agent

    def drop(self, name: str) -> None:
        """Close and forget the agent called ``name`` (nothing happens if there is none)."""
        with self._lock:
            agent = self._agents.pop(name, None)
        if agent is not None:
            agent.close()

    def names(self) -> list[str]:
        """The names of the agents in the pool."""
        with self._lock:
            return list(self._agents)

    def __contains__(self, name: object) -> bool:
        return name in self._agents
