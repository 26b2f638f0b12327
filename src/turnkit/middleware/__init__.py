"""turnkit's governance for agents built with ``langchain.agents.create_agent``.

``TurnkitMiddleware(executor)`` in ``create_agent(..., middleware=[...])``: the model sees only the
caller's visible tools, every call is validated and run through the executor, results are fitted,
and a held write becomes one interrupt in LangChain's HITL shape, resumed with
``Command(resume=...)`` and run exactly once (``agent_middleware.py``).
"""

from turnkit.middleware.agent_middleware import TurnkitMiddleware

__all__ = ["TurnkitMiddleware"]
