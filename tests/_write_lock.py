"""Whether a SQLite statement has left the file's write lock when it returns to Python.

``probing(path, monkeypatch, prefixes)`` makes every connection ``sqlite3.connect`` opens a
``Probing`` one: after each statement starting with one of ``prefixes`` returns from
``execute``, a second connection tries ``BEGIN IMMEDIATE`` without waiting, and the outcome
("free", or SQLite's error) is appended to the list the context yields. A statement with
``RETURNING`` keeps the lock until its rows are read ("database is locked")."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest


@contextmanager
def probing(
    path: str, monkeypatch: pytest.MonkeyPatch, prefixes: tuple[str, ...]
) -> Iterator[list[str]]:
    connect = sqlite3.connect
    probe = connect(path, isolation_level=None, timeout=0)
    found: list[str] = []

    def lock_state() -> str:
        try:
            probe.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as busy:
            return str(busy)
        probe.execute("ROLLBACK")
        return "free"

    class Probing(sqlite3.Connection):
        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
            cursor = super().execute(sql, *args)
            if sql.startswith(prefixes):
                found.append(lock_state())
            return cursor

    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: connect(*a, **k, factory=Probing))
    try:
        yield found
    finally:
        probe.close()
