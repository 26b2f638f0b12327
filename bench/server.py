"""The price of serving over HTTP: turnkit's REST and MCP servers against independent peers.

Every server runs in a process of its own under uvicorn (the load runs in this one), on
127.0.0.1, and serves the same read (``bench.get_item``: ``_common.get_item``):

- **REST invoke against the floor** (``_floor.py``): ``turnkit serve --workers 1`` (``POST
  /v1/tools/bench.get_item/invoke`` with an API key: key lookup, rights with a permission
  provider, validation, the operator's settings, the usage charge and the audit row) against the
  same promises written by hand without turnkit: FastAPI, a sync endpoint, the driver directly
  (sqlite3 in WAL mode; psycopg with a pool), three statements a call (the key by its hash with
  revocation and expiry, the charge within the limit, the audit row). On SQLite and, when a
  server is configured, on PostgreSQL. One call at a time, timed twice: through one keep-alive
  ``httpx`` client, and on one raw keep-alive connection each (``invoker``: the server's own
  price, without httpx's ~0.8 ms a request here). Target: turnkit ≤ 1.15x the floor's time.
- **The bare endpoint** (``bare_app``, SQLite group only): FastAPI calling the handler and
  nothing else, for scale: what any promise costs at all.
- **MCP ``tools/call``**: turnkit's ``/mcp`` (the same ``turnkit serve`` process) against the
  same tool served by the SDK's own ``MCPServer`` without governance (``mcp_peer_app``, in the
  same stateless JSON mode as turnkit's), both called by the SDK's ``Client`` over Streamable
  HTTP, one call at a time. Target: ≤ 1.2x. Beside them, three servers on ``MCPServer`` that
  bound what any arrangement of the promises reaches (``mcp_rows``): the MCP floor, the floor's
  statements alone in one hop, and turnkit's own steps straight in one hop.
- **50 concurrent clients** (50 raw keep-alive connections on one asyncio loop: httpx cannot
  drive this load; ``turnkit.cli.load``, the generator of ``turnkit bench serve``) against
  turnkit and the floor, rounds alternating: requests/s (target: turnkit ≥ 0.9x the floor's)
  and p99 latency (target: ≤ 1.5x), p50 shown.
- **Workers**: requests/s of ``turnkit serve --workers 1`` and ``--workers 3`` on one ledger
  under the same 50 clients (ratio: 3 workers ÷ 1). Target on PostgreSQL: ≥ 2x; on SQLite no
  target (every write to one file is serialised by SQLite's lock). The load generator shares
  the machine's cores with the workers. The floor under ``uvicorn --workers`` 1 and 3 is
  measured beside it: what three processes give the obvious server on the same machine.

PostgreSQL rows need ``TURNKIT_BENCH_POSTGRES_URL`` or ``TURNKIT_TEST_POSTGRES_URL``. The
sequential rows are the median of interleaved batches (the contenders' batches alternate, so a
burst of load on the machine hits them alike). The rate limits are raised (turnkit's
``rate_limit_units``, the floor's ``LIMIT``), so no call is refused; the charge is still made and
stored.

    .venv/bin/python bench/server.py [--quick]
"""

from __future__ import annotations

import asyncio
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
from fastapi import FastAPI
from pydantic import BaseModel

from bench import _floor
from bench._cpu import CpuSplit, Split, workers_of
from turnkit import open_ledger
from turnkit.cli.load import Connection, Target, arun_load, rest_invoke

SCENARIO = "server"
ROOT = Path(__file__).resolve().parent.parent
TOOL, MODEL_NAME = "bench.get_item", _common.READ_TOOL
BODY = {"input": {"sku": "TEA-0001"}}
REST_TARGET = 1.15
"""turnkit's time per REST invoke over the floor's, one call at a time."""
MCP_TARGET = 1.2
"""turnkit's time per MCP ``tools/call`` over the SDK's ``MCPServer``'s."""
RPS_TARGET, P99_TARGET = 0.9, 1.5
"""Under ``CLIENTS`` clients: turnkit's requests/s over the floor's (at least), its p99 over the
floor's (at most)."""
WORKERS_TARGET = 2.0
"""Requests/s of ``--workers 3`` over ``--workers 1`` on PostgreSQL (at least)."""

BATCH, BATCHES, WARMUP = 100, 8, 200
QUICK_BATCH, QUICK_BATCHES, QUICK_WARMUP = 40, 4, 50
CLIENTS = 50
LOAD_SECONDS, QUICK_LOAD_SECONDS = 4.0, 2.0
"""How long the 50 clients load a server in one round."""
LOAD_ROUNDS = 3
"""Rounds of the 50 clients per contender (one with ``--quick``); the figures are medians."""
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
    command: list[str],
    ready: str,
    env: dict[str, str] | None = None,
    *,
    quiet: bool = False,
    pids: list[int] | None = None,
    start_timeout: float = START_TIMEOUT,
    stop_timeout: float = 15.0,
) -> Iterator[str]:
    """``command`` (given ``{port}``) run from the repository root with ``env`` added to this
    process's environment; its base URL once ``ready`` (a path) answers within
    ``start_timeout``; stopped on exit (killed if it has not ended ``stop_timeout`` later).
    ``quiet``: its stderr (a server's log lines) is dropped too; ``pids``: gets its process id."""
    port = _free_port()
    env = os.environ | {"PYTHONPATH": str(ROOT)} | (env or {})
    argv = [part.format(port=port) for part in command]
    stderr = subprocess.DEVNULL if quiet else None
    process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    if pids is not None:
        pids.append(process.pid)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{argv} stopped with {process.returncode}")
            try:
                if httpx.get(url + ready, timeout=1).status_code < 500:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{argv} did not answer within {start_timeout:g} s")
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(stop_timeout)
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


async def mcp_seconds(servers: dict[str, tuple[str, dict[str, str]]], quick: bool,
                      tools: dict[str, str] | None = None) -> dict[str, float]:  # fmt: skip
    """Seconds per ``tools/call`` through the SDK's client, for each ``name: (url, headers)``;
    the tool called is ``tools[name]``, by default the read every server here serves."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with AsyncExitStack() as stack:
        calls = {}
        for name, (url, headers) in servers.items():
            http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers))
            client = await stack.enter_async_context(
                Client(streamable_http_client(url, http_client=http))
            )
            calls[name] = _mcp_call(client, name, (tools or {}).get(name, MODEL_NAME))
        batch, batches, warmup = _sizes(quick)
        return await ainterleaved(calls, batch, batches, warmup)


def _mcp_call(client: Any, name: str, tool: str) -> Callable[[], Awaitable[None]]:
    async def call() -> None:
        result = await client.call_tool(tool, {"sku": "TEA-0001"})
        if result.is_error or "Green tea" not in str(result.content):
            raise RuntimeError(f"{name}: unexpected tools/call result {result!r:.300}")

    return call


def invoker(url: str, headers: dict[str, str]) -> tuple[Connection, Callable[[], Awaitable[None]]]:
    """One keep-alive HTTP/1.1 connection to ``url`` (``turnkit.cli.load``'s, the generator of
    ``turnkit bench serve``: httpx's pool could not drive 50 clients here) and a coroutine
    function sending the invoke on it; anything but a 200 stops the benchmark."""
    target = Target.of(url)
    connection = Connection(target)
    request = rest_invoke(TOOL, BODY["input"], headers).request(target)

    async def invoke() -> None:
        status, answer = await connection.send(request)
        if status != 200:
            raise RuntimeError(f"unexpected answer {status}: {answer[:300]!r}")

    return connection, invoke


async def sequential_seconds(urls: dict[str, str], headers: dict[str, dict[str, str]],
                             quick: bool) -> dict[str, float]:  # fmt: skip
    """Seconds per invoke, one at a time on one raw connection each (the server's own price,
    without an HTTP client library's)."""
    async with AsyncExitStack() as stack:
        calls = {}
        for name, url in urls.items():
            connection, calls[name] = invoker(url, headers[name])
            await stack.enter_async_context(connection)
        return await ainterleaved(calls, *_sizes(quick))


def percentile(values: list[float], share: float) -> float:
    """The value below which ``share`` of ``values`` lie (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def _sizes(quick: bool) -> tuple[int, int, int]:
    return (QUICK_BATCH, QUICK_BATCHES, QUICK_WARMUP) if quick else (BATCH, BATCHES, WARMUP)


# --- the scenario ------------------------------------------------------------------------------


def _at_most(ratio: float, target: float) -> dict[str, Any]:
    return {"ratio": ratio, "target": f"<= {target:g}x", "met": round(ratio, 2) <= target}


def _at_least(ratio: float, target: float) -> dict[str, Any]:
    return {"ratio": ratio, "target": f">= {target:g}x",
            "met": _common.ratio_at_least(ratio, target)}  # fmt: skip


def floor_command() -> list[str]:
    """The floor (``bench._floor``) under uvicorn, on the database ``TURNKIT_BENCH_FLOOR_DB``."""
    return uvicorn_command("bench._floor:floor_app")


async def loaded(url: str, headers: dict[str, str], seconds: float) -> tuple[float, list[float]]:
    """``CLIENTS`` connections send invokes for ``seconds`` (after a warm-up of a second or less,
    not counted): the invokes answered per second, and the latency of each, in seconds."""
    route = rest_invoke(TOOL, BODY["input"], headers)
    load = await arun_load(url, [route], clients=CLIENTS, seconds=seconds,
                           warmup=min(1.0, seconds / 2))  # fmt: skip
    if load.total.errors:
        raise RuntimeError(
            f"{load.total.errors} errors under load; the first: {load.total.first_error}"
        )
    return load.total.rps, list(load.total.latencies)


def under_load(
    urls: dict[str, str], headers: dict[str, dict[str, str]], quick: bool
) -> dict[str, dict[str, float]]:
    """Requests/s, p50 and p99 of each contender under ``CLIENTS`` clients: the medians over
    rounds whose contenders alternate (a burst of load on the machine hits them alike)."""
    seconds = QUICK_LOAD_SECONDS if quick else LOAD_SECONDS
    found: dict[str, dict[str, list[float]]] = {name: {} for name in urls}
    for _ in range(1 if quick else LOAD_ROUNDS):
        for name, url in urls.items():
            rate, latencies = asyncio.run(loaded(url, headers[name], seconds))
            for figure, value in (("rps", rate), ("p50", percentile(latencies, 0.5)),
                                  ("p99", percentile(latencies, 0.99))):  # fmt: skip
                found[name].setdefault(figure, []).append(value)
    return {
        name: {k: _common.median(v) for k, v in figures.items()} for name, figures in found.items()
    }


def storage_rows(quick: bool, group: str, db: str, floor_db: str, *, bare: bool = False,
                 mcp: bool = False) -> list[dict[str, Any]]:  # fmt: skip
    """turnkit serve (one worker) against the floor on one kind of storage, one call at a time
    and under ``CLIENTS`` clients; with ``bare``, the bare endpoint too; with ``mcp``, MCP
    ``tools/call`` against the SDK's ``MCPServer``."""
    secret = prepared(db)
    bearer = {"Authorization": f"Bearer {secret}"}
    floor_bearer = _floor_bearer(floor_db)
    urls, headers = {}, {"turnkit": bearer, "floor": floor_bearer, "bare": {}}
    rows = []
    with ExitStack() as stack:
        urls["turnkit"] = stack.enter_context(serving(turnkit_command(db, 1), "/healthz"))
        urls["floor"] = stack.enter_context(
            serving(floor_command(), "/healthz", {_floor.FLOOR_DB: floor_db})
        )
        if bare:
            urls["bare"] = stack.enter_context(
                serving(uvicorn_command("bench.server:bare_app"), "/healthz")
            )
        clients = {
            name: stack.enter_context(httpx.Client(base_url=url, headers=headers[name], timeout=30))
            for name, url in urls.items()
        }
        rest = interleaved({n: rest_call(c) for n, c in clients.items()}, *_sizes(quick))
        raw = asyncio.run(sequential_seconds(urls, headers, quick))
        for how, seconds in (("httpx", rest), ("raw connection", raw)):
            ratio = seconds["turnkit"] / seconds["floor"]
            rows += [
                _common.row(SCENARIO, f"{group}: REST invoke, {how}: turnkit (÷ floor)",
                            seconds["turnkit"] * 1e6, "µs", **_at_most(ratio, REST_TARGET)),
                _common.row(SCENARIO, f"{group}: REST invoke, {how}: floor",
                            seconds["floor"] * 1e6, "µs"),
            ]  # fmt: skip
        if bare:
            rows += [
                _common.row(SCENARIO, "REST invoke, raw connection: bare FastAPI (÷ floor)",
                            raw["bare"] * 1e6, "µs", ratio=raw["bare"] / raw["floor"]),
                _common.row(SCENARIO, "REST invoke, httpx: bare FastAPI (÷ floor)",
                            rest["bare"] * 1e6, "µs", ratio=rest["bare"] / rest["floor"]),
            ]  # fmt: skip
        if mcp:
            rows += mcp_rows(quick, urls["turnkit"], secret, f"{floor_db}.mcp", stack)
        load = under_load(urls, headers, quick)
    ours, floor = load["turnkit"], load["floor"]
    rows += [
        _common.row(SCENARIO, f"{group}: {CLIENTS} clients: turnkit req/s (÷ floor)",
                    ours["rps"], "req/s", **_at_least(ours["rps"] / floor["rps"], RPS_TARGET)),
        _common.row(SCENARIO, f"{group}: {CLIENTS} clients: floor req/s", floor["rps"], "req/s"),
        _common.row(SCENARIO, f"{group}: {CLIENTS} clients: turnkit p99 (÷ floor)",
                    ours["p99"] * 1e3, "ms", **_at_most(ours["p99"] / floor["p99"], P99_TARGET)),
        _common.row(SCENARIO, f"{group}: {CLIENTS} clients: floor p99", floor["p99"] * 1e3, "ms"),
        _common.row(SCENARIO, f"{group}: {CLIENTS} clients: turnkit p50 (÷ floor)",
                    ours["p50"] * 1e3, "ms", ratio=ours["p50"] / floor["p50"]),
        _common.row(SCENARIO, f"{group}: {CLIENTS} clients: floor p50", floor["p50"] * 1e3, "ms"),
    ]  # fmt: skip
    if bare:
        rows.append(_common.row(SCENARIO, f"{CLIENTS} clients: bare FastAPI req/s (÷ floor)",
                                load["bare"]["rps"], "req/s",
                                ratio=load["bare"]["rps"] / floor["rps"]))  # fmt: skip
    return rows


def mcp_rows(quick: bool, turnkit: str, secret: str, floor_db: str, stack: ExitStack
             ) -> list[dict[str, Any]]:  # fmt: skip
    """MCP ``tools/call`` on turnkit's ``/mcp`` against the SDK's ``MCPServer`` (no governance),
    and, to tell what the target leaves room for, against three servers between them, each on
    ``MCPServer``: the MCP floor (``_floor.mcp_floor_app``: the floor's key check in front, its
    charge and audit in the tool), the floor in one hop (``mcp_floor_one_hop_app``: the same
    three statements, all in the worker thread the SDK hops to anyway), and turnkit's steps
    straight (``profile_worker.mcp_straight_app``: every check of turnkit's pipeline for a
    plain read, called one after the other in that one hop, on a turnkit ledger, without
    turnkit's driver and ASGI stack). turnkit's ``/mcp`` is the server the REST rows and the 50
    clients used before (as a server in service is); the same server started for these rows
    alone is timed beside it, as every other contender here is fresh: after the load, the
    loop's six worker threads take sequential calls in turn, each colder than one thread
    taking them all."""
    from bench import profile_worker

    peer = stack.enter_context(serving(uvicorn_command("bench.server:mcp_peer_app"), "/not-served"))
    floor = stack.enter_context(serving(uvicorn_command("bench._floor:mcp_floor_app"),
                                        "/not-served", {_floor.FLOOR_DB: floor_db}))  # fmt: skip
    one_hop_db, straight_db = f"{floor_db}.one-hop", f"{floor_db}.straight.sqlite"
    one_hop = stack.enter_context(serving(
        uvicorn_command("bench._floor:mcp_floor_one_hop_app"), "/not-served",
        {_floor.FLOOR_DB: one_hop_db}))  # fmt: skip
    straight_secret = prepared(straight_db)
    fresh_db = f"{floor_db}.fresh.sqlite"
    fresh_secret = prepared(fresh_db)
    fresh = stack.enter_context(serving(turnkit_command(fresh_db, 1), "/healthz"))
    straight = stack.enter_context(serving(
        uvicorn_command("bench.profile_worker:mcp_straight_app"), "/not-served",
        {profile_worker.STRAIGHT_DB: straight_db}))  # fmt: skip
    mcp = asyncio.run(mcp_seconds({
        "turnkit": (f"{turnkit}/mcp", {"Authorization": f"Bearer {secret}"}),
        "MCPServer": (f"{peer}/mcp", {}),
        "floor": (f"{floor}/mcp", _floor_bearer(floor_db)),
        "one hop": (f"{one_hop}/mcp", _floor_bearer(one_hop_db)),
        "straight": (f"{straight}/mcp", {"Authorization": f"Bearer {straight_secret}"}),
        "fresh": (f"{fresh}/mcp", {"Authorization": f"Bearer {fresh_secret}"}),
    }, quick))  # fmt: skip
    base = mcp["MCPServer"]
    return [
        _common.row(SCENARIO, "MCP tools/call: turnkit /mcp (÷ SDK MCPServer)",
                    mcp["turnkit"] * 1e6, "µs", **_at_most(mcp["turnkit"] / base, MCP_TARGET)),
        _common.row(SCENARIO, "MCP tools/call: SDK MCPServer, no governance", base * 1e6, "µs"),
        _common.row(SCENARIO, "MCP tools/call: MCP floor, key, charge, audit (÷ MCPServer)",
                    mcp["floor"] * 1e6, "µs", ratio=mcp["floor"] / base),
        _common.row(SCENARIO, "MCP tools/call: turnkit ÷ MCP floor", mcp["turnkit"] * 1e6,
                    "µs", ratio=mcp["turnkit"] / mcp["floor"]),
        _common.row(SCENARIO, "MCP tools/call: MCP floor in one hop, the three statements alone"
                    " (÷ MCPServer)", mcp["one hop"] * 1e6, "µs", ratio=mcp["one hop"] / base),
        _common.row(SCENARIO, "MCP tools/call: turnkit's steps straight in MCPServer's hop, every"
                    " check of a plain read (÷ MCPServer)", mcp["straight"] * 1e6, "µs",
                    ratio=mcp["straight"] / base),
        _common.row(SCENARIO, "MCP tools/call: turnkit ÷ its steps straight (its driver and"
                    " ASGI stack)", mcp["turnkit"] * 1e6, "µs",
                    ratio=mcp["turnkit"] / mcp["straight"]),
        _common.row(SCENARIO, "MCP tools/call: turnkit /mcp in a process that served no load"
                    " before (÷ MCPServer)", mcp["fresh"] * 1e6, "µs", ratio=mcp["fresh"] / base),
    ]  # fmt: skip


def _floor_bearer(floor_db: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {_floor.make_key(floor_db)}"}


def all_started(server: int, workers: int) -> None:
    """Wait until ``server`` runs all its ``workers`` and they had time to listen. ``/healthz``
    answers once the first is up: loaded at once, that one accepted all 50 connections (kept
    alive for the whole load) and ``--workers 3`` measured one worker (``ss -tnp``)."""
    if workers == 1 or not Path("/proc").exists():
        return
    deadline = time.monotonic() + START_TIMEOUT
    while workers_of(server) < workers and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(2.0)  # each worker builds its app, then listens


def workers_rows(quick: bool, group: str, db: str, floor_db: str) -> list[dict[str, Any]]:
    """Requests/s of ``turnkit serve --workers 1`` and ``--workers 3`` on the ledger ``db``, and
    where the machine's CPU went meanwhile (``_cpu.py``: idle cores mean something serialises
    the requests; busy ones, that more workers cannot help); the floor's ``uvicorn --workers``
    1 and 3 on ``floor_db`` beside them: what three processes give the obvious server on this
    machine. "What 2x asks" sets twice turnkit's one worker against the floor's three: above
    1x, the target asks turnkit's three workers to serve more than the same promises written
    by hand serve on the same cores (when three workers fill the machine, the limit is the
    machine's, not a lock or a pool)."""
    secret = prepared(db)
    bearer = {"Authorization": f"Bearer {secret}"}
    floor_bearer = _floor_bearer(floor_db)
    seconds = QUICK_LOAD_SECONDS if quick else LOAD_SECONDS
    rates: dict[tuple[str, int], float] = {}
    splits: dict[tuple[str, int], Split] = {}
    rows = []
    for workers in (1, 3):
        for name, command, env, headers in (
            ("turnkit", turnkit_command(db, workers), None, bearer),
            ("floor", [*floor_command(), "--workers", str(workers)], {_floor.FLOOR_DB: floor_db},
             floor_bearer),
        ):  # fmt: skip
            pids: list[int] = []
            with serving(command, "/healthz", env, pids=pids) as url:
                all_started(pids[0], workers)
                with CpuSplit(pids[0]) as split:
                    rates[name, workers], _ = asyncio.run(loaded(url, headers, seconds))
            if split.found is not None:
                used = splits[name, workers] = split.found
                rate = rates[name, workers]
                rows.append(_common.row(
                    SCENARIO, f"{group}: {name} --workers {workers}: CPU busy (server"
                    f" {used.server:.2f}, PostgreSQL {used.postgres:.2f}, load {used.load:.2f}"
                    f" cores; server + PostgreSQL {(used.server + used.postgres) / rate * 1e3:.2f}"
                    " ms CPU a request)",
                    used.machine, f"/{used.cores} cores"))  # fmt: skip
    ratio = rates["turnkit", 3] / rates["turnkit", 1]
    target = _at_least(ratio, WORKERS_TARGET) if group == "postgres" else {"ratio": ratio}
    return [
        _common.row(SCENARIO, f"{group}: turnkit serve --workers 1, {CLIENTS} clients",
                    rates["turnkit", 1], "req/s"),
        _common.row(SCENARIO, f"{group}: turnkit serve --workers 3 (÷ 1 worker)",
                    rates["turnkit", 3], "req/s", **target),
        _common.row(SCENARIO, f"{group}: floor, uvicorn --workers 1, {CLIENTS} clients",
                    rates["floor", 1], "req/s"),
        _common.row(SCENARIO, f"{group}: floor, uvicorn --workers 3 (÷ 1 worker)",
                    rates["floor", 3], "req/s", ratio=rates["floor", 3] / rates["floor", 1]),
        _common.row(SCENARIO, f"{group}: what 2x asks: turnkit --workers 3 at twice its one"
                    " worker's req/s (÷ the floor's --workers 3 on the same machine)",
                    2 * rates["turnkit", 1], "req/s",
                    ratio=2 * rates["turnkit", 1] / rates["floor", 3]),
        *rows,
        *(ceiling(group, name, rates, splits) for name in ("turnkit", "floor")
          if (name, 1) in splits and (name, 3) in splits),
    ]  # fmt: skip


def ceiling(group: str, name: str, rates: dict[tuple[str, int], float],
            splits: dict[tuple[str, int], Split]) -> dict[str, Any]:  # fmt: skip
    """``--workers 3`` ÷ 1 as it would be with one worker's process filling one core and three
    filling the machine: the cores times one worker's own CPU a request, over the machine's CPU a
    request at three (workers, PostgreSQL, the load generator). Not a bound independent of the
    ratio (with both runs saturated it equals it): it names the condition. Reaching 2x on two
    cores needs one worker to spend, of its own process, at least what the whole machine spends a
    request at three; a worker that wastes less CPU alone scales less by this measure."""
    one, three = splits[name, 1], splits[name, 3]
    per_request_one = one.server / rates[name, 1]
    per_request_three = three.machine / rates[name, 3]
    return _common.row(
        SCENARIO, f"{group}: {name} --workers 3 ÷ 1 if one worker filled a core and three the"
        f" {three.cores} cores (cores x one worker's CPU a request ÷ the machine's at three)",
        three.cores * per_request_one / per_request_three, "x")  # fmt: skip


def run(quick: bool = False) -> list[dict[str, Any]]:
    """The rows of every case (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="turnkit-bench-") as folder:
        here = Path(folder)
        rows = storage_rows(quick, "sqlite", str(here / "ledger.sqlite"),
                            str(here / "floor.sqlite"), bare=True, mcp=True)  # fmt: skip
        rows += workers_rows(quick, "sqlite", str(here / "workers.sqlite"),
                             str(here / "workers-floor.sqlite"))  # fmt: skip
        url = _common.postgres_url()
        if url is None:
            print(_common.postgres_note(), file=sys.stderr)
            return rows
        with _common.postgres_schema(url) as ledger, _common.postgres_schema(url) as floor:
            rows += storage_rows(quick, "postgres", ledger, floor)
        with _common.postgres_schema(url) as ledger, _common.postgres_schema(url) as floor:
            rows += workers_rows(quick, "postgres", ledger, floor)
    return rows


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    print(_common.format_table(run(quick)))
