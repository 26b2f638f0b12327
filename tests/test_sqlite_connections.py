"""The SQLite ledger's connections: a thread's is given back when the thread ends, and taken by
the next new thread, so there are as many as threads alive that wrote.

``create_agent``'s tools node runs each step in a thread of its own: with a connection per
thread, the ledger opened one per turn and kept it until it closed (100 turns, 101 connections).
"""

from __future__ import annotations

import gc
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench import _common
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from turnkit import Caller, SqliteLedger
from turnkit.graph import TurnContext
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
        assert connections(ledger) == 2  # this thread's, and the one the 50 passed on
        with ThreadPoolExecutor(8) as pool:  # 8 threads alive at once
            list(pool.map(lambda n: ledger.set_setting("confirm_batch_over", n), range(200)))
        assert connections(ledger) <= 9
        with ThreadPoolExecutor(8) as pool:  # 8 new ones, after those ended: theirs again
            list(pool.map(lambda n: ledger.set_setting("confirm_batch_over", n), range(200)))
        assert connections(ledger) <= 9
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


def test_a_ledger_dropped_without_close_leaves_no_file_open(tmp_path):
    """Its connections go with it, as before they were given back when threads end: nothing
    else (no registry of callbacks) keeps the ledger or a connection alive."""
    open_files = Path("/proc/self/fd")
    before = len(list(open_files.iterdir()))
    for n in range(20):
        ledger = SqliteLedger(tmp_path / f"t{n}.sqlite")
        ledger.set_setting("confirm_batch_over", n)
        del ledger
    gc.collect()
    assert len(list(open_files.iterdir())) == before
