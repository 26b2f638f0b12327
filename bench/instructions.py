"""Instructions per concurrent turn, counted by valgrind's callgrind: turnkit's own work over the
six-step shape's, in a figure no load on the shared machine moves.

``concurrency.py``'s ratio of CPU seconds (``turnkit sync ÷ shape``) moves by ±0.05 from run to
run on these machines, as much as the target's whole margin. Instructions do not: callgrind counts
every instruction the process executes (every thread, the garbage collector included), the same
for the same program and input whatever else the machine is doing (runs of 500 turns here differ
by 0.1-0.3 %, as threads interleave; string hashes are fixed). Each contender of
``concurrency.py`` (turnkit with its default ``sync`` durability, the six-step shape with
turnkit's work removed, ``create_agent``) runs twice under callgrind, each time in a fresh
process: its warm-up alone, then the same warm-up and 500 concurrent turns on a 50 ms model. The
difference over 500 is its instructions per turn. What a count of instructions cannot see is time
lost to cache misses and to threads waiting on each other: the CPU-seconds row in
``concurrency.py`` carries those.

    .venv/bin/python bench/instructions.py [--quick]

Needs ``valgrind`` (Debian's package); without it the rows are skipped with a note. A process
runs ~50x slower under callgrind: the full run takes 6-8 minutes, ``--quick`` (150 turns) ~4.
"""

from __future__ import annotations

import asyncio
import gc
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

try:
    from bench import _common
except ModuleNotFoundError:  # run as a script: bench/ is sys.path[0], the repository is not
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench import _common

from bench import concurrency

SCENARIO = "instructions"
CONTENDERS: dict[str, concurrency.Factory] = {
    "turnkit sync": concurrency.turnkit_graph("sync"),
    "shape": concurrency.shape,
    "create_agent": concurrency.agent_graph,
}
COUNTED = re.compile(r"^==\d+== Collected : (\d+)$", re.MULTILINE)
NOTE = "instruction rows skipped: valgrind is not installed (Debian's package valgrind)"


def turns_in_this_process(case: str, turns: int) -> None:
    """The child's work: ``case``'s warm-up, then ``turns`` concurrent turns (none: the warm-up
    alone, the baseline taken off)."""
    graph, options = CONTENDERS[case](_common.EndlessModel(latency=concurrency.LATENCY))
    close = options.pop("_close", None)

    async def main() -> None:
        await concurrency._run_turns(graph, concurrency.WARMUP, "warm", True, options)
        gc.collect()
        if turns:
            await concurrency._run_turns(graph, turns, "par", True, options)

    try:
        asyncio.run(main())
    finally:
        if close is not None:
            close()


def instructions(command: list[str]) -> int:
    """The instructions ``command`` executes, all its threads, counted by callgrind."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command],
        env={**os.environ, "PYTHONHASHSEED": "0"},  # the same hashes, so the same dict probes
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    found = COUNTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind gave no count for {command}: {done.stderr[-2000:]}")
    return int(found.group(1))


def per_turn(case: str, turns: int) -> float:
    """``case``'s instructions per concurrent turn: two processes under callgrind, two at a time."""
    me = [sys.executable, str(Path(__file__).resolve()), "--child", case]
    with ThreadPoolExecutor(2) as pool:
        alone, loaded = pool.map(instructions, [[*me, "0"], [*me, str(turns)]])
    return (loaded - alone) / turns


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Instructions per turn of each contender, and turnkit ÷ shape against ``OWN_WORK``."""
    if shutil.which("valgrind") is None:
        print(NOTE, file=sys.stderr)
        return []
    turns = concurrency.QUICK_TURNS if quick else concurrency.TURNS
    counts = {case: per_turn(case, turns) for case in CONTENDERS}
    rows = [
        _common.row(SCENARIO, f"{case}: instructions per concurrent turn", n / 1e3, "k")
        for case, n in counts.items()
    ]
    own = counts["turnkit sync"] / counts["shape"]
    target = concurrency.OWN_WORK
    rows.append(
        _common.row(
            SCENARIO,
            "turnkit sync: instructions per turn (÷ shape: the price of turnkit's own work)",
            counts["turnkit sync"] / 1e3,
            "k",
            ratio=own,
            target=f"<= {target:g}x",
            met=round(own, 2) <= target,
        )
    )
    for case in ("shape", "turnkit sync"):
        rows.append(
            _common.row(
                SCENARIO,
                f"{case}: instructions per turn (÷ create_agent)",
                counts[case] / 1e3,
                "k",
                ratio=counts[case] / counts["create_agent"],
            )
        )
    return rows


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        turns_in_this_process(sys.argv[2], int(sys.argv[3]))
    else:
        print(_common.format_table(run("--quick" in sys.argv)))
