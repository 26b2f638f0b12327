"""An MCP ``tools/call`` looks its key up in the worker thread that runs the call: one thread
hop, not two (``server/mcp_gate.py``), over real HTTP with keep-alive, on SQLite and PostgreSQL.

The promise a hop fewer must not weaken: a refused key (unknown, revoked, expired) gets its 401
saying why, runs nothing, and is charged and audited for nothing — also when the SDK answers
the request without reaching the call (a malformed call), when the body is too large to be read
before the key is known, and when it is sent in chunks."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from _serving import uvicorn_serving
from turnkit import Executor
from turnkit.server import create_app
from turnkit.server.mcp_gate import DEFER_UP_TO  # internal: the size that takes the usual way

READ = {"shop.products:read"}
WRITE = {"shop.products:write"}


class Hops:
    """Every hand-over to a worker thread in this process (``asyncio.to_thread`` and the loop's
    ``run_in_executor`` alike end in ``ThreadPoolExecutor.submit``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        submit = ThreadPoolExecutor.submit

        def counted(pool: ThreadPoolExecutor, *args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return submit(pool, *args, **kwargs)

        monkeypatch.setattr(ThreadPoolExecutor, "submit", counted)


@pytest.fixture
def client(executor: Executor) -> Iterator[httpx.Client]:
    """The whole app on 127.0.0.1 and one keep-alive client."""
    with uvicorn_serving(create_app(executor)) as url, httpx.Client(base_url=url) as client:
        yield client


def mcp_post(client: httpx.Client, secret: str, name: str, arguments: Any, **sent: Any) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}  # fmt: skip
    headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-06-18"}  # fmt: skip
    return client.post("/mcp", content=sent.get("content", json.dumps(body)), headers=headers)


def refused_secrets(executor: Executor, clock: Any, scopes: set[str]) -> dict[str, str]:
    """A secret of each kind of refused key, and what its 401 says."""
    keys = executor.ledger.keys
    revoked, revoked_secret = keys.create("bob", scopes, now=clock.now)
    keys.revoke(revoked.id, now=clock.now)
    expired, expired_secret = keys.create("bob", scopes, expires_in=5, now=clock.now - 10)
    return {
        revoked_secret: f"the key {revoked.id} was revoked at",
        expired_secret: f"the key {expired.id} expired at",
        "tk_" + "C" * 43: "not a known API key",
    }


def assert_refused(answer: Any, said: str) -> None:
    assert answer.status_code == 401, answer.text
    assert said in answer.headers["www-authenticate"]
    assert said in answer.json()["error"]["message"]  # what the SDK's client raises


def test_a_tools_call_is_one_thread_hop_as_a_rest_invoke(
    client, executor, clock, monkeypatch
) -> None:
    _, secret = executor.ledger.keys.create("bob", READ, now=clock.now)
    assert mcp_post(client, secret, "shop_list_products", {}).status_code == 200  # first use
    hops = Hops(monkeypatch)
    for _ in range(5):
        invoked = client.post(
            "/v1/tools/shop.list_products/invoke",
            json={"input": {"limit": 1}},
            headers={"Authorization": f"Bearer {secret}"},
        )
        assert invoked.status_code == 200, invoked.text
    rest, hops.count = hops.count, 0
    for _ in range(5):
        answer = mcp_post(client, secret, "shop_list_products", {"limit": 1})
        assert answer.status_code == 200, answer.text
        (content,) = answer.json()["result"]["content"]
        assert json.loads(content["text"]) == [{"sku": "TEA-0001", "price": 4.5}]
    assert rest == 5  # REST finds the key in the call's hop (acall_as), rights asked there too
    assert hops.count == rest  # so does MCP


def test_a_refused_key_is_401_saying_why_and_its_write_never_runs(
    client, executor, clock, shop
) -> None:
    audited = len(executor.ledger.audit_rows())
    for secret, said in refused_secrets(executor, clock, WRITE).items():
        assert_refused(mcp_post(client, secret, "shop_delete_product", {"sku": "TEA-0001"}), said)
    assert shop.writes() == []
    assert executor.ledger.pending_count(clock.now) == 0
    assert len(executor.ledger.audit_rows()) == audited  # nothing charged or audited either


def test_a_refused_keys_read_runs_nothing(client, executor, clock, shop) -> None:
    for secret, said in refused_secrets(executor, clock, READ).items():
        assert_refused(mcp_post(client, secret, "shop_list_products", {}), said)
    assert shop.reads == 0


@pytest.mark.parametrize("arguments", ["not an object", ["a", "list"]], ids=["string", "list"])
def test_a_refused_keys_malformed_call_is_401_not_the_sdks_answer(
    client, executor, clock, arguments
) -> None:
    _, usable = executor.ledger.keys.create("bob", READ, now=clock.now)
    sdk = mcp_post(client, usable, "shop_list_products", arguments)
    assert sdk.status_code != 401  # the SDK's own answer to a usable key
    for secret, said in refused_secrets(executor, clock, READ).items():
        assert_refused(mcp_post(client, secret, "shop_list_products", arguments), said)


def test_a_body_too_large_to_read_before_the_key_takes_the_usual_way(
    client, executor, clock, shop
) -> None:
    _, usable = executor.ledger.keys.create("bob", READ, now=clock.now)
    padding = {"padding": "x" * DEFER_UP_TO}  # not in the schema: the executor refuses it
    called = mcp_post(client, usable, "shop_list_products", padding)
    assert called.status_code == 200
    assert called.json()["result"]["isError"] is True
    for secret, said in refused_secrets(executor, clock, READ).items():
        assert_refused(mcp_post(client, secret, "shop_list_products", padding), said)
    assert shop.reads == 0


def test_a_body_sent_in_chunks_takes_the_usual_way(client, executor, clock) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "shop_list_products", "arguments": {}}}  # fmt: skip

    def chunks() -> Iterator[bytes]:  # no Content-Length: Transfer-Encoding chunked
        yield json.dumps(body).encode()

    _, usable = executor.ledger.keys.create("bob", READ, now=clock.now)
    assert mcp_post(client, usable, "", None, content=chunks()).status_code == 200
    for secret, said in refused_secrets(executor, clock, READ).items():
        assert_refused(mcp_post(client, secret, "", None, content=chunks()), said)


def test_a_key_revoked_between_two_calls_is_refused_at_the_next(client, executor, clock) -> None:
    key, secret = executor.ledger.keys.create("bob", READ, now=clock.now)
    assert mcp_post(client, secret, "shop_list_products", {}).status_code == 200
    executor.ledger.keys.revoke(key.id, now=clock.now)
    assert_refused(mcp_post(client, secret, "shop_list_products", {}), "was revoked at")


@pytest.mark.parametrize("where", ["the body", "the arguments"])
def test_a_body_nested_past_the_parsers_depth_is_401_for_a_refused_key(
    client, executor, clock, where
) -> None:
    nested = "[" * 5_000  # under DEFER_UP_TO, past what json.loads can nest
    body = nested if where == "the body" else (
        '{"jsonrpc":"2.0","id":1,"method":"tools/call",'
        f'"params":{{"name":"shop_list_products","arguments":{nested}}}}}'
    )  # fmt: skip
    _, usable = executor.ledger.keys.create("bob", READ, now=clock.now)
    assert mcp_post(client, usable, "", None, content=body).status_code < 500
    for secret, said in refused_secrets(executor, clock, READ).items():
        assert_refused(mcp_post(client, secret, "", None, content=body), said)


def test_a_database_failing_while_a_malformed_calls_key_is_looked_up_is_a_500_with_an_error_id(
    client, executor, clock, monkeypatch, caplog, expect_errors
) -> None:
    """The SDK answers the malformed call without reaching it: the key is looked up as the
    answer starts, and that lookup's failure is turnkit's 500, its id logged once."""
    expect_errors("MCP request failed")
    _, secret = executor.ledger.keys.create("bob", READ, now=clock.now)

    def lookup(self: Any, secret: str) -> None:
        raise RuntimeError("connection to postgresql://u:secret@db.internal/app refused")

    monkeypatch.setattr(type(executor.ledger.keys), "by_secret", lookup)
    monkeypatch.setattr(type(executor.ledger.keys), "with_settings", lookup)
    caplog.set_level(logging.ERROR)
    answer = mcp_post(client, secret, "shop_list_products", "not an object")

    assert answer.status_code == 500
    assert "secret" not in answer.text
    error = answer.json()["error"]
    logged = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in logged] == [
        f"MCP request failed (error id {error['data']['error_id']})"
    ]
