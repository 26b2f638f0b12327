"""One call as the pipeline sees it (``Call``, also what its audit row and its span are made of),
and a call that passed the checks of steps 1-4 (``Checked``).

(docs/architecture.md §4)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from turnkit.registry.caller import Caller
from turnkit.registry.context import CallContext
from turnkit.registry.settings import Settings
from turnkit.registry.tool import Tool
from turnkit.registry.visibility import Allow

__all__ = ["Call", "Checked", "Resolved"]


@dataclass(slots=True)
class Call:
    """One call as the pipeline sees it; also what its audit row is made of."""

    caller: Caller
    name: object
    input: object
    control: dict[str, Any]
    allow: Allow
    call_id: str
    confirmation_id: str | None = None
    detail: str | None = None
    settings: Settings | None = None
    """The settings in force, when the caller read them just before (else read by the call)."""
    started: bool = False
    """True once the handler was started: from then on the write may have happened."""
    reserved_at: float | None = None
    """When this call reserved its idempotency key (a repeat's staleness counts from it)."""
    thread: str | None = None
    """The conversation (thread) whose turn makes the call; kept with a hold."""
    request: Mapping[str, str] | None = None
    """The request that led to the call (``user``, ``model`` texts); kept, bounded, with a
    hold (read only then: a door may pass a lazy mapping)."""
    wait: bool = True
    """Whether a repeat of a running idempotency key waits for the first call's outcome (in
    process) or answers ``in_progress`` at once (over HTTP: the client retries)."""
    parent: Any = None
    """The span the call's ``execute_tool`` span is a child of (an approval's decision);
    None: the current span."""
    span: Any = None
    """The call's ``execute_tool`` span while it runs (``tracing``)."""
    cost: int | None = None
    """The rate-limit units charged or reserved, once known."""
    outcome: tuple[str, str, str, dict[str, Any]] | None = None
    """The answer a write's idempotency key is to keep (caller identity, tool, key, answer),
    stored only after the call's audit row is written (``pipeline.execute_steps``): a process
    dying between the two leaves the row and a key still running (its repeats answer
    ``in_progress``, then ``outcome_unknown``), never a replayed write without its row."""


@dataclass(frozen=True, slots=True)
class Checked:
    """A call that passed steps 1-4: its tool, input, input hash, context and settings."""

    tool: Tool
    value: dict[str, Any]
    digest: str
    ctx: CallContext
    settings: Settings


@dataclass(frozen=True, slots=True)
class Resolved:
    """Who a call is made for, as a door found them in the call's worker thread
    (``Executor.acall_as``): the caller, their allow list, and the operator's setting overrides
    when they were read in the same statement (None: the call reads them)."""

    caller: Caller
    allow: Allow = "all"
    overrides: Mapping[str, Any] | None = None
