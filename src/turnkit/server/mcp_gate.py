"""A ``tools/call``'s bearer key looked up in the worker thread that runs the call: one thread
hop for the key and the call, as over REST, and still a 401 for a refused key.

Every other request to ``/mcp`` has its key looked up before the SDK reads it (``mcp_auth``).
That costs a hop of its own, and a hop (~0.1-0.2 ms here, more under load) is more than the
lookup. For a ``tools/call`` — the request that matters for speed — ``KeyGate`` reads the body,
lets it through with the bearer not yet looked up (``PendingKey`` in the scope), and the call
looks it up in its own worker thread (``Executor.acall_as``). The promise is kept:

- A refused key (unknown, revoked, expired) runs nothing: the call's first step is the lookup,
  and a refusal returns before anything is called, charged or audited.
- Its answer is the same 401 as before the SDK, saying why: when the answer starts, a refused
  pending key replaces it. An answer the SDK gives without reaching the call (a malformed
  request) waits for the lookup first, so a refused key never reads anything but its 401.
- Only a small body is read before its key is known (``DEFER_UP_TO``); a larger one, or a body
  sent in chunks without a length, takes the usual way: key first.
- A lookup that fails (the database) is a 500 carrying the logged error id, as before.

The price: a client with any bearer has its small body read and parsed before its key is known
(before, a refused one was answered as soon as its key was looked up).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from turnkit.executor.calls import Resolved
from turnkit.server.bearer import KeyFinder
from turnkit.server.mcp_auth import unauthorized
from turnkit.server.mcp_errors import failed
from turnkit.server.mcp_tools import GET_CONFIRMATION

__all__ = ["DEFER_UP_TO", "PENDING", "KeyGate", "PendingKey", "pending_key"]

log = logging.getLogger("turnkit.server.mcp")

DEFER_UP_TO = 64 * 1024
"""The largest ``tools/call`` body (bytes) read before its key is known; larger: key first."""
PENDING = "turnkit.pending_key"
"""The ASGI scope key holding the request's ``PendingKey``."""


class PendingKey:
    """A request's bearer, looked up once by whoever needs it first: the call, in its worker
    thread (``__call__``, what ``acall_as`` runs), or the answer, before it starts."""

    __slots__ = ("failed", "finder", "found", "secret")

    def __init__(self, secret: str, finder: KeyFinder) -> None:
        self.secret = secret
        self.finder = finder
        self.found: Resolved | str | None = None
        """The key's caller and rights, or why it is refused; None until looked up."""
        self.failed = False
        """Whether the lookup raised (the database failed): whoever looked it up answers the
        failure (the call, with its logged id; else the answer's start, with a 500)."""

    def __call__(self) -> Resolved | str:
        """Blocking: look the key up (once); its caller, or why it is refused."""
        if self.found is None:
            try:
                self.found = self.finder.find(self.secret)
            except Exception:
                self.failed = True
                raise
        return self.found

    @property
    def refused(self) -> str | None:
        """Why the key is refused, once looked up (None: usable, or not looked up yet)."""
        return self.found if isinstance(self.found, str) else None


def pending_key(request_scope: Scope | None) -> PendingKey | None:
    """The ``PendingKey`` of the request being handled, from its scope (the SDK hands every
    handler the HTTP request on every protocol version); None without one."""
    found = None if request_scope is None else request_scope.get(PENDING)
    return found if isinstance(found, PendingKey) else None


class KeyGate:
    """In front of ``/mcp``: a small ``tools/call`` with a bearer goes to ``endpoint`` with its
    key pending; any other request to ``checked`` (the key looked up first)."""

    def __init__(self, checked: ASGIApp, endpoint: ASGIApp, finder: KeyFinder) -> None:
        self.checked = checked
        self.endpoint = endpoint
        self.finder = finder

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        secret = _bearer_of_small_post(scope)
        if secret is None:
            await self.checked(scope, receive, send)
            return
        messages, body = await _read(receive)
        replay = _replaying(messages, receive)
        if not _is_tool_call(body):
            await self.checked(scope, replay, send)
            return
        pending = PendingKey(secret, self.finder)
        scope[PENDING] = pending
        await self.endpoint(scope, replay, _refusing(pending, scope, replay, send))


def _bearer_of_small_post(scope: Scope) -> str | None:
    if scope["type"] != "http" or scope.get("method") != "POST":
        return None
    headers = dict(scope["headers"])
    length = headers.get(b"content-length", b"")
    header = headers.get(b"authorization", b"")
    if not length.isdigit() or int(length) > DEFER_UP_TO or header[:7].lower() != b"bearer ":
        return None
    return header[7:].decode("latin-1")


async def _read(receive: Receive) -> tuple[list[Message], bytes]:
    messages: list[Message] = []
    chunks: list[bytes] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":  # the client left: the SDK sees it too
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return messages, b"".join(chunks)


def _replaying(messages: list[Message], receive: Receive) -> Receive:
    queued = list(messages)

    async def replay() -> Message:
        return queued.pop(0) if queued else await receive()

    return replay


def _is_tool_call(body: bytes) -> bool:
    try:
        message: Any = json.loads(body)
    except (ValueError, RecursionError):  # nested past the parser's depth: the SDK refuses it
        return False
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return False
    params = message.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    return isinstance(name, str) and name != GET_CONFIRMATION  # that one reads the key first


def _refusing(pending: PendingKey, scope: Scope, receive: Receive, send: Send) -> Send:
    """``send``, answering 401 instead when the key turns out refused (looked up first, in a
    worker thread, if the call never did)."""
    replaced = False

    async def sending(message: Message) -> None:
        nonlocal replaced
        if message["type"] == "http.response.start":
            if pending.failed:  # the call answered the generic error (its id logged): a 500
                message = {**message, "status": 500}  # as when the key is looked up first
            elif pending.found is None:
                try:
                    await asyncio.to_thread(pending)
                except Exception as exc:  # answered here: the SDK would send its own text
                    replaced = True
                    await failed(exc)(scope, receive, send)
                    return
            if pending.refused is not None:
                replaced = True
                log.info("MCP request refused: %s", pending.refused)
                await unauthorized(pending.refused)(scope, receive, send)
                return
        if not replaced:
            await send(message)

    return sending
