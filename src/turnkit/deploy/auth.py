"""Who is calling, on LangGraph's server: ``langgraph.json`` ``"auth"`` handlers for turnkit.

LangGraph's server runs the ``@auth.authenticate`` handler of a ``langgraph_sdk.Auth`` on every
request and puts the user it returns in each run's config; the turn graph reads it there
(``turnkit.turn.server_user``), never from the run's input. A plain user (``{"identity":
"alice"}``) becomes ``Caller.session("alice")``; ``key_user`` makes the user of a turnkit API key
(``Authorization: Bearer tk_...``, looked up in the deployment's ledger on every request, so a
revoked key is refused at once), which becomes ``Caller.key(...)`` with the key's scopes and allow
list.

``turnkit_auth(deployment, sessions=...)`` is a whole ``Auth``: keys from the ledger, any other
bearer token handed to the application's ``sessions(token) -> user id | None``, and each thread
kept to the user who made it (``@auth.on.threads``: another user's thread is not found, so no one
reads another's conversation or answers another's held writes).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from langgraph_sdk import Auth

from turnkit.deploy.deployment import Deployment
from turnkit.ledger.keys import looks_like_key
from turnkit.turn.server_user import KEY_FIELD

__all__ = ["OWNER", "SessionCheck", "bearer_token", "key_user", "owner_only", "turnkit_auth"]

OWNER = "owner"
"""The thread metadata field that names the user a thread belongs to."""

SessionCheck = Callable[[str], Awaitable[str | None] | str | None]
"""The application's sign-in check: a bearer token -> the signed-in user's id, or None."""


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


async def key_user(deployment: Deployment, secret: str) -> Auth.types.MinimalUserDict:
    """The LangGraph user of the turnkit API key ``secret`` (``tk_...``), looked up in
    ``deployment``'s ledger now.

    Raises:
        langgraph_sdk.Auth.exceptions.HTTPException: 401 for an unknown, revoked or expired key.
    """
    executor = await deployment.aexecutor()
    key = await executor.ledger.keys.aby_secret(secret)
    if key is None:
        raise Auth.exceptions.HTTPException(401, "the bearer is not a known turnkit API key")
    refused = key.refused(executor.clock())
    if refused is not None:
        raise Auth.exceptions.HTTPException(401, f"{refused}; make a new key")
    user: dict[str, Any] = {
        "identity": key.user_id,
        "display_name": f"{key.user_id} ({key.id})",
        KEY_FIELD: {
            "id": key.id,
            "scopes": sorted(key.scopes),
            "allow": None if key.allow is None else sorted(key.allow),
        },
    }
    return user  # type: ignore[return-value]  # MinimalUserDict plus turnkit's field


async def owner_only(ctx: Auth.types.AuthContext, value: Any) -> Auth.types.FilterType:
    """An ``@auth.on.threads`` handler: a new thread is marked as the user's, and a user sees
    and runs only threads marked as theirs."""
    mine = {OWNER: ctx.user.identity}
    if isinstance(value, dict):
        metadata = value.get("metadata")
        if metadata is None:
            metadata = value["metadata"] = {}
        if isinstance(metadata, dict):
            metadata.update(mine)
    return mine


def turnkit_auth(deployment: Deployment, *, sessions: SessionCheck | None = None) -> Auth:
    """An ``Auth`` for ``langgraph.json``'s ``"auth": {"path": ...}``: turnkit API keys from
    ``deployment``'s ledger, other bearer tokens checked by ``sessions``, threads kept to their
    owner (``owner_only``).

    Args:
        deployment: whose ledger holds the keys.
        sessions: the application's sign-in check, ``token -> user id | None`` (sync or async);
            None accepts API keys only.
    """
    auth = Auth()

    @auth.authenticate
    async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
        token = bearer_token(authorization)
        if token is None:
            raise Auth.exceptions.HTTPException(
                401, "sign in: send 'Authorization: Bearer <token>' (a turnkit key is tk_...)"
            )
        if looks_like_key(token):
            return await key_user(deployment, token)
        user_id = None if sessions is None else await _signed_in(sessions, token)
        if not isinstance(user_id, str) or not user_id:
            raise Auth.exceptions.HTTPException(401, "the bearer token is not a valid sign-in")
        return {"identity": user_id}

    auth.on.threads(owner_only)
    return auth


async def _signed_in(sessions: SessionCheck, token: str) -> object:
    """``sessions(token)``: awaited when async, in a worker thread when not (it may query a
    database, and the server refuses blocking calls on its event loop)."""
    if inspect.iscoroutinefunction(sessions):
        return await sessions(token)
    answer = await asyncio.to_thread(sessions, token)
    return await answer if inspect.isawaitable(answer) else answer
