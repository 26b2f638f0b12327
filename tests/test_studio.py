"""The real thing: ``langgraph dev`` serves ``langgraph.json``'s graph, driven through the SDK.

Each test starts the server as a subprocess on a free port (offline: no analytics, no version
check, no tracing), waits for ``GET /ok``, runs a turn with ``langgraph_sdk``, and stops the server
in the fixture's teardown, also when the test fails. The server's log is printed on failure.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import httpx2
import pytest
from langgraph_sdk import get_client
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from _openai_server import OpenAIServer, call, reply
from _studio import (
    REPO,
    RUN_TIMEOUT,
    Server,
    count_price_writes,
    launch,
    query,
    wait,
    wait_until_ready,
)
from turnkit import open_ledger
from turnkit.demo import ledger_path
from turnkit.executor.confirmations import DECIDE_SCOPE  # internal: the scope has no public name

pytestmark = pytest.mark.slow  # end to end: skip locally with -m 'not slow'

GRAPH_ID = "turnkit"


@pytest.fixture
def start_studio(tmp_path) -> Iterator[Callable[..., Server]]:
    """``start_studio(**env)``: ``langgraph dev`` on the repository's graph, in ``tmp_path``."""
    config = json.loads((REPO / "langgraph.json").read_text())
    config["dependencies"] = [str(REPO)]  # the same graphs, served from a scratch folder
    (tmp_path / "langgraph.json").write_text(json.dumps(config))
    servers: list[Server] = []

    def start(**env: str) -> Server:
        server = launch(tmp_path / "langgraph.json", tmp_path, **env)
        servers.append(server)
        seconds = wait_until_ready(server)
        print(f"langgraph dev answered GET /ok after {seconds:.1f} s")
        return server

    yield start
    for server in servers:
        server.stop()
        print(f"--- {server.log} ---\n{server.log_tail()}")  # shown by pytest on failure only


async def _collect(client: Any, tid: str, graph_id: str, input: dict[str, Any]) -> list[Any]:
    stream = client.runs.stream(tid, graph_id, input=input, stream_mode=["values", "messages"])
    return [event async for event in stream]


async def test_a_studio_turn_holds_the_write_and_applies_it_once_on_resume(start_studio, tmp_path):
    db = tmp_path / "demo" / "catalogue.sqlite"
    count_price_writes(db)
    server = start_studio(TURNKIT_DEMO_DB=str(db))

    async with get_client(url=server.url) as client:
        thread = await wait(client.threads.create())
        tid = thread["thread_id"]
        stopped = await wait(
            client.runs.wait(
                tid, GRAPH_ID, input={"messages": [{"role": "user", "content": "cheaper, please"}]}
            )
        )

        # The run stopped at the held price change: one interrupt with the versioned payload.
        (interrupt,) = stopped["__interrupt__"]
        payload = interrupt["value"]
        assert payload["version"] == 1
        assert payload["type"] == "turnkit.confirmations"
        (held,) = payload["confirmations"]
        assert held["tool"] == "catalogue.set_prices"
        assert held["title"] == "Set product prices"
        assert held["arguments"] == {"prices": [{"sku": "ACC-0001", "price": 6.33}]}
        expires = datetime.fromisoformat(held["expires_at"].replace("Z", "+00:00"))
        assert timedelta(minutes=55) < expires - datetime.now(UTC) <= timedelta(hours=1, seconds=1)
        cid = held["confirmation_id"]
        held_message = next(
            m for m in stopped["messages"] if m.get("tool_call_id") == held["tool_call_id"]
        )
        assert json.loads(held_message["content"]) == {
            "status": "confirmation_required",
            "confirmation_id": cid,
        }
        assert query(db, "SELECT price FROM products WHERE sku = 'ACC-0001'") == [(7.03,)]

        state = await wait(client.threads.get_state(tid))
        assert state["next"] == ["await_confirmation"]
        assert [i["value"] for i in state["interrupts"]] == [payload]

        # A resume value that is no decision is refused with what to send; nothing is decided.
        with pytest.raises(Exception, match="ResumeError") as refused:
            await wait(client.runs.wait(tid, GRAPH_ID, command={"resume": {cid: "maybe"}}))
        assert "nothing was decided" in str(refused.value)
        assert cid in str(refused.value)
        assert "'approve' | 'reject'" in str(refused.value)
        assert query(db, "SELECT price FROM products WHERE sku = 'ACC-0001'") == [(7.03,)]

        # The person approves: the write runs once, the model answers, the turn ends.
        done = await wait(client.runs.wait(tid, GRAPH_ID, command={"resume": {cid: "approve"}}))
        final = await wait(client.threads.get_state(tid))

    assert final["next"] == []
    assert final["interrupts"] == []
    assert final["values"]["messages"] == done["messages"]
    assert final["values"]["held"] == []
    messages = done["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai", "tool", "ai"]
    answered = next(m for m in messages if m.get("tool_call_id") == held["tool_call_id"])
    assert answered["id"] == held_message["id"]  # the held message was replaced in place
    assert json.loads(answered["content"]) == {
        "executed": True,
        "status": "ok",
        "result": {
            "updated": [{"sku": "ACC-0001", "old_price": 7.03, "price": 6.33}],
            "unknown_skus": [],
        },
    }
    assert messages[-1]["content"] == (
        "[scripted demo model] Done: I changed the price of ACC-0001 from 7.03 to 6.33."
    )
    assert query(db, "SELECT price FROM products WHERE sku = 'ACC-0001'") == [(6.33,)]
    assert query(db, "SELECT sku, price FROM price_writes") == [("ACC-0001", 6.33)]


def _look_up_then_answer(body: dict[str, Any]) -> Any:
    """First a call of ``catalogue_get_product``, then text from the product it returned."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        found = json.loads(last["content"])["result"]["product"]
        return f"{found['name']} costs {found['price']}."
    return reply(tool_calls=[call("catalogue_get_product", {"sku": "TEA-0001"})])


@pytest.fixture
def fake_openai() -> Iterator[OpenAIServer]:
    """A chat.completions server for two turns (four model calls) of ``_look_up_then_answer``."""
    with OpenAIServer([_look_up_then_answer] * 4) as server:
        yield server
    server.assert_done()


async def test_studio_uses_an_openai_compatible_endpoint_when_one_is_configured(
    start_studio, fake_openai, tmp_path
):
    server = start_studio(
        TURNKIT_DEMO_DB=str(tmp_path / "openai" / "catalogue.sqlite"),
        OPENAI_BASE_URL=fake_openai.url,
        TURNKIT_MODEL="fake-model",
    )
    question = {"messages": [{"role": "user", "content": "what does TEA-0001 cost?"}]}
    async with get_client(url=server.url) as client:
        thread = await wait(client.threads.create())
        tid = thread["thread_id"]
        done = await wait(client.runs.wait(tid, GRAPH_ID, input=question))
        # As Studio runs it: streaming the model's tokens too.
        events = await wait(_collect(client, tid, GRAPH_ID, question))
        state = await wait(client.threads.get_state(tid))
    assert {"values", "messages"} <= {e.event.split("/")[0] for e in events}
    # The second turn loaded the first from the server's store (messages are stored as deltas
    # and replayed): the same messages, field for field, nothing filed under additional_kwargs.
    history = state["values"]["messages"]
    assert [m["type"] for m in history] == ["human", "ai", "tool", "ai"] * 2
    assert len({m["id"] for m in history}) == 8
    assert history[:4] == done["messages"]
    assert all(m["additional_kwargs"] == {} for m in history if m["type"] != "ai")
    streamed = [e.data for e in events if e.event == "values"][-1]
    assert streamed["messages"][-1]["content"] == "Sencha green tea costs 4.36."
    assert done["messages"][-1]["content"] == "Sencha green tea costs 4.36."
    requests = fake_openai.requests  # all to POST /v1/chat/completions, or errors were recorded
    assert [bool(body.get("stream")) for body in requests] == [False, False, True, True]
    roles = [m["role"] for m in requests[2]["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]  # the first turn, replayed
    first = requests[0]
    assert first["model"] == "fake-model"
    names = [tool["function"]["name"] for tool in first["tools"]]
    assert names == [
        "catalogue_list_products",
        "catalogue_get_product",
        "catalogue_set_prices",
        "catalogue_delete_product",
    ]


async def test_one_langgraph_dev_serves_the_graph_rest_and_mcp_and_rest_decides_a_studio_hold(
    start_studio, tmp_path
):
    db = tmp_path / "demo" / "catalogue.sqlite"
    count_price_writes(db)
    ledger = open_ledger(ledger_path(db))
    ledger.setup()
    _, secret = ledger.keys.create("demo", {"catalogue.products:read", DECIDE_SCOPE})
    ledger.close()
    server = start_studio(TURNKIT_DEMO_DB=str(db))
    bearer = {"Authorization": f"Bearer {secret}"}

    async with (
        httpx.AsyncClient(base_url=server.url, headers=bearer, timeout=RUN_TIMEOUT) as http,
        httpx2.AsyncClient(headers=bearer) as mcp_http,
        Client(streamable_http_client(f"{server.url}/mcp", http_client=mcp_http)) as mcp,
        get_client(url=server.url) as client,
    ):
        # REST and MCP beside the graph, on the graph's own ledger and key store
        assert (await http.get("/healthz")).json() == {"status": "ok"}
        assert (await http.get("/v1/tools", headers={"Authorization": ""})).status_code == 401
        rest_tools = {tool["name"] for tool in (await http.get("/v1/tools")).json()}
        assert {"catalogue.list_products", "catalogue.get_product"} <= rest_tools
        mcp_tools = {tool.name for tool in (await mcp.list_tools()).tools}
        assert "catalogue_get_product" in mcp_tools
        read = await mcp.call_tool("catalogue_get_product", {"sku": "TEA-0001"})
        assert not read.is_error
        assert "TEA-0001" in read.content[0].text

        # a Studio run holds a write; the person approves it over REST with their key
        tid = (await wait(client.threads.create()))["thread_id"]
        request = {"messages": [{"role": "user", "content": "cheaper, please"}]}
        stopped = await wait(client.runs.wait(tid, GRAPH_ID, input=request))
        (interrupt,) = stopped["__interrupt__"]
        cid = interrupt["value"]["confirmations"][0]["confirmation_id"]
        listed = (await http.get("/v1/confirmations")).json()
        assert [c["id"] for c in listed] == [cid]
        approved = await http.post(f"/v1/confirmations/{cid}/approve")
        assert approved.status_code == 200, approved.text
        assert query(db, "SELECT sku, price FROM price_writes") == [("ACC-0001", 6.33)]

        # the paused run, resumed, honours the decision taken out of band: no second write
        done = await wait(client.runs.wait(tid, GRAPH_ID, command={"resume": {cid: "approve"}}))
        again = await http.post(f"/v1/confirmations/{cid}/approve")

    assert done["messages"][-1]["content"].startswith("[scripted demo model] Done")
    assert again.status_code == 409
    assert again.json()["code"] == "already_decided"
    assert query(db, "SELECT sku, price FROM price_writes") == [("ACC-0001", 6.33)]
