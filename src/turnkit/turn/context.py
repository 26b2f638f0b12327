"""``TurnContext``: who the turn runs for, passed as LangGraph runtime context.

LangGraph does not checkpoint the runtime context: pass it again on every ``invoke`` and resume.
A run started without one (Studio, a plain ``invoke``) gets the graph's default caller when the
graph was built with one, and otherwise fails with a clear error — never an anonymous superuser.
"""

from __future__ import annotations

from dataclasses import dataclass

from turnkit.registry.caller import Caller
from turnkit.registry.visibility import Allow

__all__ = ["TurnContext"]


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnContext:
    """The caller of a turn and what their key allows.

    Examples:
        >>> from turnkit import Caller
        >>> TurnContext(caller=Caller.session("u_1")).allow
        'all'
    """

    caller: Caller | None = None
    """Who the agent acts for; None means the graph's documented default caller."""
    allow: Allow = "all"
    """``"all"``, or the registry names a key caller may use."""
