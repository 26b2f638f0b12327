"""The notes server of ``tests/upstream_servers/notes.py`` as the upstream tests run it: over
Streamable HTTP in a process of its own (``notes_http``), or as the stdio child of an
``McpUpstream`` (``notes_stdio``); and what it wrote (``NotesFiles.runs``)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _serving import free_port
from turnkit import Caller, Settings, StaticPermissions
from turnkit.upstream import McpUpstream

NOTES = Path(__file__).parent / "upstream_servers" / "notes.py"
START_TIMEOUT = 30.0
"""How long the notes server may take to accept connections."""
RIGHTS = {"ann": {"notes.read", "notes.write"}}
"""Ann may read and write notes."""
ANN = Caller.session("ann")
"""Ann, signed in: her agent's writes are held for her."""
ANN_KEY = Caller.key("k_ann", user_id="ann", scopes={"notes.tools:read", "notes.tools:write"})
"""Ann's API key with both of the notes' scopes: its writes run at once."""
ACT = Settings(api_session_write_modules=frozenset({"notes"}))
"""The agent may act in the notes module (its writes are shown to a session, and held)."""


def rights() -> StaticPermissions:
    return StaticPermissions(RIGHTS)


@dataclass(frozen=True)
class NotesFiles:
    """The files one notes server reads and writes."""

    log: Path
    """One JSON line per write it ran."""
    schema: Path
    """Holds ``2`` while ``write_note`` requires a ``tag``."""
    pid: Path
    """Its process id."""

    @classmethod
    def under(cls, folder: Path) -> NotesFiles:
        folder.mkdir(parents=True, exist_ok=True)
        return cls(folder / "notes.log", folder / "schema", folder / "pid")

    def env(self) -> dict[str, str]:
        return {"NOTES_LOG": str(self.log), "NOTES_SCHEMA": str(self.schema),
                "NOTES_PID": str(self.pid)}  # fmt: skip

    def runs(self, **match: Any) -> list[dict[str, Any]]:
        """The writes it ran whose arguments include ``match``."""
        if not self.log.exists():
            return []
        lines = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [line for line in lines if match.items() <= line["args"].items()]


@dataclass(frozen=True)
class NotesServer:
    url: str
    files: NotesFiles
    process: subprocess.Popen[bytes]


@contextmanager
def notes_http(folder: Path, port: int | None = None) -> Iterator[NotesServer]:
    """The notes server over Streamable HTTP on 127.0.0.1 until the block ends."""
    files = NotesFiles.under(folder)
    port = port or free_port()
    process = subprocess.Popen(
        [sys.executable, str(NOTES), "http", str(port)], env={**os.environ, **files.env()}
    )
    try:
        wait_listening(port, process)
        yield NotesServer(f"http://127.0.0.1:{port}/mcp", files, process)
    finally:
        process.kill()  # not terminate: uvicorn would wait for the tools still sleeping
        process.wait(10)


def wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the notes server stopped ({process.returncode})"
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"the notes server did not listen within {START_TIMEOUT:g} s")


def notes_stdio(files: NotesFiles, **options: Any) -> McpUpstream:
    """An upstream running the notes server as its stdio child."""
    command = [sys.executable, str(NOTES), "stdio"]
    return McpUpstream("notes", command=command, env=files.env(), **options)
