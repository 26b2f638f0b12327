"""API keys in the ledger's database: created once, kept only as a hash, revocable, expiring.

A key's secret is ``tk_`` and 43 URL-safe characters (256 random bits), shown once when it is
made. The ledger keeps its SHA-256 (a secret that random needs no slow hash: there is nothing to
guess) and finds a key by it, so any process on the same database knows every key at once, and a
revoked or expired key is refused by the next request everywhere.

A key carries scopes (``module.resource:action``), an optional allow list of tool names, and
belongs to a user, whose permissions the application's provider answers at call time. It becomes
``Caller.key(key.id, scopes=..., user_id=...)`` (``ApiKey.caller``).

A key's last use (``ApiKey.last_used_at``) is written when its secret is looked up
(``by_secret``), at most once per ``KEY_TOUCH`` seconds per key: the time is read with the key in
the same statement, so a request costs no extra round trip unless the recorded time is older.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from turnkit.errors import CallerError
from turnkit.ledger.records import iso
from turnkit.ledger.sql import Statements, load
from turnkit.registry._memo import remember
from turnkit.registry.caller import Caller
from turnkit.registry.tool_checks import SCOPE

if TYPE_CHECKING:
    from turnkit.registry.visibility import Allow

__all__ = ["KEY_TOUCH", "PREFIX", "SESSION_TOUCH", "ApiKey", "ApiKeys", "looks_like_key"]

PREFIX = "tk_"
"""How every secret starts (so a leaked one is recognised by secret scanners and people)."""
SESSION_TOUCH = 60.0
"""Seconds between two writes of a sign-in's last use (``ApiKeys.by_session``): its idle time
is measured to within this, and a busy inbox does not write the ledger on every request."""
KEY_TOUCH = 60.0
"""Seconds between two writes of a key's last use (``ApiKeys.by_secret``): ``turnkit keys list``
shows it to within this, and a busy key writes the ledger once a minute, not on every request."""
_SECRET = re.compile(r"tk_[A-Za-z0-9_-]{43}")
_COLUMNS = "id, user_id, scopes, allow, created_at, expires_at, revoked_at, name, last_used_at"
_KEY_AND_SETTINGS = (  # the settings' key and value in the key's first two (text) columns
    f"SELECT 'key', {_COLUMNS} FROM turnkit_api_keys WHERE secret_hash = ?"
    " UNION ALL SELECT 'setting', key, value, NULL, NULL, NULL, NULL, NULL, NULL, NULL"
    " FROM turnkit_settings"
)


def looks_like_key(text: str) -> bool:
    """Whether ``text`` has the shape of a secret this module makes (not whether it is valid)."""
    return _SECRET.fullmatch(text) is not None


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True, kw_only=True, slots=True)
class ApiKey:
    """A key as the ledger keeps it (never its secret)."""

    id: str
    """The key's public id (``key_...``): listed, revoked and audited by it."""
    user_id: str
    """The owner, whose permissions apply to every call made with the key."""
    scopes: frozenset[str]
    """The scopes the key carries."""
    allow: frozenset[str] | None
    """The only tools the key may use (registry names), or None for every tool of its scopes."""
    created_at: float
    expires_at: float | None
    """When the key stops working (seconds since the epoch), or None for never."""
    revoked_at: float | None
    name: str | None = None
    """What the key is for, in a person's words (``turnkit keys create --name``), or None."""
    last_used_at: float | None = field(default=None, compare=False)
    """When a request last carried the key (to within ``KEY_TOUCH`` seconds), or None for never
    (or not since the ledger began to record it). Not part of the key's identity: not compared."""

    @property
    def caller(self) -> Caller:
        """The caller a request made with this key acts as."""
        return Caller.key(self.id, scopes=self.scopes, user_id=self.user_id)

    @property
    def allowed(self) -> Allow:
        """The allow list in the executor's terms (``"all"`` when the key has none)."""
        return "all" if self.allow is None else self.allow

    def gone(self, now: float) -> Literal["revoked", "expired"] | None:
        """Whether the key was revoked or has expired at ``now`` (None while it works)."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and now >= self.expires_at:
            return "expired"
        return None

    def refused(self, now: float) -> str | None:
        """Why the key cannot be used at ``now`` (revoked, expired), or None."""
        if self.revoked_at is not None:
            return f"the key {self.id} was revoked at {iso(self.revoked_at)}"
        if self.expires_at is not None and now >= self.expires_at:
            return f"the key {self.id} expired at {iso(self.expires_at)}"
        return None

    def as_dict(self) -> dict[str, object]:
        """The key as JSON data (for ``turnkit keys list --json`` and the REST API)."""
        return {
            "id": self.id,
            "user_id": self.user_id,
            "scopes": sorted(self.scopes),
            "allow": None if self.allow is None else sorted(self.allow),
            "created_at": iso(self.created_at),
            "expires_at": None if self.expires_at is None else iso(self.expires_at),
            "revoked_at": None if self.revoked_at is None else iso(self.revoked_at),
            "name": self.name,
            "last_used_at": None if self.last_used_at is None else iso(self.last_used_at),
        }


class ApiKeys:
    """The keys kept in ``ledger``'s database (the same tables for every process using it)."""

    def __init__(self, ledger: Statements) -> None:
        self.ledger = ledger

    def create(
        self,
        user_id: str,
        scopes: Iterable[str],
        *,
        allow: Iterable[str] | None = None,
        expires_in: float | None = None,
        now: float | None = None,
        name: str | None = None,
    ) -> tuple[ApiKey, str]:
        """Make a key for ``user_id``; return it and its secret (shown once, never stored).
        ``name`` says what the key is for (shown to approvers beside its user).

        Raises:
            CallerError: no user, a malformed scope, an empty allow list, or an expiry that is
                not a positive number of seconds.
        """
        now = time.time() if now is None else now
        scopes, allow = frozenset(scopes), None if allow is None else frozenset(allow)
        if expires_in is not None and not 0 < expires_in <= 100 * 365 * 86400:
            raise CallerError(f"a key expires after 1 s to 100 years, not {expires_in!r} s")
        if allow is not None and not allow:
            raise CallerError("an allow list names at least one tool (leave it out for all)")
        if not isinstance(user_id, str) or not user_id.strip():
            raise CallerError("a key belongs to a user: give the owner's user id, e.g. alice")
        if name is not None and (
            not isinstance(name, str)
            or not name.strip()
            or len(name) > 100
            or not name.isprintable()
        ):
            raise CallerError("a key's name is 1 to 100 printable characters, e.g. 'billing bot'")
        bad = sorted(s for s in scopes if not isinstance(s, str) or not SCOPE.fullmatch(s))
        if bad:
            raise CallerError(
                f"scopes {bad} are not '<module>.<resource>:<action>' in lowercase,"
                " e.g. 'catalogue.products:read'"
            )
        key_id = f"key_{secrets.token_hex(8)}"
        Caller.key(key_id, scopes=scopes, user_id=user_id)  # the caller's own checks
        secret = PREFIX + secrets.token_urlsafe(32)
        key = ApiKey(
            id=key_id,
            user_id=user_id,
            scopes=scopes,
            allow=allow,
            created_at=now,
            expires_at=None if expires_in is None else now + expires_in,
            revoked_at=None,
            name=None if name is None else name.strip(),
        )
        self.ledger._run(
            f"INSERT INTO turnkit_api_keys ({_COLUMNS}, secret_hash)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (key.id, user_id, json.dumps(sorted(scopes)),
             None if allow is None else json.dumps(sorted(allow)),
             key.created_at, key.expires_at, None, key.name, None, _digest(secret)),
        )  # fmt: skip
        return key, secret

    def by_secret(
        self, secret: str, *, now: float | None = None, touch: bool = True
    ) -> ApiKey | None:
        """The key whose secret is ``secret`` (revoked and expired ones too: see ``refused``).

        ``touch``: this is a use of the key, recorded as its ``last_used_at`` when the recorded
        one is ``KEY_TOUCH`` seconds old or more (a key refused at ``now`` is not used).
        """
        if not looks_like_key(secret):
            return None
        rows = self.ledger._rows(
            f"SELECT {_COLUMNS} FROM turnkit_api_keys WHERE secret_hash = ?", (_digest(secret),)
        )
        return self._found(rows[0] if rows else None, now, touch)

    def with_settings(
        self, secret: str, *, now: float | None = None
    ) -> tuple[ApiKey | None, dict[str, Any]]:
        """``(by_secret(secret), the operator's setting overrides)`` read in one statement: what
        a request starts with (one round trip to the database, not two). The settings are the
        ledger's whose tables hold the keys: a dict of the caller's own, whose values (parsed
        once per stored text) are shared with other calls: read them, do not change them."""
        if not looks_like_key(secret):
            return None, {}
        rows = self.ledger._rows(_KEY_AND_SETTINGS, (_digest(secret),))
        found = next((row[1:] for row in rows if row[0] == "key"), None)
        stored = tuple((row[1], row[2]) for row in rows if row[0] == "setting")
        settings = _SETTINGS.get(stored)
        if settings is None:
            settings = {str(name): load(value) for name, value in stored}
            remember(_SETTINGS, stored, settings, limit=64)
        return self._found(found, now, touch=True), dict(settings)

    def _found(
        self, row: tuple[object, ...] | None, now: float | None, touch: bool
    ) -> ApiKey | None:
        """The key in ``row``, its use recorded (see ``by_secret``)."""
        if row is None:
            return None
        key = _KEYS.get(row) or remember(_KEYS, row, _key(row), limit=1024)
        now = time.time() if now is None else now
        stale = key.last_used_at is None or now - key.last_used_at >= KEY_TOUCH
        if touch and stale and key.refused(now) is None:
            self.ledger._run(  # another process may have written it meanwhile: then nothing
                "UPDATE turnkit_api_keys SET last_used_at = ? WHERE id = ?"
                " AND COALESCE(last_used_at, 0) <= ?",
                (now, key.id, now - KEY_TOUCH),
            )
        return key

    def get(self, key_id: str) -> ApiKey | None:
        """The key with id ``key_id``, or None."""
        rows = self.ledger._rows(f"SELECT {_COLUMNS} FROM turnkit_api_keys WHERE id = ?", (key_id,))
        return _key(rows[0]) if rows else None

    def open_session(
        self, key_id: str, until: float, *, idle: float | None = None, now: float | None = None
    ) -> str:
        """A new sign-in of ``key_id`` (a person at the web inbox) lasting until ``until``: its
        token, which only its hash in the ledger names (reading the ledger signs nobody in).

        Sign-ins that ended are removed first: past their ``until``, or unused for ``idle``
        seconds when given (the idle timeout of the inbox signing in).
        """
        now = time.time() if now is None else now
        self.ledger._run(
            "DELETE FROM turnkit_key_sessions WHERE expires_at <= ?"
            " OR COALESCE(last_seen, created_at) <= ?",
            (now, -1.0 if idle is None else now - idle),
        )
        token = secrets.token_urlsafe(32)
        self.ledger._run(
            "INSERT INTO turnkit_key_sessions (token_hash, key_id, created_at, expires_at,"
            " last_seen) VALUES (?, ?, ?, ?, ?)",
            (_digest(token), key_id, now, until, now),
        )
        return token

    def by_session(
        self, token: str, now: float, *, idle: float | None = None, touch: bool = True
    ) -> ApiKey | None:
        """The key of the sign-in ``token`` (revoked and expired keys too: see ``refused``), or
        None when it ended: past its ``until``, or, with ``idle``, unused for ``idle`` seconds.

        ``touch``: this is a use of the sign-in, which restarts its idle time. The ledger is
        written at most once per ``SESSION_TOUCH`` seconds of a sign-in, not on every request.
        """
        if not 20 <= len(token) <= 100 or not token.isascii():
            return None
        columns = ", ".join(f"k.{c.strip()}" for c in _COLUMNS.split(","))
        digest = _digest(token)
        rows = self.ledger._rows(
            f"SELECT {columns}, COALESCE(s.last_seen, s.created_at) FROM turnkit_key_sessions s"
            " JOIN turnkit_api_keys k ON k.id = s.key_id WHERE s.token_hash = ?"
            " AND s.expires_at > ?",
            (digest, now),
        )
        if not rows:
            return None
        *row, last_seen = rows[0]
        if idle is not None and float(last_seen) <= now - idle:
            return None
        if touch and idle is not None and now - float(last_seen) >= SESSION_TOUCH:
            self.ledger._run(
                "UPDATE turnkit_key_sessions SET last_seen = ? WHERE token_hash = ?"
                " AND COALESCE(last_seen, created_at) < ?",
                (now, digest, now),
            )
        return _key(tuple(row))

    def close_session(self, token: str) -> None:
        """End the sign-in ``token`` (signing out); expired sign-ins are removed too."""
        self.ledger._run(
            "DELETE FROM turnkit_key_sessions WHERE token_hash = ? OR expires_at <= ?",
            (_digest(token), time.time()),
        )

    def list(self) -> list[ApiKey]:
        """Every key, oldest first (revoked and expired ones included)."""
        rows = self.ledger._rows(f"SELECT {_COLUMNS} FROM turnkit_api_keys ORDER BY created_at, id")
        return [_key(row) for row in rows]

    def revoke(self, key_id: str, *, now: float | None = None) -> bool:
        """Revoke ``key_id`` from now on; False when there is no such key or it was revoked."""
        return bool(
            self.ledger._run(
                "UPDATE turnkit_api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (time.time() if now is None else now, key_id),
            )
        )

    async def aby_secret(self, secret: str) -> ApiKey | None:
        """Async twin of ``by_secret``: runs it in a worker thread."""
        return await asyncio.to_thread(self.by_secret, secret)


_KEYS: dict[tuple[object, ...], ApiKey] = {}
"""Keys already parsed, by their row as read (a changed row, a revocation, is parsed anew): a
request then costs its statement, not the key's JSON again (~5 µs a call here)."""
_SETTINGS: dict[tuple[tuple[object, object], ...], dict[str, Any]] = {}
"""The operator's overrides already parsed, by their stored text (handed out as copies)."""


def _key(row: tuple[object, ...]) -> ApiKey:
    key_id, user_id, scopes, allow, created_at, expires_at, revoked_at, name, used = row
    return ApiKey(
        id=str(key_id),
        user_id=str(user_id),
        scopes=frozenset(json.loads(str(scopes))),
        allow=None if allow is None else frozenset(json.loads(str(allow))),
        created_at=float(created_at),  # type: ignore[arg-type]  # a number column
        expires_at=None if expires_at is None else float(expires_at),  # type: ignore[arg-type]
        revoked_at=None if revoked_at is None else float(revoked_at),  # type: ignore[arg-type]
        name=None if name is None else str(name),
        last_used_at=None if used is None else float(used),  # type: ignore[arg-type]
    )
