"""Each node and route reads only the channels its view names (``graph/views.py``): LangGraph gives
a node just those channels, so a read outside its view would silently see nothing. Every node and
route is run through turns that touch every path (reads, refusals, a held write approved, one
rejected, one that expired after the user moved on), in every mode, recording what it reads.

Reaches ``turnkit.graph.build``, ``turnkit.graph.routing`` and ``turnkit.graph.views`` directly:
it tests each node's and route's view, which no public name exposes."""

from __future__ import annotations

import functools
import inspect
import typing
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.types import Command

from _shop import prices
from turnkit import Caller
from turnkit.graph import TurnContext, build, routing
from turnkit.graph.views import VIEWS
from turnkit.testing import ScriptedModel

ALICE = TurnContext(caller=Caller.session("alice"))
NODES = {
    "list_tools": ("list_tools", "alist_tools"),
    "call_model": ("call_model", "acall_model"),
    "validate_args": ("validate_args",),
    "execute": ("execute", "aexecute"),
    "fit_results": ("fit_results",),
    "await_confirmation": ("await_confirmation", "aawait_confirmation"),
}
ROUTES = ("after_model", "after_validation", "after_results", "after_confirmation")


class _Reads(dict):  # type: ignore[type-arg]  # a state that notes every key asked for
    def __init__(self, data: dict[str, Any], seen: set[str]) -> None:
        super().__init__(data)
        self.seen = seen

    def __getitem__(self, key: str) -> Any:
        self.seen.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.seen.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self.seen.add(str(key))
        return super().__contains__(key)


def _recording(function: Any, seen: set[str]) -> Any:
    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def arecorded(state: Any, *args: Any, **kwargs: Any) -> Any:
            return await function(_Reads(state, seen), *args, **kwargs)

        return arecorded

    @functools.wraps(function)
    def recorded(state: Any, *args: Any, **kwargs: Any) -> Any:
        return function(_Reads(state, seen), *args, **kwargs)

    return recorded


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {name: set() for name in [*NODES, *ROUTES]}
    for node, functions in NODES.items():
        for function in functions:
            monkeypatch.setattr(build, function, _recording(getattr(build, function), seen[node]))
    for route in ROUTES:
        monkeypatch.setattr(routing, route, _recording(getattr(routing, route), seen[route]))
    return seen


def test_every_node_and_route_reads_only_its_view(turns, shop, clock, reads):
    read = {"name": "shop_list_products", "args": {"limit": 1}, "id": "r1"}
    unknown = {"name": "shop_nope", "args": {}, "id": "u1"}
    bad = {"name": "shop_set_prices", "args": {"prices": "cheap"}, "id": "b1"}
    write = {"name": "shop_set_prices", "args": prices("TEA-0001"), "id": "w1"}
    other = {"name": "shop_set_prices", "args": prices("TEA-0002"), "id": "w2"}
    model = ScriptedModel(
        [
            {"tool_calls": [read, unknown, bad, write, other]},
            "Done.",
            {"tool_calls": [{**write, "id": "w3"}]},
            "Moved on.",
            "Expired, noted.",
        ]
    )
    paused = turns.send(model, {"messages": [HumanMessage("go")]}, ALICE)
    first, second = (held["confirmation_id"] for held in paused.confirmations)
    turns.send(model, Command(resume={first: "approve"}), ALICE)
    turns.send(model, Command(resume={second: {"action": "reject", "message": "no"}}), ALICE)
    turns.send(model, {"messages": [HumanMessage("again")]}, ALICE)  # held, then left waiting
    turns.send(model, {"messages": [HumanMessage("something else")]}, ALICE)
    clock.now += 7200  # the waiting hold expires
    turns.send(model, {"messages": [HumanMessage("and now?")]}, ALICE)

    for name in NODES:
        assert reads[name] <= set(VIEWS[name].__annotations__), name
    for name in ROUTES:
        view = typing.get_type_hints(getattr(routing, name))["state"]
        assert reads[name] <= set(view.__annotations__), name
    assert all(reads[name] for name in [*NODES, *ROUTES])  # each one ran and read something
