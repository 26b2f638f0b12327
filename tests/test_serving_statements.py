"""What one call costs the database, counted rather than timed: a REST invoke and an MCP
``tools/call`` of a read are three statements (the key with the operator's settings, in one;
the usage charge; the audit row), as the hand-written floor of ``bench/server.py``; on SQLite
and PostgreSQL, over real HTTP with keep-alive.

Saving the statement must not weaken a promise: a setting changed by the operator holds at the
next call, a revoked key is refused at the next request, and keys kept in another database
than the executor's ledger still read the executor's settings."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from _serving import uvicorn_serving
from turnkit import Executor, Registry, open_ledger
from turnkit.ledger.keys import ApiKeys  # internal: the keys of another database
from turnkit.server import create_app

READ = {"shop.products:read"}
CALLS = 5


class Counted:
    """The statements ``ledger`` runs (its ``_rows`` and ``_run``: one round trip each)."""

    def __init__(self, ledger: Any) -> None:
        self.count = 0
        for name in ("_rows", "_run"):
            setattr(ledger, name, self._counting(getattr(ledger, name)))

    def _counting(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return method(*args, **kwargs)

        return counted


@pytest.fixture
def served(executor: Executor) -> Iterator[tuple[httpx.Client, Counted]]:
    """The whole app (REST and MCP) on 127.0.0.1, a keep-alive client, the statements counted."""
    counted = Counted(executor.ledger)
    with uvicorn_serving(create_app(executor)) as url, httpx.Client(base_url=url) as client:
        yield client, counted


def invoke(client: httpx.Client, secret: str, input: dict[str, Any] | None = None) -> Any:
    return client.post(
        "/v1/tools/shop.list_products/invoke",
        json={"input": input or {}},
        headers={"Authorization": f"Bearer {secret}"},
    )


def mcp_call(client: httpx.Client, secret: str) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "shop_list_products", "arguments": {}}}  # fmt: skip
    headers = {"Authorization": f"Bearer {secret}", "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json",
               "MCP-Protocol-Version": "2025-06-18"}  # fmt: skip
    return client.post("/mcp", content=json.dumps(body), headers=headers)


def test_a_rest_invoke_of_a_read_is_three_statements(served, executor, clock) -> None:
    client, counted = served
    _, secret = executor.ledger.keys.create("bob", READ, now=clock.now)
    assert invoke(client, secret).status_code == 200  # records the key's first use
    counted.count = 0
    for _ in range(CALLS):
        answer = invoke(client, secret)
        assert answer.status_code == 200, answer.text
    assert counted.count == 3 * CALLS


def test_an_mcp_tools_call_of_a_read_is_three_statements(served, executor, clock) -> None:
    client, counted = served
    _, secret = executor.ledger.keys.create("bob", READ, now=clock.now)
    assert mcp_call(client, secret).status_code == 200
    counted.count = 0
    for _ in range(CALLS):
        answer = mcp_call(client, secret)
        assert answer.status_code == 200, answer.text
        assert answer.json()["result"]["isError"] is False
    assert counted.count == 3 * CALLS


def test_a_setting_the_operator_changes_holds_at_the_next_call(served, executor, clock) -> None:
    client, _ = served
    _, secret = executor.ledger.keys.create("bob", READ, now=clock.now)
    for limit, status in ((1_000, 200), (5, 422), (1_000, 200)):  # {"limit":3}: 11 characters
        executor.ledger.set_setting("max_input_chars", limit)
        answer = invoke(client, secret, {"limit": 3})
        assert answer.status_code == status, answer.text


def test_a_revoked_key_is_refused_at_the_next_request(served, executor, clock) -> None:
    client, _ = served
    key, secret = executor.ledger.keys.create("bob", READ, now=clock.now)
    assert invoke(client, secret).status_code == 200
    assert mcp_call(client, secret).status_code == 200
    executor.ledger.keys.revoke(key.id, now=clock.now)
    refused = invoke(client, secret)
    assert refused.status_code == 401
    assert "revoked" in refused.json()["detail"]
    assert mcp_call(client, secret).status_code == 401


def test_keys_in_another_database_still_read_the_executors_settings(
    executor, clock, tmp_path
) -> None:
    elsewhere = open_ledger(str(tmp_path / "keys.sqlite"))
    keys = ApiKeys(elsewhere)
    _, secret = keys.create("bob", READ, now=clock.now)
    elsewhere.set_setting("max_input_chars", 1_000_000)  # not the executor's: never read
    executor.ledger.set_setting("max_input_chars", 2)
    app = create_app(executor, keys=keys)
    try:
        with uvicorn_serving(app) as url, httpx.Client(base_url=url) as client:
            assert invoke(client, secret).status_code == 200  # "{}": 2 characters
            assert invoke(client, secret, {"limit": 3}).status_code == 422
            executor.ledger.clear_setting("max_input_chars")
            assert invoke(client, secret, {"limit": 3}).status_code == 200
    finally:
        elsewhere.close()


def test_with_settings_reads_a_key_and_the_overrides_together(ledger, clock) -> None:
    ledger.set_setting("confirm_batch_over", 7)
    key, secret = ledger.keys.create("bob", READ, now=clock.now)
    found, overrides = ledger.keys.with_settings(secret, now=clock.now)
    assert found == key
    assert overrides == {"confirm_batch_over": 7}
    assert ledger.keys.with_settings("tk_" + "x" * 40) == (None, {})
    assert ledger.keys.with_settings("not a key") == (None, {})
    ledger.keys.revoke(key.id, now=clock.now)
    revoked, _ = ledger.keys.with_settings(secret, now=clock.now)
    assert revoked is not None
    assert revoked.refused(clock.now) is not None


def test_with_settings_parses_a_key_and_the_overrides_again_only_when_they_change(
    ledger, clock
) -> None:
    ledger.set_setting("confirm_batch_over", 7)
    key, secret = ledger.keys.create("bob", READ, now=clock.now)
    ledger.keys.with_settings(secret, now=clock.now)  # its first use is written: a new row
    used, overrides = ledger.keys.with_settings(secret, now=clock.now)
    overrides["confirm_batch_over"] = 99  # the caller's own copy
    again, overrides = ledger.keys.with_settings(secret, now=clock.now)
    assert again is used  # the same row: parsed once
    assert overrides == {"confirm_batch_over": 7}
    ledger.set_setting("confirm_batch_over", 8)
    assert ledger.keys.with_settings(secret, now=clock.now)[1] == {"confirm_batch_over": 8}
    ledger.keys.revoke(key.id, now=clock.now)
    revoked, _ = ledger.keys.with_settings(secret, now=clock.now)
    assert revoked is not None
    assert revoked.refused(clock.now) is not None


def test_the_openapi_document_still_shows_invokes_bearer_and_header(executor) -> None:
    operation = create_app(executor).openapi()["paths"]["/v1/tools/{name}/invoke"]["post"]
    assert operation["security"] == [{"ApiKey": []}]
    names = [(p["name"], p["in"]) for p in operation["parameters"]]
    assert names == [("name", "path"), ("idempotency-key", "header")]


def test_merged_settings_are_remembered_per_distinct_overrides_of_each_type() -> None:
    executor = Executor(Registry())
    try:
        ignored = executor.settings_with({"hold_key_writes": 1})  # not a boolean: ignored
        held = executor.settings_with({"hold_key_writes": True})
        assert (ignored.hold_key_writes, held.hold_key_writes) == (False, True)
        assert executor.settings_with({"hold_key_writes": True}) is held
        listed = {"api_session_write_modules": ["shop"]}  # a list: not hashable, still merged
        assert executor.settings_with(listed).api_session_write_modules == frozenset({"shop"})
        assert executor.settings_with({}) is executor.defaults
    finally:
        executor.close()
