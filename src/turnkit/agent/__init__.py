"""The developer API (seed 001): ``Agent``, ``chat``, ``AgentPool``; local tools, LangChain
adapters, structured output and chat models, each in the module its name says.

``_agent`` holds the three; ``_portal`` the event loop every Agent runs its turns on.
"""

from turnkit.agent._agent import AGENT_CALLER, Agent, AgentPool, chat

__all__ = ["AGENT_CALLER", "Agent", "AgentPool", "chat"]
