"""What people decided about held writes, per tool: ``approval_report`` (``turnkit report
approvals``, the inbox's ``/ui/report``), computed here once so every door shows the same figures.

Pure over the ledger's confirmations: it reads them a page at a time (``list_confirmations`` with a
cursor), so a big ledger is never read in one list; what it keeps between pages is a few counters
per tool and the wait times it needs for exact percentiles (one number per decided confirmation).

How a confirmation counts (its ``status`` and ``decision``):

- ``approved``: a person approved it unchanged (``done`` or ``running``, decision ``approve``);
- ``edited``: a person changed its arguments and approved them (decision ``edit``);
- ``rejected``: a person said no;
- ``expired``: nobody decided in time (also one still ``pending`` whose time ran out, not yet
  closed);
- ``forbidden``: closed with its API key (revoked or expired): nobody decided it;
- ``pending``: still waiting, in its time: held, but not counted among the decided.

The rates are shares of the decided ones (all but ``pending``). The wait is the time from the hold
to a person's decision (``created_at`` → ``decided_at``) of the approved, edited and rejected
ones — an expiry or a revoked key is no decision. Its p50 and p90 are nearest-rank percentiles:
the smallest wait that at least 50 % (90 %) of the waits do not exceed.

The suggestion: a tool whose latest ``streak_over`` or more decisions (by hold time) were all
plain approvals — no edit, no reject, no expiry between them — holds calls people let through
anyway; a ``danger`` rule could let such calls run unheld.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from turnkit.ledger.base import Ledger
from turnkit.ledger.records import Confirmation, Cursor, Readable

__all__ = [
    "STREAK_OVER",
    "Outcome",
    "ToolReport",
    "aapproval_report",
    "approval_report",
    "duration_text",
    "outcome_of",
    "percent_text",
    "percentile",
]

STREAK_OVER = 20
"""Plain approvals in a row from which a tool gets a suggestion (``streak_over``)."""
PAGE = 500
"""Confirmations read per page."""

Outcome: TypeAlias = Literal["approved", "edited", "rejected", "expired", "forbidden", "pending"]
"""How a confirmation counts in the report (the module's docstring says which is which)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolReport:
    """The figures of one tool's held writes."""

    tool: str
    """The tool's registry name."""
    held: int
    """Confirmations held (in the period): decided or still pending."""
    approved: int
    """Approved unchanged by a person."""
    edited: int
    """Approved with arguments a person changed."""
    rejected: int
    """Rejected by a person."""
    expired: int
    """Nobody decided in time."""
    forbidden: int
    """Closed with their API key (revoked or expired)."""
    pending: int
    """Still waiting for a decision, in their time."""
    wait_p50: float | None
    """Seconds from the hold to a person's decision, the median (None: nobody decided one)."""
    wait_p90: float | None
    """The same, the 90th percentile."""
    streak: int
    """The latest decisions that were all plain approvals, in a row (0: the latest was not)."""
    suggestion: str | None = None
    """A line suggesting a ``danger`` rule, when ``streak`` reached the threshold."""

    @property
    def decided(self) -> int:
        """The closed ones, whoever closed them: the denominator of the rates."""
        return self.held - self.pending

    def counts(self) -> dict[Outcome, int]:
        """How many ended as each outcome, pending ones last."""
        return {"approved": self.approved, "edited": self.edited, "rejected": self.rejected,
                "expired": self.expired, "forbidden": self.forbidden,
                "pending": self.pending}  # fmt: skip

    def rate(self, outcome: Outcome) -> float | None:
        """The share of the decided ones that ended as ``outcome`` (0..1), None when none was."""
        return self.counts()[outcome] / self.decided if self.decided else None

    def as_dict(self) -> dict[str, object]:
        """The figures as JSON data (``turnkit report approvals --json``)."""
        counts: dict[str, object] = {str(name): n for name, n in self.counts().items()}
        decided: tuple[Outcome, ...] = ("approved", "edited", "rejected", "expired", "forbidden")
        return {
            "tool": self.tool,
            "held": self.held,
            "decided": self.decided,
            **counts,
            "rates": {name: self.rate(name) for name in decided},
            "wait_seconds": {"p50": self.wait_p50, "p90": self.wait_p90},
            "streak": self.streak,
            "suggestion": self.suggestion,
        }


def outcome_of(confirmation: Confirmation, now: float) -> Outcome:
    """How ``confirmation`` counts in the report at ``now``."""
    c = confirmation
    if c.status == "pending":
        return "pending" if c.expires_at > now else "expired"
    if c.status in ("rejected", "expired", "forbidden"):
        return c.status
    return "edited" if (c.decision or {}).get("action") == "edit" else "approved"


def percentile(values: list[float], share: float) -> float | None:
    """The nearest-rank percentile of ``values`` (``share`` in 0..1): the smallest value that at
    least ``share`` of them do not exceed; None for no values.

    Examples:
        >>> percentile([4.0, 1.0, 3.0, 2.0], 0.5), percentile([4.0, 1.0, 3.0, 2.0], 0.9)
        (2.0, 4.0)
    """
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(1, math.ceil(share * len(ordered))) - 1]


def duration_text(seconds: float | None) -> str:
    """A wait as a person reads it: ``45s``, ``12m``, ``3.5h``, ``2.0d``; ``-`` for none.

    Examples:
        >>> [duration_text(s) for s in (None, 45, 720, 12600, 172800)]
        ['-', '45s', '12m', '3.5h', '2.0d']
    """
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    if seconds < 86400:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def percent_text(rate: float | None) -> str:
    """A rate as a whole percentage (``96%``); ``-`` when nothing was decided."""
    return "-" if rate is None else f"{rate * 100:.0f}%"


@dataclass(slots=True)
class _Tally:
    """One tool's counters while the pages are read."""

    counts: dict[Outcome, int] = field(default_factory=dict)
    waits: list[float] = field(default_factory=list)
    streak: int = 0

    def add(self, confirmation: Confirmation, outcome: Outcome) -> None:
        self.counts[outcome] = self.counts.get(outcome, 0) + 1
        if outcome == "pending":
            return  # not decided yet: neither breaks nor extends the streak
        self.streak = self.streak + 1 if outcome == "approved" else 0
        decided_at = confirmation.decided_at
        if outcome in ("approved", "edited", "rejected") and decided_at is not None:
            self.waits.append(max(0.0, decided_at - confirmation.created_at))

    def report(self, tool: str, streak_over: int) -> ToolReport:
        count = self.counts.get
        suggestion = None
        if self.streak >= streak_over:
            suggestion = (
                f"{tool} was approved unedited {self.streak} times in a row: a `danger` rule"
                " could let such calls through"
            )
        return ToolReport(
            tool=tool,
            held=sum(self.counts.values()),
            approved=count("approved", 0),
            edited=count("edited", 0),
            rejected=count("rejected", 0),
            expired=count("expired", 0),
            forbidden=count("forbidden", 0),
            pending=count("pending", 0),
            wait_p50=percentile(self.waits, 0.5),
            wait_p90=percentile(self.waits, 0.9),
            streak=self.streak,
            suggestion=suggestion,
        )


def approval_report(
    ledger: Ledger,
    *,
    now: float,
    since: float | None = None,
    streak_over: int = STREAK_OVER,
    readable: Readable | None = None,
    tools: Collection[str] | None = None,
    page: int = PAGE,
) -> list[ToolReport]:
    """Per tool (sorted by name), what became of its held writes.

    Args:
        ledger: the ledger to read.
        now: the time a pending confirmation is judged at (expired when its time ran out).
        since: only confirmations held at or after this time (seconds since the epoch).
        streak_over: plain approvals in a row from which a tool gets a suggestion (at least 1).
        readable: only those a reader may see (the inbox's rule), as ``list_confirmations``.
        tools: only those of these tools (a key's allow list).
        page: confirmations read per query.

    Examples:
        >>> from turnkit.ledger import MemoryLedger
        >>> approval_report(MemoryLedger(), now=0.0)
        []
    """
    if streak_over < 1 or page < 1:
        raise ValueError(f"streak_over and page are at least 1, not {streak_over!r}, {page!r}")
    tallies: dict[str, _Tally] = {}
    after = None if since is None else Cursor(created_at=since, id="")  # held at `since` or later
    while True:
        found = ledger.list_confirmations(after=after, limit=page, readable=readable, tools=tools)
        for c in found:
            tallies.setdefault(c.tool, _Tally()).add(c, outcome_of(c, now))
        if len(found) < page:
            break
        after = Cursor.of(found[-1])
    return [tallies[tool].report(tool, streak_over) for tool in sorted(tallies)]


async def aapproval_report(
    ledger: Ledger,
    *,
    now: float,
    since: float | None = None,
    streak_over: int = STREAK_OVER,
    readable: Readable | None = None,
    tools: Collection[str] | None = None,
    page: int = PAGE,
) -> list[ToolReport]:
    """Async twin of ``approval_report``: it runs in a worker thread (on the loop when the
    ledger does not block), so the event loop never waits on the database."""
    if not ledger.blocking:
        return approval_report(ledger, now=now, since=since, streak_over=streak_over,
                               readable=readable, tools=tools, page=page)  # fmt: skip
    return await asyncio.to_thread(
        approval_report, ledger, now=now, since=since, streak_over=streak_over,
        readable=readable, tools=tools, page=page,
    )  # fmt: skip
