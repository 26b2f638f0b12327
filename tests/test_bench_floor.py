"""The floor of ``bench/server.py`` (``bench/_floor.py``) keeps the promises it stands for, on
SQLite and PostgreSQL: a benchmark against a peer that skipped them would flatter nobody.

Every call looks its key up (unknown, revoked and expired keys are refused at the next request),
is charged within the limit (refused when the window is full) and leaves an audit row."""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: bench/
from bench import _floor

BODY = {"input": {"sku": "TEA-0001"}}
PATH = "/v1/tools/bench.get_item/invoke"


@pytest.fixture
def floor(ledger_url, monkeypatch):
    monkeypatch.setenv(_floor.FLOOR_DB, ledger_url)
    secret = _floor.make_key(ledger_url)
    store = _floor.store(ledger_url)
    with TestClient(_floor.floor_app()) as client:
        client.headers["Authorization"] = f"Bearer {secret}"
        yield client, store, secret
    if isinstance(store, _floor.Postgres):
        store.pool.close()


def _count(store, table: str) -> int:
    row = store.one(f"SELECT count(*) FROM {table}", ())
    return int(row[0])


def test_a_call_is_charged_and_audited(floor):
    client, store, _ = floor
    for _ in range(3):
        answer = client.post(PATH, json=BODY)
        assert answer.status_code == 200, answer.text
        assert answer.json()["result"]["sku"] == "TEA-0001"
    assert store.one("SELECT sum(units) FROM floor_usage", ())[0] == 3
    assert _count(store, "floor_audit") == 3


@pytest.mark.parametrize("change", ["revoked", "expired", "unknown"])
def test_a_key_that_may_not_be_used_is_refused_at_the_next_request(floor, change):
    client, store, secret = floor
    assert client.post(PATH, json=BODY).status_code == 200
    digest = hashlib.sha256(secret.encode()).hexdigest()
    if change == "unknown":
        client.headers["Authorization"] = "Bearer fk_nobody"
    else:
        column = "revoked_at" if change == "revoked" else "expires_at"
        store.run(f"UPDATE floor_keys SET {column} = %s WHERE secret_hash = %s",
                  (time.time() - 1, digest))  # fmt: skip
    assert client.post(PATH, json=BODY).status_code == 401
    assert _count(store, "floor_audit") == 1


def test_a_full_window_refuses_the_call(floor, monkeypatch):
    client, store, _ = floor
    monkeypatch.setattr(_floor, "LIMIT", 2)
    monkeypatch.setattr(_floor, "WINDOW", 10**9)  # all three in one window, at any second
    assert [client.post(PATH, json=BODY).status_code for _ in range(3)] == [200, 200, 429]
    assert _count(store, "floor_audit") == 2


MCP_CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "bench_get_item", "arguments": {"sku": "TEA-0001"}}}  # fmt: skip
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": "2025-06-18"}  # fmt: skip


@pytest.mark.parametrize("one_hop", [False, True], ids=["key-in-front", "one-hop"])
def test_the_mcp_floors_check_the_key_charge_and_audit(ledger_url, monkeypatch, one_hop):
    """The MCP floor refuses an unknown key with a 401 before the SDK; the one-hop floor, in its
    tool, with an error result: neither charges nor audits it."""
    monkeypatch.setenv(_floor.FLOOR_DB, ledger_url)
    secret = _floor.make_key(ledger_url)
    store = _floor.store(ledger_url)
    app = _floor.mcp_floor_one_hop_app() if one_hop else _floor.mcp_floor_app()
    try:
        with TestClient(app, base_url="http://127.0.0.1:8000") as client:
            keyed = MCP_HEADERS | {"Authorization": f"Bearer {secret}"}
            answer = client.post("/mcp", json=MCP_CALL, headers=keyed)
            assert answer.status_code == 200, answer.text
            assert answer.json()["result"]["isError"] is False
            assert "Green tea" in answer.text
            unknown = MCP_HEADERS | {"Authorization": "Bearer fk_nobody"}
            refused = client.post("/mcp", json=MCP_CALL, headers=unknown)
            if one_hop:
                assert refused.json()["result"]["isError"] is True
                assert "revoked" in refused.text
            else:
                assert refused.status_code == 401
        assert store.one("SELECT sum(units) FROM floor_usage", ())[0] == 1
        assert _count(store, "floor_audit") == 1
    finally:
        if isinstance(store, _floor.Postgres):
            store.pool.close()


def test_the_workers_saturated_ratio_is_one_workers_cpu_a_request_over_the_machines_at_three():
    """``bench/server.py``'s row beside ``--workers 3 ÷ 1``: with 2 cores, a worker that spends
    1.58 ms of its process's CPU a request (0.97 cores at 615 req/s) and a machine that spends
    1.62 ms a request at three workers (1.97 cores at 1,219 req/s) make 1.95x when saturated."""
    from bench import server
    from bench._cpu import Split

    def busy(machine: float, server_cores: float) -> Split:
        return Split(machine=machine, cores=2, server=server_cores, postgres=0.45, load=0.09)

    rates = {("turnkit", 1): 615.0, ("turnkit", 3): 1219.0}
    splits = {("turnkit", 1): busy(1.32, 0.97), ("turnkit", 3): busy(1.97, 1.39)}
    row = server.ceiling("postgres", "turnkit", rates, splits)
    assert row["value"] == pytest.approx(1.95, abs=0.01)
    assert row["unit"] == "x"


def test_turnkits_steps_straight_keep_a_plain_reads_promises(tmp_path, monkeypatch):
    """``bench/profile_worker.py``'s straight way (and its MCP server) charges and audits every
    call as turnkit does, refuses an unknown key, and answers what turnkit's pipeline answers."""
    from bench import profile_worker, server

    from turnkit import open_ledger

    db = str(tmp_path / "straight.sqlite")
    secret = server.prepared(db)
    monkeypatch.setenv(profile_worker.STRAIGHT_DB, db)
    with TestClient(profile_worker.mcp_straight_app(), base_url="http://127.0.0.1:8000") as c:
        keyed = MCP_HEADERS | {"Authorization": f"Bearer {secret}"}
        answer = c.post("/mcp", json=MCP_CALL, headers=keyed).json()["result"]
        assert answer["isError"] is False
        assert "Green tea" in str(answer)
        unknown = MCP_HEADERS | {"Authorization": "Bearer tk_nobody"}
        assert c.post("/mcp", json=MCP_CALL, headers=unknown).json()["result"]["isError"]
    floor_db = str(tmp_path / "floor.sqlite")
    ways = profile_worker.ways(profile_worker_app(db), secret, floor_db)
    assert ways["straight"]().result == ways["turnkit"]().result == ways["floor"]()
    floor = _floor.store(floor_db)
    try:  # the floor's way keeps its promises too: charged and audited
        assert floor.rows("SELECT caller, units FROM floor_usage")[0][1] == 1
        assert floor.rows("SELECT status FROM floor_audit") == [("ok",)]
    finally:
        floor.close()
    ledger = open_ledger(db)
    try:
        rows = ledger.audit_rows(limit=10)
        assert [row["status"] for row in rows] == ["ok"] * 3
        assert len({row["caller"] for row in rows}) == 1
        used = ledger._rows("SELECT sum(units) FROM turnkit_rate_usage", ())[0][0]
        assert used == 3 * 2  # the key's budget and its user's, three calls each
    finally:
        ledger.close()


def profile_worker_app(db: str):
    from bench.profile_server import turnkit_app

    return turnkit_app(db)
