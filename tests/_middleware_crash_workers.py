"""``create_agent`` runs governed by ``TurnkitMiddleware`` in spawned processes that die by SIGKILL
at chosen moments (test_middleware_crash.py); the savers that die are ``_crash_workers.mortal``.

Each worker opens its own storage from the URL, runs part of a turn and kills itself: no
``finally``, no flush, as a power cut would. One that reaches its end exits with ``NOT_KILLED``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.types import Command

from _crash_workers import FINAL, KEY, NOT_KILLED, SESSION, SET_PRICES, THREAD, KillAt, mortal
from _crash_workers import _die as die
from _crash_workers import _die_asked as die_asked
from _shop import Shop
from turnkit import Executor, Registry, StaticPermissions
from turnkit.middleware import TurnkitMiddleware
from turnkit.storage import Storage, open_storage
from turnkit.testing import ScriptedModel

HOLDS = "model"
"""The node where held writes are asked about and decided (``wrap_model_call``), before the model
is asked in the same step."""
TOOL_CALL = "0000000000, 0000000000"
"""The end of the task path of the round's first tool call (``create_agent`` sends each call to
its tools node as a push task, ``~__pregel_push, <step>, <index>``)."""
APPROVE = Command(resume={"decisions": [{"type": "approve"}]})


def open_agent(
    url: str, log: str, steps: list[Any], *, die: tuple[str, KillAt] | None = None
) -> tuple[Storage, Executor, Any, ScriptedModel]:
    """A storage, an executor on its ledger, a scripted model and the agent (all new)."""
    storage = open_storage(url)
    rights = StaticPermissions({"alice": {"shop.view", "shop.manage"}})
    executor = Executor(Registry([Shop(Path(log))]), ledger=storage.ledger, permissions=rights)
    model = ScriptedModel(steps)
    saver = storage.checkpointer if die is None else mortal(storage.checkpointer, log, *die)
    agent = create_agent(model, middleware=[TurnkitMiddleware(executor)], checkpointer=saver)
    return storage, executor, agent, model


def hold_then_die(url: str, log: str) -> None:
    """Alice's run holds set_prices at the interrupt; the process dies right after ``invoke``."""
    _, _, agent, _ = open_agent(url, log, [SET_PRICES])
    request = {"messages": [HumanMessage("cheaper tea")]}
    result = agent.invoke(request, THREAD, context=SESSION, durability="sync")
    if "__interrupt__" in result:
        die()
    print("the run did not stop at an interrupt:", result, file=sys.stderr)
    sys.exit(NOT_KILLED)


def resume_with_approve(url: str, log: str) -> None:
    """A fresh process approves the held call in LangChain's shape; the model answers once."""
    storage, executor, agent, model = open_agent(url, log, [FINAL])
    agent.invoke(APPROVE, THREAD, context=SESSION, durability="sync")
    model.assert_done()
    executor.close()
    storage.close()


def write_then_die(url: str, log: str, at: KillAt) -> None:
    """A key caller's set_prices runs at once (not held); the process dies at ``at`` after it."""
    _, _, agent, _ = open_agent(url, log, [SET_PRICES], die=(TOOL_CALL, at))
    request = {"messages": [HumanMessage("cheaper tea")]}
    agent.invoke(request, THREAD, context=KEY, durability="sync")
    sys.exit(NOT_KILLED)


def approve_then_die(url: str, log: str, at: KillAt) -> None:
    """Resume alice's held run with approve; die after ``executor.confirm`` wrote: ``writes``,
    while the model is asked in the same step (nothing of the step is saved); ``checkpoint``,
    once the step's writes (the outcome, the model's answer) are saved, before the checkpoint."""
    if at == "writes":
        _, _, agent, _ = open_agent(url, log, [die_asked])
    else:
        _, _, agent, _ = open_agent(url, log, [FINAL], die=(HOLDS, at))
    agent.invoke(APPROVE, THREAD, context=SESSION, durability="sync")
    sys.exit(NOT_KILLED)
