"""The executor's calls and decisions as spans, metrics and log lines (``turnkit.observe``).

(docs/architecture.md §14) ``execute_steps`` and ``confirm_steps`` report here once per call
and per decision: this file turns a ``Call`` and its ``Answer`` into what ``observe`` records, so
the pipeline's steps stay about the steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from opentelemetry.trace import Span

from turnkit.executor.answers import Answer, Held, Ran, Refused
from turnkit.ledger.records import Confirmation
from turnkit.observe import logs, metrics, spans
from turnkit.registry.caller import Caller


class Call(Protocol):
    """What of a ``calls.Call`` its span, metrics and log line read."""

    caller: Caller
    name: object
    input: object
    call_id: str
    thread: str | None
    parent: Any
    cost: int | None


__all__ = [
    "Deciding",
    "call_ended",
    "call_failed",
    "call_started",
    "decision_ended",
    "decision_failed",
    "decision_of",
    "decision_started",
    "status_of",
]


def status_of(answer: Answer) -> str:
    """The answer's status as the audit row, the span and the metrics write it."""
    return "replayed" if answer.replayed else answer.status


def call_started(call: Call) -> Span:
    """The call's ``execute_tool`` span, a child of ``call.parent`` (a decision) when it has
    one, else of the current span (the pipeline links it to the hold an approved run carries
    out)."""
    name = call.name if isinstance(call.name, str) else "invalid"
    return spans.start_tool_call(
        name[:100],
        call_id=call.call_id,
        caller_kind=call.caller.kind,
        thread=call.thread,
        parent=call.parent,
    )


def call_ended(call: Call, answer: Answer, span: Span, row: dict[str, Any]) -> None:
    """End ``span`` with ``answer``; count the call; write its log line. ``row`` is its audit
    row (it gets the trace id)."""
    code = row["code"] if row["code"] is not None else _handler_code(answer)
    row["trace_id"] = spans.trace_id(span)
    spans.end_tool_call(
        span,
        outcome=row["status"],
        error_type=code,
        confirmation_id=row["confirmation_id"],
        replayed=answer.replayed,
        cost=call.cost,
        arguments=call.input,
        result=answer.result if isinstance(answer, Ran) else None,
    )
    metrics.record_call(
        row["tool"], row["status"], call.caller.kind, row["duration_ms"] / 1000, code
    )
    logs.log_call(
        tool=row["tool"],
        caller=row["caller"],
        status=row["status"],
        code=code,
        duration_ms=row["duration_ms"],
        confirmation_id=row["confirmation_id"],
        trace_id=row["trace_id"],
        arguments=call.input,
    )


def _handler_code(answer: Answer) -> str | None:
    """A replayed refusal's code (the audit row keeps none for a replay) for ``error.type``."""
    return answer.code if isinstance(answer, Refused) else None


def call_failed(span: Span, failure: BaseException) -> None:
    """End ``span`` for a call stopped by ``failure`` (an interrupt, a cancellation)."""
    spans.end_tool_call(span, outcome="stopped", error_type=type(failure).__name__)


@dataclass(slots=True)
class Deciding:
    """One decision as its span sees it: what ``confirm_steps`` learns as it goes."""

    span: Span
    decider: Caller
    held: Confirmation | None = None
    action: str = "unknown"
    now: float = 0.0


def decision_started(confirmation_id: object, decider: Caller) -> Deciding:
    """The ``decide`` span of one decision, a child of the current span (the deciding door's)."""
    shown = confirmation_id[:80] if isinstance(confirmation_id, str) else "invalid"
    return Deciding(spans.start_decision(shown, "unknown", decider.kind), decider)


def decision_of(deciding: Deciding, held: Confirmation, action: str, now: float) -> None:
    """Tell the decision's span what it decides: the tool, the action, the link to the hold."""
    deciding.held, deciding.action, deciding.now = held, action, now
    if deciding.span.is_recording():
        deciding.span.set_attribute("turnkit.decision", action)
    spans.link_hold(deciding.span, held.trace_context, tool=held.tool, waited=now - held.created_at)


def decision_ended(deciding: Deciding, answer: Answer) -> None:
    """End the decision's span with its answer; count it and log it when it decided a pending
    confirmation."""
    status = "already_decided" if answer.already_decided else status_of(answer)
    code = answer.code if isinstance(answer, Refused) else None
    if isinstance(answer, Held):
        status = "held"  # one approval of several: it waits for the others
    spans.end_decision(deciding.span, status, code)
    held = deciding.held
    if held is None or held.status != "pending":
        return
    outcome = code or status
    metrics.record_decision(held.tool, deciding.action, outcome, deciding.now - held.created_at)
    logs.log_decision(
        tool=held.tool,
        confirmation_id=held.id,
        decision=deciding.action,
        decider=deciding.decider.identity,
        outcome=outcome,
        trace_id=spans.trace_id(deciding.span),
    )


def decision_failed(deciding: Deciding, failure: BaseException) -> None:
    """End the decision's span for a decision stopped by ``failure``."""
    spans.end_decision(deciding.span, "stopped", type(failure).__name__)
