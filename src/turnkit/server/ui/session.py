"""Who is looking at the inbox: a signed session cookie, and CSRF protection for every form.

A person signs in with an API key that carries the scope ``system.confirmations:decide`` (the
operator gives it to keys meant for people who decide). The session cookie names the key and
its expiry, signed with the digest of the key's secret that the ledger keeps, so every worker
process can check it and revoking the key (``turnkit keys revoke``) ends its sessions at the next
request. The person acts as ``Caller.session(owner)``: their own held calls, and others' when
they hold ``system.confirm_any`` (the executor's rule).

An application that mounts the app may plug in its own sign-in instead: a callable from the
request to a ``Caller`` (or None when nobody is signed in), sync or async.

Every form carries a CSRF token that must equal the ``tk_csrf`` cookie (double submit; the
cookies are HttpOnly, SameSite=Strict, Secure over HTTPS).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import inspect
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from fastapi import Request
from fastapi.responses import Response

from turnkit.registry.caller import Caller
from turnkit.registry.confirmations import DECIDE_SCOPE
from turnkit.registry.ledger.keys import ApiKeys

__all__ = [
    "CSRF_COOKIE",
    "SESSION_COOKIE",
    "Person",
    "SignIn",
    "csrf_token",
    "forged",
    "person_of",
    "remember_csrf",
    "sign_in_with_key",
    "sign_out",
]

SESSION_COOKIE = "tk_session"
CSRF_COOKIE = "tk_csrf"
SESSION_SECONDS = 8 * 3600
"""How long a sign-in lasts (less when the key expires sooner)."""

SignIn = Callable[[Request], "Caller | Awaitable[Caller | None] | None"]
"""An application's own sign-in: the request's person, or None when nobody is signed in."""


@dataclass(frozen=True, slots=True)
class Person:
    """Who is signed in: the caller they decide as, and how they signed in."""

    caller: Caller
    key_id: str | None
    """The key they signed in with; None under an application's own sign-in."""


async def person_of(request: Request, keys: ApiKeys, sign_in: SignIn | None) -> Person | None:
    """The signed-in person of ``request``, or None."""
    if sign_in is not None:
        found = sign_in(request)
        caller = await found if inspect.isawaitable(found) else found
        if caller is not None and not isinstance(caller, Caller):
            raise TypeError(f"the inbox's sign_in returned {type(caller).__name__}, not a Caller")
        return None if caller is None else Person(caller, None)
    cookie = request.cookies.get(SESSION_COOKIE, "")
    key_id, _, rest = cookie.partition(".")
    until, _, signature = rest.partition(".")
    if not (key_id and until.isdigit() and signature) or int(until) < time.time():
        return None
    found_key = await asyncio.to_thread(keys.with_digest, key_id)
    if found_key is None:
        return None
    key, digest = found_key
    if not hmac.compare_digest(signature, _signed(digest, key_id, until)):
        return None
    if key.refused(time.time()) is not None or DECIDE_SCOPE not in key.scopes:
        return None
    return Person(Caller.session(key.user_id), key.id)


async def sign_in_with_key(keys: ApiKeys, secret: str, response: Response, secure: bool) -> str:
    """Set the session cookie for the key ``secret`` on ``response``; "" when it worked, else
    what is wrong (for the sign-in page)."""
    key = await asyncio.to_thread(keys.by_secret, secret.strip())
    if key is None:
        return "That is not a known API key. Ask your operator for one (turnkit keys create)."
    refused = key.refused(time.time())
    if refused is not None:
        return f"This key cannot be used: {refused}. Ask your operator for a new one."
    if DECIDE_SCOPE not in key.scopes:
        return (
            f"This key may not decide confirmations: it needs the scope {DECIDE_SCOPE!r}"
            f" (turnkit keys create --user {key.user_id} --scope {DECIDE_SCOPE})."
        )
    found = await asyncio.to_thread(keys.with_digest, key.id)
    if found is None:  # removed in between
        return "That is not a known API key."
    until = int(time.time()) + SESSION_SECONDS
    if key.expires_at is not None:
        until = min(until, int(key.expires_at))
    value = f"{key.id}.{until}.{_signed(found[1], key.id, str(until))}"
    _cookie(response, SESSION_COOKIE, value, secure, max_age=until - int(time.time()))
    return ""


def sign_out(response: Response) -> None:
    """End the session (the browser forgets the cookie)."""
    response.delete_cookie(SESSION_COOKIE, path="/")


def csrf_token(request: Request) -> tuple[str, bool]:
    """The request's CSRF token, and whether it is new (then ``remember_csrf`` it)."""
    token = request.cookies.get(CSRF_COOKIE, "")
    if len(token) >= 32:
        return token, False
    return secrets.token_urlsafe(32), True


def remember_csrf(request: Request, response: Response, token: str) -> None:
    """Set ``token`` as the browser's CSRF cookie."""
    _cookie(response, CSRF_COOKIE, token, request.url.scheme == "https")


def forged(request: Request, given: object) -> bool:
    """Whether a form's ``csrf`` field fails to match the request's CSRF cookie."""
    cookie = request.cookies.get(CSRF_COOKIE, "")
    return not (isinstance(given, str) and len(cookie) >= 32 and hmac.compare_digest(given, cookie))


def _signed(digest: str, key_id: str, until: str) -> str:
    message = f"turnkit-ui-session|{key_id}|{until}".encode()
    return hmac.new(digest.encode(), message, hashlib.sha256).hexdigest()


def _cookie(
    response: Response, name: str, value: str, secure: bool, max_age: int | None = None
) -> None:
    response.set_cookie(
        name, value, max_age=max_age, path="/", httponly=True, samesite="strict", secure=secure
    )
