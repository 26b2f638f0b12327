"""Which ``Host`` and ``Origin`` headers ``/mcp`` answers (DNS-rebinding protection).

The MCP specification (2025-06-18 and later, "Streamable HTTP", security warning) requires a
server to validate ``Origin``, so that a web page a person visits cannot reach an MCP server on
their machine or network through a name it controls. The SDK's ``TransportSecuritySettings``
does it, off unless given; here it is always on:

- hosts: the loopback names (``127.0.0.1``, ``localhost``, ``[::1]``) on any port, plus those the
  operator adds (``create_app(mcp_allowed_hosts=...)``, ``turnkit serve --allowed-host``, which
  adds the address it listens on). A name without a port is allowed on every port.
- origins: a request without ``Origin`` (every non-browser client) passes; a browser's must be a
  loopback origin (``http://localhost:6274``, say, an inspector) or one the operator adds, exact
  (``https://app.example.com``) or on any port (``https://app.example.com:*``).

A foreign ``Host`` is answered 421 and a foreign ``Origin`` 403, before the key is looked up,
saying which header and how to allow it.
"""

from __future__ import annotations

from collections.abc import Iterable

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.types import INVALID_REQUEST
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["LOOPBACK", "HostCheck", "listening_host", "transport_security"]

LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
"""The host names every turnkit MCP server answers (on any port)."""
_WILDCARD_BINDS = ("", "0.0.0.0", "::", "[::]")


def transport_security(
    hosts: Iterable[str] = (), origins: Iterable[str] = ()
) -> TransportSecuritySettings:
    """The SDK's settings allowing the loopback hosts and origins and ``hosts`` and ``origins``.

    Examples:
        >>> settings = transport_security(["tools.example.com"], ["https://app.example.com"])
        >>> "tools.example.com:*" in settings.allowed_hosts
        True
    """
    allowed_hosts: list[str] = []
    for given in (*LOOPBACK, *hosts):
        host = given.strip()
        if not host:
            continue
        ported = host.rsplit("]", 1)[-1] if host.startswith("[") else host
        allowed_hosts += [host] if ":" in ported else [host, f"{host}:*"]
    loopback_origins = [f"{scheme}://{host}{port}" for scheme in ("http", "https")
                        for host in LOOPBACK for port in ("", ":*")]  # fmt: skip
    given_origins = [origin.strip() for origin in origins if origin.strip()]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(dict.fromkeys(allowed_hosts)),
        allowed_origins=list(dict.fromkeys([*loopback_origins, *given_origins])),
    )


def listening_host(bind: str) -> str | None:
    """The ``Host`` name clients use for a server listening on ``bind``; None for a wildcard
    address (``0.0.0.0``, ``::``), which names no host.

    Examples:
        >>> listening_host("::1"), listening_host("10.0.0.5"), listening_host("0.0.0.0")
        ('[::1]', '10.0.0.5', None)
    """
    if bind.strip() in _WILDCARD_BINDS:
        return None
    return f"[{bind}]" if ":" in bind and not bind.startswith("[") else bind


class HostCheck:
    """Refuse a request to ``app`` whose ``Host`` or ``Origin`` ``settings`` do not allow."""

    def __init__(self, app: ASGIApp, settings: TransportSecuritySettings) -> None:
        self.app = app
        self._check = TransportSecurityMiddleware(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            request = Request(scope)
            refused = await self._check.validate_request(request, is_post=False)
            if refused is not None:
                await _refusal(refused.status_code, request)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _refusal(status: int, request: Request) -> JSONResponse:
    if status == 421:
        host = request.headers.get("host", "")[:200]
        said = (
            f"this MCP server does not answer for the host {host!r}; its operator allows it"
            " with turnkit serve --allowed-host NAME (create_app(mcp_allowed_hosts=[...]))"
        )
    else:
        origin = request.headers.get("origin", "")[:200]
        said = (
            f"requests from the web origin {origin!r} are refused; its operator allows it with"
            " turnkit serve --allowed-origin ORIGIN (create_app(mcp_allowed_origins=[...]))"
        )
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": said}}
    return JSONResponse(body, status_code=status)
