"""At least once, with the documented duplicates: a ``turnkit notify run`` worker is SIGKILLed
while it sends to a receiver that is slow on a few requests; two workers started after it deliver
every event (no webhook-id missing), and only the rows the dead worker had claimed (``sending`` at
the kill) may arrive twice. On SQLite and on PostgreSQL, where the two new workers run at once:
no row is sent by both while its claim holds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _receiver import Receiver
from _shop import prices
from conftest import postgres_url
from turnkit import Caller, Executor, Registry, Settings, open_ledger
from turnkit.notify import add_target, new_secret

pytestmark = pytest.mark.slow  # subprocesses

TURNKIT = str(Path(sys.executable).with_name("turnkit"))
EVENTS = 200
LEASE, TIMEOUT, SLOW = 6.0, 4.0, 2.0
SLOW_REQUESTS = range(61, 65)  # the receiver sleeps on these: the worker is killed meanwhile


def worker(url: str) -> subprocess.Popen[str]:
    command = [TURNKIT, "notify", "run", "--db", url, "--lease-seconds", str(LEASE),
               "--timeout", str(TIMEOUT), "--public-url", "http://127.0.0.1:8080"]  # fmt: skip
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=os.environ | {"COLUMNS": "200"},
    )  # fmt: skip


def wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.02)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_killed_worker_loses_no_event_and_duplicates_only_what_it_had_claimed(
    backend, tmp_path, shop, rights
):
    url = str(tmp_path / "ledger.sqlite") if backend == "sqlite" else postgres_url()
    ledger = open_ledger(url)
    secret = new_secret()
    slow = lambda n: SLOW if n in SLOW_REQUESTS else 0.0  # noqa: E731
    with Receiver(secret, slow=slow) as receiver:
        add_target(ledger, "hook", "webhook", {"url": receiver.url, "secret": secret},
                   events=["held"], now=time.time())  # fmt: skip
        ledger.set_setting("api_session_write_modules", ["shop"])
        executor = Executor(Registry([shop]), ledger=ledger, permissions=rights,
                            settings=Settings(max_pending_holds=EVENTS + 1))  # fmt: skip
        alice = Caller.session("alice")
        for i in range(EVENTS):
            executor.execute(alice, "shop.set_prices", prices(f"TEA-{i:04d}"))
        ids = {d.id for d in ledger.deliveries()}
        assert len(ids) == EVENTS
        started = time.monotonic()

        first = worker(url)
        wait(lambda: receiver.requests >= SLOW_REQUESTS[-1], 60, "slow request")
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        claimed_at_kill = {d.id for d in ledger.deliveries(state="sending")}
        received_at_kill = sum(receiver.counts.values())

        second, third = worker(url), worker(url)
        try:
            receiver.wait_for(EVENTS, timeout=120)
            wait(lambda: len(ledger.deliveries(state="sent")) == EVENTS, 30, "all sent")
        finally:
            for process in (second, third):
                process.send_signal(signal.SIGINT)  # Ctrl-C: stops cleanly
            outputs = [process.communicate(timeout=30) for process in (second, third)]
        elapsed = time.monotonic() - started
    executor.close()
    ledger.close()

    for process, (out, err) in zip((second, third), outputs, strict=True):
        assert process.returncode == 0, err
        assert "Traceback" not in err
        assert "stopped" in out
    duplicated = {i for i, count in receiver.counts.items() if count > 1}
    figures = (
        f"{backend}: events {EVENTS}, delivered {len(receiver.counts)}, received"
        f" {sum(receiver.counts.values())} (duplicates {len(duplicated)}), sending at the kill"
        f" {len(claimed_at_kill)}, received before the kill {received_at_kill},"
        f" bad signatures {receiver.bad_signatures}, {elapsed:.1f} s"
    )
    print(figures)
    assert set(receiver.counts) == ids  # no event lost
    assert receiver.bad_signatures == 0
    assert len(claimed_at_kill) > 0  # the kill landed mid-send
    assert duplicated <= claimed_at_kill  # only what the dead worker had claimed came twice
    assert all(count <= 2 for count in receiver.counts.values())
