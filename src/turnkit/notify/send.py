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
                return _post(client, target.config["url"], body, headers, timeout)
            case "slack":
                body = json.dumps(slack_message(payload))
                headers = {"content-type": "application/json"}
                return _post(client, target.config["url"], body, headers, timeout)
            case "email":
                message = email_message(target.config, payload)
                return Answered(ok=True, detail=send_email(target.config, message, timeout))
    except httpx.TimeoutException as exc:
        return Answered(ok=False, detail=f"no answer within {timeout:g} s ({type(exc).__name__})")
    except (httpx.HTTPError, OSError, smtplib.SMTPException) as exc:
        return Answered(ok=False, detail=f"{type(exc).__name__}: {exc}"[:300])
    return Answered(ok=False, detail=f"unknown kind {target.kind!r}")


ANSWER_BYTES = 2000
"""The most of a receiver's answer kept to tell what it said."""


def _post(
    client: httpx.Client, url: str, body: str, headers: dict[str, str], timeout: float
) -> Answered:
    """POST ``body`` and read the answer, all within about ``timeout`` seconds in total. httpx's
    timeout bounds each step, not the whole: connecting, sending and the first of the answer
    get a third each, and the rest of the answer is read while the total lasts. A receiver
    trickling its answer a byte at a time would otherwise keep the send going past the claim's
    lease, and another worker would send it again."""
    deadline = time.monotonic() + timeout
    step = httpx.Timeout(timeout / 3)
    with client.stream("POST", url, content=body, headers=headers, timeout=step) as response:
        said = b""
        for chunk in response.iter_bytes():
            if time.monotonic() > deadline:
                raise httpx.ReadTimeout("the answer took longer than the timeout in total")
            said += chunk[: max(0, ANSWER_BYTES - len(said))]
    text = " ".join(said.decode("utf-8", "replace").split())[:200]
    detail = f"HTTP {response.status_code}" + (f": {text}" if text else "")
    return Answered(ok=response.is_success, detail=detail)


def send_ping(target: NotifyTarget, public_url: str | None, *, timeout: float = 10.0) -> Answered:
    """Send ``target`` one test notification now, outside the outbox (``turnkit notify test``)."""
    body = ping_payload(public_url, time.time())
    with httpx.Client() as client:
        return send(client, target, f"test_{uuid.uuid4().hex}", body, timeout=timeout)
