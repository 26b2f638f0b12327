"""Real ``langgraph dev`` servers for the tests, started as users start them.

``launch`` starts ``langgraph dev --config ...`` as a subprocess on a free port, offline (no
analytics, no version check, no tracing, none of this process's model or ``TURNKIT_*``
variables); ``wait_until_ready`` waits for ``GET /ok``; ``Server.stop`` ends it. The demo's
catalogue helpers count every price write in the catalogue's own database.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import time
import urllib.request
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from _serving import free_port
from turnkit.demo import Catalogue

REPO = Path(__file__).resolve().parents[1]
LANGGRAPH = Path(sys.executable).parent / "langgraph"
START_TIMEOUT = 60.0
"""How long a server may take to answer ``GET /ok``."""
RUN_TIMEOUT = 30.0
"""How long one SDK or REST call may take (each run waits ~1 s in the server's queue)."""


def offline_env(**extra: str) -> dict[str, str]:
    """This process's environment without model or tracing credentials, plus ``extra``."""
    dropped = ("OPENAI_", "LANGSMITH_", "LANGCHAIN_", "TURNKIT_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    env.update(
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        LANGGRAPH_NO_VERSION_CHECK="1",
        LANGSMITH_TRACING="false",
        **extra,
    )
    return env


class Server:
    """A running ``langgraph dev``: its URL, process and log file."""

    def __init__(self, url: str, process: subprocess.Popen[bytes], log: Path) -> None:
        self.url, self.process, self.log = url, process, log

    def log_tail(self, lines: int = 60) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def launch(config: Path, cwd: Path, **env: str) -> Server:
    """Start ``langgraph dev --config config`` in ``cwd`` (not yet waited for)."""
    assert LANGGRAPH.exists(), f"{LANGGRAPH} is missing: pip install -e '.[dev]'"
    port = free_port()
    log = cwd / f"server-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1",
             "--port", str(port), "--config", str(config)],
            cwd=cwd,
            env=offline_env(**env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    return Server(f"http://127.0.0.1:{port}", process, log)


def wait_until_ready(server: Server) -> float:
    """Wait until ``server`` answers ``GET /ok``; the seconds it took. Fails the test with the
    server's log if it exits or does not answer in ``START_TIMEOUT``."""
    started = time.monotonic()
    while time.monotonic() - started < START_TIMEOUT:
        if server.process.poll() is not None:
            pytest.fail(
                f"langgraph dev exited with {server.process.returncode}:\n{server.log_tail()}"
            )
        try:
            with urllib.request.urlopen(f"{server.url}/ok", timeout=2) as response:
                if json.loads(response.read()).get("ok") is True:
                    return time.monotonic() - started
        except OSError:
            pass
        time.sleep(0.2)
    pytest.fail(f"langgraph dev did not answer GET /ok in {START_TIMEOUT} s:\n{server.log_tail()}")


async def wait(coroutine: Any) -> Any:
    """``coroutine``'s result, failing after ``RUN_TIMEOUT``."""
    return await asyncio.wait_for(coroutine, RUN_TIMEOUT)


def count_price_writes(db: Path) -> None:
    """Create the demo catalogue at ``db`` now and log every price UPDATE in it, whoever makes
    it, in its table ``price_writes``."""
    Catalogue(db).setup()
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        conn.executescript(
            "CREATE TABLE price_writes (sku TEXT, price REAL);"
            "CREATE TRIGGER log_price AFTER UPDATE OF price ON products"
            " BEGIN INSERT INTO price_writes VALUES (new.sku, new.price); END;"
        )


def query(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """The rows of ``sql`` on the SQLite file ``db``, opened read-only."""
    with closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)) as conn:
        return conn.execute(sql, params).fetchall()
