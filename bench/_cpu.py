"""Where a machine's CPU went during a load: the server's processes, PostgreSQL's, the load
generator (this process) and the whole machine, from ``/proc`` (Linux; elsewhere nothing is
measured and ``CpuSplit.found`` stays None).

It tells a limit from a bottleneck: when ``--workers 3`` leaves the machine's cores idle, something
serialises the requests (a lock, a pool); when the cores are all busy, more workers cannot help.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROC = Path("/proc")
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass
class Split:
    """Cores used on average (1.0: one core busy the whole time)."""

    machine: float
    """Every process of the machine (the machine has ``cores``)."""
    cores: int
    server: float
    """The server's process and its children (the workers)."""
    postgres: float
    """The PostgreSQL server's processes, when it runs on this machine."""
    load: float
    """This process: the load generator."""


def _stat(pid: int) -> tuple[str, int, float] | None:
    """``(command, parent, CPU seconds)`` of ``pid``, or None when it is gone."""
    return _parsed(PROC / str(pid) / "stat")


def _parsed(stat: Path) -> tuple[str, int, float] | None:
    """``(command, parent, CPU seconds: user and system)`` from a process's or a thread's
    ``stat`` file, or None when it is gone."""
    try:
        text = stat.read_text()
    except OSError:
        return None
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    return name, int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS


def thread_seconds() -> dict[int, float]:
    """CPU seconds of each thread of this process, by its native id (Linux; elsewhere none)."""
    tasks = PROC / "self" / "task"
    if not tasks.exists():
        return {}
    found = {}
    for task in tasks.iterdir():
        if (stat := _parsed(task / "stat")) is not None:  # None: the thread ended meanwhile
            found[int(task.name)] = stat[2]
    return found


def _processes() -> dict[int, tuple[str, int, float]]:
    found = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            found[int(entry.name)] = stat
    return found


def _machine() -> tuple[float, float]:
    """``(busy, total)`` CPU seconds of all cores since boot."""
    values = [int(v) for v in (PROC / "stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return (sum(values) - idle) / TICKS, sum(values) / TICKS


def _tree(processes: dict[int, tuple[str, int, float]], root: int) -> set[int]:
    members, grew = {root}, True
    while grew:
        grew = False
        for pid, (_, parent, _) in processes.items():
            if parent in members and pid not in members:
                members.add(pid)
                grew = True
    return members


def workers_of(server: int) -> int:
    """How many worker processes ``server`` has started (uvicorn's, spawned by multiprocessing)."""
    found = 0
    for pid in _tree(_processes(), server) - {server}:
        try:
            found += "spawn_main" in (PROC / str(pid) / "cmdline").read_text()
        except OSError:
            continue
    return found


class CpuSplit:
    """``with CpuSplit(server_pid) as split: <load>``; then ``split.found``."""

    def __init__(self, server: int) -> None:
        self.server = server
        self.found: Split | None = None

    def _sample(self) -> dict[str, Any]:
        processes = _processes()
        tree = _tree(processes, self.server)
        return {
            "at": time.perf_counter(),
            "machine": _machine(),
            "server": {p: processes[p][2] for p in tree if p in processes},
            "postgres": {
                p: s[2] for p, s in processes.items() if s[0] in ("postgres", "postmaster")
            },
            "load": time.process_time(),
        }

    def __enter__(self) -> CpuSplit:
        self.start = self._sample() if PROC.exists() else None
        return self

    def __exit__(self, *exc: object) -> None:
        if self.start is None or exc[0] is not None:
            return
        end = self._sample()
        wall = end["at"] - self.start["at"]
        busy = end["machine"][0] - self.start["machine"][0]
        total = end["machine"][1] - self.start["machine"][1]
        cores = os.cpu_count() or 1
        self.found = Split(
            machine=cores * busy / total if total else 0.0,
            cores=cores,
            server=_spent(self.start["server"], end["server"]) / wall,
            postgres=_spent(self.start["postgres"], end["postgres"]) / wall,
            load=(end["load"] - self.start["load"]) / wall,
        )


def _spent(start: dict[int, float], end: dict[int, float]) -> float:
    """CPU seconds the processes of ``end`` spent since ``start`` (all of it for those started
    meanwhile; a process that ended meanwhile is not counted)."""
    return sum(seconds - start.get(pid, 0.0) for pid, seconds in end.items())
