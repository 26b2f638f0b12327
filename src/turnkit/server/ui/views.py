"""What the inbox's pages show, read from the ledger: pages of cards (those of one tool
folded when there are many), a confirmation's own page, what a bulk decision is about to
decide, and the history, each limited to what the person may see (``access.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from turnkit.executor.answers import Ran, Refused, Unreadable, shown_outcome
from turnkit.executor.confirmations import could_be_id, decides_for_others
from turnkit.executor.executor import Executor
from turnkit.ledger.records import (
    Confirmation,
    ConfirmationStatus,
    Cursor,
    Readable,
    iso,
)
from turnkit.server.ui import present
from turnkit.server.ui.access import permissions_of, theirs
from turnkit.server.ui.session import Person

__all__ = [
    "DECIDED",
    "GROUP_OVER",
    "PAGE",
    "Filters",
    "bulk_values",
    "decidable",
    "detail_values",
    "history_rows",
    "inbox_values",
    "outcome_of",
]

DECIDED: tuple[ConfirmationStatus, ...] = ("done", "rejected", "expired", "forbidden", "running")
"""The statuses the history shows."""
PAGE = 50
"""Confirmations per page, in the inbox and in the history."""
GROUP_OVER = 5
"""More cards than this of one tool on a page are folded into one group, with their count."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Filters:
    """What a page of the inbox or the history shows: one tool's, one conversation's, and the
    page after a cursor."""

    tool: str = ""
    thread: str = ""
    after: Cursor | None = None

    @classmethod
    def of(cls, tool: str, thread: str, after: str) -> Filters:
        """The filters of a page's query (anything malformed is left out, never an error)."""
        return cls(
            tool=tool if could_be_id(tool) else "",
            thread=thread if could_be_id(thread) else "",
            after=Cursor.parse(after) if after else None,
        )

    def query(self, after: Cursor | None) -> str:
        """The query string of the page after ``after`` under these filters."""
        given = {"tool": self.tool, "thread": self.thread}
        if after is not None:
            given["after"] = after.text()
        return urlencode({name: value for name, value in given.items() if value})


async def _listed(
    executor: Executor,
    who: Person,
    status: ConfirmationStatus | tuple[ConfirmationStatus, ...],
    shown: Filters,
    *,
    ids: list[str] | None = None,
    newest_first: bool = False,
) -> tuple[list[Confirmation], Cursor | None]:
    """A page of the confirmations of ``status`` that ``who`` may see (read from the ledger as
    such: their own, and others' when they may decide them, within their allow list), and the
    cursor of the next page when there may be one."""
    permissions = await permissions_of(executor, who)
    others = "all" if decides_for_others(who.caller, permissions) else None
    found = await executor.ledger.alist_confirmations(
        status=status,
        tool=shown.tool or None,
        thread=shown.thread or None,
        tools=None if who.allow == "all" else who.allow,
        ids=ids,
        readable=Readable(identity=who.caller.identity, others=others),
        after=shown.after,
        limit=PAGE,
        newest_first=newest_first,
        unexpired_at=executor.clock() if status == "pending" else None,
    )
    following = Cursor.of(found[-1]) if len(found) == PAGE else None
    return [held for held in found if theirs(who, held, permissions)], following


async def decidable(
    executor: Executor, who: Person, shown: Filters, ids: list[str] | None = None
) -> list[Confirmation]:
    """A page of the pending, unexpired confirmations ``who`` may decide, oldest first."""
    return (await _listed(executor, who, "pending", shown, ids=ids))[0]


def _card(executor: Executor, held: Confirmation, now: float) -> dict[str, Any]:
    """What a card (and the detail page) shows of a pending or decided confirmation."""
    tool = executor.registry.get(held.tool)
    return {
        "id": held.id,
        "seen": held.input_hash,  # sent back with a decision: the arguments the person saw
        "tool": held.tool,
        "title": (tool.title if tool is not None and tool.title else held.tool),
        "caller": present.asked_by(held.caller),
        "label": held.caller_label(),
        "thread": held.thread_id,
        "created_at": iso(held.created_at),
        "created": present.when(held.created_at, now),
        "expires_at": iso(held.expires_at),
        "expires": present.when(held.expires_at, now),
        "seconds_left": max(0, int(held.expires_at - now)),
        "arguments": present.node(held.input),
        "preview": present.preview_shown(held.preview),
        "needed": held.approvals_needed,
        "given": held.approvals_given,
        "separate_duties": held.separate_duties,
    }


async def inbox_values(executor: Executor, who: Person, shown: Filters) -> dict[str, Any]:
    now = executor.clock()
    found, following = await _listed(executor, who, "pending", shown)
    items = [_card(executor, held, now) for held in found]
    return {
        "items": items,
        "entries": _entries(items),
        "notice": "",
        "problems": {},
        "edited": {},
        "filters": shown,
        "tools": sorted(t.name for t in executor.registry.tools),
        "following": None if following is None else shown.query(following),
    }


def _entries(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cards of a page in order, those of a tool with more than ``GROUP_OVER`` on it
    folded into one group where its first card was (the group states its size)."""
    counts: dict[str, int] = {}
    for item in items:
        counts[item["tool"]] = counts.get(item["tool"], 0) + 1
    entries: list[dict[str, Any]] = []
    groups: dict[str, dict[str, Any]] = {}
    for index, item in enumerate(items, start=1):
        item["n"] = index  # the card's own field ids
        if counts[item["tool"]] <= GROUP_OVER:
            entries.append({"group": False, "items": [item]})
        elif item["tool"] in groups:
            groups[item["tool"]]["items"].append(item)
        else:
            groups[item["tool"]] = {"group": True, "tool": item["tool"], "items": [item]}
            entries.append(groups[item["tool"]])
    return entries


async def detail_values(executor: Executor, who: Person, held: Confirmation) -> dict[str, Any]:
    """What the page of one confirmation shows: the card's facts, the request that led to it,
    its approvals, what became of it and its audit trail."""
    now = executor.clock()
    trail = await executor.ledger.aaudit_rows(limit=PAGE, confirmation_ids=[held.id])
    approvals = [
        {"by": a.by, "at": present.when(a.at, now), "counts": a.input_hash == held.input_hash}
        for a in held.approvals
    ]
    decided = held.status != "pending"
    return {
        "item": _card(executor, held, now) | {"n": 1},
        "state": held.status,
        "asked": held.request or {},
        "approvals": approvals,
        "decision": _decision_shown(held, now) if decided else None,
        "trail": [
            {
                "at": present.when(float(row["at"]), now),
                "caller": row["caller"],
                "status": row["status"],
                "code": row["code"] or "",
                "duration_ms": row["duration_ms"],
                "detail": row["detail"] or "",
            }
            for row in trail
        ],
        "notice": "",
        "problems": {},
        "edited": {},
    }


def _decision_shown(held: Confirmation, now: float) -> dict[str, Any]:
    """A decided confirmation's decision as the history and the detail page show it."""
    decision = held.decision or {}
    reason = decision.get("message") if decision.get("action") == "reject" else None
    at = held.decided_at if held.decided_at is not None else held.expires_at
    return {
        "action": decision.get("action", held.status),
        "by": held.decided_by or "",
        "at": present.when(at, now),
        "at_iso": iso(at),
        "reason": reason if isinstance(reason, str) else "",
        "outcome": outcome_of(held),
    }


async def bulk_values(executor: Executor, who: Person, ids: list[str]) -> dict[str, Any]:
    """What a bulk decision is about to decide: those of ``ids`` still waiting for ``who``
    (counted per tool), and how many of the rest are gone (decided, expired, not theirs)."""
    waiting = await decidable(executor, who, Filters(), ids)
    per_tool: dict[str, int] = {}
    for held in waiting:
        per_tool[held.tool] = per_tool.get(held.tool, 0) + 1
    now = executor.clock()
    return {
        "items": [_card(executor, held, now) for held in waiting],
        "per_tool": sorted(per_tool.items()),
        "gone": len(ids) - len(waiting),
    }


async def history_rows(
    executor: Executor, who: Person, shown: Filters, status: str
) -> tuple[list[dict[str, Any]], str | None]:
    """A page of the decided confirmations ``who`` may see, newest first, each with what became
    of its write (from the confirmation itself: a repeat of a rejected call is no write)."""
    chosen: tuple[ConfirmationStatus, ...] = tuple(s for s in DECIDED if s == status) or DECIDED
    found, following = await _listed(executor, who, chosen, shown, newest_first=True)
    now = executor.clock()
    rows = [
        {
            "id": held.id,
            "tool": held.tool,
            "caller": present.asked_by(held.caller),
            "status": held.status,
            "arguments": present.node(held.input),
        }
        | _decision_shown(held, now)
        for held in found
    ]
    return rows, None if following is None else shown.query(following)


def outcome_of(held: Confirmation) -> str:
    """What became of a confirmation's write, in a few words: whether a write ran."""
    if held.status == "running":
        return "the write is running"
    match shown_outcome(held):
        case Ran():
            return "the write ran"
        case Unreadable():
            return f"{held.status}: its stored outcome is unreadable (check the ledger)"
        case Refused(code="outcome_unknown"):
            return "unknown: the write's process stopped (check the data)"
        case Refused(code="timeout" | "internal_error" | "tool_error" as code) if (
            held.status == "done"
        ):
            return f"the write failed ({code})"
        case Refused(code=code, details=details):
            reason = details.get("reason")
            why = f"{code}, {reason}" if reason else code
            return f"no write ran ({held.status}: {why})"
    return f"no write ran ({held.status})"
