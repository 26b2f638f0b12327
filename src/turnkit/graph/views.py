"""What each node and each route reads of ``TurnState``: LangGraph builds a task's input from the
channels its schema names, so a node given only what it reads skips copying the rest on every step.

The views are plain ``TypedDict`` s (LangGraph keeps the channels of ``TurnState``: a key declared
here without its reducer reads the same channel). A node's code still takes ``TurnState``: a view
is a subset of it.
"""

from __future__ import annotations

from typing import Any, TypedDict

from langchain_core.messages import AnyMessage

from turnkit.turn.state import HeldCall, PendingCall, RoundAnswer

__all__ = ["VIEWS", "Calls", "Held", "Messages"]


class _Listing(TypedDict, total=False):
    messages: list[AnyMessage]
    held: list[HeldCall]
    answers: dict[str, RoundAnswer]
    tool_names: dict[str, str]


class _Model(TypedDict, total=False):
    messages: list[AnyMessage]
    round: int
    tools: list[dict[str, Any]]
    overrides: dict[str, Any]


class _Validating(TypedDict, total=False):
    messages: list[AnyMessage]
    tool_names: dict[str, str]


class _Executing(TypedDict, total=False):
    messages: list[AnyMessage]  # the request a hold keeps (``turn.messages.request_of``)
    calls: list[PendingCall]
    answers: dict[str, RoundAnswer]
    overrides: dict[str, Any]


class _Fitting(TypedDict, total=False):
    messages: list[AnyMessage]
    answers: dict[str, RoundAnswer]
    held: list[HeldCall]
    tool_names: dict[str, str]


class _Confirming(TypedDict, total=False):
    held: list[HeldCall]


class Messages(TypedDict, total=False):
    """What ``after_model`` reads."""

    messages: list[AnyMessage]


class Calls(TypedDict, total=False):
    """What ``after_validation`` reads."""

    calls: list[PendingCall]


class Held(TypedDict, total=False):
    """What ``after_results`` and ``after_confirmation`` read."""

    messages: list[AnyMessage]
    held: list[HeldCall]


VIEWS: dict[str, type[Any]] = {
    "list_tools": _Listing,
    "call_model": _Model,
    "validate_args": _Validating,
    "execute": _Executing,
    "fit_results": _Fitting,
    "await_confirmation": _Confirming,
}
"""The view each node reads, by name (a route's is its parameter's annotation)."""
