"""An upstream MCP server's tools run through the executor like turnkit's own: the SDK's server
in a subprocess, over Streamable HTTP and over stdio (``tests/upstream_servers/notes.py``)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from _upstream import ACT, ANN, ANN_KEY, NotesFiles, NotesServer, notes_http, notes_stdio, rights
from turnkit import Executor, McpUpstream, Registry, open_ledger


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NotesServer]:
    with notes_http(tmp_path_factory.mktemp("notes-http")) as running:
        yield running


@pytest.fixture(scope="module", params=["http", "stdio"])
def upstream(
    request: pytest.FixtureRequest, server: NotesServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[McpUpstream, NotesFiles]]:
    """The notes upstream over each transport, and the files its server writes."""
    if request.param == "http":
        with McpUpstream("notes", url=server.url, timeout=10) as over_http:
            yield over_http, server.files
        return
    files = NotesFiles.under(tmp_path_factory.mktemp("notes-stdio"))
    with notes_stdio(files, timeout=10) as over_stdio:
        yield over_stdio, files


@pytest.fixture
def executor(upstream: tuple[McpUpstream, NotesFiles], tmp_path: Path) -> Iterator[Executor]:
    ledger = open_ledger(str(tmp_path / "ledger.sqlite"))
    running = Executor(Registry([upstream[0]]), ledger=ledger, permissions=rights(), settings=ACT)
    yield running
    running.close()
    ledger.close()


def _name() -> str:
    return f"note-{uuid.uuid4().hex[:8]}"


def test_a_read_runs_at_once_for_a_session(executor):
    answer = executor.execute(ANN, "notes.read_note", {"name": "welcome"})
    assert answer == {"executed": True, "status": "ok", "result": "hello from the notes server"}


def test_a_session_write_is_held_then_runs_once_when_approved(executor, upstream):
    files = upstream[1]
    name = _name()
    held = executor.execute(ANN, "notes.write_note", {"name": name, "text": "hi"})
    assert held["status"] == "confirmation_required"
    assert executor.confirmation(held["confirmation_id"]).status == "pending"
    assert files.runs(name=name) == []

    answer = executor.confirm(held["confirmation_id"], ANN, "approve")
    again = executor.confirm(held["confirmation_id"], ANN, "approve")

    assert answer == {"executed": True, "status": "ok", "result": {"saved": name}}
    assert again == {**answer, "already_decided": True}
    [run] = files.runs(name=name)
    assert run["args"] == {"name": name, "text": "hi"}
    assert len(run["meta"]["io.turnkit/idempotency-key"]) == 32  # derived from the approval


def test_a_key_write_runs_once_for_one_idempotency_key_which_is_forwarded(executor, upstream):
    files = upstream[1]
    name = _name()
    control = {"idempotency_key": "k-1"}
    first = executor.execute(ANN_KEY, "notes.write_note", {"name": name, "text": "a"}, control)
    second = executor.execute(ANN_KEY, "notes.write_note", {"name": name, "text": "a"}, control)
    assert first == {"executed": True, "status": "ok", "result": {"saved": name}}
    assert second == {**first, "replayed": True}
    [run] = files.runs(name=name)
    assert run["meta"]["io.turnkit/idempotency-key"]
    assert run["meta"]["io.turnkit/idempotency-key"] != "k-1"  # the caller's key never leaves


def test_an_upstream_is_error_is_a_tool_error_the_model_can_read(executor):
    answer = executor.execute(ANN_KEY, "notes.read_note", {"name": "missing"})
    assert answer["error"]["code"] == "tool_error"
    assert answer["error"]["message"] == "no note 'missing'; try 'welcome'"
    assert answer["error"]["details"] == {"upstream": "notes", "tool": "read_note"}


def test_a_picture_is_summarised_and_json_text_is_parsed(executor):
    picture = executor.execute(ANN, "notes.get_picture", {})["result"]
    assert picture == [
        {"type": "image", "mime_type": "image/png", "bytes": 100},
        {"type": "text", "text": "a tiny picture"},
    ]
    assert executor.execute(ANN, "notes.read_stats", {})["result"]["version"] == 1


def test_arguments_are_checked_against_the_upstream_schema_before_the_call(executor, upstream):
    answer = executor.execute(ANN_KEY, "notes.write_note", {"name": "", "text": 3})
    assert answer["error"]["code"] == "invalid_input"
    assert upstream[1].runs(name="") == []


async def test_async_calls_work_from_a_running_loop(executor, upstream):
    name = _name()
    read = await executor.aexecute(ANN, "notes.read_note", {"name": "welcome"})
    wrote = await executor.aexecute(ANN_KEY, "notes.write_note", {"name": name, "text": "x"})
    together = await asyncio.gather(
        *(executor.aexecute(ANN, "notes.read_note", {"name": "welcome"}) for _ in range(5))
    )
    assert read["result"] == "hello from the notes server"
    assert wrote["result"] == {"saved": name}
    assert [answer["status"] for answer in together] == ["ok"] * 5
    assert len(upstream[1].runs(name=name)) == 1


async def test_a_sync_call_works_inside_a_running_loop(executor):
    answer = executor.execute(ANN, "notes.read_note", {"name": "welcome"})
    assert answer["result"] == "hello from the notes server"


def test_headers_and_the_bearer_token_reach_the_upstream(server, monkeypatch):
    monkeypatch.setenv("NOTES_TOKEN", "s3cret")
    with McpUpstream(
        "notes", url=server.url, headers={"X-Team": "blue"}, token_env="NOTES_TOKEN"
    ) as upstream:
        executor = Executor(Registry([upstream]), permissions=rights())
        answer = executor.execute(ANN, "notes.show_headers", {})
    assert answer["result"] == {"x_team": "blue", "authorization": "Bearer s3cret"}


def test_an_unset_token_variable_is_named_and_nothing_is_declared(server, monkeypatch):
    monkeypatch.delenv("NOTES_TOKEN", raising=False)
    with McpUpstream("notes", url=server.url, token_env="NOTES_TOKEN") as upstream:
        registry = Registry([upstream])
    assert registry.names() == []
    [warning] = registry.warnings
    assert "NOTES_TOKEN (token_env) is not set" in str(warning)


async def test_async_calls_make_no_blocking_call_on_the_event_loop(executor, upstream):
    """What ``langgraph dev`` checks (blockbuster): the handler only awaits the upstream's loop."""
    blockbuster = pytest.importorskip("blockbuster")
    name = _name()
    with blockbuster.blockbuster_ctx():
        read = await executor.aexecute(ANN, "notes.read_note", {"name": "welcome"})
        wrote = await executor.aexecute(ANN_KEY, "notes.write_note", {"name": name, "text": "x"})
        changes = await upstream[0].arefresh()
    assert read["status"] == wrote["status"] == "ok"
    assert not changes
