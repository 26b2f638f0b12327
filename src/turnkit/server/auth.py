"""Who is calling: ``Authorization: Bearer tk_...`` becomes the ``ApiKey`` it names.

The key is looked up in the ledger's database on every request (no cache in the process), so a
key revoked by ``turnkit keys revoke``, or one whose time ran out, is refused by the next request
in every server process. Whatever is wrong with the bearer (missing, malformed, unknown, revoked,
expired) is a 401 problem whose ``WWW-Authenticate`` challenge says why in its
``error_description`` (``turnkit.server.bearer``), as the problem's ``detail`` does.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException

from turnkit.executor.executor import Executor
from turnkit.ledger.keys import ApiKey, ApiKeys
from turnkit.server.bearer import NO_KEY, KeyFinder, challenge, usable_key

__all__ = ["ExecutorDep", "Key", "api_key", "bearer_secret", "executor_of", "key_finder", "refused"]

_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    description="An API key from `turnkit keys create`: `Authorization: Bearer tk_...`",
)


async def executor_of(request: Request) -> Executor:
    """The executor the app was created with (async: FastAPI runs a sync dependency in a worker
    thread, a hop that cost more than the lookup)."""
    return _executor(request)


def _executor(request: Request) -> Executor:
    executor: Executor = request.app.state.executor
    return executor


async def api_key(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> ApiKey:
    """The usable key the request's bearer names; a 401 problem otherwise."""
    if credentials is None:  # no error information: none was sent (RFC 6750, section 3.1)
        raise _refused(NO_KEY, "Bearer")
    keys: ApiKeys = request.app.state.keys
    found = await usable_key(keys, credentials.credentials, _executor(request).clock())
    if isinstance(found, str):
        raise _refused(found, challenge(found))
    return found


def _refused(detail: str, challenged: str) -> HTTPException:
    return HTTPException(401, detail, headers={"WWW-Authenticate": challenged})


def refused(reason: str) -> HTTPException:
    """The 401 problem refusing a request's bearer key because of ``reason``."""
    return _refused(reason, challenge(reason))


def bearer_secret(request: Request) -> str:
    """The secret of the request's ``Authorization: Bearer`` header (as ``HTTPBearer`` reads
    it); a 401 problem when there is none. For a route that finds the key itself
    (``key_finder``), without FastAPI's dependencies (~50 µs a request, measured)."""
    scheme, _, secret = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not secret:
        raise _refused(NO_KEY, "Bearer")
    return secret


def key_finder(request: Request) -> KeyFinder:
    """The app's ``KeyFinder``: who a bearer calls as, found in the call's own worker thread."""
    finder: KeyFinder = request.app.state.find_key
    return finder


Key = Annotated[ApiKey, Depends(api_key)]
"""A route parameter: the request's usable API key."""

ExecutorDep = Annotated[Executor, Depends(executor_of)]
"""A route parameter: the executor every call runs through."""
