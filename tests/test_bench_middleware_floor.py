"""The floor of ``TurnkitMiddleware`` (``bench/_middleware_floor.py``) keeps the promises it stands
for, in memory, on SQLite and on PostgreSQL: a benchmark against a peer that skipped them would
flatter nobody.

In a real ``create_agent`` run, every call of a bench tool asks the permission provider (a caller
without the permission is refused), checks the input against the tool's schema (bad input is
refused), is charged within the limit (refused when the window is full) and leaves an audit row;
a function that runs past the timeout is answered as such."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool

from conftest import postgres_url
from turnkit import Caller
from turnkit.graph import TurnContext

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: bench/
from bench import _common
from bench import _middleware_floor as floor

U_1 = TurnContext(caller=Caller.session("u_1"))
GOOD = {"sku": "TEA-0001"}


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request, tmp_path):
    """The floor's storage of each benchmark group: a dict and a list, a SQLite file, PostgreSQL."""
    if request.param == "memory":
        found: floor.Store = floor.InMemory()
    elif request.param == "sqlite":
        found = floor.Database(str(tmp_path / "floor.sqlite"))
    else:
        found = floor.Database(postgres_url())
    yield found
    found.close()


def _audit(store: floor.Store) -> list[str]:
    """The statuses of the audit rows, oldest first."""
    if isinstance(store, floor.InMemory):
        return [row[3] for row in store.rows]
    return [row[0] for row in store.read("SELECT status FROM floor_audit ORDER BY id")]


def _charged(store: floor.Store) -> int:
    """The units charged to u_1, over all windows."""
    if isinstance(store, floor.InMemory):
        return sum(units for (who, _), units in store.usage.items() if who == "user:u_1")
    sql = "SELECT coalesce(sum(units), 0) FROM floor_usage WHERE caller = 'user:u_1'"
    return int(store.read(sql)[0][0])


def _turn(
    store: floor.Store,
    args: dict[str, Any],
    *,
    context: TurnContext = U_1,
    tools: list[StructuredTool] | None = None,
    **options: Any,
) -> ToolMessage:
    """One turn of the floor's agent whose model calls the read tool with ``args``; the answer."""

    def call_then_answer(messages: list[Any], _: Any) -> Any:
        if isinstance(messages[-1], ToolMessage):
            return "Done."
        return {"tool_calls": [{"name": _common.READ_TOOL, "args": args}]}

    by_hand = floor.PromisesByHand(_common.permissions, store, **options)
    middleware = [HumanInTheLoopMiddleware({_common.WRITE_TOOL: True}), by_hand]
    agent = create_agent(
        _common.EndlessModel(call_then_answer),
        tools or _common.langchain_tools(),
        middleware=middleware,
    )
    try:
        result = agent.invoke({"messages": [HumanMessage("?")]}, context=context)
    finally:
        by_hand.close()
    (answer,) = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    return answer


def test_each_call_is_charged_and_audited(store):
    for _ in range(3):
        answer = _turn(store, GOOD)
        assert answer.status == "success"
        assert "Green tea" in answer.content
    assert _charged(store) == 3
    assert _audit(store) == ["ok", "ok", "ok"]


def test_a_caller_without_the_permission_is_refused(store):
    stranger = TurnContext(caller=Caller.session("u_2"))
    answer = _turn(store, GOOD, context=stranger)
    assert answer.status == "error"
    assert "lacks the permission 'bench.view'" in answer.content
    assert _charged(store) == 0
    assert _audit(store) == ["refused"]


@pytest.mark.parametrize("args", [{"sku": "tea"}, {}, {"sku": "TEA-0001", "more": 1}])
def test_bad_input_is_refused(store, args):
    answer = _turn(store, args)
    assert answer.status == "error"
    assert "invalid input" in answer.content
    assert _charged(store) == 0
    assert _audit(store) == ["refused"]


def test_a_full_window_refuses_the_call(store, monkeypatch):
    monkeypatch.setattr(floor, "WINDOW", 10**9)  # all three in one window, at any second
    answers = [_turn(store, GOOD, limit=2) for _ in range(3)]
    assert [a.status for a in answers] == ["success", "success", "error"]
    assert "rate limit" in answers[2].content
    assert _charged(store) == 2
    assert _audit(store) == ["ok", "ok", "rate_limited"]


def test_a_function_past_the_timeout_is_answered_as_such(store):
    def slow_item(sku: str) -> dict[str, Any]:
        """Look up one item, slowly."""
        time.sleep(0.5)
        return {"sku": sku}

    slow = [StructuredTool.from_function(slow_item, name=_common.READ_TOOL)]
    answer = _turn(store, GOOD, tools=slow, timeout=0.01)
    assert answer.status == "error"
    assert "did not finish within 0.01 s" in answer.content
    assert _audit(store) == ["timeout"]
