"""A process killed (SIGKILL) in the middle of a turn: the next process resumes it, the write runs
exactly once, and the conversation comes back whole.

Three moments, on SQLite and PostgreSQL:
(a) right after ``invoke`` returned at the interrupt (a write held for alice);
(b) right after a key caller's write ran in ``execute``, before that node's writes were saved
    (``writes``: the node runs again and replays its idempotency record) or the checkpoint after
    it (``checkpoint``: on LangGraph's savers the saved writes are applied and the node does not
    run again; turnkit's storage holds a turn's saves back until the run acts or ends, so both
    are lost together with the rest of the turn after ``execute`` began, and the node replays
    from the checkpoint saved just before it ran);
(c) the same two moments after ``executor.confirm`` ran an approved write in ``await_confirmation``;
(d) while the model is asked, before any round of tool calls (the turn's input was saved at once:
    the next run goes on from it), and after a write (the steps since the round are lost: the
    round replays its idempotency record and the model is asked again).
The dying processes are spawned (``_crash_workers.py``); the test process resumes (or, in (a),
a second spawned process does) with storage opened from nothing but the URL.

The runs of (b) and (c) use ``durability="sync"``: every checkpoint before the write is saved
before the write runs, so the moment of death is exact. (With the default ``"async"``, the save
of the checkpoint after ``call_model`` may still be in flight while ``execute`` writes.)
"""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.types import Command

import _crash_workers as w
from _spawn import run
from turnkit.storage import open_storage

pytestmark = pytest.mark.slow  # end to end: skip locally with -m 'not slow'

OK = {"executed": True, "status": "ok", "result": {"updated": 1}}


reopen = w.reopen_fixture(w.open_turn)


def held_call(graph) -> tuple[str, str]:
    """The confirmation id of the one held call in the saved state, and its tool message's id."""
    state = graph.get_state(w.THREAD)
    (interrupt,) = state.interrupts
    (held,) = interrupt.value["confirmations"]
    assert held["tool"] == "shop.set_prices"
    (message,) = [m for m in state.values["messages"] if isinstance(m, ToolMessage)]
    assert message.tool_call_id == held["tool_call_id"]
    assert json.loads(message.content) == {
        "status": "confirmation_required",
        "confirmation_id": held["confirmation_id"],
    }
    return held["confirmation_id"], message.id


def assert_intact(graph, result: dict, *, tool_message_id: str | None = None) -> None:
    """Human, the AI's set_prices call, its one tool message with ``result``, the final text."""
    state = graph.get_state(w.THREAD)
    assert state.next == ()
    assert state.interrupts == ()
    messages = state.values["messages"]
    assert [type(m) for m in messages] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    human, ai, tool, final = messages
    assert human.content == "cheaper tea"
    (call,) = ai.tool_calls
    assert call["name"] == "shop_set_prices"
    assert call["args"] == w.SET_PRICES["tool_calls"][0]["args"]
    assert tool.tool_call_id == call["id"]
    assert json.loads(tool.content) == result
    if tool_message_id is not None:
        assert tool.id == tool_message_id
    assert final.content == w.FINAL
    assert len({m.id for m in messages}) == 4


def assert_asked_once_with_the_result(model) -> None:
    """The resumed model was called once, after (and with) the tool's real result."""
    model.assert_done()
    (call,) = model.calls
    last = call["messages"][-1]
    assert isinstance(last, ToolMessage)
    assert json.loads(last.content)["status"] == "ok"


# --- (a) killed right after invoke returned at the interrupt ------------------------------------


@pytest.mark.usefixtures("agent_may_write")
@pytest.mark.parametrize("resumer", ["this process", "a new process"])
def test_killed_at_the_interrupt_the_turn_resumes_and_writes_once(
    ledger_url, log, shop, reopen, resumer
):
    run(w.hold_then_die, ledger_url, log)
    assert shop.writes() == []
    graph, model = reopen(w.FINAL)
    confirmation_id, message_id = held_call(graph)

    if resumer == "this process":
        graph.invoke(Command(resume={confirmation_id: "approve"}), w.THREAD, context=w.SESSION)
        assert_asked_once_with_the_result(model)
    else:
        run(w.resume_with_approve, ledger_url, log, confirmation_id, exitcode=0)

    assert len(shop.writes()) == 1
    assert_intact(graph, OK, tool_message_id=message_id)
    assert graph.get_state(w.THREAD).values["held"] == []


# --- (b) killed after a key caller's write, before LangGraph saved it ---------------------------


@pytest.mark.parametrize("at", ["writes", "checkpoint"])
@pytest.mark.parametrize("saver", ["turnkit", "langgraph"])
def test_killed_after_a_write_before_its_checkpoint_the_write_is_not_repeated(
    ledger_url, log, shop, reopen, at, saver
):
    run(w.write_then_die, ledger_url, log, at, saver == "langgraph")
    assert len(shop.writes()) == 1
    graph, model = reopen(w.FINAL)
    saved = graph.get_state(w.THREAD)
    (task,) = saved.tasks
    assert task.name == "execute"  # the last checkpoint is the one before execute
    applied = (saver, at) == ("langgraph", "checkpoint")  # its saved writes are applied
    assert (task.result is not None) == applied
    result = OK if applied else {**OK, "replayed": True}  # else it runs again and replays
    assert [type(m) for m in saved.values["messages"]] == [HumanMessage, AIMessage]

    graph.invoke(None, w.THREAD, context=w.KEY)  # resume from the last checkpoint

    assert len(shop.writes()) == 1
    assert_asked_once_with_the_result(model)
    assert_intact(graph, result)


# --- (c) killed after an approved write ran in await_confirmation, before its checkpoint --------


@pytest.mark.usefixtures("agent_may_write")
@pytest.mark.parametrize(
    ("at", "again"),
    [
        ("writes", None),  # resume from the last checkpoint
        ("writes", "approve"),  # the person, unaware of the crash, approves once more
        ("checkpoint", None),
    ],
)
def test_killed_after_an_approved_write_before_its_checkpoint_the_write_is_not_repeated(
    ledger_url, log, shop, reopen, at, again
):
    graph, model = reopen(w.SET_PRICES)
    graph.invoke({"messages": [HumanMessage("cheaper tea")]}, w.THREAD, context=w.SESSION)
    model.assert_done()
    confirmation_id, message_id = held_call(graph)

    run(w.approve_then_die, ledger_url, log, confirmation_id, at)
    assert len(shop.writes()) == 1

    graph, model = reopen(w.FINAL)
    (task,) = graph.get_state(w.THREAD).tasks  # the last checkpoint is the interrupt's
    assert task.name == "await_confirmation"
    assert (task.result is not None) == (at == "checkpoint")
    resume = None if again is None else Command(resume={confirmation_id: again})
    graph.invoke(resume, w.THREAD, context=w.SESSION)

    assert len(shop.writes()) == 1
    assert_asked_once_with_the_result(model)
    assert_intact(graph, OK, tool_message_id=message_id)
    with open_storage(ledger_url) as storage:
        confirmation = storage.ledger.get_confirmation(confirmation_id)
    assert confirmation.status == "done"
    assert confirmation.outcome == OK


# --- (d) killed while the model is asked: before any round of tool calls, and after a write -----


def test_killed_while_the_model_is_asked_the_turn_goes_on_from_its_saved_input(
    ledger_url, log, shop, reopen
):
    run(w.die_while_asking, ledger_url, log)
    graph, model = reopen(w.FINAL)
    saved = graph.get_state(w.THREAD)
    assert [m.content for m in saved.values["messages"]] == ["cheaper tea"]  # saved at once
    assert saved.next  # the turn was cut off, not finished

    graph.invoke(None, w.THREAD, context=w.SESSION)

    model.assert_done()
    messages = graph.get_state(w.THREAD).values["messages"]
    assert [(type(m), m.content) for m in messages] == [
        (HumanMessage, "cheaper tea"),
        (AIMessage, w.FINAL),
    ]
    assert shop.writes() == []


def test_killed_while_the_model_answers_after_a_write_the_write_is_not_repeated(
    ledger_url, log, shop, reopen
):
    run(w.write_then_die_answering, ledger_url, log)
    assert len(shop.writes()) == 1
    graph, model = reopen(w.FINAL)
    (task,) = graph.get_state(w.THREAD).tasks
    assert task.name == "execute"  # saved before the round ran; what came after is done again

    graph.invoke(None, w.THREAD, context=w.KEY)

    assert len(shop.writes()) == 1
    assert_asked_once_with_the_result(model)
    assert_intact(graph, {**OK, "replayed": True})
