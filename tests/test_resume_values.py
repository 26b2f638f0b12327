"""A resume value that is not a decision is refused with a ``ResumeError`` that says what to send;
nothing is decided, and the paused turn answers the next, good value (every mode, every backend)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.types import Command

from _shop import prices
from turnkit import Caller, ResumeError, TurnkitError
from turnkit.graph import TurnContext
from turnkit.testing import ScriptedModel

ALICE = TurnContext(caller=Caller.session("alice"))


def nested_list(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def nested_dict(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


EDIT_ANOTHER_TOOL = {
    "type": "edit",
    "edited_action": {"name": "shop_delete_product", "args": {"sku": "TEA-0001"}},
}


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("approve", "must map confirmation ids to decisions"),
        ({"not-held": "approve"}, "['not-held'] are not confirmations held in this thread"),
        ("HELD:maybe", "Input should be a valid dictionary"),
        ("HELD:edit-without-arguments", "an edit needs 'arguments'"),
        ({"decisions": []}, "0 decisions for 1 held calls ['shop_set_prices']"),
        ({"decisions": [{"type": "respond", "message": "x"}]}, "'type' must be one of"),
        ({"decisions": [EDIT_ANOTHER_TOOL]}, "an edit may change the arguments, not the tool"),
        ({"decisions": [{"type": "approve", "note": "x"}]}, "['note'] are not fields of"),
        ("HELD:edit-with-control", "['dry_run'] are control fields of a call, not input"),
        ("HELD:edit-ten-thousand-deep", "/arguments/prices/a/a/a"),
        ("HELD:edit-huge-integer", "outside the 64-bit range"),
        ({"decisions": [nested_list(10_000)]}, "at /decisions/0/0/0/0"),
        ({"decisions": [{"type": "reject", "message": nested_list(10_000)}]}, "/message/0/0"),
    ],
    ids=[
        "bare-word",
        "unknown-id",
        "unknown-word",
        "edit-without-arguments",
        "hitl-wrong-count",
        "hitl-unknown-type",
        "hitl-edit-of-another-tool",
        "hitl-unknown-field",
        "edit-with-control",
        "edit-ten-thousand-deep",
        "edit-huge-integer",
        "hitl-ten-thousand-deep-decision",
        "hitl-ten-thousand-deep-message",
    ],
)
def test_a_refused_resume_says_what_to_send_and_decides_nothing(turns, shop, value, said):
    write = {"name": "shop_set_prices", "args": prices("TEA-0001"), "id": "w1"}
    model = ScriptedModel([{"tool_calls": [write]}, "Done."])
    (held,) = turns.send(model, {"messages": [HumanMessage("go")]}, ALICE).confirmations
    cid = held["confirmation_id"]
    if value == "HELD:maybe":
        value = {cid: "maybe"}
    elif value == "HELD:edit-without-arguments":
        value = {cid: {"action": "edit"}}
    elif value == "HELD:edit-with-control":
        value = {cid: {"action": "edit", "arguments": {**prices("TEA-0001"), "dry_run": True}}}
    elif value == "HELD:edit-ten-thousand-deep":
        value = {cid: {"action": "edit", "arguments": {"prices": nested_dict(10_000)}}}
    elif value == "HELD:edit-huge-integer":
        value = {cid: {"action": "edit", "arguments": prices("TEA-0001", price=10**30)}}
    with pytest.raises(ResumeError) as refused:
        turns.send(model, Command(resume=value), ALICE)
    message = str(refused.value)
    assert said in message
    assert cid in message
    assert "Command(resume={<confirmation_id>: 'approve' | 'reject'" in message
    assert isinstance(refused.value, TurnkitError)
    assert isinstance(refused.value, ValueError)
    assert shop.writes() == []
    assert [c.id for c in turns.checks.pending()] == [cid]
    done = turns.send(model, Command(resume={cid: "approve"}), ALICE)
    assert done.interrupts == []
    assert len(shop.writes()) == 1
