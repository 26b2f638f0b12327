"""``Ledger``: confirmations, idempotency records, rate-limit usage, settings and the audit trail.

The operations are written once here in SQL; a backend only supplies two primitives (``_run`` for
a statement's row count, ``_rows`` for a query's rows) and its connection handling. Every method
is sync; its ``a``-prefixed twin runs it in a worker thread so async code never blocks its loop.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Coroutine, Sequence
from typing import Any, ParamSpec, TypeVar

from turnkit.registry.caller import Caller
from turnkit.registry.ledger.keys import ApiKeys
from turnkit.registry.ledger.leases import ThreadLeases
from turnkit.registry.ledger.records import (
    Confirmation,
    ConfirmationStatus,
    IdempotencyRecord,
    caller_from_json,
    caller_to_json,
)
from turnkit.registry.ledger.schema import CONFIRMATION_COLUMNS, TABLES, column_additions

__all__ = ["AUDIT_SQL", "Ledger", "overrides_of"]

P = ParamSpec("P")
R = TypeVar("R")


def _async_twin(method: Callable[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
    async def twin(*args: P.args, **kwargs: P.kwargs) -> R:
        if not args[0].blocking:  # type: ignore[attr-defined]  # args[0] is the ledger
            return method(*args, **kwargs)
        return await asyncio.to_thread(method, *args, **kwargs)

    twin.__name__ = f"a{method.__name__}"
    twin.__doc__ = (
        f"Async twin of ``{method.__name__}``: runs it in a worker thread (on the loop when the"
        " ledger does not block)."
    )
    return twin


def _dump(value: Any) -> str:
    """JSON text safe for any database: ASCII, so lone surrogates and NUL travel escaped."""
    return json.dumps(value, separators=(",", ":"))


def _text(value: str | None, limit: int = 2000) -> str | None:
    """A free-text column value that every backend stores: valid UTF-8, no NUL, bounded."""
    if value is None:
        return None
    clean = value[:limit].encode("utf-8", "backslashreplace").decode("utf-8")
    return clean.replace("\x00", "\\x00")


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


AUDIT_SQL = (
    "INSERT INTO turnkit_audit (id, at, caller_identity, tool, status, code, duration_ms,"
    " confirmation_id, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
"""One audit row's insert (``Ledger._append_audit``)."""


def overrides_of(rows: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """The settings overrides in the rows of ``SELECT key, value FROM turnkit_settings``."""
    return {key: _load(value) for key, value in rows}


class Ledger(ABC):
    """The durable memory of the executor. Use ``SqliteLedger`` or ``PostgresLedger``."""

    blocking = True
    """Whether a statement may wait on a disk or a server: async code then runs it in a worker
    thread (``MemoryLedger``'s run on the event loop)."""

    @abstractmethod
    def _run(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Execute one statement; return the number of rows it changed."""

    @abstractmethod
    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Execute one query; return its rows."""

    @abstractmethod
    def close(self) -> None:
        """Release the connections."""

    def setup(self) -> None:
        """Create the tables when they do not exist, and add the columns a ledger made by an
        older turnkit lacks (``schema.ADDED_COLUMNS``); safe to call again."""
        for statement in TABLES:
            self._run(statement)
        self._upgrade()

    def _upgrade(self) -> None:
        """Add the columns of ``schema.ADDED_COLUMNS`` the tables lack."""
        for statement in column_additions(self._columns):
            self._run(statement)

    def _columns(self, table: str) -> set[str]:
        """The names of ``table``'s columns (SQLite's ``PRAGMA``; PostgreSQL reads its own)."""
        return {str(row[1]) for row in self._rows(f"PRAGMA table_info({table})")}

    @property
    def keys(self) -> ApiKeys:
        """The API keys kept in this ledger's database (``turnkit keys``, ``turnkit serve``)."""
        return ApiKeys(self)

    def thread_leases(self, ttl: float = 30.0) -> ThreadLeases:
        """Thread leases in this ledger's database (one writer per thread, ``ledger/leases.py``):
        lock rows that expire ``ttl`` seconds after their last renewal."""
        return ThreadLeases(self, ttl)

    # --- settings ---------------------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        """The operator's setting overrides."""
        return overrides_of(self._rows("SELECT key, value FROM turnkit_settings"))

    def set_setting(self, key: str, value: Any) -> None:
        """Override setting ``key`` with the JSON value ``value``, effective on the next call."""
        self._run(
            "INSERT INTO turnkit_settings (key, value) VALUES (?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, _dump(value)),
        )

    def clear_setting(self, key: str) -> None:
        """Remove the override of ``key``; the default applies again."""
        self._run("DELETE FROM turnkit_settings WHERE key = ?", (key,))

    # --- confirmations ----------------------------------------------------------------------

    def create_confirmation(self, confirmation: Confirmation) -> None:
        """Store a new pending confirmation."""
        c = confirmation
        self._run(
            f"INSERT INTO turnkit_confirmations ({CONFIRMATION_COLUMNS})"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                c.id, _dump(caller_to_json(c.caller)), c.caller.identity, c.tool, _dump(c.input),
                c.input_hash, c.idempotency_key, c.status, c.created_at, c.expires_at,
                c.decided_at, c.decided_by, _dump(c.decision), None, _dump(c.outcome),
            ),
        )  # fmt: skip

    def get_confirmation(self, confirmation_id: str) -> Confirmation | None:
        """The confirmation ``confirmation_id``, or None."""
        rows = self._rows(
            f"SELECT {CONFIRMATION_COLUMNS} FROM turnkit_confirmations WHERE id = ?",
            (confirmation_id,),
        )
        return _confirmation(rows[0]) if rows else None

    def list_confirmations(
        self, *, status: ConfirmationStatus | None = None, caller: Caller | None = None
    ) -> list[Confirmation]:
        """Confirmations, oldest first, optionally of one status and one caller."""
        sql = f"SELECT {CONFIRMATION_COLUMNS} FROM turnkit_confirmations WHERE 1 = 1"
        params: list[Any] = []
        if status is not None:
            sql += " AND status = ?"
            params.append(status)
        if caller is not None:
            sql += " AND caller_identity = ?"
            params.append(caller.identity)
        return [_confirmation(row) for row in self._rows(sql + " ORDER BY created_at, id", params)]

    def confirmation_ids(self, prefix: str, limit: int = 10) -> list[str]:
        """The ids of confirmations starting with ``prefix`` (a uuid's hex digits and dashes),
        oldest first, at most ``limit``."""
        if not prefix or prefix.strip("0123456789abcdef-"):
            return []
        rows = self._rows(
            "SELECT id FROM turnkit_confirmations WHERE id LIKE ? ORDER BY created_at, id LIMIT ?",
            (prefix + "%", limit),
        )
        return [row[0] for row in rows]

    def claim_confirmation(
        self,
        confirmation_id: str,
        *,
        decided_by: str,
        decision: dict[str, Any],
        token: str,
        now: float,
        input: dict[str, Any] | None = None,
        input_hash: str | None = None,
    ) -> bool:
        """Atomically move a pending, unexpired confirmation to ``running`` with a run token.

        Returns True for the one caller that wins; everyone else gets False. An edit passes the
        new ``input`` (and its hash), which replaces the held one in the same statement.
        """
        return self._run(
            "UPDATE turnkit_confirmations SET status = 'running', decided_at = ?, decided_by = ?,"
            " decision = ?, token = ?, input = COALESCE(?, input),"
            " input_hash = COALESCE(?, input_hash)"
            " WHERE id = ? AND status = 'pending' AND expires_at > ?",
            (
                now, decided_by, _dump(decision), token,
                None if input is None else _dump(input), input_hash, confirmation_id, now,
            ),
        ) == 1  # fmt: skip

    def close_confirmation(
        self,
        confirmation_id: str,
        *,
        status: ConfirmationStatus,
        outcome: dict[str, Any],
        now: float,
        decided_by: str | None = None,
        decision: dict[str, Any] | None = None,
        only_expired: bool = False,
    ) -> bool:
        """Atomically end a pending confirmation as ``rejected`` or ``expired`` with its outcome.

        With ``only_expired``, only a confirmation whose time is up is closed.
        """
        sql = (
            "UPDATE turnkit_confirmations SET status = ?, outcome = ?, decided_at = ?,"
            " decided_by = ?, decision = ? WHERE id = ? AND status = 'pending'"
        )
        params: list[Any] = [status, _dump(outcome), now, decided_by, _dump(decision)]
        params.append(confirmation_id)
        if only_expired:
            sql += " AND expires_at <= ?"
            params.append(now)
        return self._run(sql, params) == 1

    def confirmation_for_token(self, token: str) -> Confirmation | None:
        """The running confirmation whose approved write ``token`` may run, or None."""
        rows = self._rows(
            f"SELECT {CONFIRMATION_COLUMNS} FROM turnkit_confirmations"
            " WHERE token = ? AND status = 'running'",
            (token,),
        )
        return _confirmation(rows[0]) if rows else None

    def finish_confirmation(self, confirmation_id: str, outcome: dict[str, Any]) -> None:
        """Store the outcome of an approved write and mark it ``done``."""
        self._run(
            "UPDATE turnkit_confirmations SET status = 'done', outcome = ?, token = NULL"
            " WHERE id = ? AND status = 'running'",
            (_dump(outcome), confirmation_id),
        )

    def reopen_confirmation(self, confirmation_id: str) -> None:
        """Put a running confirmation whose write did not start (rate-limited) back to pending."""
        self._run(
            "UPDATE turnkit_confirmations SET status = 'pending', token = NULL, decided_at = NULL,"
            " decided_by = NULL, decision = NULL WHERE id = ? AND status = 'running'",
            (confirmation_id,),
        )

    def abandon_confirmation(
        self, confirmation_id: str, outcome: dict[str, Any], before: float
    ) -> bool:
        """Close an approved write whose run stopped (a dead process, a cancelled call) before
        ``before``: it is marked done with ``outcome``, so deciders stop waiting for it."""
        return (
            self._run(
                "UPDATE turnkit_confirmations SET status = 'done', outcome = ?, token = NULL"
                " WHERE id = ? AND status = 'running' AND decided_at < ?",
                (_dump(outcome), confirmation_id, before),
            )
            == 1
        )

    # --- idempotency ------------------------------------------------------------------------

    def reserve_idempotency(
        self, identity: str, tool: str, key: str, input_hash: str, now: float
    ) -> IdempotencyRecord | None:
        """Reserve ``key`` for this call; None when reserved, else the record already there."""
        inserted = self._run(
            "INSERT INTO turnkit_idempotency"
            " (caller_identity, tool, key, input_hash, state, answer, created_at)"
            " VALUES (?, ?, ?, ?, 'running', NULL, ?) ON CONFLICT DO NOTHING",
            (identity, tool, key, input_hash, now),
        )
        return None if inserted == 1 else self.get_idempotency(identity, tool, key)

    def get_idempotency(self, identity: str, tool: str, key: str) -> IdempotencyRecord | None:
        """The record of ``key`` for this caller and tool, or None."""
        rows = self._rows(
            "SELECT input_hash, state, answer, created_at FROM turnkit_idempotency"
            " WHERE caller_identity = ? AND tool = ? AND key = ?",
            (identity, tool, key),
        )
        if not rows:
            return None
        input_hash, state, answer, created_at = rows[0]
        return IdempotencyRecord(
            input_hash=input_hash, state=state, answer=_load(answer), created_at=created_at
        )

    def store_idempotency(self, identity: str, tool: str, key: str, answer: dict[str, Any]) -> None:
        """Store the answer given under ``key``; repeats replay it from now on."""
        self._run(
            "UPDATE turnkit_idempotency SET state = 'done', answer = ?"
            " WHERE caller_identity = ? AND tool = ? AND key = ?",
            (_dump(answer), identity, tool, key),
        )

    def restart_idempotency(self, identity: str, tool: str, key: str, now: float) -> None:
        """Count a running reservation from ``now``: its handler starts only now, after slow
        checks, and a repeat measures by ``created_at`` whether the call is still alive."""
        self._run(
            "UPDATE turnkit_idempotency SET created_at = ?"
            " WHERE caller_identity = ? AND tool = ? AND key = ? AND state = 'running'",
            (now, identity, tool, key),
        )

    def abandon_idempotency(
        self, identity: str, tool: str, key: str, answer: dict[str, Any], before: float
    ) -> bool:
        """Store ``answer`` for a reservation whose call stopped before ``before`` (a dead process,
        a cancelled call), so repeats get it instead of waiting."""
        return (
            self._run(
                "UPDATE turnkit_idempotency SET state = 'done', answer = ?"
                " WHERE caller_identity = ? AND tool = ? AND key = ? AND state = 'running'"
                " AND created_at < ?",
                (_dump(answer), identity, tool, key, before),
            )
            == 1
        )

    def release_idempotency(self, identity: str, tool: str, key: str) -> None:
        """Forget a reservation whose call did nothing (rate-limited), so a retry can run."""
        self._run(
            "DELETE FROM turnkit_idempotency"
            " WHERE caller_identity = ? AND tool = ? AND key = ? AND state = 'running'",
            (identity, tool, key),
        )

    # --- rate limits ------------------------------------------------------------------------

    def charge(self, identity: str, window_start: int, units: int, limit: int) -> bool:
        """Add ``units`` to the caller's window when the total stays within ``limit``.

        Returns False (and charges nothing) when the window has no room for them.
        """
        if units > limit:
            return False
        return (
            self._run(
                "INSERT INTO turnkit_rate_usage (caller_identity, window_start, units)"
                " VALUES (?, ?, ?) ON CONFLICT (caller_identity, window_start) DO UPDATE"
                " SET units = turnkit_rate_usage.units + excluded.units"
                " WHERE turnkit_rate_usage.units + excluded.units <= ?",
                (identity, window_start, units, limit),
            )
            == 1
        )

    def usage(self, identity: str, window_start: int) -> int:
        """Units the caller has spent in the window starting at ``window_start``."""
        rows = self._rows(
            "SELECT units FROM turnkit_rate_usage WHERE caller_identity = ? AND window_start = ?",
            (identity, window_start),
        )
        return int(rows[0][0]) if rows else 0

    # --- audit ------------------------------------------------------------------------------

    def audit(
        self,
        *,
        at: float,
        caller: str,
        tool: str,
        status: str,
        code: str | None,
        duration_ms: float,
        confirmation_id: str | None = None,
        detail: str | None = None,
    ) -> None:
        """Append one audit row: who called what, how it ended, how long it took."""
        self._append_audit(
            (
                f"{time.time_ns():020d}-{uuid.uuid4().hex[:12]}",  # sorts in insertion order
                at, _text(caller), _text(tool, 200), status, code, duration_ms, confirmation_id,
                _text(detail),
            )
        )  # fmt: skip

    def _append_audit(self, row: tuple[Any, ...]) -> None:
        """Insert one audit row, the parameters of ``AUDIT_SQL`` (``MemoryLedger`` batches)."""
        self._run(AUDIT_SQL, row)

    def audit_rows(
        self, limit: int = 100, *, confirmation_ids: Collection[str] | None = None
    ) -> list[dict[str, Any]]:
        """The latest audit rows, newest first; only those of ``confirmation_ids`` when given
        (the rows of held calls and of their approved runs)."""
        names = (
            "at",
            "caller",
            "tool",
            "status",
            "code",
            "duration_ms",
            "confirmation_id",
            "detail",
        )
        where, params = "", list[Any]()
        if confirmation_ids is not None:
            if not confirmation_ids:
                return []
            where = f" WHERE confirmation_id IN ({', '.join('?' for _ in confirmation_ids)})"
            params = list(confirmation_ids)
        rows = self._rows(
            f"SELECT {', '.join(('at', 'caller_identity', *names[2:]))} FROM turnkit_audit"
            f"{where} ORDER BY at DESC, id DESC LIMIT ?",
            (*params, limit),
        )
        return [dict(zip(names, row, strict=True)) for row in rows]

    asettings = _async_twin(settings)
    aset_setting = _async_twin(set_setting)
    aget_confirmation = _async_twin(get_confirmation)
    alist_confirmations = _async_twin(list_confirmations)
    aaudit_rows = _async_twin(audit_rows)


def _confirmation(row: tuple[Any, ...]) -> Confirmation:
    (cid, caller, _identity, tool, input_, input_hash, key, status, created_at, expires_at,
     decided_at, decided_by, decision, _token, outcome) = row  # fmt: skip
    return Confirmation(
        id=cid,
        caller=caller_from_json(json.loads(caller)),
        tool=tool,
        input=json.loads(input_),
        input_hash=input_hash,
        idempotency_key=key,
        status=status,
        created_at=created_at,
        expires_at=expires_at,
        decided_at=decided_at,
        decided_by=decided_by,
        decision=_load(decision),
        outcome=_load(outcome),
    )
