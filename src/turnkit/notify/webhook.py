"""Standard Webhooks (https://www.standardwebhooks.com, spec v1): a signed POST of a JSON body.

Headers ``webhook-id`` (the delivery's stable id: a receiver de-duplicates by it),
``webhook-timestamp`` (seconds since the epoch) and ``webhook-signature``: ``v1,`` and the base64
HMAC-SHA256 of ``"{id}.{timestamp}.{body}"`` keyed with the decoded part of the ``whsec_...``
secret. The ``standardwebhooks`` package verifies it (``Webhook(secret).verify(body, headers)``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from turnkit.notify.targets import secret_key

__all__ = ["sign", "signed_headers"]


def sign(secret: str, message_id: str, timestamp: int, body: str) -> str:
    """The ``webhook-signature`` value of ``body`` sent as ``message_id`` at ``timestamp``."""
    signed = f"{message_id}.{timestamp}.{body}".encode()
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signed_headers(secret: str, message_id: str, timestamp: int, body: str) -> dict[str, str]:
    """The request's headers: the three Standard Webhooks ones and the content type."""
    return {
        "content-type": "application/json",
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, message_id, timestamp, body),
    }
