"""The ledger on both backends: settings read at call time, URLs, listings, dead processes."""

from __future__ import annotations

import logging
import multiprocessing
import sqlite3
import threading
from typing import Any

import pytest

import _workers
from _shop import prices
from _write_lock import probing
from turnkit import Caller, Executor, Registry, Settings, SqliteLedger, Tool, open_ledger


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


def test_an_executors_own_ledger_lives_in_memory_and_is_shared_by_its_threads():
    """``Executor()`` without a ledger keeps one in memory: every thread sees the same rows, and
    closing it while another thread runs a statement waits for that statement."""
    import threading

    from turnkit import MemoryLedger

    executor = Executor(Registry())
    ledger = executor.ledger
    assert isinstance(ledger, MemoryLedger)
    assert not ledger.blocking
    ledger.set_setting("confirm_batch_over", 3)
    seen: list[Any] = []
    worker = threading.Thread(target=lambda: seen.append(ledger.settings()))
    worker.start()
    worker.join()
    assert seen == [{"confirm_batch_over": 3}]
    assert ledger.charge("u", 1, 2, 3)
    assert not ledger.charge("u", 1, 2, 3)
    assert ledger.usage("u", 1) == 2

    running = threading.Event()
    ledger._conn.create_function("running", 0, lambda: running.set() or 1)
    counted: list[int] = []

    def spin() -> None:
        counted.append(
            ledger._rows(
                "WITH RECURSIVE c(x) AS (SELECT running() UNION ALL SELECT x + 1 FROM c"
                " WHERE x < 300000) SELECT count(*) FROM c"
            )[0][0]
        )

    busy = threading.Thread(target=spin)
    busy.start()
    assert running.wait(10)  # the statement runs now
    executor.close()  # waits for it, then forgets everything
    busy.join()
    assert counted == [300000]
    with pytest.raises(sqlite3.ProgrammingError):
        ledger.settings()


async def test_a_ledger_in_memory_is_asked_on_the_event_loop_not_in_a_worker_thread(monkeypatch):
    """Its statements touch no disk: async calls run them on the loop (no thread hop), a call
    with an async handler never leaves the loop, and one with a sync handler leaves it only for
    the handler pool."""
    import asyncio

    hops: list[str] = []
    real = asyncio.to_thread

    async def counted(function: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(function, "__name__", "?"))
        return await real(function, *args, **kwargs)

    async def echo(input: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return {"echo": input["text"]}

    tool = Tool(
        name="demo.echo_text",
        description="Echo.",
        audience="public",
        input_schema={
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": False,
        },
        handler=echo,
    )
    in_pool: list[str] = []

    def shout(input: dict[str, Any], ctx: Any) -> dict[str, Any]:
        in_pool.append(threading.current_thread().name)
        return {"shout": input["text"].upper()}

    sync_tool = Tool(
        name="demo.shout_text",
        description="Shout.",
        audience="public",
        input_schema=tool.input_schema,
        handler=shout,
    )
    executor = Executor(Registry([Demo([tool, sync_tool])]))
    monkeypatch.setattr(asyncio, "to_thread", counted)
    await executor.ledger.aset_setting("confirm_batch_over", 4)
    assert (await executor.ledger.asettings()) == {"confirm_batch_over": 4}
    answer = await executor.aexecute(Caller.public(), "demo.echo_text", {"text": "hi"})
    assert answer["result"] == {"echo": "hi"}
    answer = await executor.aexecute(Caller.public(), "demo.shout_text", {"text": "hi"})
    assert answer["result"] == {"shout": "HI"}
    rows = await executor.ledger.aaudit_rows()
    assert [(r["tool"], r["status"]) for r in rows] == [
        ("demo.shout_text", "ok"),
        ("demo.echo_text", "ok"),
    ]
    assert hops == []
    assert [name.startswith("turnkit-handler") for name in in_pool] == [True]
    executor.close()


class Demo:
    """A module of the given tools."""

    key = "demo"

    def __init__(self, tools: list[Tool]) -> None:
        self.tools = tools

    def api_tools(self) -> list[Tool]:
        return self.tools


def test_a_ledger_in_memory_remembers_its_settings_until_a_statement_writes_them():
    from turnkit import MemoryLedger

    ledger = MemoryLedger()
    reads: list[str] = []
    ledger._conn.set_trace_callback(lambda sql: reads.append(sql) if "SELECT" in sql else None)
    ledger.set_setting("confirm_batch_over", 1)
    assert ledger.settings() == {"confirm_batch_over": 1}
    assert ledger.settings() == {"confirm_batch_over": 1}
    assert len(reads) == 1  # read once
    ledger.set_setting("confirm_batch_over", 2)
    assert ledger.settings() == {"confirm_batch_over": 2}
    ledger.clear_setting("confirm_batch_over")
    assert ledger.settings() == {}
    ledger._run("INSERT INTO turnkit_settings (key, value) VALUES ('max_rounds', '3')")
    assert ledger.settings() == {"max_rounds": 3}  # any statement that writes them
    ledger.settings()["max_rounds"] = 99  # a copy
    assert ledger.settings() == {"max_rounds": 3}
    ledger.set_setting("api_session_write_modules", ["shop"])
    ledger.settings()["api_session_write_modules"].append("other")  # a copy, all the way down
    assert ledger.settings()["api_session_write_modules"] == ["shop"]
    ledger.close()
    with pytest.raises(sqlite3.ProgrammingError):
        ledger.settings()


def test_a_ledger_in_memory_inserts_audit_rows_together_and_shows_them_at_once():
    from turnkit import MemoryLedger
    from turnkit.ledger.memory import AUDIT_BATCH  # internal: the batch size under test

    ledger = MemoryLedger()
    inserted: list[str] = []
    ledger._conn.set_trace_callback(
        lambda sql: inserted.append(sql) if sql.startswith("INSERT INTO turnkit_audit") else None
    )

    def row(n: int) -> None:
        ledger.audit(at=float(n), caller="public", tool=f"demo.tool_{n}", status="ok",
                     code=None, duration_ms=1.0)  # fmt: skip

    for n in range(3):
        row(n)
    assert inserted == []  # waiting
    assert [r["tool"] for r in ledger.audit_rows()] == ["demo.tool_2", "demo.tool_1", "demo.tool_0"]
    assert len(inserted) == 3
    row(3)
    assert ledger._rows("SELECT count(*) FROM turnkit_audit") == [(4,)]  # any reader sees it
    inserted.clear()
    for n in range(AUDIT_BATCH):
        row(n)
    assert len(inserted) == AUDIT_BATCH  # the last one sent them all
    ledger.close()
    with pytest.raises(sqlite3.ProgrammingError):
        row(0)


@pytest.fixture(params=["memory", "sql"])
def charged(request, ledger) -> Any:
    """A ``MemoryLedger`` (usage counted in a dict), then the test's SQL ledger."""
    from turnkit import MemoryLedger

    return MemoryLedger() if request.param == "memory" else ledger


def test_a_ledger_charges_rate_limits_within_the_limit_only(charged):
    """A charge that would pass the limit charges nothing, windows and callers count apart, and
    the same check holds across threads: in memory (no statement) as in SQL."""
    import concurrent.futures

    ledger = charged
    assert not ledger.charge("u", 1, 5, 4)  # more than the whole budget
    assert ledger.charge("u", 1, 3, 4)
    assert not ledger.charge("u", 1, 2, 4)  # 5 > 4: nothing charged
    assert ledger.charge("u", 1, 1, 4)
    assert (ledger.usage("u", 1), ledger.usage("u", 2), ledger.usage("v", 1)) == (4, 0, 0)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        won = list(pool.map(lambda _: ledger.charge("w", 1, 1, 100), range(400)))
    assert (won.count(True), ledger.usage("w", 1)) == (100, 100)


def test_a_charge_of_several_budgets_is_all_or_none(charged):
    """A key's and its user's budgets are charged together or not at all, also when many
    threads charge the same two at once: in memory, on SQLite and on PostgreSQL."""
    import concurrent.futures

    ledger = charged
    assert not ledger.charge_all(["k", "u"], 1, 5, 4)  # more than the whole budget
    assert ledger.charge_all(["k", "u"], 1, 3, 4)
    assert not ledger.charge_all(["k2", "u"], 1, 2, 4)  # u has 1 left: k2 is not charged either
    assert (ledger.usage("k", 1), ledger.usage("k2", 1), ledger.usage("u", 1)) == (3, 0, 3)
    assert ledger.charge_all(["k2", "u"], 1, 1, 4)  # exactly the room left
    assert (ledger.usage("k2", 1), ledger.usage("u", 1), ledger.usage("u", 2)) == (1, 4, 0)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        won = list(pool.map(lambda i: ledger.charge_all([f"w{i % 3}", "v"], 1, 1, 90), range(400)))
    spent = [ledger.usage(identity, 1) for identity in ("w0", "w1", "w2", "v")]
    assert (won.count(True), sum(spent[:3]), spent[3]) == (90, 90, 90)


def test_a_sqlite_charge_leaves_the_write_lock_before_it_returns(tmp_path, monkeypatch):
    """The charge's statement has committed when SQLite hands control back to Python: another
    writer finds the file free at that moment. (With ``RETURNING``, SQLite kept the write lock
    until the rows were read, across the wait for the GIL, while every other writer of the file
    slept in its busy handler: a 1.5x slower server at three workers, measured.)"""
    path = str(tmp_path / "ledger.sqlite")
    with probing(path, monkeypatch, ("INSERT INTO turnkit_rate_usage",)) as found:
        ledger = SqliteLedger(path)
        try:
            assert ledger.charge_all(["key:k", "user:u"], 1, 1, 2)
            assert ledger.charge_all(["key:k", "user:u"], 1, 1, 2)
            assert not ledger.charge_all(["key:k", "user:u"], 1, 1, 2)  # no room: none charged
        finally:
            ledger.close()
    assert found == ["free", "free", "free"]


def test_a_closed_ledger_in_memory_refuses_every_call():
    from turnkit import MemoryLedger

    ledger = MemoryLedger()
    ledger.close()
    for call in (
        lambda: ledger.charge("u", 1, 1, 4),
        lambda: ledger.usage("u", 1),
        ledger.settings,
        lambda: ledger.audit(at=0.0, caller="c", tool="t", status="ok", code=None, duration_ms=1.0),
    ):
        with pytest.raises(sqlite3.ProgrammingError):
            call()


def test_a_ledger_in_memory_drops_an_audit_batch_the_table_refuses_and_goes_on(
    caplog, expect_errors
):
    """A batch is inserted in one transaction: a row the table refuses fails the batch, which
    is dropped (logged), never half-inserted nor tried again forever."""
    expect_errors("2 audit rows could not be inserted and are lost")  # audit lost: an error
    from turnkit import MemoryLedger

    ledger = MemoryLedger()
    ledger.audit(at=1.0, caller="c", tool="demo.first", status="ok", code=None, duration_ms=1.0)
    ledger._append_audit(("bad-row", 2.0, None, "demo.bad", "ok", None, 1.0, None, None, None))
    with pytest.raises(sqlite3.IntegrityError):
        ledger.audit_rows()
    assert "2 audit rows could not be inserted" in caplog.text
    ledger.audit(at=3.0, caller="c", tool="demo.after", status="ok", code=None, duration_ms=1.0)
    assert [row["tool"] for row in ledger.audit_rows()] == ["demo.after"]
