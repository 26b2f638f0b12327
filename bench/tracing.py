"""The price of observing: a turn and a REST call with tracing removed, API only, and the SDK on.

Three states of the same code (``_tracing_modes.py``): **removed** (the executor's calls into
``turnkit.observe`` stubbed out: the path before observing existed), **API only** (what every
user gets without an SDK: no-op spans, instruments without a provider), and **SDK** (the
OpenTelemetry SDK recording every span into an in-memory exporter through a
``SimpleSpanProcessor``, so the whole export cost is paid in the call).

- **Turn**: ``build_turn_graph`` on the public read, ``InMemorySaver``, one process switching
  state batch by batch (interleaved: a burst of load hits the three alike).
- **REST invoke**: ``turnkit serve --workers 1`` in three processes (``_traced_serve.py``), one
  per state, called one at a time by keep-alive clients, batches interleaved.

Targets (issue 29): API only ÷ removed within noise (≤ 1.03x); SDK ÷ removed ≤ 1.10x.

    .venv/bin/python bench/tracing.py [--quick]
"""

from __future__ import annotations

import json
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

try:
    from bench import _common
except ModuleNotFoundError:  # run as a script: bench/ is sys.path[0], the repository is not
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench import _common

import httpx
from langgraph.checkpoint.memory import InMemorySaver

from bench import _tracing_modes, server, turn_overhead
from turnkit.graph import build_turn_graph

SCENARIO = "tracing"
API_LIMIT, SDK_LIMIT = 1.03, 1.10


def _target(ratio: float, limit: float) -> dict[str, Any]:
    return {"ratio": ratio, "target": f"<= {limit:g}x", "met": ratio <= limit}


def turn_rows(quick: bool) -> list[dict[str, Any]]:
    """A turn in each state, in one process."""
    _tracing_modes.install()
    executor = _common.turnkit_executor()
    try:
        graph = build_turn_graph(executor, _common.EndlessModel(), checkpointer=InMemorySaver())
        turn = turn_overhead.graph_turn(
            graph, "traced", threads=True, context=turn_overhead.CONTEXT
        )

        def in_mode(mode: str) -> server.Call:
            counter = iter(range(10**9))

            def call() -> None:
                _tracing_modes.use(mode)
                turn(next(counter))

            return call

        batch, batches, warmup = (10, 4, 5) if quick else (25, 10, 20)
        seconds = server.interleaved(
            {mode: in_mode(mode) for mode in _tracing_modes.MODES}, batch, batches, warmup
        )
        if _tracing_modes.recorded() == 0:
            raise RuntimeError("the SDK recorded no span: the sdk state measured nothing")
    finally:
        _tracing_modes.use("removed")
        executor.close()
    return _rows("turn (memory saver)", seconds, "µs per turn")


def rest_rows(quick: bool) -> list[dict[str, Any]]:
    """A REST invoke against a server in each state."""
    with tempfile.TemporaryDirectory(prefix="turnkit-bench-") as folder, ExitStack() as stack:
        clients = {}
        for mode in _tracing_modes.MODES:
            db = str(Path(folder) / f"{mode}.sqlite")
            secret = server.prepared(db)
            command = server.turnkit_command(db, 1)
            command = [sys.executable, str(Path(__file__).with_name("_traced_serve.py")), mode,
                       *command[1:]]  # fmt: skip
            url = stack.enter_context(server.serving(command, "/healthz"))
            headers = {"Authorization": f"Bearer {secret}"}
            client = stack.enter_context(httpx.Client(base_url=url, headers=headers, timeout=30))
            clients[mode] = server.rest_call(client)
        batch, batches, warmup = (20, 4, 10) if quick else (100, 10, 50)
        seconds = server.interleaved(clients, batch, batches, warmup)
    return _rows("REST invoke", seconds, "µs per call")


def _rows(what: str, seconds: dict[str, float], unit: str) -> list[dict[str, Any]]:
    removed, api, sdk = (seconds[mode] for mode in _tracing_modes.MODES)
    return [
        _common.row(SCENARIO, f"{what}: tracing removed", removed * 1e6, unit),
        _common.row(SCENARIO, f"{what}: API only, no SDK (÷ removed)", api * 1e6, unit,
                    **_target(api / removed, API_LIMIT)),
        _common.row(SCENARIO, f"{what}: SDK, in-memory exporter (÷ removed)", sdk * 1e6, unit,
                    **_target(sdk / removed, SDK_LIMIT)),
    ]  # fmt: skip


def run(quick: bool = False) -> list[dict[str, Any]]:
    """The turn's rows, then the REST rows."""
    return turn_rows(quick) + rest_rows(quick)


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    rows = run(quick)
    print(_common.format_table(rows))
    if "--json" in sys.argv:
        print(json.dumps(rows))
