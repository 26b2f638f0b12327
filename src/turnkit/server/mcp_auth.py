"""Who calls ``/mcp``: the bearer key, looked up in the ledger on every request, with the SDK's
auth parts (``AccessToken``, ``AuthenticatedUser``, the auth context ``get_access_token`` reads).

A refused bearer is answered 401 here, before the transport, with the reason twice: in the
``WWW-Authenticate`` challenge's ``error_description`` (RFC 6750, for OAuth-aware clients and
people reading headers), and as a JSON-RPC error in the body, which the SDK's client raises as
``MCPError`` with that message (it reads a JSON-RPC error from a non-2xx answer; the SDK's own
``RequireAuthMiddleware`` says only "Authentication required").
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.types import INVALID_REQUEST
from pydantic import ConfigDict
from starlette.authentication import AuthCredentials, AuthenticationBackend
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from turnkit.ledger.keys import ApiKey, ApiKeys
from turnkit.registry.settings import Settings
from turnkit.server.bearer import NO_KEY, KeyFinder, challenge

__all__ = ["REFUSED", "KeyBackend", "KeyToken", "KeyVerifier", "RequireKey", "unauthorized"]

log = logging.getLogger("turnkit.server.mcp")

REFUSED = "turnkit.bearer_refused"
"""The ASGI scope key where ``KeyBackend`` leaves why the request's bearer was refused."""


class KeyToken(AccessToken):
    """The SDK's access token, carrying the API key it was made from."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    key: ApiKey
    """The key as the ledger holds it at this request."""
    settings: Any = None  # Settings | None, not validated by pydantic (a dataclass: copied)
    """The settings in force (``Settings``), read with the key in one statement (None: a call
    reads them)."""


class KeyVerifier:
    """The SDK's ``TokenVerifier`` for turnkit API keys, asked on every request."""

    def __init__(
        self,
        keys: ApiKeys,
        clock: Callable[[], float] = time.time,
        *,
        settings: Callable[[Mapping[str, Any]], Settings] | None = None,
    ) -> None:
        """``settings``: the executor's ``settings_with``, when the keys are in its ledger: the
        operator's settings are then read with the key, in one statement, and carried by the
        token to the call (one statement fewer a call)."""
        self.keys = keys
        self.clock = clock
        self.settings = settings
        self.finder = KeyFinder(keys, keys.ledger if settings else None, clock)

    async def check(self, token: str) -> KeyToken | str:
        """The key's token, or why the bearer ``token`` is refused (unknown, revoked, expired)."""
        found, overrides = await asyncio.to_thread(self.finder.lookup, token)
        if isinstance(found, str):
            log.info("MCP request refused: %s", found)
            return found
        settings = None if overrides is None or self.settings is None else self.settings(overrides)
        return KeyToken(token=token, client_id=found.id, subject=found.user_id,
                        scopes=sorted(found.scopes), key=found, settings=settings)  # fmt: skip

    async def verify_token(self, token: str) -> AccessToken | None:
        """The key's token, or None for an unknown, revoked or expired key (a 401)."""
        found = await self.check(token)
        return None if isinstance(found, str) else found


class KeyBackend(AuthenticationBackend):
    """Starlette's authentication backend for bearer keys (as the SDK's ``BearerAuthBackend``),
    leaving the reason for a refusal in the request's scope (``REFUSED``) for ``RequireKey``."""

    def __init__(self, verifier: KeyVerifier) -> None:
        self.verifier = verifier

    async def authenticate(
        self, conn: HTTPConnection
    ) -> tuple[AuthCredentials, AuthenticatedUser] | None:
        """The key's credentials and user; None (and the reason in the scope) when refused."""
        header = conn.headers.get("authorization", "")
        if not header.lower().startswith("bearer "):
            conn.scope[REFUSED] = NO_KEY
            return None
        found = await self.verifier.check(header[len("bearer ") :])
        if isinstance(found, str):
            conn.scope[REFUSED] = found
            return None
        return AuthCredentials(found.scopes), AuthenticatedUser(found)


class RequireKey:
    """Let a request with a usable key through to ``app``; answer any other 401, saying why."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if isinstance(scope.get("user"), AuthenticatedUser):
            await self.app(scope, receive, send)
            return
        reason = str(scope.get(REFUSED, NO_KEY))
        await unauthorized(reason)(scope, receive, send)


def unauthorized(reason: str) -> JSONResponse:
    """The 401 refusing a bearer because of ``reason``: a challenge and a JSON-RPC error."""
    oauth: dict[str, Any] = {"error": "invalid_token", "error_description": reason}
    body = {"jsonrpc": "2.0", "id": None,
            "error": {"code": INVALID_REQUEST, "message": reason, "data": oauth}}  # fmt: skip
    return JSONResponse(body, status_code=401, headers={"WWW-Authenticate": challenge(reason)})
