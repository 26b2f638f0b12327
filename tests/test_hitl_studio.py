"""LangChain's HITL shapes through the real ``langgraph dev`` and ``langgraph_sdk``, with exactly
the values LangChain's UIs send: the repository's turn graph (``turnkit``) and a ``create_agent``
agent governed by ``TurnkitMiddleware`` (``governed_agent``, ``_studio_agent.py``), both served by
one server on the demo catalogue. The server helpers are ``_studio``'s.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client

from _serving import free_port
from _studio import (
    LANGGRAPH,
    REPO,
    Server,
    count_price_writes,
    offline_env,
    query,
    wait,
    wait_until_ready,
)

pytestmark = pytest.mark.slow  # end to end: skip locally with -m 'not slow'

CHEAPER = {"messages": [{"role": "user", "content": "cheaper, please"}]}
HELD_ARGS = {"prices": [{"price": 6.33, "sku": "ACC-0001"}]}
PRICE = "SELECT price FROM products WHERE sku = 'ACC-0001'"
WRITES = "SELECT sku, price FROM price_writes"


@pytest.fixture
def served(tmp_path) -> Iterator[tuple[Server, Path]]:
    """``langgraph dev`` serving ``turnkit`` (the repository's graph) and ``governed_agent``, and
    the demo catalogue's file (every price write to it is logged in ``price_writes``)."""
    config = json.loads((REPO / "langgraph.json").read_text())
    config["dependencies"] = [str(REPO)]
    config["graphs"]["governed_agent"] = f"{REPO / 'tests' / '_studio_agent.py'}:agent"
    (tmp_path / "langgraph.json").write_text(json.dumps(config))
    db = tmp_path / "demo" / "catalogue.sqlite"
    count_price_writes(db)
    port = free_port()
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1",
             "--port", str(port), "--config", str(tmp_path / "langgraph.json")],
            cwd=tmp_path, env=offline_env(TURNKIT_DEMO_DB=str(db)), stdin=subprocess.DEVNULL,
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    server = Server(f"http://127.0.0.1:{port}", process, log)
    try:
        wait_until_ready(server)
        yield server, db
    finally:
        server.stop()
        print(f"--- {log} ---\n{server.log_tail()}")  # shown by pytest on failure only


async def _hold(client: Any, graph: str) -> tuple[str, dict[str, Any]]:
    """A new thread whose run stopped at the held price change; its interrupt's value."""
    tid = (await wait(client.threads.create()))["thread_id"]
    stopped = await wait(client.runs.wait(tid, graph, input=CHEAPER))
    (interrupt,) = stopped["__interrupt__"]
    return tid, interrupt["value"]


def _check_request(value: dict[str, Any]) -> None:
    """The interrupt as Agent Chat UI and Agent Inbox read it."""
    (request,) = value["action_requests"]
    assert request["name"] == "catalogue_set_prices"
    assert request["args"] == HELD_ARGS
    assert request["description"].startswith("Set product prices (catalogue_set_prices) waits")
    (config,) = value["review_configs"]
    assert config["action_name"] == "catalogue_set_prices"
    assert config["allowed_decisions"] == ["approve", "edit", "reject"]
    assert config["args_schema"]["required"] == ["prices"]
    (held,) = value["confirmations"]  # the versioned fields, beside
    assert value["version"] == 1
    assert held["arguments"] == HELD_ARGS


def _tool_answer(messages: list[dict[str, Any]]) -> dict[str, Any]:
    (tool,) = [m for m in messages if m["type"] == "tool" and "catalogue_set" in (m["name"] or "")]
    return json.loads(tool["content"])


@pytest.mark.parametrize("graph", ["turnkit", "governed_agent"])
async def test_agent_chat_ui_approves_and_rejects_through_langgraph_dev(served, graph):
    server, db = served
    async with get_client(url=server.url) as client:
        tid, value = await _hold(client, graph)
        _check_request(value)
        state = await wait(client.threads.get_state(tid))
        assert [i["value"] for i in state["interrupts"]] == [value]

        # a malformed answer is refused with what to send, never a pydantic dump
        with pytest.raises(Exception, match="ResumeError") as refused:
            await wait(client.runs.wait(tid, graph, command={"resume": {"decisions": []}}))
        assert "0 decisions for 1 held calls ['catalogue_set_prices']" in str(refused.value)
        assert "validation error" not in str(refused.value).lower()
        assert query(db, WRITES) == []

        approve = {"decisions": [{"type": "approve"}]}
        done = await wait(client.runs.wait(tid, graph, command={"resume": approve}))
        assert _tool_answer(done["messages"])["status"] == "ok"
        assert done["messages"][-1]["content"].startswith("[scripted demo model] Done")
        assert query(db, WRITES) == [("ACC-0001", 6.33)]

        tid, _ = await _hold(client, graph)
        reject = {"decisions": [{"type": "reject", "message": "Not today."}]}
        done = await wait(client.runs.wait(tid, graph, command={"resume": reject}))
        answer = _tool_answer(done["messages"])
        assert answer["status"] == "rejected"
        assert answer["message"] == "Not today."
    assert query(db, WRITES) == [("ACC-0001", 6.33)]


@pytest.mark.parametrize("graph", ["turnkit", "governed_agent"])
async def test_agent_chat_ui_and_agent_inbox_edits_run_once_through_langgraph_dev(served, graph):
    server, db = served
    chat_ui = {
        "type": "edit",
        "edited_action": {
            "name": "catalogue_set_prices",
            "args": {"prices": [{"sku": "ACC-0001", "price": 6.5}]},
        },
    }
    inbox = {
        "type": "edit",
        "args": {
            "action": "catalogue_set_prices",
            "args": {"prices": [{"sku": "ACC-0001", "price": 6.25}]},
        },
    }
    async with get_client(url=server.url) as client:
        for decision in (chat_ui, inbox):
            tid, _ = await _hold(client, graph)
            resume = {"decisions": [decision]}
            done = await wait(client.runs.wait(tid, graph, command={"resume": resume}))
            assert _tool_answer(done["messages"])["status"] == "ok"
        tid, _ = await _hold(client, graph)
        inbox_reject = {"decisions": [{"type": "reject", "args": "Too cheap."}]}
        done = await wait(client.runs.wait(tid, graph, command={"resume": inbox_reject}))
        assert _tool_answer(done["messages"])["message"] == "Too cheap."
    assert query(db, WRITES) == [("ACC-0001", 6.5), ("ACC-0001", 6.25)]
    assert query(db, PRICE) == [(6.25,)]
