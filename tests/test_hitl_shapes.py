"""LangChain's HITL shapes on the turn graph: the interrupt carries an ``HITLRequest`` beside the
versioned fields, and a resume may be an ``HITLResponse``, with exactly the values LangChain's UIs
send (every run mode, every backend).

What the UIs send (read in their sources): Agent Chat UI answers each action request with
``{"type": "approve"}``, ``{"type": "reject", "message": <non-empty text>}`` or ``{"type": "edit",
"edited_action": {"name": <the request's name>, "args": {...}}}``, all in one
``{"decisions": [...]}`` in the order of ``action_requests``. Agent Inbox, in its mode for
LangChain's middleware, answers the first action request only, with ``{"type": "approve",
"args": {"action": name, "args": {...}}}``, ``{"type": "reject", "args": <text>}`` or
``{"type": "edit", "args": {"action": name, "args": {...}}}``.
"""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.types import Command

from _shop import PRICES_SCHEMA, prices
from turnkit import Caller, ResumeError
from turnkit.graph import TurnContext
from turnkit.testing import ScriptedModel

ALICE = TurnContext(caller=Caller.session("alice"))
SET = {"name": "shop_set_prices", "args": prices("TEA-0001"), "id": "w1"}
DELETE = {"name": "shop_delete_product", "args": {"sku": "TEA-0002"}, "id": "w2"}
SKU_SCHEMA = {
    "type": "object",
    "required": ["sku"],
    "additionalProperties": False,
    "properties": {"sku": {"type": "string"}},
}


def hold_both(turns):
    model = ScriptedModel([{"tool_calls": [SET, DELETE]}, "Done."])
    outcome = turns.send(model, {"messages": [HumanMessage("go")]}, ALICE)
    return model, outcome


def results(messages) -> dict[str, dict]:
    return {m.tool_call_id: json.loads(m.content) for m in messages if isinstance(m, ToolMessage)}


def test_the_interrupt_carries_langchains_hitl_request_beside_the_versioned_fields(turns):
    _, outcome = hold_both(turns)
    (interrupt,) = outcome.interrupts
    value = interrupt.value
    assert value["version"] == 1
    assert value["type"] == "turnkit.confirmations"
    confirmations = value["confirmations"]
    assert [c["tool"] for c in confirmations] == ["shop.set_prices", "shop.delete_product"]
    requests = value["action_requests"]
    assert [r["name"] for r in requests] == ["shop_set_prices", "shop_delete_product"]
    assert [r["args"] for r in requests] == [prices("TEA-0001"), {"sku": "TEA-0002"}]
    for request, held in zip(requests, confirmations, strict=True):
        assert request["description"].startswith(f"{held['title']} ({request['name']}) waits")
        assert held["expires_at"] in request["description"]
        assert json.dumps(request["args"], sort_keys=True) in request["description"]
    assert value["review_configs"] == [
        {
            "action_name": "shop_set_prices",
            "allowed_decisions": ["approve", "edit", "reject"],
            "args_schema": PRICES_SCHEMA,
        },
        {
            "action_name": "shop_delete_product",
            "allowed_decisions": ["approve", "edit", "reject"],
            "args_schema": SKU_SCHEMA,
        },
    ]


def test_agent_chat_uis_decisions_approve_and_reject_in_order(turns, shop):
    model, _ = hold_both(turns)
    resume = {"decisions": [{"type": "approve"}, {"type": "reject", "message": "Keep it."}]}
    done = turns.send(model, Command(resume=resume), ALICE)
    assert done.interrupts == []
    assert [w["tool"] for w in shop.writes()] == ["set_prices"]
    answers = results(done.messages)
    assert answers["w1"] == {"executed": True, "status": "ok", "result": {"updated": 1}}
    assert answers["w2"]["status"] == "rejected"
    assert answers["w2"]["message"] == "Keep it."
    model.assert_done()
    assert turns.checks.pending() == []


def test_agent_chat_uis_edit_runs_the_edited_arguments_once(turns, shop):
    model, _ = hold_both(turns)
    edited = prices("TEA-0001", price=4.5)
    resume = {
        "decisions": [
            {"type": "edit", "edited_action": {"name": "shop_set_prices", "args": edited}},
            {"type": "reject", "message": "Not now."},
        ]
    }
    turns.send(model, Command(resume=resume), ALICE)
    assert [w["input"] for w in shop.writes()] == [edited]


@pytest.mark.parametrize(
    ("decision", "writes"),
    [
        (
            {"type": "approve", "args": {"action": "shop_set_prices", "args": prices("TEA-0001")}},
            [prices("TEA-0001")],
        ),
        ({"type": "reject", "args": "Too cheap."}, []),
        (
            {"type": "edit", "args": {"action": "shop_set_prices", "args": prices(price=6.0)}},
            [prices(price=6.0)],
        ),
    ],
    ids=["approve", "reject", "edit"],
)
def test_agent_inboxs_decisions_for_its_one_action_request(turns, shop, decision, writes):
    model = ScriptedModel([{"tool_calls": [SET]}, "Done."])
    (held,) = turns.send(model, {"messages": [HumanMessage("go")]}, ALICE).confirmations
    done = turns.send(model, Command(resume={"decisions": [decision]}), ALICE)
    assert done.interrupts == []
    assert [w["input"] for w in shop.writes()] == writes
    if decision["type"] == "reject":
        assert results(done.messages)["w1"]["message"] == "Too cheap."
    assert turns.checks.confirmation(held["confirmation_id"]).outcome is not None


def test_a_hitl_edit_that_breaks_the_schema_is_asked_again_with_the_reason(turns, shop):
    model = ScriptedModel([{"tool_calls": [SET]}, "Done."])
    turns.send(model, {"messages": [HumanMessage("go")]}, ALICE)
    bad = {"type": "edit", "edited_action": {"name": "shop_set_prices", "args": {"prices": []}}}
    again = turns.send(model, Command(resume={"decisions": [bad]}), ALICE)
    assert shop.writes() == []
    (interrupt,) = again.interrupts
    (request,) = interrupt.value["action_requests"]
    assert "The last decision was not applied: the edit was not applied" in request["description"]
    done = turns.send(model, Command(resume={"decisions": [{"type": "approve"}]}), ALICE)
    assert done.interrupts == []
    assert len(shop.writes()) == 1


def test_agent_inbox_answering_one_of_two_held_calls_is_refused_clearly(turns, shop):
    model, _ = hold_both(turns)
    with pytest.raises(ResumeError) as refused:
        turns.send(model, Command(resume={"decisions": [{"type": "approve", "args": None}]}), ALICE)
    assert "1 decisions for 2 held calls ['shop_set_prices', 'shop_delete_product']" in str(
        refused.value
    )
    assert "{'decisions': [{'type': 'approve'}" in str(refused.value)
    assert "ValidationError" not in str(refused.value)
    assert shop.writes() == []
    assert len(turns.checks.pending()) == 2


@pytest.mark.parametrize("extra", [1, 2], ids=["three-for-two", "four-for-two"])
def test_more_decisions_than_action_requests_with_nothing_decided_since_are_refused(
    turns, shop, extra
):
    """Both held calls are still waiting, so the person was asked about exactly these two: a
    longer list is a wrong count, refused as a shorter one is, and nothing is decided."""
    model, _ = hold_both(turns)
    approve, reject = {"type": "approve"}, {"type": "reject", "message": "Keep it."}
    too_many = {"decisions": [approve, reject, *[approve] * extra]}
    with pytest.raises(ResumeError) as refused:
        turns.send(model, Command(resume=too_many), ALICE)
    assert f"{2 + extra} decisions for 2 held calls ['shop_set_prices', 'shop_delete_product']" in (
        str(refused.value)
    )
    assert shop.writes() == []
    assert len(turns.checks.pending()) == 2
    done = turns.send(model, Command(resume={"decisions": [approve, reject]}), ALICE)
    assert done.interrupts == []
    assert [w["tool"] for w in shop.writes()] == ["set_prices"]
    model.assert_done()


def test_more_decisions_than_calls_ever_held_are_refused_even_after_one_was_decided(turns, shop):
    """One of the two held calls was decided elsewhere, but three decisions cannot answer a
    round that never held more than two calls: refused, never asked again silently."""
    model, outcome = hold_both(turns)
    first, _ = (c["confirmation_id"] for c in outcome.interrupts[0].value["confirmations"])
    turns.checks.confirm(first, Caller.session("alice"), "approve")
    three = {"decisions": [{"type": "approve"}] * 3}
    with pytest.raises(ResumeError, match="3 decisions for 1 held calls"):
        turns.send(model, Command(resume=three), ALICE)
    assert [w["tool"] for w in shop.writes()] == ["set_prices"]
    assert len(turns.checks.pending()) == 1


def test_decisions_for_a_round_that_shrank_since_the_person_was_asked_ask_again(turns, shop):
    """Agent Chat UI answers the two requests it rendered, but one was decided elsewhere in the
    meantime: the positions no longer say which decision is whose, so the remaining call is
    asked about again (one action request), never guessed at, and each write runs once."""
    model, outcome = hold_both(turns)
    first, second = (c["confirmation_id"] for c in outcome.interrupts[0].value["confirmations"])
    turns.checks.confirm(first, Caller.session("alice"), "approve")  # elsewhere: the CLI, say
    rendered = {"decisions": [{"type": "approve"}, {"type": "reject", "message": "Keep it."}]}
    again = turns.send(model, Command(resume=rendered), ALICE)
    (interrupt,) = again.interrupts
    assert [r["name"] for r in interrupt.value["action_requests"]] == ["shop_delete_product"]
    assert [c["confirmation_id"] for c in interrupt.value["confirmations"]] == [second]
    done = turns.send(model, Command(resume={"decisions": [{"type": "approve"}]}), ALICE)
    assert done.interrupts == []
    assert [w["tool"] for w in shop.writes()] == ["set_prices", "delete_product"]
    assert turns.checks.pending() == []
    model.assert_done()


def test_an_approve_carrying_other_arguments_is_refused_not_run_with_the_old_ones(turns, shop):
    model = ScriptedModel([{"tool_calls": [SET]}, "Done."])
    turns.send(model, {"messages": [HumanMessage("go")]}, ALICE)
    changed = {"action": "shop_set_prices", "args": prices("TEA-0001", price=1.0)}
    with pytest.raises(ResumeError, match="an approve runs the arguments asked about"):
        turns.send(model, Command(resume={"decisions": [{"type": "approve", "args": changed}]}),
                   ALICE)  # fmt: skip
    assert shop.writes() == []
