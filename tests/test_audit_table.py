"""The audit's table on SQLite: a new ledger keeps its rows in one B-tree ordered as they are read
(``schema.SQLITE_AUDIT``: ``(at, id)`` is the key, ``WITHOUT ROWID``), a ledger made before keeps
its table with a rowid, its ``id`` key and its index on ``(at, id)``; both answer every read of the
audit alike (pages across ties, filters, pruning), and neither reads the whole table to do it.

Reaches ``turnkit.ledger.retention`` (pruning has no public name) and the ledger's ``_rows`` to
read SQLite's own catalogue and query plans."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from turnkit import Ledger, MemoryLedger, open_ledger
from turnkit.ledger.retention import prune  # internal: pruning has no public name

OLD_AUDIT = (  # the table and index a ledger of turnkit 0.x made (schema.TABLES' shape)
    "CREATE TABLE turnkit_audit (id TEXT PRIMARY KEY, at DOUBLE PRECISION NOT NULL,"
    " caller_identity TEXT NOT NULL, tool TEXT NOT NULL, status TEXT NOT NULL, code TEXT,"
    " duration_ms DOUBLE PRECISION NOT NULL, confirmation_id TEXT, detail TEXT, trace_id TEXT)",
    "CREATE INDEX turnkit_audit_at_id ON turnkit_audit (at, id)",
)
DAY = 86400.0


def _indexes(ledger: Ledger) -> list[str]:
    return [row[0] for row in ledger._rows(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'turnkit_audit'"
    )]  # fmt: skip


def _plan(ledger: Ledger, sql: str, params: tuple[object, ...]) -> str:
    return " | ".join(str(row[-1]) for row in ledger._rows(f"EXPLAIN QUERY PLAN {sql}", params))


@pytest.fixture(params=["new", "old", "memory"])
def audit_ledger(request, tmp_path: Path):
    """A SQLite ledger made now, one whose audit table an older turnkit made, and a
    ``MemoryLedger`` (the same SQL in memory)."""
    if request.param == "memory":
        ledger: Ledger = MemoryLedger()
    else:
        path = tmp_path / "ledger.sqlite"
        if request.param == "old":
            with sqlite3.connect(path) as conn:
                for statement in OLD_AUDIT:
                    conn.execute(statement)
        ledger = open_ledger(str(path))
    yield ledger
    ledger.close()


def test_a_new_sqlite_ledger_keeps_its_audit_in_one_b_tree(tmp_path):
    ledger = open_ledger(str(tmp_path / "ledger.sqlite"))
    try:
        (sql,) = ledger._rows("SELECT sql FROM sqlite_master WHERE name = 'turnkit_audit'")[0]
        assert "PRIMARY KEY (at, id)" in sql
        assert sql.endswith("WITHOUT ROWID")
        # its key is the table itself (the one B-tree a call writes), and there is no index
        assert _indexes(ledger) == []
        assert ledger._rows("SELECT origin FROM pragma_index_list('turnkit_audit')") == [("pk",)]
        open_ledger(str(tmp_path / "ledger.sqlite")).close()  # opened again: nothing added
        assert _indexes(ledger) == []
    finally:
        ledger.close()


def test_a_ledger_made_before_keeps_its_audit_table_and_index(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as conn:
        for statement in OLD_AUDIT:
            conn.execute(statement)
        conn.execute(
            "INSERT INTO turnkit_audit (id, at, caller_identity, tool, status, duration_ms)"
            " VALUES ('00000000000000000001-aaaaaaaaaaaa', 5.0, 'public', 'demo.ping', 'ok', 1)"
        )
    ledger = open_ledger(str(path))
    try:
        (sql,) = ledger._rows("SELECT sql FROM sqlite_master WHERE name = 'turnkit_audit'")[0]
        assert "WITHOUT ROWID" not in sql
        assert sorted(_indexes(ledger)) == ["sqlite_autoindex_turnkit_audit_1",
                                             "turnkit_audit_at_id"]  # fmt: skip
        assert [row.at for row in ledger.audit_page().rows] == [5.0]  # its rows are still read
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
        seen += [(row.at, row.caller) for row in page.rows]
        if page.next is None:
            break
        after = page.next
    assert [at for at, _ in seen] == [2.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert len(ledger.audit_rows(limit=100)) == 7
    pruned = prune(ledger, now=1.5 + 30 * DAY, retention_days=30, audit_retention_days=30)
    assert pruned.audit == 6  # the rows at 0 and 1 went; the one at 2 stays
    assert [row.at for row in ledger.audit_page().rows] == [2.0]


def test_neither_shape_reads_the_whole_audit_to_page_or_prune(audit_ledger, monkeypatch):
    """The statements the ledger runs, as SQLite plans them: a page seeks to its cursor and
    reads in order, pruning finds each batch's rows by their key."""
    if isinstance(audit_ledger, MemoryLedger):
        pytest.skip("a new SQLite file's tables: its plans are that case's")
    ledger = audit_ledger
    for n in range(5):
        ledger.audit(at=float(n), caller="public", tool="shop.list", status="ok", code=None,
                     duration_ms=1.0)  # fmt: skip
    ran: list[tuple[str, tuple[object, ...]]] = []
    for name in ("_rows", "_run"):
        real = getattr(ledger, name)

        def noted(sql, params=(), real=real):
            if "turnkit_audit" in sql:
                ran.append((sql, tuple(params)))
            return real(sql, params)

        monkeypatch.setattr(ledger, name, noted)
    ledger.audit_page(after=ledger.audit_page(limit=2).next, limit=2)
    prune(ledger, now=2.5 + 30 * DAY, retention_days=30, audit_retention_days=30)
    monkeypatch.undo()
    statements = [(sql, params) for sql, params in ran if "(at, id)" in sql]
    assert [sql.split()[0] for sql, _ in statements] == ["SELECT", "DELETE"]
    for sql, params in statements:
        plan = _plan(ledger, sql, params)
        assert "SEARCH turnkit_audit USING" in plan, plan
        assert "SCAN turnkit_audit" not in plan.replace("SCAN turnkit_audit USING", ""), plan
        assert "TEMP B-TREE" not in plan, plan
