"""Who is looking at the inbox (a sign-in kept in the ledger), and CSRF protection.

A person signs in with an API key that carries the scope ``system.confirmations:decide`` (the
operator gives it to keys meant for people who decide). The sign-in is a random token in an
HttpOnly, SameSite=Strict cookie (Secure over HTTPS) whose hash the ledger keeps
(``turnkit_key_sessions``): every worker process finds it, signing out ends it, and revoking the
key ends it at the next request; reading the ledger signs nobody in. It ends after 8 hours, or
sooner when it is not used for the idle timeout (``IDLE_SECONDS``, ``create_app``'s
``inbox_idle_timeout``): a page opened or a form sent is a use, the inbox's own background poll
is not, so a tab left open does not keep a sign-in alive. Signing in removes the sign-ins that
ended, of every key. The person acts as
``Caller.session(owner)`` within the key's allow list: their own held calls, and others' when
they hold ``system.confirm_any`` (the executor's rule).

An application that mounts the app may plug in its own sign-in instead: a callable from the
request to a ``Caller`` (or None when nobody is signed in), sync (run in a worker thread) or async.

Every form carries a CSRF token: for a key's sign-in, an HMAC of its session token (which no
other site can read); otherwise one that must equal the ``tk_csrf`` cookie. A POST whose
``Origin`` or ``Sec-Fetch-Site`` says it came from another origin is refused outright, so a
neighbour on the same host (another port) cannot plant a cookie and post a form.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import inspect
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from fastapi import Request
from fastapi.responses import Response

from turnkit.executor.confirmations import DECIDE_SCOPE
from turnkit.executor.executor import Allow
from turnkit.ledger.keys import ApiKeys
from turnkit.registry.caller import Caller

__all__ = [
    "CSRF_COOKIE",
    "IDLE_SECONDS",
    "SESSION_COOKIE",
    "Person",
    "SignIn",
    "csrf_token",
    "forged",
    "person_of",
    "sign_in_with_key",
    "sign_out",
]

SESSION_COOKIE = "tk_session"
CSRF_COOKIE = "tk_csrf"
SESSION_SECONDS = 8 * 3600
"""How long a sign-in lasts (less when the key expires sooner)."""
IDLE_SECONDS = 30 * 60.0
"""How long a sign-in may stay unused before it ends (the default idle timeout)."""
_TOKEN = re.compile(r"[A-Za-z0-9_-]{32,100}")

SignIn = Callable[[Request], "Caller | Awaitable[Caller | None] | None"]
"""An application's own sign-in: the request's person, or None when nobody is signed in."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Person:
    """Who is signed in: the caller they decide as, within which tools, and their sign-in."""

    caller: Caller
    allow: Allow = "all"
    """The tools the key they signed in with may reach (its allow list)."""
    session: str | None = None
    """Their sign-in token; None under an application's own sign-in."""


async def person_of(
    request: Request,
    keys: ApiKeys,
    sign_in: SignIn | None,
    now: float,
    *,
    idle: float = IDLE_SECONDS,
    touch: bool = True,
) -> Person | None:
    """The signed-in person of ``request``, or None. With a key's sign-in: None once it was
    unused for ``idle`` seconds; ``touch``: the request is a use of it (a page, a form)."""
    if sign_in is not None:
        if inspect.iscoroutinefunction(sign_in):
            found = await sign_in(request)
        else:
            found = await asyncio.to_thread(sign_in, request)  # it may look a database up
            if inspect.isawaitable(found):
                found = await found
        if found is not None and not isinstance(found, Caller):
            raise TypeError(f"the inbox's sign_in returned {type(found).__name__}, not a Caller")
        return None if found is None else Person(caller=found)
    token = request.cookies.get(SESSION_COOKIE, "")
    if _TOKEN.fullmatch(token) is None:
        return None
    key = await asyncio.to_thread(keys.by_session, token, time.time(), idle=idle, touch=touch)
    if key is None or key.refused(now) is not None or DECIDE_SCOPE not in key.scopes:
        return None
    return Person(caller=Caller.session(key.user_id), allow=key.allowed, session=token)


async def sign_in_with_key(
    keys: ApiKeys,
    secret: str,
    response: Response,
    request: Request,
    now: float,
    *,
    idle: float = IDLE_SECONDS,
) -> str:
    """Sign the key ``secret`` in on ``response``; "" when it worked, else what is wrong (for
    the sign-in page). Sign-ins that ended (``idle``: the idle timeout) are removed."""
    key = await asyncio.to_thread(keys.by_secret, secret.strip())
    if key is None:
        return "That is not a known API key. Ask your operator for one (turnkit keys create)."
    refused = key.refused(now)
    if refused is not None:
        return f"This key cannot be used: {refused}. Ask your operator for a new one."
    if DECIDE_SCOPE not in key.scopes:
        return (
            f"This key may not decide confirmations: it needs the scope {DECIDE_SCOPE!r}"
            f" (turnkit keys create --user {key.user_id} --scope {DECIDE_SCOPE})."
        )
    until = time.time() + SESSION_SECONDS
    if key.expires_at is not None:
        until = min(until, time.time() + max(0.0, key.expires_at - now))
    token = await asyncio.to_thread(keys.open_session, key.id, until, idle=idle)
    _cookie(request, response, SESSION_COOKIE, token, max_age=int(until - time.time()))
    return ""


async def sign_out(
    keys: ApiKeys, person: Person | None, request: Request, response: Response
) -> None:
    """End the sign-in in the ledger and in the browser."""
    if person is not None and person.session is not None:
        await asyncio.to_thread(keys.close_session, person.session)
    for name in (SESSION_COOKIE, CSRF_COOKIE):
        response.delete_cookie(name, path=_path(request), secure=_secure(request),
                               httponly=True, samesite="strict")  # fmt: skip


def csrf_token(request: Request, person: Person | None, response: Response) -> str:
    """The token the page's forms carry: derived from the sign-in's secret token when there is
    one; else the ``tk_csrf`` cookie's (set on ``response`` when the browser has none)."""
    if person is not None and person.session is not None:
        return _derived(person.session)
    token = request.cookies.get(CSRF_COOKIE, "")
    if _TOKEN.fullmatch(token) is None:
        token = secrets.token_urlsafe(32)
        _cookie(request, response, CSRF_COOKIE, token)
    return token


def forged(request: Request, person: Person | None, given: object) -> bool:
    """Whether a POST is not this page's own form: sent from another origin, or without the
    token ``csrf_token`` gave the page."""
    fetched_from = request.headers.get("sec-fetch-site")
    if fetched_from is not None and fetched_from not in ("same-origin", "none"):
        return True
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.url.netloc}":
        return True
    if not isinstance(given, str) or (_TOKEN.fullmatch(given) is None and len(given) != 64):
        return True
    if person is not None and person.session is not None:
        expected = _derived(person.session)
    else:
        expected = request.cookies.get(CSRF_COOKIE, "")
        if _TOKEN.fullmatch(expected) is None:
            return True
    return not hmac.compare_digest(given.encode(), expected.encode())


def _derived(session: str) -> str:
    return hmac.new(session.encode(), b"turnkit-ui-csrf", hashlib.sha256).hexdigest()


def _path(request: Request) -> str:
    return str(request.scope.get("root_path", "")) + "/ui"


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


def _cookie(
    request: Request, response: Response, name: str, value: str, max_age: int | None = None
) -> None:
    response.set_cookie(name, value, max_age=max_age, path=_path(request), httponly=True,
                        samesite="strict", secure=_secure(request))  # fmt: skip
