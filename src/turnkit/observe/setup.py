"""Exporting what turnkit observes: an OpenTelemetry SDK set up from the standard variables.

(docs/observe-traces.md) ``turnkit serve`` calls ``configure_sdk()`` in every worker; an
application that runs turnkit in its own process may too, or set up the SDK its own way (turnkit
then only uses the providers it finds). Export is on when the environment asks for it, as the
OpenTelemetry specification's variables say:

- ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` /
  ``..._METRICS_ENDPOINT``) names a collector: traces (metrics) go there over OTLP/HTTP, with
  ``OTEL_EXPORTER_OTLP_HEADERS`` and the other ``OTEL_EXPORTER_OTLP_*`` variables, which the
  exporter reads itself;
- ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER``: ``otlp`` (export, to
  ``http://localhost:4318`` when no endpoint is set), ``console`` (printed) or ``none``;
- ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES``: the resource (``service.name`` is
  ``turnkit`` unless they name one); ``OTEL_SDK_DISABLED=true``: nothing at all;
- ``OTEL_BSP_*`` (the batch span processor) and ``OTEL_METRIC_EXPORT_INTERVAL``: read by the SDK.

Spans go through a ``BatchSpanProcessor``, metrics through a periodic reader; ``Sdk.flush()``
(``turnkit serve`` calls it when a worker stops) sends what is pending. The SDK and the exporter
are the ``[otel]`` extra: when the variables ask for export without it, ``configure_sdk`` says so
in one line and turnkit runs untraced. Only ``opentelemetry-api`` is imported at module level.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from opentelemetry import metrics, trace

__all__ = [
    "EXTRA_MISSING",
    "Plan",
    "Sdk",
    "build_sdk",
    "configure_sdk",
    "instrument_fastapi",
    "plan_export",
]

log = logging.getLogger("turnkit.observe")

Exporter = Literal["otlp", "console"]
SEMCONV_ENV = "OTEL_SEMCONV_STABILITY_OPT_IN"
SERVICE_NAME = "turnkit"
"""The ``service.name`` of turnkit's telemetry unless the environment names another."""
EXTRA_MISSING = (
    "{asked} asks for telemetry export, but the OpenTelemetry SDK or its OTLP exporter is not"
    " installed: pip install 'turnkit[otel]' (turnkit runs untraced until then)"
)
_NEEDED = ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http.trace_exporter")
"""What exporting imports: a missing one is the ``[otel]`` extra missing."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    """What the environment asks turnkit to export, decided before anything is imported."""

    traces: Exporter | None = None
    """Where spans go: ``otlp``, ``console`` or nowhere (None)."""
    metrics: Exporter | None = None
    """Where metrics go: ``otlp``, ``console`` or nowhere (None)."""
    asked: str = ""
    """The variable that asked for export (for messages), or "" when none did."""
    problem: str | None = None
    """Why nothing is exported though the environment asked (one line), or None."""

    @property
    def exports(self) -> bool:
        """Whether anything is to be exported."""
        return self.problem is None and (self.traces is not None or self.metrics is not None)

    def describe(self, environ: Mapping[str, str] | None = None) -> str:
        """One line for a banner: where traces and metrics go."""
        env = os.environ if environ is None else environ
        if self.problem is not None:
            return self.problem
        told = [
            f"{signal} → {_where(kind, signal, env)}"
            for signal, kind in (("traces", self.traces), ("metrics", self.metrics))
            if kind is not None
        ]
        return "; ".join(told) or "not exported (set OTEL_EXPORTER_OTLP_ENDPOINT to export)"


def plan_export(environ: Mapping[str, str] | None = None) -> Plan:
    """What ``environ`` (default ``os.environ``) asks for; no SDK is imported.

    Examples:
        >>> plan_export({}).exports
        False
        >>> plan_export({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}).traces
        'otlp'
        >>> plan_export({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
        ...              "OTEL_SDK_DISABLED": "true"}).exports
        False
    """
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return Plan()
    traces, asked_traces, bad = _exporter(env, "TRACES")
    if bad is not None:
        return Plan(asked=asked_traces, problem=bad)
    metrics_, asked_metrics, bad = _exporter(env, "METRICS")
    if bad is not None:
        return Plan(asked=asked_metrics, problem=bad)
    asked = asked_traces or asked_metrics
    if traces is None and metrics_ is None:
        return Plan()
    protocol = env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf").strip().lower()
    if "otlp" in (traces, metrics_) and protocol != "http/protobuf":
        problem = (
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: turnkit exports OTLP over HTTP only;"
            " set it to 'http/protobuf' (a collector's port 4318), or leave it unset"
        )
        return Plan(asked="OTEL_EXPORTER_OTLP_PROTOCOL", problem=problem)
    for module in _NEEDED:
        try:
            importlib.import_module(module)
        except ImportError:
            return Plan(asked=asked, problem=EXTRA_MISSING.format(asked=asked))
    return Plan(traces=traces, metrics=metrics_, asked=asked)


def _exporter(env: Mapping[str, str], signal: str) -> tuple[Exporter | None, str, str | None]:
    """The exporter ``OTEL_{signal}_EXPORTER`` (or an endpoint) asks for, the variable that
    asked, and what is wrong with it."""
    variable = f"OTEL_{signal}_EXPORTER"
    named = env.get(variable, "").strip().lower()
    if named == "none":
        return None, "", None
    if named in ("otlp", "console"):
        return named, variable, None  # type: ignore[return-value]  # checked just above
    if named:
        wrong = f"{variable}={named!r} is not one turnkit sets up: use 'otlp', 'console' or 'none'"
        return None, variable, wrong
    for endpoint in (f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        if env.get(endpoint, "").strip():
            return "otlp", endpoint, None
    return None, "", None


def _where(kind: str, signal: str, env: Mapping[str, str]) -> str:
    if kind == "console":
        return "the console"
    own = env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT", "").strip()
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or "http://localhost:4318"
    return f"OTLP {own or base.rstrip('/') + '/v1/' + signal}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Sdk:
    """The SDK providers turnkit set up (``build_sdk``), installed or not."""

    tracer_provider: Any
    """An ``opentelemetry.sdk.trace.TracerProvider``, or None when no spans are exported."""
    meter_provider: Any
    """An ``opentelemetry.sdk.metrics.MeterProvider``, or None when no metrics are exported."""

    def flush(self, timeout_millis: int = 10_000) -> None:
        """Send the spans and metrics still pending (a worker stopping calls it)."""
        for provider in (self.tracer_provider, self.meter_provider):
            if provider is not None:
                provider.force_flush(timeout_millis)

    def shutdown(self) -> None:
        """Flush and stop exporting (also done when the process exits normally)."""
        for provider in (self.tracer_provider, self.meter_provider):
            if provider is not None:
                provider.shutdown()


def build_sdk(plan: Plan) -> Sdk:
    """The providers ``plan`` asks for, not installed (``configure_sdk`` installs them).

    The exporters read their own ``OTEL_EXPORTER_OTLP_*`` variables from ``os.environ``.
    """
    from opentelemetry.sdk.resources import Resource

    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
    tracer_provider = None
    if plan.traces is not None:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        tracer_provider = TracerProvider(resource=resource)
        tracer_provider.add_span_processor(BatchSpanProcessor(_span_exporter(plan.traces)))
    meter_provider = None
    if plan.metrics is not None:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        reader = PeriodicExportingMetricReader(_metric_exporter(plan.metrics))
        meter_provider = MeterProvider(metric_readers=[reader], resource=resource)
    return Sdk(tracer_provider=tracer_provider, meter_provider=meter_provider)


def _span_exporter(kind: Exporter) -> Any:
    if kind == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def _metric_exporter(kind: Exporter) -> Any:
    if kind == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        return ConsoleMetricExporter()
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return OTLPMetricExporter()


def configure_sdk() -> Sdk | None:
    """Set up the OpenTelemetry SDK as the environment asks (``plan_export``) and make it
    this process's; None when nothing is exported, or the application already set its own.

    When the environment asks for export that cannot happen (the ``[otel]`` extra missing, an
    exporter turnkit does not set up), one warning line says why and None is returned.

    Examples:
        In an application's start (``turnkit serve`` does this in every worker):

            sdk = configure_sdk()  # OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318
            ...
            if sdk is not None:
                sdk.flush()  # before the process ends
    """
    plan = plan_export()
    if plan.problem is not None:
        log.warning("%s", plan.problem)
        return None
    if not plan.exports:
        return None
    sdk = build_sdk(plan)
    if sdk.tracer_provider is not None:
        if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            log.info("a tracer provider is already set: turnkit's spans go to it")
            sdk.tracer_provider.shutdown()
            sdk = Sdk(tracer_provider=None, meter_provider=sdk.meter_provider)
        else:
            trace.set_tracer_provider(sdk.tracer_provider)
    if sdk.meter_provider is not None:
        metrics.set_meter_provider(sdk.meter_provider)  # refused (a warning) when one is set
        if metrics.get_meter_provider() is not sdk.meter_provider:
            sdk.meter_provider.shutdown()
            sdk = Sdk(tracer_provider=sdk.tracer_provider, meter_provider=None)
    return sdk


def instrument_fastapi(app: Any, *, excluded_paths: Iterable[str] = ()) -> bool:
    """A SERVER span per HTTP request to ``app`` (a FastAPI app), its parent the request's
    ``traceparent``, through ``opentelemetry-instrumentation-fastapi`` (the ``[otel]``
    extra); False when that is not installed. ``excluded_paths``: path prefixes not traced
    (health checks, static files). Call it once per app, before the app serves.

    The instrumentation writes the stable HTTP conventions (``http.request.method``,
    ``http.response.status_code``, ``http.server.request.duration``) unless
    ``OTEL_SEMCONV_STABILITY_OPT_IN`` says otherwise (``http/dup``: the old names too); left to
    itself it would write the names deprecated since 2023.
    """
    os.environ.setdefault(SEMCONV_ENV, "http")  # read once, when the instrumentation starts
    try:
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
    except ImportError:
        return False
    excluded = ",".join(rf"^\w+://[^/]+{re.escape(path)}" for path in excluded_paths) or None
    FastAPIInstrumentor.instrument_app(
        app, excluded_urls=excluded, exclude_spans=["receive", "send"]
    )
    return True
