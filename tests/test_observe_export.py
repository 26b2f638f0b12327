"""Export from the environment (``turnkit.observe.configure_sdk``): nothing unless the standard
``OTEL_*`` variables ask, OTLP over HTTP to the collector they name (a local receiver here),
``service.name`` turnkit unless they name one, and a missing ``[otel]`` extra told in one line.

The providers are built with ``build_sdk`` and used directly: the test process keeps its one
global provider (``_otel``)."""

from __future__ import annotations

import logging
import sys

import pytest
from opentelemetry import trace

from _otlp_receiver import otlp_receiver
from turnkit.observe import build_sdk, configure_sdk, plan_export

OTEL_VARIABLES = (
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_METRICS_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    """No ``OTEL_*`` variable of the machine running the tests leaks in."""
    for name in OTEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_nothing_is_set_up_without_the_variables(caplog):
    before = trace.get_tracer_provider()
    assert not plan_export().exports
    assert configure_sdk() is None
    assert trace.get_tracer_provider() is before
    assert not [r for r in caplog.records if r.name.startswith("turnkit")]


@pytest.mark.parametrize(
    ("variables", "traces", "metrics"),
    [
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, "otlp", "otlp"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, "otlp", None),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_METRICS_EXPORTER": "none"},
            "otlp",
            None,
        ),
        ({"OTEL_TRACES_EXPORTER": "console"}, "console", None),
        ({"OTEL_TRACES_EXPORTER": "none"}, None, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, None, None),
    ],
)
def test_the_variables_say_what_is_exported(variables, traces, metrics):
    plan = plan_export(variables)
    assert (plan.traces, plan.metrics, plan.problem) == (traces, metrics, None)


def test_the_banner_line_says_where_each_signal_goes():
    plan = plan_export({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"})
    described = plan.describe({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"})
    assert described == (
        "traces → OTLP http://collector:4318/v1/traces; metrics → OTLP http://collector:4318/v1/metrics"
    )


@pytest.mark.parametrize(
    ("variables", "said"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER='zipkin' is not one turnkit"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "turnkit exports OTLP over HTTP only",
        ),
    ],
)
def test_an_export_turnkit_cannot_make_is_told_in_one_line(monkeypatch, caplog, variables, said):
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with caplog.at_level(logging.WARNING, logger="turnkit.observe"):
        assert configure_sdk() is None
    (record,) = [r for r in caplog.records if r.name == "turnkit.observe"]
    assert said in record.getMessage()
    assert "\n" not in record.getMessage()
    assert record.exc_info is None


def test_a_missing_otel_extra_is_told_in_one_line(monkeypatch, caplog):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    # as if opentelemetry-exporter-otlp-proto-http were not installed: importing it fails
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    before = trace.get_tracer_provider()
    with caplog.at_level(logging.WARNING, logger="turnkit.observe"):
        assert configure_sdk() is None
    (record,) = [r for r in caplog.records if r.name == "turnkit.observe"]
    assert record.getMessage() == (
        "OTEL_EXPORTER_OTLP_ENDPOINT asks for telemetry export, but the OpenTelemetry SDK or its"
        " OTLP exporter is not installed: pip install 'turnkit[otel]' (turnkit runs untraced"
        " until then)"
    )
    assert record.levelno == logging.WARNING
    assert record.exc_info is None
    assert trace.get_tracer_provider() is before


def test_spans_and_metrics_reach_the_collector_the_endpoint_names(monkeypatch):
    with otlp_receiver() as (url, received):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
        sdk = build_sdk(plan_export())
        try:
            with sdk.tracer_provider.get_tracer("test").start_as_current_span("exported"):
                pass
            sdk.meter_provider.get_meter("test").create_counter("test.exported").add(1)
            sdk.flush()
        finally:
            sdk.shutdown()
        (span,) = received.named("exported")
        assert span.resource["service.name"] == "turnkit"
        assert "test.exported" in received.metric_names


def test_the_service_is_named_by_the_environment_when_it_names_one(monkeypatch):
    with otlp_receiver() as (url, received):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{url}/v1/traces")
        monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=shop-tools,deployment=eu")
        sdk = build_sdk(plan_export())
        try:
            sdk.tracer_provider.get_tracer("test").start_span("named").end()
            sdk.flush()
        finally:
            sdk.shutdown()
        assert sdk.meter_provider is None  # only traces were asked for
        (span,) = received.named("named")
        assert span.resource["service.name"] == "shop-tools"
        assert span.resource["deployment"] == "eu"
