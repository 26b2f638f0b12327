"""Notifications: people are told when a write is held, decided, expired or ran.

The events are written to the ledger's outbox by the statement that makes them
(``turnkit.ledger.outbox``); a ``Dispatcher`` delivers them at least once to the targets the
operator added (``turnkit notify add``): webhooks signed per Standard Webhooks, Slack incoming
webhooks, email over SMTP. Nothing of a held write's input goes out unless a target includes it.
Above the ledger, below the doors; no LangGraph or LangChain (docs/architecture.md, "Layers").
"""

from __future__ import annotations

from turnkit.ledger.outbox import Delivery, NotifyTarget
from turnkit.notify.dispatcher import Background, Dispatcher, Round
from turnkit.notify.payload import detail_link, payload
from turnkit.notify.send import Answered, send, send_ping
from turnkit.notify.targets import (
    EVENTS,
    INCLUDES,
    KINDS,
    TargetProblems,
    add_target,
    check_target,
    new_secret,
)
from turnkit.notify.webhook import sign

__all__ = [
    "EVENTS",
    "INCLUDES",
    "KINDS",
    "Answered",
    "Background",
    "Delivery",
    "Dispatcher",
    "NotifyTarget",
    "Round",
    "TargetProblems",
    "add_target",
    "check_target",
    "detail_link",
    "new_secret",
    "payload",
    "send",
    "send_ping",
    "sign",
]
