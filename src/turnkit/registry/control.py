"""The control fields a call carries beside its input.

``dry_run`` (bool) asks what a call would do without doing it, ``confirm_token`` (str) carries a
person's approval, ``idempotency_key`` (str) makes a repeated call replay its first answer. A
tool's ``input_schema`` may not declare them as properties, and the model's arguments are
stripped of them.
"""

from __future__ import annotations

from typing import Final

__all__ = ["CONTROL_FIELDS", "CONTROL_TYPES"]

CONTROL_FIELDS: Final = frozenset({"dry_run", "confirm_token", "idempotency_key"})
"""The names of the control fields."""

CONTROL_TYPES: Final[dict[str, type]] = {
    "dry_run": bool,
    "confirm_token": str,
    "idempotency_key": str,
}
"""The type each control field must have."""
