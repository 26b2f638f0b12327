"""N worker processes on one PostgreSQL (``bench/scale_out.py``), checked rather than timed:
4 workers serve 200 threads, each request to a random worker, one worker SIGKILLed a third of the
way through and started again. Every turn is answered, no write runs twice or goes missing, each
write has one ``ok`` audit row, and no thread's checkpoint chain forks — directly, and through
PgBouncer in transaction mode. And when every turn is sent to two workers at once, only the
thread's lease stands between them: still one order per turn, one chain per thread."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import postgres_url

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: bench/
from bench.scale_out import scale_out

pytestmark = pytest.mark.slow


def _assert_held(run) -> None:
    assert run.problems == [], run.problems
    turns = run.threads * run.turns
    assert run.answered + run.interrupted == turns
    assert turns - run.interrupted <= run.checks["orders"] <= turns
    assert run.interrupted <= 4 * 2  # only what the killed worker had in hand


def test_four_workers_serve_200_threads_and_survive_a_killed_worker(tmp_path):
    run = scale_out(
        postgres_url(), 4, threads=200, turns=2, concurrency=4, kill=True, folder=tmp_path
    )
    _assert_held(run)
    assert run.resent > 0, "the killed worker was serving requests: some were sent again"


def test_a_turn_sent_to_two_workers_at_once_places_one_order_and_keeps_one_chain(tmp_path):
    """A client's retry that crossed its first try: two workers run the same turn of a thread at
    once. The thread's lease lets one run; the other waits, then finds the turn answered."""
    run = scale_out(
        postgres_url(), 4, threads=60, turns=2, concurrency=2, twice=True, folder=tmp_path
    )
    _assert_held(run)


def test_workers_behind_pgbouncer_in_transaction_mode(pgbouncer, database, tmp_path):
    url = f"{pgbouncer.url(database)}?pooler=transaction"
    run = scale_out(
        url, 4, threads=100, turns=2, concurrency=2, kill=True, fresh_schema=False, folder=tmp_path
    )
    _assert_held(run)
