"""The price of observing: a turn and a REST call with tracing removed, API only, and the SDK on.

Three states of the same code (``_tracing_modes.py``): **removed** (the executor's calls into
``turnkit.observe`` stubbed out: the path before observing existed), **API only** (what every
user gets without an SDK: no-op spans, instruments without a provider), and **SDK** (the
OpenTelemetry SDK recording every span into an in-memory exporter through a
``SimpleSpanProcessor``, so the whole export cost is paid in the call).

- **Turn**: ``build_turn_graph`` on the public read, ``InMemorySaver``, one process switching
  state batch by batch (interleaved: a burst of load hits the three alike).
- **REST invoke**: one ``turnkit serve --workers 1`` (``_traced_serve.py``) whose requests each
  choose the state (a header), called one at a time by keep-alive clients, batches interleaved;
  the three states without a line per call on stderr (the default), and the API only with it
  (``--log-format text``), whose ratio to the API only without it is the price of that line.
  With the SDK on, FastAPI (0.165) opens spans of its own (the request, its dependencies, its
  endpoint): "SDK ÷ removed" pays for them too; "SDK, turnkit's own" divides by the SDK on with
  turnkit's calls stubbed out, the price of turnkit's spans alone.
  Spans are turnkit's only (no HTTP server span: the FastAPI instrumentation is OpenTelemetry's
  own cost, the same for any FastAPI app).

Each ratio is the median of batch-by-batch ratios (a batch over the "removed" batch run moments
before it), so a slow spell of the machine moves both sides.

Targets (issue 29): API only ÷ removed within noise (≤ 1.03x); SDK ÷ removed ≤ 1.10x.

    .venv/bin/python bench/tracing.py [--quick]
"""

from __future__ import annotations

import gc
import json
import sys
import tempfile
import time
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
LOGGED = "api+log"
Times = dict[str, list[float]]
API_LIMIT, SDK_LIMIT = 1.03, 1.10


def _target(ratio: float, limit: float) -> dict[str, Any]:
    return {"ratio": ratio, "target": f"<= {limit:g}x", "met": ratio <= limit}


def paired(calls: dict[str, server.Call], batch: int, batches: int, warmup: int) -> Times:
    """Seconds per call of each contender, batch by batch, the contenders' batches alternating
    (a slow spell of the shared machine falls on neighbouring batches of all of them), in an
    order that turns round each round, garbage collected before each batch."""
    for call in calls.values():
        for _ in range(warmup):
            call()
    times: Times = {name: [] for name in calls}
    names = list(calls)
    for round_ in range(batches):
        shift = round_ % len(names)  # each contender goes first as often as the others
        for name in names[shift:] + names[:shift]:
            gc.collect()  # one batch's garbage is not the next one's to collect
            call = calls[name]
            start = time.perf_counter()
            for _ in range(batch):
                call()
            times[name].append((time.perf_counter() - start) / batch)
    return times


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

        sizes = (10, 6, 5) if quick else (10, 40, 20)
        times = paired({mode: in_mode(mode) for mode in _tracing_modes.MODES}, *sizes)
        if _tracing_modes.recorded() == 0:
            raise RuntimeError("the SDK recorded no span: the sdk state measured nothing")
    finally:
        _tracing_modes.use("removed")
        executor.close()
    return _rows("turn (memory saver)", times, "µs per turn")


def rest_rows(quick: bool) -> list[dict[str, Any]]:
    """A REST invoke in each state, from one server (``_traced_serve.py``) that each request
    switches; and with the API only and the default line per call (``--log-format text``)."""
    with tempfile.TemporaryDirectory(prefix="turnkit-bench-") as folder, ExitStack() as stack:
        db = str(Path(folder) / "ledger.sqlite")
        secret = server.prepared(db)
        command = server.turnkit_command(db, 1)
        command = [sys.executable, str(Path(__file__).with_name("_traced_serve.py")),
                   *command[1:], "--log-format", "text"]  # fmt: skip
        url = stack.enter_context(server.serving(command, "/healthz", quiet=True))
        clients = {}
        for mode in (*_tracing_modes.MODES, _tracing_modes.SDK_ONLY, LOGGED):
            headers = {"Authorization": f"Bearer {secret}", "x-bench-tracing": mode}
            client = stack.enter_context(httpx.Client(base_url=url, headers=headers, timeout=30))
            clients[mode] = server.rest_call(client)
        sizes = (20, 6, 10) if quick else (20, 60, 50)
        times = paired(clients, *sizes)
    rows = _rows("REST invoke", times, "µs per call")
    own = _common.median(
        [a / b for a, b in zip(times["sdk"], times[_tracing_modes.SDK_ONLY], strict=True)]
    )
    rows.append(_common.row(SCENARIO, "REST invoke: SDK, turnkit's own spans (÷ SDK, turnkit's"
                            " removed: FastAPI's spans only)", _common.median(times["sdk"]) * 1e6,
                            "µs per call", **_target(own, SDK_LIMIT)))  # fmt: skip
    logged = _common.median(times[LOGGED]) * 1e6
    ratio = _common.median([a / b for a, b in zip(times[LOGGED], times["api"], strict=True)])
    rows.append(_common.row(SCENARIO, "REST invoke: API only + a text log line a call (÷ no line)",
                            logged, "µs per call", ratio=ratio))  # fmt: skip
    return rows


def _rows(what: str, times: Times, unit: str) -> list[dict[str, Any]]:
    """Each state's median time, and the median of its batch-by-batch ratio to "removed"."""

    def ratio(mode: str) -> float:
        return _common.median([a / b for a, b in zip(times[mode], times["removed"], strict=True)])

    removed, api, sdk = (_common.median(times[mode]) for mode in _tracing_modes.MODES)
    return [
        _common.row(SCENARIO, f"{what}: tracing removed", removed * 1e6, unit),
        _common.row(SCENARIO, f"{what}: API only, no SDK (÷ removed)", api * 1e6, unit,
                    **_target(ratio("api"), API_LIMIT)),
        _common.row(SCENARIO, f"{what}: SDK, in-memory exporter (÷ removed)", sdk * 1e6, unit,
                    **_target(ratio("sdk"), SDK_LIMIT)),
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
