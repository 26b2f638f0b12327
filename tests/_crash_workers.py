"""Turns run in spawned processes that die by SIGKILL at chosen moments (test_crash_safety.py).

Each worker opens its own storage (a new process has nothing but the URL), runs part of a turn
and kills itself with ``SIGKILL``: no ``finally``, no atexit, no flush — as a power cut or the
OOM killer would. A worker that reaches its end without dying exits with ``NOT_KILLED``.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Literal

from langchain_core.messages import HumanMessage
from langgraph.types import Command

from _shop import Shop, prices
from turnkit import Caller, Executor, Registry, StaticPermissions
from turnkit.graph import TurnContext, build_turn_graph
from turnkit.storage import Storage, open_storage
from turnkit.testing import ScriptedModel

NOT_KILLED = 2
"""Exit code of a worker whose moment to die never came."""
THREAD = {"configurable": {"thread_id": "crash-thread"}}
SESSION = TurnContext(caller=Caller.session("alice"))
KEY = TurnContext(
    caller=Caller.key(
        "key-1", user_id="alice", scopes={"shop.products:read", "shop.products:write"}
    )
)
SET_PRICES = {"tool_calls": [{"name": "shop_set_prices", "args": prices("TEA-0001")}]}
FINAL = "Prices updated."
KillAt = Literal["writes", "checkpoint"]


def open_turn(
    url: str,
    log: str,
    steps: list[Any],
    *,
    die: tuple[str, KillAt] | None = None,
    langgraph_saver: bool = False,
) -> tuple[Storage, Executor, Any, ScriptedModel]:
    """A storage, an executor on its ledger, a scripted model and the turn graph (all new).

    With ``die=(node, at)``, the graph saves through a saver that dies ``at`` the save of
    ``node`` after it wrote: of turnkit's storage class (which saves a step's held task writes
    with the next checkpoint), or with ``langgraph_saver`` of LangGraph's own, as a user's saver.
    """
    storage = open_storage(url)
    rights = StaticPermissions({"alice": {"shop.view", "shop.manage"}})
    executor = Executor(Registry([Shop(Path(log))]), ledger=storage.ledger, permissions=rights)
    model = ScriptedModel(steps)
    saver = storage.checkpointer
    if die is not None:
        saver = mortal(saver, log, *die, langgraph_saver=langgraph_saver)
        saver.turnkit_held = not langgraph_saver
    graph = build_turn_graph(executor, model, checkpointer=saver)
    return storage, executor, graph, model


def close_turn(storage: Storage, executor: Executor) -> None:
    executor.close()
    storage.close()


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _written(saver: Any) -> bool:
    return bool(Shop(Path(saver.turnkit_log)).writes())


class _Mortal:
    """A saver mixin that dies around the save of the node that wrote to the shop.

    ``at="writes"``: dies instead of saving that node's writes (task ``put_writes``); the node
    is lost with everything it returned, so LangGraph must run it again on resume.
    ``at="checkpoint"``: lets those writes be saved, then dies instead of saving the checkpoint
    after the step (``put``); the resume applies the saved writes without running the node.

    LangGraph submits task writes and checkpoints to a thread pool, so they may start in either
    order: a checkpoint save after the write first waits (bounded) for the node's writes. Not so
    under the turn graph on turnkit's saver, which holds the run's saves back and writes them in
    one transaction (``batched``, ``turnkit_held``; after the write, at the run's end): there
    ``"checkpoint"`` dies at the first checkpoint written after the write, before anything of
    that transaction is committed, and ``"writes"`` wherever the node's writes are written.
    """

    turnkit_log: str
    turnkit_node: str
    turnkit_at: KillAt
    turnkit_saved: threading.Event
    turnkit_held = False
    """True under the turn graph on turnkit's saver: task writes wait for the next checkpoint."""

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        ours = task_path.endswith(f", {self.turnkit_node}") and _written(self)
        if ours and self.turnkit_at == "writes":
            _die()
        super().put_writes(config, writes, task_id, task_path)  # type: ignore[misc]
        if ours:
            self.turnkit_saved.set()

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        if _written(self):  # the step that wrote is over
            if not self.turnkit_held:
                self.turnkit_saved.wait(timeout=30)  # "writes": put_writes kills us meanwhile
            if self.turnkit_at == "checkpoint":
                _die()
        return super().put(config, checkpoint, metadata, new_versions)  # type: ignore[misc]


def mortal(saver: Any, log: str, node: str, at: KillAt, *, langgraph_saver: bool = False) -> Any:
    """A saver of ``saver``'s class (or of the LangGraph class it extends), on its connection,
    that dies ``at`` the save of ``node`` once the shop has written."""
    cls = type(saver)
    if langgraph_saver:
        cls = next(c for c in cls.__mro__ if c.__module__.startswith("langgraph.checkpoint"))
    dying = type(f"Mortal{cls.__name__}", (_Mortal, cls), {})(saver.conn)
    dying.turnkit_log, dying.turnkit_node, dying.turnkit_at = log, node, at
    dying.turnkit_saved = threading.Event()
    return dying


def hold_then_die(url: str, log: str) -> None:
    """Alice's turn holds set_prices at the interrupt; the process dies right after ``invoke``."""
    _, _, graph, _ = open_turn(url, log, [SET_PRICES])
    result = graph.invoke({"messages": [HumanMessage("cheaper tea")]}, THREAD, context=SESSION)
    if "__interrupt__" in result:
        _die()
    print("the turn did not stop at an interrupt:", result, file=sys.stderr)
    sys.exit(NOT_KILLED)


def write_then_die(url: str, log: str, at: KillAt, langgraph_saver: bool = False) -> None:
    """A key caller's set_prices runs at once (not held); the process dies at ``at`` after it."""
    die: tuple[str, KillAt] = ("execute", at)
    _, _, graph, _ = open_turn(url, log, [SET_PRICES], die=die, langgraph_saver=langgraph_saver)
    graph.invoke(
        {"messages": [HumanMessage("cheaper tea")]}, THREAD, context=KEY, durability="sync"
    )
    sys.exit(NOT_KILLED)


def approve_then_die(url: str, log: str, confirmation_id: str, at: KillAt) -> None:
    """Resume alice's held turn with approve; die at ``at`` after ``executor.confirm`` wrote."""
    _, _, graph, _ = open_turn(url, log, [], die=("await_confirmation", at))
    resume = Command(resume={confirmation_id: "approve"})
    graph.invoke(resume, THREAD, context=SESSION, durability="sync")
    sys.exit(NOT_KILLED)


def _die_asked(messages: Any, tools: Any) -> Any:
    """A model step that kills the process while the model is asked."""
    _die()


def die_while_asking(url: str, log: str) -> None:
    """Alice asks; the process dies while the model is asked (before any round of tool calls)."""
    _, _, graph, _ = open_turn(url, log, [_die_asked])
    graph.invoke({"messages": [HumanMessage("cheaper tea")]}, THREAD, context=SESSION)
    sys.exit(NOT_KILLED)


def write_then_die_answering(url: str, log: str) -> None:
    """A key caller's set_prices runs at once; the process dies while the model is asked for
    its answer after it (the steps since the round are not saved yet)."""
    _, _, graph, _ = open_turn(url, log, [SET_PRICES, _die_asked])
    graph.invoke({"messages": [HumanMessage("cheaper tea")]}, THREAD, context=KEY)
    sys.exit(NOT_KILLED)


def resume_with_approve(url: str, log: str, confirmation_id: str) -> None:
    """A fresh process approves the held call; the model is asked once more, with the result."""
    storage, executor, graph, model = open_turn(url, log, [FINAL])
    graph.invoke(Command(resume={confirmation_id: "approve"}), THREAD, context=SESSION)
    model.assert_done()
    close_turn(storage, executor)


def reopen_fixture(opener: Any) -> Any:
    """The test files' ``reopen`` fixture for ``opener`` (``open_turn``, or the middleware's
    ``open_agent``): a new storage, executor, runnable and scripted model on the same URL,
    closed afterwards; ``reopen(*steps)`` gives ``(runnable, model)``."""
    import pytest

    @pytest.fixture
    def reopen(ledger_url: str, log: Any) -> Any:
        opened = []

        def make(*steps: Any) -> tuple[Any, Any]:
            parts = opener(ledger_url, log, list(steps))
            opened.append(parts)
            return parts[2], parts[3]

        yield make
        for storage, executor, _, _ in opened:
            close_turn(storage, executor)

    return reopen
