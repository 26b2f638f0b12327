"""Who is calling, through the real ``langgraph dev``: a deployment configured by ``TURNKIT_*``
(``turnkit.deploy.env``), LangGraph's custom auth (``_deploy_auth``: Alice and Bob sign in with
tokens, keys are turnkit's), the REST app on the same ledger. Each user sees only their tools and
can decide only their own holds; a run that no one signed in fails, saying how to sign in."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from _openai_server import OpenAIServer, call, reply
from _shop import Shop
from _studio import REPO, Server, launch, wait, wait_until_ready
from turnkit import open_ledger
from turnkit.executor.confirmations import DECIDE_SCOPE  # internal: the scope has no public name

pytestmark = pytest.mark.slow  # end to end: skip locally with -m 'not slow'

TESTS = REPO / "tests"
GRAPH_ID = "shop"


def _answer(body: dict[str, Any]) -> Any:
    """Say which tools were offered; asked to delete, delete; after a tool, say what it gave."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return f"done: {last['content']}"
    if "delete" in str(last.get("content")):
        return reply(tool_calls=[call("shop_delete_product", {"sku": "ABC-0001"})])
    return "tools: " + ",".join(t["function"]["name"] for t in body.get("tools") or [])


@pytest.fixture
def model() -> Iterator[OpenAIServer]:
    with OpenAIServer([_answer] * 20) as server:
        yield server
    assert server.errors == []


@pytest.fixture
def deployed(tmp_path, model) -> Iterator[Any]:
    """``deployed(auth=True, **env)``: ``langgraph dev`` serving ``turnkit.deploy.env`` with the
    test shop, its rights and a ledger in ``tmp_path`` where the agent may act in the shop."""
    ledger = open_ledger(tmp_path / "ledger.sqlite")
    ledger.set_setting("api_session_write_modules", ["shop"])
    ledger.close()
    servers: list[Server] = []

    def start(*, auth: bool = True, **env: str) -> Server:
        config: dict[str, Any] = {
            "dependencies": [str(REPO)],
            "graphs": {GRAPH_ID: "turnkit.deploy.env:graph"},
            "http": {"app": "turnkit.deploy.env:app", "disable_mcp": True},
        }
        if auth:
            config["auth"] = {"path": "_deploy_auth:auth"}
        (tmp_path / "langgraph.json").write_text(json.dumps(config))
        server = launch(
            tmp_path / "langgraph.json",
            tmp_path,
            PYTHONPATH=str(TESTS),
            TURNKIT_DATABASE_URL=str(tmp_path / "ledger.sqlite"),
            TURNKIT_MODULES="_deploy_app:shop",
            TURNKIT_PERMISSIONS="_deploy_app:rights",
            TURNKIT_MODEL="fake-model",
            OPENAI_BASE_URL=model.url,
            SHOP_LOG=str(tmp_path / "writes.log"),
            **env,
        )
        servers.append(server)
        wait_until_ready(server)
        return server

    yield start
    for server in servers:
        server.stop()
        print(f"--- {server.log} ---\n{server.log_tail()}")  # shown by pytest on failure only


async def _ask(client: Any, text: str) -> tuple[str, dict[str, Any]]:
    tid = (await wait(client.threads.create()))["thread_id"]
    done = await wait(
        client.runs.wait(tid, GRAPH_ID, input={"messages": [{"role": "user", "content": text}]})
    )
    return tid, done


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_each_signed_in_user_sees_their_tools_and_decides_only_their_holds(
    deployed, tmp_path
):
    ledger = open_ledger(tmp_path / "ledger.sqlite")
    _, bob_key = ledger.keys.create(
        "bob", {"shop.products:read", "shop.products:write", DECIDE_SCOPE},
        allow=["shop.list_products"],
    )  # fmt: skip
    server = deployed()
    shop = Shop(tmp_path / "writes.log")

    async with (
        get_client(url=server.url, headers=_bearer("alice-token")) as alice,
        get_client(url=server.url, headers=_bearer("bob-token")) as bob,
        get_client(url=server.url, headers=_bearer(bob_key)) as bobs_key,
        get_client(url=server.url) as nobody,
        httpx.AsyncClient(base_url=server.url, headers=_bearer(bob_key)) as rest,
    ):
        # each caller sees what their rights show: Alice manages the shop, Bob only views it,
        # Bob's key only the one tool of its allow list
        _, mine = await _ask(alice, "what can I do?")
        assert mine["messages"][-1]["content"] == (
            "tools: shop_list_products,shop_set_prices,shop_delete_product"
        )
        _, his = await _ask(bob, "what can I do?")
        assert his["messages"][-1]["content"] == "tools: shop_list_products"
        _, keyed = await _ask(bobs_key, "what can I do?")
        assert keyed["messages"][-1]["content"] == "tools: shop_list_products"
        with pytest.raises(httpx.HTTPStatusError, match="sign in") as unsigned:
            await _ask(nobody, "what can I do?")
        assert unsigned.value.response.status_code == 401

        # Alice's delete is held for her, as her session
        tid, stopped = await _ask(alice, "delete ABC-0001")
        (held,) = stopped["__interrupt__"][0]["value"]["confirmations"]
        cid = held["confirmation_id"]
        assert ledger.get_confirmation(cid).caller.identity == "session:alice"

        # Bob can neither see her thread nor resume it, nor decide her hold over REST
        with pytest.raises(httpx.HTTPStatusError) as hidden:
            await wait(bob.threads.get_state(tid))
        assert hidden.value.response.status_code == 404
        with pytest.raises(httpx.HTTPStatusError) as hidden:
            await wait(bob.runs.wait(tid, GRAPH_ID, command={"resume": {cid: "approve"}}))
        assert hidden.value.response.status_code == 404
        refused = await rest.post(f"/v1/confirmations/{cid}/approve")
        assert refused.status_code == 403, refused.text
        assert shop.writes() == []

        # Alice approves: the write runs once
        done = await wait(alice.runs.wait(tid, GRAPH_ID, command={"resume": {cid: "approve"}}))

    assert done["messages"][-1]["content"].startswith("done: ")
    assert shop.writes() == [{"tool": "delete_product", "input": {"sku": "ABC-0001"}}]
    ledger.close()


async def test_a_run_no_one_signed_in_fails_without_a_default_user_and_acts_for_it_with_one(
    deployed,
):
    server = deployed(auth=False)
    async with get_client(url=server.url) as client:
        with pytest.raises(Exception, match="MissingCallerError") as failed:
            await _ask(client, "what can I do?")
    assert "sign the request in" in str(failed.value)

    server = deployed(auth=False, TURNKIT_DEFAULT_USER="bob")
    async with get_client(url=server.url) as client:
        _, done = await _ask(client, "what can I do?")
    assert done["messages"][-1]["content"] == "tools: shop_list_products"


async def test_a_request_claiming_to_be_studio_acts_for_no_one_when_the_server_has_auth(
    deployed,
):
    """``x-auth-scheme: langsmith`` skips the application's auth under ``langgraph dev`` (the
    request becomes Studio's own user): with custom auth it must not get the default user."""
    server = deployed(TURNKIT_DEFAULT_USER="bob")
    studio = {"x-auth-scheme": "langsmith"}
    async with get_client(url=server.url, headers=studio) as client:
        with pytest.raises(Exception, match="MissingCallerError") as failed:
            await _ask(client, "what can I do?")
    assert "disable_studio_auth" in str(failed.value)
