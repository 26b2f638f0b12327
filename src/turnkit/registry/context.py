"""What a call carries beside its input: the control fields, and the ``CallContext`` a handler,
a danger check and the audit know it by.

Control fields: ``dry_run`` (bool) asks what a call would do without doing it, ``confirm_token``
(str) carries a person's approval, ``idempotency_key`` (str) makes a repeated call replay its first
answer. A tool's ``input_schema`` may not declare them as properties, and the model's arguments are
stripped of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:  # the tool module imports the control fields from here
    from turnkit.registry.caller import Caller
    from turnkit.registry.settings import Settings
    from turnkit.registry.tool import Tool

__all__ = ["CONTROL_FIELDS", "CONTROL_TYPES", "CallContext"]

CONTROL_FIELDS: Final = frozenset({"dry_run", "confirm_token", "idempotency_key"})
"""The names of the control fields."""

CONTROL_TYPES: Final[dict[str, type]] = {
    "dry_run": bool,
    "confirm_token": str,
    "idempotency_key": str,
}
"""The type each control field must have."""


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
