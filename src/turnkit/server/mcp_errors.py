"""A failure outside what a tool answers never reaches an MCP client as its text.

The executor turns a tool handler's exception into an ``internal_error`` result. Anything else
that raises while a request is served — the application's permission provider, the ledger's
database, a key's lookup — would reach the client as ``str(exc)`` on the handshake-era protocols
(the SDK sends it as the JSON-RPC error's message on 2025-06-18 and 2025-11-25), where a DSN's
password or a host name could be read. Here it becomes a generic JSON-RPC internal error on
every protocol version, carrying an error id; the exception is logged at ERROR on the
``turnkit.server.mcp`` logger with that id, so an operator finds it from what the client shows.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import TypeVar

from mcp import MCPError
from mcp.types import INTERNAL_ERROR
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["FAILED", "Failsafe", "failed", "failure", "guarded"]

log = logging.getLogger("turnkit.server.mcp")

FAILED = "the server failed to answer this request; the error was logged with id {id}"
"""The message a client gets for a failure of the server (the id is the log's)."""

C = TypeVar("C")
P = TypeVar("P")
R = TypeVar("R")


def failure(exc: BaseException) -> MCPError:
    """Log ``exc`` at ERROR with a new error id; the generic error the client gets for it."""
    error_id = secrets.token_hex(8)
    log.error("MCP request failed (error id %s)", error_id, exc_info=exc)
    return MCPError(INTERNAL_ERROR, FAILED.format(id=error_id), data={"error_id": error_id})


def guarded(handler: Callable[[C, P], Awaitable[R]]) -> Callable[[C, P], Awaitable[R]]:
    """``handler`` (an MCP request handler) raising ``failure``'s generic error for any
    exception but an ``MCPError`` it means the client to read."""

    async def run(ctx: C, params: P) -> R:
        try:
            return await handler(ctx, params)
        except MCPError:
            raise
        except Exception as exc:
            raise failure(exc) from None

    return run


class Failsafe:
    """Answer an exception that escapes ``app`` before it answered (the key's lookup, the
    transport) with a 500 holding ``failure``'s JSON-RPC error; one raised after the answer
    started is logged with its id, and the connection is dropped by the server."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except HTTPException:
            raise  # the host's own answer (BodyLimit's 413 for a body read in chunks)
        except Exception as exc:
            answer = failed(exc)
            if started or scope["type"] != "http":
                raise  # the answer is under way: the server ends the connection
            await answer(scope, receive, send)


def failed(exc: BaseException) -> JSONResponse:
    """The 500 answering a request the server failed: ``failure``'s generic JSON-RPC error (its
    id logged with ``exc``)."""
    error = failure(exc).error
    body = {"jsonrpc": "2.0", "id": None, "error": error.model_dump(exclude_none=True)}
    return JSONResponse(body, status_code=500)
