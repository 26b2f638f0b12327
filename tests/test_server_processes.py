"""Several ``turnkit serve`` processes on one PostgreSQL ledger (docs/architecture.md §9:
idempotency keys and confirmations are decided in the database, never in a process's memory).

Real parts only: ``turnkit serve`` OS processes (two with one worker, one with ``--workers 3``),
one fresh PostgreSQL schema, real HTTP with httpx, and the handlers of ``_slow_shop``, which count
their runs in a file shared by every process and block on a gate the test opens. The handler
timeout is set in the ledger to ``TIMEOUT`` s, so a call waiting for another's outcome gives up
after ``TIMEOUT + WAIT_GRACE`` s and a dead process's call is stale after as long.

What the code guarantees, and what the tests assert (and only that):
- an ``Idempotency-Key`` is reserved by one atomic insert: one request runs the handler; a
  concurrent one waits for the stored answer and replays it (200, ``Idempotent-Replayed``), or
  answers 409 ``in_progress`` when the first has not finished within ``TIMEOUT + WAIT_GRACE``.
  (Observed every time: the replay.)
- approving is one atomic ``pending -> running`` update: one request runs the write; the others
  answer 200 with the same confirmation (they read it pending, lost the update, then waited for
  the outcome) or 409 ``already_decided`` carrying the same outcome.
- a process SIGKILLed inside a handler leaves its reservation ``running``: a retry elsewhere waits
  and answers 409 ``in_progress``, and once the call is stale (older than ``TIMEOUT +
  WAIT_GRACE``) 500 ``outcome_unknown``, stored for every later retry. An approved write killed
  so is settled ``outcome_unknown``. Nothing runs a second time.

Two tests pin bugs found here: a replayed error answer now says it was replayed, and a repeat
waits for a call whose slow checks delayed its handler (the reservation is counted from the
handler's start).

Reaches ``turnkit.executor.pipeline`` for ``WAIT_GRACE`` (how long a call waits past the handler
timeout) and ``turnkit.executor.confirmations`` for ``DECIDE_SCOPE``: no public name holds them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from _serving import free_port, wait_healthy
from _slow_shop import FOLDER, open_gate, runs
from conftest import postgres_url
from test_cli import TURNKIT, env
from turnkit import open_ledger
from turnkit.executor.confirmations import DECIDE_SCOPE
from turnkit.executor.pipeline import WAIT_GRACE

pytestmark = pytest.mark.slow  # end to end: skip locally with -m 'not slow'

TESTS = Path(__file__).resolve().parent
TIMEOUT = 2.0
"""The handler timeout set in the ledger for every process (seconds)."""
WAITED = TIMEOUT + WAIT_GRACE
"""How long a call waits for another's outcome, and when a running call counts as stale."""
RETRY_WINDOW = 0.8
"""How long a retry that must wait for a running call is watched not to answer: well within
its own wait (``WAITED``), and short enough that the call it waits for, held at its gate, is
let go before its handler's timeout (``TIMEOUT``)."""


@dataclass
class Server:
    """One ``turnkit serve`` process group listening at ``url``."""

    url: str
    process: subprocess.Popen[str]
    log: Path

    def kill(self) -> None:
        """SIGKILL the whole group (the uvicorn supervisor and its workers), at once."""
        with contextlib.suppress(ProcessLookupError):  # the group is gone already
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)


class Servers:
    """Starts ``turnkit serve`` processes on one ledger and kills every one it started."""

    def __init__(self, db: str, folder: Path) -> None:
        self.db, self.folder, self.started = db, folder, list[Server]()

    def start(self, *workers: int) -> list[Server]:
        """One server per item of ``workers`` (its worker count), started together."""
        variables = {**env(), "PYTHONPATH": str(TESTS), FOLDER: str(self.folder)}
        begun = []
        for count in workers:
            port = free_port()
            log = self.folder / f"serve-{port}.log"
            command = [TURNKIT, "serve", "--module", "_slow_shop:SlowShop", "--permissions",
                       "_slow_shop:permissions", "--db", self.db, "--port", str(port),
                       "--workers", str(count)]  # fmt: skip
            with log.open("w") as out:
                process = subprocess.Popen(command, cwd=self.folder, env=variables, stdout=out,
                                           stderr=subprocess.STDOUT, text=True,
                                           start_new_session=True)  # fmt: skip
            server = Server(f"http://127.0.0.1:{port}", process, log)
            self.started.append(server)
            begun.append(server)
        for server in begun:
            wait_healthy(server.url, server.process, server.log)
        return begun

    def close(self) -> None:
        for server in self.started:
            server.kill()


@dataclass
class Cluster:
    """The shared ledger, a writer key's secret, and three servers on it."""

    db: str
    folder: Path
    secret: str
    identity: str
    """The key's caller identity (how the ledger files its idempotency keys)."""
    servers: dict[str, Server]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    """``a`` and ``b`` (one worker each) and ``c`` (``--workers 3``) on one fresh PostgreSQL
    schema, with a key that may write and the handler timeout set to ``TIMEOUT``."""
    db = postgres_url()
    folder = tmp_path_factory.mktemp("slow-shop")
    ledger = open_ledger(db)
    try:
        ledger.set_setting("handler_timeout", TIMEOUT)
        # the key may decide its own holds: the approvals here are sent with it
        key, secret = ledger.keys.create("alice", {"slow.products:write", DECIDE_SCOPE})
    finally:
        ledger.close()
    servers = Servers(db, folder)
    try:
        a, b, c = servers.start(1, 1, 3)
        yield Cluster(db, folder, secret, key.caller.identity, {"a": a, "b": b, "c": c})
    finally:
        servers.close()


@pytest.fixture
def spawn(cluster) -> Iterator[Callable[[], Server]]:
    """``spawn()``: one more server on the cluster's ledger, killed when the test ends."""
    servers = Servers(cluster.db, cluster.folder)
    try:
        yield lambda: servers.start(1)[0]
    finally:
        servers.close()


# --- helpers ----------------------------------------------------------------------------------


def _invoke(cluster: Cluster, url: str, tool: str, input: dict, key: str | None) -> httpx.Response:
    """One invoke on a new connection (so ``--workers 3`` may hand it to any worker)."""
    headers = {"Authorization": f"Bearer {cluster.secret}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    with httpx.Client(base_url=url, timeout=30) as client:
        return client.post(f"/v1/tools/{tool}/invoke", json={"input": input}, headers=headers)


def _post(cluster: Cluster, url: str, path: str) -> httpx.Response:
    with httpx.Client(base_url=url, timeout=30) as client:
        return client.post(path, headers={"Authorization": f"Bearer {cluster.secret}"})


def _get(cluster: Cluster, url: str, path: str) -> httpx.Response:
    with httpx.Client(base_url=url, timeout=30) as client:
        return client.get(path, headers={"Authorization": f"Bearer {cluster.secret}"})


def _at_once(*requests: Callable[[], httpx.Response]) -> tuple[ThreadPoolExecutor, list[Future]]:
    """Start ``requests`` in threads released together by a barrier."""
    barrier = threading.Barrier(len(requests))

    def sent(request: Callable[[], httpx.Response]) -> httpx.Response:
        barrier.wait(timeout=10)
        return request()

    pool = ThreadPoolExecutor(len(requests))
    return pool, [pool.submit(sent, request) for request in requests]


def _never(check: Callable[[], bool], what: str, window: float) -> None:
    """Fail as soon as ``check`` holds during the next ``window`` seconds (a bounded watch of
    something that must not happen, such as an answer that must wait)."""
    deadline = time.monotonic() + window
    while time.monotonic() < deadline:
        assert not check(), f"seen within {window:g} s: {what}"
        time.sleep(0.005)


def _wait_for(check: Callable[[], bool], what: str, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"not seen within {within:g} s: {what}"
        time.sleep(0.005)


def _starts(cluster: Cluster, sku: str) -> list[dict[str, Any]]:
    return [line for line in runs(sku, cluster.folder) if line["event"] == "start"]


def _names() -> tuple[str, str, str]:
    """A fresh sku, idempotency key and gate for one test (the cluster is shared)."""
    tag = uuid.uuid4().hex[:10]
    return f"SKU-{tag}", f"key-{tag}", f"gate-{tag}"


def _is_problem(response: httpx.Response, status: int, code: str) -> bool:
    return response.status_code == status and response.json().get("code") == code


# --- 1. one Idempotency-Key, two processes --------------------------------------------------


@pytest.mark.parametrize("pair", [("a", "b"), ("b", "c"), ("c", "c")], ids="-".join)
def test_one_idempotency_key_sent_to_two_processes_at_once_runs_the_handler_once(cluster, pair):
    sku, key, gate = _names()
    urls = [cluster.servers[name].url for name in pair]
    input = {"sku": sku, "gate": gate}
    pool, futures = _at_once(
        *[lambda url=url: _invoke(cluster, url, "slow.set_price", input, key) for url in urls]
    )
    with pool:
        _wait_for(lambda: _starts(cluster, sku), "the handler started")
        # the runner is held at the gate; the other is told at once, as Stripe does
        _wait_for(lambda: any(f.done() for f in futures), "the other request answered at once")
        (told,) = [f.result() for f in futures if f.done()]
        assert _is_problem(told, 409, "in_progress"), told.text
        assert int(told.headers["Retry-After"]) >= 1
        open_gate(gate, cluster.folder)
        answers = [f.result(timeout=30) for f in futures]

    starts = _starts(cluster, sku)
    assert len(starts) == 1, starts
    (ran,) = [r for r in answers if r is not told]
    assert ran.status_code == 200, ran.text
    assert "Idempotent-Replayed" not in ran.headers
    assert ran.json()["result"] == {"sku": sku, "pid": starts[0]["pid"]}

    later = _invoke(cluster, cluster.servers["a"].url, "slow.set_price", input, key)
    assert later.status_code == 200, later.text
    assert later.headers["Idempotent-Replayed"] == "true"
    assert later.json()["result"] == ran.json()["result"]
    assert len(_starts(cluster, sku)) == 1


def test_a_repeat_sent_to_another_process_while_the_first_call_runs_is_409_then_replays(cluster):
    sku, key, gate = _names()
    input = {"sku": sku, "gate": gate}
    a, b = cluster.servers["a"].url, cluster.servers["b"].url
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(_invoke, cluster, a, "slow.set_price", input, key)
        _wait_for(lambda: _starts(cluster, sku), "the first call's handler started")
        repeat = _invoke(cluster, b, "slow.set_price", input, key)  # answered while it runs
        assert not first.done()
        assert _is_problem(repeat, 409, "in_progress"), repeat.text
        assert "send this request again" in repeat.json()["detail"]
        assert int(repeat.headers["Retry-After"]) >= 1
        open_gate(gate, cluster.folder)
        ran = first.result(timeout=30)

    assert ran.status_code == 200, ran.text
    assert "Idempotent-Replayed" not in ran.headers
    replayed = _invoke(cluster, b, "slow.set_price", input, key)  # sent again: the answer
    assert replayed.status_code == 200, replayed.text
    assert replayed.headers["Idempotent-Replayed"] == "true"
    assert replayed.json()["result"] == ran.json()["result"]
    assert len(_starts(cluster, sku)) == 1


def test_a_replayed_error_answer_says_it_was_replayed(cluster):
    sku, key, _ = _names()
    input = {"sku": sku, "refuse": True}
    first = _invoke(cluster, cluster.servers["a"].url, "slow.set_price", input, key)
    assert _is_problem(first, 422, "tool_error"), first.text
    assert "Idempotent-Replayed" not in first.headers
    again = _invoke(cluster, cluster.servers["b"].url, "slow.set_price", input, key)
    assert _is_problem(again, 422, "tool_error"), again.text
    assert len(_starts(cluster, sku)) == 1  # replayed, not run again
    assert again.headers.get("Idempotent-Replayed") == "true"


def test_a_retry_while_a_slowly_checked_call_still_runs_is_told_in_progress_never_unknown(
    cluster,
):
    """The key was reserved long before the handler started (a slow check): a retry then must
    not take the running call for a dead one. It is told ``in_progress`` (REST never waits),
    the key stays running through the window, and once the call ends the retry replays it."""
    sku, key, gate = _names()
    input = {"sku": sku, "gate": gate, "check": 2.5}
    a, b = cluster.servers["a"].url, cluster.servers["b"].url
    ledger = open_ledger(cluster.db)
    try:
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(_invoke, cluster, a, "slow.set_checked_price", input, key)
            _wait_for(lambda: _starts(cluster, sku), "the handler started, after the check")
            record = ledger.get_idempotency(cluster.identity, "slow.set_checked_price", key)
            assert record is not None
            assert record.state == "running"
            # the key was reserved at least 2.5 s (the check) before the handler started, and
            # the handler may run TIMEOUT s from its start: once the reservation is WAITED s old
            # the call still runs (held at its gate), well within its own timeout
            started = _starts(cluster, sku)[0]["at"]
            _wait_for(lambda: time.time() > started - 2.5 + WAITED + 0.05, "the grace passed")
            assert [line["event"] for line in runs(sku, cluster.folder)] == ["start"]
            retry = _invoke(cluster, b, "slow.set_checked_price", input, key)
            assert _is_problem(retry, 409, "in_progress"), retry.text  # never outcome_unknown

            def settled() -> bool:  # what the bug did: the running call settled as unknown
                now = ledger.get_idempotency(cluster.identity, "slow.set_checked_price", key)
                return now is None or now.state != "running"

            _never(settled, "the key was settled while its call ran", RETRY_WINDOW)
            open_gate(gate, cluster.folder)  # before the handler's own timeout (TIMEOUT s)
            ran = first.result(timeout=30)
    finally:
        ledger.close()
    assert ran.status_code == 200, ran.text  # the first call finished within its timeout
    assert len(_starts(cluster, sku)) == 1
    later = _invoke(cluster, b, "slow.set_checked_price", input, key)
    assert later.json() == {**ran.json(), "replayed": True}


# --- 2. one confirmation, three processes approving -------------------------------------------


def test_three_processes_approving_one_confirmation_at_once_write_once(cluster):
    sku, _, gate = _names()
    a, b, c = (cluster.servers[name].url for name in "abc")
    held = _invoke(cluster, a, "slow.delete_product", {"sku": sku, "gate": gate}, None)
    assert held.status_code == 202, held.text
    location = held.headers["Location"]
    assert _starts(cluster, sku) == []

    pool, futures = _at_once(*[lambda url=url: _post(cluster, url, f"{location}/approve")
                               for url in (a, b, c)])  # fmt: skip
    with pool:
        _wait_for(lambda: _starts(cluster, sku), "the approved write started")
        assert not any(f.done() for f in futures)  # the write is held at the gate
        open_gate(gate, cluster.folder)
        answers = [f.result(timeout=30) for f in futures]

    starts = _starts(cluster, sku)
    assert len(starts) == 1, starts
    outcome = {"executed": True, "status": "ok", "result": {"sku": sku, "pid": starts[0]["pid"]}}
    decided = [r for r in answers if r.status_code == 200]
    assert decided, [r.text for r in answers]  # whoever won the update answers 200
    for response in answers:
        if response.status_code == 200:  # decided here, or read it pending and lost the update
            assert response.json()["status"] == "done"
            assert response.json()["outcome"] == outcome
        else:
            assert _is_problem(response, 409, "already_decided"), response.text
            assert response.json()["outcome"] == outcome

    now = _get(cluster, c, location)
    assert now.status_code == 200, now.text
    assert (now.json()["status"], now.json()["outcome"]) == ("done", outcome)
    again = _post(cluster, b, f"{location}/approve")
    assert _is_problem(again, 409, "already_decided"), again.text
    assert again.json()["outcome"] == outcome
    assert len(_starts(cluster, sku)) == 1


# --- 3. a process SIGKILLed inside a handler -------------------------------------------------


def test_a_call_whose_process_is_killed_in_the_handler_is_in_progress_then_outcome_unknown(
    cluster, spawn
):
    sku, key, gate = _names()
    input = {"sku": sku, "gate": gate}
    victim = spawn()
    with ThreadPoolExecutor(1) as pool:
        lost = pool.submit(_invoke, cluster, victim.url, "slow.set_price", input, key)
        _wait_for(lambda: _starts(cluster, sku), "the handler started in the victim")
        victim.kill()
        with pytest.raises(httpx.TransportError):
            lost.result(timeout=30)

    # at once, on another process: the reservation is still 'running' and not yet stale, so
    # the retry is told in_progress at once; retried as told, once the call is stale (WAITED
    # after it started) a retry settles it as outcome unknown
    retry = _invoke(cluster, cluster.servers["a"].url, "slow.set_price", input, key)
    deadline = time.monotonic() + WAITED + 10
    while _is_problem(retry, 409, "in_progress"):
        assert time.monotonic() < deadline, "never settled: " + retry.text
        time.sleep(0.1)  # sooner than its Retry-After: the answer is the same until stale
        retry = _invoke(cluster, cluster.servers["b"].url, "slow.set_price", input, key)
    assert _is_problem(retry, 500, "outcome_unknown"), retry.text
    assert "may or may not have happened" in retry.json()["detail"]

    stored = _invoke(cluster, cluster.servers["c"].url, "slow.set_price", input, key)
    assert _is_problem(stored, 500, "outcome_unknown"), stored.text
    assert stored.json()["detail"] == retry.json()["detail"]  # the stored answer, told again

    open_gate(gate, cluster.folder)  # nobody is left waiting on it
    assert [line["event"] for line in runs(sku, cluster.folder)] == ["start"]


def test_an_approval_whose_process_is_killed_mid_write_is_settled_outcome_unknown(cluster, spawn):
    sku, _, gate = _names()
    a, b, c = (cluster.servers[name].url for name in "abc")
    held = _invoke(cluster, a, "slow.delete_product", {"sku": sku, "gate": gate}, None)
    assert held.status_code == 202, held.text
    location = held.headers["Location"]
    victim = spawn()
    with ThreadPoolExecutor(1) as pool:
        lost = pool.submit(_post, cluster, victim.url, f"{location}/approve")
        _wait_for(lambda: _starts(cluster, sku), "the approved write started in the victim")
        victim.kill()
        with pytest.raises(httpx.TransportError):
            lost.result(timeout=30)

    running = _get(cluster, b, location)
    assert running.status_code == 200, running.text
    assert running.json()["status"] in ("running", "done")

    # another process approving: it was decided; it waits for the outcome, then the run is stale
    again = _post(cluster, b, f"{location}/approve")
    assert _is_problem(again, 409, "already_decided"), again.text
    if again.json()["outcome"] is not None:
        assert again.json()["outcome"]["error"]["code"] == "outcome_unknown"

    def settled() -> bool:
        return _get(cluster, c, location).json()["status"] == "done"

    _wait_for(settled, "the confirmation settled", within=2 * WAITED)
    now = _get(cluster, c, location).json()
    assert now["outcome"]["error"]["code"] == "outcome_unknown", now
    assert "may or may not have happened" in now["outcome"]["error"]["message"]
    last = _post(cluster, a, f"{location}/approve")
    assert _is_problem(last, 409, "already_decided"), last.text
    assert last.json()["outcome"] == now["outcome"]

    open_gate(gate, cluster.folder)
    assert [line["event"] for line in runs(sku, cluster.folder)] == ["start"]
