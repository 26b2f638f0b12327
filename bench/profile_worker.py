"""What a served call's worker thread spends, and on what (diagnostic, no target): the work of
one governed read, in one thread, warm, three ways, and the MCP floor's beside them.

- **turnkit**: the call as a worker thread runs it (``drivers._advance`` over the executor's
  steps, from the key's lookup to the audit row): what ``tools/call`` and the REST invoke hop to.
- **the same steps, straight**: the same step functions, in the pipeline's order, called one
  after the other — the key with the settings, the rights now, the control fields, the input's
  checks and hash, the cost and the hold rule, the charge, the handler under its watchdog, the
  result's checks, the span, the metrics, the log line and the audit row — without the
  generators and effects that let the one pipeline serve every door (sync, async, the graph's
  pauses). What a second, straight implementation for plain reads could save at most.
- **the statements alone**: the key with the settings, the charge and the audit row, as
  turnkit's ledger runs them: what the promises cost in the database, nothing checked.
- **the MCP floor's tool in one hop** (``_floor.one_hop_read``): the floor's own three
  statements, written by hand (one key row, one upsert for the key's budget, a five-column
  audit row in a table keyed by its rowid), and the read: what the statements cost written
  for this one call alone.

Each is timed in CPU of this thread, alternating, best of several rounds (warm caches: a served
call's worker thread runs its work colder, ~1.5-1.9x these figures, ``profile_server.py``'s
thread rows). SQLite only (the statements run on one file, as one worker's do).

    .venv/bin/python bench/profile_worker.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context  # resolved by the SDK from the tool's annotations
from mcp.server.mcpserver.exceptions import ToolError

try:
    from bench import _common
except ModuleNotFoundError:  # run as a script: bench/ is sys.path[0], the repository is not
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench import _common

from bench import _floor
from bench import server as served

ROUNDS, CALLS = 7, 2000
INPUT = {"sku": "TEA-0001"}


def ways(app: Any, secret: str, floor_db: str | None = None) -> dict[str, Callable[[], Any]]:
    """The three ways of one call (see the module doc) on ``app``'s executor, for ``secret``;
    with ``floor_db`` (a SQLite file) a fourth, the MCP floor's tool in one hop."""
    from turnkit.executor import drivers, steps
    from turnkit.executor.answers import Ran
    from turnkit.executor.inline import Watch

    executor, finder = app.state.executor, app.state.find_key
    env, ledger = executor._env, executor.ledger
    run_straight = straight(app)

    def turnkit() -> Any:
        work = executor._resolved_steps(finder(secret), served.TOOL, dict(INPUT), None, False,
                                        None)  # fmt: skip
        first = work.send(None)
        done, answer = drivers._advance(work, env, first, threading.Event(), Watch(_nothing))
        _expect(done and isinstance(answer, Ran), answer)
        return answer

    def statements() -> Any:
        found = finder.find(secret)
        _expect(not isinstance(found, str), found)
        now = time.time()
        window = steps.window_start(now, 60.0)
        _expect(ledger.charge_all(steps.budgets(found.caller), window, 1, 10**9), "charged")
        ledger.audit(at=now, caller=found.caller.identity, tool=served.TOOL, status="ok",
                     code=None, duration_ms=0.1)  # fmt: skip

    found = {
        "turnkit": turnkit,
        "straight": lambda: run_straight(secret, dict(INPUT)),
        "statements": statements,
    }
    if floor_db is not None:  # the floor's own statements, on its own file
        floor, floor_secret = _floor.store(floor_db), _floor.make_key(floor_db)
        found["floor"] = lambda: _floor.one_hop_read(floor, floor_secret, INPUT["sku"])
    return found


def straight(app: Any) -> Callable[[str, dict[str, Any]], Any]:
    """A plain read by a key through the pipeline's step functions called one after the other
    (see the module doc), on ``app``'s executor: ``(secret, input) -> answer``. Bench only: it
    keeps a plain read's promises and nothing else (no idempotency, no hold, no approval)."""
    from turnkit.executor import drivers, pipeline, steps, tracing
    from turnkit.executor.effects import RunHandler
    from turnkit.executor.inline import Watch, run_inline
    from turnkit.registry.context import CallContext
    from turnkit.registry.visibility import hidden_reason

    executor, finder = app.state.executor, app.state.find_key
    env, ledger, registry = executor._env, executor.ledger, executor.registry
    tool = registry.get(served.TOOL)

    def run(secret: str, input: dict[str, Any]) -> Any:
        found = finder.find(secret)
        if isinstance(found, str):
            raise ValueError(found)
        caller, started = found.caller, time.perf_counter()
        settings = executor.settings_with(found.overrides or {})
        call = executor._call(caller, served.TOOL, input, None, found.allow, settings, None,
                              False)  # fmt: skip
        span = call.span = tracing.call_started(call)
        permissions = env.permissions(caller)
        hidden = hidden_reason(caller, tool, permissions=permissions, settings=settings,
                               enabled=registry.is_enabled, allow=found.allow)  # fmt: skip
        _expect(hidden is None, hidden)
        _expect(steps.control_error(call.control) is None, "no control fields")
        failure, text = steps.input_error(tool, call.input, settings)
        value = steps.normalised(text)
        _expect(failure is None, failure)
        _expect(steps.too_many_items(tool, value) is None, "short lists")
        ctx = CallContext(caller=caller, tool=tool, permissions=permissions, settings=settings,
                          call_id=call.call_id, dry_run=True,
                          idempotency_key=None)  # fmt: skip
        steps.input_hash(text)
        cost = steps.cost_of(tool, value)
        _expect(not steps.needs_hold(tool, caller, value, ctx), "not held")
        now = env.clock()
        window = steps.window_start(now, settings.rate_limit_window)
        if not ledger.charge_all(steps.budgets(caller), window, cost, settings.rate_limit_units):
            raise ValueError("rate limit reached")
        handler = RunHandler(tool.handler, value, ctx, settings.handler_timeout, span)
        outcome = run_inline(handler, Watch(_nothing), drivers._to_completion)
        answer = pipeline._result_answer(call, tool, outcome, settings)
        row = {"at": env.clock(), "caller": caller.identity, "tool": tool.name, "status": "ok",
               "code": None, "duration_ms": (time.perf_counter() - started) * 1000,
               "confirmation_id": None, "detail": None}  # fmt: skip
        tracing.call_ended(call, answer, span, row)
        ledger.audit(**row)
        return answer

    return run


def mcp_straight_app() -> Any:
    """The same steps straight as an MCP server: the SDK's ``MCPServer`` whose sync tool, in
    the one worker thread the SDK hops to, runs ``straight`` for the request's bearer, on the
    turnkit ledger ``TURNKIT_BENCH_STRAIGHT_DB`` names (``served.prepared``). What a plain read
    with turnkit's promises costs over a bare ``MCPServer`` without turnkit's driver and its
    ASGI stack: ``bench/server.py`` serves it beside the floors."""
    from mcp.server import MCPServer

    from bench._common import READ_TOOL, get_item
    from bench._floor import bearer_of
    from bench.profile_server import turnkit_app

    run = straight(turnkit_app(os.environ[STRAIGHT_DB]))
    server = MCPServer("straight", log_level="WARNING")

    def bench_get_item(sku: str, ctx: Context) -> dict[str, Any]:
        scope = ctx.request_context.request.scope  # type: ignore[union-attr]
        try:
            answer = run(bearer_of(scope), {"sku": sku})
        except ValueError as refused:  # the key is refused: an error result, as the floors
            raise ToolError(str(refused)) from None
        return answer.result  # type: ignore[no-any-return]

    server.tool(name=READ_TOOL, description=get_item.__doc__)(bench_get_item)
    return server.streamable_http_app(json_response=True, stateless_http=True)


STRAIGHT_DB = "TURNKIT_BENCH_STRAIGHT_DB"
"""The environment variable naming ``mcp_straight_app``'s ledger (a SQLite file)."""


def _expect(condition: object, what: object) -> None:
    """Stop the profile when a way answered otherwise than a plain read's success (not an
    ``assert``: ``python -O`` would skip the checks it times)."""
    if not condition:
        raise RuntimeError(f"unexpected: {what!r:.300}")


def _nothing() -> None:
    """A watch's take-over: a warm read never runs past its timeout here."""


def cpu_seconds(calls: dict[str, Callable[[], Any]]) -> dict[str, float]:
    """Each way's CPU seconds a call in this thread, best of ``ROUNDS`` alternating rounds."""
    best: dict[str, float] = {}
    for _ in range(ROUNDS):
        for name, call in calls.items():
            started = time.thread_time()
            for _ in range(CALLS):
                call()
            spent = (time.thread_time() - started) / CALLS
            best[name] = min(best.get(name, spent), spent)
    return best


def rows(app: Any, secret: str, floor_db: str) -> list[dict[str, Any]]:
    """The table rows: each way's µs a call, and what the steps and the driver add."""
    calls = ways(app, secret, floor_db)
    for call in calls.values():  # warm: the key's first use, the caches, the statements
        for _ in range(200):
            call()
    us = {name: seconds * 1e6 for name, seconds in cpu_seconds(calls).items()}
    name = "worker's work of a read, warm"
    return [
        _common.row("profile", f"{name}: turnkit (÷ the same steps straight)", us["turnkit"],
                    "µs", ratio=us["turnkit"] / us["straight"]),
        _common.row("profile", f"{name}: the same steps straight (÷ statements alone)",
                    us["straight"], "µs", ratio=us["straight"] / us["statements"]),
        _common.row("profile", f"{name}: the statements alone (key, charge, audit; ÷ the"
                    " floor's)", us["statements"], "µs", ratio=us["statements"] / us["floor"]),
        _common.row("profile", f"{name}: the MCP floor's tool in one hop (its three statements"
                    " and the read)", us["floor"], "µs"),
        _common.row("profile", f"{name}: what the driver adds (turnkit - straight)",
                    us["turnkit"] - us["straight"], "µs"),
    ]  # fmt: skip


def main() -> list[dict[str, Any]]:
    from bench.profile_server import turnkit_app

    with tempfile.TemporaryDirectory(prefix="turnkit-profile-") as folder:
        db = f"{folder}/ledger.sqlite"
        secret = served.prepared(db)
        return rows(turnkit_app(db), secret, f"{folder}/floor.sqlite")


if __name__ == "__main__":
    print(_common.format_table(main()))
