"""Who calls (``Caller``) and what they may do right now (a permission provider; §3 of
docs/architecture.md).

Scopes travel with an API key and are part of the caller. Permissions are not: they belong to the
person behind the session or key and are asked of the application's provider **when the call runs**,
never from a snapshot taken when the tools were listed, so a permission revoked while a confirmation
waits blocks the write.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, TypeAlias

from turnkit.errors import CallerError, ProviderError

__all__ = [
    "Caller",
    "CallerKind",
    "PermissionProvider",
    "StaticPermissions",
    "apermissions_now",
    "permission_set",
    "permissions_now",
]

CallerKind: TypeAlias = Literal["session", "key", "public"]
"""``session``: a signed-in user the agent acts for; ``key``: an API key; ``public``: no key."""

PermissionProvider: TypeAlias = Callable[["Caller"], Iterable[str] | Awaitable[Iterable[str]]]
"""The application's answer to "which role permissions does this caller hold now?"."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Caller:
    """The party a tool call is made for. Build one with ``session``, ``key`` or ``public``.

    Examples:
        >>> Caller.key("k_123", user_id="u_1", scopes={"catalogue.products:read"}).identity
        'key:k_123'
    """

    kind: CallerKind
    """``"session"``, ``"key"`` or ``"public"``."""
    user_id: str | None = None
    """The person: the signed-in user of a session, the owner of a key; None for public callers."""
    key_id: str | None = None
    """The API key's id (key callers only)."""
    scopes: frozenset[str] = frozenset()
    """The scopes the key carries (key callers only)."""
    client_id: str | None = None
    """An optional id of an anonymous client, so public callers can be rate-limited apart."""

    def __post_init__(self) -> None:
        problems = _caller_problems(self)
        if problems:
            raise CallerError("; ".join(problems))
        object.__setattr__(self, "scopes", frozenset(self.scopes))

    @classmethod
    def session(cls, user_id: str) -> Caller:
        """A signed-in user; the agent acts for them (their writes wait for confirmation)."""
        return cls(kind="session", user_id=user_id)

    @classmethod
    def key(cls, key_id: str, *, scopes: Iterable[str] = (), user_id: str | None = None) -> Caller:
        """An API key carrying ``scopes``, owned by ``user_id`` (whose permissions apply)."""
        return cls(kind="key", key_id=key_id, scopes=frozenset(scopes), user_id=user_id)

    @classmethod
    def public(cls, client_id: str | None = None) -> Caller:
        """An anonymous caller; sees public tools only."""
        return cls(kind="public", client_id=client_id)

    @property
    def identity(self) -> str:
        """A stable id for the ledger: ``session:<user>``, ``key:<key>``, ``public:<client>``."""
        if self.kind == "session":
            return f"session:{self.user_id}"
        if self.kind == "key":
            return f"key:{self.key_id}"
        return f"public:{self.client_id or 'anonymous'}"


def _caller_problems(caller: Caller) -> list[str]:
    kind = caller.kind
    if kind not in ("session", "key", "public"):
        return [f"kind {kind!r} is not 'session', 'key' or 'public'"]
    problems = []
    if isinstance(caller.scopes, str) or not all(isinstance(s, str) for s in caller.scopes):
        problems.append("scopes must be a set of scope strings such as {'shop.prices:write'}")
    if kind == "session" and not _filled(caller.user_id):
        problems.append("a session caller needs user_id: Caller.session('<user id>')")
    if kind == "key" and not _filled(caller.key_id):
        problems.append("a key caller needs key_id: Caller.key('<key id>', scopes=...)")
    if kind != "key" and (caller.scopes or caller.key_id is not None):
        problems.append(f"a {kind} caller has no key: drop key_id and scopes")
    if kind == "public" and caller.user_id is not None:
        problems.append("a public caller has no user: drop user_id or use Caller.session(...)")
    ids = (caller.user_id, caller.key_id, caller.client_id)
    if not all(_storable(v) for v in ids) or not all(_storable(s) for s in caller.scopes):
        problems.append("ids and scopes must be strings of valid Unicode without NUL characters")
    return problems


def _filled(value: object) -> bool:
    return isinstance(value, str) and value != ""


def _storable(value: object) -> bool:
    """No NUL and no lone surrogate: the id must be storable as text by every database."""
    if not isinstance(value, str):
        return value is None
    return "\x00" not in value and value.encode("utf-8", "ignore").decode("utf-8") == value


class StaticPermissions:
    """An in-memory permission provider: permissions per user id, changeable at any time.

    Useful for tests, the demo and scripts; an application usually passes a function that asks its
    own role store. Revoking takes effect on the next call, including confirmed writes.

    Examples:
        >>> rights = StaticPermissions({"u_1": {"catalogue.view"}})
        >>> rights.revoke("u_1", "catalogue.view")
        >>> rights(Caller.session("u_1"))
        frozenset()
    """

    def __init__(self, by_user: Mapping[str, Iterable[str]] | None = None) -> None:
        self._lock = threading.Lock()
        self._by_user = {user: set(perms) for user, perms in (by_user or {}).items()}

    def __call__(self, caller: Caller) -> frozenset[str]:
        with self._lock:
            return frozenset(self._by_user.get(caller.user_id or "", ()))

    def grant(self, user_id: str, *permissions: str) -> None:
        """Give ``user_id`` the ``permissions`` from the next call on."""
        with self._lock:
            self._by_user.setdefault(user_id, set()).update(permissions)

    def revoke(self, user_id: str, *permissions: str) -> None:
        """Take ``permissions`` from ``user_id``; calls that run after this do not have them."""
        with self._lock:
            self._by_user.get(user_id, set()).difference_update(permissions)


def permissions_now(provider: PermissionProvider, caller: Caller) -> frozenset[str]:
    """Ask ``provider`` for ``caller``'s permissions now (sync code paths).

    Raises:
        TypeError: when the provider is async; call ``apermissions_now`` from async code.
    """
    if caller.user_id is None:
        return frozenset()
    answer = provider(caller)
    if inspect.isawaitable(answer):
        close = getattr(answer, "close", None)
        if close is not None:
            close()  # do not leave a never-awaited coroutine behind
        raise TypeError(
            "the permission provider is async; use the executor's async methods (aexecute)"
        )
    return permission_set(answer)


async def apermissions_now(provider: PermissionProvider, caller: Caller) -> frozenset[str]:
    """Ask ``provider`` for ``caller``'s permissions now without blocking the event loop.

    An async provider is awaited; ``StaticPermissions`` is called directly; any other sync provider
    runs in a worker thread, since it may query a database.
    """
    if caller.user_id is None:
        return frozenset()
    if isinstance(provider, StaticPermissions):
        return provider(caller)
    if inspect.iscoroutinefunction(provider) or inspect.iscoroutinefunction(
        getattr(provider, "__call__", None)  # noqa: B004  (an async __call__ method)
    ):
        return permission_set(await provider(caller))  # type: ignore[misc]  # async: awaitable
    answer = await asyncio.to_thread(provider, caller)
    if inspect.isawaitable(answer):
        answer = await answer
    return permission_set(answer)


def permission_set(answer: object) -> frozenset[str]:
    """A provider's answer as a set of permission names.

    Raises:
        ProviderError: the answer is not a collection of strings (``None``, a string, ...): a
            bug in the provider, refused rather than read as no rights or as single letters.
    """
    if isinstance(answer, str | bytes) or not isinstance(answer, Iterable):
        raise ProviderError(
            f"the permission provider answered {type(answer).__name__} {answer!r:.60}, not a"
            " collection of permission names such as {'shop.view'}"
        )
    found = frozenset(answer)
    if not all(isinstance(name, str) for name in found):
        raise ProviderError(
            "the permission provider answered a collection with non-string items; permissions"
            " are names such as 'shop.view'"
        )
    return found
