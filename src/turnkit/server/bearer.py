"""What is wrong with a request's bearer key, said once for REST and MCP.

Both answer a refused bearer with 401 and an RFC 6750 challenge whose ``error_description``
says why — no key sent, not a known key, revoked (when), expired (when) — and what to do, so a
client (the MCP SDK's, curl, a browser's network tab) can show it to the person holding the key.
The key is looked up in the ledger on every request: a revocation holds at the next request in
every process.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from turnkit.executor.calls import Resolved
from turnkit.ledger.keys import ApiKey, ApiKeys
from turnkit.registry._memo import remember
from turnkit.registry.caller import Caller

__all__ = ["NO_KEY", "UNKNOWN_KEY", "KeyFinder", "challenge", "usable", "usable_key"]

NO_KEY = "send an API key: 'Authorization: Bearer tk_...' (make one with turnkit keys create)"
"""Why a request without a bearer is refused."""
UNKNOWN_KEY = "the bearer is not a known API key; use a key made with turnkit keys create"
"""Why a bearer no key in the ledger has is refused (a typo, or another server's key)."""
_RENEW = "; make a new key with turnkit keys create"


async def usable_key(keys: ApiKeys, secret: str, now: float) -> ApiKey | str:
    """The key ``secret`` names if it may be used at ``now``; else why not (for a 401)."""
    return usable(await keys.aby_secret(secret), now)


def usable(key: ApiKey | None, now: float) -> ApiKey | str:
    """``key`` (as a secret found it) if it may be used at ``now``; else why not."""
    if key is None:
        return UNKNOWN_KEY
    refused = key.refused(now)
    return key if refused is None else refused + _RENEW


class KeyFinder:
    """Who a bearer key calls as, found in the worker thread that runs the call
    (``Executor.acall_as``): one thread hop for the lookup and the call. When the keys live in
    the executor's ledger, the operator's settings are read in the same statement as the key
    (``ApiKeys.with_settings``): one round trip to the database for both."""

    def __init__(self, keys: ApiKeys, ledger: object, clock: Callable[[], float]) -> None:
        self.keys = keys
        self.clock = clock
        self.with_settings = keys.ledger is ledger
        self._callers: dict[ApiKey, Caller] = {}  # a key's caller, checked once

    def __call__(self, secret: str) -> Callable[[], Resolved | str]:
        """What ``acall_as`` runs: the caller ``secret`` names, or why it is refused."""
        return functools.partial(self.find, secret)

    def lookup(self, secret: str) -> tuple[ApiKey | str, Mapping[str, Any] | None]:
        """Blocking: the usable key ``secret`` names (or why it is refused), and the operator's
        setting overrides read with it (None when the keys are in another database)."""
        if self.with_settings:
            key, overrides = self.keys.with_settings(secret)
        else:
            key, overrides = self.keys.by_secret(secret), None
        return usable(key, self.clock()), overrides

    def find(self, secret: str) -> Resolved | str:
        """Blocking: the key's caller, allow list (and settings), or why it may not call."""
        key, overrides = self.lookup(secret)
        if isinstance(key, str):
            return key
        caller = self._callers.get(key)
        if caller is None:
            caller = remember(self._callers, key, key.caller, limit=1024)
        return Resolved(caller, key.allowed, overrides)


def challenge(description: str) -> str:
    """The ``WWW-Authenticate`` value refusing a bearer because of ``description``.

    Examples:
        >>> challenge('the key key_1 "expired"')
        'Bearer error="invalid_token", error_description="the key key_1 ?expired?"'
    """
    said = "".join(c if " " <= c <= "~" and c not in '"\\' else "?" for c in description)
    return f'Bearer error="invalid_token", error_description="{said[:500]}"'
