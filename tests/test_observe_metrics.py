"""Metrics: the OpenTelemetry instruments count calls, holds, decisions (with their waits),
rate-limit refusals and notification deliveries; the Prometheus sink keeps the same counts
under Prometheus' names; ``create_app(metrics=True)`` serves them at ``/metrics`` with the
holds pending read from the ledger, and never an argument.

The instruments are cumulative for the whole test process: each test compares readings taken
before and after what it does.

Reaches ``turnkit.observe.prometheus`` and ``turnkit.server.metrics`` (the sink and the route
behind ``create_app(metrics=True)`` and ``turnkit serve``), whose names are not public.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from _otel import installed
from _receiver import Receiver
from _shop import prices
from turnkit import Decision
from turnkit.notify import Dispatcher, add_target, new_secret
from turnkit.observe import add_sink, pending_holds, remove_sink
from turnkit.observe.prometheus import PrometheusSink
from turnkit.server import create_app

Labels = frozenset[tuple[str, Any]]


def reading() -> dict[str, dict[Labels, Any]]:
    """Every turnkit instrument's points now: a counter's or gauge's value, a histogram's
    ``(count, sum)``, by attributes."""
    _, reader = installed()
    found: dict[str, dict[Labels, Any]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points = found.setdefault(metric.name, {})
                for point in metric.data.data_points:
                    labels = frozenset(point.attributes.items())
                    count = getattr(point, "count", None)
                    points[labels] = point.value if count is None else (count, point.sum)
    return found


def grown(before: dict, after: dict, name: str) -> dict[Labels, Any]:
    """How ``name``'s points grew from ``before`` to ``after`` (those that did)."""
    old, new = before.get(name, {}), after.get(name, {})
    changes: dict[Labels, Any] = {}
    for labels, value in new.items():
        was = old.get(labels)
        if isinstance(value, tuple):
            was = was or (0, 0.0)
            change: Any = (value[0] - was[0], value[1] - was[1])
            if change[0]:
                changes[labels] = change
        elif value != (was or 0):
            changes[labels] = value - (was or 0)
    return changes


def labels(**given: str) -> Labels:
    names = {"tool": "gen_ai.tool.name", "outcome": "turnkit.outcome",
             "kind": "turnkit.caller.kind", "decision": "turnkit.decision",
             "error": "error.type", "op": "gen_ai.operation.name",
             "target": "turnkit.notify.kind", "result": "turnkit.notify.result"}  # fmt: skip
    return frozenset((names[k], v) for k, v in given.items())


@pytest.fixture
def writes_held(executor) -> None:
    executor.ledger.set_setting("api_session_write_modules", ["shop"])


@pytest.fixture
def sink(executor, clock) -> Iterator[PrometheusSink]:
    """A Prometheus sink told of every call while the test runs, its gauge read from the
    executor's ledger."""
    told = PrometheusSink(pending=lambda: executor.ledger.pending_count(clock.now))
    add_sink(told)
    yield told
    remove_sink(told)


def scraped(text: str) -> dict[tuple[str, Labels], float]:
    """A Prometheus exposition's samples, by name and labels."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict[tuple[str, Labels], float], name: str, **given: str) -> float:
    """The sample ``name`` with exactly the labels ``given``."""
    return samples[(name, frozenset(given.items()))]


def test_calls_are_counted_by_tool_outcome_and_caller_kind_and_timed(executor, alice, writes_held):
    before = reading()
    executor.execute(alice, "shop.list_products", {})
    executor.execute(alice, "shop.list_products", {})
    executor.execute(alice, "shop.set_prices", {"prices": [{"sku": "bad"}]})
    after = reading()
    assert grown(before, after, "turnkit.tool.calls") == {
        labels(tool="shop.list_products", outcome="ok", kind="session"): 2,
        labels(tool="shop.set_prices", outcome="error", kind="session"): 1,
    }
    timed = grown(before, after, "gen_ai.execute_tool.duration")
    assert set(timed) == {
        labels(tool="shop.list_products", op="execute_tool"),
        labels(tool="shop.set_prices", op="execute_tool", error="invalid_input"),
    }
    count, seconds = timed[labels(tool="shop.list_products", op="execute_tool")]
    assert count == 2
    assert 0 < seconds < 10


def test_a_hold_an_approval_and_a_rejection_are_counted_with_how_long_each_waited(
    executor, alice, clock, writes_held
):
    pending_now = lambda: executor.ledger.pending_count(clock.now)  # noqa: E731
    pending_holds(pending_now)
    try:
        before = reading()
        approved = executor.execute(alice, "shop.set_prices", prices("TEA-0001"))
        rejected = executor.execute(alice, "shop.set_prices", prices("TEA-0002"))
        held = reading()
        clock.now += 90
        executor.confirm(approved["confirmation_id"], alice, Decision.approve())
        clock.now += 30
        executor.confirm(rejected["confirmation_id"], alice, Decision.reject("not now"))
        after = reading()
    finally:
        pending_holds(pending_now, remove=True)
    assert held["turnkit.holds.pending"] == {frozenset(): 2}
    assert after["turnkit.holds.pending"] == {frozenset(): 0}
    assert grown(before, after, "turnkit.tool.calls") == {
        labels(tool="shop.set_prices", outcome="confirmation_required", kind="session"): 2,
        labels(tool="shop.set_prices", outcome="ok", kind="session"): 1,  # the approved run
    }
    assert grown(before, after, "turnkit.decisions") == {
        labels(tool="shop.set_prices", decision="approve", outcome="ok"): 1,
        labels(tool="shop.set_prices", decision="reject", outcome="rejected"): 1,
    }
    assert grown(before, after, "turnkit.confirmation.wait") == {
        labels(tool="shop.set_prices", decision="approve"): (1, 90.0),
        labels(tool="shop.set_prices", decision="reject"): (1, 120.0),
    }


def test_a_rate_limit_refusal_is_counted_for_its_tool_and_caller_kind(executor, key, ledger):
    ledger.set_setting("rate_limit_units", 1)
    before = reading()
    assert executor.execute(key, "shop.list_products", {})["status"] == "ok"
    refused = executor.execute(key, "shop.list_products", {})
    assert refused["error"]["code"] == "rate_limited"
    after = reading()
    assert grown(before, after, "turnkit.rate_limit.refusals") == {
        labels(tool="shop.list_products", kind="key"): 1
    }
    assert grown(before, after, "turnkit.tool.calls") == {
        labels(tool="shop.list_products", outcome="ok", kind="key"): 1,
        labels(tool="shop.list_products", outcome="error", kind="key"): 1,
    }


def test_notification_deliveries_are_counted_by_target_kind_and_result(executor, alice, sink,
                                                                        writes_held):  # fmt: skip
    secret = new_secret()
    with socket.socket() as probe:  # a port nothing listens on: its sends fail, to be retried
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    with Receiver(secret) as receiver:
        add_target(executor.ledger, "hook", "webhook", {"url": receiver.url, "secret": secret},
                   events=["held"], now=0)  # fmt: skip
        add_target(executor.ledger, "away", "webhook",
                   {"url": f"http://127.0.0.1:{closed}/", "secret": secret}, events=["held"],
                   now=0)  # fmt: skip
        executor.execute(alice, "shop.set_prices", prices("TEA-0001"))
        before = reading()
        sender = Dispatcher(executor.ledger, timeout=5.0, clock=lambda: 0.0)
        try:
            done = sender.run_once()
        finally:
            sender.close()
    assert (done.sent, done.retried) == (1, 1)
    assert grown(before, reading(), "turnkit.notify.deliveries") == {
        labels(target="webhook", result="sent"): 1,
        labels(target="webhook", result="retried"): 1,
    }
    samples = scraped(generate_latest(sink.registry).decode())
    delivered = "turnkit_notify_deliveries_total"
    assert value(samples, delivered, kind="webhook", result="sent") == 1
    assert value(samples, delivered, kind="webhook", result="retried") == 1


def test_the_prometheus_sink_keeps_the_same_counts_under_prometheus_names(
    executor, alice, key, clock, ledger, sink, writes_held
):
    executor.execute(alice, "shop.list_products", {})
    held = executor.execute(alice, "shop.set_prices", prices("TEA-0001"))
    executor.execute(alice, "shop.set_prices", prices("TEA-0002"))  # still pending at the end
    clock.now += 600  # ten minutes (a hold expires after an hour by default)
    executor.confirm(held["confirmation_id"], alice, "approve")
    ledger.set_setting("rate_limit_units", 1)
    executor.execute(key, "shop.list_products", {})
    executor.execute(key, "shop.list_products", {})  # refused
    text = generate_latest(sink.registry).decode()
    samples = scraped(text)
    calls, listed = "turnkit_tool_calls_total", "shop.list_products"
    assert value(samples, calls, tool=listed, outcome="ok", caller_kind="session") == 1
    assert value(samples, calls, tool="shop.set_prices", outcome="confirmation_required",
                 caller_kind="session") == 2  # fmt: skip
    assert value(samples, calls, tool=listed, outcome="error", caller_kind="key") == 1
    assert value(samples, "turnkit_rate_limit_refusals_total", tool=listed, caller_kind="key") == 1
    assert value(samples, "turnkit_decisions_total", tool="shop.set_prices", decision="approve",
                 outcome="ok") == 1  # fmt: skip
    waits = "turnkit_confirmation_wait_seconds"
    approved = {"tool": "shop.set_prices", "decision": "approve"}
    assert value(samples, f"{waits}_count", **approved) == 1
    assert value(samples, f"{waits}_sum", **approved) == 600
    # the wait's buckets are seconds to days: ten minutes is over five, under fifteen
    assert value(samples, f"{waits}_bucket", **approved, le="300.0") == 0
    assert value(samples, f"{waits}_bucket", **approved, le="900.0") == 1
    assert value(samples, f"{waits}_bucket", **approved, le="604800.0") == 1
    # a call's buckets start at a millisecond
    timed = {"tool": listed, "error_type": "rate_limited"}
    assert value(samples, "turnkit_tool_call_duration_seconds_count", **timed) == 1
    assert value(samples, "turnkit_tool_call_duration_seconds_bucket", **timed, le="60.0") == 1
    assert ("turnkit_tool_call_duration_seconds_bucket",
            frozenset({**timed, "le": "0.001"}.items())) in samples  # fmt: skip
    assert value(samples, "turnkit_holds_pending") == 1
    assert "TEA-000" not in text  # counts, never arguments


def test_a_ledger_that_cannot_be_read_leaves_the_gauge_out_of_the_scrape(caplog):
    def away() -> int:
        raise ConnectionError("the database is away")

    text = generate_latest(PrometheusSink(pending=away).registry).decode()
    assert "turnkit_holds_pending" not in text
    assert "turnkit_tool_calls_total" in text  # the rest still answers (HELP and TYPE lines)
    assert "the ledger could not be read" in caplog.text


def test_a_multiprocess_folder_set_after_prometheus_client_was_imported_is_refused(
    monkeypatch, tmp_path
):
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    with pytest.raises(RuntimeError, match="set it before the process starts"):
        PrometheusSink()


def test_metrics_are_served_without_a_key_while_the_app_runs(executor, alice, clock,
                                                             writes_held):  # fmt: skip
    app = create_app(executor, mcp_path=None, ui=False, metrics=True)
    with TestClient(app) as client:
        executor.execute(alice, "shop.list_products", {})
        executor.execute(alice, "shop.set_prices", prices("TEA-0001"))
        answer = client.get("/metrics")
        openmetrics = client.get("/metrics", headers={"Accept": "application/openmetrics-text"})
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert answer.headers["x-content-type-options"] == "nosniff"
    samples = scraped(answer.text)
    assert value(samples, "turnkit_tool_calls_total", tool="shop.list_products", outcome="ok",
                 caller_kind="session") == 1  # fmt: skip
    assert value(samples, "turnkit_holds_pending") == 1
    assert ("process_cpu_seconds_total", frozenset()) in samples
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")
    assert openmetrics.text.endswith("# EOF\n")
    assert "/metrics" not in app.openapi()["paths"]


def test_the_app_counts_only_while_it_runs_and_serves_no_metrics_unless_asked(executor, alice):
    app = create_app(executor, mcp_path=None, ui=False, metrics=True)
    with TestClient(app) as client:
        pass  # started and stopped: its sink is no longer told
    executor.execute(alice, "shop.list_products", {})
    with TestClient(app) as client:
        assert "turnkit_tool_calls_total{" not in client.get("/metrics").text
    with TestClient(create_app(executor, mcp_path=None, ui=False)) as client:
        assert client.get("/metrics").status_code == 404


def test_the_sinks_docstring_example_holds():
    import doctest

    from turnkit.observe import prometheus  # internal: the module whose example this runs

    failed, tried = doctest.testmod(prometheus)
    assert tried
    assert not failed
