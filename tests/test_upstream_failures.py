"""An upstream that is down, slow, or killed mid-call gives an answer the model can act on, never a
hang; a write whose outcome is unknown says so and is not sent again."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _serving import free_port
from _upstream import ACT, ANN, ANN_KEY, NotesFiles, NotesServer, notes_http, notes_stdio, rights
from turnkit import Executor, McpUpstream, Registry

WAIT = 20.0
"""How long a test waits for something it expects to happen (a bound, not a timing)."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NotesServer]:
    with notes_http(tmp_path_factory.mktemp("notes-http")) as running:
        yield running


def _label() -> str:
    return uuid.uuid4().hex[:8]


def _executor(upstream: McpUpstream) -> Executor:
    return Executor(Registry([upstream]), permissions=rights(), settings=ACT)


def test_an_upstream_that_never_answered_declares_nothing_and_says_why():
    url = f"http://127.0.0.1:{free_port()}/mcp"
    with McpUpstream("notes", url=url, timeout=5) as upstream:
        registry = Registry([upstream])
    assert registry.names() == []
    [warning] = registry.warnings
    assert f"upstream 'notes' ({url}) could not be listed" in str(warning)
    assert "ConnectError" in str(warning)


def test_an_upstream_that_accepts_but_never_answers_ends_at_its_timeout():
    with socket.create_server(("127.0.0.1", 0)) as silent:  # listens, never accepts
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/mcp"
        with McpUpstream("notes", url=url, timeout=1) as upstream:
            registry = Registry([upstream])
    [warning] = registry.warnings
    assert "could not be listed (no connection within 1 s)" in str(warning)


def test_an_upstream_gone_down_answers_an_error_and_a_restarted_one_answers_again(tmp_path):
    port = free_port()
    with notes_http(tmp_path / "first", port) as server:
        upstream = McpUpstream("notes", url=server.url, timeout=5)
        executor = _executor(upstream)
        assert executor.execute(ANN, "notes.read_note", {"name": "welcome"})["status"] == "ok"

    read = executor.execute(ANN, "notes.read_note", {"name": "welcome"})
    write = executor.execute(ANN_KEY, "notes.write_note", {"name": "n", "text": "t"})
    with notes_http(tmp_path / "second", port):
        again = executor.execute(ANN, "notes.read_note", {"name": "welcome"})
    upstream.close()

    for answer in (read, write):
        assert answer["error"]["code"] == "tool_error"
        assert answer["error"]["message"].startswith(
            f"upstream 'notes' (http://127.0.0.1:{port}/mcp) cannot be reached"
        )
        assert "did not run" in answer["error"]["message"]
        assert answer["error"]["details"]["outcome"] == "not_run"
    assert again["result"] == "hello from the notes server"


def test_a_slow_read_ends_at_the_upstream_timeout(server):
    with McpUpstream("notes", url=server.url, timeout=1) as up:
        answer = _executor(up).execute(ANN, "notes.wait_read", {"seconds": 30, "label": "r"})
    assert answer["error"]["code"] == "tool_error"
    assert answer["error"]["message"] == (
        "upstream 'notes' did not answer 'wait_read' within 1 s. Nothing changed (it is a read):"
        " call again later"
    )
    assert answer["error"]["details"]["reason"] == "timeout"


def test_a_slow_write_is_reported_with_an_unknown_outcome_and_never_sent_again(server):
    label = _label()
    control = {"idempotency_key": f"slow-{label}"}
    with McpUpstream("notes", url=server.url, timeout=1) as up:
        executor = _executor(up)
        first = executor.execute(ANN_KEY, "notes.wait_write", {"seconds": 30, "label": label},
                                 control)  # fmt: skip
        repeat = executor.execute(ANN_KEY, "notes.wait_write", {"seconds": 30, "label": label},
                                  control)  # fmt: skip
        runs = server.files.runs(label=label)
    assert first["error"]["code"] == "tool_error"
    message = first["error"]["message"]
    assert "did not answer 'wait_write' within 1 s: the outcome is unknown" in message
    assert "It was not retried" in message
    assert first["error"]["details"]["outcome"] == "unknown"
    assert repeat == {**first, "replayed": True}
    assert len(runs) == 1  # sent once, by the first call


def test_per_tool_timeout_overrides_the_upstream_one(server):
    tools = {"wait_read": {"timeout": 1}}
    with McpUpstream("notes", url=server.url, timeout=25, tools=tools) as up:
        answer = _executor(up).execute(ANN, "notes.wait_read", {"seconds": 30, "label": "t"})
    assert "within 1 s" in answer["error"]["message"]


def _kill_mid_call(executor: Executor, files: NotesFiles, kill: Any) -> dict[str, Any]:
    """A write started in a thread, its server killed once the write is running; its answer."""
    label = _label()
    answers: list[dict[str, Any]] = []
    call = threading.Thread(
        target=lambda: answers.append(
            executor.execute(ANN_KEY, "notes.wait_write", {"seconds": 60, "label": label})
        )
    )
    call.start()
    deadline = time.monotonic() + WAIT
    while not files.runs(label=label):
        assert time.monotonic() < deadline, "the write never started"
        time.sleep(0.02)
    kill()
    call.join(WAIT)
    assert not call.is_alive(), "the call hangs after its upstream was killed"
    return answers[0]


def test_a_stdio_child_killed_mid_call_answers_and_the_next_call_starts_a_new_one(tmp_path):
    files = NotesFiles.under(tmp_path)
    with notes_stdio(files, timeout=25) as upstream:
        executor = _executor(upstream)
        executor.execute(ANN, "notes.read_note", {"name": "welcome"})
        first_pid = int(files.pid.read_text())
        answer = _kill_mid_call(executor, files, lambda: os.kill(first_pid, signal.SIGKILL))
        after = executor.execute(ANN, "notes.read_note", {"name": "welcome"})
        second_pid = int(files.pid.read_text())
    assert answer["error"]["code"] == "tool_error"
    assert "closed the connection during 'wait_write'" in answer["error"]["message"]
    assert "the outcome is unknown" in answer["error"]["message"]
    assert answer["error"]["details"]["reason"] == "lost"
    assert after["result"] == "hello from the notes server"
    assert second_pid != first_pid


def test_an_http_server_killed_mid_call_answers(tmp_path):
    with notes_http(tmp_path) as server, McpUpstream("notes", url=server.url, timeout=25) as up:
        answer = _kill_mid_call(_executor(up), server.files, server.process.kill)
    assert answer["error"]["code"] == "tool_error"
    assert "the outcome is unknown" in answer["error"]["message"]
    assert answer["error"]["details"]["outcome"] == "unknown"


def test_a_command_that_cannot_start_is_named(tmp_path: Path):
    missing = str(tmp_path / "no-such-server")
    with McpUpstream("notes", command=[missing, "--stdio"], timeout=5) as upstream:
        registry = Registry([upstream])
    [warning] = registry.warnings
    assert "upstream 'notes' (no-such-server ...) could not be listed" in str(warning)


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_close_ends_the_session_and_a_later_call_connects_again(server, tmp_path, transport):
    files = NotesFiles.under(tmp_path)
    upstream = McpUpstream("notes", url=server.url) if transport == "http" else notes_stdio(files)
    executor = _executor(upstream)
    first = executor.execute(ANN, "notes.read_note", {"name": "welcome"})
    upstream.close()
    second = executor.execute(ANN, "notes.read_note", {"name": "welcome"})
    upstream.close()
    assert first["status"] == second["status"] == "ok"


def test_closing_the_upstream_during_a_call_answers_the_call(server, tmp_path):
    upstream = McpUpstream("notes", url=server.url, timeout=25)
    answer = _kill_mid_call(_executor(upstream), server.files, upstream.close)
    assert answer["error"]["code"] == "tool_error"
    assert "the outcome is unknown" in answer["error"]["message"]
