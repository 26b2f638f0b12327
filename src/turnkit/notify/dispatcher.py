"""``Dispatcher``: delivers the outbox's rows, at least once, from any number of workers.

Each round claims a few due rows (one conditional statement: ``Ledger.claim_deliveries``), sends
them at once in worker threads, and marks each sent, or failed with a retry after an exponential
backoff with jitter, or dead once ``max_attempts`` claims were spent; each round's results are
counted by target kind (``turnkit.notify.deliveries``; ``removed`` for a target removed since
the claim). A worker that dies mid-send leaves its rows ``sending`` until their claim runs out;
then another worker takes and sends them again. That is the one duplicate: at most the rows a
dead worker had claimed, each with the same ``webhook-id`` (docs/architecture.md §12).

``run_forever`` is for a thread or a foreground process (``turnkit notify run``);
``arun_forever`` for an event loop (every ledger call and send runs in a worker thread);
``start`` runs it in a daemon thread for a server's lifetime (``turnkit serve``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx

from turnkit.ledger import Ledger
from turnkit.ledger.outbox import Delivery, NotifyTarget
from turnkit.notify.payload import payload
from turnkit.notify.send import Answered, send
from turnkit.observe.metrics import record_delivery

__all__ = ["Background", "Dispatcher", "Round"]

log = logging.getLogger("turnkit.notify")


@dataclass(frozen=True, kw_only=True, slots=True)
class Round:
    """What one ``run_once`` did."""

    claimed: int = 0
    """Rows it claimed."""
    sent: int = 0
    """Delivered."""
    retried: int = 0
    """Failed, to be tried again later."""
    dead: int = 0
    """Failed for the last time."""
    late: int = 0
    """Delivered after its claim ran out (another worker may have sent it too)."""


class Dispatcher:
    """Delivers the notifications of ``ledger``'s outbox.

    Args:
        ledger: the ledger whose outbox it empties (any number of dispatchers may share it).
        public_url: where the web inbox is reached (``https://tools.example.com``), for the link
            to each confirmation's page; None sends no link.
        worker_id: this worker's name in the claims; default ``host:pid:random``.
        lease_seconds: how long a claim holds; a row still ``sending`` after it (a dead worker)
            is taken by another. Keep it well above ``timeout``.
        max_attempts: claims of a row before it is dead.
        backoff: seconds before the second attempt; each later one waits twice as long (up to
            ``max_backoff``), times a random factor from 0.5 to 1 (jitter).
        timeout: seconds one send may take in all (a webhook's connecting, sending and
            answer; an SMTP server's each step).
        concurrency: rows claimed, and sent at once, per round.

    Examples:
        >>> from turnkit import MemoryLedger
        >>> Dispatcher(MemoryLedger(), public_url="http://127.0.0.1:8080").run_once()
        Round(claimed=0, sent=0, retried=0, dead=0, late=0)
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        public_url: str | None = None,
        worker_id: str | None = None,
        lease_seconds: float = 60.0,
        max_attempts: int = 8,
        backoff: float = 5.0,
        max_backoff: float = 3600.0,
        timeout: float = 10.0,
        concurrency: int = 4,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ledger = ledger
        self.public_url = public_url
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.lease_seconds = lease_seconds
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.timeout = timeout
        self.concurrency = concurrency
        self.clock = clock
        self._client = httpx.Client(follow_redirects=False)
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="turnkit-notify")

    def run_once(self) -> Round:
        """Claim the due rows (at most ``concurrency``), send them, record how each went."""
        claimed = self.ledger.claim_deliveries(
            self.worker_id, self.clock(), self.lease_seconds, self.concurrency
        )
        if not claimed:
            return Round()
        targets = {target.id: target for target in self.ledger.notify_targets()}
        outcomes = list(self._pool.map(lambda d: self._deliver(d, targets), claimed))
        kinds = [t.kind if (t := targets.get(d.target_id)) else "removed" for d in claimed]
        for (kind, result), count in Counter(zip(kinds, outcomes, strict=True)).items():
            record_delivery(kind, result, count)
        return Round(
            claimed=len(claimed),
            sent=outcomes.count("sent"),
            retried=outcomes.count("retried"),
            dead=outcomes.count("dead"),
            late=outcomes.count("late"),
        )

    def _deliver(self, delivery: Delivery, targets: dict[str, NotifyTarget]) -> str:
        target = targets.get(delivery.target_id)
        if target is None:  # removed since the claim
            answered = Answered(ok=False, detail="its target was removed")
            return self._failed(delivery, answered, last=True)
        confirmation = self.ledger.get_confirmation(delivery.confirmation_id)
        body = payload(delivery, confirmation, target, self.public_url)
        answered = send(self._client, target, delivery.id, body, timeout=self.timeout)
        if answered.ok:
            if self.ledger.delivered(delivery.id, self.worker_id, self.clock()):
                return "sent"
            log.warning(  # its lease ran out while it was sent: another worker may send it too
                "notification %s was delivered after its claim ran out; it may be sent again",
                delivery.id,
            )
            return "late"
        return self._failed(delivery, answered, last=delivery.attempts >= self.max_attempts)

    def _failed(self, delivery: Delivery, answered: Answered, *, last: bool) -> str:
        if last:
            self.ledger.failed(delivery.id, self.worker_id, answered.detail, None)
            log.error(
                "notification %s given up after %d attempt(s): %s (turnkit notify list shows"
                " the dead ones)",
                delivery.id,
                delivery.attempts,
                answered.detail,
            )
            return "dead"
        delay = self.delay(delivery.attempts)
        self.ledger.failed(delivery.id, self.worker_id, answered.detail, self.clock() + delay)
        log.warning(
            "notification %s, attempt %d failed: %s; next in %.0f s",
            delivery.id,
            delivery.attempts,
            answered.detail,
            delay,
        )
        return "retried"

    def delay(self, attempts: int) -> float:
        """Seconds before the next attempt after ``attempts`` failed ones: exponential, capped,
        jittered (0.5 to 1 times), so workers that failed together do not retry together."""
        base = min(self.max_backoff, self.backoff * 2 ** max(0, attempts - 1))
        return base * random.uniform(0.5, 1.0)

    def run_forever(self, stop: threading.Event, *, idle: float = 1.0) -> None:
        """Deliver until ``stop`` is set, waiting ``idle`` seconds whenever nothing is due."""
        while not stop.is_set():
            try:
                done = self.run_once()
            except Exception:  # a database that is away for a while: the worker outlives it
                log.warning("the outbox could not be read; trying again", exc_info=True)
                done = Round()
            if not done.claimed:
                stop.wait(idle)

    async def arun_forever(self, stop: asyncio.Event, *, idle: float = 1.0) -> None:
        """``run_forever`` for an event loop: each round runs in a worker thread."""
        while not stop.is_set():
            try:
                done = await asyncio.to_thread(self.run_once)
            except Exception:  # as in run_forever
                log.warning("the outbox could not be read; trying again", exc_info=True)
                done = Round()
            if not done.claimed:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), idle)

    def start(self, *, idle: float = 1.0) -> Background:
        """Run ``run_forever`` in a daemon thread until the answer's ``stop()``."""
        stop = threading.Event()
        thread = threading.Thread(
            target=self.run_forever, args=(stop,), kwargs={"idle": idle},
            name="turnkit-notify", daemon=True,
        )  # fmt: skip
        thread.start()
        return Background(self, stop, thread)

    def close(self) -> None:
        """Close the HTTP connections and the send threads."""
        self._pool.shutdown(wait=True)
        self._client.close()


@dataclass(frozen=True, slots=True)
class Background:
    """A dispatcher running in a thread (``Dispatcher.start``)."""

    dispatcher: Dispatcher
    stop_event: threading.Event
    thread: threading.Thread

    def stop(self, timeout: float = 15.0) -> None:
        """Stop after the round in progress (its sends finish or time out), then close."""
        self.stop_event.set()
        self.thread.join(timeout)
        if not self.thread.is_alive():
            self.dispatcher.close()
