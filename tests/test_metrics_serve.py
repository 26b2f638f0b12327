"""``turnkit serve --workers 2`` answers ``GET /metrics`` for both workers: calls made over
keep-alive connections that land on either worker are all counted whichever worker is scraped,
the pending holds are read once from the shared ledger (not added up per worker), and the
workers' shared folder is gone when the server stops. ``--no-metrics`` serves none."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from _serving import free_port, wait_healthy
from _shop import prices
from test_cli import TURNKIT, env
from turnkit import open_ledger

pytestmark = pytest.mark.slow  # server processes

TESTS = str(Path(__file__).resolve().parent)
ROUNDS = 50
"""Fresh connections tried, at most, for calls to reach both workers."""


class Servers:
    """``turnkit serve --module _metrics_app:App`` processes on free ports, their temporary files
    in ``folder/tmp``; ``stop()`` ends them (SIGTERM, as an operator does)."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.temporary = folder, folder / "tmp"
        self.temporary.mkdir()
        self.started: list[subprocess.Popen[str]] = []

    def start(self, db: str, *args: str) -> str:
        port = free_port()
        log = self.folder / f"serve-{port}.log"
        process = subprocess.Popen(
            [TURNKIT, "serve", "--module", "_metrics_app:App", "--permissions",
             "_cli_app:permissions", "--db", db, "--port", str(port), "--no-notify", *args],
            cwd=self.folder, env={**env(), "PYTHONPATH": TESTS, "TMPDIR": str(self.temporary),
                                  "TURNKIT_TEST_APP_DIR": str(self.folder)},
            stdout=log.open("w"), stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )  # fmt: skip
        self.started.append(process)
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, process, log)
        return url

    def stop(self) -> None:
        for process in self.started:
            with contextlib.suppress(ProcessLookupError):  # it may have stopped on its own
                os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
        self.started = []

    def shared_folders(self) -> list[Path]:
        """The multiprocess folders ``turnkit serve`` made for its workers, there now."""
        return list(self.temporary.glob("turnkit-metrics-*"))


@pytest.fixture
def servers(tmp_path) -> Iterator[Servers]:
    made = Servers(tmp_path)
    yield made
    made.stop()


@pytest.fixture
def keys(tmp_path, ledger_url) -> dict[str, str]:
    """Alice's key (reads and writes, every write held) and Root's (decides), on ``ledger_url``."""
    rights = {"alice": ["shop.view", "shop.manage"], "root": ["shop.view", "system.confirm_any"]}
    (tmp_path / "rights.json").write_text(json.dumps(rights))
    ledger = open_ledger(ledger_url)
    try:
        ledger.set_setting("hold_key_writes", True)
        _, alice = ledger.keys.create("alice", ["shop.products:read", "shop.products:write"])
        _, root = ledger.keys.create("root", ["system.confirmations:decide"])
    finally:
        ledger.close()
    return {"alice": alice, "root": root}


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """``GET url/metrics`` on a connection of its own, by sample name and labels."""
    answer = httpx.get(f"{url}/metrics", timeout=10)
    assert answer.status_code == 200, answer.text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def value(samples: dict, name: str, **given: str) -> float:
    return samples.get((name, frozenset(given.items())), 0.0)


def test_two_workers_scrape_the_same_totals_of_the_calls_both_served(servers, keys, ledger_url):
    url = servers.start(ledger_url, "--workers", "2")
    assert len(servers.shared_folders()) == 1
    alice = {"Authorization": f"Bearer {keys['alice']}"}
    root = {"Authorization": f"Bearer {keys['root']}"}
    workers: set[int] = set()
    reads = connections = 0
    while len(workers) < 2 or connections < 4:  # a client keeps one connection, to one worker
        assert connections < ROUNDS, f"{ROUNDS} connections all reached worker(s) {workers}"
        connections += 1
        with httpx.Client(base_url=url, headers=alice, timeout=10) as client:
            for _ in range(3):
                ran = client.post("/v1/tools/shop.which_worker/invoke", json={"input": {}})
                assert ran.status_code == 200, ran.text
                workers.add(ran.json()["result"]["pid"])
                reads += 1
    held = []
    for sku in ("TEA-0001", "TEA-0002", "TEA-0003"):
        with httpx.Client(base_url=url, headers=alice, timeout=10) as client:
            answer = client.post("/v1/tools/shop.set_prices/invoke", json={"input": prices(sku)})
            assert answer.status_code == 202, answer.text
            held.append(answer.json()["id"])
    with httpx.Client(base_url=url, headers=root, timeout=10) as client:
        assert client.post(f"/v1/confirmations/{held[0]}/approve").status_code == 200
        assert client.post(f"/v1/confirmations/{held[1]}/reject").status_code == 200

    scrapes = [scrape(url) for _ in range(6)]  # fresh connections: either worker answers
    samples = scrapes[0]
    assert all(later == samples for later in scrapes[1:])
    calls, read = "turnkit_tool_calls_total", "shop.which_worker"
    scraped_reads = value(samples, calls, tool=read, outcome="ok", caller_kind="key")
    print(
        f"workers {sorted(workers)}: {connections} connections, {reads} reads made,"
        f" {scraped_reads:g} scraped; holds pending {value(samples, 'turnkit_holds_pending'):g}"
    )
    assert scraped_reads == reads
    assert value(samples, "turnkit_tool_call_duration_seconds_count", tool=read,
                 error_type="") == reads  # fmt: skip
    assert value(samples, calls, tool="shop.set_prices", outcome="confirmation_required",
                 caller_kind="key") == 3  # fmt: skip
    assert value(samples, calls, tool="shop.set_prices", outcome="ok", caller_kind="key") == 1
    decisions = "turnkit_decisions_total"
    assert value(samples, decisions, tool="shop.set_prices", decision="approve", outcome="ok") == 1
    assert value(samples, decisions, tool="shop.set_prices", decision="reject",
                 outcome="rejected") == 1  # fmt: skip
    assert value(samples, "turnkit_confirmation_wait_seconds_count", tool="shop.set_prices",
                 decision="approve") == 1  # fmt: skip
    assert value(samples, "turnkit_holds_pending") == 1  # read once, not added up per worker
    servers.stop()
    assert servers.shared_folders() == []  # removed when the server stopped


def test_no_metrics_serves_none(servers, tmp_path):
    (tmp_path / "rights.json").write_text("{}")
    url = servers.start(str(tmp_path / "ledger.sqlite"), "--no-metrics", "--workers", "2")
    assert httpx.get(f"{url}/metrics").status_code == 404
    assert servers.shared_folders() == []
