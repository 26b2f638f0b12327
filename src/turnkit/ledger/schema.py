"""The ledger's tables: one schema for both backends (SQLite and PostgreSQL).

Statements are written with ``?`` placeholders; the PostgreSQL backend turns them into ``%s``.
Every state change that must happen at most once is a single conditional statement
(``UPDATE ... WHERE status = 'pending'``, ``INSERT ... ON CONFLICT DO NOTHING``), so it is atomic
across threads and processes on both databases.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

_AUDIT_COLUMNS = (
    "at DOUBLE PRECISION NOT NULL, caller_identity TEXT NOT NULL, tool TEXT NOT NULL,"
    " status TEXT NOT NULL, code TEXT, duration_ms DOUBLE PRECISION NOT NULL,"
    " confirmation_id TEXT, detail TEXT, trace_id TEXT"
)
"""The audit's columns but ``id``, in both its tables (``AUDIT_TABLE``, ``SQLITE_AUDIT``)."""

AUDIT_TABLE = f"CREATE TABLE IF NOT EXISTS turnkit_audit (id TEXT PRIMARY KEY, {_AUDIT_COLUMNS})"
"""The audit's table with its ``id`` key: PostgreSQL's, and a SQLite ledger's made before
``SQLITE_AUDIT``."""

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
        separate_duties INTEGER NOT NULL DEFAULT 0,
        trace_context TEXT
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
        name TEXT,
        last_used_at DOUBLE PRECISION
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
    AUDIT_TABLE,
    """
    CREATE TABLE IF NOT EXISTS turnkit_notify_targets (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL,
        config TEXT NOT NULL,
        events TEXT NOT NULL,
        include TEXT NOT NULL DEFAULT ',',
        created_at DOUBLE PRECISION NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS turnkit_outbox (
        id TEXT PRIMARY KEY,
        event TEXT NOT NULL,
        confirmation_id TEXT NOT NULL,
        status TEXT NOT NULL,
        target_id TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        state TEXT NOT NULL DEFAULT 'pending',
        attempts INTEGER NOT NULL DEFAULT 0,
        next_at DOUBLE PRECISION NOT NULL DEFAULT 0,
        claimed_by TEXT,
        claimed_until DOUBLE PRECISION,
        last_error TEXT,
        sent_at DOUBLE PRECISION
    )
    """,
    "CREATE INDEX IF NOT EXISTS turnkit_outbox_due ON turnkit_outbox (state, next_at)",
)

SQLITE_AUDIT = f"CREATE TABLE IF NOT EXISTS turnkit_audit (id TEXT NOT NULL, {_AUDIT_COLUMNS})"
"""The audit's table in a new SQLite ledger: its rows and the index on ``(at, id)`` they are read
by (``INDEXES``), two B-trees where ``TABLES``' shape keeps three (the rows, the ``id`` key, that
index). Every call writes a row, and on SQLite every write waits for the file's one lock:
``Ledger.audit`` took ~68 µs with three B-trees here, ~52 µs with two (``docs/performance.md``).
``id`` stays practically unique without its own key (it starts with the nanosecond it was
made and ends with 48 random bits, ``Ledger.audit``), and nothing looks a row up by it: pages
seek to ``(at, id)``, pruning deletes by rowid (``retention.py``). A ledger made before keeps its
table; PostgreSQL's keeps the key (logical replication needs one to publish the pruning's
deletes)."""

SQLITE_TABLES = tuple(SQLITE_AUDIT if table is AUDIT_TABLE else table for table in TABLES)
"""``TABLES`` as a SQLite ledger (and ``MemoryLedger``) creates them (``SQLITE_AUDIT``)."""

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
    ("turnkit_confirmations", "trace_context", "TEXT"),
    ("turnkit_audit", "trace_id", "TEXT"),
    ("turnkit_api_keys", "last_used_at", "DOUBLE PRECISION"),
)
"""Columns added to a table after it was first released, as ``(table, column, type)``: a ledger
made before has its tables upgraded in place by ``setup()`` (``column_additions``). Each column
is also in its table's ``CREATE TABLE`` above, and is nullable or has a default (old rows hold
NULL or it). An older turnkit still works on an upgraded ledger: it never names them."""


def column_additions(columns_of: Callable[[str], Collection[str]]) -> list[str]:
    """The ``ALTER TABLE`` statements adding the ``ADDED_COLUMNS`` a ledger's tables lack;
    ``columns_of(table)`` names the columns ``table`` has now.

    Examples:
        >>> made = {"module", "fingerprint", "thread_id", "reserved_units", "reserved_window",
        ...         "preview", "request", "caller_name", "approvals_needed", "separate_duties",
        ...         "trace_context", "trace_id"}
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
    " approvals_needed, separate_duties, trace_context"
)
"""Every column of ``turnkit_confirmations``, in the order ``_confirmation`` reads them."""
CONFIRMATION_TYPES = (
    ("TEXT",) * 8
    + ("DOUBLE PRECISION",) * 3
    + ("TEXT",) * 7
    + ("INTEGER", "BIGINT")
    + ("TEXT",) * 3
    + ("INTEGER", "INTEGER", "TEXT")
)
"""The type of each of ``CONFIRMATION_COLUMNS`` (an insert from a ``SELECT`` names them: the
values have no column to take their type from there)."""

INDEXES = (
    "CREATE INDEX IF NOT EXISTS turnkit_confirmations_created"
    " ON turnkit_confirmations (created_at, id)",
    "CREATE INDEX IF NOT EXISTS turnkit_idempotency_created ON turnkit_idempotency (created_at)",
    "CREATE INDEX IF NOT EXISTS turnkit_audit_at_id ON turnkit_audit (at, id)",
    "CREATE INDEX IF NOT EXISTS turnkit_rate_usage_window ON turnkit_rate_usage (window_start)",
)
"""Indexes on columns that may have been added by ``ADDED_COLUMNS``, or that pruning and paging
read: created after the upgrade. The audit's is on ``(at, id)``, the order its pages are read in
(``ledger/audit.py``: a page seeks to its cursor, pruning to its moment); a ledger made before it
also keeps its first one, on ``at`` alone (``turnkit_audit_at``), which nothing needs now."""


OUTBOX_EVENTS = ("held", "decided", "expired", "ran")
"""The events of a confirmation that go to the outbox, in the order they happen."""

_OUTBOX_INSERT = (
    "INSERT INTO turnkit_outbox (id, event, confirmation_id, status, target_id, created_at)"
    " SELECT {cid} || ':' || {event} || ':' || t.id, {event}, {cid}, {status}, t.id, {now}"
    " FROM turnkit_notify_targets t WHERE t.events LIKE '%,' || {event} || ',%'"
    " ON CONFLICT DO NOTHING"
)
"""The outbox rows of one event: one per target that asked for it, with a stable id (the
``webhook-id`` receivers de-duplicate by). A row already there is kept: a confirmation reopened
(a rate-limited approval goes back to pending) and decided again keeps its first ``decided``
row, so each event is told once per target. With no target the ``SELECT`` finds nothing."""

_EVENT_OF_UPDATE = (
    "CASE WHEN OLD.status = 'pending' AND NEW.status IN ('running', 'rejected', 'forbidden')"
    " THEN 'decided' WHEN OLD.status = 'pending' AND NEW.status = 'expired' THEN 'expired'"
    " WHEN OLD.status = 'running' AND NEW.status = 'done' THEN 'ran' END"
)
"""Which event a change of a confirmation's status is: pending -> running (approved or edited),
rejected or forbidden is ``decided``; pending -> expired ``expired``; running -> done ``ran``
(an abandoned run is done too). Any other change (a reopen: running -> pending) is none."""

SQLITE_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS turnkit_outbox_held AFTER INSERT ON turnkit_confirmations"
    " WHEN NEW.status = 'pending' AND EXISTS (SELECT 1 FROM turnkit_notify_targets) BEGIN "
    + _OUTBOX_INSERT.format(
        cid="NEW.id",
        event="'held'",
        status="NEW.status",
        now="(julianday('now') - 2440587.5) * 86400.0",
    )
    + "; END",
    "CREATE TRIGGER IF NOT EXISTS turnkit_outbox_changed AFTER UPDATE OF status"
    f" ON turnkit_confirmations WHEN ({_EVENT_OF_UPDATE}) IS NOT NULL"
    " AND EXISTS (SELECT 1 FROM turnkit_notify_targets) BEGIN "
    + _OUTBOX_INSERT.format(
        cid="NEW.id",
        event=_EVENT_OF_UPDATE,
        status="NEW.status",
        now="(julianday('now') - 2440587.5) * 86400.0",
    )
    + "; END",
)
"""The outbox's triggers on SQLite (and ``MemoryLedger``): the outbox rows of an event are
written by the statement that makes the event, in its transaction (docs/architecture.md
§12). Without a target a trigger's ``WHEN`` is false and its body does not run."""

POSTGRES_OUTBOX_FUNCTION = "turnkit_outbox_event_v1"
"""The trigger function's name; a changed body gets a new version (``setup`` creates a missing
one and never replaces one: processes of two versions may share a database)."""

POSTGRES_TRIGGERS = (
    f"CREATE FUNCTION {POSTGRES_OUTBOX_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $body$"
    " DECLARE ev text; BEGIN"
    " IF TG_OP = 'INSERT' THEN"
    "  IF NEW.status <> 'pending' THEN RETURN NULL; END IF; ev := 'held';"
    f" ELSE ev := {_EVENT_OF_UPDATE}; IF ev IS NULL THEN RETURN NULL; END IF;"
    " END IF; "
    + _OUTBOX_INSERT.format(
        cid="NEW.id",
        event="ev",
        status="NEW.status",
        now="extract(epoch FROM clock_timestamp())::double precision",
    )
    + "; RETURN NULL; END $body$",
    f"CREATE TRIGGER {POSTGRES_OUTBOX_FUNCTION} AFTER INSERT OR UPDATE OF status"
    f" ON turnkit_confirmations FOR EACH ROW EXECUTE FUNCTION {POSTGRES_OUTBOX_FUNCTION}()",
)
"""The outbox's trigger on PostgreSQL: one plpgsql function, the same rows as SQLite's."""
