"""What a notification says: built when it is sent, from the confirmation as the ledger has it.

Always: the event's type and time, the confirmation's id, tool, caller, status at the event,
thread and a link to its page in the inbox. Only when the target asks for it (``include``): the
held arguments, the tool's preview, the request that led to the call. A confirmation pruned since
the event is told with what its outbox row knows.
"""

from __future__ import annotations

from typing import Any

from turnkit.ledger import Confirmation
from turnkit.ledger.outbox import Delivery, NotifyTarget
from turnkit.ledger.records import iso

__all__ = ["detail_link", "payload", "ping_payload"]

_WORDS = {
    "held": "waits for a decision",
    "decided": "was decided",
    "expired": "expired: nobody decided in time",
    "ran": "ran",
}


def detail_link(public_url: str | None, confirmation_id: str) -> str | None:
    """The confirmation's page in the web inbox, or None without a public URL."""
    if not public_url:
        return None
    return f"{public_url.rstrip('/')}/ui/confirmations/{confirmation_id}"


def payload(
    delivery: Delivery,
    confirmation: Confirmation | None,
    target: NotifyTarget,
    public_url: str | None,
) -> dict[str, Any]:
    """The JSON a webhook receives (a Standard Webhooks body: ``type``, ``timestamp``,
    ``data``); Slack and email say the same in words."""
    data: dict[str, Any] = {
        "confirmation_id": delivery.confirmation_id,
        "event": delivery.event,
        "status": delivery.status,
        "summary": _WORDS[delivery.event],
        "link": detail_link(public_url, delivery.confirmation_id),
    }
    if confirmation is not None:
        c = confirmation
        data |= {
            "tool": c.tool,
            "caller": c.caller.identity,
            "caller_name": c.caller_name,
            "thread_id": c.thread_id,
            "expires_at": iso(c.expires_at),
        }
        if delivery.event in ("decided", "expired", "ran"):
            data["decided_by"] = c.decided_by
        if "arguments" in target.include:
            data["arguments"] = c.input
        if c.approvals_needed > 1:
            data["approvals"] = {"given": c.approvals_given, "needed": c.approvals_needed}
        if "preview" in target.include:
            data["preview"] = None if c.preview is None else c.preview.to_json()
        if "context" in target.include:
            data["context"] = c.request
    return {
        "type": f"confirmation.{delivery.event}",
        "timestamp": iso(delivery.created_at),
        "data": data,
    }


def ping_payload(public_url: str | None, now: float) -> dict[str, Any]:
    """What ``turnkit notify test`` sends: no confirmation, a link to the inbox."""
    link = f"{public_url.rstrip('/')}/ui/" if public_url else None
    return {
        "type": "turnkit.test",
        "timestamp": iso(now),
        "data": {"summary": "a test notification from turnkit", "link": link},
    }
