"""Instructions per concurrent turn, counted by valgrind's callgrind: turnkit's own work over the
six-step shape's, in a figure no load on the shared machine moves.

``concurrency.py``'s ratio of CPU seconds (``turnkit sync ÷ shape``) moves by ±0.05 from run to
run on these machines, as much as the target's whole margin. Instructions do not: callgrind counts
every instruction the process executes (every thread, the garbage collector included), and its
ratios hold whatever else the machine is doing: four runs of 500 turns gave turnkit ÷ shape
1.047-1.048x, one of them beside other work, where every count rose ~1.4 % (the turns interleave
differently with the model's 50 ms; string hashes are fixed). Each contender of ``concurrency.py``
(turnkit with its default ``sync`` durability, the six-step shape with turnkit's work removed,
``create_agent``) runs twice under callgrind, each time in a fresh process: its warm-up alone,
then the same warm-up and 500 concurrent turns on a 50 ms model. The difference over 500 is its
instructions per turn. What a count of instructions cannot see is time lost to cache misses and to
threads waiting on each other: the CPU-seconds row in ``concurrency.py`` carries those.

The same count for MCP ``tools/call`` (``server.py``'s MCP rows): each server under callgrind,
started twice (warm-up calls alone; warm-up and 200 more ``tools/call`` through the SDK's
client), the difference per call counted in the server's process: turnkit's ``/mcp`` (``turnkit
serve`` on a SQLite ledger), the SDK's ``MCPServer`` without governance, and the MCP floor (the
same promises written by hand around ``MCPServer``, ``_floor.mcp_floor_app``). A count leaves out
the kernel's time (the socket, SQLite's writes), the same for turnkit and the floor.

    .venv/bin/python bench/instructions.py [--quick]

Needs ``valgrind`` (Debian's package); without it the rows are skipped with a note. A process
runs ~50x slower under callgrind: the turns take 6-8 minutes (``--quick``: 150 turns, ~4), the
MCP calls as long again (``--quick``: 60 calls).
"""

from __future__ import annotations

import asyncio
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

try:
    from bench import _common
except ModuleNotFoundError:  # run as a script: bench/ is sys.path[0], the repository is not
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench import _common

from bench import _floor, concurrency, profile_worker, server

SCENARIO = "instructions"
CONTENDERS: dict[str, concurrency.Factory] = {
    "turnkit sync": concurrency.turnkit_graph("sync"),
    "shape": concurrency.shape,
    "create_agent": concurrency.agent_graph,
}
COUNTED = re.compile(r"^==\d+== Collected : (\d+)$", re.MULTILINE)
NOTE = "instruction rows skipped: valgrind is not installed (Debian's package valgrind)"
CALLGRIND = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
FIXED_HASHES = {"PYTHONHASHSEED": "0"}
"""The children's environment: the same string hashes, so the same dict probes, in every run."""
MCP_WARMUP, MCP_CALLS, QUICK_MCP_CALLS = 20, 200, 60
MCP_START = 600.0
"""Seconds a server under callgrind may take to answer (it imports ~50x slower), or to stop."""


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
        [*CALLGRIND, *command],
        env=os.environ | FIXED_HASHES,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"callgrind gave no count for {command}: {done.stderr[-2000:]}")
    return _count(command, done.stderr)


def _count(command: list[str], report: str) -> int:
    """The instructions callgrind's ``report`` (its log) says ``command`` executed."""
    found = COUNTED.search(report)
    if found is None:
        raise RuntimeError(f"callgrind gave no count for {command}: {report[-2000:]}")
    return int(found.group(1))


def per_turn(case: str, turns: int) -> float:
    """``case``'s instructions per concurrent turn: two processes under callgrind, two at a time."""
    me = [sys.executable, str(Path(__file__).resolve()), "--child", case]
    with ThreadPoolExecutor(2) as pool:
        alone, loaded = pool.map(instructions, [[*me, "0"], [*me, str(turns)]])
    return (loaded - alone) / turns


def run(quick: bool = False) -> list[dict[str, Any]]:
    """The turns' rows (``turn_rows``) and MCP's (``mcp_rows``); none without valgrind."""
    if shutil.which("valgrind") is None:
        print(NOTE, file=sys.stderr)
        return []
    return turn_rows(quick) + mcp_rows(quick)


def turn_rows(quick: bool) -> list[dict[str, Any]]:
    """Instructions per turn of each contender, and turnkit ÷ shape against ``OWN_WORK``."""
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


# --- MCP tools/call: the instructions a server executes per call ---------------------------------


def counted(command: list[str], ready: str, env: dict[str, str], work: Callable[[str], Any]) -> int:
    """The instructions the server ``command`` (``server.serving``'s form) executes under
    callgrind from its start to its stop, ``work`` done meanwhile on its base URL."""
    handle, log = tempfile.mkstemp(prefix="turnkit-callgrind-", suffix=".log")
    os.close(handle)
    try:
        with server.serving([*CALLGRIND, f"--log-file={log}", *command], ready,
                            FIXED_HASHES | env, quiet=True, start_timeout=MCP_START,
                            stop_timeout=MCP_START) as url:  # fmt: skip
            work(url)
        return _count(command, Path(log).read_text())
    finally:
        Path(log).unlink(missing_ok=True)


def served_instructions(command: list[str], ready: str, env: dict[str, str],
                        headers: dict[str, str], calls: int) -> int:  # fmt: skip
    """The instructions a server executes from its start to its stop, with ``MCP_WARMUP`` and
    ``calls`` more ``tools/call`` made meanwhile through the SDK's client."""

    def work(url: str) -> None:
        asyncio.run(_mcp_calls(f"{url}/mcp", headers, MCP_WARMUP + calls))

    return counted(command, ready, env, work)


async def _mcp_calls(url: str, headers: dict[str, str], calls: int) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=120))
        client = await stack.enter_async_context(
            Client(streamable_http_client(url, http_client=http))
        )
        call = server._mcp_call(client, url, server.MODEL_NAME)
        for _ in range(calls):
            await call()


def mcp_rows(quick: bool) -> list[dict[str, Any]]:
    """Instructions per MCP ``tools/call`` in turnkit's server, ``MCPServer``, the MCP floor,
    the floor in one hop (its three statements alone, in the worker thread the SDK hops to
    anyway: the least the promises can add) and turnkit's steps straight in that one hop
    (``server.mcp_rows`` describes each); turnkit ÷ ``MCPServer`` against ``server.MCP_TARGET``,
    and each other server ÷ ``MCPServer``."""
    calls = QUICK_MCP_CALLS if quick else MCP_CALLS
    with tempfile.TemporaryDirectory(prefix="turnkit-bench-") as folder:
        ledger, floor_db = f"{folder}/ledger.sqlite", f"{folder}/floor.sqlite"
        secret, floor_secret = server.prepared(ledger), _floor.make_key(floor_db)
        one_hop_db, straight_db = f"{folder}/one-hop.sqlite", f"{folder}/straight.sqlite"
        one_hop_secret, straight_secret = _floor.make_key(one_hop_db), server.prepared(straight_db)
        contenders = {  # name: (command, ready path, environment, headers)
            "turnkit": (server.turnkit_command(ledger, 1), "/healthz", {},
                        {"Authorization": f"Bearer {secret}"}),
            "MCPServer": (server.uvicorn_command("bench.server:mcp_peer_app"), "/not-served",
                          {}, {}),
            "MCP floor": (server.uvicorn_command("bench._floor:mcp_floor_app"), "/not-served",
                          {_floor.FLOOR_DB: floor_db}, {"Authorization": f"Bearer {floor_secret}"}),
            "one hop": (server.uvicorn_command("bench._floor:mcp_floor_one_hop_app"),
                        "/not-served", {_floor.FLOOR_DB: one_hop_db},
                        {"Authorization": f"Bearer {one_hop_secret}"}),
            "straight": (server.uvicorn_command("bench.profile_worker:mcp_straight_app"),
                         "/not-served", {profile_worker.STRAIGHT_DB: straight_db},
                         {"Authorization": f"Bearer {straight_secret}"}),
        }  # fmt: skip
        per_call = {}
        for name, (command, ready, env, headers) in contenders.items():
            with ThreadPoolExecutor(2) as pool:
                counts = [
                    pool.submit(served_instructions, command, ready, env, headers, n)
                    for n in (0, calls)
                ]
                alone, loaded = (count.result() for count in counts)
            per_call[name] = (loaded - alone) / calls
    base = per_call["MCPServer"]
    own = per_call["turnkit"] / base
    return [
        _common.row(SCENARIO, "MCP tools/call: turnkit /mcp, instructions per call (÷ MCPServer)",
                    per_call["turnkit"] / 1e3, "k", ratio=own, target=f"<= {server.MCP_TARGET:g}x",
                    met=round(own, 2) <= server.MCP_TARGET),
        _common.row(SCENARIO, "MCP tools/call: SDK MCPServer, instructions per call", base / 1e3,
                    "k"),
        _common.row(SCENARIO, "MCP tools/call: MCP floor, instructions per call (÷ MCPServer)",
                    per_call["MCP floor"] / 1e3, "k", ratio=per_call["MCP floor"] / base),
        _common.row(SCENARIO, "MCP tools/call: turnkit ÷ MCP floor, instructions per call",
                    per_call["turnkit"] / 1e3, "k",
                    ratio=per_call["turnkit"] / per_call["MCP floor"]),
        _common.row(SCENARIO, "MCP tools/call: MCP floor in one hop, the three statements alone,"
                    " instructions per call (÷ MCPServer)", per_call["one hop"] / 1e3, "k",
                    ratio=per_call["one hop"] / base),
        _common.row(SCENARIO, "MCP tools/call: turnkit's steps straight in one hop, instructions"
                    " per call (÷ MCPServer)", per_call["straight"] / 1e3, "k",
                    ratio=per_call["straight"] / base),
    ]  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:  # this script's own children (``per_turn``)
        if len(sys.argv) != 4 or sys.argv[2] not in CONTENDERS or not sys.argv[3].isdigit():
            sys.exit(f"usage: --child {{{'|'.join(CONTENDERS)}}} TURNS (this script's children)")
        turns_in_this_process(sys.argv[2], int(sys.argv[3]))
    else:
        print(_common.format_table(run("--quick" in sys.argv)))
