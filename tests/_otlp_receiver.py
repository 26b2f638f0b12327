"""A local OTLP/HTTP receiver: what a collector would get from turnkit, decoded for the tests.

A keep-alive HTTP/1.1 server on a free loopback port accepts ``POST /v1/traces`` and
``POST /v1/metrics`` (protobuf, gzip or not, as OpenTelemetry's OTLP/HTTP exporter sends them),
decodes them with ``opentelemetry-proto`` and keeps each span as a plain ``Span`` value.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


@dataclass(frozen=True, kw_only=True)
class Span:
    """One span as the collector received it (ids in hex, as W3C writes them)."""

    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    attributes: dict[str, Any]
    links: list[dict[str, Any]]
    resource: dict[str, Any]
    scope: str
    status: str
    start_ns: int

    def to_json(self) -> dict[str, Any]:
        """The span as a readable JSON object (docs/trace-held-decided-ran.json)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "parent_span_id": self.parent_span_id,
            "links": self.links,
            "status": self.status,
            "scope": self.scope,
            "service.name": self.resource.get("service.name"),
            "attributes": self.attributes,
        }


@dataclass
class Received:
    """What the receiver has been sent so far."""

    spans: list[Span] = field(default_factory=list)
    metric_names: set[str] = field(default_factory=set)
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wait_for(self, found: Callable[[list[Span]], bool], timeout: float = 20.0) -> list[Span]:
        """The spans, once ``found(spans)`` holds (checked as they arrive, within ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                spans = list(self.spans)
            if found(spans):
                return spans
            if time.monotonic() > deadline:
                names = sorted(span.name for span in spans)
                raise AssertionError(
                    f"the receiver did not get the spans in {timeout:g} s: {names}"
                )
            time.sleep(0.02)

    def named(self, name: str) -> list[Span]:
        with self.lock:
            return [span for span in self.spans if span.name == name]


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return None if which is None else getattr(value, which)


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


def _spans(request: ExportTraceServiceRequest) -> Iterator[Span]:
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield Span(
                    name=span.name,
                    kind=KINDS.get(span.kind, str(span.kind)),
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent_span_id=span.parent_span_id.hex() or None,
                    attributes=_attributes(span.attributes),
                    links=[
                        {
                            "trace_id": link.trace_id.hex(),
                            "span_id": link.span_id.hex(),
                            "attributes": _attributes(link.attributes),
                        }
                        for link in span.links
                    ],
                    resource=resource,
                    scope=scope_spans.scope.name,
                    status={0: "UNSET", 1: "OK", 2: "ERROR"}.get(span.status.code, "?"),
                    start_ns=span.start_time_unix_nano,
                )


def _handler(received: Received) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the exporter's session expects

        def do_POST(self) -> None:  # the name http.server calls
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path == "/v1/traces":
                request = ExportTraceServiceRequest.FromString(body)
                with received.lock:
                    received.spans.extend(_spans(request))
                    received.requests += 1
                answer = ExportTraceServiceResponse().SerializeToString()
            elif self.path == "/v1/metrics":
                metrics = ExportMetricsServiceRequest.FromString(body)
                with received.lock:
                    received.metric_names.update(
                        metric.name
                        for rm in metrics.resource_metrics
                        for sm in rm.scope_metrics
                        for metric in sm.metrics
                    )
                    received.requests += 1
                answer = b""
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

    return Handler


@contextmanager
def otlp_receiver() -> Iterator[tuple[str, Received]]:
    """A receiver listening on 127.0.0.1 until the block ends: its base URL (what
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` names) and what it received."""
    received = Received()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(received))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
