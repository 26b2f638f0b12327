"""N worker processes on one PostgreSQL: turns per second for 1, 2 and 4 workers, and a worker
SIGKILLed mid-run.

Each worker (``bench/_scale_worker.py``) is a plain process serving turns over HTTP, at most
``--concurrency`` at once (1 by default: a worker is then bound by the model's latency, as the
target wants; with more, 4 workers on a 2-core machine run out of CPU first), with a model that
takes 50 ms a call (two calls a turn: the order, then the answer). The driver runs 200
conversation threads at once (60 with ``--quick``), each sending its 2 turns one after another,
every request to a random worker (keep-alive HTTP/1.1). The
workers share nothing but the database: a thread's next turn usually lands on another worker,
which continues the thread from its checkpoints, and the thread's lease keeps two workers from
running it at once. Nothing queues but the HTTP requests themselves.

The last run kills one of 4 workers (SIGKILL) a third of the way through and starts it again; a
request it was serving fails and the driver sends it again, to a random worker. Checked after
every run, in the database:

- every turn of every thread answered;
- 0 double writes: at most one order row per (thread, turn), and none missing but those whose
  answer says the killed worker cut the write off (its outcome unknown: never run again);
- one audit row per executed write (the audit's ``ok`` rows of ``scale.place_order`` equal the
  orders, less those cut off between the write and its audit row);
- no forked checkpoint chain: no two checkpoints of a thread share a parent.

Also printed: the database's transactions per turn (``pg_stat_database``; each statement of an
autocommit connection is one, so this counts statements, an upper bound of the round trips).
Targets: 4 workers serve at least 3 x the turns per second of 1 (the model's latency bounds each
worker); every check holds.

    TURNKIT_BENCH_POSTGRES_URL=postgresql://... .venv/bin/python bench/scale_out.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    from bench import _common
except ModuleNotFoundError:  # run as a script: bench/ is sys.path[0], the repository is not
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench import _common

WORKER = Path(__file__).resolve().parent / "_scale_worker.py"
TARGET_SPEEDUP = 3.0
ATTEMPTS = 20
"""Tries per turn before it counts as unanswered (a worker restarting takes a few)."""


@dataclass
class Run:
    """What one run did and what the database shows after it."""

    workers: int
    threads: int
    turns: int
    seconds: float = 0.0
    transactions: int = 0
    resent: int = 0
    answered: int = 0
    """Turns whose answer says the order was placed (now, or by the request's earlier try)."""
    interrupted: int = 0
    """Turns whose write a killed worker cut off mid-call: its outcome is unknown, the answer
    says so (the executor answers ``in_progress``; it never runs such a write again)."""
    worker_cpu: float = 0.0
    """CPU seconds the workers spent (user + system; a killed worker's until it died)."""
    driver_cpu: float = 0.0
    killed: bool = False
    twice: bool = False
    """Every turn sent to two workers at once (a client's retry that crossed the first try): only
    the thread's lease keeps the two runs from both placing the order and forking the chain."""
    checks: dict[str, int] = field(default_factory=dict)

    @property
    def turns_per_second(self) -> float:
        return self.threads * self.turns / self.seconds

    @property
    def problems(self) -> list[str]:
        """Every check that failed, said in words (empty when all hold)."""
        c = self.checks
        said = []
        cut = self.interrupted
        if c["unanswered"]:
            said.append(f"{c['unanswered']} turns never answered")
        if cut and not self.killed:
            said.append(f"{cut} turns reported interrupted, and no worker was killed")
        if c["doubles"]:
            said.append(f"{c['doubles']} turns wrote their order twice or more")
        if c["missing"] > cut:
            said.append(f"{c['missing']} turns have no order, {cut} reported interrupted")
        if not c["orders"] - cut <= c["audit_ok"] <= c["orders"]:
            said.append(f"{c['audit_ok']} ok audit rows for {c['orders']} orders")
        if c["forks"]:
            said.append(f"{c['forks']} checkpoints share a parent with another (forked chains)")
        return said


class Worker:
    """One worker process on a port of its own."""

    def __init__(self, url: str, concurrency: int, latency: float, log: Path) -> None:
        self.url, self.concurrency, self.latency, self.log = url, concurrency, latency, log
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = [sys.executable, str(WORKER), self.url, str(self.port)]
        argv += ["--concurrency", str(self.concurrency), "--latency", str(self.latency)]
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)

    def cpu(self) -> float:
        """CPU seconds this worker's process has spent so far (Linux ``/proc``)."""
        if self.process is None or self.process.poll() is not None:
            return 0.0
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    async def ready(self, client: Any, patience: float = 120) -> None:
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"worker on {self.port} ended: see {self.log}")
            try:
                answer = await client.get(f"http://127.0.0.1:{self.port}/health")
                if answer.status_code == 200 and answer.json()["ok"]:
                    return
            except Exception:  # not listening yet
                pass
            await asyncio.sleep(0.1)
        raise RuntimeError(f"worker on {self.port} not ready within {patience:.0f} s: {self.log}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _drive(workers: list[Worker], run: Run, kill_at: int | None, client: Any) -> None:
    """Every thread's turns, in order, each request to a random worker; resend what failed."""
    done = 0
    killing: asyncio.Task[None] | None = None

    async def crash_and_restart(victim: Worker) -> None:
        run.worker_cpu += victim.cpu()
        victim.kill()
        await asyncio.sleep(1.0)
        victim.start()
        await victim.ready(client)

    async def deliver(name: str, n: int) -> str:
        """Send turn ``n`` until a worker answers it; the answer. A turn no worker answers in
        ``ATTEMPTS`` tries is given up (the run's checks say so)."""
        for attempt in range(ATTEMPTS):
            worker = random.choice(workers)
            body = {"thread": name, "turn": n, "again": attempt > 0}
            try:
                answer = await client.post(f"http://127.0.0.1:{worker.port}/turn", json=body)
                if answer.status_code == 200:
                    return str(answer.json()["answer"])
            except Exception:  # the worker died under the request, or is starting again
                pass
            run.resent += 1
            await asyncio.sleep(0.05)
        return ""

    async def thread(name: str) -> None:
        nonlocal done, killing
        for n in range(run.turns):
            copies = 2 if run.twice else 1  # twice: two workers race for the same turn
            answers = await asyncio.gather(*(deliver(name, n) for _ in range(copies)))
            if any("interrupted" in a for a in answers):
                run.interrupted += 1
            elif any("placed" in a for a in answers):
                run.answered += 1
            done += 1
            if kill_at is not None and done == kill_at and killing is None:
                killing = asyncio.create_task(crash_and_restart(random.choice(workers)))

    started = time.perf_counter()
    await asyncio.gather(*(thread(f"t{i:04d}") for i in range(run.threads)))
    run.seconds = time.perf_counter() - started
    if killing is not None:
        await killing


def _connect(url: str) -> Any:
    """A connection of the driver's own to ``url`` (turnkit's URL options taken out)."""
    import psycopg

    from turnkit.ledger.urls import postgres_target

    return psycopg.connect(postgres_target(url).conninfo, autocommit=True)


def _transactions(url: str) -> int:
    with _connect(url) as conn:
        row = conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database"
            " WHERE datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


def check(url: str, threads: int, turns: int, answered: int) -> dict[str, int]:
    """The invariants of a finished run, counted in the database at ``url``."""
    with _connect(url) as conn:
        per_turn = conn.execute(
            "SELECT count(*) FROM scale_orders GROUP BY thread_id, turn"
        ).fetchall()
        orders = sum(count for (count,) in per_turn)
        audit_ok = conn.execute(
            "SELECT count(*) FROM turnkit_audit WHERE tool = 'scale.place_order' AND status = 'ok'"
        ).fetchone()
        forks = conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM checkpoints WHERE checkpoint_ns = ''"
            " AND parent_checkpoint_id IS NOT NULL"
            " GROUP BY thread_id, parent_checkpoint_id HAVING count(*) > 1) AS forked"
        ).fetchone()
    return {
        "unanswered": threads * turns - answered,
        "orders": orders,
        "doubles": sum(1 for (count,) in per_turn if count > 1),
        "missing": threads * turns - len(per_turn),
        "audit_ok": int(audit_ok[0]) if audit_ok else 0,
        "forks": int(forks[0]) if forks else 0,
    }


async def _run(url: str, run: Run, concurrency: int, latency: float, folder: Path) -> None:
    import httpx

    workers = [
        Worker(url, concurrency, latency, folder / f"worker-{run.workers}-{i}.log")
        for i in range(run.workers)
    ]
    limits = httpx.Limits(max_connections=run.threads, max_keepalive_connections=run.threads)
    timeout = httpx.Timeout(120.0)
    try:
        async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
            workers[0].start()  # the first alone: it sets up the schema
            await workers[0].ready(client)
            for worker in workers[1:]:
                worker.start()
            await asyncio.gather(*(worker.ready(client) for worker in workers[1:]))
            kill_at = run.threads * run.turns // 3 if run.killed else None
            before = await asyncio.to_thread(_transactions, url)
            cpu = sum(w.cpu() for w in workers), time.process_time()
            await _drive(workers, run, kill_at, client)
            run.worker_cpu += sum(w.cpu() for w in workers) - cpu[0]
            run.driver_cpu = time.process_time() - cpu[1]
    finally:
        for worker in workers:
            worker.stop()  # a session flushes its statistics when it ends
    run.transactions = await asyncio.to_thread(_transactions, url) - before
    answered = run.answered + run.interrupted
    run.checks = await asyncio.to_thread(check, url, run.threads, run.turns, answered)


def scale_out(
    base: str,
    workers: int,
    *,
    threads: int = 200,
    turns: int = 2,
    concurrency: int = 4,
    latency: float = 0.05,
    kill: bool = False,
    twice: bool = False,
    fresh_schema: bool = True,
    folder: Path | None = None,
) -> Run:
    """One run of ``workers`` workers on a fresh schema of the server at ``base`` (or, with
    ``fresh_schema=False``, on the database ``base`` names, which must be fresh: through
    PgBouncer, which cannot choose a schema)."""
    import tempfile

    run = Run(workers, threads, turns, killed=kill, twice=twice)
    with contextlib.ExitStack() as stack:
        scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="turnkit-scale-"))
        url = stack.enter_context(_common.postgres_schema(base)) if fresh_schema else base
        asyncio.run(_run(url, run, concurrency, latency, folder or Path(scratch)))
    return run


def run(quick: bool = False, concurrency: int = 1) -> list[dict[str, Any]]:
    """The benchmark's table rows (none, with a note, without PostgreSQL)."""
    base = _common.postgres_url()
    if base is None:
        print(_common.postgres_note())
        return []
    threads, turns = (60, 2) if quick else (200, 2)
    found: list[dict[str, Any]] = []
    shape = {"threads": threads, "turns": turns, "concurrency": concurrency}
    runs = {n: scale_out(base, n, **shape) for n in (1, 2, 4)}
    crashed = scale_out(base, 4, kill=True, **shape)
    for n, run in [*runs.items(), (4, crashed)]:
        case = f"{n} worker{'s' if n > 1 else ''}" + (", one SIGKILLed" if run.killed else "")
        ratio = run.turns_per_second / runs[1].turns_per_second
        target = f">= {TARGET_SPEEDUP:.0f}x" if n == 4 and not run.killed else None
        met = _common.ratio_at_least(ratio, TARGET_SPEEDUP) if target else None
        found.append(
            _common.row(
                "scale_out", f"{case} (÷ 1 worker)", run.turns_per_second, "turns/s",
                ratio=ratio, target=target, met=met,
            )
        )  # fmt: skip
        found.append(
            _common.row(
                "scale_out", f"{case}: database transactions per turn",
                run.transactions / (run.threads * run.turns), "per turn",
                target="every check holds", met=not run.problems,
            )
        )  # fmt: skip
        turns_done = run.threads * run.turns
        found.append(
            _common.row(
                "scale_out", f"{case}: worker CPU per turn",
                1000 * run.worker_cpu / turns_done, "ms",
            )
        )  # fmt: skip
        print(
            f"scale_out {case}: {run.seconds:.1f} s; workers' CPU {run.worker_cpu:.1f} s,"
            f" the driver's {run.driver_cpu:.1f} s"
        )
        for problem in run.problems:
            print(f"scale_out {case}: {problem}")
        if run.resent:
            print(f"scale_out {case}: {run.resent} requests sent again after a failure")
        if run.interrupted:
            print(
                f"scale_out {case}: {run.interrupted} writes cut off by the kill (outcome unknown)"
            )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="60 threads of 2 turns")
    parser.add_argument("--concurrency", type=int, default=1, help="turns at once per worker")
    args = parser.parse_args(argv)
    if _common.postgres_url() is None:  # every row needs it: say so, rather than an empty table
        names = " or ".join(_common.POSTGRES_ENVS)
        print(f"scale_out needs PostgreSQL: set {names} to postgresql://user@host:port/db")
        return 2
    found = run(args.quick, args.concurrency)
    print(_common.format_table(found))
    return 0 if all(r.get("met") is not False for r in found) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
