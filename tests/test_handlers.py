"""Handlers under the executor (docs/architecture.md §4, steps 9-10): failures become generic
answers with the detail kept in the log and the audit row, hung handlers time out, results are
checked, sync and async handlers run in the right place, and the handler sees its call's context."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from turnkit import CallContext, Caller, Executor, Registry, Settings

TIMEOUT = 0.2
BOUND = 30.0
"""The longest any handler in these tests waits for its release (a guard, never reached)."""


class Lab:
    """A module made of whatever tools a test declares."""

    key = "lab"

    def __init__(self, tools: list[dict]) -> None:
        self._tools = tools

    def api_tools(self) -> list[dict]:
        return self._tools


def tool(name: str, handler: Callable[..., Any], **fields: Any) -> dict:
    """A declaration of a read-only lab tool (pass ``annotations={}`` for a write)."""
    return {
        "name": name,
        "scope": "lab.things:write",
        "permission": "shop.manage",
        "handler": handler,
        "annotations": {"read_only": True},
        "input_schema": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"n": {"type": "integer"}},
        },
        **fields,
    }


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at teardown: lets every hanging handler of the test finish."""
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture(params=["given", "memory"])
def lab_ledger(request, ledger) -> Any:
    """The test's ledger (SQLite file, PostgreSQL), or a ``MemoryLedger``: async calls then stay
    on the event loop and hand a sync handler to the handler pool from there."""
    from turnkit import MemoryLedger

    return ledger if request.param == "given" else MemoryLedger()


@pytest.fixture
def lab(lab_ledger, rights, clock, release) -> Iterator[Callable[..., Executor]]:
    """Build an executor on the test's ledger over a module of the given tools."""
    made: list[Executor] = []

    def make(*tools: dict, **settings: Any) -> Executor:
        executor = Executor(
            Registry([Lab(list(tools))]),
            ledger=lab_ledger,
            permissions=rights,
            settings=Settings(**{"handler_timeout": TIMEOUT, **settings}),
            clock=clock,
        )
        assert executor.registry.warnings == ()
        made.append(executor)
        return executor

    yield make
    release.set()
    for executor in made:
        executor.close()


@pytest.fixture
def lab_key() -> Caller:
    return Caller.key("lab-key", user_id="alice", scopes={"lab.things:write"})


def assert_error(answer: dict, code: str) -> dict:
    assert answer["executed"] is False
    assert answer["status"] == "error"
    assert answer["error"]["code"] == code, answer["error"]
    return answer["error"]


def only_audit_row(executor: Executor) -> dict:
    rows = executor.ledger.audit_rows()
    assert len(rows) == 1, rows
    return rows[0]


def raiser(exc: BaseException) -> Callable[[dict, Any], Any]:
    def handler(input: dict, ctx: Any) -> Any:
        raise exc

    return handler


# --- a handler that raises --------------------------------------------------------------------


def test_a_handler_that_raises_answers_a_generic_internal_error(
    lab, lab_key, caplog, expect_errors
):
    expect_errors(
        "tool 'lab.run_boom' raised"
    )  # the handler fails on purpose: its detail goes to the log
    executor = lab(tool("lab.run_boom", raiser(RuntimeError("db password is hunter2"))))
    with caplog.at_level(logging.ERROR, logger="turnkit.executor"):
        answer = executor.execute(lab_key, "lab.run_boom", {})

    error = assert_error(answer, "internal_error")
    text = json.dumps(answer)
    assert "hunter2" not in text
    assert "RuntimeError" not in text
    assert set(error["details"]) == {"call_id"}
    assert error["details"]["call_id"] in error["message"]
    row = only_audit_row(executor)
    assert (row["status"], row["code"]) == ("error", "internal_error")
    assert row["detail"] == "RuntimeError: db password is hunter2"
    logged = [r for r in caplog.records if r.name == "turnkit.executor"]
    assert len(logged) == 1
    assert logged[0].levelno == logging.ERROR
    assert isinstance(logged[0].exc_info[1], RuntimeError)
    assert error["details"]["call_id"] in logged[0].getMessage()
    assert "hunter2" in caplog.text


async def test_an_async_handler_that_raises_answers_a_generic_internal_error(
    lab, lab_key, caplog, expect_errors
):
    expect_errors(
        "tool 'lab.run_boom' raised"
    )  # the handler fails on purpose: its detail goes to the log

    async def boom(input: dict, ctx: Any) -> Any:
        await asyncio.sleep(0)
        raise KeyError("secret-row-17")

    executor = lab(tool("lab.run_boom", boom))
    with caplog.at_level(logging.ERROR, logger="turnkit.executor"):
        answer = await executor.aexecute(lab_key, "lab.run_boom", {})
        sync_answer = executor.execute(lab_key, "lab.run_boom", {})

    for one in (answer, sync_answer):
        assert_error(one, "internal_error")
        assert "secret-row-17" not in json.dumps(one)
    details = [row["detail"] for row in executor.ledger.audit_rows()]
    assert details == ["KeyError: 'secret-row-17'"] * 2
    assert caplog.text.count("secret-row-17") >= 2


class _Stop(BaseException):
    """An interrupt raised inside a handler (as ``SystemExit`` is), not a failure of it."""


async def test_an_interrupt_raised_by_a_sync_handler_goes_on_up_on_both_paths(lab, lab_key):
    """Not answered as the handler's failure: it goes on up, sync and async, whichever ledger.
    The handler ran (its write may have happened), so its key is kept, as after a crash: a
    repeat waits for an outcome (``in_progress``), and gets ``outcome_unknown`` once the call is
    stale; it never runs the write again."""
    executor = lab(tool("lab.run_boom", raiser(_Stop("stop"))))
    with pytest.raises(_Stop):
        await executor.aexecute(lab_key, "lab.run_boom", {}, {"idempotency_key": "a"})
    with pytest.raises(_Stop):
        executor.execute(lab_key, "lab.run_boom", {}, {"idempotency_key": "s"})
    for key in ("a", "s"):
        record = executor.ledger.get_idempotency(lab_key.identity, "lab.run_boom", key)
        assert record is not None
        assert record.state == "running"


async def test_an_interrupt_before_the_handler_releases_the_key_on_both_paths(lab, lab_key):
    """An interrupt raised by the application's code before the handler (here a cost function)
    goes on up and the call cleans up as one that never ran: its key is released, sync and
    async (where the worker thread that ran the cost function unwinds the steps)."""

    def cost(input: dict) -> int:
        raise _Stop("stop")

    executor = lab(tool("lab.run_boom", raiser(RuntimeError("never runs")), cost=cost))
    with pytest.raises(_Stop):
        await executor.aexecute(lab_key, "lab.run_boom", {}, {"idempotency_key": "a"})
    with pytest.raises(_Stop):
        executor.execute(lab_key, "lab.run_boom", {}, {"idempotency_key": "s"})
    for key in ("a", "s"):
        assert executor.ledger.get_idempotency(lab_key.identity, "lab.run_boom", key) is None


def test_a_long_exception_message_is_cut_in_the_audit_row(lab, lab_key, expect_errors):
    expect_errors("tool 'lab.run_boom' raised")  # the handler fails on purpose
    executor = lab(tool("lab.run_boom", raiser(ValueError("x" * 100_000))))
    assert_error(executor.execute(lab_key, "lab.run_boom", {}), "internal_error")
    detail = only_audit_row(executor)["detail"]
    assert detail.startswith("ValueError: xxx")
    assert len(detail) <= 2000


# --- a handler that hangs ---------------------------------------------------------------------


def test_a_sync_handler_that_hangs_answers_timeout_through_execute(
    lab, lab_key, release, expect_errors
):
    expect_errors("'lab.run_hang': handler ran longer than 0.2 s")  # a timeout is logged
    started = threading.Event()

    def hang(input: dict, ctx: Any) -> dict:
        started.set()
        release.wait(BOUND)
        return {"late": True}

    executor = lab(tool("lab.run_hang", hang))
    begun = time.monotonic()
    answer = executor.execute(lab_key, "lab.run_hang", {})
    elapsed = time.monotonic() - begun

    error = assert_error(answer, "timeout")
    assert started.is_set()
    assert not release.is_set()  # the handler is still hanging: the answer did not wait for it
    assert TIMEOUT <= elapsed < 5
    assert "0.2" in error["message"]
    assert set(error["details"]) == {"call_id"}
    row = only_audit_row(executor)
    assert row["code"] == "timeout"
    assert "0.2" in row["detail"]


async def test_a_sync_handler_that_hangs_answers_timeout_through_aexecute(
    lab, lab_key, release, expect_errors
):
    expect_errors("'lab.run_hang': handler ran longer than 0.2 s")  # a timeout is logged
    started = threading.Event()

    def hang(input: dict, ctx: Any) -> dict:
        started.set()
        release.wait(BOUND)
        return {"late": True}

    executor = lab(tool("lab.run_hang", hang))
    begun = time.monotonic()
    answer = await executor.aexecute(lab_key, "lab.run_hang", {})
    assert time.monotonic() - begun < 5
    assert_error(answer, "timeout")
    assert started.is_set()
    assert only_audit_row(executor)["code"] == "timeout"
    release.set()  # the handler hangs in the event loop's executor: closing the loop waits for it


async def test_an_async_handler_that_hangs_answers_timeout_through_aexecute(
    lab, lab_key, expect_errors
):
    expect_errors("'lab.run_hang': handler ran longer than 0.2 s")  # a timeout is logged
    seen: list[str] = []

    async def hang(input: dict, ctx: Any) -> dict:
        seen.append("started")
        try:
            await asyncio.Event().wait()  # never set: only the timeout ends it
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return {"late": True}

    executor = lab(tool("lab.run_hang", hang))
    begun = time.monotonic()
    answer = await executor.aexecute(lab_key, "lab.run_hang", {})
    assert time.monotonic() - begun < 5

    assert_error(answer, "timeout")
    assert seen == ["started", "cancelled"]
    row = only_audit_row(executor)
    assert (row["code"], row["detail"]) == ("timeout", "handler ran longer than 0.2 s")


async def test_an_async_sleep_forever_is_cancelled_at_the_timeout(lab, lab_key, expect_errors):
    expect_errors("'lab.run_sleep': handler ran longer than 0.2 s")  # a timeout is logged

    async def sleep_forever(input: dict, ctx: Any) -> dict:
        await asyncio.sleep(math.inf)
        return {}

    executor = lab(tool("lab.run_sleep", sleep_forever))
    assert_error(await executor.aexecute(lab_key, "lab.run_sleep", {}), "timeout")
    assert only_audit_row(executor)["code"] == "timeout"


def test_a_callable_returning_a_coroutine_times_out_through_execute(
    lab, lab_key, release, expect_errors
):
    expect_errors("'lab.run_slow': handler ran longer than 0.2 s")  # a timeout is logged

    class Slow:
        async def __call__(self, input: dict, ctx: Any) -> dict:
            release.wait(1.0)  # ends by itself well after the 0.2 s timeout
            return {"late": True}

    executor = lab(tool("lab.run_slow", Slow()))
    assert_error(executor.execute(lab_key, "lab.run_slow", {}), "timeout")


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_handler_raising_timeout_error_is_an_internal_error(
    lab, lab_key, kind, expect_errors
):
    expect_errors(
        "tool 'lab.run_upstream' raised .*TimeoutError: upstream"
    )  # the handler fails on purpose

    async def async_raise(input: dict, ctx: Any) -> Any:
        raise TimeoutError("upstream socket timed out")

    handler = raiser(TimeoutError("upstream socket timed out")) if kind == "sync" else async_raise
    executor = lab(tool("lab.run_upstream", handler))
    if kind == "sync":
        answer = executor.execute(lab_key, "lab.run_upstream", {})
    else:
        answer = await executor.aexecute(lab_key, "lab.run_upstream", {})
    assert_error(answer, "internal_error")
    assert "upstream socket timed out" in only_audit_row(executor)["detail"]


# --- results that are not JSON, or break output_schema ----------------------------------------


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        (object(), "not JSON serializable"),
        ({1, 2}, "not JSON serializable"),
        (math.nan, "Out of range float"),
        ({"rows": [1.0, math.inf]}, "Out of range float"),
        ({"when": b"bytes"}, "not JSON serializable"),
        ({"nested": {"deep": object()}}, "not JSON serializable"),
    ],
    ids=["object", "set", "nan", "inf-in-list", "bytes", "nested-object"],
)
def test_a_handler_returning_non_json_answers_internal_error(
    lab, lab_key, caplog, result, reason, expect_errors
):
    expect_errors(
        "'lab.get_odd': handler returned a value that is not JSON"
    )  # a handler's bug is logged
    executor = lab(tool("lab.get_odd", lambda input, ctx: result))
    with caplog.at_level(logging.ERROR, logger="turnkit.executor"):
        answer = executor.execute(lab_key, "lab.get_odd", {})
    assert_error(answer, "internal_error")
    json.dumps(answer, allow_nan=False)
    detail = only_audit_row(executor)["detail"]
    assert detail.startswith("handler returned a value that is not JSON")
    assert reason in detail
    assert "not JSON" in caplog.text


async def test_a_non_json_result_through_aexecute_answers_internal_error(
    lab, lab_key, expect_errors
):
    expect_errors(
        "'lab.get_odd': handler returned a value that is not JSON"
    )  # a handler's bug is logged

    async def odd(input: dict, ctx: Any) -> Any:
        return {"tags": {"a", "b"}}

    executor = lab(tool("lab.get_odd", odd))
    assert_error(await executor.aexecute(lab_key, "lab.get_odd", {}), "internal_error")
    assert "not JSON" in only_audit_row(executor)["detail"]


OUTPUT_SCHEMA = {
    "type": "object",
    "required": ["count"],
    "additionalProperties": False,
    "properties": {"count": {"type": "integer", "minimum": 0}},
}


@pytest.mark.parametrize(
    "result",
    [{"count": "three"}, {}, {"count": -1}, {"count": 1, "extra": True}, [1, 2], None],
    ids=["wrong-type", "missing", "below-minimum", "extra-field", "array", "null"],
)
def test_a_result_breaking_output_schema_answers_internal_error(
    lab, lab_key, caplog, result, expect_errors
):
    expect_errors(
        "bug in tool 'lab.get_count': result breaks output_schema"
    )  # a handler's bug is logged
    executor = lab(tool("lab.get_count", lambda input, ctx: result, output_schema=OUTPUT_SCHEMA))
    with caplog.at_level(logging.ERROR, logger="turnkit.executor"):
        answer = executor.execute(lab_key, "lab.get_count", {})
    error = assert_error(answer, "internal_error")
    assert "output_schema" not in error["message"]
    assert only_audit_row(executor)["detail"].startswith("result breaks output_schema")
    assert "bug in tool 'lab.get_count'" in caplog.text


def test_a_result_matching_output_schema_passes(lab, lab_key):
    executor = lab(
        tool("lab.get_count", lambda input, ctx: {"count": input["n"]}, output_schema=OUTPUT_SCHEMA)
    )
    answer = executor.execute(lab_key, "lab.get_count", {"n": 3})
    assert answer == {"executed": True, "status": "ok", "result": {"count": 3}}
    row = only_audit_row(executor)
    assert (row["status"], row["code"], row["detail"]) == ("ok", None, None)


# --- sync and async handlers, and where they run ----------------------------------------------


async def test_an_async_handler_works_with_execute_and_aexecute(lab, lab_key):
    async def double(input: dict, ctx: Any) -> dict:
        await asyncio.sleep(0)
        return {"double": input["n"] * 2}

    # not about timeouts: a new event loop in a pool thread took over 0.2 s on a loaded CI box
    executor = lab(tool("lab.get_double", double), handler_timeout=10)
    assert executor.execute(lab_key, "lab.get_double", {"n": 2}) == {
        "executed": True,
        "status": "ok",
        "result": {"double": 4},
    }
    assert await executor.aexecute(lab_key, "lab.get_double", {"n": 5}) == {
        "executed": True,
        "status": "ok",
        "result": {"double": 10},
    }
    assert [row["status"] for row in executor.ledger.audit_rows()] == ["ok", "ok"]


def test_an_async_handler_works_with_execute_outside_any_event_loop(lab, lab_key):
    async def echo(input: dict, ctx: Any) -> dict:
        await asyncio.sleep(0)
        return {"n": input["n"]}

    executor = lab(tool("lab.get_echo", echo), handler_timeout=10)  # see the test above
    assert executor.execute(lab_key, "lab.get_echo", {"n": 7})["result"] == {"n": 7}


async def test_a_sync_handler_under_aexecute_runs_off_the_event_loop_thread(lab, lab_key):
    where: list[tuple[int, str]] = []

    def record(input: dict, ctx: Any) -> dict:
        current = threading.current_thread()
        where.append((threading.get_ident(), current.name))
        return {}

    executor = lab(tool("lab.get_thread", record))
    loop_thread = threading.get_ident()
    assert (await executor.aexecute(lab_key, "lab.get_thread", {}))["status"] == "ok"
    assert len(where) == 1
    ident, _ = where[0]
    assert ident != loop_thread  # the call's worker thread (a ledger that blocks) or the pool


async def test_an_async_handler_under_aexecute_runs_on_the_event_loop(lab, lab_key):
    where: list[asyncio.AbstractEventLoop] = []

    async def record(input: dict, ctx: Any) -> dict:
        where.append(asyncio.get_running_loop())
        return {}

    executor = lab(tool("lab.get_loop", record))
    assert (await executor.aexecute(lab_key, "lab.get_loop", {}))["status"] == "ok"
    assert where == [asyncio.get_running_loop()]


def test_a_sync_handler_under_execute_runs_in_a_handler_thread(lab, lab_key):
    where: list[str] = []
    executor = lab(
        tool("lab.get_thread", lambda i, c: where.append(threading.current_thread().name) or {})
    )
    assert executor.execute(lab_key, "lab.get_thread", {})["status"] == "ok"
    assert len(where) == 1
    assert where[0].startswith("turnkit-handler")


async def test_a_hanging_sync_handler_does_not_block_the_event_loop(lab, lab_key, release):
    started = threading.Event()

    def hang(input: dict, ctx: Any) -> dict:
        started.set()
        release.wait(BOUND)
        return {}

    executor = lab(tool("lab.run_hang", hang), handler_timeout=5.0)
    call = asyncio.ensure_future(executor.aexecute(lab_key, "lab.run_hang", {}))
    # the loop keeps running while the handler hangs: this coroutine gets to see it start
    assert await asyncio.to_thread(started.wait, BOUND)
    assert not call.done()
    release.set()
    assert (await asyncio.wait_for(call, BOUND))["status"] == "ok"


# --- the context a handler receives -----------------------------------------------------------


def test_a_handler_receives_the_call_context(lab, lab_key, rights):
    seen: list[CallContext] = []

    def remember(input: dict, ctx: CallContext) -> dict:
        seen.append(ctx)
        return {}

    executor = lab(tool("lab.get_context", remember, annotations={}))
    executor.execute(lab_key, "lab.get_context", {"n": 1})
    executor.execute(lab_key, "lab.get_context", {"n": 1}, {"idempotency_key": "k-1"})

    first, second = seen
    assert isinstance(first, CallContext)
    assert first.caller == lab_key
    assert first.tool.name == "lab.get_context"
    assert first.tool is executor.registry.get("lab.get_context")
    assert first.permissions == frozenset({"shop.view", "shop.manage"})
    assert first.settings.handler_timeout == TIMEOUT
    assert first.dry_run is False
    assert first.confirmation_id is None
    assert (first.idempotency_key, second.idempotency_key) == (None, "k-1")
    assert uuid.UUID(first.call_id)
    assert first.call_id != second.call_id


def test_the_context_permissions_are_read_when_the_call_runs(lab, lab_key, rights):
    seen: list[frozenset[str]] = []
    executor = lab(tool("lab.get_rights", lambda i, ctx: seen.append(ctx.permissions) or {}))
    executor.execute(lab_key, "lab.get_rights", {})
    rights.grant("alice", "lab.extra")
    executor.execute(lab_key, "lab.get_rights", {})
    assert seen == [
        frozenset({"shop.view", "shop.manage"}),
        frozenset({"shop.view", "shop.manage", "lab.extra"}),
    ]


async def test_the_context_call_id_is_the_one_in_the_internal_error(lab, lab_key, expect_errors):
    expect_errors("tool 'lab.run_boom' raised")  # the handler fails on purpose
    seen: list[str] = []

    def boom(input: dict, ctx: CallContext) -> dict:
        seen.append(ctx.call_id)
        raise RuntimeError("broken")

    executor = lab(tool("lab.run_boom", boom))
    sync_error = assert_error(executor.execute(lab_key, "lab.run_boom", {}), "internal_error")
    async_error = assert_error(
        await executor.aexecute(lab_key, "lab.run_boom", {}), "internal_error"
    )
    assert [sync_error["details"]["call_id"], async_error["details"]["call_id"]] == seen
    assert seen[0] != seen[1]
    assert seen[0] in sync_error["message"]


# --- idempotency and a failing handler --------------------------------------------------------


def test_a_handler_that_raises_under_an_idempotency_key_is_replayed_not_rerun(
    lab, lab_key, expect_errors
):
    expect_errors("tool 'lab.set_thing' raised")  # the handler fails on purpose
    runs: list[dict] = []

    def boom(input: dict, ctx: Any) -> dict:
        runs.append(input)
        raise RuntimeError("half-written")

    executor = lab(tool("lab.set_thing", boom, annotations={}))
    control = {"idempotency_key": "order-42"}
    first = executor.execute(lab_key, "lab.set_thing", {"n": 1}, control)
    assert_error(first, "internal_error")

    record = executor.ledger.get_idempotency(lab_key.identity, "lab.set_thing", "order-42")
    assert record.state == "done"
    assert record.answer == first

    again = executor.execute(lab_key, "lab.set_thing", {"n": 1}, control)
    assert again == {**first, "replayed": True}
    assert runs == [{"n": 1}]

    conflict = executor.execute(lab_key, "lab.set_thing", {"n": 2}, control)
    assert_error(conflict, "idempotency_conflict")
    assert runs == [{"n": 1}]
    details = [row["detail"] for row in executor.ledger.audit_rows()]
    assert details.count("RuntimeError: half-written") == 1


async def test_an_async_handler_that_raises_under_a_key_is_replayed_through_aexecute(
    lab, lab_key, expect_errors
):
    expect_errors("tool 'lab.set_thing' raised")  # the handler fails on purpose
    runs: list[int] = []

    async def boom(input: dict, ctx: Any) -> dict:
        runs.append(1)
        raise RuntimeError("nope")

    executor = lab(tool("lab.set_thing", boom, annotations={}))
    control = {"idempotency_key": "k"}
    first = await executor.aexecute(lab_key, "lab.set_thing", {"n": 1}, control)
    assert_error(first, "internal_error")
    again = await executor.aexecute(lab_key, "lab.set_thing", {"n": 1}, control)
    assert again == {**first, "replayed": True}
    assert runs == [1]


def test_a_timed_out_call_under_an_idempotency_key_is_replayed_not_rerun(
    lab, lab_key, release, expect_errors
):
    expect_errors("'lab.set_slow': handler ran longer than 0.2 s")  # a timeout is logged
    runs: list[int] = []

    def hang(input: dict, ctx: Any) -> dict:
        runs.append(1)
        release.wait(BOUND)
        return {}

    executor = lab(tool("lab.set_slow", hang, annotations={}))
    control = {"idempotency_key": "slow-1"}
    first = executor.execute(lab_key, "lab.set_slow", {"n": 1}, control)
    assert_error(first, "timeout")
    again = executor.execute(lab_key, "lab.set_slow", {"n": 1}, control)
    assert again == {**first, "replayed": True}
    assert runs == [1]


# --- failures while recording the outcome -----------------------------------------------------


def test_an_exception_message_with_a_lone_surrogate_still_answers(lab, lab_key, expect_errors):
    expect_errors("tool 'lab.run_boom' raised")  # the handler fails on purpose
    executor = lab(tool("lab.run_boom", raiser(ValueError("bad byte \udc80"))))
    assert_error(executor.execute(lab_key, "lab.run_boom", {}), "internal_error")
    assert len(executor.ledger.audit_rows()) == 1


def test_an_exception_message_with_a_nul_character_still_answers(
    lab, lab_key, request, expect_errors
):
    expect_errors("tool 'lab.run_boom' raised")  # the handler fails on purpose
    executor = lab(tool("lab.run_boom", raiser(ValueError("bad byte \x00"))))
    assert_error(executor.execute(lab_key, "lab.run_boom", {}), "internal_error")
    assert len(executor.ledger.audit_rows()) == 1


def test_a_result_with_a_lone_surrogate_under_a_key_does_not_raise(lab, lab_key):
    runs: list[int] = []

    def odd(input: dict, ctx: Any) -> dict:
        runs.append(1)
        return {"name": "bad \ud800"}

    executor = lab(tool("lab.set_odd", odd, annotations={}))
    answer = executor.execute(lab_key, "lab.set_odd", {"n": 1}, {"idempotency_key": "k"})
    assert answer["status"] in ("ok", "error")
    record = executor.ledger.get_idempotency(lab_key.identity, "lab.set_odd", "k")
    assert record is not None
    assert record.state == "done"


async def test_application_code_never_runs_on_the_event_loop(ledger, rights):
    import asyncio
    import threading

    from turnkit import Caller, Executor, Registry

    loop_thread = threading.get_ident()
    seen: dict[str, int] = {}

    def note(name):
        def run(*args):
            seen[name] = threading.get_ident()
            return name != "danger" and (1 if name == "cost" else True)

        return run

    class Module:
        key = "lab"
        enabled = staticmethod(note("enabled"))

        def api_tools(self):
            return [{"name": "lab.run_job", "audience": "public", "handler": lambda i, c: "ok",
                     "danger": note("danger"), "cost": note("cost")}]  # fmt: skip

    executor = Executor(Registry([Module()]), ledger=ledger, permissions=rights)
    answer = await executor.aexecute(Caller.public(), "lab.run_job", {})
    assert answer["status"] == "ok"
    await executor.avisible_for(Caller.public())
    executor.close()
    assert set(seen) == {"enabled", "danger", "cost"}
    assert loop_thread not in seen.values()
    await asyncio.sleep(0)
