"""``turnkit serve``: the registry over REST (``/v1``) and MCP (``/mcp``) for API-key callers.

The options are checked once, in the command's own process, so a mistake is told in a line
before anything listens. uvicorn then starts the app from ``app_from_environment`` in every
worker (``--workers N`` runs N processes): the options travel to the workers in the environment
variable ``TURNKIT_SERVE``, and each worker opens the same ``--db`` — one ledger and one key
store, shared through the database, never through a process's memory. Each worker also runs a
notification dispatcher in a thread (``turnkit.notify``; ``--no-notify`` turns it off): the
outbox's claims make any number of them safe. ``GET /metrics`` (``--no-metrics`` leaves it out)
answers for all the workers: with more than one, their counts meet in a fresh folder named by
``PROMETHEUS_MULTIPROC_DIR``, set here before uvicorn starts them (``turnkit.observe.prometheus``).

Telemetry follows the standard ``OTEL_*`` variables (docs/observe-traces.md): the banner says
where traces and metrics go, and each worker sets up the SDK (``observe.configure_sdk``), a
server span per HTTP request (the FastAPI instrumentation) and a flush when it stops.
"""

from __future__ import annotations

import atexit
import errno
import gc
import json
import os
import shutil
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from turnkit.cli.options import (
    USAGE,
    Catalogue,
    Db,
    EntryPoints,
    Permissions,
    Upstreams,
    console,
    session,
)
from turnkit.ledger.urls import shown
from turnkit.observe.logs import use_logs
from turnkit.observe.setup import configure_sdk, instrument_fastapi, plan_export
from turnkit.registry.settings import Settings

if TYPE_CHECKING:
    from fastapi import FastAPI
    from starlette.types import ASGIApp

    from turnkit.observe.setup import Sdk

Modules = Annotated[
    list[str] | None,
    typer.Option(
        "--module",
        help="A module of your tools as package.module:object, a class or factory is called"
        " (repeatable).",
    ),
]
AllowedHosts = Annotated[
    list[str] | None,
    typer.Option(
        "--allowed-host",
        help="A Host name MCP answers besides 127.0.0.1, localhost, [::1] and --host"
        " (tools.example.com: any port; tools.example.com:8443: that port); repeatable.",
    ),
]
AllowedOrigins = Annotated[
    list[str] | None,
    typer.Option(
        "--allowed-origin",
        help="A browser origin MCP answers besides the loopback ones"
        " (https://app.example.com, or https://app.example.com:* for any port); repeatable.",
    ),
]
LOG_FORMATS = ("text", "json", "off")
"""What ``--log-format`` takes (``observe.use_logs``)."""
UNTRACED = ("/healthz", "/metrics", "/ui/static/")
"""Paths whose requests get no span: health checks, scrapes, the inbox's static files."""
OPTIONS = "TURNKIT_SERVE"
"""The environment variable that carries the command's options to uvicorn's workers."""


def serve(
    module: Modules = None,
    upstream: Upstreams = None,
    entry_points: EntryPoints = False,
    permissions: Permissions = None,
    demo: Annotated[
        bool, typer.Option("--demo", help="Serve the demo catalogue (keys: --user demo).")
    ] = False,
    catalogue: Catalogue = None,
    db: Db = None,
    host: Annotated[str, typer.Option(help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="The port to listen on.", min=1, max=65535)] = 8080,
    workers: Annotated[int, typer.Option(help="Worker processes.", min=1, max=64)] = 1,
    allowed_host: AllowedHosts = None,
    allowed_origin: AllowedOrigins = None,
    docs: Annotated[
        bool,
        typer.Option(
            "--docs",
            help="Serve the interactive API docs at /docs and /redoc (their pages load Swagger"
            " UI and ReDoc from a CDN).",
        ),
    ] = False,
    notify: Annotated[
        bool,
        typer.Option(
            help="Deliver notifications (turnkit notify add) from each worker while serving.",
        ),
    ] = True,
    public_url: Annotated[
        str | None,
        typer.Option(
            help="Where people reach this server, for the links in notifications; default"
            " http://HOST:PORT."
        ),
    ] = None,
    metrics: Annotated[
        bool,
        typer.Option(
            help="Serve GET /metrics for Prometheus, without a key: counts by tool, outcome and"
            " decision, and the holds pending; never arguments or results.",
        ),
    ] = True,
    log_format: Annotated[
        str,
        typer.Option(
            help="Write a line per call and per decision to stderr, with its trace id: text,"
            " json (one JSON object a line) or off. Never arguments unless"
            " OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true.",
            metavar="text|json|off",
        ),
    ] = "off",
) -> None:
    """Serve your tools to API-key callers: REST at /v1, MCP at /mcp, the web inbox at /ui/
    (people approve held writes)."""
    import uvicorn

    from turnkit.server.mcp_hosts import listening_host

    if not demo and not module and not entry_points and not upstream:
        console.print(
            "[red]nothing to serve[/]: give --module package.module:object (your tools, as your"
            " application declares them), --upstream NAME=URL (an MCP server's tools),"
            " --entry-points, or --demo for the demo catalogue"
        )
        raise typer.Exit(USAGE)
    if demo and (module or entry_points or upstream):
        console.print(
            "[red]--demo serves the demo catalogue alone[/]: leave out --module and --upstream"
        )
        raise typer.Exit(USAGE)
    if log_format not in LOG_FORMATS:
        console.print(f"[red]--log-format {escape(log_format)}[/]: give text, json or off")
        raise typer.Exit(USAGE)
    busy = cannot_listen(host, port)
    if busy is not None:
        console.print(f"[red]{escape(busy)}[/]")
        raise typer.Exit(USAGE)
    options: dict[str, Any] = {
        "db": db,
        "modules": module or [],
        "upstreams": upstream or [],
        "entry_points": entry_points,
        "demo": demo,
        "catalogue": catalogue,
        "permissions": permissions,
    }
    listening = listening_host(host)
    hosts = [*([listening] if listening else []), *(allowed_host or [])]
    app_options = {"mcp_allowed_hosts": hosts, "mcp_allowed_origins": allowed_origin or [],
                   "docs": docs, "metrics": metrics}  # fmt: skip
    if notify:  # each worker runs a dispatcher: their claims keep them from sending one twice
        options["notify"] = {"public_url": public_url or f"http://{host}:{port}"}
    checked = session(
        db, module, entry_points, demo, catalogue, "demo", [], [], permissions, upstream
    )
    try:  # the options are good; the settings in force say the hold rule
        settings = checked.executor.settings_now()
    finally:
        checked.close()
    # read, then removed, by each worker:
    os.environ[OPTIONS] = json.dumps(options | {"app": app_options, "log_format": log_format})
    if metrics and workers > 1:  # before the workers start: they import prometheus_client
        from turnkit.observe.prometheus import share_between_processes

        atexit.register(shutil.rmtree, share_between_processes(), ignore_errors=True)
    where, storage = f"http://{host}:{port}", shown(db) if db else None
    console.print(
        f"turnkit serve · REST {where}/v1 · MCP {where}/mcp · inbox {where}/ui/"
        + (f" · docs {where}/docs" if docs else "")
        + (f" · metrics {where}/metrics" if metrics else "")
        + f" · storage {escape(storage or 'the default (.turnkit/turnkit.sqlite)')}"
    )
    if listening is None and not allowed_host:
        console.print(
            f"[yellow]warning:[/] --host {escape(host)} names no host: MCP answers requests"
            " for 127.0.0.1, localhost and [::1] only; give --allowed-host NAME for each name"
            " clients reach this server by"
        )
    if not demo and permissions is None:
        console.print(
            "[yellow]warning:[/] no --permissions: key owners hold no permissions, so tools that"
            " need one are hidden from every key (give your application's provider)"
        )
    console.print(f"hold rule: {escape(hold_rule_line(settings))}")
    telemetry = plan_export()  # each worker sets it up (configure_sdk); told once, here
    if telemetry.asked or telemetry.problem:
        colour = "yellow" if telemetry.problem else "dim"
        console.print(f"[{colour}]telemetry: {escape(telemetry.describe())}[/]")
    command = "turnkit keys create --user USER --scope SCOPE" + (f" --db {storage}" if db else "")
    console.print(f"[dim]callers need a key: {escape(command)}[/]")
    uvicorn.run(
        "turnkit.cli.serve:app_from_environment",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level="warning",
    )


def cannot_listen(host: str, port: int) -> str | None:
    """Why nothing can listen on ``host``:``port`` now (in one line, naming the option to change),
    or None when it can: bound and let go at once, with ``SO_REUSEADDR`` as uvicorn binds, so a
    port another process holds is told before the banner rather than after it."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"--host {host!r} is not an address here ({exc.strerror}): give another --host"
    family, kind, proto, _, address = found[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return (
                    f"port {port} on {host} is in use (another process listens there):"
                    " give another --port, or stop that process"
                )
            return f"cannot listen on {host}:{port} ({exc.strerror}): give another --port or --host"
    return None


def hold_rule_line(settings: Settings) -> str:
    """The hold rule for this server's callers (API keys), as the banner says it (README: "The
    hold rule")."""
    if settings.hold_key_writes:
        return (
            "every write a key makes waits for a person's yes (setting hold_key_writes);"
            " reads run at once"
        )
    return (
        "a key's write waits for a person's yes when its tool's danger says so or a list in it"
        f" is over {settings.confirm_batch_over} items; other writes run at once (every key"
        " write waits with: turnkit settings set hold_key_writes true)"
    )


def app_from_environment() -> ASGIApp:
    """The app of one worker, from the options ``serve`` put in ``TURNKIT_SERVE``."""
    from turnkit.cli.session import open_session
    from turnkit.server import create_app

    given = os.environ.pop(OPTIONS, None)  # not left for the handlers' child processes
    if given is None:
        raise SystemExit(f"{OPTIONS} is not set: start the server with `turnkit serve`")
    sdk = configure_sdk() if plan_export().exports else None  # the banner told a problem
    options: dict[str, Any] = json.loads(given)
    app_options: dict[str, Any] = options.pop("app", {})
    use_logs(options.pop("log_format", "off"))
    notify: dict[str, Any] | None = options.pop("notify", None)
    opened = open_session(user="demo", grants=[], act=[], **options)
    atexit.register(opened.close)
    if notify is not None:
        from turnkit.notify import Dispatcher

        background = Dispatcher(opened.executor.ledger, public_url=notify["public_url"]).start()
        atexit.register(background.stop)  # registered last: stops before the ledger closes
    if opened.demo and opened.granted is not None:  # the demo's one person decides every hold,
        from turnkit.demo import DEMO_USER  # as beside the Studio graph (turnkit.demo.server)
        from turnkit.executor.confirmations import CONFIRM_ANY

        opened.granted.grant(DEMO_USER, CONFIRM_ANY)
    app = create_app(opened.executor, **app_options)
    warm_threads(app)
    if sdk is not None:
        traced(app, sdk)
    settle_heap()
    return app


def warm_threads(app: FastAPI) -> None:
    """Make ``app``'s loop hand each call's blocking work to the worker thread that went idle
    last (``turnkit.server.warm_threads``), from when the app starts."""
    from turnkit.server.warm_threads import use_warm_threads

    entered = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[Any]:
        use_warm_threads()
        async with entered(app) as state:
            yield state

    app.router.lifespan_context = lifespan


def settle_heap() -> None:
    """Take what start-up built (the libraries' modules, the registry, the app) out of the
    garbage collector's generations, after freeing what it left as garbage: a full collection
    under load then walks only what requests made, not every object the imports created (the
    long pauses that made a loaded worker's p99). Each worker does it once, when its app is
    built."""
    gc.collect()
    gc.freeze()


def traced(app: FastAPI, sdk: Sdk) -> None:
    """A server span per request to ``app`` when spans are exported, and what is pending sent
    when the worker stops (its lifespan ends: a worker process may end without ``atexit``)."""
    if sdk.tracer_provider is not None:
        instrument_fastapi(app, excluded_paths=UNTRACED)
    serving = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[Any]:
        try:
            async with serving(app) as state:
                yield state
        finally:
            sdk.flush()

    app.router.lifespan_context = lifespan
