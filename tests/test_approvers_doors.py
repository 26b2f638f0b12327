"""What approvers get, through the doors: the turn graph and the ``create_agent`` middleware
keep the request with a hold and show the preview in the interrupt (never in the conversation),
in every run mode and on every backend; REST shows the preview to deciders only and answers a
partial approval 202; MCP's held answer carries no preview."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langchain_core.messages import HumanMessage

from _doors import READ, WRITE, bearer
from _serving import uvicorn_serving
from _shop import Shop, prices
from turnkit import Caller, StaticPermissions
from turnkit.graph import TurnContext
from turnkit.server import create_app
from turnkit.testing import ScriptedModel

ALICE = TurnContext(caller=Caller.session("alice"))
SET = {"name": "shop_set_prices", "args": prices("TEA-0001"), "id": "w1"}
PREVIEW = {"changes": [{"sku": "TEA-0001", "before": 4.5, "after": 5.0}]}


class PreviewShop(Shop):
    """The shop, its ``set_prices`` declaring a preview and needing two approvers."""

    def preview_prices(self, input: dict, ctx: Any) -> dict:
        return PREVIEW

    def api_tools(self) -> list[dict]:
        tools = super().api_tools()
        for tool in tools:
            if tool["name"] == "shop.set_prices":
                tool["preview"] = self.preview_prices
            if tool["name"] == "shop.delete_product":
                tool["preview"] = self.preview_prices
                tool["approvals"] = 2
        return tools


@pytest.fixture
def rights() -> StaticPermissions:
    """As the shared fixture's, and Carol, who may decide for anyone as Root may."""
    return StaticPermissions(
        {
            "alice": {"shop.view", "shop.manage"},
            "root": {"shop.view", "system.confirm_any"},
            "carol": {"shop.view", "system.confirm_any"},
        }
    )


@pytest.fixture
def shop(tmp_path) -> Shop:
    return PreviewShop(tmp_path / "writes.log")


def _no_preview_for_the_model(messages: list[Any]) -> None:
    for message in messages:
        assert "before" not in str(message.content), message


def test_the_turn_graph_keeps_the_request_and_shows_the_preview_to_the_person(turns):
    model = ScriptedModel([{"content": "I will raise it.", "tool_calls": [SET]}, "Done."])
    outcome = turns.send(model, {"messages": [HumanMessage("raise tea by 50 cents")]}, ALICE)
    (entry,) = outcome.confirmations
    assert entry["preview"] == {"value": PREVIEW}
    (request,) = outcome.interrupts[0].value["action_requests"]
    assert "What it would change: " + json.dumps(PREVIEW, sort_keys=True) in request["description"]
    held = turns.checks.ledger.get_confirmation(entry["confirmation_id"])
    assert held.request == {"user": "raise tea by 50 cents", "model": "I will raise it."}
    assert held.thread_id == turns.thread
    _no_preview_for_the_model(outcome.messages)


def test_the_middleware_keeps_the_request_and_shows_the_preview(agents):
    model = ScriptedModel([{"tool_calls": [SET]}, "Done."])
    outcome = agents.send(model, {"messages": [HumanMessage("please reprice")]}, ALICE)
    (request,) = outcome.requests
    assert "What it would change:" in request["description"]
    (pending,) = agents.ledger.list_confirmations(status="pending")
    assert pending.request == {"user": "please reprice"}
    assert pending.preview.value == PREVIEW
    _no_preview_for_the_model(outcome.messages)


@pytest.fixture
def http(executor) -> Iterator[httpx.Client]:
    with (
        uvicorn_serving(create_app(executor, mcp_path="/mcp")) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        yield client


def test_rest_shows_the_preview_to_deciders_only_and_a_partial_approval_is_202(
    http, executor, clock, shop
):
    store = executor.ledger.keys
    _, holder = store.create("alice", {READ, WRITE}, name="shop bot", now=clock.now)
    _, root = store.create("root", {READ, "system.confirmations:decide"}, now=clock.now)
    _, other = store.create("carol", {READ, "system.confirmations:decide"}, now=clock.now)
    held = http.post(
        "/v1/tools/shop.delete_product/invoke", headers=bearer(holder), json={"input": {"sku": "X"}}
    )
    assert held.status_code == 202, held.text
    body = held.json()
    assert "preview" not in body
    assert "request" not in body
    cid = body["id"]
    own = http.get(f"/v1/confirmations/{cid}", headers=bearer(holder)).json()
    assert "preview" not in own
    assert own["approvals"]["needed"] == 2
    seen = http.get(f"/v1/confirmations/{cid}", headers=bearer(root)).json()
    assert seen["preview"] == {"value": PREVIEW}
    assert seen["caller_label"].endswith("(shop bot) of alice")
    wrong = {"If-Match": '"' + "0" * 64 + '"'}
    stale = http.post(f"/v1/confirmations/{cid}/approve", headers=bearer(root) | wrong)
    assert stale.status_code == 409, stale.text
    assert stale.json()["code"] == "arguments_changed"
    read = {"If-Match": f'"{seen["input_hash"]}"'}
    first = http.post(f"/v1/confirmations/{cid}/approve", headers=bearer(root) | read)
    assert first.status_code == 202, first.text
    assert first.json()["approvals"] == {"given": 1, "needed": 2}
    assert shop.writes() == []
    second = http.post(f"/v1/confirmations/{cid}/approve", headers=bearer(other))
    assert second.status_code == 200, second.text
    assert second.json()["status"] == "done"
    assert len(shop.writes()) == 1


def test_mcps_held_answer_carries_no_preview(http, executor, clock):
    _, holder = executor.ledger.keys.create("alice", {READ, WRITE}, now=clock.now)
    headers = bearer(holder) | {"Accept": "application/json, text/event-stream"}
    init = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}},
    }  # fmt: skip
    started = http.post("/mcp/", headers=headers, json=init)
    assert started.status_code == 200, started.text
    session = {"Mcp-Session-Id": started.headers.get("mcp-session-id", "")}
    session = {k: v for k, v in session.items() if v}
    http.post("/mcp/", headers=headers | session,
              json={"jsonrpc": "2.0", "method": "notifications/initialized"})  # fmt: skip
    call = {
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "shop_delete_product", "arguments": {"sku": "X"}},
    }  # fmt: skip
    answered = http.post("/mcp/", headers=headers | session, json=call)
    assert answered.status_code == 200, answered.text
    assert "waits for a person's confirmation" in answered.text
    assert "before" not in answered.text
    assert "preview" not in answered.text


def test_an_agents_pending_write_carries_its_preview_for_the_person():
    from turnkit import Agent, tool

    notes = {"groceries": "milk, eggs"}

    def what_goes(title: str) -> dict:
        return {"would_delete": {"title": title, "text": notes.get(title)}}

    @tool(danger="always", preview=what_goes)
    def delete_note(title: str) -> str:
        """Delete a note."""
        return f"deleted {notes.pop(title)}"

    call = {"name": "delete_note", "args": {"title": "groceries"}, "id": "d1"}
    model = ScriptedModel([{"tool_calls": [call]}, "Deleted."])
    with Agent(model, tools=[delete_note]) as agent:
        (held,) = agent.prompt("Delete my groceries note.").pending
        assert held.preview == {
            "value": {"would_delete": {"title": "groceries", "text": "milk, eggs"}}
        }
        assert "groceries" in notes
        _no_preview_for_the_model(model.calls[0]["messages"])
        assert agent.confirm({held.id: "approve"}).content == "Deleted."
    assert notes == {}


def test_a_turn_asks_again_with_the_progress_until_another_person_approves(turns, shop):
    from langgraph.types import Command

    delete = {"name": "shop_delete_product", "args": {"sku": "TEA-0002"}, "id": "d1"}
    model = ScriptedModel([{"tool_calls": [delete]}, "Deleted."])
    outcome = turns.send(model, {"messages": [HumanMessage("delete tea 2")]}, ALICE)
    (entry,) = outcome.confirmations
    cid = entry["confirmation_id"]
    assert entry["approvals"] == {"given": 0, "needed": 2, "separate_duties": False}
    again = turns.send(model, Command(resume={cid: "approve"}), ALICE)
    (asked,) = again.confirmations
    assert asked["problem"] == "approved 1 of 2: it runs once another person approves it"
    assert asked["approvals"]["given"] == 1
    assert shop.writes() == []
    assert turns.checks.decide(cid, Caller.session("root"), "approve").status == "ok"
    done = turns.send(model, Command(resume={cid: "approve"}), ALICE)
    assert done.interrupts == []
    assert done.messages[-1].content == "Deleted."
    assert len(shop.writes()) == 1


def test_the_middleware_asks_again_with_the_progress_too(agents, shop, rights, clock):
    from langgraph.types import Command

    from turnkit import Executor, Registry, Settings

    delete = {"name": "shop_delete_product", "args": {"sku": "TEA-0002"}, "id": "d1"}
    model = ScriptedModel([{"tool_calls": [delete]}, "Deleted."])
    outcome = agents.send(model, {"messages": [HumanMessage("delete tea 2")]}, ALICE)
    (entry,) = outcome.interrupts[0].value["confirmations"]
    cid = entry["confirmation_id"]
    again = agents.send(model, Command(resume={cid: "approve"}), ALICE)
    (asked,) = again.interrupts[0].value["confirmations"]
    assert asked["problem"] == "approved 1 of 2: it runs once another person approves it"
    assert shop.writes() == []
    other = Executor(Registry([shop]), ledger=agents.ledger, permissions=rights,
                     settings=Settings(handler_timeout=2.0), clock=clock)  # fmt: skip
    try:
        decided = other.decide(cid, Caller.session("root"), "approve")
        assert decided.status == "ok", decided
    finally:
        other.close()
    done = agents.send(model, Command(resume={cid: "approve"}), ALICE)
    assert done.interrupts == []
    assert len(shop.writes()) == 1
