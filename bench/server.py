"""The price of serving over HTTP: turnkit's REST and MCP servers against ungoverned peers.

Every server runs in a process of its own under uvicorn (the load runs in this one), on
127.0.0.1, and serves the same read (``bench.get_item``: ``_common.get_item``):

- **REST invoke**: ``turnkit serve --workers 1`` (``POST /v1/tools/bench.get_item/invoke`` with
  an API key: key lookup, rights with a permission provider, validation, the ledger's usage
  charge and audit row, on a SQLite ledger) against a **bare FastAPI endpoint** that calls the
  same handler directly (``bare_app``), both called by one keep-alive ``httpx`` client, one call
  at a time. Target: turnkit ≤ 1.3x the bare endpoint's time per call. The same pair is also
  timed on one raw keep-alive connection each (``Connection``, no client library): the
  server's own price, without httpx's ~0.8 ms per request here (no target).
- **The floor** (``ledger_app``): a sync FastAPI endpoint doing only the ledger work the issue
  asks of every call (key lookup, rate-limit charge, audit row; on its own SQLite ledger) around
  the same handler, no governance. Its ratio to the bare endpoint is the least any server that
  keeps those promises pays; "turnkit ÷ floor" is the price of the governance itself.
- **MCP ``tools/call``**: turnkit's ``/mcp`` (the same ``turnkit serve`` process) against the
  same tool served by the SDK's own ``MCPServer`` without governance (``mcp_peer_app``, in the
  same stateless JSON mode as turnkit's), both called by the SDK's ``Client`` over Streamable
  HTTP, one call at a time. Target: ≤ 1.3x.
- **50 concurrent clients** (REST, 50 raw keep-alive connections on one asyncio loop: httpx
  cannot drive this load, see ``Connection``): p50 and p99 latency of turnkit and of the bare
  endpoint (ratio: turnkit ÷ bare; no target).
- **Workers**: requests/s of ``turnkit serve --workers 1`` and ``--workers 3`` on one ledger
  (SQLite, and PostgreSQL when ``TURNKIT_BENCH_POSTGRES_URL`` or ``TURNKIT_TEST_POSTGRES_URL``
  is set) under the same 50 clients (ratio: 3 workers ÷ 1; no target: on a 2-core machine the
  load generator shares the cores with the workers).

The sequential rows are the median of interleaved batches (the contenders' batches alternate,
so a burst of load on the machine hits them alike). The key's rate limit is raised in the
ledger (``rate_limit_units``), so no call is refused; the charge is still made and stored.

    .venv/bin/python bench/server.py [--quick]
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, ExitStack, contextmanager
from pathlib import Path
from typing import Any

try:
    from bench import _common
except ModuleNotFoundError:  # run as a script: bench/ is sys.path[0], the repository is not
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench import _common

import httpx
from fastapi import FastAPI, HTTPException, Request
from pydantic import BaseModel

from turnkit import open_ledger

SCENARIO = "server"
ROOT = Path(__file__).resolve().parent.parent
TOOL, MODEL_NAME = "bench.get_item", _common.READ_TOOL
BODY = {"input": {"sku": "TEA-0001"}}
TARGET = 1.3
"""turnkit's time per call over the peer's, REST and MCP alike."""

BATCH, BATCHES, WARMUP = 100, 8, 200
QUICK_BATCH, QUICK_BATCHES, QUICK_WARMUP = 40, 4, 50
CLIENTS = 50
PER_CLIENT, QUICK_PER_CLIENT = 40, 12
"""Requests each of the 50 concurrent clients sends (after one warm-up request each)."""
LOAD_SECONDS, QUICK_LOAD_SECONDS = 6.0, 2.0
"""How long the 50 clients load ``turnkit serve`` for each worker count."""
START_TIMEOUT = 60.0


# --- what the server processes run -----------------------------------------------------------


def admin_module() -> _common.BenchModule:
    """``turnkit serve --module bench.server:admin_module``: the tools behind a scope and a
    permission (what a key holder calls)."""
    return _common.BenchModule(admin=True)


class InvokeBody(BaseModel):
    """The bare endpoint's body: the same shape as turnkit's invoke."""

    input: dict[str, Any]


def bare_app() -> FastAPI:
    """The peer of REST invoke: FastAPI calling the tool's handler, nothing else."""
    app = FastAPI()
    handler = admin_module().api_tools()[0].handler

    @app.post("/v1/tools/{name}/invoke")
    async def invoke(name: str, body: InvokeBody) -> dict[str, Any]:
        return {"executed": True, "status": "ok", "result": handler(body.input, None)}

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


LEDGER_PEER = "TURNKIT_BENCH_LEDGER_PEER"
"""The environment variable naming the floor peer's SQLite ledger."""


def ledger_app() -> FastAPI:
    """The floor: the ledger work the issue asks of every REST call, without governance.

    A sync FastAPI endpoint (run in FastAPI's thread pool, as FastAPI runs blocking code) that
    looks the bearer key up, charges the rate limit, calls the handler and writes the audit row,
    on its own SQLite ledger (``TURNKIT_BENCH_LEDGER_PEER``): what turnkit cannot skip. No
    rights, validation, idempotency or settings: what is left between it and turnkit is those.
    """
    ledger = open_ledger(os.environ[LEDGER_PEER])
    app = FastAPI()
    handler = admin_module().api_tools()[0].handler

    @app.post("/v1/tools/{name}/invoke")
    def invoke(name: str, body: InvokeBody, request: Request) -> dict[str, Any]:
        secret = request.headers.get("authorization", "").removeprefix("Bearer ")
        key = ledger.keys.by_secret(secret)
        if key is None:
            raise HTTPException(401)
        started = time.time()
        ledger.charge(key.caller.identity, int(started // 60), 1, 1_000_000_000)
        result = handler(body.input, None)
        ledger.audit(at=started, caller=key.caller.identity, tool=name, status="ok", code=None,
                     duration_ms=(time.time() - started) * 1000)  # fmt: skip
        return {"executed": True, "status": "ok", "result": result}

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


def mcp_peer_app() -> Any:
    """The peer of MCP ``tools/call``: the SDK's ``MCPServer`` with the same function, no
    governance, stateless JSON responses (as turnkit's ``/mcp``)."""
    from mcp.server import MCPServer

    server = MCPServer("bench", log_level="WARNING")
    server.tool(name=MODEL_NAME, description=_common.get_item.__doc__)(_common.get_item)
    return server.streamable_http_app(json_response=True, stateless_http=True)


# --- starting servers --------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def serving(
    command: list[str], ready: str, env: dict[str, str] | None = None, *, quiet: bool = False
) -> Iterator[str]:
    """``command`` (given ``{port}``) run from the repository root with ``env`` added to this
    process's environment; its base URL once ``ready`` (a path) answers; stopped on exit.
    ``quiet``: its stderr (a server's log lines) is dropped too."""
    port = _free_port()
    env = os.environ | {"PYTHONPATH": str(ROOT)} | (env or {})
    argv = [part.format(port=port) for part in command]
    stderr = subprocess.DEVNULL if quiet else None
    process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{argv} stopped with {process.returncode}")
            try:
                if httpx.get(url + ready, timeout=1).status_code < 500:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{argv} did not answer within {START_TIMEOUT:g} s")
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def uvicorn_command(factory: str) -> list[str]:
    """uvicorn serving ``factory`` in one process, as ``turnkit serve`` runs its app."""
    return [sys.executable, "-m", "uvicorn", "--factory", factory, "--host", "127.0.0.1",
            "--port", "{port}", "--log-level", "warning"]  # fmt: skip


def turnkit_command(db: str, workers: int) -> list[str]:
    """``turnkit serve`` over the admin ``bench`` module and the benchmarks' permissions."""
    script = shutil.which("turnkit", path=str(Path(sys.executable).parent)) or "turnkit"
    return [script, "serve", "--module", "bench.server:admin_module", "--permissions",
            "bench._common:permissions", "--db", db, "--port", "{port}",
            "--workers", str(workers)]  # fmt: skip


def prepared(db: str) -> str:
    """Make ``db`` a ledger whose rate limit no run reaches; a reader key's secret for u_1."""
    ledger = open_ledger(db)
    try:
        ledger.set_setting("rate_limit_units", 1_000_000_000)
        _, secret = ledger.keys.create("u_1", {"bench.items:read"})
    finally:
        ledger.close()
    return secret


# --- measuring ---------------------------------------------------------------------------------

Call = Callable[[], Any]


def interleaved(calls: dict[str, Call], batch: int, batches: int, warmup: int) -> dict[str, float]:
    """Seconds per call of each contender: the median over batches that alternate."""
    for call in calls.values():
        for _ in range(warmup):
            call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(batches):
        for name, call in calls.items():
            start = time.perf_counter()
            for _ in range(batch):
                call()
            times[name].append((time.perf_counter() - start) / batch)
    return {name: _common.median(values) for name, values in times.items()}


async def ainterleaved(
    calls: dict[str, Callable[[], Awaitable[Any]]], batch: int, batches: int, warmup: int
) -> dict[str, float]:
    """``interleaved`` for coroutines."""
    for call in calls.values():
        for _ in range(warmup):
            await call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(batches):
        for name, call in calls.items():
            start = time.perf_counter()
            for _ in range(batch):
                await call()
            times[name].append((time.perf_counter() - start) / batch)
    return {name: _common.median(values) for name, values in times.items()}


def rest_call(client: httpx.Client) -> Call:
    """One invoke of the read; anything but the tool's answer stops the benchmark."""

    def call() -> None:
        answer = client.post(f"/v1/tools/{TOOL}/invoke", json=BODY)
        if answer.status_code != 200 or answer.json()["result"]["sku"] != "TEA-0001":
            raise RuntimeError(f"unexpected answer {answer.status_code}: {answer.text[:300]}")

    return call


async def mcp_seconds(turnkit: str, peer: str, secret: str, quick: bool) -> dict[str, float]:
    """Seconds per ``tools/call`` through the SDK's client, turnkit's and the peer's."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with AsyncExitStack() as stack:
        calls = {}
        for name, url, headers in (
            ("turnkit", turnkit, {"Authorization": f"Bearer {secret}"}),
            ("MCPServer", peer, {}),
        ):
            http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers))
            client = await stack.enter_async_context(
                Client(streamable_http_client(url, http_client=http))
            )
            calls[name] = _mcp_call(client, name)
        batch, batches, warmup = _sizes(quick)
        return await ainterleaved(calls, batch, batches, warmup)


def _mcp_call(client: Any, name: str) -> Callable[[], Awaitable[None]]:
    async def call() -> None:
        result = await client.call_tool(MODEL_NAME, {"sku": "TEA-0001"})
        if result.is_error or "Green tea" not in str(result.content):
            raise RuntimeError(f"{name}: unexpected tools/call result {result!r:.300}")

    return call


class Connection:
    """One keep-alive HTTP/1.1 connection that sends the same invoke again and again.

    The load generator of the concurrent rows. Measured here: 50 clients on ``httpx``'s async
    pool (one pool, or one client each) reached 100-250 req/s against the bare endpoint, which
    answers ~5,400 req/s to these few lines; the load must not be what is measured.
    """

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.host, port = url.removeprefix("http://").split(":")
        self.port = int(port)
        body = json.dumps(BODY).encode()
        lines = [f"POST /v1/tools/{TOOL}/invoke HTTP/1.1", f"Host: {self.host}",
                 "Content-Type: application/json", f"Content-Length: {len(body)}",
                 *(f"{name}: {value}" for name, value in headers.items())]  # fmt: skip
        self.request = ("\r\n".join(lines) + "\r\n\r\n").encode() + body

    async def __aenter__(self) -> Connection:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.writer.close()
        await self.writer.wait_closed()

    async def invoke(self) -> None:
        """Send the invoke and read the whole answer; anything but a 200 stops the benchmark."""
        self.writer.write(self.request)
        status = await self.reader.readline()
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        answer = await self.reader.readexactly(length)
        if status.split(b" ")[1:2] != [b"200"]:
            raise RuntimeError(f"unexpected answer {status!r}: {answer[:300]!r}")


async def concurrent_latencies(url: str, headers: dict[str, str], per_client: int) -> list[float]:
    """Each of ``CLIENTS`` connections sends ``per_client`` invokes one after another, all at
    once (after one warm-up invoke each); the latency of every request, in seconds."""
    found: list[float] = []

    async def one_client() -> None:
        async with Connection(url, headers) as connection:
            await connection.invoke()
            for _ in range(per_client):
                start = time.perf_counter()
                await connection.invoke()
                found.append(time.perf_counter() - start)

    await asyncio.gather(*(one_client() for _ in range(CLIENTS)))
    return found


async def requests_per_second(url: str, headers: dict[str, str], seconds: float) -> float:
    """Invokes answered per second while ``CLIENTS`` connections send them for ``seconds``
    (after a warm-up of a second or less)."""
    done = 0
    warm = time.perf_counter() + min(1.0, seconds / 2)
    start, until = warm, warm + seconds

    async def one_client() -> None:
        nonlocal done
        async with Connection(url, headers) as connection:
            while (now := time.perf_counter()) < until:
                await connection.invoke()
                done += now >= start

    await asyncio.gather(*(one_client() for _ in range(CLIENTS)))
    return done / (time.perf_counter() - start)


async def sequential_seconds(urls: dict[str, str], headers: dict[str, dict[str, str]],
                             quick: bool) -> dict[str, float]:  # fmt: skip
    """Seconds per invoke, one at a time on one raw connection each (the server's own price,
    without an HTTP client library's)."""
    async with AsyncExitStack() as stack:
        calls = {}
        for name, url in urls.items():
            connection = await stack.enter_async_context(Connection(url, headers[name]))
            calls[name] = connection.invoke
        return await ainterleaved(calls, *_sizes(quick))


def percentile(values: list[float], share: float) -> float:
    """The value below which ``share`` of ``values`` lie (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def _sizes(quick: bool) -> tuple[int, int, int]:
    return (QUICK_BATCH, QUICK_BATCHES, QUICK_WARMUP) if quick else (BATCH, BATCHES, WARMUP)


# --- the scenario ------------------------------------------------------------------------------


def _target(ratio: float) -> dict[str, Any]:
    return {"ratio": ratio, "target": f"<= {TARGET:g}x", "met": ratio <= TARGET}


def calls_rows(quick: bool, folder: Path) -> list[dict[str, Any]]:
    """REST and MCP, one call at a time, and 50 concurrent REST clients: turnkit vs peers."""
    db = str(folder / "ledger.sqlite")
    secret = prepared(db)
    bearer = {"Authorization": f"Bearer {secret}"}
    rows = []
    with ExitStack() as stack:
        turnkit = stack.enter_context(serving(turnkit_command(db, 1), "/healthz"))
        bare = stack.enter_context(serving(uvicorn_command("bench.server:bare_app"), "/healthz"))
        floor_db = str(folder / "floor.sqlite")
        floor_bearer = {"Authorization": f"Bearer {prepared(floor_db)}"}
        floor = stack.enter_context(
            serving(uvicorn_command("bench.server:ledger_app"), "/healthz", {LEDGER_PEER: floor_db})
        )
        peer = stack.enter_context(
            serving(uvicorn_command("bench.server:mcp_peer_app"), "/not-served")
        )
        ours = stack.enter_context(httpx.Client(base_url=turnkit, headers=bearer, timeout=30))
        theirs = stack.enter_context(httpx.Client(base_url=bare, timeout=30))
        floors = stack.enter_context(httpx.Client(base_url=floor, headers=floor_bearer, timeout=30))
        rest = interleaved(
            {"turnkit": rest_call(ours), "bare": rest_call(theirs), "floor": rest_call(floors)},
            *_sizes(quick),
        )
        rows += [
            _common.row(SCENARIO, "REST invoke: turnkit serve (÷ bare FastAPI)",
                        rest["turnkit"] * 1e6, "µs", **_target(rest["turnkit"] / rest["bare"])),
            _common.row(SCENARIO, "REST invoke: bare FastAPI endpoint", rest["bare"] * 1e6, "µs"),
            _common.row(SCENARIO, "REST invoke: FastAPI + key, charge, audit (÷ bare)",
                        rest["floor"] * 1e6, "µs", ratio=rest["floor"] / rest["bare"]),
            _common.row(SCENARIO, "REST invoke: turnkit ÷ FastAPI + key, charge, audit",
                        rest["turnkit"] * 1e6, "µs", ratio=rest["turnkit"] / rest["floor"]),
        ]  # fmt: skip
        urls = {"turnkit": turnkit, "bare": bare, "floor": floor}
        headers = {"turnkit": bearer, "bare": {}, "floor": floor_bearer}
        raw = asyncio.run(sequential_seconds(urls, headers, quick))
        rows += [
            _common.row(SCENARIO, "REST invoke, raw connection: turnkit (÷ bare)",
                        raw["turnkit"] * 1e6, "µs", ratio=raw["turnkit"] / raw["bare"]),
            _common.row(SCENARIO, "REST invoke, raw connection: bare", raw["bare"] * 1e6, "µs"),
            _common.row(SCENARIO, "REST invoke, raw connection: key, charge, audit (÷ bare)",
                        raw["floor"] * 1e6, "µs", ratio=raw["floor"] / raw["bare"]),
        ]  # fmt: skip
        mcp = asyncio.run(mcp_seconds(f"{turnkit}/mcp", f"{peer}/mcp", secret, quick))
        rows += [
            _common.row(SCENARIO, "MCP tools/call: turnkit /mcp (÷ SDK MCPServer)",
                        mcp["turnkit"] * 1e6, "µs", **_target(mcp["turnkit"] / mcp["MCPServer"])),
            _common.row(SCENARIO, "MCP tools/call: SDK MCPServer, no governance",
                        mcp["MCPServer"] * 1e6, "µs"),
        ]  # fmt: skip
        per_client = QUICK_PER_CLIENT if quick else PER_CLIENT
        latencies = {
            "turnkit": asyncio.run(concurrent_latencies(turnkit, bearer, per_client)),
            "bare": asyncio.run(concurrent_latencies(bare, {}, per_client)),
        }
    for label, share in (("p50", 0.5), ("p99", 0.99)):
        ours_at, theirs_at = (percentile(latencies[n], share) for n in ("turnkit", "bare"))
        rows += [
            _common.row(SCENARIO, f"{CLIENTS} REST clients: turnkit {label} (÷ bare)",
                        ours_at * 1e3, "ms", ratio=ours_at / theirs_at),
            _common.row(SCENARIO, f"{CLIENTS} REST clients: bare {label}", theirs_at * 1e3, "ms"),
        ]  # fmt: skip
    return rows


def workers_rows(quick: bool, group: str, db: str) -> list[dict[str, Any]]:
    """Requests/s of ``turnkit serve --workers 1`` and ``--workers 3`` on the ledger ``db``."""
    secret = prepared(db)
    bearer = {"Authorization": f"Bearer {secret}"}
    seconds = QUICK_LOAD_SECONDS if quick else LOAD_SECONDS
    rates = {}
    for workers in (1, 3):
        with serving(turnkit_command(db, workers), "/healthz") as url:
            rates[workers] = asyncio.run(requests_per_second(url, bearer, seconds))
    return [
        _common.row(SCENARIO, f"{group}: turnkit serve --workers 1, {CLIENTS} clients",
                    rates[1], "req/s"),
        _common.row(SCENARIO, f"{group}: turnkit serve --workers 3 (÷ 1 worker)",
                    rates[3], "req/s", ratio=rates[3] / rates[1]),
    ]  # fmt: skip


def run(quick: bool = False) -> list[dict[str, Any]]:
    """The rows of every case (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="turnkit-bench-") as folder:
        rows = calls_rows(quick, Path(folder))
        rows += workers_rows(quick, "sqlite", str(Path(folder) / "workers.sqlite"))
        url = _common.postgres_url()
        if url is None:
            print(_common.postgres_note(), file=sys.stderr)
            return rows
        with _common.postgres_schema(url) as schema_url:
            rows += workers_rows(quick, "postgres", schema_url)
    return rows


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    print(_common.format_table(run(quick)))
