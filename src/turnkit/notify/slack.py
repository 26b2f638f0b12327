"""A Slack incoming webhook's message: who asked for which tool, what happened, and the link to
the confirmation's page (https://api.slack.com/messaging/webhooks: a JSON ``text`` and
``blocks``)."""

from __future__ import annotations

from typing import Any

__all__ = ["slack_message"]

_MARK = {"held": ":hourglass:", "decided": ":white_check_mark:", "expired": ":alarm_clock:",
         "ran": ":gear:"}  # fmt: skip


def slack_message(payload: dict[str, Any]) -> dict[str, Any]:
    """The message of a notification's ``payload`` (``payload.payload``)."""
    data = payload["data"]
    if payload["type"] == "turnkit.test":
        line = f"turnkit: {data['summary']}"
        return {"text": line, "blocks": [_section(line, data.get("link"))]}
    event = data["event"]
    tool = data.get("tool") or "a tool"
    who = data.get("caller_name") or data.get("caller") or "someone"
    line = f"{_MARK.get(event, '')} `{tool}` for {who} {data['summary']} ({data['status']})"
    context = f"confirmation {data['confirmation_id']}"
    if data.get("decided_by"):
        context += f" · decided by {data['decided_by']}"
    return {
        "text": line + (f" {data['link']}" if data.get("link") else ""),
        "blocks": [
            _section(line, data.get("link")),
            {"type": "context", "elements": [{"type": "mrkdwn", "text": context}]},
        ],
    }


def _section(line: str, link: str | None) -> dict[str, Any]:
    text = line + (f"\n<{link}|Open it in the inbox>" if link else "")
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}
