"""The outbox is written by the events themselves: a hold, a decision, an expiry and a finished
run through the real ``Executor`` (sync and async) leave one row per target that asked for the
event, in memory, in a SQLite file and on PostgreSQL; none without a target.

Reaches ``turnkit.ledger.schema`` for the outbox's triggers (an old ledger gets them on setup).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from _shop import prices
from conftest import postgres_url
from turnkit import (
    Caller,
    Decision,
    Executor,
    Ledger,
    MemoryLedger,
    Registry,
    Settings,
    open_ledger,
)
from turnkit.ledger.schema import SQLITE_TRIGGERS
from turnkit.notify import EVENTS, add_target

TTL = 3600.0


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def any_ledger(request, tmp_path) -> Iterator[Ledger]:
    if request.param == "memory":
        opened: Ledger = MemoryLedger()
    elif request.param == "sqlite":
        opened = open_ledger(str(tmp_path / "ledger.sqlite"))
    else:
        opened = open_ledger(postgres_url())
    yield opened
    opened.close()


@pytest.fixture
def shop_on(any_ledger, shop, rights, clock) -> Iterator[Executor]:
    any_ledger.set_setting("api_session_write_modules", ["shop"])
    ex = Executor(
        Registry([shop]),
        ledger=any_ledger,
        permissions=rights,
        settings=Settings(handler_timeout=2.0, confirmation_ttl=TTL),
        clock=clock,
    )
    yield ex
    ex.close()


def events_of(ledger: Ledger, confirmation_id: str) -> list[tuple[str, str, str]]:
    """``(event, status, target name)`` of a confirmation's outbox rows, in order."""
    names = {t.id: t.name for t in ledger.notify_targets()}
    order = {event: i for i, event in enumerate(EVENTS)}
    rows = ledger.deliveries(confirmation_id=confirmation_id)
    return sorted(((d.event, d.status, names[d.target_id]) for d in rows),
                  key=lambda row: (order[row[0]], row[2]))  # fmt: skip


def hook(ledger: Ledger, name: str = "hook", events=EVENTS) -> None:
    add_target(ledger, name, "webhook", {"url": "http://127.0.0.1:9/x"}, events=events, now=0)


def hold(executor: Executor, caller: Caller) -> str:
    answer = executor.execute(caller, "shop.set_prices", prices("TEA-0001"))
    assert answer["status"] == "confirmation_required"
    return answer["confirmation_id"]


def test_hold_and_approve_write_held_decided_and_ran(shop_on, alice):
    hook(shop_on.ledger)
    held = hold(shop_on, alice)
    assert events_of(shop_on.ledger, held) == [("held", "pending", "hook")]
    assert shop_on.confirm(held, alice, "approve")["status"] == "ok"
    assert events_of(shop_on.ledger, held) == [
        ("held", "pending", "hook"),
        ("decided", "running", "hook"),
        ("ran", "done", "hook"),
    ]
    ids = {d.id for d in shop_on.ledger.deliveries(confirmation_id=held)}
    target = shop_on.ledger.notify_target(name="hook")
    assert ids == {f"{held}:{event}:{target.id}" for event in ("held", "decided", "ran")}


def test_a_reject_is_decided_and_never_ran(shop_on, alice):
    hook(shop_on.ledger)
    held = hold(shop_on, alice)
    shop_on.confirm(held, alice, Decision.reject("no"))
    assert events_of(shop_on.ledger, held) == [
        ("held", "pending", "hook"),
        ("decided", "rejected", "hook"),
    ]


def test_an_expired_hold_writes_expired(shop_on, alice, clock):
    hook(shop_on.ledger)
    held = hold(shop_on, alice)
    clock.now += TTL + 1
    assert shop_on.confirm(held, alice, "approve")["error"]["code"] == "confirmation_expired"
    assert events_of(shop_on.ledger, held) == [
        ("held", "pending", "hook"),
        ("expired", "expired", "hook"),
    ]


async def test_the_async_doors_write_the_same_rows(shop_on, alice):
    hook(shop_on.ledger)
    answer = await shop_on.aexecute(alice, "shop.set_prices", prices("TEA-0002"))
    held = answer["confirmation_id"]
    assert (await shop_on.aconfirm(held, alice, "approve"))["status"] == "ok"
    assert [e for e, _, _ in events_of(shop_on.ledger, held)] == ["held", "decided", "ran"]


def test_no_target_no_rows(shop_on, alice):
    held = hold(shop_on, alice)
    shop_on.confirm(held, alice, "approve")
    assert shop_on.ledger.deliveries() == []


def test_each_target_gets_only_the_events_it_asked_for(shop_on, alice):
    hook(shop_on.ledger, "pager", events=["held"])
    hook(shop_on.ledger, "audit", events=["decided", "ran"])
    held = hold(shop_on, alice)
    shop_on.confirm(held, alice, "approve")
    assert events_of(shop_on.ledger, held) == [
        ("held", "pending", "pager"),
        ("decided", "running", "audit"),
        ("ran", "done", "audit"),
    ]


def test_a_reopened_confirmation_keeps_its_first_decided_row(shop_on, alice):
    hook(shop_on.ledger)
    held = hold(shop_on, alice)
    ledger = shop_on.ledger
    assert ledger.claim_confirmation(held, decided_by="a", decision={}, token="t1", now=1.0)
    ledger.reopen_confirmation(held)  # a rate-limited approval goes back to pending
    assert ledger.claim_confirmation(held, decided_by="b", decision={}, token="t2", now=2.0)
    assert [e for e, _, _ in events_of(ledger, held)] == ["held", "decided"]


def test_a_ledger_made_before_notifications_gets_the_tables_and_triggers(tmp_path):
    path = tmp_path / "old.sqlite"
    open_ledger(str(path)).close()
    with sqlite3.connect(path) as conn:  # as an older turnkit left it
        conn.execute("DROP TABLE turnkit_outbox")
        conn.execute("DROP TABLE turnkit_notify_targets")
        for statement in SQLITE_TRIGGERS:
            conn.execute(f"DROP TRIGGER {statement.split()[5]}")
    upgraded = open_ledger(str(path))
    try:
        hook(upgraded)
        upgraded._run(
            "INSERT INTO turnkit_confirmations (id, caller, caller_identity, tool, input,"
            " input_hash, status, created_at, expires_at)"
            " VALUES ('c1', '{}', 'a', 't', '{}', 'h', 'pending', 1, 2)"
        )
        assert [d.event for d in upgraded.deliveries()] == ["held"]
    finally:
        upgraded.close()


def test_claims_are_exclusive_while_they_hold_and_taken_again_after(any_ledger, shop_on, alice):
    hook(any_ledger)
    for _ in range(3):
        hold(shop_on, alice)
    first = any_ledger.claim_deliveries("w1", 100.0, 30.0, limit=2)
    second = any_ledger.claim_deliveries("w2", 100.0, 30.0, limit=5)
    assert len(first) == 2
    assert len(second) == 1
    assert {d.id for d in first}.isdisjoint(d.id for d in second)
    assert any_ledger.claim_deliveries("w3", 129.0, 30.0) == []
    assert any_ledger.delivered(first[0].id, "w1", 101.0)
    late = any_ledger.claim_deliveries("w3", 131.0, 30.0)  # w1's and w2's claims ran out
    assert {d.id for d in late} == {first[1].id, second[0].id}
    assert all(d.attempts == 2 for d in late)
    assert not any_ledger.delivered(first[1].id, "w1", 132.0)  # no longer w1's claim


def test_a_failed_row_waits_for_its_time_and_a_dead_one_can_be_retried(any_ledger, shop_on, alice):
    hook(any_ledger)
    hold(shop_on, alice)
    (row,) = any_ledger.claim_deliveries("w1", 100.0, 30.0)
    assert any_ledger.failed(row.id, "w1", "HTTP 500", 150.0)
    assert any_ledger.claim_deliveries("w1", 149.0, 30.0) == []
    (again,) = any_ledger.claim_deliveries("w1", 150.0, 30.0)
    assert again.last_error == "HTTP 500"
    assert any_ledger.failed(row.id, "w1", "HTTP 500", None)
    assert [d.id for d in any_ledger.dead_letters()] == [row.id]
    assert any_ledger.claim_deliveries("w1", 10_000.0, 30.0) == []
    assert any_ledger.retry_dead(row.id)
    (revived,) = any_ledger.claim_deliveries("w1", 10_000.0, 30.0)
    assert revived.attempts == 1


def test_prune_forgets_notifications_sent_or_given_up_before_the_retention(tmp_path):
    from turnkit.ledger.retention import prune  # internal: pruning is the CLI's, by its path

    ledger = open_ledger(str(tmp_path / "ledger.sqlite"))
    try:
        ledger._run(
            "INSERT INTO turnkit_outbox (id, event, confirmation_id, status, target_id,"
            " created_at, state) VALUES (?, 'held', 'c', 'pending', 't', ?, ?)",
            ("old-sent", 1.0, "sent"),
        )
        for row in (("old-dead", 1.0, "dead"), ("old-due", 1.0, "pending"), ("new", 9e9, "sent")):
            ledger._run(
                "INSERT INTO turnkit_outbox (id, event, confirmation_id, status, target_id,"
                " created_at, state) VALUES (?, 'held', 'c', 'pending', 't', ?, ?)",
                row,
            )
        assert prune(ledger, now=40 * 86400.0, retention_days=30, dry_run=True).notifications == 2
        assert prune(ledger, now=40 * 86400.0, retention_days=30).notifications == 2
        left = sorted(r[0] for r in ledger._rows("SELECT id FROM turnkit_outbox"))
        assert left == ["new", "old-due"]  # one still to deliver is kept, however old
    finally:
        ledger.close()
