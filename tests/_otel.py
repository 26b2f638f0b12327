"""One OpenTelemetry SDK for the whole test run, its spans kept only while a test listens.

OpenTelemetry lets a process set its tracer provider once: the first test that asks for spans
installs an SDK provider with an in-memory exporter; afterwards every test's spans are recorded
(so the rest of the suite also runs with tracing on) but kept only between ``listen()`` and
``stop()``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult


class Listening(SpanExporter):
    """Keeps the spans ended while it listens."""

    def __init__(self) -> None:
        self.on = False
        self.spans: list[ReadableSpan] = []
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            if self.on:
                self.spans.extend(spans)
        return SpanExportResult.SUCCESS

    def listen(self) -> None:
        with self._lock:
            self.on, self.spans = True, []

    def stop(self) -> list[ReadableSpan]:
        with self._lock:
            self.on = False
            return list(self.spans)


_installed: tuple[Listening, InMemoryMetricReader] | None = None


def installed() -> tuple[Listening, InMemoryMetricReader]:
    """The run's exporter and metric reader, installed on first use."""
    global _installed
    if _installed is None:
        exporter, reader = Listening(), InMemoryMetricReader()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        _installed = exporter, reader
    return _installed
