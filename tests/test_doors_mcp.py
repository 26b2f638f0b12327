"""What the core decides for every door, pinned through MCP (``/mcp``) with the SDK's own client
over real Streamable HTTP, on SQLite and PostgreSQL (docs/architecture.md §4, "Seven doors, one
promise"): a repeat of a running idempotency key answered at once, a rejected call's repeat and what
the history says of it, the cap of pending holds, and the operator's ``hold_key_writes``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from _doors import (
    GATE,
    READ,
    WAIT,
    WRITE,
    bearer,
    history_row,
    sign_in,
)
from _serving import uvicorn_serving
from _shop import prices
from turnkit.executor.confirmations import DECIDE_SCOPE  # internal: the scope has no public name
from turnkit.server import create_app

IDEMPOTENCY = "io.turnkit/idempotency_key"


@asynccontextmanager
async def connect(url: str, secret: str) -> AsyncIterator[Client]:
    """The SDK's client over Streamable HTTP at ``url``'s ``/mcp``, sending ``secret``."""
    async with (
        httpx2.AsyncClient(headers=bearer(secret)) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        yield client


def text(result: CallToolResult) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


@pytest.fixture
def served(executor) -> Iterator[str]:
    """The executor's whole app (REST, MCP, the inbox) on 127.0.0.1; its base URL."""
    with uvicorn_serving(create_app(executor)) as url:
        yield url


# --- 6. a repeat while the first call runs is answered at once ---------------------------------


async def test_a_repeat_while_the_first_call_runs_is_an_in_progress_result_at_once_then_replays(
    gated, gate, clock
):
    _, secret = gated.ledger.keys.create("alice", {GATE}, now=clock.now)
    meta = {IDEMPOTENCY: "k"}
    with uvicorn_serving(create_app(gated)) as url:
        async with connect(url, secret) as first_client, connect(url, secret) as client:
            first = asyncio.create_task(
                first_client.call_tool("gate_set_level", {"level": 3}, meta=meta)
            )
            try:
                started = await anyio.to_thread.run_sync(gate.started.wait, WAIT)
                assert started, "the first call's handler did not start"
                repeat = await client.call_tool("gate_set_level", {"level": 3}, meta=meta)
                assert repeat.is_error
                assert repeat.structured_content["error"]["code"] == "in_progress"
                assert repeat.structured_content["error"]["details"]["retry_after"] > 0
                assert (gate.finished, first.done()) == (0, False)  # the first still runs
            finally:
                gate.opened.set()
            answered = await first
            again = await client.call_tool("gate_set_level", {"level": 3}, meta=meta)
    assert not answered.is_error, text(answered)
    assert not again.is_error, text(again)
    assert text(again) == text(answered) == '{"level":3}'
    assert gate.runs == 1


# --- 10. a rejected call repeated with its idempotency key -------------------------------------


async def test_a_rejected_write_repeated_over_mcp_replays_the_rejection_and_the_history_says_no_write_ran(  # noqa: E501
    served, executor, shop, clock
):
    _, secret = executor.ledger.keys.create("alice", {READ, WRITE}, now=clock.now)
    _, root = executor.ledger.keys.create("root", {READ, DECIDE_SCOPE}, now=clock.now)
    meta = {IDEMPOTENCY: "k1"}
    async with connect(served, secret) as client:
        held = await client.call_tool("shop_delete_product", {"sku": "TEA-0001"}, meta=meta)
        [pending] = executor.pending()
        with httpx.Client(base_url=served, timeout=WAIT) as http:
            reject = http.post(f"/v1/confirmations/{pending.id}/reject", headers=bearer(root))
            assert reject.status_code == 200, reject.text
        repeat = await client.call_tool("shop_delete_product", {"sku": "TEA-0001"}, meta=meta)
    assert not held.is_error
    assert pending.id in text(held)
    assert repeat.is_error
    assert '"status":"rejected"' in text(repeat)
    with httpx.Client(base_url=served, timeout=WAIT, follow_redirects=True) as browser:
        sign_in(browser, root)
        row = history_row(browser.get("/ui/history").text, pending.id)
    assert "no write ran (rejected)" in row
    assert "replayed" not in row
    assert shop.writes() == []


# --- 3. the cap of pending holds ----------------------------------------------------------------


async def test_past_the_cap_of_pending_holds_a_call_is_a_too_many_pending_result(
    served, executor, shop, clock
):
    executor.ledger.set_setting("max_pending_holds", 1)
    _, secret = executor.ledger.keys.create("alice", {READ, WRITE}, now=clock.now)
    async with connect(served, secret) as client:
        first = await client.call_tool("shop_delete_product", {"sku": "TEA-0001"})
        second = await client.call_tool("shop_delete_product", {"sku": "TEA-0002"})
    assert not first.is_error, text(first)
    assert second.is_error
    error: dict[str, Any] = second.structured_content["error"]
    assert error["code"] == "too_many_pending"
    assert error["details"]["retry_after"] >= 1
    assert "max_pending_holds" in text(second)
    assert len(executor.pending()) == 1
    assert shop.writes() == []


# --- 12. the operator may hold every key write --------------------------------------------------


async def test_with_hold_key_writes_a_keys_small_write_over_mcp_is_held(
    served, executor, shop, clock
):
    executor.ledger.set_setting("hold_key_writes", True)
    _, secret = executor.ledger.keys.create("alice", {READ, WRITE}, now=clock.now)
    async with connect(served, secret) as client:
        held = await client.call_tool("shop_set_prices", prices())
    [pending] = executor.pending()
    assert not held.is_error, text(held)
    assert pending.id in text(held)
    assert pending.tool == "shop.set_prices"
    assert shop.writes() == []


async def test_with_hold_key_writes_the_tool_list_says_the_operator_holds_writes(
    served, executor, clock
):
    executor.ledger.set_setting("hold_key_writes", True)
    _, secret = executor.ledger.keys.create("alice", {READ, WRITE}, now=clock.now)
    async with connect(served, secret) as client:
        listed = await client.list_tools()
    hold = {tool.name: (tool.meta or {}).get("turnkit/hold") for tool in listed.tools}
    assert hold["shop_set_prices"] == "operator"
    assert hold["shop_list_products"] == "never"
