"""The SQLite ledger's connections: as many as statements run at once, whichever threads run
them; and the ledger and the checkpointer of one file take turns at writing in the process,
instead of meeting in SQLite's busy handler (which sleeps milliseconds between tries).

``create_agent``'s tools node runs each step in a thread of its own: with a connection per
thread, the ledger opened one per turn and kept it until it closed (100 turns, 101 connections).
"""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor

from bench import _common
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

from turnkit import Caller
from turnkit.graph import TurnContext
from turnkit.ledger import SqliteLedger
from turnkit.middleware import TurnkitMiddleware
from turnkit.storage import open_storage


def connections(ledger: SqliteLedger) -> int:
    return len(ledger._all)  # internal: the ledger's open connections


def test_a_statement_from_every_new_thread_reuses_the_idle_connections(tmp_path):
    ledger = SqliteLedger(tmp_path / "t.sqlite")
    try:
        for n in range(50):  # a thread of its own for each, one after another
            thread = threading.Thread(target=ledger.set_setting, args=("confirm_batch_over", n))
            thread.start()
            thread.join()
        assert ledger.settings()["confirm_batch_over"] == 49
        assert connections(ledger) == 1
        with ThreadPoolExecutor(8) as pool:  # at once: as many as run together, at most
            list(pool.map(lambda n: ledger.set_setting("confirm_batch_over", n), range(200)))
        assert 1 <= connections(ledger) <= 8
    finally:
        ledger.close()
    assert connections(ledger) == 0


def test_turns_of_create_agent_with_the_middleware_keep_one_ledger_connection(tmp_path):
    storage = open_storage(tmp_path / "t.sqlite")
    try:
        executor = _common.session_executor(storage.ledger)  # a governed read, audited
        agent = create_agent(
            _common.EndlessModel(),  # a read call, then the answer, every turn
            middleware=[TurnkitMiddleware(executor)],
            checkpointer=storage.checkpointer,
        )
        for n in range(20):  # the tools node runs each in a new thread
            agent.invoke({"messages": [HumanMessage("What does TEA-0001 cost?")]},
                         {"configurable": {"thread_id": f"t{n}"}},
                         context=TurnContext(caller=Caller.session("u_1")))  # fmt: skip
        assert len(storage.ledger.audit_rows()) == 20
        assert connections(storage.ledger) <= 2
    finally:
        storage.close()


def test_the_ledger_and_the_checkpointer_of_one_file_never_write_at_once(tmp_path):
    """With no busy timeout, a write that meets another connection's write fails at once
    ("database is locked"): two threads writing, the ledger and the checkpointer, 300 times each,
    never meet."""
    path = tmp_path / "t.sqlite"
    storage = open_storage(path)
    storage.close()
    ledger = SqliteLedger(path, busy_timeout=0.0)
    from turnkit.ledger.sqlite import writer_lock  # internal: the lock both take
    from turnkit.threads.batching import BatchingSqliteSaver  # internal: open_storage's saver

    conn = sqlite3.connect(path, timeout=0.0, check_same_thread=False)
    saver = BatchingSqliteSaver(conn, writer=writer_lock(str(path)))
    failures: list[BaseException] = []

    def checkpoints() -> None:
        try:
            for n in range(300):
                config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
                saver.put(config, empty_checkpoint(), {"step": n}, {})  # type: ignore[arg-type]
        except BaseException as exc:
            failures.append(exc)

    def settings() -> None:
        try:
            for n in range(300):
                ledger.set_setting("confirm_batch_over", n)
        except BaseException as exc:
            failures.append(exc)

    try:
        threads = [threading.Thread(target=checkpoints), threading.Thread(target=settings)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        conn.close()
        ledger.close()
    assert failures == []
