"""Headers every answer carries, and what the app does not serve unless asked: the API docs
(their pages load scripts from a CDN onto the inbox's origin)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient

from _serving import uvicorn_serving
from turnkit.executor.confirmations import DECIDE_SCOPE  # internal: the scope has no public name
from turnkit.server import create_app

LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
MCP = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


@pytest.fixture
def served(executor) -> Iterator[httpx.Client]:
    """The whole app (REST, MCP, inbox) served by uvicorn, 10 kB body limit; a client of it."""
    app = create_app(executor, max_body_bytes=10_000)
    with uvicorn_serving(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield client


def answers(client: httpx.Client, secret: str) -> dict[str, httpx.Response]:
    """One answer of every kind the app gives, by what it is."""
    bearer = {"Authorization": f"Bearer {secret}"}
    invoke = "/v1/tools/shop.list_products/invoke"
    return {
        "rest": client.get("/v1/tools", headers=bearer),
        "rest 401": client.get("/v1/tools"),
        "rest 404": client.get("/v1/nowhere"),
        "rest 405": client.delete("/v1/tools"),
        "rest 413": client.post(invoke, content=b"x" * 20_000, headers=bearer),
        "rest 422": client.post(invoke, json={"inputs": {}}, headers=bearer),
        "health": client.get("/healthz"),
        "openapi": client.get("/openapi.json"),
        "unknown path": client.get("/nowhere"),
        "mcp": client.post("/mcp", json=LIST, headers=MCP | bearer),
        "mcp 401": client.post("/mcp", json=LIST, headers=MCP),
        "mcp 421": client.post("/mcp", json=LIST, headers=MCP | bearer | {"Host": "evil.test"}),
        "mcp 405": client.get("/mcp", headers=bearer),
        "inbox redirect": client.get("/ui/"),
        "inbox page": client.get("/ui/sign-in"),
        "inbox 404": client.get("/ui/nowhere"),
        "static": client.get("/ui/static/inbox.css"),
        "static 404": client.get("/ui/static/nothing.js"),
    }


def header(seen: dict[str, httpx.Response], name: str) -> dict[str, str | None]:
    """Header ``name`` of each answer (None where it has none)."""
    return {kind: answer.headers.get(name) for kind, answer in seen.items()}


def test_every_answer_says_nosniff_and_none_over_http_sets_hsts(served, executor):
    _, secret = executor.ledger.keys.create("bob", {"shop.products:read", DECIDE_SCOPE})

    seen = answers(served, secret)

    assert header(seen, "x-content-type-options") == dict.fromkeys(seen, "nosniff")
    assert header(seen, "strict-transport-security") == dict.fromkeys(seen)
    statuses = {kind: answer.status_code for kind, answer in seen.items()}
    assert statuses["rest 413"] == 413
    assert statuses["mcp 421"] == 421
    assert statuses["mcp"] == 200


def test_a_server_error_says_nosniff_too_and_hsts_over_https(executor, monkeypatch):
    async def broken() -> None:
        raise RuntimeError("the database is gone")

    monkeypatch.setattr(executor.ledger, "asettings", broken)  # /healthz reads the settings
    with TestClient(create_app(executor, mcp_path=None), raise_server_exceptions=False,
                    base_url="https://testserver") as client:  # fmt: skip
        failed = client.get("/healthz")
    assert failed.status_code == 500
    assert failed.headers["x-content-type-options"] == "nosniff"
    assert failed.headers["strict-transport-security"] == "max-age=31536000"


def test_every_answer_over_https_sets_hsts(executor):
    _, secret = executor.ledger.keys.create("bob", {"shop.products:read", DECIDE_SCOPE})
    app = create_app(executor, max_body_bytes=10_000)
    with TestClient(app, base_url="https://testserver", follow_redirects=False) as client:
        seen = answers(client, secret)  # TestClient's Host: testserver, so MCP says 421
    assert header(seen, "strict-transport-security") == dict.fromkeys(seen, "max-age=31536000")
    assert header(seen, "x-content-type-options") == dict.fromkeys(seen, "nosniff")


def test_the_api_docs_are_not_served_unless_asked(executor):
    with TestClient(create_app(executor, mcp_path=None)) as client:
        assert client.get("/docs").status_code == 404
        assert client.get("/redoc").status_code == 404
        assert client.get("/openapi.json").status_code == 200  # data, no script
    with TestClient(create_app(executor, mcp_path=None, docs=True)) as client:
        page = client.get("/docs")
        assert page.status_code == 200
        assert "/openapi.json" in page.text
        assert client.get("/redoc").status_code == 200
