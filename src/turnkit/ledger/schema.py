"""The ledger's tables: one schema for both backends (SQLite and PostgreSQL).

Statements are written with ``?`` placeholders; the PostgreSQL backend turns them into ``%s``.
Every state change that must happen at most once is a single conditional statement
(``UPDATE ... WHERE status = 'pending'``, ``INSERT ... ON CONFLICT DO NOTHING``), so it is atomic
across threads and processes on both databases.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

TABLES = (
    """
    CREATE TABLE IF NOT EXISTS turnkit_confirmations (
        id TEXT PRIMARY KEY,
        caller TEXT NOT NULL,
        caller_identity TEXT NOT NULL,
        tool TEXT NOT NULL,
        input TEXT NOT NULL,
        input_hash TEXT NOT NULL,
        idempotency_key TEXT,
        status TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL,
        decided_at DOUBLE PRECISION,
        decided_by TEXT,
        decision TEXT,
        token TEXT,
        outcome TEXT,
        module TEXT,
        fingerprint TEXT,
        thread_id TEXT,
        reserved_units INTEGER NOT NULL DEFAULT 0,
        reserved_window BIGINT,
        preview TEXT,
        request TEXT,
        caller_name TEXT,
        approvals_needed INTEGER NOT NULL DEFAULT 1,
        separate_duties INTEGER NOT NULL DEFAULT 0
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS turnkit_approvals (
        confirmation_id TEXT NOT NULL,
        approver TEXT NOT NULL,
        input_hash TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (confirmation_id, approver)
    )
    """,
    "CREATE INDEX IF NOT EXISTS turnkit_confirmations_status"
    " ON turnkit_confirmations (status, caller_identity)",
    "CREATE INDEX IF NOT EXISTS turnkit_confirmations_token ON turnkit_confirmations (token)",
    """
    CREATE TABLE IF NOT EXISTS turnkit_idempotency (
        caller_identity TEXT NOT NULL,
        tool TEXT NOT NULL,
        key TEXT NOT NULL,
        input_hash TEXT NOT NULL,
        state TEXT NOT NULL,
        answer TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (caller_identity, tool, key)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS turnkit_rate_usage (
        caller_identity TEXT NOT NULL,
        window_start BIGINT NOT NULL,
        units INTEGER NOT NULL,
        PRIMARY KEY (caller_identity, window_start)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS turnkit_settings (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS turnkit_api_keys (
        id TEXT PRIMARY KEY,
        secret_hash TEXT NOT NULL UNIQUE,
        user_id TEXT NOT NULL,
        scopes TEXT NOT NULL,
        allow TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION,
        revoked_at DOUBLE PRECISION,
        name TEXT
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS turnkit_key_sessions (
        token_hash TEXT PRIMARY KEY,
        key_id TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL,
        last_seen DOUBLE PRECISION
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS turnkit_thread_leases (
        thread_id TEXT PRIMARY KEY,
        token BIGINT NOT NULL,
        holder TEXT NOT NULL,
        machine TEXT NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS turnkit_audit (
        id TEXT PRIMARY KEY,
        at DOUBLE PRECISION NOT NULL,
        caller_identity TEXT NOT NULL,
        tool TEXT NOT NULL,
        status TEXT NOT NULL,
        code TEXT,
        duration_ms DOUBLE PRECISION NOT NULL,
        confirmation_id TEXT,
        detail TEXT
    )
    """,
)

ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("turnkit_key_sessions", "last_seen", "DOUBLE PRECISION"),
    ("turnkit_confirmations", "module", "TEXT"),
    ("turnkit_confirmations", "fingerprint", "TEXT"),
    ("turnkit_confirmations", "thread_id", "TEXT"),
    ("turnkit_confirmations", "reserved_units", "INTEGER NOT NULL DEFAULT 0"),
    ("turnkit_confirmations", "reserved_window", "BIGINT"),
    ("turnkit_confirmations", "preview", "TEXT"),
    ("turnkit_confirmations", "request", "TEXT"),
    ("turnkit_confirmations", "caller_name", "TEXT"),
    ("turnkit_confirmations", "approvals_needed", "INTEGER NOT NULL DEFAULT 1"),
    ("turnkit_confirmations", "separate_duties", "INTEGER NOT NULL DEFAULT 0"),
    ("turnkit_api_keys", "name", "TEXT"),
)
"""Columns added to a table after it was first released, as ``(table, column, type)``: a ledger
made before has its tables upgraded in place by ``setup()`` (``column_additions``). Each column
is also in its table's ``CREATE TABLE`` above, and is nullable or has a default (old rows hold
NULL or it). An older turnkit still works on an upgraded ledger: it never names them."""


def column_additions(columns_of: Callable[[str], Collection[str]]) -> list[str]:
    """The ``ALTER TABLE`` statements adding the ``ADDED_COLUMNS`` a ledger's tables lack;
    ``columns_of(table)`` names the columns ``table`` has now.

    Example:
        >>> made = {"module", "fingerprint", "thread_id", "reserved_units", "reserved_window",
        ...         "preview", "request", "caller_name", "approvals_needed", "separate_duties"}
        >>> column_additions(lambda table: made | {"token_hash", "key_id", "expires_at", "name"})
        ['ALTER TABLE turnkit_key_sessions ADD COLUMN last_seen DOUBLE PRECISION']
    """
    present: dict[str, Collection[str]] = {}
    statements = []
    for table, column, kind in ADDED_COLUMNS:
        if table not in present:
            present[table] = columns_of(table)
        if column not in present[table]:
            statements.append(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
    return statements


CONFIRMATION_COLUMNS = (
    "id, caller, caller_identity, tool, input, input_hash, idempotency_key, status, created_at,"
    " expires_at, decided_at, decided_by, decision, token, outcome, module, fingerprint,"
    " thread_id, reserved_units, reserved_window, preview, request, caller_name,"
    " approvals_needed, separate_duties"
)
"""Every column of ``turnkit_confirmations``, in the order ``_confirmation`` reads them."""
CONFIRMATION_TYPES = (
    ("TEXT",) * 8
    + ("DOUBLE PRECISION",) * 3
    + ("TEXT",) * 7
    + ("INTEGER", "BIGINT")
    + ("TEXT",) * 3
    + ("INTEGER", "INTEGER")
)
"""The type of each of ``CONFIRMATION_COLUMNS`` (an insert from a ``SELECT`` names them: the
values have no column to take their type from there)."""

INDEXES = (
    "CREATE INDEX IF NOT EXISTS turnkit_confirmations_created"
    " ON turnkit_confirmations (created_at, id)",
    "CREATE INDEX IF NOT EXISTS turnkit_idempotency_created ON turnkit_idempotency (created_at)",
    "CREATE INDEX IF NOT EXISTS turnkit_audit_at ON turnkit_audit (at)",
    "CREATE INDEX IF NOT EXISTS turnkit_rate_usage_window ON turnkit_rate_usage (window_start)",
)
"""Indexes on columns that may have been added by ``ADDED_COLUMNS``, or that pruning and paging
read: created after the upgrade."""
