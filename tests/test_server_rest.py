"""The REST API over real HTTP: uvicorn on 127.0.0.1, httpx with keep-alive, on SQLite and
PostgreSQL. Keys, per-key tool lists, reads, held writes decided over REST, dry runs,
idempotency, and every kind of bad request answered with a problem document, never a 5xx.

Reaches ``turnkit.executor.answers``, ``turnkit.server.problems``, ``turnkit.ledger.records`` and
``turnkit.executor.confirmations``: the status map checked against every error code, the time
format of an expiry and the scope that decides holds have no public name."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import get_args

import httpx
import pytest
from fastapi import Request

from _serving import uvicorn_serving
from _shop import prices
from turnkit import Executor, Registry, Settings, StaticPermissions
from turnkit.executor.answers import ErrorCode
from turnkit.executor.confirmations import DECIDE_SCOPE
from turnkit.ledger.records import iso
from turnkit.server import create_app
from turnkit.server.problems import STATUS

PROBLEM = "application/problem+json"


@pytest.fixture
def keys(executor, clock):
    """Secrets: bob reads, alice reads and writes and decides her holds (a second key of hers
    may not), alice's key limited to one tool, root (who
    may decide for anyone) with the decide scope, without it, and limited to one tool."""
    store = executor.ledger.keys
    read, write = {"shop.products:read"}, {"shop.products:read", "shop.products:write"}
    made = {
        "reader": store.create("bob", read, now=clock.now),
        "writer": store.create("alice", write | {DECIDE_SCOPE}, now=clock.now),
        "holder": store.create("alice", write, now=clock.now),  # may not decide its own holds
        "listing": store.create("alice", write, allow={"shop.list_products"}, now=clock.now),
        "root": store.create("root", read | {DECIDE_SCOPE}, now=clock.now),
        "root_reader": store.create("root", read, now=clock.now),
        "root_listing": store.create(
            "root", read | {DECIDE_SCOPE}, allow={"shop.list_products"}, now=clock.now
        ),
        "brief": store.create("alice", write, expires_in=60, now=clock.now),
    }
    return {name: secret for name, (_, secret) in made.items()} | {
        "ids": {name: key.id for name, (key, _) in made.items()}
    }


@pytest.fixture
def http(executor) -> Iterator[httpx.Client]:
    """A keep-alive client of the app served on 127.0.0.1 (REST only, 10 kB body limit)."""
    app = create_app(executor, mcp_path=None, max_body_bytes=10_000)
    with uvicorn_serving(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield client


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def assert_problem(response: httpx.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["status"] == status
    assert body["code"] == code
    assert body["type"]
    assert body["title"]
    assert body["detail"]
    assert "Traceback" not in response.text
    return body


def hold_delete(http: httpx.Client, secret: str, sku: str = "TEA-0001") -> str:
    """Invoke the always-held delete; return the confirmation id."""
    held = http.post(
        "/v1/tools/shop.delete_product/invoke", headers=bearer(secret), json={"input": {"sku": sku}}
    )
    assert held.status_code == 202, held.text
    assert held.headers["location"] == f"/v1/confirmations/{held.json()['id']}"
    return held.json()["id"]


def test_every_executor_error_code_has_a_status():
    assert set(STATUS) == set(get_args(ErrorCode))
    assert all(400 <= status < 600 for status in STATUS.values())


def test_no_key_is_401_with_a_bearer_challenge(http):
    response = http.get("/v1/tools")
    assert_problem(response, 401, "unauthorized")
    assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize("header", ["Bearer tk_nope", "Bearer " + "tk_" + "A" * 43, "Basic eDp5"])
def test_a_bad_key_is_401(http, header):
    response = http.get("/v1/tools", headers={"Authorization": header})
    assert_problem(response, 401, "unauthorized")
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_an_unknown_key_is_401_whose_challenge_says_it_is_unknown(http):
    response = http.get("/v1/tools", headers=bearer("tk_" + "A" * 43))
    assert response.headers["www-authenticate"] == (
        'Bearer error="invalid_token", error_description="the bearer is not a known API key;'
        ' use a key made with turnkit keys create"'
    )


def test_a_key_revoked_while_the_server_runs_is_refused_at_once_saying_when(http, keys, executor):
    assert http.get("/v1/tools", headers=bearer(keys["writer"])).status_code == 200
    assert executor.ledger.keys.revoke(keys["ids"]["writer"])
    refused = http.get("/v1/tools", headers=bearer(keys["writer"]))
    body = assert_problem(refused, 401, "unauthorized")
    said = f"the key {keys['ids']['writer']} was revoked at "
    assert said in body["detail"]
    assert f'error_description="{said}' in refused.headers["www-authenticate"]


def test_an_expired_key_is_refused_saying_when(http, keys, clock):
    assert http.get("/v1/tools", headers=bearer(keys["brief"])).status_code == 200
    clock.now += 61
    refused = http.get("/v1/tools", headers=bearer(keys["brief"]))
    body = assert_problem(refused, 401, "unauthorized")
    said = f"the key {keys['ids']['brief']} expired at {iso(clock.now - 1)}"
    assert said in body["detail"]
    assert f'error_description="{said}' in refused.headers["www-authenticate"]


def test_reader_and_writer_keys_see_different_tools(http, keys):
    reader = http.get("/v1/tools", headers=bearer(keys["reader"])).json()
    writer = http.get("/v1/tools", headers=bearer(keys["writer"])).json()
    assert [tool["name"] for tool in reader] == ["shop.list_products"]
    assert {tool["name"] for tool in writer} == {
        "shop.list_products",
        "shop.set_prices",
        "shop.delete_product",
    }
    by_name = {tool["name"]: tool for tool in writer}
    delete = by_name["shop.delete_product"]
    assert delete["model_name"] == "shop_delete_product"
    assert delete["annotations"]["destructive"] is True
    assert delete["would_hold"] is True
    assert by_name["shop.list_products"]["would_hold"] is False
    assert by_name["shop.set_prices"]["would_hold"] is None  # a batch: depends on the input
    for tool in writer:
        properties = tool["input_schema"].get("properties", {})
        assert not {"dry_run", "confirm_token", "idempotency_key"} & set(properties)


def test_an_allow_list_limits_the_tools(http, keys, shop):
    listing = bearer(keys["listing"])
    assert [t["name"] for t in http.get("/v1/tools", headers=listing).json()] == [
        "shop.list_products"
    ]
    assert_problem(http.get("/v1/tools/shop.set_prices", headers=listing), 404, "not_found")
    refused = http.post(
        "/v1/tools/shop.set_prices/invoke", headers=listing, json={"input": prices()}
    )
    assert_problem(refused, 403, "forbidden")
    assert shop.writes() == []


def test_a_read_runs(http, keys):
    described = http.get("/v1/tools/shop.list_products", headers=bearer(keys["reader"]))
    assert described.status_code == 200
    assert described.json()["title"] == "shop.list_products"
    response = http.post(
        "/v1/tools/shop.list_products/invoke",
        headers=bearer(keys["reader"]),
        json={"input": {"limit": 1}},
    )
    assert response.status_code == 200
    assert response.json() == {
        "executed": True,
        "status": "ok",
        "result": [{"sku": "TEA-0001", "price": 4.5}],
    }


def test_a_held_write_is_listed_and_approved_over_rest_once(http, keys, shop):
    writer = bearer(keys["writer"])
    confirmation = hold_delete(http, keys["writer"])
    assert shop.writes() == []
    pending = http.get("/v1/confirmations", headers=writer).json()
    assert [c["id"] for c in pending] == [confirmation]
    assert (
        http.get(f"/v1/confirmations/{confirmation}", headers=writer).json()["status"] == "pending"
    )
    approved = http.post(f"/v1/confirmations/{confirmation}/approve", headers=writer)
    assert approved.status_code == 200, approved.text
    assert approved.json()["status"] == "done"
    assert approved.json()["outcome"]["result"] == {"deleted": "TEA-0001"}
    again = http.post(f"/v1/confirmations/{confirmation}/approve", headers=writer)
    body = assert_problem(again, 409, "already_decided")
    assert body["outcome"]["result"] == {"deleted": "TEA-0001"}
    assert len(shop.writes()) == 1
    assert http.get("/v1/confirmations", headers=writer).json() == []


def test_approvals_racing_over_rest_run_once_and_only_one_answers_200(http, keys, shop):
    from concurrent.futures import ThreadPoolExecutor

    confirmation = hold_delete(http, keys["writer"])
    url = f"{str(http.base_url).rstrip('/')}/v1/confirmations/{confirmation}/approve"

    def approve(_: int) -> int:
        with httpx.Client(timeout=10) as own:
            return own.post(url, headers=bearer(keys["writer"])).status_code

    with ThreadPoolExecutor(4) as pool:
        statuses = sorted(pool.map(approve, range(4)))
    assert statuses == [200, 409, 409, 409]
    assert len(shop.writes()) == 1


def test_only_the_holder_or_a_confirm_any_owners_deciding_key_sees_and_decides(http, keys, shop):
    confirmation = hold_delete(http, keys["writer"])
    other = bearer(keys["reader"])
    assert http.get("/v1/confirmations", headers=other).json() == []
    assert_problem(http.get(f"/v1/confirmations/{confirmation}", headers=other), 403, "forbidden")
    refused = http.post(f"/v1/confirmations/{confirmation}/approve", headers=other)
    assert_problem(refused, 403, "forbidden")
    root = bearer(keys["root"])
    assert [c["id"] for c in http.get("/v1/confirmations", headers=root).json()] == [confirmation]
    assert shop.writes() == []
    for limited, said in (("root_reader", DECIDE_SCOPE), ("root_listing", "allow list")):
        headers = bearer(keys[limited])  # the owner may decide for anyone; this key may not
        assert http.get("/v1/confirmations", headers=headers).json() == []
        seen = http.get(f"/v1/confirmations/{confirmation}", headers=headers)
        assert said in assert_problem(seen, 403, "forbidden")["detail"]
        refused = http.post(f"/v1/confirmations/{confirmation}/approve", headers=headers)
        assert said in assert_problem(refused, 403, "forbidden")["detail"]
    assert shop.writes() == []
    approved = http.post(f"/v1/confirmations/{confirmation}/approve", headers=root)
    assert approved.status_code == 200, approved.text
    assert len(shop.writes()) == 1


def test_a_rejected_write_never_runs(http, keys, shop):
    confirmation = hold_delete(http, keys["writer"])
    rejected = http.post(
        f"/v1/confirmations/{confirmation}/reject",
        headers=bearer(keys["writer"]),
        json={"message": "not that one"},
    )
    assert rejected.status_code == 200, rejected.text
    assert rejected.json()["status"] == "rejected"
    assert rejected.json()["outcome"]["message"] == "not that one"
    assert shop.writes() == []


def test_an_invalid_edit_is_422_and_applies_nothing(http, keys, shop):
    writer = bearer(keys["writer"])
    confirmation = hold_delete(http, keys["writer"])
    bad = http.post(
        f"/v1/confirmations/{confirmation}/edit", headers=writer, json={"arguments": {"sku": 7}}
    )
    assert_problem(bad, 422, "invalid_input")
    current = http.get(f"/v1/confirmations/{confirmation}", headers=writer).json()
    assert current["status"] == "pending"
    assert current["input"] == {"sku": "TEA-0001"}
    good = http.post(
        f"/v1/confirmations/{confirmation}/edit",
        headers=writer,
        json={"arguments": {"sku": "TEA-0002"}},
    )
    assert good.status_code == 200, good.text
    assert shop.writes() == [{"tool": "delete_product", "input": {"sku": "TEA-0002"}}]


def test_a_dry_run_holds_and_writes_nothing(http, keys, shop):
    writer = bearer(keys["writer"])
    response = http.post(
        "/v1/tools/shop.delete_product/invoke",
        headers=writer,
        json={"input": {"sku": "TEA-0001"}, "dry_run": True},
    )
    assert response.status_code == 200, response.text
    assert response.json()["dry_run"] is True
    assert response.json()["would_hold"] is True
    assert http.get("/v1/confirmations", headers=writer).json() == []
    assert shop.writes() == []


def test_an_idempotency_key_replays_without_a_second_run(http, keys, shop):
    headers = bearer(keys["writer"]) | {"Idempotency-Key": "order-7"}
    first = http.post("/v1/tools/shop.set_prices/invoke", headers=headers, json={"input": prices()})
    assert first.status_code == 200, first.text
    again = http.post("/v1/tools/shop.set_prices/invoke", headers=headers, json={"input": prices()})
    assert again.status_code == 200
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json()["result"] == first.json()["result"] == {"updated": 1}
    assert len(shop.writes()) == 1
    other = http.post(
        "/v1/tools/shop.set_prices/invoke", headers=headers, json={"input": prices(price=9.0)}
    )
    assert_problem(other, 422, "idempotency_conflict")
    assert len(shop.writes()) == 1


def test_a_rate_limited_call_is_429_with_retry_after(http, keys, executor):
    executor.ledger.set_setting("rate_limit_units", 1)
    reader = bearer(keys["reader"])
    assert http.post("/v1/tools/shop.list_products/invoke", headers=reader).status_code == 200
    limited = http.post("/v1/tools/shop.list_products/invoke", headers=reader)
    assert_problem(limited, 429, "rate_limited")
    assert int(limited.headers["retry-after"]) >= 1


def audited(executor, tool: str) -> list[str | None]:
    return [row["code"] for row in executor.ledger.audit_rows() if row["tool"] == tool]


def test_bad_bodies_are_problems_and_audited(http, keys, executor):
    writer = bearer(keys["writer"])
    url = "/v1/tools/shop.list_products/invoke"
    json_type = writer | {"Content-Type": "application/json"}
    assert_problem(http.post(url, headers=json_type, content=b'{"input": '), 400, "malformed_json")
    text = writer | {"Content-Type": "text/plain"}
    assert_problem(http.post(url, headers=text, content=b"{}"), 415, "unsupported_media_type")
    assert_problem(http.post(url, headers=writer, json=[1]), 422, "invalid_request")
    assert_problem(http.post(url, headers=writer, json={"inptu": {}}), 422, "invalid_request")
    wrong = http.post(url, headers=writer, json={"input": {"limit": "ten"}})
    assert_problem(wrong, 422, "invalid_input")
    assert audited(executor, "shop.list_products") == ["invalid_input"] * 5
    assert_problem(http.post(url, headers=writer, json={"input": {}, "dry_run": "yes"}), 422,
                   "invalid_input")  # fmt: skip


def test_a_body_over_the_limit_is_413(http, keys, shop):
    big = {"input": prices(*[f"TEA-{i:04d}" for i in range(1000)])}
    response = http.post(
        "/v1/tools/shop.set_prices/invoke", headers=bearer(keys["writer"]), json=big
    )
    assert_problem(response, 413, "payload_too_large")

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"input": {"prices": ['
        for _ in range(2000):
            yield b'{"sku": "TEA-0001", "price": 5},'
        yield b"]}}"

    streamed = http.post(
        "/v1/tools/shop.set_prices/invoke",
        headers=bearer(keys["writer"]) | {"Content-Type": "application/json"},
        content=chunks(),
    )
    assert_problem(streamed, 413, "payload_too_large")
    assert shop.writes() == []


def test_unknown_tools_routes_and_methods_are_problems(http, keys, executor):
    writer = bearer(keys["writer"])
    unknown = http.post("/v1/tools/shop.nope/invoke", headers=writer, json={})
    assert_problem(unknown, 404, "not_found")
    assert audited(executor, "shop.nope") == ["not_found"]
    assert_problem(http.get("/v1/nowhere", headers=writer), 404, "not_found")
    assert_problem(http.delete("/v1/tools", headers=writer), 405, "method_not_allowed")
    missing = http.get("/v1/confirmations/not-an-id", headers=writer)
    assert_problem(missing, 404, "not_found")
    nul = http.post("/v1/confirmations/%00/approve", headers=writer)
    assert_problem(nul, 404, "not_found")
    edit = http.post(
        "/v1/confirmations/00000000-0000-0000-0000-000000000000/edit",
        headers=writer | {"Content-Type": "application/json"},
        content=b"{",
    )
    assert_problem(edit, 400, "malformed_json")


def test_openapi_and_health_answer(http):
    document = http.get("/openapi.json")
    assert document.status_code == 200
    assert "/v1/tools/{name}/invoke" in document.json()["paths"]
    assert http.get("/healthz").json() == {"status": "ok"}


def test_the_document_says_every_error_is_a_problem(http):
    document = http.get("/openapi.json").json()
    assert "HTTPValidationError" not in document["components"]["schemas"]
    problem = document["components"]["schemas"]["Problem"]
    assert set(problem["required"]) == {"title", "status", "detail", "code"}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if not path.startswith("/v1"):
                continue
            for status in ("401", "404", "422", "500"):
                content = operation["responses"][status]["content"]
                assert list(content) == [PROBLEM], (method, path, status)
    invoke = document["paths"]["/v1/tools/{name}/invoke"]["post"]
    assert "202" in invoke["responses"]


def test_the_default_app_serves_mcp_beside_rest(executor, keys):
    listing = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        },
    }
    headers = bearer(keys["reader"]) | {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/list",
    }
    app = create_app(executor)
    with uvicorn_serving(app) as url, httpx.Client(base_url=url, timeout=10) as http:
        assert http.get("/v1/tools", headers=bearer(keys["reader"])).status_code == 200
        for path in ("/mcp", "/mcp/"):
            answer = http.post(path, json=listing, headers=headers)
            assert answer.status_code == 200, answer.text
            names = [tool["name"] for tool in answer.json()["result"]["tools"]]
            assert "shop_list_products" in names
            assert "shop_set_prices" not in names
        assert http.post("/mcp", json=listing).status_code == 401


class Faulty:
    """Module ``faulty``: a read whose handler raises with a secret in its message, and one
    that outlives the handler timeout."""

    key = "faulty"

    def api_tools(self) -> list[dict[str, object]]:
        def broken(value: dict, ctx: object) -> None:
            raise RuntimeError("password=hunter2 at db.internal:5432")

        def slow(value: dict, ctx: object) -> str:
            time.sleep(2)
            return "late"

        rights = {"scope": "faulty.things:read", "permission": "faulty.use"}
        return [
            {"name": "faulty.read_broken", "handler": broken, **rights},
            {"name": "faulty.read_slowly", "handler": slow, **rights},
        ]


def test_a_handler_that_fails_or_hangs_is_500_or_504_and_leaks_nothing(expect_errors):
    expect_errors(  # the details go to the log, never to the client
        r"tool 'faulty.read_broken' raised .*password=hunter2",
        r"'faulty.read_slowly': handler ran longer than 0.3 s",
    )
    executor = Executor(
        Registry([Faulty()]),
        permissions=StaticPermissions({"u": {"faulty.use"}}),
        settings=Settings(handler_timeout=0.3),
    )
    _, secret = executor.ledger.keys.create("u", {"faulty.things:read"})
    app = create_app(executor, mcp_path=None)
    try:
        served = uvicorn_serving(app)
        with served as url, httpx.Client(base_url=url, headers=bearer(secret)) as client:
            broken = client.post("/v1/tools/faulty.read_broken/invoke", json={"input": {}})
            slow = client.post("/v1/tools/faulty.read_slowly/invoke", json={"input": {}})
    finally:
        executor.close()
    failed = assert_problem(broken, 500, "internal_error")
    assert "hunter2" not in broken.text
    assert "Traceback" not in broken.text
    assert "the error was logged" in failed["detail"]
    assert_problem(slow, 504, "timeout")


def test_the_body_limit_is_for_this_apps_routes_only(executor):
    """langgraph-api serves its own routes through this app when it mounts it: a run's input
    bigger than turnkit's limit is not turnkit's to refuse."""
    app = create_app(executor, mcp_path=None, max_body_bytes=1_000)

    async def other(request: Request) -> dict[str, int]:
        return {"read": len(await request.body())}

    app.add_api_route("/threads/runs", other, methods=["POST"])
    big = b"x" * 5_000
    with uvicorn_serving(app) as url, httpx.Client(base_url=url) as client:
        assert client.post("/threads/runs", content=big).json() == {"read": 5_000}
        refused = client.post("/v1/tools/shop.list_products/invoke", content=big)
    assert_problem(refused, 413, "payload_too_large")


def test_a_key_reads_its_own_hold_but_decides_it_only_with_the_decide_scope(http, keys, shop):
    confirmation = hold_delete(http, keys["holder"])
    holder = bearer(keys["holder"])
    assert http.get(f"/v1/confirmations/{confirmation}", headers=holder).status_code == 200
    (listed,) = http.get("/v1/confirmations", headers=holder).json()  # its own hold, to read
    assert (listed["id"], listed["decidable"]) == (confirmation, False)
    for action in ("approve", "reject"):
        refused = http.post(f"/v1/confirmations/{confirmation}/{action}", headers=holder)
        assert "waits for a person" in assert_problem(refused, 403, "forbidden")["detail"]
    assert shop.writes() == []
    assert http.get(f"/v1/confirmations/{confirmation}", headers=holder).json()["status"] == (
        "pending"
    )
