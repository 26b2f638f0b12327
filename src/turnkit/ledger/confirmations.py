"""The confirmations table: held writes, from their hold to their outcome (``ConfirmationRows``,
a part of every ``Ledger``).

Every change of a confirmation's state that must happen at most once is one conditional
statement (``... WHERE status = 'pending'``), so two deciders in two processes never both win.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any

from turnkit.ledger.records import (
    Approval,
    Confirmation,
    ConfirmationStatus,
    Cursor,
    Preview,
    Readable,
    caller_from_json,
    caller_to_json,
)
from turnkit.ledger.schema import CONFIRMATION_COLUMNS, CONFIRMATION_TYPES
from turnkit.ledger.sql import dump, load
from turnkit.ledger.twins import async_twin
from turnkit.registry.caller import Caller

__all__ = ["ConfirmationRows"]


class ConfirmationRows(ABC):
    """The confirmation operations of a ledger, written once in SQL over ``_run`` and ``_rows``."""

    @abstractmethod
    def _run(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Execute one statement; return the number of rows it changed."""

    @abstractmethod
    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Execute one query; return its rows."""

    def create_confirmation(
        self, confirmation: Confirmation, *, max_pending: int | None = None
    ) -> bool:
        """Store a new pending confirmation; False (nothing stored) when its caller already has
        ``max_pending`` pending, unexpired ones. One statement: the count and the insert are
        atomic on SQLite; on PostgreSQL two holds of one caller at the same instant may both
        pass a cap they reach together (a bound on the table's growth, not a right)."""
        c = confirmation
        values = (
            c.id, dump(caller_to_json(c.caller)), c.caller.identity, c.tool, dump(c.input),
            c.input_hash, c.idempotency_key, c.status, c.created_at, c.expires_at,
            c.decided_at, c.decided_by, dump(c.decision), None, dump(c.outcome), c.module,
            c.fingerprint, c.thread_id, c.reserved_units, c.reserved_window,
            None if c.preview is None else dump(c.preview.to_json()), dump(c.request),
            c.caller_name, c.approvals_needed, int(c.separate_duties), c.trace_context,
        )  # fmt: skip
        if max_pending is None:
            marks = ", ".join("?" for _ in values)
            sql = f"INSERT INTO turnkit_confirmations ({CONFIRMATION_COLUMNS}) VALUES ({marks})"
            return self._run(sql, values) == 1
        typed = ", ".join(f"CAST(? AS {kind})" for kind in CONFIRMATION_TYPES)
        return (
            self._run(
                f"INSERT INTO turnkit_confirmations ({CONFIRMATION_COLUMNS}) SELECT {typed}"
                " WHERE (SELECT COUNT(*) FROM turnkit_confirmations WHERE caller_identity = ?"
                " AND status = 'pending' AND expires_at > ?) < ?",
                (*values, c.caller.identity, c.created_at, max_pending),
            )
            == 1
        )

    def get_confirmation(self, confirmation_id: str) -> Confirmation | None:
        """The confirmation ``confirmation_id``, or None."""
        rows = self._rows(
            f"SELECT {CONFIRMATION_COLUMNS} FROM turnkit_confirmations WHERE id = ?",
            (confirmation_id,),
        )
        return self._with_approvals([_confirmation(rows[0])])[0] if rows else None

    def _with_approvals(self, found: list[Confirmation]) -> list[Confirmation]:
        """``found`` with the approvals of those that need more than one (one query for all)."""
        quorum = [c.id for c in found if c.approvals_needed > 1]
        if not quorum:
            return found
        given = self.approvals_of(quorum)
        return [
            replace(c, approvals=tuple(given.get(c.id, ()))) if c.id in given else c for c in found
        ]

    def approvals_of(self, confirmation_ids: Collection[str]) -> dict[str, list[Approval]]:
        """The approvals given to each of ``confirmation_ids``, oldest first."""
        ids = sorted(confirmation_ids)
        if not ids:
            return {}
        rows = self._rows(
            "SELECT confirmation_id, approver, input_hash, at FROM turnkit_approvals"
            f" WHERE confirmation_id IN ({', '.join('?' for _ in ids)}) ORDER BY at, approver",
            ids,
        )
        given: dict[str, list[Approval]] = {}
        for cid, approver, digest, at in rows:
            given.setdefault(cid, []).append(Approval(by=approver, at=float(at), input_hash=digest))
        return given

    def add_approval(
        self, confirmation_id: str, approver: str, input_hash: str, now: float
    ) -> bool:
        """Record ``approver``'s approval of the input hashed ``input_hash`` while the
        confirmation is pending, unexpired and still holds that input; False when it was not
        recorded (they approved this input before, it was decided, or an edit changed the
        input). An approver's approval of an older input is replaced by this one."""
        return (
            self._run(
                "INSERT INTO turnkit_approvals (confirmation_id, approver, input_hash, at)"
                " SELECT CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT),"
                " CAST(? AS DOUBLE PRECISION)"
                " WHERE EXISTS (SELECT 1 FROM turnkit_confirmations"
                " WHERE id = ? AND status = 'pending' AND expires_at > ? AND input_hash = ?)"
                " ON CONFLICT (confirmation_id, approver) DO UPDATE"
                " SET input_hash = excluded.input_hash, at = excluded.at"
                " WHERE turnkit_approvals.input_hash <> excluded.input_hash",
                (confirmation_id, approver, input_hash, now, confirmation_id, now, input_hash),
            )
            == 1
        )

    def edit_pending(
        self,
        confirmation_id: str,
        input: dict[str, Any],
        input_hash: str,
        now: float,
        *,
        preview: Preview | None = None,
        approvals_needed: int = 1,
        separate_duties: bool = False,
        decision: dict[str, Any] | None = None,
    ) -> bool:
        """Replace the input of a pending, unexpired confirmation that needs more approvals (an
        edit): its preview of the new input, the quorum the new input needs (never fewer than
        before) and the edit as its decision so far, in one statement. Approvals given for the
        old input count no more. False when it is no longer pending."""
        return (
            self._run(
                "UPDATE turnkit_confirmations SET input = ?, input_hash = ?, preview = ?,"
                " approvals_needed = CASE WHEN approvals_needed > ? THEN approvals_needed"
                " ELSE ? END, separate_duties = CASE WHEN separate_duties = 1 THEN 1 ELSE ? END,"
                " decision = ? WHERE id = ? AND status = 'pending' AND expires_at > ?",
                (
                    dump(input),
                    input_hash,
                    None if preview is None else dump(preview.to_json()),
                    approvals_needed,
                    approvals_needed,
                    int(separate_duties),
                    dump(decision),
                    confirmation_id,
                    now,
                ),
            )
            == 1
        )

    def list_confirmations(
        self,
        *,
        status: ConfirmationStatus | Collection[ConfirmationStatus] | None = None,
        caller: Caller | None = None,
        tool: str | None = None,
        thread: str | None = None,
        tools: Collection[str] | None = None,
        ids: Collection[str] | None = None,
        readable: Readable | None = None,
        after: Cursor | None = None,
        limit: int | None = None,
        newest_first: bool = False,
        unexpired_at: float | None = None,
    ) -> list[Confirmation]:
        """Confirmations, oldest first (``newest_first``: the other way), filtered.

        Args:
            status: one status, or several.
            caller: only those held for this caller.
            tool: only those of this tool (its registry name).
            thread: only those held in this conversation.
            tools: only those of these tools (a key's allow list).
            ids: only these.
            readable: only those a reader may see: its own, and others' of some tools.
            after: the page after this cursor (``Cursor.of`` the last one of the page before).
            limit: at most this many.
            newest_first: newest first (the cursor then pages back in time).
            unexpired_at: leave out pending ones whose time ran out by then.
        """
        where, params = ["1 = 1"], list[Any]()
        if isinstance(status, str):
            where.append("status = ?")
            params.append(status)
        elif status is not None:
            if not status:
                return []
            where.append(f"status IN ({', '.join('?' for _ in status)})")
            params.extend(status)
        for column, value in (
            ("caller_identity", None if caller is None else caller.identity),
            ("tool", tool),
            ("thread_id", thread),
        ):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        for column, values in (("tool", tools), ("id", ids)):
            if values is not None:
                if not values:
                    return []
                where.append(f"{column} IN ({', '.join('?' for _ in values)})")
                params.extend(sorted(values))
        if unexpired_at is not None:
            where.append("(status <> 'pending' OR expires_at > ?)")
            params.append(unexpired_at)
        if readable is not None:
            clause, values = readable.sql()
            where.append(clause)
            params.extend(values)
        order = "DESC" if newest_first else "ASC"
        if after is not None:
            where.append(
                f"(created_at {'<' if newest_first else '>'} ? OR (created_at = ? AND id"
                f" {'<' if newest_first else '>'} ?))"
            )
            params.extend((after.created_at, after.created_at, after.id))
        sql = (
            f"SELECT {CONFIRMATION_COLUMNS} FROM turnkit_confirmations"
            f" WHERE {' AND '.join(where)} ORDER BY created_at {order}, id {order}"
        )
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return self._with_approvals([_confirmation(row) for row in self._rows(sql, params)])

    def pending_expiries(self, identity: str, now: float) -> list[float]:
        """When each pending, unexpired confirmation held for ``identity`` expires, soonest
        first (how long a caller at its cap of pending holds waits for room)."""
        rows = self._rows(
            "SELECT expires_at FROM turnkit_confirmations WHERE caller_identity = ?"
            " AND status = 'pending' AND expires_at > ? ORDER BY expires_at",
            (identity, now),
        )
        return [float(row[0]) for row in rows]

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
        key_id: str | None = None,
        preview: Preview | None = None,
        seen: str | None = None,
    ) -> bool:
        """Atomically move a pending, unexpired confirmation to ``running`` with a run token.

        Returns True for the one caller that wins; everyone else gets False. An edit passes the
        new ``input`` (and its hash, and the ``preview`` of it), which replaces the held one in
        the same statement. With
        ``key_id`` (the API key the write was held under), it wins only while that key is
        neither revoked nor expired: a revocation that lands after the decider looked at the
        key still stops the write.
        """
        sql = (
            "UPDATE turnkit_confirmations SET status = 'running', decided_at = ?, decided_by = ?,"
            " decision = ?, token = ?, input = COALESCE(?, input),"
            " input_hash = COALESCE(?, input_hash), preview = COALESCE(?, preview)"
            " WHERE id = ? AND status = 'pending' AND expires_at > ?"
            " AND (approvals_needed <= 1 OR approvals_needed <= (SELECT COUNT(*)"
            " FROM turnkit_approvals a WHERE a.confirmation_id = turnkit_confirmations.id"
            " AND a.input_hash = turnkit_confirmations.input_hash))"
        )
        params: list[Any] = [
            now, decided_by, dump(decision), token,
            None if input is None else dump(input), input_hash,
            None if preview is None else dump(preview.to_json()), confirmation_id, now,
        ]  # fmt: skip
        if seen is not None:  # the arguments the person was shown are still the held ones
            sql += " AND input_hash = ?"
            params.append(seen)
        if key_id is not None:
            sql += (
                " AND NOT EXISTS (SELECT 1 FROM turnkit_api_keys k WHERE k.id = ?"
                " AND (k.revoked_at IS NOT NULL OR k.expires_at <= ?))"
            )
            params += [key_id, now]
        return self._run(sql, params) == 1

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
        params: list[Any] = [status, dump(outcome), now, decided_by, dump(decision)]
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

    def use_token(self, confirmation_id: str, token: str) -> bool:
        """Spend the run token of an approved write: True for the one call that may run it,
        False for every other (the token was spent, or its confirmation is not running)."""
        return (
            self._run(
                "UPDATE turnkit_confirmations SET token = NULL"
                " WHERE id = ? AND token = ? AND status = 'running'",
                (confirmation_id, token),
            )
            == 1
        )

    def finish_confirmation(self, confirmation_id: str, outcome: dict[str, Any]) -> None:
        """Store the outcome of an approved write and mark it ``done``."""
        self._run(
            "UPDATE turnkit_confirmations SET status = 'done', outcome = ?, token = NULL"
            " WHERE id = ? AND status = 'running'",
            (dump(outcome), confirmation_id),
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
                (dump(outcome), confirmation_id, before),
            )
            == 1
        )

    aget_confirmation = async_twin(get_confirmation)
    alist_confirmations = async_twin(list_confirmations)


def _confirmation(row: tuple[Any, ...]) -> Confirmation:
    (cid, caller, _identity, tool, input_, input_hash, key, status, created_at, expires_at,
     decided_at, decided_by, decision, _token, outcome, module, fingerprint, thread_id,
     reserved_units, reserved_window, preview, request, caller_name, approvals_needed,
     separate_duties, trace_context) = row  # fmt: skip
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
        decision=load(decision),
        outcome=load(outcome),
        module=module,
        fingerprint=fingerprint,
        thread_id=thread_id,
        reserved_units=int(reserved_units or 0),
        reserved_window=None if reserved_window is None else int(reserved_window),
        preview=Preview.from_json(load(preview)),
        request=_request(load(request)),
        caller_name=caller_name,
        approvals_needed=int(approvals_needed or 1),
        separate_duties=bool(separate_duties),
        trace_context=trace_context,
    )


def _request(data: Any) -> dict[str, str] | None:
    """The stored request, its texts only (None when there is none, or it is unreadable)."""
    if not isinstance(data, dict):
        return None
    texts = {k: v for k, v in data.items() if k in ("user", "model") and isinstance(v, str)}
    return texts or None
