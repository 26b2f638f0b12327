"""``GET /v1/audit`` and ``GET /v1/audit/export`` over real HTTP (uvicorn on 127.0.0.1, httpx
with keep-alive), on SQLite and PostgreSQL: every row once and in order across pages, the
filters, the scope, bad requests answered with a problem, and an export of a million rows in a
fixed amount of memory.

Reaches ``turnkit.ledger.audit``: the scope that reads the audit has no public name."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from _serving import uvicorn_serving
from turnkit import Ledger, open_ledger
from turnkit.ledger.audit import AUDIT_SCOPE  # internal: the scope has no public name
from turnkit.server import create_app

PROBLEM = "application/problem+json"
START = 1_800_000_000.0
HERE = Path(__file__).parent


@pytest.fixture
def keys(executor, clock) -> dict[str, str]:
    """Secrets: an auditor (the audit scope only) and a key that calls tools but reads no audit."""
    store = executor.ledger.keys
    auditor = store.create("root", {AUDIT_SCOPE}, now=clock.now)
    caller = store.create("alice", {"shop.products:read"}, now=clock.now)
    return {"auditor": auditor[1], "caller": caller[1]}


@pytest.fixture
def http(executor) -> Iterator[httpx.Client]:
    app = create_app(executor, mcp_path=None)
    with uvicorn_serving(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield client


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def write(ledger: Ledger, count: int, *, start: float = START, **fields) -> None:
    """``count`` rows, seven to an instant (ties cross every page boundary)."""
    for i in range(count):
        row = {"caller": "key:k1", "tool": "shop.list_products", "status": "ok", "code": None,
               "duration_ms": 1.0} | fields  # fmt: skip
        ledger.audit(at=start + i // 7, **row)


def assert_problem(response: httpx.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert (body["status"], body["code"]) == (status, code)
    assert "Traceback" not in response.text
    return body


def test_ten_thousand_rows_are_paged_each_once_newest_first(http, keys, executor):
    write(executor.ledger, 10_000)
    auditor, seen, cursor, requests = bearer(keys["auditor"]), [], None, 0
    started = time.perf_counter()
    while True:
        params = {"limit": 1000} | ({"cursor": cursor} if cursor else {})
        page = http.get("/v1/audit", headers=auditor, params=params)
        assert page.status_code == 200, page.text
        requests += 1
        seen.extend(page.json()["rows"])
        cursor = page.json()["next_cursor"]
        if cursor is None:
            break
    took = time.perf_counter() - started
    print(f"10,000 rows in {requests} pages over keep-alive HTTP: {took:.2f} s")
    assert requests == 10
    assert len({row["id"] for row in seen}) == 10_000
    expected = [row.id for row in executor.ledger.audit_stream()]
    assert [row["id"] for row in seen] == expected
    assert [row["at"] for row in seen] == sorted((row["at"] for row in seen), reverse=True)


def test_the_filters_pick_rows_by_time_tool_caller_and_status(http, keys, executor):
    write(executor.ledger, 14)  # two instants: START and START + 1
    write(executor.ledger, 1, start=START + 5, tool="shop.delete_product", status="held",
          caller="session:alice", confirmation_id="c1")  # fmt: skip
    write(executor.ledger, 1, start=START + 6, tool="shopping.cart", trace_id="ab" * 16)
    auditor = bearer(keys["auditor"])

    def rows(**params) -> list[dict]:
        answer = http.get("/v1/audit", headers=auditor, params=params)
        assert answer.status_code == 200, answer.text
        return answer.json()["rows"]

    assert len(rows(since="2027-01-15T08:00:01Z")) == 9  # START is 2027-01-15T08:00:00Z
    assert len(rows(since=START + 1, until=START + 6)) == 8  # epoch seconds too; until excluded
    assert len(rows(until="2027-01-15T08:00:01")) == 7  # a moment without a zone is UTC
    assert [r["tool"] for r in rows(tool="shop.", limit=2)] == [
        "shop.delete_product", "shop.list_products",
    ]  # fmt: skip
    (held,) = rows(status="held")
    assert held | {"id": None} == {
        "id": None, "at": "2027-01-15T08:00:05.000Z", "caller": "session:alice",
        "tool": "shop.delete_product", "status": "held", "code": None, "duration_ms": 1.0,
        "confirmation_id": "c1", "detail": None, "trace_id": None,
    }  # fmt: skip
    assert rows(caller="session:alice") == [held]
    assert rows(tool="shopping.cart")[0]["trace_id"] == "ab" * 16
    oldest = rows(order="oldest", limit=1)[0]
    assert oldest["at"] == "2027-01-15T08:00:00.000Z"


def test_a_key_without_the_audit_scope_is_forbidden_and_told_which_scope(http, keys, executor):
    write(executor.ledger, 3)
    for path in ("/v1/audit", "/v1/audit/export"):
        refused = http.get(path, headers=bearer(keys["caller"]))
        body = assert_problem(refused, 403, "forbidden")
        assert AUDIT_SCOPE in body["detail"]
        assert_problem(http.get(path), 401, "unauthorized")


@pytest.mark.parametrize(
    "params",
    [
        {"cursor": "not-a-cursor"},
        {"limit": 0},
        {"limit": 1001},
        {"limit": "ten"},
        {"since": "yesterday"},
        {"until": "2027-13-40"},
        {"order": "sideways"},
    ],
)
def test_a_bad_cursor_limit_time_or_order_is_a_422_problem(http, keys, params):
    refused = http.get("/v1/audit", headers=bearer(keys["auditor"]), params=params)
    body = assert_problem(refused, 422, "invalid_request")
    assert body["detail"]


def test_a_bad_cursor_to_the_export_is_a_422_problem(http, keys):
    refused = http.get("/v1/audit/export", headers=bearer(keys["auditor"]), params={"cursor": "x"})
    assert_problem(refused, 422, "invalid_request")


def test_the_export_streams_every_matching_row_as_json_lines(http, keys, executor):
    write(executor.ledger, 2500)
    write(executor.ledger, 3, start=START + 1000, tool="shop.delete_product", status="held")
    auditor = bearer(keys["auditor"])
    with http.stream("GET", "/v1/audit/export", headers=auditor) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "application/x-ndjson"
        lines = [json.loads(line) for line in answer.iter_lines() if line]
    assert [row["id"] for row in lines] == [row.id for row in executor.ledger.audit_stream()]
    held = http.get("/v1/audit/export", headers=auditor, params={"status": "held"})
    assert [json.loads(line)["status"] for line in held.text.splitlines()] == ["held"] * 3
    oldest = http.get("/v1/audit/export", headers=auditor, params={"order": "oldest"})
    assert [json.loads(line)["id"] for line in oldest.text.splitlines()] == [
        row["id"] for row in reversed(lines)
    ]


def test_the_openapi_document_lists_both_routes(executor):
    paths = create_app(executor, mcp_path=None).openapi()["paths"]
    assert "application/x-ndjson" in paths["/v1/audit/export"]["get"]["responses"]["200"]["content"]
    assert {"since", "until", "tool", "caller", "status", "limit", "cursor"} <= {
        parameter["name"] for parameter in paths["/v1/audit"]["get"]["parameters"]
    }


MILLION = 1_000_000
EXPORT_BOUND_MIB = 64
"""The most the export's process may grow while it streams a million rows: collected in a list
they would take several hundred MiB (their JSON alone is about 250 MiB)."""


@pytest.mark.slow
def test_a_million_rows_export_in_a_fixed_amount_of_memory(tmp_path):
    path = tmp_path / "ledger.sqlite"
    ledger = open_ledger(path)
    _, secret = ledger.keys.create("root", {AUDIT_SCOPE}, now=START)
    ledger.close()
    with sqlite3.connect(path) as conn:  # straight into the file: a million inserts in seconds
        conn.executemany(
            "INSERT INTO turnkit_audit (id, at, caller_identity, tool, status, code, duration_ms,"
            " confirmation_id, detail, trace_id) VALUES (?, ?, 'key:k1', ?, 'ok', NULL, 1.5,"
            " NULL, NULL, ?)",
            (
                (f"{i:020d}-{i:012x}", START + i // 10, f"shop.tool_{i % 5}", f"{i:032x}")
                for i in range(MILLION)
            ),
        )
    done = subprocess.run(
        [sys.executable, str(HERE / "_audit_export.py"), str(path), secret],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    measured = json.loads(done.stdout)
    print(f"a million rows exported in {measured['seconds']:.1f} s;"
          f" the process grew {measured['grew_kib'] / 1024:.1f} MiB"
          f" (its peak: {measured['peak_kib'] / 1024:.0f} MiB)")  # fmt: skip
    assert measured["lines"] == MILLION
    assert measured["ordered"]
    assert measured["grew_kib"] < EXPORT_BOUND_MIB * 1024
