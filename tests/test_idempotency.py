"""Idempotency keys: replay without running or charging, conflicts, held replays, restarts."""

from __future__ import annotations

import multiprocessing
import threading

import pytest

import _workers
from _shop import prices
from turnkit import Caller, Executor, Registry, Settings


def test_same_key_and_input_replays_without_running_again(executor, key, shop):
    first = executor.execute(key, "shop.set_prices", prices(), {"idempotency_key": "k1"})
    again = executor.execute(key, "shop.set_prices", prices(), {"idempotency_key": "k1"})
    assert first == {"executed": True, "status": "ok", "result": {"updated": 1}}
    assert again == {**first, "replayed": True}
    assert len(shop.writes()) == 1


def test_a_replay_is_audited_as_a_replay_so_each_write_that_ran_has_one_ok_row(executor, key):
    control = {"idempotency_key": "k-audit"}
    executor.execute(key, "shop.set_prices", prices("TEA-0001"), control)
    executor.execute(key, "shop.set_prices", prices("TEA-0001"), control)
    statuses = [row["status"] for row in executor.ledger.audit_rows()]
    assert statuses == ["replayed", "ok"]  # newest first


def test_same_key_with_a_different_input_conflicts(executor, key, shop):
    executor.execute(key, "shop.set_prices", prices("TEA-0001"), {"idempotency_key": "k1"})
    answer = executor.execute(key, "shop.set_prices", prices("TEA-0002"), {"idempotency_key": "k1"})
    assert answer["error"]["code"] == "idempotency_conflict"
    assert len(shop.writes()) == 1


def test_keys_are_per_caller_and_per_tool(executor, key, shop):
    other = Caller.key("key-2", user_id="alice", scopes=key.scopes)
    executor.execute(key, "shop.set_prices", prices(), {"idempotency_key": "k1"})
    executor.execute(other, "shop.set_prices", prices(), {"idempotency_key": "k1"})
    executor.execute(key, "shop.list_products", {}, {"idempotency_key": "k1"})
    assert len(shop.writes()) == 2


def test_a_held_call_repeated_returns_the_same_hold_not_a_second_confirmation(executor, key):
    first = executor.execute(
        key, "shop.delete_product", {"sku": "TEA-0001"}, {"idempotency_key": "d"}
    )
    again = executor.execute(
        key, "shop.delete_product", {"sku": "TEA-0001"}, {"idempotency_key": "d"}
    )
    assert first["status"] == "confirmation_required"
    assert again == {**first, "replayed": True}
    assert len(executor.pending()) == 1


def test_after_the_decision_a_repeat_replays_the_outcome(executor, key, shop):
    control = {"idempotency_key": "d"}
    held = executor.execute(key, "shop.delete_product", {"sku": "TEA-0001"}, control)
    outcome = executor.confirm(held["confirmation_id"], key, "approve")
    again = executor.execute(key, "shop.delete_product", {"sku": "TEA-0001"}, control)
    assert outcome["status"] == "ok"
    assert again == {**outcome, "replayed": True}
    assert len(shop.writes()) == 1


def test_a_dry_run_neither_reserves_nor_burns_the_key(executor, key, shop):
    control = {"idempotency_key": "k1"}
    dry = executor.execute(key, "shop.set_prices", prices(), {**control, "dry_run": True})
    assert dry["dry_run"] is True
    assert executor.execute(key, "shop.set_prices", prices(), control)["status"] == "ok"
    assert len(shop.writes()) == 1


def test_a_failed_validation_does_not_burn_the_key(executor, key, shop):
    control = {"idempotency_key": "k1"}
    assert executor.execute(key, "shop.set_prices", {"prices": []}, control)["status"] == "error"
    assert executor.execute(key, "shop.set_prices", prices(), control)["status"] == "ok"


def test_concurrent_calls_with_one_key_run_the_handler_once(ledger, rights, shop):
    gate = threading.Event()
    original = shop.set_prices

    def slow_set_prices(input, ctx):
        gate.wait(timeout=30)
        return original(input, ctx)

    shop.set_prices = slow_set_prices
    executor = Executor(Registry([shop]), ledger=ledger, permissions=rights)
    caller = Caller.key("key-1", user_id="alice", scopes={"shop.products:write"})
    answers = []

    def call():
        answers.append(
            executor.execute(caller, "shop.set_prices", prices(), {"idempotency_key": "c"})
        )

    threads = [threading.Thread(target=call) for _ in range(4)]
    for thread in threads:
        thread.start()
    gate.set()
    for thread in threads:
        thread.join(timeout=60)
    executor.close()
    assert len(shop.writes()) == 1
    assert sorted(a.get("replayed", False) for a in answers) == [False, True, True, True]
    assert {a["result"]["updated"] for a in answers} == {1}


def _held_at_a_gate(shop):
    """The shop's set_prices, started (``started`` set) and held until ``gate`` is set."""
    gate, started = threading.Event(), threading.Event()
    original = shop.set_prices

    def gated(input, ctx):
        started.set()
        gate.wait(timeout=30)
        return original(input, ctx)

    shop.set_prices = gated
    return gate, started


def test_a_repeat_in_code_waits_for_the_running_call_and_replays_its_answer(
    ledger, rights, shop, key
):
    """In one process (``execute``'s default): a repeat of a running key waits for the first
    call's answer — still waiting while it runs, then the same answer, replayed."""
    gate, started = _held_at_a_gate(shop)
    executor = Executor(Registry([shop]), ledger=ledger, permissions=rights)
    control = {"idempotency_key": "w"}
    answers: dict[str, dict] = {}

    def call(name: str) -> None:
        answers[name] = executor.execute(key, "shop.set_prices", prices(), control)

    first = threading.Thread(target=call, args=("first",))
    first.start()
    assert started.wait(timeout=30)
    repeat = threading.Thread(target=call, args=("repeat",))
    repeat.start()
    repeat.join(timeout=0.5)  # a window in which the first call still runs
    assert repeat.is_alive()  # still waiting for it
    assert "repeat" not in answers
    gate.set()
    first.join(timeout=30)
    repeat.join(timeout=30)
    executor.close()
    assert answers["repeat"] == {**answers["first"], "replayed": True}
    assert len(shop.writes()) == 1


def test_a_repeat_that_does_not_wait_is_told_in_progress_at_once(ledger, rights, shop, key):
    """``execute(..., wait=False)`` (REST and MCP): the repeat is answered ``in_progress`` with
    ``retry_after`` while the first call runs; sent again after it, it replays the answer."""
    gate, started = _held_at_a_gate(shop)
    executor = Executor(Registry([shop]), ledger=ledger, permissions=rights)
    control = {"idempotency_key": "n"}
    done: list[dict] = []
    first = threading.Thread(
        target=lambda: done.append(executor.execute(key, "shop.set_prices", prices(), control))
    )
    first.start()
    assert started.wait(timeout=30)
    told = executor.execute(key, "shop.set_prices", prices(), control, wait=False)
    assert told["error"]["code"] == "in_progress"
    assert told["error"]["details"]["retry_after"] == 1.0
    assert first.is_alive()
    gate.set()
    first.join(timeout=30)
    again = executor.execute(key, "shop.set_prices", prices(), control, wait=False)
    executor.close()
    assert again == {**done[0], "replayed": True}
    assert len(shop.writes()) == 1


def test_replay_survives_a_restart_in_a_new_process(executor, key, shop, ledger_url):
    first = executor.execute(key, "shop.set_prices", prices(), {"idempotency_key": "r1"})
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    worker = ctx.Process(
        target=_workers.execute_with_key,
        args=(ledger_url, str(shop.log), "r1", prices(), results),
    )
    worker.start()
    again = results.get(timeout=120)
    worker.join(timeout=60)
    assert worker.exitcode == 0
    assert again == {**first, "replayed": True}
    assert len(shop.writes()) == 1


def test_replay_survives_a_brand_new_executor_on_the_same_database(ledger_url, rights, shop, key):
    from turnkit import open_ledger

    ledgers = [open_ledger(ledger_url), open_ledger(ledger_url)]
    first = Executor(Registry([shop]), ledger=ledgers[0], permissions=rights)
    answer = first.execute(key, "shop.set_prices", prices(), {"idempotency_key": "r2"})
    first.close()
    second = Executor(Registry([shop]), ledger=ledgers[1], permissions=rights)
    again = second.execute(key, "shop.set_prices", prices(), {"idempotency_key": "r2"})
    second.close()
    for ledger in ledgers:
        ledger.close()
    assert again == {**answer, "replayed": True}
    assert len(shop.writes()) == 1


class _Died(BaseException):
    """The process dying at one statement (a ``BaseException``, as a ``SystemExit`` is)."""


@pytest.mark.parametrize("dies_at", ["audit", "store_idempotency"])
def test_a_process_dying_between_a_writes_audit_row_and_its_stored_answer_never_hides_the_write(
    ledger, shop, rights, clock, key, monkeypatch, dies_at
):
    """The audit row of a write is written before the answer its key keeps. A process dying at
    either statement leaves the write audited with its key still running, or unaudited with its
    key still running: a repeat then answers ``outcome_unknown`` ("check the data"), never a
    replay of a write the audit never saw; the handler never runs twice."""
    control = {"idempotency_key": "order-1"}
    dying = Executor(Registry([shop]), ledger=ledger, permissions=rights,
                     settings=Settings(handler_timeout=2.0), clock=clock)  # fmt: skip
    real = getattr(type(ledger), dies_at)

    def dies(self, *args, **kwargs):
        if self is ledger:
            raise _Died
        return real(self, *args, **kwargs)

    monkeypatch.setattr(type(ledger), dies_at, dies)
    with pytest.raises(_Died):
        dying.execute(key, "shop.set_prices", prices(), control)
    monkeypatch.undo()
    assert len(shop.writes()) == 1  # the write ran before the process died

    clock.now += 60  # the dead call is stale
    fresh = Executor(Registry([shop]), ledger=ledger, permissions=rights,
                     settings=Settings(handler_timeout=2.0), clock=clock)  # fmt: skip
    try:
        again = fresh.execute(key, "shop.set_prices", prices(), control)
    finally:
        fresh.close()
        dying.close()
    ok_rows = [row for row in ledger.audit_rows() if row["status"] == "ok"]
    assert again["error"]["code"] == "outcome_unknown", again
    assert len(ok_rows) == (1 if dies_at == "store_idempotency" else 0)
    assert len(shop.writes()) == 1
