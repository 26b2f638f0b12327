"""One writer per thread across OS processes, on SQLite and on PostgreSQL.

A spawned process holds a thread (its model waits, ``_lease_workers.hold``); the test process,
on the same database, is refused with ``ThreadBusy`` (an ``Agent``: ``AgentBusy``). A holder that
is SIGKILLed frees the thread at once — on PostgreSQL its session ends, on SQLite its row names a
process of this machine that no longer exists — and the next run continues the chain intact. A
holder on another machine, which cannot be seen dead, frees the thread when its lease expires. A
holder that stalls (SIGSTOP) past its lease while another run takes the thread writes nothing
more when it wakes: ``LeaseLost``, no fork in the chain.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import _lease_workers as w
from _spawn import SPAWN
from conftest import postgres_url
from turnkit import Agent, AgentBusy, ThreadBusy
from turnkit.graph import build_turn_graph
from turnkit.storage import open_storage
from turnkit.testing import ScriptedModel

pytestmark = pytest.mark.slow

THREAD = "shared-thread"
TTL = 3.0
"""Long enough that a killed holder's row is still held when the test first looks (it is renewed
when a third of it is gone, so at least 2 s remain), short enough to wait out."""


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path) -> str:
    return str(tmp_path / "leases.sqlite") if request.param == "sqlite" else postgres_url()


class Holder:
    """A spawned ``hold`` worker and the files that signal it."""

    def __init__(self, url: str, log: str, signals: Path) -> None:
        self.signals = signals
        signals.mkdir(exist_ok=True)
        self.process = SPAWN.Process(
            target=w.hold, args=(url, log, THREAD, str(signals), TTL), daemon=True
        )
        self.process.start()
        deadline = time.monotonic() + 120
        while not (signals / "entered").exists():
            assert self.process.is_alive(), f"the holder ended with {self.process.exitcode}"
            assert time.monotonic() < deadline, "the holder never reached its model"
            time.sleep(0.02)

    def go_on(self) -> None:
        (self.signals / "go").write_text("go")

    def ended_with(self) -> int | None:
        self.process.join(120)
        return self.process.exitcode

    def kill(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.join(30)


@pytest.fixture
def holder(url, log, tmp_path) -> Iterator[Holder]:
    held = Holder(url, log, tmp_path / "signals")
    yield held
    held.go_on()
    if held.process.is_alive():
        os.kill(held.process.pid, signal.SIGCONT)
        held.process.join(30)
        if held.process.is_alive():
            held.kill()


def turn(url: str, log: str, reply: str, *, wait: float = 0.0) -> list[Any]:
    """A whole turn on the thread from this process; the thread's messages after it."""
    with open_storage(url) as storage:
        graph = build_turn_graph(
            w.executor_on(storage.ledger, log), ScriptedModel([reply]),
            checkpointer=storage.checkpointer, lease_ttl=TTL,
        )  # fmt: skip
        config = {"configurable": {"thread_id": THREAD, "busy_timeout": wait}}
        out = graph.invoke({"messages": [("user", reply)]}, config, context=w.ALICE)
        return list(out["messages"])


def assert_one_chain(url: str) -> int:
    """The thread's checkpoints form one line: each has one parent, no two share a parent."""
    with open_storage(url) as storage:
        found = list(storage.checkpointer.list({"configurable": {"thread_id": THREAD}}))
    parents = [c.parent_config["configurable"]["checkpoint_id"] for c in found if c.parent_config]
    ids = {c.config["configurable"]["checkpoint_id"] for c in found}
    assert len(parents) == len(set(parents)), "two checkpoints share a parent: the chain forked"
    assert set(parents) <= ids, "a checkpoint's parent is missing"
    assert len(found) - len(parents) == 1, "more than one first checkpoint"
    return len(found)


def test_another_process_is_refused_while_the_holder_runs_then_goes_on(url, log, holder):
    with pytest.raises(ThreadBusy) as busy:
        turn(url, log, "me too")
    assert busy.value.holder
    assert f":{holder.process.pid}#" in busy.value.holder
    agent = Agent(ScriptedModel([]), storage=url, thread_id=THREAD, tools=[])
    with agent, pytest.raises(AgentBusy, match="another process"):
        agent.prompt("hello?")
    holder.go_on()
    assert holder.ended_with() == w.FINISHED
    messages = turn(url, log, "my turn now")
    assert [m.content for m in messages if m.type == "ai"] == [w.HELD_ANSWER, "my turn now"]
    assert_one_chain(url)


def test_a_killed_holder_frees_the_thread_and_the_chain_goes_on_intact(url, log, holder):
    """PostgreSQL ends the lock with the holder's session; on SQLite the row names a process of
    this machine that no longer exists, so the next run takes it without waiting for it to
    expire."""
    holder.kill()
    messages = turn(url, log, "after the crash")
    assert messages[-1].content == "after the crash"
    assert w.HELD_ANSWER not in [m.content for m in messages]
    assert_one_chain(url)


def test_a_dead_holder_on_another_machine_is_waited_out_until_its_lease_expires(url, log, holder):
    """A holder on another machine cannot be seen dead from here (on SQLite, a file shared over
    the network; on PostgreSQL behind a pooler): its lease frees the thread when it expires. A
    direct PostgreSQL lease ends with its session, wherever its holder ran: free at once."""
    holder.kill()
    if "postgresql" in url:
        assert turn(url, log, "at once")[-1].content == "at once"
        return
    with open_storage(url) as storage:  # as if the killed holder had run on another machine
        storage.ledger._run("UPDATE turnkit_thread_leases SET machine = 'elsewhere'")
    with pytest.raises(ThreadBusy):
        turn(url, log, "too soon")
    started = time.monotonic()
    messages = turn(url, log, "after the expiry", wait=30)
    assert time.monotonic() - started < 30
    assert messages[-1].content == "after the expiry"
    assert_one_chain(url)


def test_a_holder_that_stalled_past_its_lease_writes_nothing_when_it_wakes(url, log, holder):
    if "postgresql" in url:  # the holder's lock session ends under it (idle timeout, restart)
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            ended = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name LIKE %s",
                (f"%:{holder.process.pid}#%",),  # the holder's lease session, and no other
            ).fetchall()
        assert ended == [(True,)]
    else:  # the holder stops (SIGSTOP) past its lease's expiry
        os.kill(holder.process.pid, signal.SIGSTOP)
        time.sleep(TTL + 0.5)
    messages = turn(url, log, "I took the thread", wait=30)
    assert messages[-1].content == "I took the thread"
    os.kill(holder.process.pid, signal.SIGCONT)
    holder.go_on()
    assert holder.ended_with() == w.LEASE_LOST
    with open_storage(url) as storage:
        graph = build_turn_graph(
            w.executor_on(storage.ledger, log), ScriptedModel([]), checkpointer=storage.checkpointer
        )
        state = graph.get_state({"configurable": {"thread_id": THREAD}})
    contents = [m.content for m in state.values["messages"]]
    assert contents[-1] == "I took the thread"
    assert w.HELD_ANSWER not in contents
    assert_one_chain(url)
