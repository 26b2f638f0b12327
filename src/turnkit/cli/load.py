"""A load generator for a running server: keep-alive HTTP/1.1 connections on one asyncio loop.

``run_load(url, routes, clients=50, seconds=10)`` opens ``clients`` connections to ``url``; each
sends the ``routes`` in turn (client *i* starts at route *i*), one request at a time, until the
time or the request budget is spent, and the answers are counted per route: requests, errors,
latencies (``Load``). Every client first sends each route once, untimed (its connection opened,
the server warmed); when all have, the load runs ``warmup`` seconds uncounted (none by default),
then the clock starts. An answer is an error when its route says
so (``Route.failed``: by default any status but 2xx; on MCP also a JSON-RPC error or a result
with ``isError``); a lost connection is an error too, and the client opens another (or stops,
when nothing listens any more).

Why no HTTP client library: 50 clients on ``httpx``'s async pool reached 100-250 requests/s on a
2-core machine against an endpoint that answers ~5,400/s to these few lines (bench/server.py,
``Connection``): the generator must not be what is measured. It still shares the machine with
the server it drives; ``Load.cpu_seconds`` says how much of a core it used.

``turnkit bench serve`` (``cli/bench.py``) is the command around it; the routes of
``turnkit serve`` are built by ``rest_invoke``, ``rest_tools`` and ``mcp_call``.

Example:
    >>> route = rest_tools({"Authorization": "Bearer tk_..."})
    >>> route.name, route.method, route.path
    ('tools', 'GET', '/v1/tools')
    >>> load = run_load("http://127.0.0.1:8080", [route], clients=5, seconds=2)  # doctest: +SKIP
    >>> load.total.rps, load.total.percentile(0.99)  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "MCP_PROTOCOL",
    "Connection",
    "Load",
    "LoadError",
    "Route",
    "RouteLoad",
    "Target",
    "arun_load",
    "mcp_call",
    "rest_invoke",
    "rest_tools",
    "run_load",
    "said",
]

MCP_PROTOCOL = "2026-07-28"
"""The MCP protocol version the ``tools/call`` requests speak (that of ``turnkit serve``'s SDK)."""
GRACE = 10.0
"""Seconds the requests still in flight when the time is up may take to answer; one that does
not is counted as an error and its connection closed."""
WARMUP_TIMEOUT = 30.0
"""Seconds the untimed first round (every client sends each route once) may take."""
SHOWN = 200
"""Characters of what an error's body says kept in ``RouteLoad.first_error`` (``said``)."""


class LoadError(Exception):
    """The load could not start: the server does not answer, or the warm-up did not end."""


def _http_error(status: int, body: bytes) -> bool:
    return not 200 <= status < 300


def _mcp_error(status: int, body: bytes) -> bool:
    """Any status but 2xx, a JSON-RPC error, or a ``tools/call`` result with ``isError``."""
    if not 200 <= status < 300:
        return True
    try:
        answer = json.loads(body)
    except ValueError:
        return True
    if not isinstance(answer, dict) or "error" in answer:
        return True
    result = answer.get("result")
    return not isinstance(result, dict) or result.get("isError") is True


@dataclass(frozen=True, kw_only=True, slots=True)
class Route:
    """One request the clients send again and again."""

    name: str
    """A short name for the tables (``invoke``, ``tools``, ``mcp``); unique in a load."""
    label: str
    """What the request is, for a person (``POST /v1/tools/shop.list/invoke``)."""
    method: str
    path: str
    """The path below the URL given to ``run_load`` (which may carry a prefix of its own)."""
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    failed: Callable[[int, bytes], bool] = _http_error
    """Whether an answer (status, body) counts as an error; by default any status but 2xx."""

    def request(self, target: Target) -> bytes:
        """The bytes of this request to ``target``, sent as they are on every call."""
        lines = [f"{self.method} {target.prefix}{self.path} HTTP/1.1", f"Host: {target.netloc}",
                 f"Content-Length: {len(self.body)}",
                 *(f"{name}: {value}" for name, value in self.headers.items())]  # fmt: skip
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + self.body


def rest_invoke(tool: str, arguments: Mapping[str, Any], headers: Mapping[str, str]) -> Route:
    """``POST /v1/tools/{tool}/invoke`` with ``{"input": arguments}``."""
    path = f"/v1/tools/{tool}/invoke"
    return Route(name="invoke", label=f"POST {path}", method="POST", path=path,
                 headers={**headers, "Content-Type": "application/json"},
                 body=json.dumps({"input": arguments}).encode())  # fmt: skip


def rest_tools(headers: Mapping[str, str]) -> Route:
    """``GET /v1/tools``: the tools the key may use now."""
    return Route(name="tools", label="GET /v1/tools", method="GET", path="/v1/tools",
                 headers=dict(headers))  # fmt: skip


def mcp_call(model_name: str, arguments: Mapping[str, Any], headers: Mapping[str, str],
             path: str = "/mcp") -> Route:  # fmt: skip
    """MCP ``tools/call`` of ``model_name`` at ``path``, as a stateless Streamable HTTP client of
    protocol ``MCP_PROTOCOL`` sends it: one POST with the JSON-RPC request, its ``_meta``
    envelope and the routing headers (``Mcp-Method``, ``Mcp-Name``), JSON answers accepted."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MCP_PROTOCOL,
        "io.modelcontextprotocol/clientInfo": {"name": "turnkit-bench", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"name": model_name, "arguments": dict(arguments), "_meta": meta}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    sent = {**headers, "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MCP_PROTOCOL,
            "Mcp-Method": "tools/call", "Mcp-Name": model_name}  # fmt: skip
    return Route(name="mcp", label=f"MCP tools/call {model_name}", method="POST", path=path,
                 headers=sent, body=json.dumps(body).encode(), failed=_mcp_error)  # fmt: skip


@dataclass(frozen=True, kw_only=True, slots=True)
class Target:
    """Where the requests go: ``http://HOST:PORT/PREFIX``."""

    host: str
    port: int
    prefix: str = ""
    """A path the app is mounted under (``/tools``), or empty."""

    @classmethod
    def of(cls, url: str) -> Target:
        """The target of a plain ``http://`` URL; ``ValueError`` saying what is wrong otherwise.

        Examples:
            >>> Target.of("http://127.0.0.1:8080/tools/")
            Target(host='127.0.0.1', port=8080, prefix='/tools')
            >>> Target.of("http://[::1]:9000").netloc, Target.of("http://localhost").port
            ('[::1]:9000', 80)
        """
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"{url!r} is not an http://HOST:PORT URL")
        try:
            port = parts.port or 80
        except ValueError:
            raise ValueError(f"{url!r} has no valid port") from None
        return cls(host=parts.hostname, port=port, prefix=parts.path.rstrip("/"))

    @property
    def netloc(self) -> str:
        """``HOST:PORT`` as the ``Host`` header gives it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def loopback(self) -> bool:
        """Whether the host is this machine: ``localhost`` or a loopback address.

        Examples:
            >>> [Target.of(f"http://{h}:1").loopback for h in ("127.0.0.2", "[::1]", "10.0.0.1")]
            [True, True, False]
        """
        if self.host.lower() == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


class Connection:
    """One keep-alive HTTP/1.1 connection that sends requests one at a time and reads each
    whole answer (``Content-Length``, chunked, or to the end when the server closes)."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> Connection:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        """Connect (``OSError`` when nothing answers)."""
        self.reader, self.writer = await asyncio.open_connection(self.target.host, self.target.port)

    async def close(self) -> None:
        writer, self.reader, self.writer = self.writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):  # already gone: closing is all that was asked
                await writer.wait_closed()

    async def send(self, request: bytes) -> tuple[int, bytes]:
        """Send ``request`` and read its answer: the status and the body. A connection the
        server ends is opened again for the next request; one lost mid-answer raises
        ``OSError`` (``ConnectionError``) or ``asyncio.IncompleteReadError``."""
        if self.writer is None or self.reader is None:
            await self.open()
        reader, writer = self.reader, self.writer
        assert reader is not None
        assert writer is not None
        writer.write(request)
        status_line = await reader.readline()
        if not status_line:
            await self.close()
            raise ConnectionResetError("the server closed the connection")
        status = int(status_line.split(b" ", 2)[1])
        length, chunked, closing = -1, False, False
        while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                closing = b"close" in value.lower()
        if chunked:
            body = await _chunks(reader)
        elif length >= 0:
            body = await reader.readexactly(length)
        else:
            body, closing = await reader.read(), True
        if closing:
            await self.close()
        return status, body


async def _chunks(reader: asyncio.StreamReader) -> bytes:
    parts = []
    while size := int((await reader.readline()).split(b";")[0], 16):
        parts.append(await reader.readexactly(size))
        await reader.readline()  # the CRLF after a chunk
    while (await reader.readline()) not in (b"\r\n", b"\n", b""):
        pass  # trailers
    return b"".join(parts)


@dataclass(frozen=True, kw_only=True, slots=True)
class RouteLoad:
    """What one route's requests got."""

    name: str
    label: str
    requests: int
    """Requests answered, or failed, in the timed window."""
    errors: int
    """Of those, the ones answered with an error (``Route.failed``) or not answered at all."""
    seconds: float
    """The timed window's length."""
    latencies: tuple[float, ...]
    """Seconds from sending to the whole answer of each request answered, sorted."""
    first_error: str | None = None
    """The first error, for a person: ``HTTP 401: {...}`` (its body cut) or what went wrong."""

    @property
    def rps(self) -> float:
        """Requests per second in the timed window."""
        return self.requests / self.seconds if self.seconds > 0 else 0.0

    def percentile(self, share: float) -> float | None:
        """The latency below which ``share`` of the answers lie (nearest rank); None when none.

        Examples:
            >>> load = RouteLoad(name="x", label="x", requests=4, errors=0, seconds=1,
            ...                  latencies=(0.001, 0.002, 0.003, 0.010))
            >>> load.percentile(0.5), load.percentile(0.99), load.rps
            (0.002, 0.01, 4.0)
        """
        if not self.latencies:
            return None
        rank = round(share * len(self.latencies)) - 1
        return self.latencies[min(len(self.latencies) - 1, max(0, rank))]

    def as_dict(self) -> dict[str, Any]:
        """The figures as JSON: latencies in milliseconds."""
        ms = {f"{name}_ms": None if s is None else round(s * 1e3, 3)
              for name, s in (("p50", self.percentile(0.5)), ("p99", self.percentile(0.99)),
                              ("max", self.latencies[-1] if self.latencies else None))}  # fmt: skip
        return {"route": self.name, "label": self.label, "requests": self.requests,
                "errors": self.errors, "rps": round(self.rps, 1), **ms,
                "first_error": self.first_error}  # fmt: skip


@dataclass(frozen=True, kw_only=True, slots=True)
class Load:
    """What a load got, per route."""

    routes: tuple[RouteLoad, ...]
    clients: int
    seconds: float
    """The timed window's length (the time asked, or less when the request budget ran out,
    plus what the last answers took)."""
    cpu_seconds: float
    """CPU time the generator's process used in the timed window: near ``seconds``, it used a
    whole core and may have been what limited the load."""

    @property
    def total(self) -> RouteLoad:
        """Every route's requests together."""
        errors = [r.first_error for r in self.routes if r.first_error]
        return RouteLoad(
            name="total",
            label="total",
            requests=sum(r.requests for r in self.routes),
            errors=sum(r.errors for r in self.routes),
            seconds=self.seconds,
            latencies=tuple(sorted(s for r in self.routes for s in r.latencies)),
            first_error=errors[0] if errors else None,
        )


class _Tally:
    """One route's counts while the load runs."""

    def __init__(self) -> None:
        self.requests = 0
        self.latencies: list[float] = []
        self.errors = 0
        self.first_error: str | None = None

    def error(self, what: str) -> None:
        self.errors += 1
        if self.first_error is None:
            self.first_error = what

    def figures(self, route: Route, seconds: float) -> RouteLoad:
        return RouteLoad(name=route.name, label=route.label, requests=self.requests,
                         errors=self.errors, seconds=seconds,
                         latencies=tuple(sorted(self.latencies)),
                         first_error=self.first_error)  # fmt: skip


def said(body: bytes, limit: int = 300) -> str:
    """What an answer's body says, in a line of at most ``limit`` characters: a problem's
    ``detail`` (RFC 9457), a JSON-RPC error's ``message``, a tool result's first text, or the
    body itself.

    Examples:
        >>> said(b'{"title": "Too Many Requests", "detail": "rate limit reached"}')
        'rate limit reached'
        >>> said(b'{"jsonrpc": "2.0", "result": {"content": [{"text": "no such tool"}]}}')
        'no such tool'
    """
    text = " ".join(body.decode("utf-8", "replace").split())
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
    if isinstance(answer, dict):
        error, result = answer.get("error"), answer.get("result")
        if isinstance(answer.get("detail"), str):
            text = answer["detail"]
        elif isinstance(error, dict) and isinstance(error.get("message"), str):
            text = error["message"]
        elif isinstance(result, dict) and isinstance(result.get("content"), list):
            first = result["content"][0] if result["content"] else None
            if isinstance(first, dict) and isinstance(first.get("text"), str):
                text = " ".join(first["text"].split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def run_load(url: str, routes: Sequence[Route], *, clients: int = 50, seconds: float = 10.0,
             requests: int | None = None, warmup: float = 0.0) -> Load:  # fmt: skip
    """Drive ``url`` with ``clients`` connections sending ``routes`` for ``seconds`` or until
    ``requests`` were sent (the module's docstring says how), after ``warmup`` seconds of the
    same load that are not counted; ``LoadError`` when it cannot start. Runs its own event
    loop: from async code, ``await arun_load(...)``."""
    return asyncio.run(arun_load(url, routes, clients=clients, seconds=seconds,
                                 requests=requests, warmup=warmup))  # fmt: skip


async def arun_load(url: str, routes: Sequence[Route], *, clients: int = 50,
                    seconds: float = 10.0, requests: int | None = None,
                    warmup: float = 0.0) -> Load:  # fmt: skip
    """``run_load`` on the running event loop."""
    if not routes or clients < 1 or seconds <= 0 or (requests is not None and requests < 1):
        raise ValueError("give at least one route, one client, a time and a request budget > 0")
    if warmup < 0:
        raise ValueError("warmup is a number of seconds, 0 or more")
    target = Target.of(url)
    wire = [route.request(target) for route in routes]
    tallies = [_Tally() for _ in routes]
    connections = [Connection(target) for _ in range(clients)]
    budget = [math.inf if requests is None else requests]
    waiting: dict[int, int] = {}  # client -> the route whose answer it waits for

    async def warm(connection: Connection) -> None:
        for request in wire:
            await connection.send(request)

    async def client(index: int, begin: float, until: float) -> None:
        connection, turn = connections[index], index
        while budget[0] > 0 and (sent := time.perf_counter()) < until:
            at, turn = turn % len(wire), turn + 1
            if sent < begin:  # the warm-up: sent, not counted
                tally = _Tally()
            else:
                tally = tallies[at]
                budget[0] -= 1
            waiting[index] = at
            try:
                status, body = await connection.send(wire[at])
            except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
                del waiting[index]
                tally.requests += 1
                tally.error(f"connection: {type(exc).__name__}: {exc}"[:SHOWN])
                await connection.close()
                try:
                    await connection.open()
                except OSError:
                    return  # nothing listens any more: this client stops, its error counted
                continue
            del waiting[index]
            tally.requests += 1
            tally.latencies.append(time.perf_counter() - sent)
            if routes[at].failed(status, body):
                tally.error(f"HTTP {status}: {said(body, SHOWN)}")

    try:
        await _warm_up(target, [asyncio.create_task(warm(c)) for c in connections], len(wire))
        begin = time.perf_counter() + warmup
        tasks = [asyncio.create_task(client(i, begin, begin + seconds)) for i in range(clients)]
        if warmup:
            await asyncio.sleep(warmup)
        cpu = time.process_time()
        _, late = await asyncio.wait(tasks, timeout=begin + seconds + GRACE - time.perf_counter())
        for at in waiting.values():  # no answer in time: counted, then given up
            tallies[at].requests += 1
            tallies[at].error(f"no answer within {GRACE:g} s after the end")
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late)
        elapsed = time.perf_counter() - begin
        cpu = time.process_time() - cpu
    finally:
        await asyncio.gather(*(c.close() for c in connections))
    found = tuple(
        tally.figures(route, elapsed) for route, tally in zip(routes, tallies, strict=True)
    )
    return Load(routes=found, clients=clients, seconds=elapsed, cpu_seconds=cpu)


async def _warm_up(target: Target, tasks: list[asyncio.Task[None]], routes: int) -> None:
    """Wait for the untimed first round; ``LoadError`` saying why when it fails."""
    done, pending = await asyncio.wait(
        tasks, timeout=WARMUP_TIMEOUT, return_when=asyncio.FIRST_EXCEPTION
    )
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending)
    failures = [task.exception() for task in done if task.exception() is not None]
    if isinstance(failures[0] if failures else None, OSError):
        raise LoadError(f"cannot reach {target.netloc}: {failures[0]}")
    if failures:
        raise LoadError(f"{target.netloc} does not answer HTTP/1.1 as expected: {failures[0]!r}")
    if pending:
        raise LoadError(
            f"{target.netloc} did not answer the first {len(tasks) * routes} requests within"
            f" {WARMUP_TIMEOUT:g} s"
        )
