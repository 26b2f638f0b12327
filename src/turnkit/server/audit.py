"""``/v1/audit``: the audit rows, filtered, a page at a time or all of them as JSON lines.

Reading the audit needs the scope ``system.audit:read`` (``AUDIT_SCOPE``): it shows every
caller's calls and their errors' details, which a key that only calls tools must not see. The
rows and their order are the ledger's (``ledger/audit.py``): newest first by ``at``, then ``id``;
``next_cursor`` continues a page. The export streams every matching row as JSON lines
(``application/x-ndjson``), read a page at a time in a worker thread (Starlette iterates a sync
iterator off the event loop), so its memory holds one page whatever the count.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from turnkit.ledger.audit import AUDIT_SCOPE, MAX_PAGE, AuditQuery, AuditRecord
from turnkit.ledger.keys import ApiKey
from turnkit.ledger.records import Cursor
from turnkit.server.auth import ExecutorDep, Key

__all__ = ["router"]

router = APIRouter(prefix="/audit", tags=["audit"])

PAGE = 100
"""Rows per page by default (``limit`` may ask for up to ``MAX_PAGE``)."""
NDJSON = "application/x-ndjson"


async def audit_reader(key: Key) -> ApiKey:
    """The request's key when it carries ``AUDIT_SCOPE``; a 403 problem otherwise."""
    if AUDIT_SCOPE not in key.scopes:
        raise HTTPException(
            403,
            f"this key may not read the audit: it needs the scope {AUDIT_SCOPE!r} (turnkit keys"
            f" create --user {key.user_id} --scope {AUDIT_SCOPE})",
        )
    return key


Reader = Annotated[ApiKey, Depends(audit_reader)]


class AuditRowView(BaseModel):
    """One audit row: one call through the executor, whatever its answer."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(description="Sorts in the order the rows were written.")
    at: str = Field(description="When the call ended and was recorded, ISO 8601 UTC.")
    caller: str = Field(description="The caller's identity: key:..., session:..., public.")
    tool: str = Field(description="The tool's registry name.")
    status: str = Field(description="How it ended: ok, error, held, dry_run, replayed...")
    code: str | None = Field(description="The error code when it failed.")
    duration_ms: float = Field(description="How long the call took.")
    confirmation_id: str | None = Field(description="The confirmation it held, or ran for.")
    detail: str | None = Field(description="What went wrong, for an operator.")
    trace_id: str | None = Field(description="The trace of the call's span (32 hex digits).")


class AuditPageView(BaseModel):
    """A page of audit rows."""

    rows: list[AuditRowView]
    next_cursor: str | None = Field(
        description="Pass it as `cursor` for the next page; null after the last."
    )


def audit_query(
    since: Annotated[
        datetime | None,
        Query(
            description="Only calls recorded then or later: ISO 8601 (UTC when it names"
            " no zone) or seconds since the epoch."
        ),
    ] = None,
    until: Annotated[
        datetime | None, Query(description="Only calls recorded before then (as since).")
    ] = None,
    tool: Annotated[
        str | None,
        Query(
            max_length=200,
            description="Only this tool's rows; a module's name and a dot (shop.) for its tools.",
        ),
    ] = None,
    caller: Annotated[
        str | None,
        Query(max_length=2000, description="Only this caller's rows (key:KEY_ID, session:USER)."),
    ] = None,
    status: Annotated[
        str | None, Query(max_length=40, description="Only rows that ended so (ok, error...).")
    ] = None,
    order: Annotated[
        Literal["newest", "oldest"], Query(description="Newest first, or oldest first.")
    ] = "newest",
) -> AuditQuery:
    """The filters of both routes, from the query string."""
    return AuditQuery(
        since=None if since is None else _seconds(since),
        until=None if until is None else _seconds(until),
        tool=tool,
        caller=caller,
        status=status,
        oldest_first=order == "oldest",
    )


Filters = Annotated[AuditQuery, Depends(audit_query)]
CursorText = Annotated[
    str | None, Query(max_length=400, description="The next_cursor of the page before.")
]


@router.get("")
async def list_audit(
    reader: Reader,
    executor: ExecutorDep,
    query: Filters,
    cursor: CursorText = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="At most this many.")] = PAGE,
) -> AuditPageView:
    """Audit rows, newest first, a page at a time: every caller's calls, how each ended and how
    long it took. Needs the scope ``system.audit:read``."""
    page = await executor.ledger.aaudit_page(query, after=_cursor(cursor), limit=limit)
    return AuditPageView.model_validate(
        {
            "rows": [row.to_json() for row in page.rows],
            "next_cursor": None if page.next is None else page.next.text(),
        }
    )


@router.get(
    "/export",
    response_class=StreamingResponse,
    responses={200: {"description": "One row a line, as in /v1/audit", "content": {NDJSON: {}}}},
)
async def export_audit(
    reader: Reader, executor: ExecutorDep, query: Filters, cursor: CursorText = None
) -> StreamingResponse:
    """Every audit row the filters pick, as JSON lines (``application/x-ndjson``), streamed a
    page at a time: no limit, constant memory. Needs the scope ``system.audit:read``."""
    pages = executor.ledger.audit_pages(query, after=_cursor(cursor))
    return StreamingResponse(_lines(pages), media_type=NDJSON)


def _lines(pages: Iterator[list[AuditRecord]]) -> Iterator[bytes]:
    """A page's rows as one chunk of JSON lines (one worker-thread hop a page, not a row)."""
    for rows in pages:
        yield "".join(json.dumps(row.to_json()) + "\n" for row in rows).encode()


def _cursor(text: str | None) -> Cursor | None:
    if text is None:
        return None
    cursor = Cursor.parse(text)
    if cursor is None:
        raise HTTPException(422, "'cursor' is not a cursor: pass the next_cursor a page gave")
    return cursor


def _seconds(moment: datetime) -> float:
    """Seconds since the epoch; a moment without a zone is UTC."""
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
