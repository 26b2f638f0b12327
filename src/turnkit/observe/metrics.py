"""turnkit's metrics: OpenTelemetry instruments, and sinks such as Prometheus fed the same.

(docs/architecture.md §14) The executor reports each call and each decision here once; the
instruments are the API's (no-ops without an SDK) and every registered ``Sink`` (``add_sink``:
``turnkit serve``'s Prometheus registry) is told too. The number of holds waiting is read, not
counted: a door that has a ledger registers ``pending_holds`` to be asked at each collection.

| name | kind | unit | attributes |
| --- | --- | --- | --- |
| ``turnkit.tool.calls`` | counter | {call} | tool, outcome, caller kind |
| ``gen_ai.execute_tool.duration`` | histogram | s | tool, ``error.type`` |
| ``turnkit.decisions`` | counter | {decision} | tool, decision, outcome |
| ``turnkit.confirmation.wait`` | histogram | s | tool, decision |
| ``turnkit.rate_limit.refusals`` | counter | {call} | tool, caller kind |
| ``turnkit.holds.pending`` | gauge | {hold} | (none) |
| ``turnkit.notify.deliveries`` | counter | {delivery} | kind, result |
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from turnkit.observe import names
from turnkit.observe.spans import TRACER_NAME

__all__ = [
    "CALL_BUCKETS",
    "WAIT_BUCKETS",
    "Sink",
    "add_sink",
    "pending_holds",
    "record_call",
    "record_decision",
    "record_delivery",
    "remove_sink",
]


class Sink(Protocol):
    """Something else told of every call, decision and delivery (Prometheus' registry)."""

    def call(
        self, tool: str, outcome: str, caller_kind: str, seconds: float, error_type: str | None
    ) -> None: ...

    def decision(self, tool: str, decision: str, outcome: str, waited: float | None) -> None: ...

    def delivery(self, kind: str, result: str, count: int) -> None: ...


CALL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                60.0)  # fmt: skip
"""Bucket bounds (seconds) of a call's duration: a lookup takes milliseconds, a slow API seconds."""
WAIT_BUCKETS = (1.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 4 * 3600.0, 8 * 3600.0,
                86400.0, 3 * 86400.0, 7 * 86400.0)  # fmt: skip
"""Bucket bounds (seconds) of a hold's wait for a person: seconds at a desk to days away."""

_meter = metrics.get_meter(TRACER_NAME)
_calls = _meter.create_counter("turnkit.tool.calls", "{call}", "Executor calls by tool and outcome")
_duration = _meter.create_histogram(
    "gen_ai.execute_tool.duration",
    "s",
    "Duration of tool executions (GenAI conventions)",
    explicit_bucket_boundaries_advisory=CALL_BUCKETS,
)
_decisions = _meter.create_counter(
    "turnkit.decisions", "{decision}", "Decisions on held writes by kind and outcome"
)
_wait = _meter.create_histogram(
    "turnkit.confirmation.wait",
    "s",
    "Time from a write's hold to a person's decision",
    explicit_bucket_boundaries_advisory=WAIT_BUCKETS,
)
_limited = _meter.create_counter(
    "turnkit.rate_limit.refusals", "{call}", "Calls refused by the rate limit"
)
_deliveries = _meter.create_counter(
    "turnkit.notify.deliveries", "{delivery}", "Notification deliveries by kind and result"
)
_sinks: list[Sink] = []
_pending: list[Callable[[], int]] = []


def _observe_pending(options: CallbackOptions) -> Iterable[Observation]:
    for read in list(_pending):
        try:
            yield Observation(read())
        except Exception:  # a ledger that cannot be read now: no observation this time
            continue


_meter.create_observable_gauge(
    "turnkit.holds.pending", [_observe_pending], "{hold}", "Writes waiting for a person now"
)


def add_sink(sink: Sink) -> None:
    """Tell ``sink`` of every call, decision and delivery from now on."""
    _sinks.append(sink)


def remove_sink(sink: Sink) -> None:
    """Stop telling ``sink`` (nothing when it was not added)."""
    if sink in _sinks:
        _sinks.remove(sink)


def pending_holds(read: Callable[[], int] | None, *, remove: bool = False) -> None:
    """Register ``read`` (how many holds wait now, e.g. from a ledger) for the
    ``turnkit.holds.pending`` gauge; ``remove=True`` takes it away again."""
    if read is None:
        return
    if remove:
        if read in _pending:
            _pending.remove(read)
    else:
        _pending.append(read)


def record_call(
    tool: str, outcome: str, caller_kind: str, seconds: float, error_type: str | None = None
) -> None:
    """Count one executor call and its duration (``error_type``: its error code, if any)."""
    attributes = {names.TOOL_NAME: tool, names.OUTCOME: outcome, names.CALLER_KIND: caller_kind}
    _calls.add(1, attributes)
    timed = {names.TOOL_NAME: tool, names.OPERATION: "execute_tool"}
    if error_type is not None:
        timed[names.ERROR_TYPE] = error_type
    _duration.record(seconds, timed)
    if error_type == "rate_limited":
        _limited.add(1, {names.TOOL_NAME: tool, names.CALLER_KIND: caller_kind})
    for sink in _sinks:
        sink.call(tool, outcome, caller_kind, seconds, error_type)


def record_decision(tool: str, decision: str, outcome: str, waited: float | None) -> None:
    """Count one decision (``approve``/``reject``/``edit``) and how long its write waited."""
    _decisions.add(1, {names.TOOL_NAME: tool, names.DECISION: decision, names.OUTCOME: outcome})
    if waited is not None:
        _wait.record(waited, {names.TOOL_NAME: tool, names.DECISION: decision})
    for sink in _sinks:
        sink.decision(tool, decision, outcome, waited)


def record_delivery(kind: str, result: str, count: int = 1) -> None:
    """Count notification deliveries of a target ``kind`` (``sent``, ``retried``, ``dead``,
    ``late``)."""
    if count <= 0:
        return
    _deliveries.add(count, {"turnkit.notify.kind": kind, "turnkit.notify.result": result})
    for sink in _sinks:
        sink.delivery(kind, result, count)
