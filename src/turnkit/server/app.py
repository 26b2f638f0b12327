"""``create_app``: the REST API and the MCP server as one ASGI app (FastAPI)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from turnkit.executor.executor import Executor
from turnkit.ledger.keys import ApiKeys
from turnkit.server import problems, rest
from turnkit.server.auth import ExecutorDep
from turnkit.server.bearer import KeyFinder
from turnkit.server.headers import SecurityHeaders
from turnkit.server.ui.session import IDLE_SECONDS, SignIn

__all__ = ["create_app"]


def create_app(
    executor: Executor,
    *,
    keys: ApiKeys | None = None,
    mcp_path: str | None = "/mcp",
    max_body_bytes: int = 1_000_000,
    ui: bool = True,
    ui_sign_in: SignIn | None = None,
    inbox_idle_timeout: float = IDLE_SECONDS,
    mcp_allowed_hosts: Iterable[str] = (),
    mcp_allowed_origins: Iterable[str] = (),
    docs: bool = False,
    metrics: bool = False,
) -> FastAPI:
    """The app serving ``executor``'s tools to API-key callers.

    Args:
        executor: runs every call (its ledger holds confirmations, idempotency and the audit).
        keys: where bearer keys are looked up; default ``executor.ledger.keys``.
        mcp_path: where the MCP server (Streamable HTTP) is mounted; None for REST only.
        max_body_bytes: larger request bodies are refused with 413.
        ui: serve the web inbox at ``/ui/`` (people approve held writes in a browser).
        ui_sign_in: the application's own sign-in for the inbox, ``(request) -> Caller | None``
            (sync or async); by default people sign in with an API key that carries the scope
            ``system.confirmations:decide``.
        inbox_idle_timeout: seconds after which a key's sign-in to the inbox that was not used
            ends (each page the person opens or form they send extends it; default 30 min).
        mcp_allowed_hosts: the ``Host`` names MCP answers besides the loopback ones
            (``"tools.example.com"``: on any port; ``"tools.example.com:8443"``: that port);
            requests for any other host are refused (421), against DNS rebinding.
        mcp_allowed_origins: the browser origins MCP answers besides the loopback ones
            (``"https://app.example.com"``, or ``"https://app.example.com:*"`` for any port);
            a request with another ``Origin`` is refused (403), one without passes.
        docs: serve the interactive API docs at ``/docs`` and ``/redoc``. Off by default: their
            pages load Swagger UI and ReDoc from a CDN, scripts that would run on the inbox's
            origin. ``/openapi.json`` (data, no script) is always served.
        metrics: serve ``GET /metrics`` for Prometheus, without a key: the counts of this
            process' calls, decisions and deliveries by tool and outcome, never arguments,
            and the holds pending in the ledger (docs/operations/monitoring.md, "Metrics"; needs
            ``prometheus-client``, in the ``server`` extra).

    Returns:
        A FastAPI app: ``/v1`` (REST), ``mcp_path`` (MCP), ``/ui/`` (the inbox), ``/healthz``
        and ``/openapi.json`` (``/docs`` and ``/metrics`` when asked). Every answer carries
        ``X-Content-Type-Options: nosniff``, and over HTTPS ``Strict-Transport-Security``
        (``turnkit.server.headers``). Its lifespan must run (uvicorn does; a host app mounting
        it enters ``app.router.lifespan_context``) when MCP is mounted, and for ``/metrics``
        to count.

    Raises:
        ValueError: ``inbox_idle_timeout`` is not a positive number of seconds.

    Examples:
        >>> from turnkit import Registry
        >>> app = create_app(Executor(Registry()), mcp_path=None)
        >>> sorted(path for path in app.openapi()["paths"] if path.startswith("/v1/tools"))
        ['/v1/tools', '/v1/tools/{name}', '/v1/tools/{name}/invoke']
    """
    keys = executor.ledger.keys if keys is None else keys
    if not inbox_idle_timeout > 0:
        raise ValueError(
            f"inbox_idle_timeout is seconds a sign-in may stay unused, more than 0:"
            f" got {inbox_idle_timeout!r}"
        )
    lifespans = []
    mounted = None
    if mcp_path is not None:
        from turnkit.server.mcp import mcp_app  # the mcp SDK is imported only when it is served
        from turnkit.server.mcp_hosts import transport_security

        security = transport_security(mcp_allowed_hosts, mcp_allowed_origins)
        mounted, mcp_lifespan = mcp_app(executor, keys, mcp_path, inbox=ui, security=security)
        lifespans.append(mcp_lifespan)
    counted = None
    if metrics:
        from turnkit.server.metrics import Metrics  # prometheus_client only when it is served

        counted = Metrics(executor.ledger)
        lifespans.append(counted.lifespan)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for entered in lifespans:
                await stack.enter_async_context(entered())
            yield

    app = FastAPI(
        title="turnkit",
        summary="Governed tools for API-key callers: REST under /v1"
        + (f", MCP at {mcp_path}" if mcp_path else ""),
        lifespan=lifespan,
        docs_url="/docs" if docs else None,
        redoc_url="/redoc" if docs else None,
    )
    ours = ("/v1", "/healthz", "/ui", *((mcp_path,) if mcp_path else ()))
    app.add_middleware(BodyLimit, limit=max_body_bytes, paths=ours)
    app.add_middleware(SecurityHeaders)  # added last: outside the 413s of BodyLimit too
    app.state.executor = executor
    app.state.keys = keys
    app.state.find_key = KeyFinder(keys, executor.ledger, executor.clock)
    problems.install(app)
    app.include_router(rest.router)
    app.router.routes.insert(  # first: the busiest request, served without FastAPI's routing
        0, Route(rest.INVOKE_PATH, rest.invoke_route, methods=["POST"], include_in_schema=False)
    )
    app.add_api_route("/healthz", healthz, methods=["GET"], tags=["health"])
    if counted is not None:
        app.add_route("/metrics", counted.endpoint, methods=["GET"], include_in_schema=False)
    if ui:
        from turnkit.server.ui import inbox_router, static_files  # needs jinja2 (server extra)

        app.mount("/ui/static", static_files(), name="ui-static")  # before the pages' catch-all
        app.include_router(inbox_router(executor, keys, ui_sign_in, idle=inbox_idle_timeout))
    if mounted is not None and mcp_path is not None:  # "/mcp" itself too, without a redirect
        # first, as invoke: every MCP request is for this path, and FastAPI's matching of the
        # routes before it cost ~0.2 ms a request (measured, FastAPI 0.165)
        app.router.routes.insert(0, Route(mcp_path, mounted, include_in_schema=False))
        app.mount(mcp_path, mounted)
    return app


async def healthz(executor: ExecutorDep) -> dict[str, str]:
    """``{"status": "ok"}`` when the ledger's database answers (a 500 problem otherwise)."""
    await executor.ledger.asettings()
    return {"status": "ok"}


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes to ``paths`` with a 413 problem document.

    A declared ``Content-Length`` over the limit is answered at once; a body sent in chunks is
    counted as it is read, and the read that crosses the limit raises the 413 in the handler.
    (FastAPI's own ``max_body_size`` answers a declared length in plain text, replacing even a
    problem response: measured with FastAPI 0.165, hence these few lines.)
    """

    def __init__(self, app: ASGIApp, limit: int, paths: tuple[str, ...]) -> None:
        self.app, self.limit, self.paths = app, limit, paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._ours(scope):
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"0")
        if declared.isdigit() and int(declared) > self.limit:
            detail = f"the request body is over {self.limit} bytes, more than this server accepts"
            await problems.problem(413, detail)(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise HTTPException(413, f"the request body is over {self.limit} bytes")
            return message

        await self.app(scope, counted, send)

    def _ours(self, scope: Scope) -> bool:
        """Whether the request is for this app's own routes: mounted as another server's app
        (langgraph-api makes it the whole server), the other routes keep their own limits."""
        path, root = scope["path"], scope.get("root_path", "")
        route = path[len(root) :] if root and path.startswith(root) else path
        return any(route == prefix or route.startswith(prefix + "/") for prefix in self.paths)
