"""MCP's server spans over real Streamable HTTP (docs/observe-traces.md): one SERVER span
``tools/call {tool}`` per call with the GenAI conventions' MCP attributes, its parent the context
the client put in ``params._meta`` (the official client does it from its current span) else the
HTTP request's span, linked to that request's span when ``_meta`` gave the parent; the
executor's ``execute_tool`` span nests under it. On SQLite and PostgreSQL ledgers; the app is
instrumented as ``turnkit serve`` does it (``observe.instrument_fastapi``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan

from _serving import uvicorn_serving
from turnkit.observe import instrument_fastapi
from turnkit.server import create_app

READ = "shop.products:read"
CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
JSON_RPC = {
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}  # no envelope


@pytest.fixture
def served(executor, monkeypatch) -> Iterator[str]:
    """The executor's app with a server span per HTTP request, as ``turnkit serve`` runs it."""
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "http")
    app = create_app(executor)
    assert instrument_fastapi(app)
    with uvicorn_serving(app) as url:
        yield url


@pytest.fixture
def secret(executor, clock) -> str:
    _, made = executor.ledger.keys.create("alice", {READ}, now=clock.now)
    return made


def one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    found = [span for span in spans if span.name == name]
    assert len(found) == 1, sorted(span.name for span in spans)
    return found[0]


def children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    return [s for s in spans if s.parent and s.parent.span_id == parent.context.span_id]


def call(url: str, secret: str, arguments: dict[str, Any], meta: dict[str, str] | None) -> Any:
    params: dict[str, Any] = {"name": "shop_list_products", "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    headers = JSON_RPC | {"Authorization": f"Bearer {secret}"}
    answered = httpx.post(f"{url}/mcp", json=body, headers=headers, timeout=30)
    assert answered.status_code == 200, answered.text
    return answered.json()["result"]


async def test_the_official_clients_span_is_the_parent_of_the_calls_server_span(
    served, secret, traced
):
    agent = trace.get_tracer("test-agent")
    with agent.start_as_current_span("invoke_agent shop-helper") as turn:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}) as http,
            Client(streamable_http_client(f"{served}/mcp", http_client=http)) as client,
        ):
            result = await client.call_tool("shop_list_products", {"limit": 2})
    assert not result.is_error
    spans = traced.stop()
    server = one(spans, "tools/call shop_list_products")
    sent = one(spans, "MCP send tools/call shop_list_products")  # the SDK client's own span
    assert server.kind == trace.SpanKind.SERVER
    assert server.context.trace_id == turn.get_span_context().trace_id
    assert server.parent is not None
    assert server.parent.span_id == sent.context.span_id  # from params._meta, not HTTP
    assert server.attributes["mcp.method.name"] == "tools/call"
    assert server.attributes["gen_ai.tool.name"] == "shop_list_products"
    assert server.attributes["gen_ai.operation.name"] == "execute_tool"
    assert server.attributes["mcp.protocol.version"] == "2026-07-28"
    assert server.attributes["jsonrpc.request.id"]
    assert server.attributes["network.transport"] == "tcp"
    assert server.attributes["network.protocol.name"] == "http"
    assert server.attributes["client.address"] == "127.0.0.1"
    (run,) = children(spans, server)
    assert run.name == "execute_tool shop.list_products"
    (link,) = server.links  # to the HTTP request that carried it (another trace)
    (http,) = [s for s in spans if s.context.span_id == link.context.span_id]
    assert (http.name, http.kind) == ("POST /mcp", trace.SpanKind.SERVER)
    assert http.start_time <= server.start_time <= server.end_time <= http.end_time


def test_a_traceparent_in_meta_is_the_parent_and_the_http_request_is_linked(served, secret, traced):
    meta = {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01", "tracestate": "rojo=1"}
    result = call(served, secret, {"limit": 1}, meta)
    assert not result.get("isError")
    spans = traced.stop()
    server = one(spans, "tools/call shop_list_products")
    assert f"{server.context.trace_id:032x}" == CALLER_TRACE
    assert server.parent is not None
    assert f"{server.parent.span_id:016x}" == CALLER_SPAN
    assert server.context.trace_state.get("rojo") == "1"
    http = one(spans, "POST /mcp")
    assert [link.context.span_id for link in server.links] == [http.context.span_id]
    (run,) = children(spans, server)
    assert run.name == "execute_tool shop.list_products"


def test_without_meta_the_call_nests_under_its_http_request(served, secret, traced):
    call(served, secret, {"limit": 1}, None)
    spans = traced.stop()
    server = one(spans, "tools/call shop_list_products")
    http = one(spans, "POST /mcp")
    assert server.parent is not None
    assert server.parent.span_id == http.context.span_id
    assert server.links == ()  # the parent is the ambient span already


def test_a_tool_error_marks_the_server_span(served, secret, traced):
    result = call(served, secret, {"limit": "many"}, None)
    assert result["isError"]
    spans = traced.stop()
    server = one(spans, "tools/call shop_list_products")
    assert server.attributes["error.type"] == "tool_error"
    assert server.status.status_code == trace.StatusCode.ERROR
    (run,) = children(spans, server)
    assert run.attributes["error.type"] == "invalid_input"
