"""The audit read back (``Ledger.audit_page``, ``audit_pages``, ``audit_stream``): filters, keyset
pages and a stream, the same on memory, SQLite and PostgreSQL.

Reaches ``turnkit.ledger.audit`` and ``turnkit.ledger.records``: the query and the cursor of the
audit have no public name (the doors, ``turnkit audit`` and ``GET /v1/audit``, are the way in)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conftest import postgres_url
from turnkit import Ledger, MemoryLedger, open_ledger
from turnkit.ledger.audit import MAX_PAGE, AuditQuery  # internal: the query has no public name
from turnkit.ledger.records import Cursor  # internal: a page's cursor


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def audited(request, tmp_path) -> Iterator[Ledger]:
    """An empty ledger on each backend."""
    if request.param == "memory":
        ledger: Ledger = MemoryLedger()
    elif request.param == "sqlite":
        ledger = open_ledger(tmp_path / "ledger.sqlite")
    else:
        ledger = open_ledger(postgres_url())
    yield ledger
    ledger.close()


def write(ledger: Ledger, at: float, tool: str = "shop.list_products", **fields) -> None:
    row = {"caller": "key:k1", "status": "ok", "code": None, "duration_ms": 1.5} | fields
    ledger.audit(at=at, tool=tool, **row)


def every_page(ledger: Ledger, query: AuditQuery | None = None, limit: int = 3) -> list[list]:
    pages, after = [], None
    while True:
        page = ledger.audit_page(query, after=after, limit=limit)
        pages.append(page.rows)
        if page.next is None:
            return pages
        after = page.next


def test_a_row_carries_every_field_and_its_trace_id(audited):
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    write(audited, 10.0, status="error", code="forbidden", confirmation_id="c1",
          detail="no right", trace_id=trace)  # fmt: skip
    (row,) = audited.audit_page().rows
    assert row.to_json() == {
        "id": row.id, "at": "1970-01-01T00:00:10.000Z", "caller": "key:k1",
        "tool": "shop.list_products", "status": "error", "code": "forbidden", "duration_ms": 1.5,
        "confirmation_id": "c1", "detail": "no right", "trace_id": trace,
    }  # fmt: skip
    assert audited.audit_rows()[0]["trace_id"] == trace


def test_pages_give_every_row_once_newest_first_even_when_many_share_an_instant(audited):
    for i in range(11):
        write(audited, 100.0 + i // 4)  # runs of four rows at one instant, across pages
    pages = every_page(audited)
    rows = [row for page in pages for row in page]
    assert [len(page) for page in pages] == [3, 3, 3, 2]
    assert len({row.id for row in rows}) == 11
    assert [(r.at, r.id) for r in rows] == sorted(((r.at, r.id) for r in rows), reverse=True)


def test_oldest_first_pages_forward_in_time(audited):
    for i in range(7):
        write(audited, 100.0 + i)
    rows = [row for page in every_page(audited, AuditQuery(oldest_first=True)) for row in page]
    assert [row.at for row in rows] == [100.0 + i for i in range(7)]


def test_a_full_last_page_says_there_is_no_next_one(audited):
    for i in range(6):
        write(audited, 100.0 + i)
    assert [len(page) for page in every_page(audited)] == [3, 3]


def test_since_is_inclusive_and_until_exclusive(audited):
    for i in range(10):
        write(audited, 100.0 + i)
    rows = audited.audit_page(AuditQuery(since=103.0, until=107.0)).rows
    assert [row.at for row in rows] == [106.0, 105.0, 104.0, 103.0]
    paged = every_page(audited, AuditQuery(since=103.0, until=107.0), limit=1)
    assert [row.at for page in paged for row in page] == [106.0, 105.0, 104.0, 103.0]


def test_filters_by_tool_module_caller_and_status(audited):
    write(audited, 1.0, tool="shop.list_products")
    write(audited, 2.0, tool="shop.delete_product", status="held", confirmation_id="c1")
    write(audited, 3.0, tool="shopping.cart", caller="session:alice")
    write(audited, 4.0, tool="shop.list_products", caller="session:alice", status="error",
          code="forbidden")  # fmt: skip

    def ats(**query) -> list[float]:
        return [row.at for row in audited.audit_page(AuditQuery(**query)).rows]

    assert ats(tool="shop.list_products") == [4.0, 1.0]
    assert ats(tool="shop.") == [4.0, 2.0, 1.0]  # a module's tools, not shopping's
    assert ats(caller="session:alice") == [4.0, 3.0]
    assert ats(status="held") == [2.0]
    assert ats(tool="shop.", caller="session:alice", status="error") == [4.0]
    assert ats(tool="shop.nothing") == []


def test_a_cursor_outside_the_period_starts_at_the_period(audited):
    for i in range(5):
        write(audited, 100.0 + i)
    query = AuditQuery(until=102.0)
    far = Cursor(created_at=1e12, id="x")  # past `until`: the period's end wins
    assert [row.at for row in audited.audit_page(query, after=far).rows] == [101.0, 100.0]


def test_the_stream_reads_every_row_a_page_at_a_time(audited):
    for i in range(2 * MAX_PAGE + 5):
        write(audited, float(i), tool=f"shop.tool_{i % 3}")
    pages = list(audited.audit_pages(AuditQuery(oldest_first=True)))
    assert [len(page) for page in pages] == [MAX_PAGE, MAX_PAGE, 5]
    streamed = list(audited.audit_stream(AuditQuery(tool="shop.tool_1")))
    assert [row.at for row in streamed] == [float(i) for i in range(2 * MAX_PAGE + 4, 0, -1)
                                             if i % 3 == 1]  # fmt: skip


@pytest.mark.parametrize("limit", [0, MAX_PAGE + 1])
def test_a_page_limit_out_of_range_is_refused(limit):
    with pytest.raises(ValueError, match=f"1 to {MAX_PAGE}"):
        MemoryLedger().audit_page(limit=limit)


async def test_the_async_twin_reads_the_same_page(audited):
    for i in range(4):
        write(audited, 100.0 + i)
    page = await audited.aaudit_page(AuditQuery(since=101.0), limit=2)
    assert [row.at for row in page.rows] == [103.0, 102.0]
    assert page.next is not None
