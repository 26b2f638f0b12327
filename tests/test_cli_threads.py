"""``turnkit threads``: each conversation thread of a ``--db`` with its last activity, its state,
the writes that wait for a person in it and the run that holds it now — on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

from _shop import prices
from test_cli import TURNKIT, env, flat
from turnkit import Caller, Executor, Registry
from turnkit.cli.threads import PAGE, thread_rows  # internal: the command's reader, paged
from turnkit.graph import TurnContext, build_turn_graph
from turnkit.storage import open_storage
from turnkit.testing import ScriptedModel

pytestmark = pytest.mark.slow  # end to end: the real command in a subprocess

SET_PRICES = {"tool_calls": [{"name": "shop_set_prices", "args": prices("TEA-0001")}]}


def threads(db: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TURNKIT, "threads", "--db", db, *args], cwd=cwd, env=env(),
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def turn(storage, shop, rights, thread: str, *steps) -> dict:
    executor = Executor(Registry([shop]), ledger=storage.ledger, permissions=rights)
    graph = build_turn_graph(executor, ScriptedModel(list(steps)),
                             checkpointer=storage.checkpointer)  # fmt: skip
    config = {"configurable": {"thread_id": thread}}
    try:
        return graph.invoke({"messages": [HumanMessage("tea")]}, config,
                            context=TurnContext(caller=Caller.session("alice")))  # fmt: skip
    finally:
        executor.close()


def test_threads_lists_each_thread_with_its_held_writes_and_its_holder(
    ledger_url, agent_may_write, shop, rights, tmp_path
):
    with open_storage(ledger_url) as storage:
        turn(storage, shop, rights, "quiet", "Nothing to do.")
        paused = turn(storage, shop, rights, "pricing", SET_PRICES)
        (held,) = paused["__interrupt__"][0].value["confirmations"]
        leases = storage.ledger.thread_leases(ttl=60)
        lease = leases.take("pricing")
        assert lease is not None
        try:
            done = threads(ledger_url, tmp_path, "--json")
        finally:
            leases.release(lease)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {row["thread"]: row for row in json.loads(done.stdout)}
    assert list(rows) == ["pricing", "quiet"]  # most recently active first
    assert rows["pricing"]["waiting"] == [held["confirmation_id"]]
    assert rows["pricing"]["paused"] is True
    assert rows["pricing"]["lease"]  # who runs it, as the lease names them
    assert rows["pricing"]["state"] == "running"
    assert rows["quiet"] == rows["quiet"] | {"waiting": [], "lease": None, "state": "idle"}
    assert rows["quiet"]["last_activity"].endswith("Z")

    shown = threads(ledger_url, tmp_path)  # the lease given back: it waits for a person
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "waits for a person" in flat(shown.stdout)
    assert held["confirmation_id"][:8] in shown.stdout


def test_threads_of_an_empty_database_says_how_to_start_one(tmp_path):
    done = threads(str(tmp_path / "t.sqlite"), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no threads yet" in done.stdout


class Eager:
    """A checkpointer that reads each ``list`` answer whole before yielding any of it, as
    LangGraph's PostgreSQL saver does (a client-side cursor): it counts the checkpoints read."""

    def __init__(self, saver) -> None:
        self.saver, self.read = saver, 0

    def list(self, *args, **kwargs):
        found = list(self.saver.list(*args, **kwargs))
        self.read += len(found)
        yield from found


def test_threads_reads_a_page_of_a_long_history_not_all_of_it(tmp_path):
    """Stopping after ``--limit`` threads saves nothing if the query asked for every checkpoint:
    on PostgreSQL the whole history (with its stored state) would be loaded into memory."""
    with open_storage(str(tmp_path / "long.sqlite")) as storage:
        saver = storage.checkpointer
        for n in range(PAGE * 3):
            config = {"configurable": {"thread_id": f"t{n % 7}", "checkpoint_ns": ""}}
            saver.put(config, empty_checkpoint(), {"step": n}, {})
        eager = Eager(saver)
        opened = SimpleNamespace(
            storage=SimpleNamespace(checkpointer=eager, ledger=storage.ledger),
            executor=SimpleNamespace(clock=time.time),
        )
        rows = thread_rows(opened, limit=3)
    assert [row.step for row in rows] == [PAGE * 3 - 1, PAGE * 3 - 2, PAGE * 3 - 3]
    assert eager.read <= PAGE
