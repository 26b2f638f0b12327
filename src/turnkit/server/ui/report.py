"""The inbox's report page, ``/ui/report``: what people decided about held writes, per tool.

The figures are ``turnkit.ledger.report.approval_report``'s — the same as ``turnkit report
approvals`` prints — over the confirmations the signed-in person may see in the inbox (the
inbox's visibility rule, ``views._listed``): a person who may decide for others
(``system.confirm_any``, and for a key the scope ``system.confirmations:decide``) sees every
caller's figures; one who may decide only their own sees **the figures of their own
confirmations only**. Either way a key's allow list limits the tools. The table stacks into one
card per tool on a narrow screen (``static/report.css``), so it fits a 390 px phone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from fastapi import APIRouter, Request
from fastapi.responses import Response

from turnkit.executor.confirmations import decides_for_others
from turnkit.executor.executor import Executor
from turnkit.ledger.records import Readable, iso
from turnkit.ledger.report import aapproval_report, duration_text, percent_text
from turnkit.registry.caller import apermissions_now
from turnkit.server.ui.session import Person

__all__ = ["PERIODS", "add_report"]

PERIODS: dict[str, tuple[str, float | None]] = {
    "1d": ("the last day", 86400.0),
    "7d": ("the last 7 days", 7 * 86400.0),
    "30d": ("the last 30 days", 30 * 86400.0),
    "all": ("all time", None),
}
"""The periods the page offers (``?since=7d``), by their query value; the default is ``all``."""


class Page(Protocol):
    """The inbox's page renderer (``inbox_router``'s ``page``)."""

    def __call__(
        self, request: Request, who: Person | None, name: str, status: int = 200, **values: Any
    ) -> Response: ...


def add_report(
    router: APIRouter,
    executor: Executor,
    person: Callable[[Request], Awaitable[Person | None]],
    page: Page,
    to_sign_in: Callable[[Request], Response],
) -> None:
    """Add ``GET /report`` to the inbox's ``router``, with its ``person``, ``page`` and
    ``to_sign_in`` (``pages.inbox_router``'s own)."""

    @router.get("/report")
    async def report(request: Request, since: str = "all") -> Response:
        who = await person(request)
        if who is None:
            return to_sign_in(request)
        chosen = since if since in PERIODS else "all"
        return page(request, who, "report.html", **await _values(executor, who, chosen))


async def _values(executor: Executor, who: Person, chosen: str) -> dict[str, Any]:
    """The page's table and suggestions, over what ``who`` may see."""
    permissions = await apermissions_now(executor.permissions, who.caller)
    everyone = decides_for_others(who.caller, permissions)
    now = executor.clock()
    label, seconds = PERIODS[chosen]
    rows = await aapproval_report(
        executor.ledger,
        now=now,
        since=None if seconds is None else now - seconds,
        readable=Readable(identity=who.caller.identity, others="all" if everyone else None),
        tools=None if who.allow == "all" else who.allow,
    )
    return {
        "rows": [
            {
                "tool": row.tool,
                "held": row.held,
                "pending": row.pending,
                "approve": percent_text(row.rate("approved")),
                "edit": percent_text(row.rate("edited")),
                "reject": percent_text(row.rate("rejected")),
                "expired": percent_text(row.rate("expired")),
                "forbidden": row.forbidden,
                "p50": duration_text(row.wait_p50),
                "p90": duration_text(row.wait_p90),
            }
            for row in rows
        ],
        "suggestions": [row.suggestion for row in rows if row.suggestion],
        "everyone": everyone,
        "periods": {name: text for name, (text, _) in PERIODS.items()},
        "chosen": chosen,
        "period": label,
        "now": iso(now),
    }
