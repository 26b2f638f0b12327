"""The audit, read back: rows filtered, a page at a time, or all of them in constant memory
(``AuditRows``, a part of every ``Ledger``; the rows are written by ``Ledger.audit``).

Rows come in the order of ``at`` (when the call ended and was recorded), then ``id`` (the order two
rows of the same instant were written): newest first unless asked otherwise. A page ends with a
``Cursor`` (``records.Cursor``: that pair, an opaque text at the doors) and the next page starts
after it; the query seeks there through the index on ``(at, id)`` (``schema.INDEXES``), so reading
every page of a million rows costs as much as reading them once, and ``since``/``until`` are bounds
of that same index. Read by ``turnkit audit`` and ``GET /v1/audit`` (docs/architecture.md §4).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, TypedDict

from turnkit.ledger.records import Cursor
from turnkit.ledger.twins import async_twin

__all__ = [
    "AUDIT_COLUMNS",
    "AUDIT_SCOPE",
    "MAX_PAGE",
    "AuditJson",
    "AuditPage",
    "AuditQuery",
    "AuditRecord",
    "AuditRows",
]

AUDIT_SCOPE: Final = "system.audit:read"
"""The scope a key needs to read the audit over REST (``GET /v1/audit``): every caller's rows,
their tools and their errors' details, which a key that only calls tools must not see."""
MAX_PAGE: Final = 1000
"""The most rows one page may hold."""
AUDIT_COLUMNS: Final = (
    "id, at, caller_identity, tool, status, code, duration_ms, confirmation_id, detail, trace_id"
)
"""The columns of ``turnkit_audit`` in the order ``AuditRecord`` takes them."""


class AuditJson(TypedDict):
    """One audit row as the doors give it (``AuditRecord.to_json``)."""

    id: str
    at: str
    caller: str
    tool: str
    status: str
    code: str | None
    duration_ms: float
    confirmation_id: str | None
    detail: str | None
    trace_id: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class AuditRecord:
    """One row of the audit: one call through the executor, whatever its answer."""

    id: str
    """Sorts in the order the rows were written (nanoseconds, then random hex digits)."""
    at: float
    """When the call ended and its row was written (seconds since the epoch)."""
    caller: str
    """The caller's identity: ``session:alice``, ``key:key_...``, ``public``."""
    tool: str
    """The tool's registry name (``shop.set_prices``), as the call named it."""
    status: str
    """How it ended: ``ok``, ``error``, ``confirmation_required``, ``dry_run``, ``replayed``..."""
    code: str | None
    """The error code when it failed (``forbidden``, ``invalid_input``...)."""
    duration_ms: float
    """How long the call took."""
    confirmation_id: str | None
    """The confirmation it held, or ran for."""
    detail: str | None
    """What went wrong, for an operator (an internal error's text stays here)."""
    trace_id: str | None
    """The trace of the call's span (32 hex digits), when one was recorded."""

    @property
    def cursor(self) -> Cursor:
        """The cursor after this row."""
        return Cursor(created_at=self.at, id=self.id)

    def to_json(self) -> AuditJson:
        """The row as JSON data: ``at`` as ISO 8601 UTC with milliseconds."""
        at = datetime.fromtimestamp(self.at, tz=UTC).isoformat(timespec="milliseconds")
        return {
            "id": self.id, "at": at.replace("+00:00", "Z"), "caller": self.caller,
            "tool": self.tool, "status": self.status, "code": self.code,
            "duration_ms": self.duration_ms, "confirmation_id": self.confirmation_id,
            "detail": self.detail, "trace_id": self.trace_id,
        }  # fmt: skip


@dataclass(frozen=True, kw_only=True, slots=True)
class AuditQuery:
    """Which audit rows, in which order.

    Examples:
        >>> AuditQuery(tool="shop.", status="error").where(None)
        ('tool >= ? AND tool < ? AND status = ?', ['shop.', 'shop/', 'error'])
    """

    since: float | None = None
    """Only calls recorded at this moment or later (seconds since the epoch)."""
    until: float | None = None
    """Only calls recorded before this moment."""
    tool: str | None = None
    """Only this tool's rows; a name ending with ``.`` (``shop.``): every tool of that module."""
    caller: str | None = None
    """Only this caller's rows (its identity: ``key:key_...``, ``session:alice``)."""
    status: str | None = None
    """Only rows that ended so (``ok``, ``error``, ``confirmation_required``...)."""
    oldest_first: bool = False
    """Oldest first (the cursor then pages forward in time); newest first by default."""

    def where(self, after: Cursor | None) -> tuple[str, list[Any]]:
        """The ``WHERE`` clause of the rows after ``after`` (None: from the first), and its
        parameters. Both ends are ``(at, id)`` bounds of the one index: the cursor or the time
        limit, whichever is tighter (``since`` is ``(since, '')``: every id is longer)."""
        low = None if self.since is None else (self.since, "")
        high = None if self.until is None else (self.until, "")
        if after is not None:
            edge = (after.created_at, after.id)
            if self.oldest_first:
                low = edge if low is None else max(low, edge)
            else:
                high = edge if high is None else min(high, edge)
        clauses, params = list[str](), list[Any]()
        for bound, sign in ((low, ">"), (high, "<")):
            if bound is not None:
                clauses.append(f"(at, id) {sign} (?, ?)")
                params.extend(bound)
        if self.tool is not None and self.tool.endswith("."):  # the module's names, a range
            clauses.append("tool >= ? AND tool < ?")
            params.extend((self.tool, self.tool[:-1] + "/"))  # "/" is the character after "."
        elif self.tool is not None:
            clauses.append("tool = ?")
            params.append(self.tool)
        for column, value in (("caller_identity", self.caller), ("status", self.status)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        return " AND ".join(clauses) or "1 = 1", params


@dataclass(frozen=True, kw_only=True, slots=True)
class AuditPage:
    """One page of audit rows and where the next starts."""

    rows: list[AuditRecord]
    """The rows, in the query's order."""
    next: Cursor | None
    """The cursor of the next page; None when this one holds the last matching row."""


class AuditRows(ABC):
    """The audit's reads of a ledger, written once in SQL over ``_rows``."""

    @abstractmethod
    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Execute one query; return its rows."""

    def audit_page(
        self, query: AuditQuery | None = None, *, after: Cursor | None = None, limit: int = 100
    ) -> AuditPage:
        """The audit rows ``query`` picks, at most ``limit`` (1 to ``MAX_PAGE``), after the
        cursor ``after`` (``page.next`` of the page before).

        Raises:
            ValueError: ``limit`` is outside 1 to ``MAX_PAGE``.

        Examples:
            >>> from turnkit import MemoryLedger
            >>> ledger = MemoryLedger()
            >>> for at in (1.0, 2.0, 3.0):
            ...     ledger.audit(at=at, caller="public", tool="demo.ping", status="ok",
            ...                  code=None, duration_ms=0.1)
            >>> page = ledger.audit_page(limit=2)
            >>> [row.at for row in page.rows], [row.at for row in ledger.audit_page(
            ...     after=page.next).rows]
            ([3.0, 2.0], [1.0])
        """
        if not 1 <= limit <= MAX_PAGE:
            raise ValueError(f"limit is the most rows of a page, 1 to {MAX_PAGE}: got {limit!r}")
        query = query or AuditQuery()
        where, params = query.where(after)
        order = "ASC" if query.oldest_first else "DESC"
        found = self._rows(
            f"SELECT {AUDIT_COLUMNS} FROM turnkit_audit WHERE {where}"
            f" ORDER BY at {order}, id {order} LIMIT ?",
            (*params, limit + 1),  # one more says whether a next page exists
        )
        rows = [_record(row) for row in found[:limit]]
        return AuditPage(rows=rows, next=rows[-1].cursor if len(found) > limit else None)

    def audit_pages(
        self, query: AuditQuery | None = None, *, after: Cursor | None = None, size: int = MAX_PAGE
    ) -> Iterator[list[AuditRecord]]:
        """Every row ``query`` picks (after ``after``), a page of ``size`` at a time: one query
        per page, so memory holds one page whatever the count (an export)."""
        while True:
            page = self.audit_page(query, after=after, limit=size)
            if page.rows:
                yield page.rows
            if page.next is None:
                return
            after = page.next

    def audit_stream(
        self, query: AuditQuery | None = None, *, after: Cursor | None = None
    ) -> Iterator[AuditRecord]:
        """Every row ``query`` picks, one at a time, read a page at a time (``audit_pages``)."""
        for rows in self.audit_pages(query, after=after):
            yield from rows

    aaudit_page = async_twin(audit_page)


def _record(row: Sequence[Any]) -> AuditRecord:
    id_, at, caller, tool, status, code, duration_ms, confirmation_id, detail, trace_id = row
    return AuditRecord(
        id=id_, at=at, caller=caller, tool=tool, status=status, code=code,
        duration_ms=duration_ms, confirmation_id=confirmation_id, detail=detail,
        trace_id=trace_id,
    )  # fmt: skip
