"""``adrive``: the steps advance in a worker thread and come back to the loop only when they must.

Ledger calls, the application's code and a sync permission provider run in the worker thread,
together; a handler (under its timeout), a pause and an async provider go to the event loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from _shop import prices
from turnkit import Caller, Executor, Registry
from turnkit.executor.effects import Cancelled  # internal: a closed pool's error


class _Module:
    key = "lab"

    def api_tools(self) -> list[dict[str, Any]]:
        return [
            {
                "name": "lab.get_thing",
                "scope": "lab.things:read",
                "permission": "lab.view",
                "annotations": {"read_only": True},
                "handler": lambda input, ctx: {"thing": 1},
            }
        ]


def _executor(ledger, permissions) -> Executor:
    return Executor(Registry([_Module()]), ledger=ledger, permissions=permissions)


def _stall(monkeypatch: Any, ledger: Any, method: str) -> tuple[threading.Event, threading.Event]:
    """``(entered, go_on)``: ``ledger.<method>`` sets ``entered``, then waits for ``go_on``."""
    entered, go_on = threading.Event(), threading.Event()
    original = getattr(ledger, method)

    def stalled(*args: Any) -> Any:
        entered.set()
        go_on.wait(5)
        return original(*args)

    monkeypatch.setattr(ledger, method, stalled)
    return entered, go_on


def _releases(monkeypatch: Any, ledger: Any) -> threading.Event:
    """Set once ``ledger`` has released an idempotency key."""
    released = threading.Event()
    release = ledger.release_idempotency
    monkeypatch.setattr(ledger, "release_idempotency", lambda *a: (release(*a), released.set()))
    return released


async def test_a_sync_provider_runs_off_the_event_loop(ledger):
    """(How many worker-thread hops a read call makes is a figure of bench/profile_turn.py.)"""
    seen_in: list[int] = []

    def provider(caller: Caller) -> set[str]:
        seen_in.append(threading.get_ident())
        return {"lab.view"}

    executor = _executor(ledger, provider)
    answer = await executor.aexecute(Caller.session("u_1"), "lab.get_thing", {})
    executor.close()
    assert answer["status"] == "ok"
    assert seen_in
    assert seen_in[0] != threading.get_ident()  # the sync provider ran in the worker thread


async def test_an_async_provider_is_awaited_on_the_loop(ledger):
    loops: list[asyncio.AbstractEventLoop] = []

    async def provider(caller: Caller) -> set[str]:
        loops.append(asyncio.get_running_loop())
        return {"lab.view"}

    executor = _executor(ledger, provider)
    answer = await executor.aexecute(Caller.session("u_1"), "lab.get_thing", {})
    executor.close()
    assert answer["status"] == "ok"
    assert loops == [asyncio.get_running_loop()]


async def test_a_sync_provider_that_returns_an_awaitable_is_awaited_on_the_loop(ledger):
    loops: list[asyncio.AbstractEventLoop] = []

    async def lookup() -> set[str]:
        loops.append(asyncio.get_running_loop())
        return {"lab.view"}

    executor = _executor(ledger, lambda caller: lookup())
    answer = await executor.aexecute(Caller.session("u_1"), "lab.get_thing", {})
    executor.close()
    assert answer["status"] == "ok"
    assert loops == [asyncio.get_running_loop()]


async def test_a_failing_provider_is_handed_back_to_the_steps_as_on_the_sync_path(ledger):
    def provider(caller: Caller) -> set[str]:
        raise RuntimeError("directory is down")

    executor = _executor(ledger, provider)
    with pytest.raises(RuntimeError, match="directory is down"):
        await executor.aexecute(Caller.session("u_1"), "lab.get_thing", {})
    with pytest.raises(RuntimeError, match="directory is down"):
        executor.execute(Caller.session("u_1"), "lab.get_thing", {})
    executor.close()


async def test_a_call_cancelled_in_a_worker_thread_stops_there_and_releases_its_key(
    ledger, shop, rights, monkeypatch
):
    """Cancelled while its key is reserved: no confirmation, the key released, a retry runs."""
    ledger.set_setting("api_session_write_modules", ["shop"])
    executor = Executor(Registry([shop]), ledger=ledger, permissions=rights)
    in_read, go_on = _stall(monkeypatch, ledger, "reserve_idempotency")
    alice = Caller.session("alice")
    task = asyncio.create_task(
        executor.aexecute(alice, "shop.set_prices", prices("TEA-0001"), {"idempotency_key": "k"})
    )
    await asyncio.to_thread(in_read.wait, 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    released = _releases(monkeypatch, ledger)
    go_on.set()  # the worker thread reserves the key, then stops and cleans up on its own
    assert await asyncio.to_thread(released.wait, 5)
    assert executor.pending() == []
    assert ledger.get_idempotency(alice.identity, "shop.set_prices", "k") is None
    again = await executor.aexecute(
        alice, "shop.set_prices", prices("TEA-0001"), {"idempotency_key": "k"}
    )
    assert again["status"] == "confirmation_required"
    executor.close()


async def test_a_call_whose_code_is_all_sync_makes_one_worker_thread_hop(ledger, monkeypatch):
    """Provider, ledger work and the sync handler (run in the same worker thread, its timeout
    kept by the watchdog) in one hop: a hop costs more CPU than a plain read's ledger work."""
    hops: list[str] = []
    submit = ThreadPoolExecutor.submit

    def counted(pool: ThreadPoolExecutor, function: Any, /, *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(function, "__name__", "?"))
        return submit(pool, function, *args, **kwargs)

    monkeypatch.setattr(ThreadPoolExecutor, "submit", counted)
    executor = _executor(ledger, lambda caller: {"lab.view"})
    answer = await executor.aexecute(Caller.session("u_1"), "lab.get_thing", {})
    executor.close()
    assert answer["status"] == "ok"
    assert len(hops) == 1
    assert len(ledger.audit_rows()) == 1


@pytest.fixture(params=["given", "memory"])
def any_ledger(request, ledger) -> Any:
    """The test's ledger (SQLite file, PostgreSQL), or a ``MemoryLedger``, whose statements run
    on the event loop."""
    from turnkit import MemoryLedger

    return ledger if request.param == "given" else MemoryLedger()


async def test_a_run_cancelled_while_its_sync_handler_runs_still_records_the_outcome(any_ledger):
    """The handler cannot be stopped: once it has run, its audit row and idempotency record are
    written, so a retry with the same key replays instead of running it a second time."""
    ledger = any_ledger
    started, go_on = threading.Event(), threading.Event()
    runs: list[int] = []

    def slow(input: dict, ctx: Any) -> dict:
        runs.append(1)
        started.set()
        go_on.wait(5)
        return {"thing": len(runs)}

    class Slow(_Module):
        def api_tools(self) -> list[dict[str, Any]]:
            return [{**super().api_tools()[0], "handler": slow}]

    executor = Executor(Registry([Slow()]), ledger=ledger, permissions=lambda c: {"lab.view"})
    alice = Caller.session("alice")
    control = {"idempotency_key": "k"}
    task = asyncio.create_task(executor.aexecute(alice, "lab.get_thing", {}, control))
    assert await asyncio.to_thread(started.wait, 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    go_on.set()
    for _ in range(100):  # the worker thread records the outcome on its own
        if ledger.audit_rows():
            break
        await asyncio.sleep(0.05)
    assert [row["status"] for row in ledger.audit_rows()] == ["ok"]
    again = await executor.aexecute(alice, "lab.get_thing", {}, control)
    executor.close()
    assert (again["result"], again.get("replayed")) == ({"thing": 1}, True)
    assert runs == [1]


async def test_an_executor_closed_while_a_cancelled_calls_handler_runs_leaves_its_ledger(caplog):
    """Once ``close`` returns, the ledger's owner may close it: the handler, ending afterwards,
    has its outcome not recorded (a warning says which call). It used to be recorded then,
    on a ledger that may be closed by then (an ``Agent`` closing its own executor's memory
    ledger got ``ProgrammingError: Cannot operate on a closed database`` logged)."""
    from turnkit import MemoryLedger

    ledger = MemoryLedger()  # the steps stay on the loop: a thread records the outcome
    started, go_on = threading.Event(), threading.Event()

    def slow(input: dict, ctx: Any) -> dict:
        started.set()
        go_on.wait(5)
        return {"thing": 1}

    class Slow(_Module):
        def api_tools(self) -> list[dict[str, Any]]:
            return [{**super().api_tools()[0], "handler": slow}]

    executor = Executor(Registry([Slow()]), ledger=ledger, permissions=lambda c: {"lab.view"})
    alice = Caller.session("alice")
    task = asyncio.create_task(
        executor.aexecute(alice, "lab.get_thing", {}, {"idempotency_key": "k"})
    )
    assert await asyncio.to_thread(started.wait, 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    executor.close()
    go_on.set()
    for thread in [t for t in threading.enumerate() if t.name == "turnkit-record"]:
        await asyncio.to_thread(thread.join, 5)
        assert not thread.is_alive()
    record = ledger.get_idempotency(alice.identity, "lab.get_thing", "k")
    assert record is not None
    assert record.state == "running"  # a repeat waits, then gets outcome_unknown
    assert ledger.audit_rows() == []
    assert "'lab.get_thing' (call " in caplog.text
    assert "its outcome is not recorded" in caplog.text
    ledger.close()


class _Queued:
    """An executor with one handler thread, held busy by a first call until ``release()``; a
    second call made with ``queue`` waits in the pool's queue behind it."""

    def __init__(self, ledger: Any) -> None:
        self.busy, self.go_on = threading.Event(), threading.Event()
        self.runs: list[str] = []
        handler, schema = (
            self._handler,
            {"type": "object", "properties": {"who": {"type": "string"}}},
        )

        class Two(_Module):
            def api_tools(self) -> list[dict[str, Any]]:
                return [{**super().api_tools()[0], "handler": handler, "input_schema": schema}]

        self.executor = Executor(
            Registry([Two()]),
            ledger=ledger,
            permissions=lambda c: {"lab.view"},
            handler_threads=1,
            inline_handlers=False,  # handlers wait in the pool (after an overrun, they do too)
        )
        self.alice = Caller.session("alice")
        self.first: asyncio.Task[Any] | None = None

    def _handler(self, input: dict, ctx: Any) -> dict:
        self.runs.append(input.get("who", "?"))
        if input.get("who") == "first":
            self.busy.set()
            self.go_on.wait(5)
        return {"thing": input.get("who")}

    async def queue(self, input: dict, control: dict) -> asyncio.Task[Any]:
        """Start the first call, then the second; the second's task once its handler waits."""
        call = self.executor.aexecute
        self.first = asyncio.create_task(call(self.alice, "lab.get_thing", {"who": "first"}))
        assert await asyncio.to_thread(self.busy.wait, 5)
        second = asyncio.create_task(call(self.alice, "lab.get_thing", input, control))
        pool = self.executor._env.handler_pool
        for _ in range(500):  # until the second's handler waits for the pool's one thread
            if pool._work_queue.qsize():
                break
            await asyncio.sleep(0.01)
        assert pool._work_queue.qsize() == 1
        return second


async def test_a_run_cancelled_while_its_sync_handler_waits_in_the_pool_still_runs_it(any_ledger):
    """The pool is busy: the call's handler waits its turn. The run awaiting it is cancelled
    meanwhile, but the handler still runs when the pool frees (as a handler started is never
    stopped, one handed over is never kept from starting), and its outcome is recorded."""
    ledger, queued, control = any_ledger, _Queued(any_ledger), {"idempotency_key": "k"}
    second = await queued.queue({"who": "second"}, control)
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    queued.go_on.set()
    assert queued.first is not None
    assert (await queued.first)["result"] == {"thing": "first"}
    for _ in range(100):  # the outcome is recorded on its own
        if len(ledger.audit_rows()) == 2:
            break
        await asyncio.sleep(0.05)
    assert sorted(row["status"] for row in ledger.audit_rows()) == ["ok", "ok"]
    again = await queued.executor.aexecute(queued.alice, "lab.get_thing", {"who": "second"},
                                           control)  # fmt: skip
    queued.executor.close()
    assert (again["result"], again.get("replayed")) == ({"thing": "second"}, True)
    assert queued.runs == ["first", "second"]


async def test_a_call_whose_handler_cannot_be_handed_over_releases_its_key(any_ledger):
    """The executor's handler pool is shut down: the call fails as on the sync path, saying its
    handler did not run, and its idempotency key is released (a retry may run it), never left
    'running'."""
    ledger = any_ledger
    executor = Executor(Registry([_Module()]), ledger=ledger, permissions=lambda c: {"lab.view"})
    executor._env.handler_pool.shutdown()
    alice = Caller.session("alice")
    with pytest.raises(Cancelled, match="closed before the handler ran"):
        await executor.aexecute(alice, "lab.get_thing", {}, {"idempotency_key": "k"})
    with pytest.raises(Cancelled, match="closed before the handler ran"):
        executor.execute(alice, "lab.get_thing", {}, {"idempotency_key": "k"})
    assert ledger.get_idempotency(alice.identity, "lab.get_thing", "k") is None
    executor.close()


@pytest.mark.parametrize("how", ["timeout", "cancel"])
async def test_a_handler_failing_after_its_run_stopped_waiting_is_reported_once(
    any_ledger, how, expect_errors
):
    """A sync handler that fails after its run timed out (or was cancelled) is recorded by the
    steps; asyncio does not report it again as an exception nobody retrieved."""
    expect_errors("'lab.get_thing': handler ran longer than 0.1 s")  # the timeout it reports once
    import gc

    from turnkit import Settings

    reported: list[str] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda loop, context: reported.append(context["message"]))
    done = threading.Event()

    def late(input: dict, ctx: Any) -> dict:
        try:
            time.sleep(0.3)
            raise RuntimeError("the upstream call failed late")
        finally:
            done.set()

    class Late(_Module):
        def api_tools(self) -> list[dict[str, Any]]:
            return [{**super().api_tools()[0], "handler": late}]

    executor = Executor(Registry([Late()]), ledger=any_ledger, permissions=lambda c: {"lab.view"},
                        settings=Settings(handler_timeout=0.1))  # fmt: skip
    call = executor.aexecute(Caller.session("alice"), "lab.get_thing", {})
    if how == "timeout":
        assert (await call)["error"]["code"] == "timeout"
    else:
        task = asyncio.create_task(call)
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert await asyncio.to_thread(done.wait, 5)
    for _ in range(3):
        await asyncio.sleep(0.05)
        gc.collect()
    executor.close()
    assert reported == []


async def test_a_handler_the_closing_executor_drops_unrun_releases_its_key(any_ledger):
    """The run was cancelled while its handler waited in the pool, then the executor closed
    (dropping what was queued): the handler never ran, so its key is released and no failure is
    recorded for it."""
    ledger, queued = any_ledger, _Queued(any_ledger)
    second = await queued.queue({}, {"idempotency_key": "k"})
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    queued.executor.close()  # drops the queued handler
    queued.go_on.set()
    assert queued.first is not None
    await queued.first
    identity = queued.alice.identity
    for _ in range(100):
        if ledger.get_idempotency(identity, "lab.get_thing", "k") is None:
            break
        await asyncio.sleep(0.05)
    assert ledger.get_idempotency(identity, "lab.get_thing", "k") is None
    assert [row["status"] for row in ledger.audit_rows()] == ["ok"]  # the first's alone
    assert queued.runs == ["first"]


async def test_a_run_whose_queued_handler_the_closing_executor_drops_says_so(any_ledger):
    """The run still awaits its handler, queued in the pool, when the executor closes: the call
    fails as on the sync path (the handler never ran, said so), its key released, nothing
    audited for it; never a bare ``CancelledError`` for a run nobody cancelled."""
    ledger, queued = any_ledger, _Queued(any_ledger)
    second = await queued.queue({}, {"idempotency_key": "k"})
    queued.executor.close()  # drops the queued handler
    with pytest.raises(Cancelled, match="closed before the handler ran"):
        await second
    queued.go_on.set()
    assert queued.first is not None
    await queued.first
    assert ledger.get_idempotency(queued.alice.identity, "lab.get_thing", "k") is None
    assert [row["status"] for row in ledger.audit_rows()] == ["ok"]  # the first's alone
    assert queued.runs == ["first"]


async def test_an_approved_write_whose_handler_the_closing_executor_drops_is_pending_again(
    any_ledger, shop, rights
):
    """The approval's write waits in the pool when the executor closes: it never ran, so the
    confirmation goes back to pending (a person may approve it again), never stuck running."""
    ledger = any_ledger
    ledger.set_setting("api_session_write_modules", ["shop"])
    executor = Executor(Registry([shop]), ledger=ledger, permissions=rights, handler_threads=1,
                        inline_handlers=False)  # fmt: skip
    alice = Caller.session("alice")
    held = await executor.aexecute(alice, "shop.set_prices", prices("TEA-0001"))
    assert held["status"] == "confirmation_required"
    busy, go_on = threading.Event(), threading.Event()
    pool = executor._env.handler_pool
    pool.submit(lambda: (busy.set(), go_on.wait(5)))  # the pool's one thread, kept busy
    assert await asyncio.to_thread(busy.wait, 5)
    approval = asyncio.create_task(executor.aconfirm(held["confirmation_id"], alice, "approve"))
    for _ in range(500):  # until the write's handler waits for the pool's one thread
        if pool._work_queue.qsize():
            break
        await asyncio.sleep(0.01)
    assert pool._work_queue.qsize() == 1
    try:
        executor.close()  # drops the queued handler
        with pytest.raises(Cancelled, match="closed before the handler ran"):
            await approval
    finally:
        go_on.set()
    confirmation = ledger.get_confirmation(held["confirmation_id"])
    assert confirmation is not None
    assert confirmation.status == "pending"
    assert shop.writes() == []


async def test_a_run_cancelled_just_before_its_handler_releases_the_key(ledger, monkeypatch):
    """Cancelled while the worker thread charges the call (the last ledger work before the
    handler): the handler is never handed over, so the key is released, not kept for a write
    that cannot have run."""
    from turnkit import Settings

    runs: list[int] = []

    class Counted(_Module):
        def api_tools(self) -> list[dict[str, Any]]:
            return [{**super().api_tools()[0], "handler": lambda i, c: runs.append(1) or {}}]

    executor = Executor(Registry([Counted()]), ledger=ledger, permissions=lambda c: {"lab.view"},
                        settings=Settings(rate_limit_units=100))  # fmt: skip
    in_charge, go_on = _stall(monkeypatch, ledger, "charge")
    released = _releases(monkeypatch, ledger)
    alice = Caller.session("alice")
    task = asyncio.create_task(
        executor.aexecute(alice, "lab.get_thing", {}, {"idempotency_key": "k"})
    )
    try:
        assert await asyncio.to_thread(in_charge.wait, 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        go_on.set()
    assert await asyncio.to_thread(released.wait, 5)
    assert ledger.get_idempotency(alice.identity, "lab.get_thing", "k") is None
    assert runs == []
    executor.close()


@pytest.mark.parametrize("slow", [False, True], ids=["answered", "timed out"])
async def test_a_sync_handler_called_from_the_loop_leaves_no_cycle_for_the_collector(
    slow, expect_errors
):
    """On a ledger that does not block, a sync handler's call is handed to the handler pool from
    the loop. It leaves nothing only the garbage collector can free (with hundreds of turns
    alive, such leftovers made full collections longer and more frequent), whether the handler
    answered in time or after its timeout."""
    import gc
    from concurrent.futures import Future

    from turnkit import MemoryLedger, Settings

    if slow:
        expect_errors("'lab.get_thing': handler ran longer than 0.05 s")
    finished = threading.Event()

    def handler(input: dict, ctx: Any) -> dict:
        if slow:
            time.sleep(0.2)
        finished.set()
        return {"thing": 1}

    class Module(_Module):
        def api_tools(self) -> list[dict[str, Any]]:
            return [{**super().api_tools()[0], "handler": handler}]

    executor = Executor(Registry([Module()]), ledger=MemoryLedger(),
                        permissions=lambda c: {"lab.view"},
                        settings=Settings(handler_timeout=0.05 if slow else 5))  # fmt: skip
    call = lambda: executor.aexecute(Caller.session("alice"), "lab.get_thing", {})  # noqa: E731
    await call()  # the first call's one-off objects (the pool's thread) are not counted
    assert await asyncio.to_thread(finished.wait, 5)  # its handler is done, however late
    finished.clear()
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        answer = await call()
        assert await asyncio.to_thread(finished.wait, 5)
        await asyncio.sleep(0.05)  # the late handler's callback has run
        gc.collect()
        left = [type(o).__qualname__ for o in gc.garbage if isinstance(o, Future | asyncio.Future)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        executor.close()
    assert ("error" in answer) is slow
    assert left == []
