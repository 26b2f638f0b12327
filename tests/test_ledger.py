"""The ledger on both backends: settings read at call time, URLs, listings, dead processes."""

from __future__ import annotations

import logging
import multiprocessing

import pytest

import _workers
from _shop import prices
from turnkit import Settings, SqliteLedger, open_ledger


def test_settings_are_read_at_call_time(executor, ledger):
    assert executor.settings_now().confirm_batch_over == 50
    ledger.set_setting("confirm_batch_over", 3)
    assert executor.settings_now().confirm_batch_over == 3
    ledger.clear_setting("confirm_batch_over")
    assert executor.settings_now().confirm_batch_over == 50


def test_a_bad_setting_in_the_ledger_is_ignored_with_a_warning(executor, ledger, key, caplog):
    ledger.set_setting("confirm_batch_over", "lots")
    ledger.set_setting("no_such_setting", 1)
    with caplog.at_level(logging.WARNING, logger="turnkit.settings"):
        assert executor.settings_now().confirm_batch_over == 50
        assert executor.execute(key, "shop.list_products", {})["status"] == "ok"
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "'confirm_batch_over'" in messages
    assert "'no_such_setting'" in messages


async def test_async_settings(executor, ledger):
    await ledger.aset_setting("rate_limit_units", 7)
    assert (await executor.asettings_now()).rate_limit_units == 7
    assert await ledger.asettings() == {"rate_limit_units": 7}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("rate_limit_window", float("nan")),
        ("rate_limit_window", float("inf")),
        ("confirmation_ttl", float("inf")),
        ("confirmation_ttl", 1e300),
        ("handler_timeout", float("nan")),
        ("rate_limit_units", 10**30),
    ],
)
def test_a_non_finite_or_huge_setting_in_the_ledger_is_ignored_and_calls_still_answer(
    executor, ledger, key, name, value, caplog
):
    ledger.set_setting(name, value)
    with caplog.at_level(logging.WARNING, logger="turnkit.settings"):
        assert executor.execute(key, "shop.list_products", {})["status"] == "ok"
        held = executor.execute(key, "shop.delete_product", {"sku": "TEA-0001"})
    assert held["status"] == "confirmation_required"
    assert [c.id for c in executor.pending()] == [held["confirmation_id"]]
    assert f"{name!r}" in " ".join(r.getMessage() for r in caplog.records)
    with pytest.raises(ValueError, match=f"'{name}' must be"):
        Settings(**{name: value})


def test_settings_defaults_refuse_nonsense():
    with pytest.raises(ValueError, match="'confirm_batch_over' must be a whole number >= 1"):
        Settings(confirm_batch_over=0)
    with pytest.raises(ValueError, match="'handler_timeout' must be a number of seconds > 0"):
        Settings(handler_timeout=-1)
    with pytest.raises(TypeError, match="collection of module keys"):
        Settings(api_session_write_modules="shop")


def test_open_ledger_takes_paths_and_urls(tmp_path):
    assert isinstance(open_ledger(tmp_path / "a.sqlite"), SqliteLedger)
    assert open_ledger(f"sqlite:///{tmp_path}/b.sqlite").path == f"{tmp_path}/b.sqlite"
    with pytest.raises(ValueError, match="unsupported storage URL 'mysql://x'"):
        open_ledger("mysql://x")


def test_pending_lists_only_live_confirmations_of_a_caller(executor, key, alice, clock):
    executor.ledger.set_setting("api_session_write_modules", ["shop"])
    executor.execute(key, "shop.delete_product", {"sku": "TEA-0001"})
    clock.now += 10
    executor.execute(alice, "shop.set_prices", prices())
    assert [c.tool for c in executor.pending()] == ["shop.delete_product", "shop.set_prices"]
    assert [c.caller.identity for c in executor.pending(alice)] == ["session:alice"]
    clock.now += 3595
    assert [c.tool for c in executor.pending()] == ["shop.set_prices"]


def _crash(ledger_url, log, key=None, decide=None):
    ctx = multiprocessing.get_context("spawn")
    worker = ctx.Process(target=_workers.crash_during_write, args=(ledger_url, log, key, decide))
    worker.start()
    worker.join(timeout=120)
    assert worker.exitcode == 3


def test_a_process_that_died_inside_a_keyed_write_is_never_run_again(
    executor, key, shop, ledger_url
):
    executor.ledger.set_setting("handler_timeout", 0.1)
    _crash(ledger_url, str(shop.log), key="k-dead")
    answer = executor.execute(key, "shop.set_prices", prices(), {"idempotency_key": "k-dead"})
    assert answer["error"]["code"] == "outcome_unknown"
    assert "may or may not have happened" in answer["error"]["message"]
    again = executor.execute(key, "shop.set_prices", prices(), {"idempotency_key": "k-dead"})
    assert again == {**answer, "replayed": True}  # settled: repeats no longer wait
    assert shop.writes() == []


def test_a_process_that_died_inside_an_approved_write_is_never_run_again(
    executor, alice, shop, ledger_url
):
    executor.ledger.set_setting("api_session_write_modules", ["shop"])
    executor.ledger.set_setting("handler_timeout", 0.1)
    held = executor.execute(alice, "shop.set_prices", prices())["confirmation_id"]
    _crash(ledger_url, str(shop.log), decide=held)
    answer = executor.confirm(held, alice, "approve")
    assert answer["error"]["code"] == "outcome_unknown"
    assert executor.ledger.get_confirmation(held).status == "done"
    assert executor.confirm(held, alice, "reject") == answer  # settled for every decider
    assert shop.writes() == []


def test_an_in_memory_sqlite_ledger_is_refused(tmp_path):
    with pytest.raises(ValueError, match="needs a SQLite file"):
        open_ledger(":memory:")


def test_many_processes_opening_a_fresh_ledger_at_once_all_succeed(ledger_url):
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        results = pool.map(_workers.open_and_count_settings, [ledger_url] * 8)
    assert results == [0] * 8


def test_an_executor_leaves_a_ledger_it_was_given_open(executor, ledger):
    executor.close()
    assert ledger.settings() == {}


CLOSE_UNDER_A_STATEMENT = """
import sys, threading, time
from turnkit import SqliteLedger
ledger = SqliteLedger(sys.argv[1])
started, found = threading.Event(), []
def count():
    started.set()
    ledger._run("CREATE TABLE IF NOT EXISTS n (x INTEGER)")
    found.append(ledger._run(
        "INSERT INTO n WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c"
        " WHERE x < 2000000) SELECT x FROM c"))
worker = threading.Thread(target=count)
worker.start()
started.wait()
time.sleep(0.05)
ledger.close()  # while the worker's statement runs
worker.join()
print(found)
"""


def test_closing_a_sqlite_ledger_while_another_thread_runs_a_statement_waits_for_it(tmp_path):
    """An executor closed while a cancelled call still writes its audit row: closing the
    connection under the running statement crashed the process (a segmentation fault)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", CLOSE_UNDER_A_STATEMENT, str(tmp_path / "l.sqlite")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[2000000]"
