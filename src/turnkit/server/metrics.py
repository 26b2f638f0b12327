"""``GET /metrics``: turnkit's counts for Prometheus, and the pending-holds gauge fed by the ledger.

(docs/operations/monitoring.md, "Metrics") It answers without a key, by Prometheus' convention: it
tells counts by tool, outcome, decision and caller kind, never a call's arguments, results or
callers. ``create_app(metrics=True)`` mounts it; ``turnkit serve`` does unless ``--no-metrics``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from starlette.requests import Request
from starlette.responses import Response

from turnkit.ledger import Ledger
from turnkit.observe import add_sink, pending_holds, remove_sink
from turnkit.observe.prometheus import PrometheusSink

__all__ = ["Metrics"]


class Metrics:
    """The Prometheus sink of one app: told of every call of this process while the app's
    lifespan runs, exposed by ``endpoint``. The app's lifespan also gives the OpenTelemetry
    gauge ``turnkit.holds.pending`` its reader."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.sink = PrometheusSink(pending=self.pending)

    def pending(self) -> int:
        """How many holds wait now, from the ledger every worker shares."""
        return self.ledger.pending_count(time.time())

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Count while the app serves."""
        add_sink(self.sink)
        pending_holds(self.pending)
        try:
            yield
        finally:
            pending_holds(self.pending, remove=True)
            remove_sink(self.sink)
            self.sink.process_ended()

    async def endpoint(self, request: Request) -> Response:
        """The exposition, in the format the scraper asks for (Prometheus text or
        OpenMetrics); made in a worker thread, as it reads the ledger."""
        from prometheus_client.exposition import choose_encoder

        encode, content_type = choose_encoder(request.headers.get("accept", ""))
        body = await anyio.to_thread.run_sync(encode, self.sink.registry)
        return Response(body, headers={"Content-Type": content_type})
