"""Where a served call's time goes (diagnostic, no target): one REST invoke and one MCP
``tools/call`` of a read, counted and timed in process.

For each door: the ledger statements a call runs (each one round trip to PostgreSQL), the thread
hops turnkit makes (``asyncio.to_thread`` and the handler pool), and the microseconds a call takes
when the ASGI app is called directly (no network, no HTTP parsing: what the server itself adds),
against the floor of ``bench/server.py`` (REST) and the SDK's ``MCPServer`` (MCP), interleaved.
With ``--profile``, the functions that took the most time in the REST call (cProfile of the
event loop's thread; the worker threads' share shows as the waits on them).

    .venv/bin/python bench/profile_server.py [--postgres] [--profile]

``--postgres`` runs on ``TURNKIT_BENCH_POSTGRES_URL`` (or ``TURNKIT_TEST_POSTGRES_URL``).
"""

from __future__ import annotations

import cProfile
import io
import json
import os
import pstats
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

try:
    from bench import _common
except ModuleNotFoundError:  # run as a script: bench/ is sys.path[0], the repository is not
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench import _common

from bench import _floor
from bench import server as served
from bench._cpu import thread_seconds

ROUNDS, BATCH = 7, 200
PROTOCOL = "2026-07-28"
MCP_BODY = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
    "name": served.MODEL_NAME, "arguments": {"sku": "TEA-0001"},
    "_meta": {"io.modelcontextprotocol/protocolVersion": PROTOCOL,
              "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "0.1.0"},
              "io.modelcontextprotocol/clientCapabilities": {}},
}}  # fmt: skip
"""A ``tools/call`` as the SDK's ``Client`` sends it over Streamable HTTP (``mcp`` 2.x, read
off the wire): the protocol of 2026-07-28, its ``_meta`` and its ``Mcp-Method``/``Mcp-Name``
headers (``scope``). ``bench/server.py`` calls through that client; an older protocol's request
(2025-06-18, no ``_meta``) takes the SDK's other path, half again as long under ``MCPServer``."""


def turnkit_app(db: str) -> Any:
    """The app ``turnkit serve`` runs, as its workers build it (``app_from_environment``)."""
    from turnkit.cli.serve import OPTIONS, app_from_environment

    os.environ[OPTIONS] = json.dumps({
        "db": db, "modules": ["bench.server:admin_module"], "entry_points": False, "demo": False,
        "catalogue": None, "permissions": "bench._common:permissions",
        "app": {"mcp_allowed_hosts": ["127.0.0.1:8000"]}, "log_format": "off",
    })  # fmt: skip
    return app_from_environment()


def scope(path: str, body: bytes, bearer: str | None, mcp: bool = False) -> dict[str, Any]:
    """The ASGI scope of a POST to ``path`` as a keep-alive client sends it."""
    headers = [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]  # fmt: skip
    if bearer:
        headers.append((b"authorization", f"Bearer {bearer}".encode()))
    if mcp:
        headers += [(b"accept", b"application/json, text/event-stream"),
                    (b"mcp-protocol-version", PROTOCOL.encode()),
                    (b"mcp-method", b"tools/call"),
                    (b"mcp-name", served.MODEL_NAME.encode())]  # fmt: skip
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
            "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "",
            "query_string": b"", "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 5555),
            "headers": headers}  # fmt: skip


def caller(app: Any, path: str, body: bytes, bearer: str | None, mcp: bool = False) -> Callable:
    """A coroutine function making one call of ``app``; anything but a 200 stops the profile."""
    sent_scope = scope(path, body, bearer, mcp)

    async def call() -> None:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await app(dict(sent_scope), receive, send)
        answer = b"".join(m.get("body", b"") for m in sent[1:])
        if sent[0]["status"] != 200 or b"Green tea" not in answer:
            raise RuntimeError(f"{path}: {sent[0]['status']} {answer[:300]!r}")

    return call


STATEMENTS = (  # how a statement is named in the timings: the first of these its text holds
    ("FROM turnkit_api_keys", "the key (and settings)"),
    ("floor_keys", "the key (and settings)"),
    ("_usage", "the rate-limit charge"),
    ("_audit", "the audit row"),
)


def statement_name(sql: str) -> str:
    """What ``sql`` does, as the timings name it (its first words when none of ``STATEMENTS``)."""
    return next((name for part, name in STATEMENTS if part in sql), " ".join(sql.split()[:3]))


class Timings:
    """The time each statement takes as a call runs it, by ``statement_name``, summed: the
    ledger's ``_rows``/``_run`` for turnkit, the floor's ``one``/``run`` (both shapes)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def timing(self, *owners: tuple[Any, tuple[str, ...]]) -> Iterator[None]:
        with ExitStack() as undo:
            for owner, names in owners:
                for name in names:
                    undo.enter_context(self._patched(owner, name))
            yield

    @contextmanager
    def _patched(self, owner: Any, name: str) -> Iterator[None]:
        original = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            sql = next(arg for arg in args if isinstance(arg, str))
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                named = statement_name(sql)
                self.seconds[named] = self.seconds.get(named, 0.0) + time.perf_counter() - started

        setattr(owner, name, timed)
        try:
            yield
        finally:
            setattr(owner, name, original)


class Counts:
    """Statements (the ledger's ``_rows`` and ``_run``) and hops to worker threads (every
    ``ThreadPoolExecutor.submit``: the SDK's own hops go through anyio's threads, not counted)."""

    def __init__(self) -> None:
        self.statements = self.hops = 0

    @contextmanager
    def counting(self, ledger: Any) -> Iterator[None]:
        with ExitStack() as undo:
            for name in ("_rows", "_run"):
                undo.enter_context(self._patched(ledger, name, "statements"))
            # every hop to a worker thread, asyncio.to_thread's and the handler pool's alike
            undo.enter_context(self._patched(ThreadPoolExecutor, "submit", "hops"))
            yield

    @contextmanager
    def _patched(self, owner: Any, name: str, counter: str) -> Iterator[None]:
        original = getattr(owner, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            setattr(self, counter, getattr(self, counter) + 1)
            return original(*args, **kwargs)

        setattr(owner, name, counted)
        try:
            yield
        finally:
            setattr(owner, name, original)


async def measure(app: Any, ledger: Any, secret: str, floor: Any, floor_secret: str,
                  peer: Any, profile: bool) -> list[dict[str, Any]]:  # fmt: skip
    rest_body = json.dumps(served.BODY).encode()
    mcp_body = json.dumps(MCP_BODY).encode()
    path = f"/v1/tools/{served.TOOL}/invoke"
    rest = caller(app, path, rest_body, secret)
    mcp = caller(app, "/mcp", mcp_body, secret, mcp=True)
    rows = []
    async with app.router.lifespan_context(app), peer.router.lifespan_context(peer):
        for door, call in (("REST invoke", rest), ("MCP tools/call", mcp)):
            await call()  # the key's first use is recorded once: not counted
            counts = Counts()
            with counts.counting(ledger):
                for _ in range(10):
                    await call()
            rows += [
                _common.row("profile", f"{door}: ledger statements a call", counts.statements / 10,
                            "statements"),
                _common.row("profile", f"{door}: turnkit's thread hops a call", counts.hops / 10,
                            "hops"),
            ]  # fmt: skip
        floor_rest = caller(floor, path, rest_body, floor_secret)
        rows += await statement_times(rest, ledger, floor_rest)
        seconds = await served.ainterleaved({
            "rest": rest, "floor": floor_rest,
            "mcp": mcp, "peer": caller(peer, "/mcp", mcp_body, None, mcp=True),
        }, BATCH, ROUNDS, BATCH)  # fmt: skip
        times = {name: value * 1e6 for name, value in seconds.items()}
        rows += [
            _common.row("profile", "REST invoke in process: turnkit (÷ floor)", times["rest"], "µs",
                        ratio=times["rest"] / times["floor"]),
            _common.row("profile", "REST invoke in process: floor", times["floor"], "µs"),
            _common.row("profile", "MCP tools/call in process: turnkit (÷ SDK MCPServer)",
                        times["mcp"], "µs", ratio=times["mcp"] / times["peer"]),
            _common.row("profile", "MCP tools/call in process: SDK MCPServer", times["peer"], "µs"),
        ]  # fmt: skip
        for name, call in (("MCP tools/call: turnkit", mcp), ("MCP tools/call: SDK MCPServer",
                           caller(peer, "/mcp", mcp_body, None, mcp=True))):  # fmt: skip
            rows += await thread_rows(name, call)
        if profile:
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(1000):
                await rest()
            profiler.disable()
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
            print(text.getvalue(), file=sys.stderr)
    return rows


async def thread_rows(name: str, call: Callable[[], Any]) -> list[dict[str, Any]]:
    """The CPU a call takes in the event loop's thread and in the others (the worker threads
    the call hops to), from ``/proc/self/task`` (Linux; elsewhere no rows)."""
    before = thread_seconds()
    if not before:
        return []
    for _ in range(ROUNDS * BATCH):
        await call()
    after = thread_seconds()
    spent = {tid: after[tid] - before.get(tid, 0.0) for tid in after}
    loop = spent.pop(threading.get_native_id(), 0.0)
    calls = ROUNDS * BATCH
    return [
        _common.row("profile", f"{name}: CPU in the event loop's thread", loop / calls * 1e6,
                    "µs"),
        _common.row("profile", f"{name}: CPU in other threads (worker threads)",
                    sum(spent.values()) / calls * 1e6, "µs"),
    ]  # fmt: skip


async def statement_times(rest: Callable, ledger: Any, floor: Callable) -> list[dict[str, Any]]:
    """The µs each statement of a REST invoke takes, turnkit's and the floor's, timed around the
    driver's call as the call runs it (on SQLite these hold the file's write lock; on PostgreSQL
    each is a round trip), alternating batches of each."""
    ours, theirs = Timings(), Timings()
    calls = 0
    for _ in range(ROUNDS):
        with ours.timing((ledger, ("_rows", "_run"))):
            for _ in range(BATCH):
                await rest()
        with theirs.timing((_floor.Sqlite, ("one", "run")), (_floor.Postgres, ("one", "run"))):
            for _ in range(BATCH):
                await floor()
        calls += BATCH
    rows = []
    for name in dict.fromkeys([*ours.seconds, *theirs.seconds]):
        mine, floors = ours.seconds.get(name, 0.0), theirs.seconds.get(name, 0.0)
        rows.append(_common.row(
            "profile", f"REST invoke: {name}, as served: turnkit (÷ floor)",
            mine / calls * 1e6, "µs", ratio=mine / floors if floors else None,
        ))  # fmt: skip
    mine, floors = sum(ours.seconds.values()), sum(theirs.seconds.values())
    rows.append(_common.row("profile", "REST invoke: every statement of a call: turnkit (÷ floor)",
                            mine / calls * 1e6, "µs", ratio=mine / floors))  # fmt: skip
    rows.append(_common.row("profile", "REST invoke: every statement of a call: floor",
                            floors / calls * 1e6, "µs"))  # fmt: skip
    return rows


def main(postgres: bool, profile: bool) -> list[dict[str, Any]]:
    import uvloop

    with tempfile.TemporaryDirectory(prefix="turnkit-profile-") as folder, ExitStack() as stack:
        if postgres:
            url = _common.postgres_url()
            if url is None:
                raise SystemExit(_common.postgres_note())
            db = stack.enter_context(_common.postgres_schema(url))
            floor_db = stack.enter_context(_common.postgres_schema(url))
        else:
            db, floor_db = f"{folder}/ledger.sqlite", f"{folder}/floor.sqlite"
        secret = served.prepared(db)
        app = turnkit_app(db)
        os.environ[_floor.FLOOR_DB] = floor_db
        floor_secret = _floor.make_key(floor_db)
        floor = _floor.floor_app()
        ledger = app.state.executor.ledger
        return uvloop.run(measure(app, ledger, secret, floor, floor_secret,
                                  served.mcp_peer_app(), profile))  # fmt: skip


if __name__ == "__main__":
    print(_common.format_table(main("--postgres" in sys.argv, "--profile" in sys.argv)))
