"""``turnkit serve`` delivers notifications from each of its workers: a write held before the
server started is told to a real receiver once, with a link to the server's own inbox."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from _receiver import Receiver
from _serving import free_port, wait_healthy
from _shop import prices
from test_cli import TURNKIT, env
from turnkit import Caller, Executor, Registry, open_ledger
from turnkit.notify import add_target, new_secret

pytestmark = pytest.mark.slow  # a server process


@pytest.mark.parametrize("workers", ["1", "2"])
def test_the_server_delivers_what_was_held(tmp_path, shop, rights, workers):
    db = str(tmp_path / "ledger.sqlite")
    secret = new_secret()
    with Receiver(secret) as receiver:
        ledger = open_ledger(db)
        add_target(ledger, "hook", "webhook", {"url": receiver.url, "secret": secret},
                   events=["held"], now=time.time())  # fmt: skip
        ledger.set_setting("api_session_write_modules", ["shop"])
        executor = Executor(Registry([shop]), ledger=ledger, permissions=rights)
        held = executor.execute(Caller.session("alice"), "shop.set_prices", prices("TEA-0001"))
        executor.close()
        ledger.close()
        port = free_port()
        log = tmp_path / "serve.log"
        with log.open("w") as out:
            process = subprocess.Popen(
                [TURNKIT, "serve", "--demo", "--db", db, "--catalogue",
                 str(tmp_path / "catalogue.sqlite"), "--port", str(port), "--workers", workers],
                cwd=tmp_path, env=env(), stdout=out, stderr=subprocess.STDOUT, text=True,
                start_new_session=True,
            )  # fmt: skip
        try:
            wait_healthy(f"http://127.0.0.1:{port}", process, log)
            receiver.wait_for(1, timeout=30)
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
    (body,) = receiver.bodies
    cid = held["confirmation_id"]
    assert body["data"]["link"] == f"http://127.0.0.1:{port}/ui/confirmations/{cid}"
    assert receiver.counts == {f"{cid}:held:{_target_id(db)}": 1}


def _target_id(db: str) -> str:
    ledger = open_ledger(db)
    try:
        return ledger.notify_target(name="hook").id
    finally:
        ledger.close()
