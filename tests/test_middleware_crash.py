"""A process killed (SIGKILL) in the middle of a ``create_agent`` run governed by
``TurnkitMiddleware``: the next process resumes it, the write runs exactly once, and the
conversation comes back whole — on SQLite and PostgreSQL checkpointers.

(a) killed right after ``invoke`` returned at the interrupt (a write held for alice), resumed in a
new process with LangChain's ``{"decisions": [{"type": "approve"}]}``;
(b) killed right after a key caller's write ran in the tools node, before LangGraph saved that
task's writes (``writes``: the call runs again and replays its idempotency record) or the
checkpoint after it (``checkpoint``);
(c) after ``executor.confirm`` ran an approved write in the model's step (``wrap_model_call``):
while the model is asked (the step runs again on resume) and after the step's writes were saved.
"""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

import _crash_workers as w
import _middleware_crash_workers as mw
from _spawn import run
from turnkit.storage import open_storage

pytestmark = pytest.mark.slow  # end to end: skip locally with -m 'not slow'

OK = {"executed": True, "status": "ok", "result": {"updated": 1}}


reopen = w.reopen_fixture(mw.open_agent)


def assert_intact(agent, result: dict) -> None:
    """Human, the AI's set_prices call, its one tool message with ``result``, the final text."""
    state = agent.get_state(w.THREAD)
    assert state.next == ()
    assert state.interrupts == ()
    messages = state.values["messages"]
    assert [type(m) for m in messages] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    _, ai, tool, final = messages
    (call,) = ai.tool_calls
    assert tool.tool_call_id == call["id"]
    assert tool.name == "shop_set_prices"
    assert json.loads(tool.content) == result
    assert final.content == w.FINAL


@pytest.mark.usefixtures("agent_may_write")
def test_killed_at_the_interrupt_a_new_process_approves_and_writes_once(ledger_url, log, shop,
                                                                          reopen):  # fmt: skip
    run(mw.hold_then_die, ledger_url, log)
    assert shop.writes() == []
    run(mw.resume_with_approve, ledger_url, log, exitcode=0)
    assert len(shop.writes()) == 1
    agent, _ = reopen()
    assert_intact(agent, OK)


@pytest.mark.parametrize(
    ("at", "result"),
    [("writes", {**OK, "replayed": True}), ("checkpoint", OK)],
)
def test_killed_after_a_tool_write_before_its_checkpoint_the_write_is_not_repeated(
    ledger_url, log, shop, reopen, at, result
):
    run(mw.write_then_die, ledger_url, log, at)
    assert len(shop.writes()) == 1
    agent, model = reopen(w.FINAL)
    agent.invoke(None, w.THREAD, context=w.KEY, durability="sync")
    assert len(shop.writes()) == 1
    model.assert_done()
    assert_intact(agent, result)


@pytest.mark.usefixtures("agent_may_write")
@pytest.mark.parametrize(
    ("at", "again"),
    [("writes", None), ("writes", mw.APPROVE), ("checkpoint", None)],
    ids=["writes", "writes-approved-again", "checkpoint"],
)
def test_killed_after_an_approved_write_before_its_checkpoint_the_write_is_not_repeated(
    ledger_url, log, shop, reopen, at, again
):
    agent, model = reopen(w.SET_PRICES)
    agent.invoke({"messages": [HumanMessage("cheaper tea")]}, w.THREAD, context=w.SESSION)
    model.assert_done()
    run(mw.approve_then_die, ledger_url, log, at)
    assert len(shop.writes()) == 1
    agent, model = reopen(*([w.FINAL] if at == "writes" else []))  # saved with the step
    agent.invoke(again, w.THREAD, context=w.SESSION, durability="sync")
    assert len(shop.writes()) == 1
    model.assert_done()
    assert_intact(agent, OK)
    with open_storage(ledger_url) as storage:
        (confirmation,) = storage.ledger.list_confirmations()
    assert confirmation.status == "done"
    assert confirmation.outcome == OK
