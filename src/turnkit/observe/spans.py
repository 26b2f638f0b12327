"""turnkit's spans: ``execute_tool {tool}`` per executor call, a hold's span, a decision's span.

(docs/architecture.md §14) The call's span follows OpenTelemetry's GenAI conventions
(``names.py``). The conventions have no span for a person's approval, so turnkit adds two:
``hold {tool}``, ended at once, its W3C ``traceparent`` stored with the confirmation; and
``decide {tool}``, hours later in whatever process or door decides, linked to the hold. The
``execute_tool`` span of the approved run is the decision's child and links to the hold too:
one trace view shows held → decided → ran.

Only ``opentelemetry-api`` is needed: without an SDK every span here is a non-recording one and
costs a few microseconds. Spans are started with an explicit parent rather than made current,
so they cross the executor's sync and async drivers unchanged (``active`` makes one current
where a handler runs: its own spans nest under the call's).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.propagate import extract
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, SpanKind, TraceFlags

from turnkit.observe import names
from turnkit.observe.content import capture_content, content_text

__all__ = [
    "TRACER_NAME",
    "active",
    "context_of",
    "end_decision",
    "end_tool_call",
    "link_hold",
    "remote_parent",
    "start_decision",
    "start_hold",
    "start_tool_call",
    "trace_id",
    "traceparent",
]

TRACER_NAME = "turnkit"
"""The instrumentation scope of every turnkit span and instrument."""

_tracer = trace.get_tracer(TRACER_NAME)  # a proxy: it follows a provider set up later


def start_tool_call(
    tool: str,
    *,
    call_id: str,
    caller_kind: str,
    thread: str | None = None,
    parent: Span | None = None,
) -> Span:
    """The ``execute_tool {tool}`` span of one executor call, started (a child of ``parent``,
    else of the current span); ended by ``end_tool_call``."""
    attributes: dict[str, Any] = {
        names.OPERATION: "execute_tool",
        names.TOOL_NAME: tool,
        names.TOOL_CALL_ID: call_id,
        names.TOOL_TYPE: "function",
        names.CALLER_KIND: caller_kind,
    }
    if thread is not None:
        attributes[names.CONVERSATION_ID] = thread
    context = None if parent is None else trace.set_span_in_context(parent)
    return _tracer.start_span(
        f"execute_tool {tool}", context, SpanKind.INTERNAL, attributes, record_exception=False
    )


def end_tool_call(
    span: Span,
    *,
    outcome: str,
    error_type: str | None = None,
    confirmation_id: str | None = None,
    replayed: bool = False,
    cost: int | None = None,
    arguments: Any = None,
    result: Any = None,
) -> None:
    """Set how the call ended on ``span`` and end it. ``arguments`` and ``result`` go on it
    only when content capture is on (``content.capture_content``)."""
    if span.is_recording():
        attributes: dict[str, Any] = {names.OUTCOME: outcome, names.REPLAYED: replayed}
        if error_type is not None:
            attributes[names.ERROR_TYPE] = error_type
            span.set_status(trace.StatusCode.ERROR, error_type)
        if confirmation_id is not None:
            attributes[names.CONFIRMATION_ID] = confirmation_id
        if cost is not None:
            attributes[names.COST] = cost
        if capture_content():
            if arguments is not None:
                attributes[names.TOOL_ARGUMENTS] = attributes[names.INPUT_VALUE] = content_text(
                    arguments
                )
            if result is not None:
                attributes[names.TOOL_RESULT] = attributes[names.OUTPUT_VALUE] = content_text(
                    result
                )
        span.set_attributes(attributes)
    span.end()


def start_hold(parent: Span, tool: str, confirmation_id: str, approvals_needed: int) -> Span:
    """The ``hold {tool}`` span of a call held for a person, a child of the call's span: its
    ``traceparent`` is stored with the confirmation; ended (``span.end()``) once stored."""
    return _tracer.start_span(
        f"hold {tool}",
        trace.set_span_in_context(parent),
        SpanKind.INTERNAL,
        {
            names.OPERATION: "hold",
            names.TOOL_NAME: tool,
            names.CONFIRMATION_ID: confirmation_id,
            "turnkit.approvals.needed": approvals_needed,
        },
    )


def start_decision(confirmation_id: str, action: str, decider_kind: str) -> Span:
    """The ``decide`` span of a person's decision, a child of the current span (the door's:
    an HTTP request, a turn); named for its tool once the confirmation is read (``link_hold``)."""
    return _tracer.start_span(
        "decide",
        None,
        SpanKind.INTERNAL,
        {
            names.OPERATION: "decide",
            names.CONFIRMATION_ID: confirmation_id,
            names.DECISION: action,
            names.DECIDER_KIND: decider_kind,
        },
    )


def link_hold(
    span: Span, stored: str | None, *, tool: str | None = None, waited: float | None = None
) -> None:
    """Link ``span`` to the hold whose ``traceparent`` was stored (nothing when none was);
    a decision's span is named for ``tool`` and told how long the write ``waited``."""
    if not span.is_recording():
        return
    held = context_of(stored)
    if held is not None:
        span.add_link(held, {"turnkit.link": "hold"})
    if tool is not None:
        span.update_name(f"decide {tool}")
        span.set_attribute(names.TOOL_NAME, tool)
    if waited is not None:
        span.set_attribute(names.WAITED, round(waited, 3))


def end_decision(span: Span, outcome: str, error_type: str | None = None) -> None:
    """Set the decision's outcome on ``span`` and end it."""
    if span.is_recording():
        span.set_attribute(names.OUTCOME, outcome)
        if error_type is not None:
            span.set_attribute(names.ERROR_TYPE, error_type)
            span.set_status(trace.StatusCode.ERROR, error_type)
    span.end()


def traceparent(span: Span) -> str | None:
    """``span``'s W3C ``traceparent`` (``00-<trace>-<span>-<flags>``); None for an invalid
    span (no SDK, nothing traced).

    Examples:
        >>> traceparent(trace.INVALID_SPAN) is None
        True
    """
    c = span.get_span_context()
    if not c.is_valid:
        return None
    return f"00-{c.trace_id:032x}-{c.span_id:016x}-{int(c.trace_flags):02x}"


def context_of(stored: str | None) -> SpanContext | None:
    """The span context a stored ``traceparent`` names (remote); None when it names none.

    Examples:
        >>> context_of("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").span_id
        13235353014750950193
        >>> context_of("garbage") is None
        True
    """
    if not stored:
        return None
    parts = stored.split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
    except ValueError:
        return None
    context = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags & 0xFF))
    return context if context.is_valid else None


def trace_id(span: Span | None) -> str | None:
    """The 32 hex digits of ``span``'s trace (the audit row's ``trace_id``); None untraced."""
    if span is None:
        return None
    c = span.get_span_context()
    return f"{c.trace_id:032x}" if c.is_valid else None


@contextmanager
def active(span: Span | None) -> Iterator[None]:
    """Make ``span`` current for the block (a handler's own spans nest under its call's);
    nothing when there is none."""
    if span is None or (
        isinstance(span, NonRecordingSpan) and not span.get_span_context().is_valid
    ):
        yield
        return
    with trace.use_span(span, end_on_exit=False, record_exception=False):
        yield


def remote_parent(carrier: Mapping[str, Any] | None) -> Any:
    """The OpenTelemetry context a W3C carrier (``traceparent``/``tracestate``, e.g. an MCP
    request's ``params._meta``) names, for a server span's parent; None when it names none."""
    if not carrier:
        return None
    headers = {k: v for k, v in carrier.items() if isinstance(v, str)}
    return extract(headers) if "traceparent" in headers else None
