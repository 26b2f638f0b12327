"""A real HTTP receiver of webhooks for the notification tests: a keep-alive HTTP/1.1 server in a
thread on 127.0.0.1 that verifies each request's Standard Webhooks signature with the
``standardwebhooks`` package and counts deliveries by ``webhook-id``.

``statuses`` answers the first requests with the given codes (then 200); ``slow`` makes the
requests for which it returns True wait that many seconds before answering.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a sender killed mid-request leaves a broken pipe: expected in the kill test


class Receiver:
    def __init__(
        self,
        secret: str | None = None,
        *,
        statuses: list[int] | None = None,
        slow: Callable[[int], float] | None = None,
    ) -> None:
        self.secret = secret
        self.statuses = list(statuses or [])
        self.slow = slow
        self.counts: Counter[str] = Counter()
        self.bodies: list[dict[str, Any]] = []
        self.raw: list[str] = []
        self.bad_signatures = 0
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = self.rfile.read(length).decode()
                status, wait = receiver._arrived(body, dict(self.headers.items()))
                if wait:
                    time.sleep(wait)
                answer = b"ok" if status < 300 else b"no"
                self.send_response(status)
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = _Quiet(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _arrived(self, body: str, headers: dict[str, str]) -> tuple[int, float]:
        lowered = {name.lower(): value for name, value in headers.items()}
        with self._lock:
            self.requests += 1
            number = self.requests
            status = self.statuses.pop(0) if self.statuses else 200
        if self.secret is not None:
            try:
                Webhook(self.secret).verify(body, lowered)
            except Exception:  # the library's WebhookVerificationError, or a missing header
                with self._lock:
                    self.bad_signatures += 1
                return 400, 0.0
        wait = self.slow(number) if self.slow else 0.0
        with self._lock:
            self.raw.append(body)
            self.bodies.append(json.loads(body))
            if status < 300:
                self.counts[lowered.get("webhook-id", f"unsigned-{number}")] += 1
        return status, wait

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, ids: int, timeout: float = 30.0) -> None:
        """Until ``ids`` distinct webhook-ids were received (bounded)."""
        deadline = time.monotonic() + timeout
        while len(self.counts) < ids:
            assert time.monotonic() < deadline, f"{len(self.counts)} of {ids} received"
            time.sleep(0.02)
