"""Servers for the tests, as users run them: uvicorn in a thread for an app object, and a
``turnkit serve`` process waited for until it answers ``/healthz``."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn

START_TIMEOUT = 60.0
"""How long a ``turnkit serve`` process may take to answer ``/healthz``."""


def free_port() -> int:
    """A port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def uvicorn_serving(app: Any) -> Iterator[str]:
    """``app`` served by uvicorn on 127.0.0.1 (an ephemeral port, lifespan on) in a thread, until
    the block ends; its base URL."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive(), "uvicorn stopped while starting"
        assert time.monotonic() < deadline, "uvicorn did not start within 10 s"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def wait_healthy(url: str, process: subprocess.Popen[Any], log: Path | None = None) -> None:
    """Wait until the server ``process`` started answers ``GET url/healthz`` with 200."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            told = log.read_text() if log is not None and log.exists() else ""
            raise AssertionError(f"turnkit serve stopped (status {process.returncode}): {told}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.05)
    raise AssertionError(f"turnkit serve did not answer /healthz within {START_TIMEOUT:g} s")
