"""Turns run in spawned processes that hold a thread while a test looks on
(``test_thread_lease_processes.py``).

``hold`` runs a turn whose model waits: it writes ``<signals>/entered`` when the run holds the
thread and the model is called, then waits until ``<signals>/go`` exists, answers, and lets the
run finish. It exits ``FINISHED``, or ``LEASE_LOST`` when its run lost the thread meanwhile.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from _shop import Shop
from turnkit import Caller, Executor, LeaseLost, Registry, StaticPermissions
from turnkit.graph import TurnContext, build_turn_graph
from turnkit.storage import open_storage
from turnkit.testing import ScriptedModel

FINISHED, LEASE_LOST = 0, 3
ALICE = TurnContext(caller=Caller.session("alice"))
HELD_ANSWER = "the held run's answer"


def executor_on(ledger: Any, log: str) -> Executor:
    rights = StaticPermissions({"alice": {"shop.view", "shop.manage"}})
    return Executor(Registry([Shop(Path(log))]), ledger=ledger, permissions=rights)


def hold(url: str, log: str, thread: str, signals: str, ttl: float) -> None:
    folder = Path(signals)

    def waits(messages: Any, tools: Any) -> str:
        (folder / "entered").write_text("yes")
        while not (folder / "go").exists():
            time.sleep(0.02)
        return HELD_ANSWER

    with open_storage(url) as storage:
        graph = build_turn_graph(
            executor_on(storage.ledger, log), ScriptedModel([waits]),
            checkpointer=storage.checkpointer, lease_ttl=ttl,
        )  # fmt: skip
        try:
            graph.invoke(
                {"messages": [("user", "hold the thread")]},
                {"configurable": {"thread_id": thread}},
                context=ALICE,
            )
        except LeaseLost as lost:
            print(f"lease lost: {lost}", flush=True)
            sys.exit(LEASE_LOST)
    sys.exit(FINISHED)
