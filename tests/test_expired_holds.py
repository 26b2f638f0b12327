"""A held write whose confirmation expires is closed once, told to the model once, and never offered
for a decision again — whether the user resumed, moved on, or came back later (every run mode,
every backend)."""

from __future__ import annotations

import json

from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.types import Command

from _shop import prices
from turnkit import Caller
from turnkit.graph import TurnContext
from turnkit.testing import ScriptedModel

ALICE = TurnContext(caller=Caller.session("alice"))
TTL = 3600.0


def said(text: str) -> dict:
    return {"messages": [HumanMessage(text)]}


def write(sku: str, call_id: str) -> dict:
    return {"tool_calls": [{"name": "shop_set_prices", "args": prices(sku), "id": call_id}]}


def answer_to(outcome, call_id: str) -> dict:
    (found,) = [m for m in outcome.messages if getattr(m, "tool_call_id", None) == call_id]
    assert isinstance(found, ToolMessage)
    return json.loads(found.content)


def test_a_hold_that_expires_after_the_user_moved_on_is_told_once(turns, shop, clock):
    model = ScriptedModel([write("TEA-0001", "w1"), "Noted.", "Still here.", "Yes?"])
    (held,) = turns.send(model, said("change it"), ALICE).confirmations
    moved_on = turns.send(model, said("never mind"), ALICE)  # a new message, not a resume
    assert answer_to(moved_on, "w1")["status"] == "confirmation_required"
    clock.now += TTL + 1
    later = turns.send(model, said("are you there?"), ALICE)
    expired = answer_to(later, "w1")
    assert expired["error"]["code"] == "confirmation_expired"
    assert later.interrupts == []
    assert later.values["held"] == []
    assert turns.checks.confirmation(held["confirmation_id"]).status == "expired"
    assert turns.checks.pending() == []
    tool_messages = [m for m in later.messages if getattr(m, "tool_call_id", None) == "w1"]
    assert len(tool_messages) == 1  # replaced in place: the model reads it once
    again = turns.send(model, said("and now?"), ALICE)
    assert answer_to(again, "w1") == expired
    assert shop.writes() == []
    model.assert_done()


def test_an_expired_hold_is_never_offered_in_a_later_interrupt(turns, shop, clock):
    model = ScriptedModel([write("TEA-0001", "w1"), "Noted.", write("TEA-0002", "w2"), "Done."])
    (first,) = turns.send(model, said("change it"), ALICE).confirmations
    turns.send(model, said("never mind"), ALICE)
    clock.now += TTL + 1
    paused = turns.send(model, said("change the other one"), ALICE)
    (offered,) = paused.confirmations
    assert offered["tool_call_id"] == "w2"
    assert offered["confirmation_id"] != first["confirmation_id"]
    assert answer_to(paused, "w1")["error"]["code"] == "confirmation_expired"
    turns.send(model, Command(resume={offered["confirmation_id"]: "approve"}), ALICE)
    assert [w["input"] for w in shop.writes()] == [prices("TEA-0002")]


def test_a_resume_after_the_hold_expired_runs_nothing_and_asks_nothing(turns, shop, clock):
    model = ScriptedModel([write("TEA-0001", "w1"), "It expired."])
    (held,) = turns.send(model, said("change it"), ALICE).confirmations
    clock.now += TTL + 1
    done = turns.send(model, Command(resume={held["confirmation_id"]: "approve"}), ALICE)
    assert done.interrupts == []
    assert answer_to(done, "w1")["error"]["code"] == "confirmation_expired"
    assert done.messages[-1].content == "It expired."
    assert shop.writes() == []


def test_an_approved_write_whose_process_died_is_told_as_outcome_unknown(turns, shop, clock):
    model = ScriptedModel([write("TEA-0001", "w1"), "Noted.", "Checking."])
    (held,) = turns.send(model, said("change it"), ALICE).confirmations
    turns.send(model, said("never mind"), ALICE)
    cid = held["confirmation_id"]
    # another process approved it and died inside the write: the confirmation stays running
    claimed = turns.ledger.claim_confirmation(
        cid, decided_by="session:alice", decision={"action": "approve"}, token="t", now=clock.now
    )
    assert claimed
    clock.now += 60  # past handler_timeout (2 s) and the grace
    later = turns.send(model, said("did it work?"), ALICE)
    assert answer_to(later, "w1")["error"]["code"] == "outcome_unknown"
    assert later.interrupts == []
    assert turns.checks.confirmation(cid).status == "done"
    assert shop.writes() == []
