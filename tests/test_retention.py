"""Retention (``ledger/retention.py``, ``turnkit ledger prune``): decided confirmations and
idempotency records go after ``retention_days``, expired inbox sign-ins and ended rate-limit
windows at once, audit rows only when ``audit_retention_days`` opts in; nothing a live call
needs goes. And a ledger made by an older turnkit is upgraded in place when opened.

Reaches ``turnkit.ledger.retention`` directly, and ``turnkit.executor.steps.window_start`` to
name a rate-limit window: it tests pruning itself, which no public name exposes."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _shop import prices
from test_cli import TURNKIT, env
from turnkit import Caller, MemoryLedger, open_ledger
from turnkit.executor.steps import window_start
from turnkit.ledger.retention import Pruned, prune

DAY = 86400.0


def counts(ledger) -> dict[str, int]:
    tables = {
        "confirmations": "turnkit_confirmations",
        "idempotency": "turnkit_idempotency",
        "sessions": "turnkit_key_sessions",
        "audit": "turnkit_audit",
    }
    return {
        kind: ledger._rows(f"SELECT COUNT(*) FROM {table}")[0][0] for kind, table in tables.items()
    }


@pytest.fixture
def aged(executor, key, alice, clock):
    """A ledger with things of every age: decided and pending confirmations, idempotency
    records, an inbox sign-in, rate-limit usage, audit rows; then 40 days pass."""
    ledger = executor.ledger
    ledger.set_setting("api_session_write_modules", ["shop"])
    old = {
        "rejected": executor.execute(key, "shop.delete_product", {"sku": "A"}),
        "approved": executor.execute(key, "shop.delete_product", {"sku": "B"}),
        "pending": executor.execute(alice, "shop.set_prices", prices()),
    }
    executor.confirm(old["rejected"]["confirmation_id"], key, "reject")
    executor.confirm(old["approved"]["confirmation_id"], key, "approve")
    executor.execute(key, "shop.list_products", {}, {"idempotency_key": "old"})
    stored, _ = ledger.keys.create("alice", {"shop.products:read"}, now=clock.now)
    ledger.keys.open_session(stored.id, until=clock.now + 3600, now=clock.now)
    clock.now += 40 * DAY
    recent = executor.execute(key, "shop.delete_product", {"sku": "C"})
    executor.confirm(recent["confirmation_id"], key, "reject")
    executor.execute(key, "shop.list_products", {}, {"idempotency_key": "new"})
    live = executor.execute(alice, "shop.set_prices", prices("TEA-0002"))
    return {**{k: v["confirmation_id"] for k, v in old.items()},
            "recent": recent["confirmation_id"], "live": live["confirmation_id"]}  # fmt: skip


def test_prune_deletes_what_is_older_than_the_retention_and_keeps_the_rest(executor, aged, clock):
    ledger = executor.ledger
    before = counts(ledger)
    pruned = prune(ledger, now=clock.now, retention_days=30)
    assert pruned.confirmations == 3  # rejected, approved, and the pending one long expired
    assert pruned.idempotency == 1
    assert pruned.sessions == 1
    assert pruned.audit == 0  # kept for good unless opted in
    kept = {c.id for c in ledger.list_confirmations()}
    assert kept == {aged["recent"], aged["live"]}
    assert ledger.get_idempotency("key:key-1", "shop.list_products", "new") is not None
    assert ledger.get_idempotency("key:key-1", "shop.list_products", "old") is None
    after = counts(ledger)
    assert after["audit"] == before["audit"]
    assert prune(ledger, now=clock.now, retention_days=30) == Pruned()  # nothing left to go


def test_a_dry_run_counts_and_deletes_nothing(executor, aged, clock):
    before = counts(executor.ledger)
    dry = prune(executor.ledger, now=clock.now, retention_days=30, dry_run=True)
    assert (dry.confirmations, dry.idempotency, dry.sessions) == (3, 1, 1)
    assert counts(executor.ledger) == before


def test_audit_rows_go_only_when_opted_in(executor, aged, clock):
    ledger = executor.ledger
    total = counts(ledger)["audit"]
    pruned = prune(ledger, now=clock.now, retention_days=30, audit_retention_days=30)
    assert 0 < pruned.audit < total
    assert all(row["at"] >= clock.now - 30 * DAY for row in ledger.audit_rows(1000))


def test_rate_limit_windows_are_forgotten_a_day_after_they_started(executor, key, clock):
    executor.execute(key, "shop.list_products", {})
    window = window_start(clock.now, 60)
    assert executor.ledger.usage(key.identity, window) == 1
    clock.now += 120  # ended, but another process may count windows of an hour: kept
    assert prune(executor.ledger, now=clock.now, retention_days=30).usage == 0
    assert executor.ledger.usage(key.identity, window) == 1
    clock.now += DAY
    assert prune(executor.ledger, now=clock.now, retention_days=30).usage >= 1
    assert executor.ledger.usage(key.identity, window) == 0


def test_pruning_with_a_shorter_window_keeps_a_longer_windows_usage(executor, key, clock):
    """A server counting hour-long windows (its settings in code) and ``turnkit ledger prune``
    with the default minute: the server's budget is not reset."""
    executor.ledger.set_setting("rate_limit_units", 1)
    executor.ledger.set_setting("rate_limit_window", 3600)
    assert executor.execute(key, "shop.list_products", {})["status"] == "ok"
    clock.now += 600
    prune(executor.ledger, now=clock.now, retention_days=30, rate_limit_window=60)
    refused = executor.execute(key, "shop.list_products", {})
    assert refused["error"]["code"] == "rate_limited"


def test_a_memory_ledger_forgets_ended_windows_too(clock):
    ledger = MemoryLedger()
    assert ledger.charge("key:k", window_start(clock.now, 60), 1, 10)
    assert prune(ledger, now=clock.now + DAY + 120, retention_days=30).usage == 1
    assert ledger.usage("key:k", window_start(clock.now, 60)) == 0
    ledger.close()


def test_nothing_a_live_call_needs_is_pruned(executor, key, alice, clock):
    """A running approved write and a running keyed call are kept, however old (a process may
    still finish them: their records say so)."""
    executor.ledger.set_setting("api_session_write_modules", ["shop"])
    cid = executor.execute(alice, "shop.set_prices", prices())["confirmation_id"]
    executor.ledger.claim_confirmation(
        cid, decided_by="session:alice", decision={"action": "approve"}, token="t", now=clock.now
    )
    assert executor.ledger.get_confirmation(cid).status == "running"
    prune(executor.ledger, now=clock.now + 40 * DAY, retention_days=30)
    assert executor.ledger.get_confirmation(cid).status == "running"


def test_a_repeat_after_its_record_is_pruned_runs_anew(executor, key, shop, clock):
    control = {"idempotency_key": "k"}
    first = executor.execute(key, "shop.set_prices", prices(), control)
    clock.now += 31 * DAY
    prune(executor.ledger, now=clock.now, retention_days=30)
    again = executor.execute(key, "shop.set_prices", prices(), control)
    assert (first["status"], again["status"], again.get("replayed")) == ("ok", "ok", None)
    assert len(shop.writes()) == 2  # as documented: keep retention_days longer than any retry


def test_the_retention_settings_are_checked(executor):
    from turnkit import Settings

    with pytest.raises(ValueError, match="'retention_days' must be a number of days >= 1"):
        Settings(retention_days=0.5)
    with pytest.raises(ValueError, match="or 0: keep them for good"):
        Settings(audit_retention_days=0.1)
    assert Settings(audit_retention_days=0).audit_retention_days == 0


@pytest.mark.slow
def test_turnkit_ledger_prune_prints_what_it_deleted(executor, key, clock, ledger_url, tmp_path):
    clock.now = time.time() - 3 * DAY  # the command reads the real clock
    for sku in ("A", "B", "C"):
        held = executor.execute(key, "shop.delete_product", {"sku": sku})["confirmation_id"]
        executor.confirm(held, key, "reject")
    executor.ledger.set_setting("retention_days", 1)
    run = [TURNKIT, "ledger", "prune", "--db", ledger_url]
    dry = subprocess.run([*run, "--dry-run", "--json"], cwd=tmp_path, env=env(),
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["confirmations"] == 3
    done = subprocess.run(run, cwd=tmp_path, env=env(), capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "deleted 3 decided confirmations" in done.stdout
    assert "audit rows kept for good" in done.stdout
    assert executor.ledger.list_confirmations() == []
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.slow
def test_the_retention_section_runs_as_written(tmp_path):
    from test_docs_blocks import blocks

    (code,) = [code for heading, code in blocks("sh") if heading == "Retention"]
    path = {"PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    done = subprocess.run(["bash", "-c", code], cwd=tmp_path, env=env() | path,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "would delete 0 decided confirmations" in done.stdout


# --- a ledger of an older turnkit -------------------------------------------------------------

OLD_CONFIRMATIONS = """
    CREATE TABLE turnkit_confirmations (
        id TEXT PRIMARY KEY, caller TEXT NOT NULL, caller_identity TEXT NOT NULL,
        tool TEXT NOT NULL, input TEXT NOT NULL, input_hash TEXT NOT NULL, idempotency_key TEXT,
        status TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL, decided_at DOUBLE PRECISION, decided_by TEXT,
        decision TEXT, token TEXT, outcome TEXT
    )
"""
OLD_ROW = (
    'INSERT INTO turnkit_confirmations VALUES (\'c-old\', \'{"kind": "key", "key_id":'
    ' "key-1", "user_id": "alice", "scopes": ["shop.products:write"]}\', \'key:key-1\','
    " 'shop.delete_product', '{\"sku\": \"TEA-0001\"}', 'h', NULL, 'pending', 1800000000,"
    " 1800003600, NULL, NULL, NULL, NULL, NULL)"
)


def _old_ledger(url: str) -> None:
    if url.startswith("postgresql"):
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(OLD_CONFIRMATIONS)
            conn.execute(OLD_ROW)
    else:
        with sqlite3.connect(url) as conn:
            conn.execute(OLD_CONFIRMATIONS)
            conn.execute(OLD_ROW)


def test_a_ledger_of_an_older_turnkit_is_upgraded_in_place_and_its_holds_decided(
    ledger_url, tmp_path
):
    if not ledger_url.startswith("postgresql"):
        ledger_url = str(tmp_path / "old.sqlite")
    _old_ledger(ledger_url)
    ledger = open_ledger(ledger_url)
    try:
        held = ledger.get_confirmation("c-old")
        assert (held.fingerprint, held.module, held.reserved_units) == (None, None, 0)
        assert ledger.list_confirmations(status="pending")[0].id == "c-old"
        open_ledger(ledger_url).close()  # a second process opening it: nothing to add again
    finally:
        ledger.close()


def test_a_caller_is_stored_and_read_back_as_it_was(executor, key):
    cid = executor.execute(key, "shop.delete_product", {"sku": "X"})["confirmation_id"]
    assert executor.ledger.get_confirmation(cid).caller == key
    assert isinstance(executor.ledger.get_confirmation(cid).caller, Caller)


def test_the_idempotency_record_of_a_hold_still_open_is_kept_however_old(
    executor, key, shop, clock
):
    """A hold may outlive the retention (``confirmation_ttl`` 3 days, ``retention_days`` 1): its
    repeat must replay the hold, never make a second one that runs the write again."""
    executor.ledger.set_setting("confirmation_ttl", 3 * DAY)
    control = {"idempotency_key": "k1"}
    held = executor.execute(key, "shop.delete_product", {"sku": "A"}, control)
    clock.now += 1.5 * DAY
    assert prune(executor.ledger, now=clock.now, retention_days=1).idempotency == 0
    again = executor.execute(key, "shop.delete_product", {"sku": "A"}, control)
    assert again["confirmation_id"] == held["confirmation_id"]
    assert again["replayed"] is True
    assert len(executor.ledger.list_confirmations()) == 1
    executor.confirm(held["confirmation_id"], key, "reject")
    clock.now += 2 * DAY
    assert prune(executor.ledger, now=clock.now, retention_days=1).idempotency == 1
    assert shop.writes() == []
