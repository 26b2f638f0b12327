"""One notification to one target, whatever its kind: what the receiver answered, as a value.

A failure the receiver or the network causes (an HTTP status other than 2xx, a refused
connection, a timeout, an SMTP refusal) is an ``Answered`` with ``ok=False``, never an exception:
the dispatcher retries it, ``turnkit notify test`` shows it.
"""

from __future__ import annotations

import json
import smtplib
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from turnkit.ledger.outbox import NotifyTarget
from turnkit.notify.mail import email_message, send_email
from turnkit.notify.payload import ping_payload
from turnkit.notify.slack import slack_message
from turnkit.notify.webhook import signed_headers

__all__ = ["Answered", "send", "send_ping"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Answered:
    """How one attempt went."""

    ok: bool
    """Delivered: a 2xx answer, or mail the SMTP server accepted."""
    detail: str
    """What the receiver said (``HTTP 200: ok``), or why it could not be reached."""


def send(
    client: httpx.Client,
    target: NotifyTarget,
    message_id: str,
    payload: dict[str, Any],
    *,
    timeout: float,
) -> Answered:
    """Send ``payload`` to ``target`` as ``message_id`` (the Standard Webhooks ``webhook-id``)."""
    try:
        match target.kind:
            case "webhook":
                body = json.dumps(payload, separators=(",", ":"))
                secret = target.config["secret"]
                headers = signed_headers(secret, message_id, int(time.time()), body)
                return _answered(client.post(target.config["url"], content=body,
                                             headers=headers, timeout=timeout))  # fmt: skip
            case "slack":
                body = json.dumps(slack_message(payload))
                headers = {"content-type": "application/json"}
                return _answered(client.post(target.config["url"], content=body,
                                             headers=headers, timeout=timeout))  # fmt: skip
            case "email":
                message = email_message(target.config, payload)
                return Answered(ok=True, detail=send_email(target.config, message, timeout))
    except httpx.TimeoutException as exc:
        return Answered(ok=False, detail=f"no answer within {timeout:g} s ({type(exc).__name__})")
    except (httpx.HTTPError, OSError, smtplib.SMTPException) as exc:
        return Answered(ok=False, detail=f"{type(exc).__name__}: {exc}"[:300])
    return Answered(ok=False, detail=f"unknown kind {target.kind!r}")


def _answered(response: httpx.Response) -> Answered:
    said = " ".join(response.text.split())[:200]
    detail = f"HTTP {response.status_code}" + (f": {said}" if said else "")
    return Answered(ok=response.is_success, detail=detail)


def send_ping(target: NotifyTarget, public_url: str | None, *, timeout: float = 10.0) -> Answered:
    """Send ``target`` one test notification now, outside the outbox (``turnkit notify test``)."""
    body = ping_payload(public_url, time.time())
    with httpx.Client() as client:
        return send(client, target, f"test_{uuid.uuid4().hex}", body, timeout=timeout)
