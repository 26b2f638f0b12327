"""Switch turnkit's tracing between three states inside one process (``bench/tracing.py``).

OpenTelemetry lets a process set its tracer provider once, so the provider installed here
switches: its tracers start no-op spans (``api``: what a process without an SDK gets) or the
SDK's (``sdk``: recorded by a ``SimpleSpanProcessor`` into an in-memory exporter, the whole cost
paid in the request). ``removed`` also swaps the executor's calls into ``turnkit.observe`` for
stubs: the code path before observing existed, the peer of the other two.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from turnkit.executor import tracing  # the calls "removed" stubs out

MODES = ("removed", "api", "sdk")
SDK_ONLY = "sdk-removed"
"""The SDK on, turnkit's calls into ``turnkit.observe`` stubbed: what a traced server pays for
the spans of others (FastAPI makes its own), against which ``sdk`` is turnkit's own price."""
_state = {"sdk": False, "recorded": 0}
_exporter = InMemorySpanExporter()
_sdk = TracerProvider()
_sdk.add_span_processor(SimpleSpanProcessor(_exporter))
_noop = trace.NoOpTracer()
_real = {name: getattr(tracing, name) for name in ("call_started", "call_ended", "call_failed")}


def _started(call: Any) -> Any:
    return trace.INVALID_SPAN


def _ended(call: Any, answer: Any, span: Any, row: dict[str, Any]) -> None:
    row["trace_id"] = None


def _failed(span: Any, failure: BaseException) -> None:
    return None


_stubs = {"call_started": _started, "call_ended": _ended, "call_failed": _failed}


class _Switching(trace.Tracer):
    def __init__(self, sdk: trace.Tracer) -> None:
        self._sdk = sdk

    def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
        return (self._sdk if _state["sdk"] else _noop).start_span(*args, **kwargs)

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
        return (self._sdk if _state["sdk"] else _noop).start_as_current_span(*args, **kwargs)


class _Provider(trace.TracerProvider):
    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return _Switching(_sdk.get_tracer(*args, **kwargs))


def install() -> None:
    """Make this process's tracer provider the switching one (once, before any span)."""
    trace.set_tracer_provider(_Provider())


def use(mode: str) -> None:
    """Trace as ``mode`` says from now on (one of ``MODES``)."""
    if mode not in (*MODES, SDK_ONLY):
        raise ValueError(f"mode must be one of {(*MODES, SDK_ONLY)}, not {mode!r}")
    _state["sdk"] = mode.startswith("sdk")
    for name, function in (_stubs if mode in ("removed", SDK_ONLY) else _real).items():
        setattr(tracing, name, function)
    if _state["sdk"] and len(_exporter._finished_spans) > 10_000:  # bench-only: not copied
        _state["recorded"] += len(_exporter._finished_spans)
        _exporter.clear()


def recorded() -> int:
    """Spans the SDK has recorded so far."""
    return _state["recorded"] + len(_exporter.get_finished_spans())
