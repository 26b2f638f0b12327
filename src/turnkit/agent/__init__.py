"""The developer API (docs/architecture.md §7): ``Agent``, ``chat``, ``AgentPool``; local tools,
LangChain adapters, structured output and chat models, each in the module its name says.

``_agent`` holds ``Agent``, ``one_turn.py`` ``chat`` and ``pool.py`` ``AgentPool``; ``_portal``
the event loop every Agent runs its turns on; ``streaming`` what ``Agent.stream`` / ``astream``
return.
"""

from turnkit.agent._agent import AGENT_CALLER, Agent
from turnkit.agent.one_turn import chat
from turnkit.agent.pool import AgentPool
from turnkit.agent.streaming import AsyncTurnStream, TurnStream

__all__ = ["AGENT_CALLER", "Agent", "AgentPool", "AsyncTurnStream", "TurnStream", "chat"]
