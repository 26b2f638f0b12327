"""The idempotency key of a tool call of a turn: one per thread, AI message and call id, so a
round that runs again (after a crash, on a resume) replays the recorded answer."""

from __future__ import annotations

import hashlib

from turnkit.executor.steps import KEY_LIMIT
from turnkit.turn.state import PendingCall

__all__ = ["idempotency_key", "thread_of"]


def idempotency_key(thread_id: str | None, call: PendingCall) -> str | None:
    """The key of one tool call of one thread; None without a thread (nothing to resume).

    A key is at most 254 characters (the ledger keeps 255; a key of 255 was cut by an older
    version): when the ids make it longer, the message and call ids — and, for a very long
    thread id, the thread too — are replaced by their SHA-256, never cut, so two calls never share
    a key."""
    if not thread_id:
        return None
    key = f"turn:{thread_id}:{call['message_id']}:{call['id']}"
    if len(key) < KEY_LIMIT:
        return key
    digest = hashlib.sha256(f"{thread_id}\0{call['message_id']}\0{call['id']}".encode()).hexdigest()
    key = f"turn:{thread_id}:sha256:{digest}"
    return key if len(key) < KEY_LIMIT else f"turn-sha256:{digest}"


def thread_of(key: str | None) -> str | None:
    """The thread of a call's ``idempotency_key`` when the turn graph made it, else None."""
    if not key or not key.startswith("turn:") or len(key) >= KEY_LIMIT:  # an old cut key
        return None
    parts = key.removeprefix("turn:").rsplit(":", 2)
    return parts[0] if len(parts) == 3 else None
