"""``turnkit bench serve``: load a running ``turnkit serve``; report what it answered, per route.

The routes are REST invoke of one tool, ``GET /v1/tools`` and MCP ``tools/call`` of the same
tool; the load is ``cli/load.py``'s (keep-alive connections on one asyncio loop, each client
sending the routes in turn). Before the load, the command checks what a person could have got
wrong and says so in a line (``USAGE``): a URL that is not this machine's (unless
``--allow-remote``), nothing answering there, a key the server refuses, a tool the key may not
use, a write (unless ``--allow-writes``: each call would run it, or hold it for a person), and
one request of each route that is not answered 2xx. An error under load is counted per route,
its first answer shown, and the command ends with ``FAILED``.
"""

from __future__ import annotations

import json
import os
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from turnkit.cli.load import (
    Load,
    LoadError,
    Route,
    RouteLoad,
    Target,
    mcp_call,
    rest_invoke,
    rest_tools,
    run_load,
    said,
)
from turnkit.cli.options import FAILED, HELP_MARKUP, USAGE, HelpGroup, console, period_seconds

app = typer.Typer(
    help="Measure a running server: requests per second and latency, per route.",
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
    cls=HelpGroup,
)

ROUTES = ("invoke", "tools", "mcp")
"""What ``--routes`` takes: REST invoke of the tool, ``GET /v1/tools``, MCP ``tools/call``."""
MAX_SECONDS = 600
"""The longest load a run makes (``--duration``)."""
KEY_HINT = "make one with: turnkit keys create --user USER --scope SCOPE (same --db as the server)"


def _stop(line: str) -> typer.Exit:
    """Say ``line`` (markup escaped) in red; the ``USAGE`` exit to raise."""
    console.print(f"[red]{escape(line)}[/]")
    return typer.Exit(USAGE)


@app.command("serve")
def serve(
    url: Annotated[
        str, typer.Argument(metavar="URL", help="The server, as turnkit serve's banner gives it.")
    ] = "http://127.0.0.1:8080",
    key: Annotated[
        str | None,
        typer.Option(
            metavar="tk_...",
            envvar="TURNKIT_KEY",
            show_envvar=True,
            help="The API key's secret the requests carry (better in the environment: a"
            " command line is visible to other users of the machine).",
        ),
    ] = None,
    tool: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="The tool invoke and tools/call run; default: the first read-only tool the"
            " key may use that takes no input.",
        ),
    ] = None,
    input_: Annotated[
        str, typer.Option("--input", metavar="JSON", help="The tool's input, a JSON object.")
    ] = "{}",
    clients: Annotated[
        int, typer.Option(min=1, max=1000, metavar="N", help="Connections sending at once.")
    ] = 50,
    duration: Annotated[
        str,
        typer.Option(metavar="PERIOD", help="How long the load runs: 10s, 2m (at most 10m)."),
    ] = "10s",
    requests: Annotated[
        int | None,
        typer.Option(
            min=1, metavar="N", help="Stop after this many requests, all routes together."
        ),
    ] = None,
    routes: Annotated[
        str,
        typer.Option(
            metavar="ROUTE,...",
            help="Which routes, comma-separated: invoke (POST /v1/tools/TOOL/invoke), tools"
            " (GET /v1/tools), mcp (tools/call on /mcp).",
        ),
    ] = "invoke,tools,mcp",
    allow_writes: Annotated[
        bool,
        typer.Option(
            "--allow-writes",
            help="Load a tool that writes: each call runs it, or holds it for a person (filling"
            " the inbox). Only on a throwaway ledger.",
        ),
    ] = False,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            help="Load a server on another machine (by default only this machine's: 127.0.0.1,"
            " localhost, [::1]).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="The figures as JSON.")] = False,
) -> None:
    """Load a running turnkit serve and report requests/s and latency per route (p50, p99).

    Each invoke and tools/call is charged and audited like any other call: the key's rate limit
    applies (turnkit settings set rate_limit_units 0 turns it off, on a throwaway ledger).
    """
    target = _target(url, allow_remote)
    seconds = _duration(duration)
    chosen = _routes(routes)
    arguments = _input(input_)
    if arguments and tool is None:
        raise _stop("--input is a tool's input: give --tool NAME too")
    if not key:
        raise _stop(f"give the key: --key tk_... or TURNKIT_KEY=tk_...; {KEY_HINT}")
    headers = {"Authorization": f"Bearer {key}"}
    listed = _tools(url, headers)
    found = None
    if "invoke" in chosen or "mcp" in chosen:
        found = _tool(listed, tool, allow_writes)
    load_routes: list[Route] = []
    for route in chosen:
        if route == "tools":
            load_routes.append(rest_tools(headers))
        elif found is not None and route == "invoke":
            load_routes.append(rest_invoke(found["name"], arguments, headers))
        elif found is not None:
            model_name = found.get("model_name") or found["name"]
            load_routes.append(mcp_call(model_name, arguments, headers))
    _first_answers(url, load_routes)
    try:
        load = run_load(url, load_routes, clients=clients, seconds=seconds, requests=requests)
    except LoadError as exc:
        raise _stop(str(exc)) from None
    name = None if found is None else str(found["name"])
    if as_json:
        typer.echo(json.dumps(_json(target, load, requests, name), indent=2))
    else:
        _show(target, load, requests, name)
    if load.total.errors:
        raise typer.Exit(FAILED)


def _target(url: str, allow_remote: bool) -> Target:
    try:
        target = Target.of(url)
    except ValueError as exc:
        raise _stop(f"{exc}: give the server's URL, e.g. http://127.0.0.1:8080") from None
    if not target.loopback and not allow_remote:
        raise _stop(
            f"{target.host} is not this machine: a load test runs against your own server on"
            " 127.0.0.1, localhost or [::1]; pass --allow-remote to load a server you run"
            " elsewhere"
        )
    return target


def _duration(text: str) -> int:
    """``--duration``: a period (``options.period_seconds``) of at most ``MAX_SECONDS``."""
    seconds = period_seconds(text)
    if seconds is None:
        raise _stop(f"--duration {text!r} is not a period: give a whole number and a unit, e.g."
                    " 10s or 2m")  # fmt: skip
    if seconds > MAX_SECONDS:
        raise _stop(f"--duration {text} is longer than a load test runs: give at most 10m")
    return seconds


def _routes(text: str) -> list[str]:
    chosen = list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [part for part in chosen if part not in ROUTES]
    if unknown or not chosen:
        raise _stop(f"--routes {text!r}: give some of {', '.join(ROUTES)}, comma-separated")
    return chosen


def _input(text: str) -> dict[str, Any]:
    try:
        given = json.loads(text)
    except ValueError:
        given = None
    if not isinstance(given, dict):
        raise _stop(
            f'--input {text!r} is not a JSON object: give e.g. --input \'{{"sku": "A-1"}}\''
        )
    return given


def _tools(url: str, headers: dict[str, str]) -> list[dict[str, Any]]:
    """``GET /v1/tools`` with the key: the tools it may use; a mistake ends the command."""
    import httpx

    try:
        answer = httpx.get(f"{url.rstrip('/')}/v1/tools", headers=headers, timeout=30)
    except httpx.TransportError as exc:
        raise _stop(
            f"nothing answers at {url} ({exc}): start the server (turnkit serve ...) or give"
            " its URL"
        ) from None
    if answer.status_code == 401:
        raise _stop(f"the server refused the key (401: {said(answer.content)}); {KEY_HINT}")
    listed = answer.json() if answer.status_code == 200 and _is_json(answer) else None
    if not isinstance(listed, list):
        raise _stop(
            f"{url} does not answer as turnkit serve does (GET /v1/tools: {answer.status_code}"
            f" {said(answer.content, 120)}); give the URL turnkit serve's banner gives"
        )
    return listed


def _is_json(answer: Any) -> bool:
    return "json" in answer.headers.get("content-type", "")


def _tool(listed: list[dict[str, Any]], name: str | None, allow_writes: bool) -> dict[str, Any]:
    """The tool to load: ``name``, or the first read-only one that takes no input."""
    if name is None:
        reads = [t for t in listed if t.get("annotations", {}).get("read_only")]
        fits = [t for t in reads if not t.get("input_schema", {}).get("required")]
        if not fits:
            raise _stop(
                "this key may use no read-only tool that takes no input: give --tool NAME"
                " --input JSON (GET /v1/tools lists the key's tools)"
            )
        return fits[0]
    found = [t for t in listed if name in (t.get("name"), t.get("model_name"))]
    if not found:
        names = ", ".join(str(t.get("name")) for t in listed[:10]) or "none"
        raise _stop(f"this key may use no tool named {name!r}; it may use: {names}")
    if not found[0].get("annotations", {}).get("read_only") and not allow_writes:
        raise _stop(
            f"{found[0]['name']} writes: every call would run it, or hold it for a person and"
            " fill the inbox; load a read-only tool, or pass --allow-writes on a throwaway"
            " ledger"
        )
    return found[0]


def _first_answers(url: str, routes: list[Route]) -> None:
    """One request of each route, before the load: one that fails is told in a line."""
    import httpx

    base = url.rstrip("/")
    with httpx.Client(timeout=30) as client:
        for route in routes:
            answer = client.request(route.method, base + route.path, headers=dict(route.headers),
                                    content=route.body or None)  # fmt: skip
            if not route.failed(answer.status_code, answer.content):
                continue
            status, text = answer.status_code, said(answer.content)
            error = f"HTTP {status}: {text}"
            how = " with an error" if status < 300 else ""  # MCP: a result with isError
            told = f"{route.label} answered {status}{how}: {text}"
            if _rate_limited(error):
                told += f"; {RATE_HINT}"
            elif route.name != "tools" and status in (200, 400, 404, 422):
                told += "; check --tool and --input (GET /v1/tools/NAME shows its input schema)"
            raise _stop(told)


RATE_HINT = (
    "the key's rate limit refused calls (setting rate_limit_units per rate_limit_window): on a"
    " throwaway ledger, turn it off with turnkit settings set rate_limit_units 0"
)


def _rate_limited(error: str | None) -> bool:
    """Whether an error is the rate limit's: a 429 over REST, a result saying so over MCP."""
    return error is not None and (error.startswith("HTTP 429") or "rate limit" in error.lower())


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"


def _row(table: Table, figures: RouteLoad, *, style: str = "") -> None:
    table.add_row(figures.name, str(figures.requests), str(figures.errors),
                  f"{figures.rps:.0f}", _ms(figures.percentile(0.5)),
                  _ms(figures.percentile(0.99)),
                  _ms(figures.latencies[-1] if figures.latencies else None),
                  style=style)  # fmt: skip


def _show(target: Target, load: Load, requests: int | None, tool: str | None) -> None:
    bound = f" or {requests} requests" if requests else ""
    what = f" · tool {tool}" if tool else ""
    where = escape(target.netloc + target.prefix)
    console.print(f"turnkit bench serve · {where} · {load.clients} clients ·"
                  f" {load.seconds:.1f} s{bound}{escape(what)}")  # fmt: skip
    table = Table()
    table.add_column("route")
    for column in ("requests", "errors", "req/s", "p50 ms", "p99 ms", "max ms"):
        table.add_column(column, justify="right", no_wrap=True)
    for figures in load.routes:
        _row(table, figures, style="red" if figures.errors else "")
    if len(load.routes) > 1:
        _row(table, load.total, style="bold")
    console.print(table)
    for figures in load.routes:
        if figures.first_error:
            console.print(
                f"[red]{figures.errors} error(s) on {escape(figures.label)}; the first:[/]"
                f" {escape(figures.first_error)}"
            )
    if any(_rate_limited(f.first_error) for f in load.routes):
        console.print(f"[yellow]{escape(RATE_HINT)}[/]")
    console.print(f"[dim]{escape(_machine(load))}[/]")


def _machine(load: Load) -> str:
    share = load.cpu_seconds / load.seconds if load.seconds else 0.0
    return (
        f"this machine: {os.cpu_count() or 1} CPU(s), shared by the server and the load generator"
        f" (which used {share:.2f} of one): on a machine of its own the server answers more."
        " Compare --workers 1, 2, ... under as many --clients as you expect callers at once."
    )


def _json(target: Target, load: Load, requests: int | None, tool: str | None) -> dict[str, Any]:
    return {
        "url": f"http://{target.netloc}{target.prefix}",
        "tool": tool,
        "clients": load.clients,
        "seconds": round(load.seconds, 3),
        "requests_limit": requests,
        "cpus": os.cpu_count(),
        "generator_cpu": round(load.cpu_seconds / load.seconds, 3) if load.seconds else None,
        "routes": [figures.as_dict() for figures in load.routes],
        "total": load.total.as_dict(),
    }
