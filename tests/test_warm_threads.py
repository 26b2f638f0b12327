"""``WarmThreads``, ``turnkit serve``'s default pool: the thread that went idle last takes the
next call, at most ``max_workers`` threads run, work beyond them runs in its turn, and it keeps
``ThreadPoolExecutor``'s promises (results, errors, cancellation, shutdown) under asyncio and
uvloop alike."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import CancelledError, ThreadPoolExecutor

import pytest
import uvloop

from turnkit.server.warm_threads import WarmThreads, use_warm_threads  # internal: serve's pool


def _name() -> str:
    return threading.current_thread().name


def _burst(pool: WarmThreads, threads: int) -> set[str]:
    """Start ``threads`` threads: as many calls at once, each held until all have started."""
    barrier = threading.Barrier(threads)

    def held() -> str:
        barrier.wait(timeout=10)
        return _name()

    return {future.result(timeout=10) for future in [pool.submit(held) for _ in range(threads)]}


def test_one_call_after_another_stays_on_the_thread_that_finished_last() -> None:
    pool = WarmThreads(4)
    try:
        assert len(_burst(pool, 4)) == 4  # a burst started every thread
        last = pool.submit(_name).result(timeout=10)
        assert {pool.submit(_name).result(timeout=10) for _ in range(20)} == {last}
    finally:
        pool.shutdown()


def test_it_is_a_thread_pool_executor_asyncio_accepts() -> None:
    assert isinstance(WarmThreads(1), ThreadPoolExecutor)
    with pytest.raises(ValueError, match="max_workers"):
        WarmThreads(0)


def test_work_beyond_its_threads_waits_and_runs_first_come_first_served() -> None:
    pool = WarmThreads(2)
    gate = threading.Event()
    ran: list[int] = []
    try:
        busy = [pool.submit(gate.wait, 10) for _ in range(2)]
        queued = [pool.submit(ran.append, n) for n in range(5)]
        time.sleep(0.05)
        assert ran == []  # both threads busy: none of the queued work has run
        gate.set()
        for future in [*busy, *queued]:
            future.result(timeout=10)
        assert ran == [0, 1, 2, 3, 4]
        assert len([t for t in threading.enumerate() if t.name.startswith("turnkit-worker")]) >= 2
    finally:
        pool.shutdown()
    assert len(pool._started) == 2


class _Stop(BaseException):
    """Not an ``Exception``: still the future's, as in ``ThreadPoolExecutor``."""


def test_results_and_errors_reach_the_future() -> None:
    pool = WarmThreads(2)
    try:
        assert pool.submit(pow, 2, 10).result(timeout=10) == 1024
        with pytest.raises(ZeroDivisionError):
            pool.submit(lambda: 1 / 0).result(timeout=10)
        with pytest.raises(_Stop):
            pool.submit(_raise_stop).result(timeout=10)
        assert pool.submit(_name).result(timeout=10).startswith("turnkit-worker")  # still serves
    finally:
        pool.shutdown()


def _raise_stop() -> None:
    raise _Stop


def test_a_future_cancelled_before_its_turn_never_runs() -> None:
    pool = WarmThreads(1)
    gate = threading.Event()
    ran: list[str] = []
    busy = pool.submit(gate.wait, 10)
    waiting = pool.submit(ran.append, "ran")
    assert waiting.cancel()
    gate.set()
    busy.result(timeout=10)
    pool.shutdown()
    assert ran == []
    with pytest.raises(CancelledError):
        waiting.result()


def test_shutdown_finishes_the_queued_work_then_refuses_more() -> None:
    pool = WarmThreads(1)
    gate = threading.Event()
    ran: list[int] = []
    pool.submit(gate.wait, 10)
    queued = pool.submit(ran.append, 1)
    threading.Timer(0.05, gate.set).start()
    pool.shutdown(wait=True)
    assert queued.done()
    assert ran == [1]
    assert not any(thread.is_alive() for thread in pool._started)
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(_name)


def test_shutdown_with_cancel_futures_drops_the_queued_work() -> None:
    pool = WarmThreads(1)
    gate = threading.Event()
    busy = pool.submit(gate.wait, 10)
    queued = pool.submit(_name)
    threading.Timer(0.05, gate.set).start()
    pool.shutdown(wait=True, cancel_futures=True)
    assert busy.result() is True
    assert queued.cancelled()


def test_shutdown_from_one_of_its_own_threads_does_not_wait_for_itself() -> None:
    pool = WarmThreads(1)
    pool.submit(pool.shutdown).result(timeout=10)  # would deadlock joining itself
    with pytest.raises(RuntimeError):
        pool.submit(_name)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_the_running_loops_default_pool(loop: str) -> None:
    async def main() -> tuple[WarmThreads, list[str]]:
        pool = use_warm_threads(3)
        names = [await asyncio.to_thread(_name) for _ in range(5)]
        names += [await asyncio.get_running_loop().run_in_executor(None, _name)]
        return pool, names

    run = uvloop.run if loop == "uvloop" else asyncio.run
    pool, names = run(main())
    assert len(set(names)) == 1
    assert names[0].startswith("turnkit-worker")
    if loop == "asyncio":  # asyncio.run shuts the loop's default pool down as it closes it
        assert not any(thread.is_alive() for thread in pool._started)
