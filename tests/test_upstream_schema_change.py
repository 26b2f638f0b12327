"""An upstream that changes a tool's schema never runs a write held under the old one: the same
registry refuses it when it is approved (the listing is read again first), and a registry
declared anew after ``refresh()`` leaves it pending (its declaration's fingerprint differs)."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from _upstream import ACT, ANN, ANN_KEY, NotesFiles, NotesServer, notes_http, notes_stdio, rights
from turnkit import Executor, Ledger, McpUpstream, Registry, open_ledger
from turnkit.upstream import ToolChanges


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NotesServer]:
    with notes_http(tmp_path / "notes") as running:
        yield running


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    opened = open_ledger(str(tmp_path / "ledger.sqlite"))
    yield opened
    opened.close()


@pytest.fixture
def upstream(server: NotesServer) -> Iterator[McpUpstream]:
    with McpUpstream("notes", url=server.url, timeout=10) as connected:
        yield connected


def _executor(upstream: McpUpstream, ledger: Ledger) -> Executor:
    return Executor(Registry([upstream]), ledger=ledger, permissions=rights(), settings=ACT)


def _hold(executor: Executor) -> tuple[str, str]:
    name = f"note-{uuid.uuid4().hex[:8]}"
    held = executor.execute(ANN, "notes.write_note", {"name": name, "text": "held"})
    assert held["status"] == "confirmation_required"
    return held["confirmation_id"], name


def test_a_write_held_before_its_schema_changed_is_refused_when_approved(server, upstream, ledger):
    executor = _executor(upstream, ledger)
    held, name = _hold(executor)
    server.files.schema.write_text("2")  # write_note now requires a tag

    answer = executor.confirm(held, ANN, "approve")

    assert answer["error"]["code"] == "tool_error"
    assert answer["error"]["message"].startswith(
        "upstream 'notes' changed 'write_note' since it was declared here"
    )
    assert "it was not called" in answer["error"]["message"]
    assert answer["error"]["details"]["outcome"] == "not_run"
    assert server.files.runs(name=name) == []


def test_refresh_reports_the_change_and_a_new_registry_leaves_the_hold_pending(
    server, upstream, ledger
):
    held, name = _hold(_executor(upstream, ledger))
    server.files.schema.write_text("2")

    changes = upstream.refresh()
    answer = _executor(upstream, ledger).confirm(held, ANN, "approve")

    assert changes == ToolChanges(changed=("write_note",))
    assert answer["error"]["code"] == "cannot_decide_here"
    assert ledger.get_confirmation(held).status == "pending"
    assert server.files.runs(name=name) == []

    server.files.schema.write_text("1")  # back as it was held: it may run, once
    assert upstream.refresh() == ToolChanges(changed=("write_note",))
    approved = _executor(upstream, ledger).confirm(held, ANN, "approve")
    assert approved == {"executed": True, "status": "ok", "result": {"saved": name}}
    assert len(server.files.runs(name=name)) == 1


def test_a_call_under_an_old_declaration_is_refused_until_declared_anew(server, upstream, ledger):
    old = _executor(upstream, ledger)
    server.files.schema.write_text("2")
    upstream.refresh()
    name = f"note-{uuid.uuid4().hex[:8]}"

    refused = old.execute(ANN_KEY, "notes.write_note", {"name": name, "text": "t"})
    new = _executor(upstream, ledger)
    untagged = new.execute(ANN_KEY, "notes.write_note", {"name": name, "text": "t"})
    tagged = new.execute(ANN_KEY, "notes.write_note", {"name": name, "text": "t", "tag": "x"})

    assert refused["error"]["code"] == "tool_error"
    assert "it was not called" in refused["error"]["message"]
    assert untagged["error"]["code"] == "invalid_input"
    assert tagged["status"] == "ok"
    assert len(server.files.runs(name=name)) == 1


def test_nothing_changed_is_an_empty_answer(upstream):
    upstream.api_tools()
    assert not upstream.refresh()


def test_a_new_stdio_child_is_listed_again_before_a_call_is_trusted(tmp_path):
    files = NotesFiles.under(tmp_path / "stdio")
    with notes_stdio(files, timeout=10) as upstream:
        executor = Executor(Registry([upstream]), permissions=rights(), settings=ACT)
        executor.execute(ANN, "notes.read_note", {"name": "welcome"})
        files.schema.write_text("2")
        os.kill(int(files.pid.read_text()), signal.SIGKILL)  # it comes back as another version
        executor.execute(ANN, "notes.read_note", {"name": "welcome"})  # lost, or a new child

        answer = executor.execute(ANN_KEY, "notes.write_note", {"name": "n", "text": "t"})

    assert answer["error"]["code"] == "tool_error"
    assert "changed 'write_note' since it was declared here" in answer["error"]["message"]
    assert files.runs(name="n") == []
