"""The operator's setting overrides a model call read, kept for the rest of its round.

The turn graph reads the overrides once per run (``list_tools``) and hands them to every call of
the run (docs/architecture.md, "What reaches the ledger from above the executor"). The
middleware has no step at a run's start, so it reads them at each model call instead; what it
read is kept here under the id of the AI message that call produced, for that message's tool
calls and for the model call that reads their answers: one reading per round, not three (on
SQLite each is a statement, ~0.4 ms here). The permission provider is still asked at every call
and the executor still checks the caller's rights then; only the overrides are the round's.

A kept reading is used only in this process and only for ``ROUND_SECONDS`` after it was made, so
a round resumed later (a run stopped at another middleware's interrupt, a new process) reads
them again: never older than the turn graph's run-long reading.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage

from turnkit.registry._memo import remember

__all__ = ["ROUND_SECONDS", "RoundSettings"]

ROUND_SECONDS = 5.0
"""How long after a model call its reading of the overrides serves its round."""


class RoundSettings:
    """Overrides by the id of the AI message whose model call read them (bounded, thread-safe as
    ``remember`` is: a lost entry only means one more reading)."""

    def __init__(self, clock: Any = time.monotonic, limit: int = 4096) -> None:
        self._clock = clock
        self._limit = limit
        self._read: dict[str, tuple[float, dict[str, Any]]] = {}

    def keep(self, replies: Sequence[Any], overrides: dict[str, Any]) -> None:
        """Keep ``overrides`` for the round of each AI message in ``replies`` that made calls."""
        now = self._clock()
        for reply in replies:
            if isinstance(reply, AIMessage) and reply.tool_calls and reply.id:
                remember(self._read, reply.id, (now, overrides), limit=self._limit)

    def of(self, message_id: str | None) -> dict[str, Any] | None:
        """The overrides kept for the round of AI message ``message_id``, or None (read them)."""
        found = self._read.get(message_id) if message_id else None
        if found is None or self._clock() - found[0] > ROUND_SECONDS:
            return None
        return found[1]

    def answered(self, messages: Sequence[AnyMessage]) -> dict[str, Any] | None:
        """The round's overrides when ``messages`` end with the tool answers of the latest AI
        message (the model is asked again within a round), else None."""
        if not messages or not isinstance(messages[-1], ToolMessage):
            return None
        for message in reversed(messages):
            if isinstance(message, AIMessage):
                return self.of(message.id)
            if not isinstance(message, ToolMessage):
                return None
        return None
