"""What a notification target may be: its kind, its settings, its events and what it may carry,
checked in one place before the ledger keeps it (``turnkit notify add`` and Python callers).

Checks return problems (strings that say what to do), never raise: a person's mistake is told in
full, at once.
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
from collections.abc import Collection
from typing import Any, get_args
from urllib.parse import urlsplit

from turnkit.ledger import Ledger
from turnkit.ledger.outbox import NotifyEvent, NotifyKind, NotifyTarget

__all__ = [
    "EVENTS",
    "INCLUDES",
    "KINDS",
    "TargetProblems",
    "add_target",
    "check_target",
    "new_secret",
    "secret_key",
]

KINDS: tuple[NotifyKind, ...] = get_args(NotifyKind)
"""``webhook`` (Standard Webhooks, signed), ``slack`` (an incoming webhook), ``email`` (SMTP)."""
EVENTS: tuple[NotifyEvent, ...] = get_args(NotifyEvent)
"""``held``, ``decided``, ``expired``, ``ran``."""
INCLUDES = ("arguments", "preview", "context")
"""What a target may be sent beyond the default fields, only when configured to: the held
input, the tool's preview, the request that led to the call."""
SECRET_PREFIX = "whsec_"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_EMAIL = re.compile(r"^[^@\s,]+@[^@\s,]+$")


class TargetProblems(ValueError):
    """A target the ledger would not keep: each problem says what to do."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def new_secret() -> str:
    """A fresh Standard Webhooks signing secret: ``whsec_`` and 32 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def secret_key(secret: str) -> bytes:
    """The HMAC key of a ``whsec_...`` secret (its base64 part, decoded).

    Raises:
        ValueError: not ``whsec_`` and base64 of at least 24 bytes.
    """
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError(f"a signing secret starts with {SECRET_PREFIX!r}")
    try:
        key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the part after 'whsec_' is not base64") from None
    if len(key) < 24:
        raise ValueError(f"the secret is {len(key)} bytes; a signing secret needs 24 or more")
    return key


def check_target(
    name: str,
    kind: str,
    config: dict[str, Any],
    events: Collection[str],
    include: Collection[str] = (),
) -> list[str]:
    """Every problem of a target's settings; none when the ledger may keep it."""
    problems = []
    if not _NAME.match(name):
        problems.append(
            f"name {name!r}: 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit"
        )
    if kind not in KINDS:
        problems.append(f"unknown kind {kind!r}: use one of {', '.join(KINDS)}")
    if not events:
        problems.append(f"no events: give some of {', '.join(EVENTS)}")
    problems += [
        f"unknown event {event!r}: use some of {', '.join(EVENTS)}"
        for event in events
        if event not in EVENTS
    ]
    problems += [
        f"unknown include {item!r}: use some of {', '.join(INCLUDES)}"
        for item in include
        if item not in INCLUDES
    ]
    if kind in ("webhook", "slack"):
        problems += _url_problems(config.get("url"))
    if kind == "webhook":
        try:
            secret_key(str(config.get("secret") or ""))
        except ValueError as exc:
            problems.append(f"signing secret: {exc} (leave it out and one is made)")
    if kind == "email":
        problems += _email_problems(config)
    return problems


def add_target(
    ledger: Ledger,
    name: str,
    kind: str,
    config: dict[str, Any],
    *,
    events: Collection[str] = EVENTS,
    include: Collection[str] = (),
    now: float,
) -> NotifyTarget:
    """Check a target and add it to ``ledger``; a webhook given no ``secret`` gets a new one
    (read it from the answer's ``config["secret"]``: it is what receivers verify with).

    Raises:
        TargetProblems: its settings are wrong, or a target of that name exists.

    Examples:
        >>> from turnkit import MemoryLedger
        >>> hook = add_target(MemoryLedger(), "ops", "webhook",
        ...                   {"url": "https://example.com/hooks"}, events=["held"], now=0)
        >>> hook.events, hook.config["secret"].startswith("whsec_")
        (('held',), True)
    """
    config = dict(config)
    if kind == "webhook" and not config.get("secret"):
        config["secret"] = new_secret()
    problems = check_target(name, kind, config, events, include)
    if problems:
        raise TargetProblems(problems)
    chosen = [event for event in EVENTS if event in events]  # known order, no repeats
    added = ledger.add_notify_target(
        name,
        kind,  # type: ignore[arg-type]  # checked above
        config,
        events=chosen,
        include=[item for item in INCLUDES if item in include],
        now=now,
    )
    if added is None:
        raise TargetProblems([f"a target named {name!r} exists: remove it first, or pick another"])
    return added


def _url_problems(url: Any) -> list[str]:
    if not isinstance(url, str) or not url:
        return ["no URL: give --url https://..."]
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018  (raises for a port that is not a number)
    except ValueError as exc:  # "Invalid IPv6 URL", a port that is not a number
        return [f"URL {url!r}: {exc}; expected http(s)://host/path"]
    if parts.scheme not in ("http", "https") or not host:
        return [f"URL {url!r}: expected http(s)://host/path"]
    return []


def _email_problems(config: dict[str, Any]) -> list[str]:
    problems = []
    if not config.get("smtp_host"):
        problems.append("no SMTP server: give --smtp-host")
    port = config.get("smtp_port")
    if not isinstance(port, int) or not 0 < port < 65536:
        problems.append(f"SMTP port {port!r}: a number from 1 to 65535")
    sender = config.get("from")
    if not isinstance(sender, str) or not _EMAIL.match(sender):
        problems.append(f"from address {sender!r}: give --from name@example.com")
    to = config.get("to")
    if not to or not all(isinstance(a, str) and _EMAIL.match(a) for a in to):
        problems.append(f"to addresses {to!r}: give --to name@example.com (repeatable)")
    if config.get("password_env") and not config.get("user"):
        problems.append("a password without a user: give --user too")
    return problems
