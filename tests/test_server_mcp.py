"""MCP at ``/mcp``: the SDK's own client over real Streamable HTTP (uvicorn on 127.0.0.1), and its
in-memory client, against ``turnkit.server.mcp``; on SQLite and PostgreSQL ledgers.

A held write is decided out of band here with ``executor.aconfirm`` and the key's own caller:
what ``POST /v1/confirmations/{id}/approve`` with that key does.

Reaches ``turnkit.server.mcp``, ``turnkit.server.mcp_tools``, ``turnkit.ledger.keys`` and
``turnkit.executor.confirmations`` directly: it tests the MCP server's own parts (verifier, app,
tools) with keys made in the ledger, which no public name exposes.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.types import CallToolResult
from mcp.types.version import KNOWN_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.applications import Starlette
from starlette.routing import Route

from _serving import uvicorn_serving
from _shop import prices
from turnkit import Executor, Registry, Settings, model_name
from turnkit.executor.confirmations import DECIDE_SCOPE
from turnkit.ledger.keys import ApiKey, ApiKeys
from turnkit.server import create_app
from turnkit.server.mcp import KeyVerifier, mcp_app, mcp_server
from turnkit.server.mcp_tools import GET_CONFIRMATION, McpTools

READ = "shop.products:read"
WRITE = "shop.products:write"
STOCK = "stock.levels:read"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
LEVEL = {
    "type": "object",
    "required": ["sku", "level"],
    "properties": {"sku": {"type": "string"}, "level": {"type": "integer"}},
}


class Stock:
    """Module ``stock``: tools that declare an output schema (a read, and a write always held)."""

    key = "stock"

    def __init__(self) -> None:
        self.cleared: list[str] = []

    def clear_level(self, input: dict, ctx: Any) -> dict:
        self.cleared.append(input["sku"])
        return {"sku": input["sku"], "level": 0}

    def api_tools(self) -> list[dict]:
        sku = {"type": "object", "required": ["sku"], "properties": {"sku": {"type": "string"}}}
        return [
            {
                "name": "stock.get_level",
                "scope": STOCK,
                "permission": "shop.view",
                "handler": lambda input, ctx: {"sku": input["sku"], "level": 3},
                "annotations": {"read_only": True, "idempotent": True},
                "input_schema": sku,
                "output_schema": LEVEL,
            },
            {
                "name": "stock.clear_level",
                "scope": STOCK,
                "permission": "shop.manage",
                "handler": self.clear_level,
                "danger": "always",
                "annotations": {"destructive": True, "open_world": True},
                "input_schema": sku,
                "output_schema": LEVEL,
            },
        ]


@dataclass
class Served:
    """A uvicorn server on 127.0.0.1 hosting the MCP app at ``/mcp``."""

    url: str
    executor: Executor
    keys: ApiKeys
    stock: Stock

    def key(self, user: str, *scopes: str, **options: Any) -> tuple[ApiKey, str]:
        return self.keys.create(user, scopes, **options)


@pytest.fixture
def stock() -> Stock:
    return Stock()


@pytest.fixture
def mcp_executor(ledger, shop, stock, rights, clock) -> Iterator[Executor]:
    executor = Executor(
        Registry([shop, stock]),
        ledger=ledger,
        permissions=rights,
        settings=Settings(handler_timeout=2.0),
        clock=clock,
    )
    yield executor
    executor.close()


@pytest.fixture
def served(mcp_executor, stock) -> Iterator[Served]:
    """The MCP app in a small Starlette host that enters its lifespan, served by uvicorn."""
    keys = mcp_executor.ledger.keys
    app, lifespan = mcp_app(mcp_executor, keys)

    @asynccontextmanager
    async def host_lifespan(_: Starlette) -> AsyncIterator[None]:
        async with lifespan():
            yield

    host = Starlette(routes=[Route("/mcp", app)], lifespan=host_lifespan)
    with uvicorn_serving(host) as base:
        yield Served(f"{base}/mcp", mcp_executor, keys, stock)


@asynccontextmanager
async def connect(url: str, secret: str, mode: Any = "auto") -> AsyncIterator[Client]:
    """The SDK's client over Streamable HTTP, sending ``secret`` as the bearer key."""
    headers = {"Authorization": f"Bearer {secret}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


def post(url: str, body: Any, authorization: str | None = None, **headers: str) -> httpx2.Response:
    """One raw request as a 2026-07-28 client would send it (``body`` sent as given)."""
    sent = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2026-07-28",
        **headers,
    }
    if authorization is not None:
        sent["Authorization"] = authorization
    if isinstance(body, dict):  # the routing headers a real client derives from the body
        sent["Mcp-Method"] = str(body.get("method"))
        name = (body.get("params") or {}).get("name")
        if isinstance(name, str) and name.isprintable() and len(name) < 10_000:
            sent["Mcp-Name"] = name
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx2.post(url, content=content, headers=sent, timeout=30)


def call(name: object, arguments: object) -> dict[str, Any]:
    """A ``tools/call`` JSON-RPC request with its ``_meta`` envelope."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"name": name, "arguments": arguments, "_meta": meta}
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def text(result: CallToolResult) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


# --- keys --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("authorization", "said"),
    [
        (None, "send an API key"),
        ("Bearer", "send an API key"),
        ("Basic YWxpY2U6c2VjcmV0", "send an API key"),
        ("Bearer nonsense", "not a known API key"),
        ("Bearer tk_" + "A" * 43, "not a known API key"),
    ],
)
def test_request_without_a_valid_key_is_401_saying_why(served, authorization, said) -> None:
    response = post(served.url, call("shop_list_products", {}), authorization)

    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="invalid_token", error_description="')
    assert said in challenge
    assert said in response.json()["error"]["message"]  # what the SDK's client raises


async def refusal(url: str, secret: str) -> MCPError:
    """What the SDK's client raises when it connects with ``secret`` and lists the tools."""
    with pytest.raises(BaseException) as raised:  # noqa: PT011  # unwrapped below
        async with connect(url, secret) as client:
            await client.list_tools()
    exc = raised.value
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]  # raised at connect: inside the client's task groups
    assert isinstance(exc, MCPError), repr(exc)
    return exc


async def test_key_revoked_while_the_server_runs_is_401_at_once_and_the_client_says_why(
    served,
) -> None:
    key, secret = served.key("alice", READ)
    async with connect(served.url, secret) as client:
        assert not (await client.call_tool("shop_list_products", {})).is_error

        assert served.keys.revoke(key.id)

        refused = post(served.url, call("shop_list_products", {}), f"Bearer {secret}")
        assert refused.status_code == 401
        assert f"the key {key.id} was revoked at " in refused.headers["www-authenticate"]
        with pytest.raises(MCPError, match=rf"the key {key.id} was revoked at .*turnkit keys"):
            await client.call_tool("shop_list_products", {})


async def test_expired_key_is_401_and_the_client_says_when_it_expired(served) -> None:
    key, secret = served.key("alice", READ, expires_in=5, now=time.time() - 10)

    refused = post(served.url, call("shop_list_products", {}), f"Bearer {secret}")
    told = await refusal(served.url, secret)

    assert refused.status_code == 401
    assert f"the key {key.id} expired at " in refused.headers["www-authenticate"]
    assert f"the key {key.id} expired at " in told.message
    assert "make a new key with turnkit keys create" in told.message


async def test_an_unknown_key_is_told_to_the_client_as_unknown(served) -> None:
    told = await refusal(served.url, "tk_" + "B" * 43)

    assert "not a known API key" in told.message


# --- tools/list --------------------------------------------------------------------------------


async def test_reader_and_writer_keys_list_different_tools_in_a_stable_order(served) -> None:
    _, reader = served.key("bob", READ)
    _, writer = served.key("alice", READ, WRITE, STOCK)

    async with connect(served.url, reader) as client:
        read_names = [tool.name for tool in (await client.list_tools()).tools]
    async with connect(served.url, writer) as client:
        listed = (await client.list_tools()).tools
        again = (await client.list_tools(cache_mode="refresh")).tools

    assert read_names == ["system_get_confirmation", "shop_list_products"]
    assert [tool.name for tool in listed] == [
        "system_get_confirmation",
        "shop_list_products",
        "shop_set_prices",
        "shop_delete_product",
        "stock_get_level",
        "stock_clear_level",
    ]
    assert [tool.name for tool in again] == [tool.name for tool in listed]
    hints = {tool.name: tool.annotations for tool in listed}
    assert all(
        None not in (h.read_only_hint, h.destructive_hint, h.idempotent_hint, h.open_world_hint)
        for h in hints.values()
        if h is not None
    )
    assert None not in hints.values()
    delete = hints["shop_delete_product"]
    assert (delete.read_only_hint, delete.destructive_hint, delete.open_world_hint) == (
        False,
        True,
        False,
    )
    assert hints["stock_clear_level"].open_world_hint is True
    assert hints["stock_get_level"].idempotent_hint is True


async def test_input_schema_leaves_out_control_fields_and_output_schema_is_declared(
    served,
) -> None:
    _, secret = served.key("alice", READ, WRITE, STOCK)

    async with connect(served.url, secret) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}

    for tool in tools.values():
        assert not {"dry_run", "confirm_token", "idempotency_key"} & set(
            tool.input_schema.get("properties", {})
        )
    assert tools["shop_list_products"].output_schema is None
    assert tools["stock_get_level"].output_schema == LEVEL
    held_or_level = tools["stock_clear_level"].output_schema  # held for keys: either shape
    assert held_or_level is not None
    assert held_or_level["anyOf"][0] == LEVEL


# --- tools/call --------------------------------------------------------------------------------


async def test_read_runs_and_answers_content(served, shop) -> None:
    _, secret = served.key("bob", READ)

    async with connect(served.url, secret) as client:
        result = await client.call_tool("shop_list_products", {"limit": 1})

    assert not result.is_error
    assert json.loads(text(result)) == [{"sku": "TEA-0001", "price": 4.5}]
    assert result.structured_content is None  # no output schema declared
    assert shop.reads == 1


async def test_read_with_an_output_schema_answers_structured_content(served) -> None:
    _, secret = served.key("alice", STOCK)

    async with connect(served.url, secret) as client:
        result = await client.call_tool("stock_get_level", {"sku": "TEA-0001"})

    assert not result.is_error
    assert result.structured_content == {"sku": "TEA-0001", "level": 3}
    assert json.loads(text(result)) == {"sku": "TEA-0001", "level": 3}


async def test_held_write_is_decided_out_of_band_and_its_outcome_reaches_the_caller(
    served, shop
) -> None:
    key, secret = served.key("alice", READ, WRITE)
    async with connect(served.url, secret) as client:
        held = await client.call_tool("shop_delete_product", {"sku": "TEA-0001"})
        [pending] = served.executor.pending(key.caller)

        assert not held.is_error
        assert set(UUID.findall(text(held))) == {pending.id}
        assert f"/v1/confirmations/{pending.id}/approve" in text(held)
        assert f"turnkit confirmations approve {pending.id}" in text(held)
        assert pending.expires_at_iso in text(held)
        assert shop.writes() == []

        waiting = await client.call_tool("system_get_confirmation", {"confirmation_id": pending.id})
        assert waiting.structured_content["status"] == "pending"
        assert waiting.structured_content["tool"] == "shop_delete_product"

        decided = await served.executor.aconfirm(
            pending.id, key.caller, "approve", allow=key.allowed
        )
        assert decided["status"] == "ok"

        done = await client.call_tool("system_get_confirmation", {"confirmation_id": pending.id})
        assert not done.is_error
        assert done.structured_content["status"] == "done"
        assert done.structured_content["outcome"]["result"] == {"deleted": "TEA-0001"}
        again = await served.executor.aconfirm(pending.id, key.caller, "approve", allow=key.allowed)

    assert again["result"] == {"deleted": "TEA-0001"}
    assert [entry["tool"] for entry in shop.writes()] == ["delete_product"]  # exactly once


async def test_held_write_with_an_output_schema_answers_the_held_shape(served, stock) -> None:
    key, secret = served.key("alice", STOCK)

    async with connect(served.url, secret) as client:
        held = await client.call_tool("stock_clear_level", {"sku": "TEA-0001"})  # client validates
        [pending] = served.executor.pending(key.caller)

    assert not held.is_error
    assert held.structured_content["status"] == "confirmation_required"
    assert held.structured_content["confirmation_id"] == pending.id
    assert held.structured_content["decide"]["approve"].endswith(f"/{pending.id}/approve")
    assert stock.cleared == []


async def test_rejected_write_reaches_the_caller_as_rejected(served, shop) -> None:
    key, secret = served.key("alice", READ, WRITE)
    async with connect(served.url, secret) as client:
        await client.call_tool("shop_delete_product", {"sku": "TEA-0001"})
        [pending] = served.executor.pending(key.caller)
        await served.executor.aconfirm(
            pending.id, key.caller, {"action": "reject", "message": "no"}
        )

        seen = await client.call_tool("system_get_confirmation", {"confirmation_id": pending.id})

    assert seen.structured_content["status"] == "rejected"
    assert seen.structured_content["outcome"]["message"] == "no"
    assert shop.writes() == []


async def test_confirmation_is_read_only_by_its_key_or_a_confirm_any_owners_deciding_key(
    served,
) -> None:
    key, secret = served.key("alice", READ, WRITE)
    _, other = served.key("bob", READ)
    _, root = served.key("root", READ, DECIDE_SCOPE)
    _, root_reader = served.key("root", READ)  # the owner may; a key without the scope may not
    async with connect(served.url, secret) as client:
        await client.call_tool("shop_delete_product", {"sku": "TEA-0001"})
    [pending] = served.executor.pending(key.caller)

    async with connect(served.url, other) as client:
        hidden = await client.call_tool("system_get_confirmation", {"confirmation_id": pending.id})
        unknown = await client.call_tool("system_get_confirmation", {"confirmation_id": "nope"})
    async with connect(served.url, root_reader) as client:
        refused = await client.call_tool("system_get_confirmation", {"confirmation_id": pending.id})
    async with connect(served.url, root) as client:
        shown = await client.call_tool("system_get_confirmation", {"confirmation_id": pending.id})
    assert refused.is_error
    assert text(refused) == text(hidden)

    assert hidden.is_error
    assert pending.id in text(hidden)
    assert text(hidden) == text(unknown).replace("'nope'", repr(pending.id))  # no hint it exists
    assert not shown.is_error
    assert shown.structured_content["status"] == "pending"


@pytest.mark.parametrize(
    ("user", "scopes", "tool", "arguments", "code"),
    [
        ("bob", [READ], "shop.list_products", {"limit": 0}, "invalid_input"),
        ("bob", [READ], "shop.list_products", {"dry_run": True}, "invalid_input"),
        ("bob", [READ], "shop_no_such_tool", {}, "not_found"),
        ("bob", [READ], "shop.delete_product", {"sku": "X"}, "forbidden"),  # no scope
        ("bob", [READ, WRITE], "shop.delete_product", {"sku": "X"}, "forbidden"),  # no permission
        ("alice", [READ], "system.get_confirmation", {"id": "x"}, "invalid_input"),
    ],
)
async def test_executor_error_is_a_tool_result_with_its_message(
    served, shop, user, scopes, tool, arguments, code
) -> None:
    key, secret = served.key(user, *scopes)
    expected = None
    if not tool.startswith("system."):  # what the executor itself answers
        direct = await served.executor.aexecute(key.caller, tool, arguments, allow=key.allowed)
        expected = direct["error"]["message"]

    async with connect(served.url, secret) as client:
        result = await client.call_tool(model_name(tool), arguments)

    assert result.is_error
    assert result.structured_content["error"]["code"] == code
    assert expected is None or text(result) == expected
    assert shop.writes() == []


# --- hostile input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        call("shop_list_products", [1, 2]),  # arguments not an object
        call("shop_list_products", "limit=1"),
        call(["shop_list_products"], {}),  # name not a string
        call("x" * 100_000, {}),  # a huge name
        call("x" * 5_000, {}),
        call("shop_list_products", {"limit": 1, "padding": "x" * 900_000}),  # huge arguments
        call("shop\x00list", {}),
        call("shop_list_products", {"limit": nested(500)}),  # deep arguments
        call("shop_list_products", {"limit": 10**400}),
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": ',  # truncated JSON
        b"[" * 100_000,  # deep nesting
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call"},  # no params
    ],
)
def test_hostile_request_gets_an_mcp_error_or_error_result_never_a_crash(served, body) -> None:
    _, secret = served.key("bob", READ)

    response = post(served.url, body, f"Bearer {secret}")

    assert response.status_code < 500, response.text
    answer = response.json()
    assert "error" in answer or answer["result"]["isError"] is True
    assert answer.get("error", {}).get("code") != -32603  # never an opaque internal error
    still = post(served.url, call("shop_list_products", {}), f"Bearer {secret}")
    assert still.status_code == 200
    assert still.json()["result"]["isError"] is False


def test_body_over_the_limit_is_413(served) -> None:
    _, secret = served.key("bob", READ)
    huge = call("shop_list_products", {"limit": 1, "padding": "x" * 2_000_000})

    assert post(served.url, huge, f"Bearer {secret}").status_code == 413


# --- Host and Origin (DNS rebinding) ----------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "status", "said"),
    [
        ({"Host": "evil.example"}, 421, "does not answer for the host 'evil.example'"),
        ({"Host": "evil.example:80"}, 421, "--allowed-host"),
        ({"Origin": "https://evil.example"}, 403, "web origin 'https://evil.example'"),
        ({"Origin": "null"}, 403, "--allowed-origin"),
    ],
)
def test_a_foreign_host_or_origin_is_refused_before_the_key_is_looked_up(
    served, headers, status, said
) -> None:
    _, secret = served.key("bob", READ)

    for authorization in (f"Bearer {secret}", None):  # refused before any key is looked up
        refused = post(served.url, call("shop_list_products", {}), authorization, **headers)
        assert refused.status_code == status
        assert said in refused.json()["error"]["message"]


@pytest.mark.parametrize(
    "headers",
    [
        {},  # no Origin: a client that is not a browser
        {"Origin": "http://localhost:6274"},  # a local page: an inspector
        {"Origin": "http://127.0.0.1"},
        {"Host": "localhost"},
        {"Host": "[::1]:9"},
    ],
)
def test_loopback_hosts_and_origins_and_requests_without_origin_are_answered(
    served, headers
) -> None:
    _, secret = served.key("bob", READ)

    answer = post(served.url, call("shop_list_products", {}), f"Bearer {secret}", **headers)

    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["isError"] is False


def test_create_app_allows_the_hosts_and_origins_it_is_given(mcp_executor) -> None:
    _, secret = mcp_executor.ledger.keys.create("bob", [READ])
    app = create_app(mcp_executor, mcp_allowed_hosts=["tools.example.com", "api.example.com:8443"],
                     mcp_allowed_origins=["https://app.example.com"])  # fmt: skip
    sent = {
        ("tools.example.com", None): 200,
        ("tools.example.com:8080", "https://app.example.com"): 200,
        ("api.example.com:8443", None): 200,
        ("api.example.com:9000", None): 421,  # a name with a port: that port only
        ("evil.example", None): 421,
        ("tools.example.com", "https://app.example.com.evil.example"): 403,
        ("tools.example.com", "https://app.example.com:8443"): 403,  # an origin is exact
    }
    with uvicorn_serving(app) as base:
        for (host, origin), status in sent.items():
            headers = {"Host": host} | ({"Origin": origin} if origin else {})
            answer = post(f"{base}/mcp", call("shop_list_products", {}), f"Bearer {secret}",
                          **headers)  # fmt: skip
            assert answer.status_code == status, (host, origin, answer.text)


# --- failures outside a tool ------------------------------------------------------------------

LEAKED = "postgresql://u:secret@db.internal/app"
"""What a failing permission provider or database puts in its exception's text."""


def failing_provider(caller: Any) -> set[str]:
    raise RuntimeError(f"cannot reach {LEAKED}")


@pytest.fixture
def failing(ledger, shop) -> Iterator[str]:
    """``create_app`` over an executor whose permission provider raises; the key's secret."""
    executor = Executor(Registry([shop]), ledger=ledger, permissions=failing_provider)
    _, secret = ledger.keys.create("alice", [READ])
    try:
        with uvicorn_serving(create_app(executor)) as base:
            yield f"{base}/mcp", secret
    finally:
        executor.close()


def logged_ids(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The error ids logged at ERROR by ``turnkit.server.mcp``, each with the exception."""
    return [
        record.getMessage().rsplit(" ", 1)[-1].rstrip(")")
        for record in caplog.records
        if record.name == "turnkit.server.mcp" and record.levelno == logging.ERROR
        and record.exc_info is not None and LEAKED in str(record.exc_info[1])
    ]  # fmt: skip


def raw_request(method: str, version: str) -> tuple[dict[str, Any], dict[str, str]]:
    """A ``method`` request as a client of protocol ``version`` sends it: body and headers."""
    params: dict[str, Any] = {"name": "shop_list_products", "arguments": {}}
    params = params if method == "tools/call" else {}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": version}
    if version in MODERN_PROTOCOL_VERSIONS:  # the per-request envelope and routing headers
        meta = call("x", {})["params"]["_meta"]
        params["_meta"] = meta | {"io.modelcontextprotocol/protocolVersion": version}
        headers["Mcp-Method"] = method
        if "name" in params:
            headers["Mcp-Name"] = params["name"]
    return {"jsonrpc": "2.0", "id": 3, "method": method, "params": params}, headers


@pytest.mark.parametrize("version", KNOWN_PROTOCOL_VERSIONS)
@pytest.mark.parametrize("method", ["tools/list", "tools/call"])
def test_a_failure_outside_a_tool_reaches_no_client_as_its_text_on_any_protocol(
    failing, caplog, version, method, expect_errors
) -> None:
    expect_errors("MCP request failed")  # the failure is logged with its id, by design
    url, secret = failing
    body, headers = raw_request(method, version)
    caplog.set_level(logging.ERROR, logger="turnkit.server.mcp")
    with httpx2.Client(headers={"Authorization": f"Bearer {secret}"}, timeout=30) as http:
        answers = [http.post(url, json=body, headers=headers) for _ in range(2)]  # keep-alive

    for answer in answers:
        assert "secret" not in answer.text
        assert "db.internal" not in answer.text
        error = answer.json()["error"]
        assert error["code"] == -32603
        assert f"logged with id {error['data']['error_id']}" in error["message"]
    assert logged_ids(caplog) == [answer.json()["error"]["data"]["error_id"] for answer in answers]


async def test_the_sdk_client_is_given_the_error_id_of_a_failure_never_its_text(
    failing, caplog, expect_errors
) -> None:
    expect_errors("MCP request failed")  # the failure is logged with its id, by design
    url, secret = failing
    caplog.set_level(logging.ERROR, logger="turnkit.server.mcp")

    async with connect(url, secret) as client:
        with pytest.raises(MCPError) as listed:
            await client.list_tools()
        with pytest.raises(MCPError) as called:
            await client.call_tool("shop_list_products", {})

    for raised in (listed.value, called.value):
        assert "secret" not in str(raised.message) + str(raised.data)
        assert raised.message.startswith("the server failed to answer this request")
    assert logged_ids(caplog) == [listed.value.data["error_id"], called.value.data["error_id"]]


def test_a_database_failing_while_a_key_is_looked_up_is_a_500_with_an_error_id(
    served, caplog, monkeypatch, expect_errors
) -> None:
    expect_errors("MCP request failed")  # the failure is logged with its id, by design
    _, secret = served.key("alice", READ)

    def lookup(self: ApiKeys, secret: str) -> None:
        raise RuntimeError(f"connection to {LEAKED} refused")

    monkeypatch.setattr(ApiKeys, "by_secret", lookup)
    monkeypatch.setattr(ApiKeys, "with_settings", lookup)  # with the settings, in one statement
    caplog.set_level(logging.ERROR, logger="turnkit.server.mcp")
    answer = post(served.url, call("shop_list_products", {}), f"Bearer {secret}")

    assert answer.status_code == 500
    assert "secret" not in answer.text
    error = answer.json()["error"]
    assert logged_ids(caplog) == [error["data"]["error_id"]]
    assert error["data"]["error_id"] in error["message"]


# --- other clients -----------------------------------------------------------------------------


async def test_handshake_era_client_is_served_with_its_key(served) -> None:
    _, secret = served.key("bob", READ)

    async with connect(served.url, secret, mode="legacy") as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        result = await client.call_tool("shop_list_products", {"limit": 1})

    assert names == ["system_get_confirmation", "shop_list_products"]
    assert not result.is_error


async def test_in_memory_client_sees_what_the_key_sees(mcp_executor, shop) -> None:
    keys = mcp_executor.ledger.keys
    _, secret = keys.create("bob", [READ])
    token = await KeyVerifier(keys).verify_token(secret)
    assert token is not None
    server = mcp_server(mcp_executor)

    async with Client(server) as anonymous:
        nothing = (await anonymous.list_tools()).tools
        refused = await anonymous.call_tool("shop_list_products", {})
    auth_context_var.set(AuthenticatedUser(token))  # what the bearer middleware does over HTTP
    async with Client(server) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        result = await client.call_tool("shop_list_products", {"limit": 1})
        hidden = await client.call_tool("shop_delete_product", {"sku": "TEA-0001"})

    assert nothing == []
    assert refused.is_error
    assert "API key" in text(refused)
    assert names == ["system_get_confirmation", "shop_list_products"]
    assert json.loads(text(result)) == [{"sku": "TEA-0001", "price": 4.5}]
    assert hidden.is_error
    assert shop.writes() == []


async def test_token_of_another_verifier_lists_and_runs_nothing(mcp_executor) -> None:
    foreign = AccessToken(token="t", client_id="someone", scopes=[READ])
    auth_context_var.set(AuthenticatedUser(foreign))
    async with Client(mcp_server(mcp_executor)) as client:
        assert (await client.list_tools()).tools == []
        assert (await client.call_tool("shop_list_products", {})).is_error


async def test_write_held_over_mcp_and_approved_over_rest_reaches_the_mcp_caller(
    mcp_executor, shop
) -> None:
    """The whole server (``create_app``): MCP holds, REST decides, MCP reads the outcome."""
    _, secret = mcp_executor.ledger.keys.create("alice", [READ, WRITE])
    _, person = mcp_executor.ledger.keys.create("root", [DECIDE_SCOPE])  # an approver
    with uvicorn_serving(create_app(mcp_executor)) as base:
        async with connect(f"{base}/mcp", secret) as client:
            held = await client.call_tool("shop_delete_product", {"sku": "TEA-0001"})
            [confirmation_id] = set(UUID.findall(text(held)))
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}) as http:
                itself = await http.post(f"{base}/v1/confirmations/{confirmation_id}/approve")
            assert itself.status_code == 403  # the agent's key does not approve its own write
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {person}"}) as http:
                approved = await http.post(f"{base}/v1/confirmations/{confirmation_id}/approve")
            outcome = await client.call_tool(
                "system_get_confirmation", {"confirmation_id": confirmation_id}
            )

    assert approved.status_code == 200, approved.text
    assert outcome.structured_content["status"] == "done"
    assert outcome.structured_content["outcome"]["result"] == {"deleted": "TEA-0001"}
    assert [entry["tool"] for entry in shop.writes()] == ["delete_product"]


@pytest.mark.parametrize("given", ["\x00", "a\x00b", "\ud800", "x" * 10_000, ""])
def test_a_confirmation_id_no_database_stores_is_simply_unknown(served, given) -> None:
    _, secret = served.key("alice", READ)
    answer = post(served.url, call("system_get_confirmation", {"confirmation_id": given}),
                  f"Bearer {secret}")  # fmt: skip  # raw: the SDK's client cannot send a surrogate
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]  # a tool result the model reads, not a protocol error
    assert result["isError"] is True
    assert "not_found" in json.dumps(result)


def test_an_elicitation_answer_relayed_by_a_client_is_never_an_approval(served, shop) -> None:
    _, secret = served.key("alice", READ, WRITE)
    request = call("shop_delete_product", {"sku": "TEA-0001"})
    request["params"] |= {
        "inputResponses": {"confirm": {"action": "accept", "content": {"approve": True}}},
        "requestState": "approved",
    }
    answers = [post(served.url, request, f"Bearer {secret}").json()["result"] for _ in range(2)]
    for answer in answers:  # held each time, as any call: an "accept" decides nothing
        assert answer.get("isError") is not True, answer
        assert "confirmation" in json.dumps(answer)
    assert served.executor.pending() != []
    assert all(c.status == "pending" for c in served.executor.pending())
    assert shop.writes() == []


def test_get_on_the_stateless_endpoint_is_refused_at_once(served) -> None:
    _, secret = served.key("alice", READ)
    headers = {"Authorization": f"Bearer {secret}", "Accept": "text/event-stream"}
    refused = httpx2.get(served.url, headers=headers, timeout=5)
    assert refused.status_code == 405
    assert refused.headers["Allow"] == "POST"


async def test_a_tool_is_listed_by_the_name_its_call_resolves_whatever_the_key_sees(ledger):
    """Two registry names one model name: the registry's first wins for every key, so a key that
    sees only the second is not offered a name that would call the first."""

    class Clash:
        key = "a"

        def api_tools(self) -> list[dict[str, Any]]:
            first = {"name": "a.b_c", "scope": "a.first:read", "permission": "a.use"}
            second = {"name": "a_b.c", "scope": "a.second:read", "permission": "a.use"}
            return [{**tool, "handler": lambda v, c: "ran"} for tool in (first, second)]

    executor = Executor(Registry([Clash()]), ledger=ledger,
                        permissions=lambda caller: {"a.use"})  # fmt: skip
    try:
        both, _ = ledger.keys.create("u", {"a.first:read", "a.second:read"})
        second_only, _ = ledger.keys.create("u", {"a.second:read"})
        tools = McpTools(executor)
        names = [[t.name for t in (await tools.list_tools(k)).tools] for k in (both, second_only)]
        assert names == [[GET_CONFIRMATION, "a_b_c"], [GET_CONFIRMATION]]
        called = await tools.call_tool(second_only, "a_b_c", {})
        assert called.is_error  # the name is the first tool's, which this key may not use
    finally:
        executor.close()


def test_a_call_retried_with_its_idempotency_key_in_meta_writes_once(served, shop) -> None:
    _, secret = served.key("alice", READ, WRITE)
    bearer = f"Bearer {secret}"

    def sent(meta: dict[str, Any]) -> dict[str, Any]:
        request = call("shop_set_prices", prices("TEA-0001", price=7.5))
        request["params"]["_meta"] |= meta
        return post(served.url, request, bearer).json()["result"]

    dry = sent({"io.turnkit/dry_run": True})
    assert dry.get("isError") is not True, dry
    assert '"dry_run":true' in dry["content"][0]["text"]
    assert shop.writes() == []
    first = sent({"io.turnkit/idempotency_key": "retry-1"})
    again = sent({"io.turnkit/idempotency_key": "retry-1"})  # a client's retry after a timeout
    assert first.get("isError") is not True, first
    assert again["content"] == first["content"]
    assert len(shop.writes()) == 1
    wrong = sent({"io.turnkit/idempotency_key": 5})
    assert wrong["isError"] is True
    assert "idempotency_key" in wrong["content"][0]["text"]
    assert len(shop.writes()) == 1


async def test_a_held_answer_names_the_rest_api_and_inbox_under_the_hosts_mount_prefix(
    mcp_executor, shop
) -> None:
    from fastapi import FastAPI

    _, secret = mcp_executor.ledger.keys.create("alice", [READ, WRITE])
    tools = create_app(mcp_executor)
    host = FastAPI(lifespan=tools.router.lifespan_context)
    host.mount("/tools", tools)
    with uvicorn_serving(host) as base:
        for path in ("/tools/mcp", "/tools/mcp/"):
            async with connect(f"{base}{path}", secret) as client:
                held = await client.call_tool("shop_delete_product", {"sku": "TEA-0001"})
            [confirmation_id] = set(UUID.findall(text(held)))
            said = text(held)
            assert f"POST /tools/v1/confirmations/{confirmation_id}/approve" in said
            assert "web inbox at /tools/ui/" in said
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}) as http:
                found = await http.get(f"{base}/tools/v1/confirmations/{confirmation_id}")
            assert found.status_code == 200
    assert shop.writes() == []


async def test_without_the_inbox_a_held_answer_does_not_send_people_to_it(mcp_executor) -> None:
    _, secret = mcp_executor.ledger.keys.create("alice", [READ, WRITE])
    with uvicorn_serving(create_app(mcp_executor, ui=False)) as base:
        async with connect(f"{base}/mcp", secret) as client:
            held = await client.call_tool("shop_delete_product", {"sku": "TEA-0001"})
    assert "/ui/" not in text(held)
    assert "POST /v1/confirmations/" in text(held)


def test_a_body_sent_in_chunks_over_the_apps_limit_is_413_not_a_server_failure(mcp_executor):
    _, secret = mcp_executor.ledger.keys.create("bob", [READ])

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it is read
        yield b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"pad": "'
        yield from [b"x" * 10_000] * 20
        yield b'"}}'

    headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json",
               "Accept": "application/json", "MCP-Protocol-Version": "2025-11-25"}  # fmt: skip
    with uvicorn_serving(create_app(mcp_executor, max_body_bytes=100_000)) as base:
        refused = httpx2.post(f"{base}/mcp", content=chunks(), headers=headers, timeout=30)
    assert refused.status_code == 413
    assert refused.json()["code"] == "payload_too_large"
