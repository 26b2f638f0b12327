"""LangGraph's server as the engine: two ``langgraph dev`` servers, one PostgreSQL ledger.

Each server is its own process in its own folder, serving the ``langgraph.json`` of
docs/guides/langgraph-server.md ("The configuration": ``turnkit.deploy.env``'s graph, API-key
auth and REST app) with
``TURNKIT_DATABASE_URL`` naming one fresh PostgreSQL schema. The shop's writes go to one log file,
the tool's own record of what ran. A run on one server holds a delete; the reviewer decides it
through the other server's REST API; the run, resumed where it started, honours that decision:
the write ran once (or not at all), the audit has one row for the approved run, and a second
decision on the first server is 409 ``already_decided``.

LangGraph's own state (threads, runs, checkpoints) stays in each ``langgraph dev``'s in-memory
runtime: a thread lives on the server that made it. What the servers share is turnkit's ledger,
which is what a decision needs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from _openai_server import OpenAIServer, call, reply
from _shop import Shop
from _studio import REPO, RUN_TIMEOUT, Server, launch, wait, wait_until_ready
from conftest import postgres_url
from test_docs_blocks import blocks
from turnkit import Ledger, open_ledger
from turnkit.executor.confirmations import DECIDE_SCOPE  # internal: the scope has no public name

pytestmark = pytest.mark.slow  # end to end: skip locally with -m 'not slow'

SECTION = "The configuration"
DELETE = {"messages": [{"role": "user", "content": "delete ABC-0001"}]}


def readme_config() -> dict[str, Any]:
    """The ``langgraph.json`` of the README's section "On LangGraph's server"."""
    (text,) = [code for heading, code in blocks("json") if heading == SECTION]
    config: dict[str, Any] = json.loads(text)
    return config


GRAPH_ID = next(iter(readme_config()["graphs"]))


def _delete_then_say(body: dict[str, Any]) -> Any:
    """Asked to delete, call the delete; after the tool, say what it answered."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return f"done: {last['content']}"
    return reply(tool_calls=[call("shop_delete_product", {"sku": "ABC-0001"})])


@pytest.fixture
def model() -> Iterator[OpenAIServer]:
    """The chat model both servers ask: a delete, then one answer after it (one turn)."""
    with OpenAIServer([_delete_then_say] * 2) as server:
        yield server
    server.assert_done()


class Pair:
    """Two ``langgraph dev`` servers on one ledger, the ledger, the shop's write log, the agent's
    key (the run's caller) and the reviewer's key (decides others' holds over REST)."""

    def __init__(self, a: Server, b: Server, ledger: Ledger, shop: Shop) -> None:
        self.a, self.b, self.ledger, self.shop = a, b, ledger, shop
        _, self.agent_key = ledger.keys.create(
            "alice", {"shop.products:read", "shop.products:write"}
        )
        _, self.reviewer_key = ledger.keys.create("root", {"shop.products:read", DECIDE_SCOPE})


@pytest.fixture
def pair(tmp_path, model) -> Iterator[Pair]:
    """Two servers of the README's ``langgraph.json``, each in its own folder, on one fresh
    PostgreSQL schema (``TURNKIT_DATABASE_URL``) and one shop write log."""
    url = postgres_url()
    config = readme_config()
    config["dependencies"] = [str(REPO)]  # "." is the application's folder; here, turnkit's
    env = {
        "PYTHONPATH": str(REPO / "tests"),
        "TURNKIT_DATABASE_URL": url,
        "TURNKIT_MODULES": "_deploy_app:shop",
        "TURNKIT_PERMISSIONS": "_deploy_app:rights",
        "TURNKIT_MODEL": "fake-model",
        "OPENAI_BASE_URL": model.url,
        "SHOP_LOG": str(tmp_path / "writes.log"),
    }
    ledger = open_ledger(url)
    servers: list[Server] = []
    try:
        for name in ("a", "b"):
            folder = tmp_path / name
            folder.mkdir()
            (folder / "langgraph.json").write_text(json.dumps(config))
            servers.append(launch(folder / "langgraph.json", folder, **env))
        for server in servers:
            wait_until_ready(server)
        yield Pair(*servers, ledger=ledger, shop=Shop(tmp_path / "writes.log"))
    finally:
        for server in servers:
            server.stop()
            print(f"--- {server.log} ---\n{server.log_tail()}")  # shown by pytest on failure only
        ledger.close()


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _hold(client: Any) -> tuple[str, str]:
    """A new thread whose run stopped at the held delete; the thread's and the hold's ids."""
    tid = (await wait(client.threads.create()))["thread_id"]
    stopped = await wait(client.runs.wait(tid, GRAPH_ID, input=DELETE))
    (interrupt,) = stopped["__interrupt__"]
    (held,) = interrupt["value"]["confirmations"]
    assert held["tool"] == "shop.delete_product"
    return tid, held["confirmation_id"]


def _rest(server: Server, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, headers=_bearer(key), timeout=RUN_TIMEOUT)


async def test_a_hold_on_one_server_approved_through_the_other_runs_once(pair):
    async with (
        get_client(url=pair.a.url, headers=_bearer(pair.agent_key)) as on_a,
        _rest(pair.a, pair.reviewer_key) as rest_a,
        _rest(pair.b, pair.reviewer_key) as rest_b,
    ):
        tid, cid = await _hold(on_a)
        assert pair.shop.writes() == []

        # B never saw the run, but its REST reads the hold from the shared ledger
        listed = (await rest_b.get("/v1/confirmations")).json()
        assert [c["id"] for c in listed] == [cid]
        approved = await rest_b.post(f"/v1/confirmations/{cid}/approve")
        assert approved.status_code == 200, approved.text
        assert pair.shop.writes() == [{"tool": "delete_product", "input": {"sku": "ABC-0001"}}]

        # the run, resumed on A, honours B's decision: the delete does not run again
        done = await wait(on_a.runs.wait(tid, GRAPH_ID, command={"resume": {cid: "approve"}}))
        again = await rest_a.post(f"/v1/confirmations/{cid}/approve")

    assert done["messages"][-1]["content"].startswith("done: ")
    assert json.loads(done["messages"][-2]["content"])["executed"] is True
    assert pair.shop.writes() == [{"tool": "delete_product", "input": {"sku": "ABC-0001"}}]
    audit = [(r["tool"], r["status"], r["confirmation_id"]) for r in pair.ledger.audit_rows()]
    assert audit == [  # newest first: the one run of the write, after its hold
        ("shop.delete_product", "ok", cid),
        ("shop.delete_product", "confirmation_required", cid),
    ]
    assert again.status_code == 409, again.text
    assert again.json()["code"] == "already_decided"


async def test_a_hold_on_one_server_rejected_through_the_other_never_runs(pair):
    async with (
        get_client(url=pair.b.url, headers=_bearer(pair.agent_key)) as on_b,
        _rest(pair.a, pair.reviewer_key) as rest_a,
        _rest(pair.b, pair.reviewer_key) as rest_b,
    ):
        tid, cid = await _hold(on_b)
        rejected = await rest_a.post(f"/v1/confirmations/{cid}/reject")
        assert rejected.status_code == 200, rejected.text

        # resumed on B with the opposite answer: the decision taken on A stands
        done = await wait(on_b.runs.wait(tid, GRAPH_ID, command={"resume": {cid: "approve"}}))
        again = await rest_b.post(f"/v1/confirmations/{cid}/approve")

    assert done["messages"][-1]["content"].startswith("done: ")
    assert pair.shop.writes() == []
    assert again.status_code == 409, again.text
    assert again.json()["code"] == "already_decided"
    assert (await pair.ledger.aget_confirmation(cid)).status == "rejected"
