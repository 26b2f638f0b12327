"""The third-party filesystem server (``@modelcontextprotocol/server-filesystem``, npm) as a
library user meets it: every tool it lists is declared (their schemas carry a draft-07
``$schema``, which the upstream drops), a read runs at once, and its process killed between calls
gives the next call an answer — a new child, not a hang. (The guide's run, with the inbox:
tests/test_docs_upstream.py; a child killed mid-call: tests/test_upstream_failures.py.)"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from _upstream import ANN
from turnkit import Executor, McpUpstream, Registry, Settings, StaticPermissions, open_ledger

RIGHTS = StaticPermissions({"ann": {"files.read", "files.write"}})


def child_pids(folder: Path) -> list[int]:
    """The filesystem servers serving ``folder`` (its path is on their command line)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            line = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:  # not a process, or it ended meanwhile
            continue
        if proc.name.isdigit() and str(folder).encode() in line:
            found.append(int(proc.name))
    return found


def test_the_filesystem_server_is_declared_whole_and_survives_its_process_dying(
    tmp_path, mcp_filesystem
):
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "a.txt").write_text("first\n")
    ledger = open_ledger(str(tmp_path / "ledger.sqlite"))
    settings = Settings(api_session_write_modules=frozenset({"files"}))
    with McpUpstream("files", command=[mcp_filesystem, str(shared)], timeout=20) as files:
        executor = Executor(Registry([files]), ledger=ledger, permissions=RIGHTS,
                            settings=settings)  # fmt: skip
        try:
            assert files.left_out == []
            assert {"files.read_text_file", "files.write_file", "files.edit_file"} <= set(
                executor.registry.names()
            )
            read = executor.execute(ANN, "files.read_text_file", {"path": "a.txt"})
            assert "first" in str(read["result"]), read
            held = executor.execute(ANN, "files.write_file", {"path": "b.txt", "content": "x"})
            assert held["status"] == "confirmation_required", held

            (pid,) = child_pids(shared)
            os.kill(pid, signal.SIGKILL)
            after = executor.execute(ANN, "files.read_text_file", {"path": "a.txt"})
            if "error" in after:  # the loss noticed by this call: it says so, and did not hang
                assert after["error"]["details"]["outcome"] in ("not_run", "unknown"), after
                after = executor.execute(ANN, "files.read_text_file", {"path": "a.txt"})
            assert "first" in str(after["result"]), after
            assert child_pids(shared) not in ([], [pid])  # a new child serves it
        finally:
            executor.close()
            ledger.close()
