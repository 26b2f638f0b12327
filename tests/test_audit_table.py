"""The audit's table on SQLite: a new ledger keeps its rows in a table with a rowid and one index,
on ``(at, id)`` (``schema.SQLITE_AUDIT``: two B-trees a call writes, not three); a ledger made
before keeps its table with its ``id`` key too. Both answer every read of the audit alike (pages
across ties, filters, pruning), neither reads the whole table to do it, and a row with a long
``detail`` costs what its bytes cost in either.

Reaches ``turnkit.ledger.retention`` (pruning has no public name) and the ledger's ``_rows`` to
read SQLite's own catalogue and query plans."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from turnkit import Ledger, MemoryLedger, open_ledger
from turnkit.ledger.audit import AuditQuery  # internal: the query has no public name
from turnkit.ledger.retention import prune  # internal: pruning has no public name

OLD_AUDIT = (  # the table and index a ledger of turnkit before this change made (TABLES' shape)
    "CREATE TABLE turnkit_audit (id TEXT PRIMARY KEY, at DOUBLE PRECISION NOT NULL,"
    " caller_identity TEXT NOT NULL, tool TEXT NOT NULL, status TEXT NOT NULL, code TEXT,"
    " duration_ms DOUBLE PRECISION NOT NULL, confirmation_id TEXT, detail TEXT, trace_id TEXT)",
    "CREATE INDEX turnkit_audit_at_id ON turnkit_audit (at, id)",
)
DAY = 86400.0


def _indexes(ledger: Ledger) -> list[str]:
    return sorted(row[0] for row in ledger._rows(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'turnkit_audit'"
    ))  # fmt: skip


def _plan(ledger: Ledger, sql: str, params: tuple[object, ...]) -> list[str]:
    return [str(row[-1]) for row in ledger._rows(f"EXPLAIN QUERY PLAN {sql}", params)]


def _old_file(path: Path) -> Path:
    with sqlite3.connect(path) as conn:
        for statement in OLD_AUDIT:
            conn.execute(statement)
    return path


@pytest.fixture(params=["new", "old", "memory"])
def audit_ledger(request, tmp_path: Path):
    """A SQLite ledger made now, one whose audit table an older turnkit made, and a
    ``MemoryLedger`` (the same SQL in memory)."""
    if request.param == "memory":
        ledger: Ledger = MemoryLedger()
    else:
        path = tmp_path / "ledger.sqlite"
        if request.param == "old":
            _old_file(path)
        ledger = open_ledger(str(path))
    yield ledger
    ledger.close()


def test_a_new_sqlite_ledger_writes_each_audit_row_into_two_b_trees(tmp_path):
    path = tmp_path / "ledger.sqlite"
    ledger = open_ledger(str(path))
    try:
        (sql,) = ledger._rows("SELECT sql FROM sqlite_master WHERE name = 'turnkit_audit'")[0]
        assert "PRIMARY KEY" not in sql
        assert "WITHOUT ROWID" not in sql
        assert _indexes(ledger) == ["turnkit_audit_at_id"]  # no key on id: one index
        open_ledger(str(path)).close()  # opened again: nothing added
        assert _indexes(ledger) == ["turnkit_audit_at_id"]
    finally:
        ledger.close()


def test_a_ledger_made_before_keeps_its_audit_table_key_and_rows(tmp_path):
    path = _old_file(tmp_path / "old.sqlite")
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO turnkit_audit (id, at, caller_identity, tool, status, duration_ms)"
            " VALUES ('00000000000000000001-aaaaaaaaaaaa', 5.0, 'public', 'demo.ping', 'ok', 1)"
        )
    ledger = open_ledger(str(path))
    try:
        (sql,) = ledger._rows("SELECT sql FROM sqlite_master WHERE name = 'turnkit_audit'")[0]
        assert "PRIMARY KEY" in sql
        assert _indexes(ledger) == ["sqlite_autoindex_turnkit_audit_1", "turnkit_audit_at_id"]
        ledger.audit(at=6.0, caller="public", tool="demo.ping", status="ok", code=None,
                     duration_ms=1.0)  # fmt: skip
        assert [row.at for row in ledger.audit_page().rows] == [6.0, 5.0]
    finally:
        ledger.close()


def test_both_shapes_page_prune_and_filter_the_audit_alike(audit_ledger):
    ledger = audit_ledger
    for n in range(7):  # rows of one instant in threes: pages must part ties by id
        ledger.audit(at=float(n // 3), caller=f"key:k{n % 2}", tool="shop.list",
                     status="ok" if n % 2 else "error", code=None, duration_ms=1.0)  # fmt: skip
    seen, after = [], None
    while True:
        page = ledger.audit_page(after=after, limit=2)
        seen += [(row.at, row.id) for row in page.rows]
        if page.next is None:
            break
        after = page.next
    assert [at for at, _ in seen] == [2.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert len({row_id for _, row_id in seen}) == 7  # every row once, ties parted by id
    assert len(ledger.audit_page(AuditQuery(caller="key:k1")).rows) == 3
    assert len(ledger.audit_rows(limit=100)) == 7
    pruned = prune(ledger, now=1.5 + 30 * DAY, retention_days=30, audit_retention_days=30)
    assert pruned.audit == 6  # the rows at 0 and 1 went; the one at 2 stays
    assert [row.at for row in ledger.audit_page().rows] == [2.0]


def test_pruning_deletes_in_batches_across_rows_of_one_instant(audit_ledger, monkeypatch):
    """A batch is chosen by ``(at, id)``: rows of one instant split across batches all go."""
    monkeypatch.setattr("turnkit.ledger.retention.BATCH", 4)
    for n in range(11):
        audit_ledger.audit(at=1.0 if n < 9 else 50.0, caller="public", tool="shop.list",
                           status="ok", code=None, duration_ms=1.0)  # fmt: skip
    pruned = prune(audit_ledger, now=2.0 + 30 * DAY, retention_days=30, audit_retention_days=30)
    assert pruned.audit == 9
    assert [row.at for row in audit_ledger.audit_page().rows] == [50.0, 50.0]


def test_neither_shape_reads_the_whole_audit_to_page_or_prune(audit_ledger, monkeypatch):
    """The statements the ledger runs, as SQLite plans them: a page seeks to its cursor and
    reads in order; pruning finds a batch's rows, and then each of them, through the index."""
    if isinstance(audit_ledger, MemoryLedger):
        pytest.skip("a new SQLite file's tables: its plans are that case's")
    ledger = audit_ledger
    for n in range(5):
        ledger.audit(at=float(n), caller="public", tool="shop.list", status="ok", code=None,
                     duration_ms=1.0)  # fmt: skip
    cursor = ledger.audit_page(limit=2).next
    ran: list[tuple[str, tuple[object, ...]]] = []
    for name in ("_rows", "_run"):
        real = getattr(ledger, name)

        def noted(sql, params=(), real=real):
            if "turnkit_audit" in sql:
                ran.append((sql, tuple(params)))
            return real(sql, params)

        monkeypatch.setattr(ledger, name, noted)
    ledger.audit_page(after=cursor, limit=2)
    prune(ledger, now=2.5 + 30 * DAY, retention_days=30, audit_retention_days=30)
    monkeypatch.undo()
    assert [sql.split()[0] for sql, _ in ran] == ["SELECT", "DELETE"]
    for sql, params in ran:
        plan = _plan(ledger, sql, params)
        reads = [step for step in plan if "turnkit_audit" in step]
        assert reads, plan
        assert all(
            step.startswith("SEARCH turnkit_audit USING")
            and ("turnkit_audit_at_id" in step or "(rowid=?)" in step)
            for step in reads
        ), plan  # every read seeks: through the (at, id) index, or to a row by its rowid
        assert not any("TEMP B-TREE" in step for step in plan), plan


def test_a_long_detail_costs_its_bytes_not_a_page(tmp_path):
    """A rowid table keeps a row of a few KB on its leaf pages: 200 rows with a 1,900-character
    detail (an error's message, cut at 2,000) take ~0.4 MB, not an overflow page each."""
    ledger = open_ledger(str(tmp_path / "ledger.sqlite"))
    try:
        before = ledger._rows("PRAGMA page_count")[0][0]
        for n in range(200):
            ledger.audit(at=float(n), caller="public", tool="shop.list", status="error",
                         code="internal_error", duration_ms=1.0, detail="x" * 1900)  # fmt: skip
        ledger._rows("PRAGMA wal_checkpoint(TRUNCATE)")
        grown = (ledger._rows("PRAGMA page_count")[0][0] - before) * 4096
        assert grown < 200 * 2600, grown  # ~2 KB a row with the index; an overflow page is 4 KB
    finally:
        ledger.close()
