"""Observing turnkit: OpenTelemetry spans and metrics, and structured log lines.

(docs/architecture.md §14) The executor opens an ``execute_tool {tool}`` span per call (the
GenAI conventions), a ``hold {tool}`` span stored with each confirmation and a ``decide {tool}``
span linked to it; it counts calls, decisions and waits; it writes a log line for each. Only
``opentelemetry-api`` is required: without an SDK it all costs next to nothing. Arguments and
results leave the process only when ``configure(capture_content=True)`` (or
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``) says so. ``configure_sdk()`` sets
up the SDK and OTLP export from the standard ``OTEL_*`` variables (the ``[otel]`` extra;
``turnkit serve`` calls it in every worker). Above the errors, below the ledger's users; no
LangGraph or LangChain.
"""

from __future__ import annotations

from turnkit.observe.content import CAPTURE_ENV, capture_content, configure
from turnkit.observe.logs import JsonFormatter, use_json_logs
from turnkit.observe.metrics import Sink, add_sink, pending_holds, remove_sink
from turnkit.observe.setup import (
    Plan,
    Sdk,
    build_sdk,
    configure_sdk,
    instrument_fastapi,
    plan_export,
)
from turnkit.observe.spans import TRACER_NAME, context_of, traceparent

__all__ = [
    "CAPTURE_ENV",
    "TRACER_NAME",
    "JsonFormatter",
    "Plan",
    "Sdk",
    "Sink",
    "add_sink",
    "build_sdk",
    "capture_content",
    "configure",
    "configure_sdk",
    "context_of",
    "instrument_fastapi",
    "pending_holds",
    "plan_export",
    "remove_sink",
    "traceparent",
    "use_json_logs",
]
