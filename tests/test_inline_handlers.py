"""A sync handler of an async call on a ledger that blocks runs in the worker thread of its
call's ledger work, its timeout kept by a watchdog (``turnkit.executor.inline``): one thread hop
a call. Everything the handler pool promised still holds, checked against
``inline_handlers=False`` where it matters: a handler past its timeout answers ``timeout``
within its time (and the watchdog's look), its late outcome is dropped, a cancelled run's
overrun is still audited, and while an overrun handler still holds a thread, calls hand their
handlers to the pool again.

Reaches ``turnkit.executor.inline`` (the watchdog's look, whether calls run inline now): no
public name."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from turnkit import Caller, Executor, Registry, Settings
from turnkit.executor import inline  # internal: the watchdog's POLL and may_inline

TIMEOUT = 0.3


class _Lab:
    """Module ``lab``: ``lab.run_work`` sleeps ``input["sleep"]`` seconds and says in which thread
    it ran;"""

    key = "lab"

    def __init__(self) -> None:
        self.threads: list[str] = []
        self.release = threading.Event()

    def work(self, input: dict, ctx: Any) -> dict:
        self.threads.append(threading.current_thread().name)
        if input.get("hang"):
            self.release.wait(10)
        return {"thread": threading.current_thread().name}

    def api_tools(self) -> list[dict[str, Any]]:
        return [{
            "name": "lab.run_work", "audience": "public", "annotations": {"read_only": True},
            "input_schema": {"type": "object", "properties": {"hang": {"type": "boolean"}}},
            "handler": self.work,
        }]  # fmt: skip


@pytest.fixture
def lab() -> _Lab:
    return _Lab()


def _executor(ledger: Any, lab: _Lab, inline_handlers: bool = True) -> Executor:
    settings = Settings(handler_timeout=TIMEOUT)
    return Executor(Registry([lab]), ledger=ledger, settings=settings,
                    inline_handlers=inline_handlers)  # fmt: skip


async def _settled(lab: _Lab) -> None:
    """Let a hung handler return, and wait until calls run inline again."""
    lab.release.set()
    for _ in range(200):
        if inline.may_inline():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the overrun handler's thread was never given back")


async def test_a_sync_handler_runs_in_the_thread_of_its_calls_ledger_work(ledger, lab) -> None:
    statements: list[str] = []
    run = ledger._run

    def recorded(*args: Any) -> Any:
        statements.append(threading.current_thread().name)
        return run(*args)

    ledger._run = recorded  # the charge and the audit row
    inline_executor, pooled = _executor(ledger, lab), _executor(ledger, lab, False)
    try:
        answer = await inline_executor.aexecute(Caller.public(), "lab.run_work", {})
        assert answer["status"] == "ok"
        assert answer["result"]["thread"] == statements[-1]  # the audit row's thread
        assert not answer["result"]["thread"].startswith("turnkit-handler")
        pooled_answer = await pooled.aexecute(Caller.public(), "lab.run_work", {})
        assert pooled_answer["result"]["thread"].startswith("turnkit-handler")
    finally:
        inline_executor.close()
        pooled.close()


@pytest.mark.parametrize("inline_handlers", [True, False], ids=["inline", "pool"])
async def test_a_handler_past_its_timeout_answers_timeout_in_time(
    ledger, lab, inline_handlers, expect_errors
) -> None:
    expect_errors("handler ran longer than")  # logged, by design
    executor = _executor(ledger, lab, inline_handlers)
    try:
        started = time.monotonic()
        answer = await executor.aexecute(Caller.public(), "lab.run_work", {"hang": True})
        took = time.monotonic() - started
        assert answer["status"] == "error"
        assert answer["error"]["code"] == "timeout"
        assert TIMEOUT <= took < TIMEOUT + inline.POLL + 0.5
        rows = ledger.audit_rows()
        assert [(r["status"], r["code"]) for r in rows] == [("error", "timeout")]
        await _settled(lab)
        await asyncio.sleep(0.1)  # the late outcome had its chance to be recorded: it is not
        assert len(ledger.audit_rows()) == 1
    finally:
        lab.release.set()
        executor.close()


async def test_while_an_overrun_handler_holds_a_thread_handlers_go_to_the_pool(
    ledger, lab, expect_errors
) -> None:
    expect_errors("handler ran longer than")
    executor = _executor(ledger, lab)
    try:
        hung = await executor.aexecute(Caller.public(), "lab.run_work", {"hang": True})
        assert hung["error"]["code"] == "timeout"
        assert not inline.may_inline()  # the hung handler still runs
        meanwhile = await executor.aexecute(Caller.public(), "lab.run_work", {})
        assert meanwhile["result"]["thread"].startswith("turnkit-handler")
        await _settled(lab)
        after = await executor.aexecute(Caller.public(), "lab.run_work", {})
        assert not after["result"]["thread"].startswith("turnkit-handler")
    finally:
        lab.release.set()
        executor.close()


async def test_a_cancelled_runs_overrun_handler_is_still_audited_as_a_timeout(
    ledger, lab, expect_errors
) -> None:
    expect_errors("handler ran longer than")
    executor = _executor(ledger, lab)
    try:
        task = asyncio.create_task(
            executor.aexecute(Caller.public(), "lab.run_work", {"hang": True})
        )
        for _ in range(100):  # until the handler runs
            if lab.threads:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(100):  # the watchdog takes it over at its timeout
            if ledger.audit_rows():
                break
            await asyncio.sleep(0.02)
        assert [(r["status"], r["code"]) for r in ledger.audit_rows()] == [("error", "timeout")]
    finally:
        await _settled(lab)
        executor.close()
