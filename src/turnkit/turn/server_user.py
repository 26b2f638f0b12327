"""The caller of a run on LangGraph's server: its authenticated user, read from the run's config.

LangGraph's server (``langgraph dev``, LangGraph Platform) runs the application's custom auth
(``langgraph.json`` ``"auth"``, a ``langgraph_sdk.Auth`` with ``@auth.authenticate``) on every
request and puts the user it returned in the run's config (``configurable.langgraph_auth_user``),
which LangGraph hands to every node as ``runtime.server_info.user``. A client cannot set it: the
server strips that key from the config and context a request sends.

That user becomes the turn's caller (``caller_of_user``):

- a user with a ``turnkit_key`` field (made by ``turnkit.deploy.key_user`` from an
  ``Authorization: Bearer tk_...`` key) is ``Caller.key(id, scopes=..., user_id=identity)``, with
  the key's allow list;
- any other authenticated user is ``Caller.session(identity)``: a signed-in person the agent acts
  for (their writes wait for their yes);
- no user, an unauthenticated one, and Studio's own user in ``langgraph dev``
  (``langgraph-studio-user``, who stands for whoever runs the local server) give None: the graph's
  default caller applies, or the run fails saying how to sign in.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from turnkit.errors import CallerError
from turnkit.registry.caller import Caller
from turnkit.registry.visibility import Allow

__all__ = [
    "KEY_FIELD",
    "STUDIO_USER_KIND",
    "caller_of_user",
    "is_studio",
    "server_user",
    "uses_custom_auth",
]

KEY_FIELD = "turnkit_key"
"""The field of an authenticated user that carries a turnkit API key:
``{"id": ..., "scopes": [...], "allow": [...] | None}``."""
STUDIO_USER_KIND = "StudioUser"
"""The ``kind`` of the user ``langgraph dev`` gives requests from LangGraph Studio."""


def server_user(runtime: Any) -> Any:
    """The authenticated user LangGraph's server put in the run's config, or None."""
    info = getattr(runtime, "server_info", None)
    return getattr(info, "user", None)


def is_studio(user: Any) -> bool:
    """Whether ``user`` is the one ``langgraph dev`` gives requests from LangGraph Studio."""
    return _field(user, "kind") == STUDIO_USER_KIND


def uses_custom_auth() -> bool:
    """Whether this LangGraph server runs the application's own auth (``langgraph.json``
    ``"auth"``, which the server reads from ``LANGGRAPH_AUTH``): then a request claiming to be
    Studio's skips it, and must not act for the default caller."""
    return os.environ.get("LANGGRAPH_AUTH", "").strip() not in ("", "null", "None", "{}")


def caller_of_user(user: Any) -> tuple[Caller, Allow] | None:
    """The caller and allow list of LangGraph's authenticated ``user``, or None (see the module
    docstring).

    Raises:
        CallerError: the user has no usable identity, or a ``turnkit_key`` field that is not a
            key (a bug in the application's auth handler: refused, never read as a session).

    Examples:
        >>> caller_of_user({"identity": "alice"})
        (Caller(kind='session', user_id='alice', key_id=None, scopes=frozenset(), client_id=None), 'all')
    """  # noqa: E501  (a doctest's output line)
    if user is None or is_studio(user):
        return None
    if _field(user, "is_authenticated") is False:
        return None
    identity = _field(user, "identity")
    if identity == "":
        return None  # the server's unauthenticated user
    if not isinstance(identity, str) or not identity.strip():
        raise CallerError(
            f"LangGraph's authenticated user has no usable identity ({identity!r}): the auth"
            " handler must return a user id, e.g. {'identity': 'alice'}"
        )
    key = _field(user, KEY_FIELD)
    if key is None:
        return Caller.session(identity), "all"
    return _key_caller(identity, key)


def _key_caller(identity: str, key: Any) -> tuple[Caller, Allow]:
    as_dict = getattr(key, "dict", None)  # the server's DotDict of a nested dict
    if not isinstance(key, Mapping) and callable(as_dict):
        key = as_dict()
    if not isinstance(key, Mapping) or not isinstance(key.get("id"), str):
        raise CallerError(
            f"LangGraph's authenticated user {identity!r} has a {KEY_FIELD!r} field that is not"
            " a key ({'id': ..., 'scopes': [...], 'allow': [...] or None}): make it with"
            " turnkit.deploy.key_user"
        )
    scopes, allow = key.get("scopes") or (), key.get("allow")
    caller = Caller.key(key["id"], scopes=scopes, user_id=identity)
    return caller, "all" if allow is None else frozenset(allow)


def _field(user: Any, name: str) -> Any:
    """``user[name]`` or ``user.name``: the server hands a dict, a ``BaseUser`` or a proxy of
    either (after a round trip through its database, a dict again)."""
    if isinstance(user, Mapping):
        return user.get(name)
    try:
        return user[name]
    except (KeyError, TypeError, AttributeError):
        return getattr(user, name, None)
