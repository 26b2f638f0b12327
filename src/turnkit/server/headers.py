"""Headers every answer of the app carries, whichever part answers (REST, MCP, the inbox, its
static files, errors, 404s, 413s).

- ``X-Content-Type-Options: nosniff``: a browser takes each answer as the type it is declared,
  so no JSON or text answer is ever run as a script or a page.
- ``Strict-Transport-Security: max-age=31536000`` (one year), on answers to requests that came
  over HTTPS only (as uvicorn sees them: behind a proxy, with ``--proxy-headers`` from an
  allowed ``--forwarded-allow-ips``): a browser that reached the app over HTTPS then never uses
  plain HTTP to its host for a year. Without ``includeSubDomains``: the app cannot know what else
  runs on the domain's other names.
"""

from __future__ import annotations

from typing import Final

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["HSTS", "SecurityHeaders", "security_headers"]

HSTS: Final = "max-age=31536000"
"""The ``Strict-Transport-Security`` value sent over HTTPS."""


def security_headers(scope: Scope) -> dict[str, str]:
    """The headers an answer to the request of ``scope`` carries."""
    found = {"X-Content-Type-Options": "nosniff"}
    if scope.get("scheme") == "https":
        found["Strict-Transport-Security"] = HSTS
    return found


class SecurityHeaders:
    """Add ``security_headers`` to every HTTP answer of ``app`` (keeping any it set itself)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        added = security_headers(scope)

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", []))
                headers = MutableHeaders(scope=message)
                for name, value in added.items():
                    if name not in headers:
                        headers[name] = value
            await send(message)

        await self.app(scope, receive, sending)
