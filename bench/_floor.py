"""The floor of REST invoke: the promises turnkit keeps on every call, written by hand without it.

What someone would write who needs the same promises and does not use turnkit: FastAPI, a sync
endpoint (FastAPI runs it in its thread pool, the way it serves blocking code) and the database
driver directly, with three statements a call:

1. the key by the SHA-256 of its secret, refused (401) when unknown, revoked or expired: looked up
   on every request, so a revocation holds at the next one;
2. the usage charge within the limit, one conditional upsert (429 when the window has no room);
3. the audit row: who called what, how it ended, how long it took.

Around the same handler (``_common.get_item``). No turnkit import: the storage is either
**SQLite** (``sqlite3`` in WAL mode with ``synchronous=NORMAL``, as turnkit's ledger, one
connection per thread, every statement its own transaction) or **PostgreSQL** (``psycopg`` with a
``psycopg_pool.ConnectionPool`` of up to 8 connections in autocommit mode, turnkit's sizes and
psycopg's default of preparing a statement from its fifth run), chosen by the URL in
``TURNKIT_BENCH_FLOOR_DB``. Rights, validation, idempotency, holds and the operator's settings are
left out: what stands between the floor and turnkit is those.

    uvicorn --factory bench._floor:floor_app   (with TURNKIT_BENCH_FLOOR_DB set)
"""

from __future__ import annotations

import hashlib
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from mcp.server.mcpserver import Context  # resolved by the SDK from the tool's annotations
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

FLOOR_DB = "TURNKIT_BENCH_FLOOR_DB"
"""The environment variable naming the floor's database: a SQLite file or a PostgreSQL URL."""
LIMIT = 1_000_000_000
"""Units a caller may spend in a minute: more than any run spends (the charge is still made)."""
WINDOW = 60
"""Seconds of a rate-limit window."""

TABLES = (
    "CREATE TABLE IF NOT EXISTS floor_keys (secret_hash TEXT PRIMARY KEY, user_id TEXT NOT NULL,"
    " expires_at DOUBLE PRECISION, revoked_at DOUBLE PRECISION)",
    "CREATE TABLE IF NOT EXISTS floor_usage (caller TEXT NOT NULL, window_start BIGINT NOT NULL,"
    " units BIGINT NOT NULL, PRIMARY KEY (caller, window_start))",
    "CREATE TABLE IF NOT EXISTS floor_audit (id {serial} PRIMARY KEY, at DOUBLE PRECISION NOT NULL,"
    " caller TEXT NOT NULL, tool TEXT NOT NULL, status TEXT NOT NULL,"
    " duration_ms DOUBLE PRECISION NOT NULL)",
)
KEY = "SELECT user_id, expires_at, revoked_at FROM floor_keys WHERE secret_hash = %s"
CHARGE = (
    "INSERT INTO floor_usage (caller, window_start, units) VALUES (%s, %s, 1)"
    " ON CONFLICT (caller, window_start) DO UPDATE SET units = floor_usage.units + 1"
    " WHERE floor_usage.units + 1 <= %s"
)
AUDIT = (
    "INSERT INTO floor_audit (at, caller, tool, status, duration_ms) VALUES (%s, %s, %s, %s, %s)"
)


class Sqlite:
    """A connection per thread to one SQLite file in WAL mode; each statement autocommits."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.local = threading.local()
        self.opened: list[sqlite3.Connection] = []

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path, timeout=30, isolation_level=None, check_same_thread=False
            )  # fmt: skip  (closed by ``close``)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self.local.conn = conn
            self.opened.append(conn)
        return conn

    def one(self, sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = (
            self._conn().execute(sql.replace("%s", "?"), params).fetchone()
        )
        return row

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        return self._conn().execute(sql).fetchall()

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self._conn().execute(sql.replace("%s", "?"), params).rowcount

    def close(self) -> None:
        for conn in self.opened:
            conn.close()


class Postgres:
    """A pool of up to 8 autocommit connections; each statement is its own transaction."""

    def __init__(self, url: str) -> None:
        from psycopg_pool import ConnectionPool

        self.pool = ConnectionPool(url, min_size=1, max_size=8, kwargs={"autocommit": True},
                                   open=True)  # fmt: skip

    def one(self, sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
        with self.pool.connection() as conn:
            return conn.execute(sql, params).fetchone()  # type: ignore[arg-type]

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        with self.pool.connection() as conn:
            return conn.execute(sql).fetchall()  # type: ignore[arg-type]

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        with self.pool.connection() as conn:
            return conn.execute(sql, params).rowcount  # type: ignore[arg-type]

    def close(self) -> None:
        self.pool.close()


Store = Sqlite | Postgres


def store(url: str) -> Store:
    """The floor's storage at ``url``, its tables created when missing."""
    found: Store = Postgres(url) if url.startswith("postgres") else Sqlite(url)
    serial = "BIGSERIAL" if isinstance(found, Postgres) else "INTEGER"
    for statement in TABLES:
        found.run(statement.format(serial=serial))
    return found


def make_key(url: str, user_id: str = "u_1") -> str:
    """Store a new key for ``user_id`` in the floor's database at ``url``; its secret."""
    secret = "fk_" + secrets.token_urlsafe(24)
    found = store(url)
    found.run("INSERT INTO floor_keys (secret_hash, user_id) VALUES (%s, %s)",
              (hashlib.sha256(secret.encode()).hexdigest(), user_id))  # fmt: skip
    found.close()
    return secret


class InvokeBody(BaseModel):
    """The body of an invoke: the same shape as turnkit's."""

    input: dict[str, Any]


def floor_app() -> FastAPI:
    """The floor's app on the database ``TURNKIT_BENCH_FLOOR_DB`` names (see the module doc)."""
    from bench._common import get_item

    db = store(os.environ[FLOOR_DB])
    app = FastAPI()

    @app.post("/v1/tools/{name}/invoke")
    def invoke(name: str, body: InvokeBody, request: Request) -> dict[str, Any]:
        secret = request.headers.get("authorization", "").removeprefix("Bearer ")
        key = db.one(KEY, (hashlib.sha256(secret.encode()).hexdigest(),))
        started = time.time()
        if key is None or key[2] is not None or (key[1] is not None and key[1] <= started):
            raise HTTPException(401, "unknown, revoked or expired key")
        caller = f"key:{key[0]}"
        if db.run(CHARGE, (caller, int(started // WINDOW), LIMIT)) != 1:
            raise HTTPException(429, "rate limit reached")
        result = get_item(**body.input)
        duration_ms = (time.time() - started) * 1000
        db.run(AUDIT, (started, caller, name, "ok", duration_ms))
        return {"executed": True, "status": "ok", "result": result}

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


def bearer_of(scope: Any) -> str:
    """The secret an ASGI request's ``Authorization: Bearer`` header carries ("" without one)."""
    return dict(scope["headers"]).get(b"authorization", b"").decode().removeprefix("Bearer ")


class KeyCheck:
    """ASGI middleware in front of the SDK's app: the bearer looked up in a worker thread (the
    obvious way: ``anyio.to_thread``) on every request, 401 when unknown, revoked or expired; the
    caller left in the scope for the tool."""

    def __init__(self, app: Any, db: Store) -> None:
        self.app, self.db = app, db

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        import anyio.to_thread
        from starlette.responses import JSONResponse

        digest = hashlib.sha256(bearer_of(scope).encode()).hexdigest()
        key = await anyio.to_thread.run_sync(self.db.one, KEY, (digest,))
        now = time.time()
        if key is None or key[2] is not None or (key[1] is not None and key[1] <= now):
            await JSONResponse({"error": "unknown, revoked or expired key"}, 401)(
                scope, receive, send
            )
            return
        scope["floor.caller"] = f"key:{key[0]}"
        await self.app(scope, receive, send)


def mcp_floor_app() -> Any:
    """The floor of MCP ``tools/call``: the SDK's ``MCPServer`` (stateless JSON, as turnkit's
    ``/mcp``), the key checked by ``KeyCheck`` in front, and a sync tool (run in a worker thread
    by the SDK) that charges, runs the handler and writes the audit row: the floor's three
    statements, on the database ``TURNKIT_BENCH_FLOOR_DB`` names."""
    from mcp.server import MCPServer

    from bench._common import READ_TOOL, get_item

    db = store(os.environ[FLOOR_DB])
    server = MCPServer("floor", log_level="WARNING")

    def bench_get_item(sku: str, ctx: Context) -> dict[str, Any]:
        caller = ctx.request_context.request.scope["floor.caller"]  # type: ignore[union-attr]
        return _charged_read(db, caller, sku, time.time())

    server.tool(name=READ_TOOL, description=get_item.__doc__)(bench_get_item)
    app = server.streamable_http_app(json_response=True, stateless_http=True)
    app.add_middleware(KeyCheck, db=db)
    return app


def mcp_floor_one_hop_app() -> Any:
    """The leanest floor of MCP ``tools/call``: the SDK's ``MCPServer`` whose sync tool, in the
    one worker thread the SDK hops to anyway, looks the bearer up, charges, runs the handler and
    writes the audit row. Not what someone would write first (a refused key is an error result,
    not a 401, and every other request goes unchecked): what the three statements cost over a
    bare ``MCPServer`` when they add no thread hop of their own."""
    from mcp.server import MCPServer

    from bench._common import READ_TOOL, get_item

    db = store(os.environ[FLOOR_DB])
    server = MCPServer("floor", log_level="WARNING")

    def bench_get_item(sku: str, ctx: Context) -> dict[str, Any]:
        scope = ctx.request_context.request.scope  # type: ignore[union-attr]
        return one_hop_read(db, bearer_of(scope), sku)

    server.tool(name=READ_TOOL, description=get_item.__doc__)(bench_get_item)
    return server.streamable_http_app(json_response=True, stateless_http=True)


def one_hop_read(db: Store, secret: str, sku: str) -> dict[str, Any]:
    """The one-hop floor's tool for the bearer ``secret``: the key looked up by its hash and
    checked, then ``_charged_read`` (an error result for a refused key, as the tool's)."""
    key = db.one(KEY, (hashlib.sha256(secret.encode()).hexdigest(),))
    started = time.time()
    if key is None or key[2] is not None or (key[1] is not None and key[1] <= started):
        raise ToolError("unknown, revoked or expired key")
    return _charged_read(db, f"key:{key[0]}", sku, started)


def _charged_read(db: Store, caller: str, sku: str, started: float) -> dict[str, Any]:
    """An MCP floor's tool once its caller is known: the charge (an error result when the window
    has no room), the read, the audit row."""
    from bench._common import READ_TOOL, get_item

    if db.run(CHARGE, (caller, int(started // WINDOW), LIMIT)) != 1:
        raise ToolError("rate limit reached")
    result = get_item(sku)
    db.run(AUDIT, (started, caller, READ_TOOL, "ok", (time.time() - started) * 1000))
    return result
