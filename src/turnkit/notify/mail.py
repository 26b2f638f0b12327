"""A notification as an email over SMTP (``smtplib``): STARTTLS and login when configured; the
password is read from the environment variable the target names, never kept in the ledger."""

from __future__ import annotations

import json
import os
import smtplib
import ssl
from email.message import EmailMessage
from typing import Any

__all__ = ["email_message", "send_email"]


def email_message(config: dict[str, Any], payload: dict[str, Any]) -> EmailMessage:
    """The message of a notification's ``payload`` for a target's ``config``."""
    data = payload["data"]
    message = EmailMessage()
    message["From"] = config["from"]
    message["To"] = ", ".join(config["to"])
    if payload["type"] == "turnkit.test":
        message["Subject"] = "[turnkit] test notification"
        lines = [data["summary"]]
    else:
        tool = data.get("tool") or "a tool"
        message["Subject"] = f"[turnkit] {tool} {data['summary']}"
        lines = [
            f"{tool} for {data.get('caller_name') or data.get('caller') or 'someone'}"
            f" {data['summary']}.",
            "",
            f"event: {payload['type']} at {payload['timestamp']}",
            f"status: {data['status']}",
            f"confirmation: {data['confirmation_id']}",
        ]
        lines += [
            f"{name}: {json.dumps(data[name])}"
            for name in ("thread_id", "decided_by", "arguments", "preview", "context")
            if data.get(name) is not None
        ]
    if data.get("link"):
        lines += ["", f"Open it: {data['link']}"]
    message.set_content("\n".join(lines) + "\n")
    return message


def send_email(config: dict[str, Any], message: EmailMessage, timeout: float) -> str:
    """Send ``message`` through the target's SMTP server; what the server answered.

    Raises:
        smtplib.SMTPException, OSError: the server refused, or could not be reached.
    """
    with smtplib.SMTP(config["smtp_host"], int(config["smtp_port"]), timeout=timeout) as smtp:
        if config.get("starttls"):
            smtp.starttls(context=ssl.create_default_context())
        if config.get("user"):
            password = os.environ.get(config.get("password_env") or "", "")
            smtp.login(config["user"], password)
        refused = smtp.send_message(message)
        code, said = smtp.noop()
    if refused:
        raise smtplib.SMTPRecipientsRefused(refused)
    return f"accepted for {len(config['to'])} recipient(s) ({code} {said.decode(errors='replace')})"
