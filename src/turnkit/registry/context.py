"""The ``CallContext`` a handler, a danger check and the audit know a call by (its control
fields are in ``control.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from turnkit.registry.caller import Caller
from turnkit.registry.settings import Settings
from turnkit.registry.tool import Tool

__all__ = ["CallContext"]


@dataclass(frozen=True, kw_only=True, slots=True)
class CallContext:
    """The second argument of every handler ``(input, ctx)`` and danger check."""

    caller: Caller
    """Who the call is made for (after a confirmation: the caller who was held)."""
    tool: Tool
    """The tool being called."""
    permissions: frozenset[str]
    """The caller's permissions, asked of the provider for this call."""
    settings: Settings
    """The settings in force for this call (defaults plus the operator's overrides)."""
    call_id: str
    """A fresh id of this call, also in its audit row and in its internal-error details."""
    dry_run: bool = False
    """True when a danger check asks what would happen: do nothing, change nothing."""
    confirmation_id: str | None = None
    """The confirmation a person approved, when this call runs an approved write."""
    idempotency_key: str | None = None
    """The call's idempotency key, if it has one."""
