"""``PrometheusSink``: turnkit's metrics in a ``prometheus_client`` registry, for a ``/metrics``.

(docs/operations/monitoring.md, "Metrics") The sink is told what the OpenTelemetry instruments
are told
(``turnkit.observe.metrics.add_sink``) and keeps the same counts under Prometheus' names; the
number of holds waiting is read at each scrape from the callable it is given (a ledger's
``pending_count``), never counted, so it is right whichever process answers.

Several worker processes (``turnkit serve --workers N``) share their counts through
prometheus_client's multiprocess mode: ``share_between_processes()`` points
``PROMETHEUS_MULTIPROC_DIR`` at a fresh folder before the workers start; each worker's counts
go to files there, and a scrape of any worker adds up every worker's files
(``MultiProcessCollector``). The variable must be set before ``prometheus_client`` is imported
in a worker: prometheus_client chooses where values live at import. ``prometheus-client`` comes
with the ``server`` extra; this module imports it only when a sink is made.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from turnkit.observe.metrics import CALL_BUCKETS, WAIT_BUCKETS

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

__all__ = ["MULTIPROC_ENV", "PrometheusSink", "share_between_processes"]

log = logging.getLogger("turnkit.observe")

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus_client's variable: the folder where the processes of one server keep their counts."""


def share_between_processes() -> str:
    """Make the processes started from now on (and this one, if it has not imported
    ``prometheus_client`` yet) keep their counts in a fresh, empty folder, and return it.

    A fresh folder each time: counts a stopped server left there would be added to the new
    one's. The caller removes it when the server stops."""
    folder = tempfile.mkdtemp(prefix="turnkit-metrics-")
    os.environ[MULTIPROC_ENV] = folder
    return folder


class PrometheusSink:
    """turnkit's calls, decisions and deliveries as Prometheus counters and histograms.

    Args:
        pending: how many holds wait now (``lambda: ledger.pending_count(time.time())``), read
            at each scrape for ``turnkit_holds_pending``; None leaves the gauge out.

    ``registry`` is what to expose. In one process it holds the sink's own metrics and the
    process' (``process_*``, ``python_gc_*``); under ``PROMETHEUS_MULTIPROC_DIR`` it adds up
    every process' files instead. Add the sink with ``turnkit.observe.add_sink``.

    Raises:
        ImportError: ``prometheus-client`` is not installed (``pip install 'turnkit[server]'``).
        RuntimeError: ``PROMETHEUS_MULTIPROC_DIR`` was set after ``prometheus_client`` was
            imported in this process, so its counts would not reach the folder.

    Examples:
        >>> from prometheus_client import generate_latest
        >>> sink = PrometheusSink(pending=lambda: 2)
        >>> sink.call("shop.list_products", "ok", "key", 0.004, None)
        >>> text = generate_latest(sink.registry).decode()
        >>> 'outcome="ok",tool="shop.list_products"} 1.0' in text
        True
        >>> "turnkit_holds_pending 2.0" in text
        True
    """

    def __init__(self, pending: Callable[[], int] | None = None) -> None:
        try:
            from prometheus_client import CollectorRegistry, Counter, Histogram, values
        except ImportError as missing:
            raise ImportError(
                "a Prometheus /metrics needs prometheus-client: pip install 'turnkit[server]'"
            ) from missing
        self.folder = os.environ.get(MULTIPROC_ENV) or None
        """The multiprocess folder this process writes its counts to; None in one process."""
        if self.folder is not None and values.ValueClass is values.MutexValue:
            raise RuntimeError(
                f"{MULTIPROC_ENV} was set after prometheus_client was imported in this process:"
                " its counts would stay in memory; set it before the process starts"
                " (turnkit serve does, with --workers)"
            )
        self.registry = CollectorRegistry()
        own = None if self.folder is not None else self.registry
        self._calls = Counter(
            "turnkit_tool_calls", "Executor calls by tool and outcome",
            ["tool", "outcome", "caller_kind"], registry=own,
        )  # fmt: skip
        self._duration = Histogram(
            "turnkit_tool_call_duration_seconds", "Duration of tool executions",
            ["tool", "error_type"], buckets=CALL_BUCKETS, registry=own,
        )  # fmt: skip
        self._decisions = Counter(
            "turnkit_decisions", "Decisions on held writes by kind and outcome",
            ["tool", "decision", "outcome"], registry=own,
        )  # fmt: skip
        self._wait = Histogram(
            "turnkit_confirmation_wait_seconds", "Time from a write's hold to a person's decision",
            ["tool", "decision"], buckets=WAIT_BUCKETS, registry=own,
        )  # fmt: skip
        self._limited = Counter(
            "turnkit_rate_limit_refusals", "Calls refused by the rate limit",
            ["tool", "caller_kind"], registry=own,
        )  # fmt: skip
        self._deliveries = Counter(
            "turnkit_notify_deliveries", "Notification deliveries by target kind and result",
            ["kind", "result"], registry=own,
        )  # fmt: skip
        self._call_children: dict[tuple[str, str, str, str | None], tuple[Any, Any]] = {}
        """A call's labelled counter and histogram by its labels (never removed, so they stay
        the registry's own): as many as the registry itself holds."""
        self._with_collectors(pending)

    def _with_collectors(self, pending: Callable[[], int] | None) -> None:
        from prometheus_client import GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR
        from prometheus_client.multiprocess import MultiProcessCollector

        if self.folder is not None:
            MultiProcessCollector(self.registry, path=self.folder)
        else:  # the collectors the default registry has
            for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
                self.registry.register(collector)
        if pending is not None:
            self.registry.register(_Pending(pending))

    def call(
        self, tool: str, outcome: str, caller_kind: str, seconds: float, error_type: str | None
    ) -> None:
        """Count one executor call and its duration (``error_type`` "" when it had none)."""
        key = (tool, outcome, caller_kind, error_type)
        children = self._call_children.get(key)
        if children is None:  # labels() checks and looks up on every call: once per key here
            children = self._call_children[key] = (
                self._calls.labels(tool, outcome, caller_kind),
                self._duration.labels(tool, error_type or ""),
            )
        children[0].inc()
        children[1].observe(seconds)
        if error_type == "rate_limited":
            self._limited.labels(tool, caller_kind).inc()

    def decision(self, tool: str, decision: str, outcome: str, waited: float | None) -> None:
        """Count one decision and how long its write waited."""
        self._decisions.labels(tool, decision, outcome).inc()
        if waited is not None:
            self._wait.labels(tool, decision).observe(waited)

    def delivery(self, kind: str, result: str, count: int) -> None:
        """Count ``count`` notification deliveries to targets of ``kind``."""
        self._deliveries.labels(kind, result).inc(count)

    def process_ended(self) -> None:
        """Tell the multiprocess folder this process has ended (``mark_process_dead``: its live
        gauges go; its counts stay in the totals). Nothing in one process."""
        if self.folder is not None:
            from prometheus_client.multiprocess import mark_process_dead

            mark_process_dead(os.getpid(), self.folder)


class _Pending:
    """A collector that reads ``turnkit_holds_pending`` when scraped (once, whichever process
    answers: the ledger is shared, so it is never added up across workers)."""

    def __init__(self, read: Callable[[], int]) -> None:
        self.read = read

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        try:
            count = self.read()
        except Exception:  # a ledger away now: the scrape still answers, without this gauge
            log.warning("turnkit_holds_pending: the ledger could not be read", exc_info=True)
            return
        yield GaugeMetricFamily("turnkit_holds_pending", "Writes waiting for a person now", count)
