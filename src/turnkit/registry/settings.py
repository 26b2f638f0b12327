"""``Settings``: the knobs of the executor and the turn, with the operator's overrides.

Defaults are given in code; an operator may override any of them while runs are live by writing to
the ledger's settings table (``ledger.set_setting``). The executor reads the overrides **at call
time**, so switching ``api_session_write_modules`` off stops the agent's next write.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Settings"]

log = logging.getLogger("turnkit.settings")

MAX_SECONDS = 1e9
"""The longest duration a setting may give (about 31 years): beyond it an expiry time is not a
date (``OverflowError``), and NaN or infinity would break every call instead of answering."""
MAX_WHOLE = 2**63 - 1
"""The largest whole-number setting: what every ledger stores as an integer."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Settings:
    """Every setting, with its default."""

    api_session_write_modules: frozenset[str] = frozenset()
    """Modules whose write tools a session (the agent acting for a user) may see; default none."""
    agent_tool_result_chars: int = 20_000
    """The most characters of a tool result's JSON that the model receives (larger is truncated)."""
    confirm_batch_over: int = 50
    """An admin write whose longest list is longer than this waits for a confirmation."""
    confirmation_ttl: float = 3600.0
    """Seconds a confirmation stays decidable."""
    rate_limit_units: int = 600
    """Cost units a caller may spend per window; 0 turns rate limiting off."""
    rate_limit_window: float = 60.0
    """Length of a rate-limit window in seconds."""
    handler_timeout: float = 30.0
    """Seconds a handler may run before its call answers ``timeout``."""
    preview_timeout: float = 2.0
    """Seconds a tool's ``preview`` may take when its call is held; past them the call is held
    without one ("preview unavailable")."""
    max_input_chars: int = 1_000_000
    """The longest input, as compact JSON, that a tool accepts."""
    max_rounds: int = 10
    """Model rounds in one turn before it ends with a clear final message."""
    max_pending_holds: int = 100
    """The most writes one caller may have waiting for a person at once; a hold past it is
    answered ``too_many_pending`` (HTTP 429) until one is decided or expires. 0: no cap."""
    hold_key_writes: bool = False
    """Hold every write an API key makes for a person's yes (not only those whose tool's
    ``danger`` or batch size says so): for operators who want no key write without a person."""
    retention_days: float = 30.0
    """Days decided confirmations and idempotency records are kept (``turnkit ledger prune``);
    a repeat with an idempotency key older than that runs anew. At least one day."""
    audit_retention_days: float = 0.0
    """Days audit rows are kept by ``turnkit ledger prune``; 0 keeps them for good."""

    def __post_init__(self) -> None:
        modules = self.api_session_write_modules
        if isinstance(modules, str) or not isinstance(modules, Iterable):
            raise TypeError("api_session_write_modules must be a collection of module keys")
        object.__setattr__(self, "api_session_write_modules", frozenset(modules))
        for name in ("agent_tool_result_chars", "confirm_batch_over", "max_input_chars"):
            _require(name, getattr(self, name), minimum=1)
        for name in ("rate_limit_units",):
            _require(name, getattr(self, name), minimum=0)
        _require("max_rounds", self.max_rounds, minimum=1)
        _require("max_pending_holds", self.max_pending_holds, minimum=0)
        if not isinstance(self.hold_key_writes, bool):
            raise ValueError(
                f"setting 'hold_key_writes' must be true or false, got {self.hold_key_writes!r}"
            )
        _days("retention_days", self.retention_days, minimum=1)
        if self.audit_retention_days != 0:
            _days("audit_retention_days", self.audit_retention_days, minimum=1)
        for name in ("confirmation_ttl", "rate_limit_window", "handler_timeout", "preview_timeout"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not 0 < value <= MAX_SECONDS  # also refuses NaN, which compares false
            ):
                raise ValueError(
                    f"setting {name!r} must be a number of seconds > 0 and at most"
                    f" {MAX_SECONDS:.0e} (about 31 years), got {value!r}"
                )

    def merged(self, overrides: Mapping[str, Any]) -> Settings:
        """These settings with the operator's ``overrides`` applied.

        An unknown key or a value that breaks its setting's rule is logged and skipped: a typo in
        the settings table must not stop every call.
        """
        if not overrides:
            return self
        known = {f.name for f in dataclasses.fields(self)}
        merged = self
        for key, value in overrides.items():
            if key not in known:
                log.warning("unknown setting %r in the ledger is ignored", key)
                continue
            try:
                merged = dataclasses.replace(merged, **{key: value})
            except (TypeError, ValueError) as exc:
                log.warning("setting %r = %r in the ledger is ignored: %s", key, value, exc)
        return merged


def _days(name: str, value: object, *, minimum: float) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not minimum <= value <= MAX_SECONDS / 86400  # also refuses NaN
    ):
        zero = " (or 0: keep them for good)" if name == "audit_retention_days" else ""
        raise ValueError(
            f"setting {name!r} must be a number of days >= {minimum:g}{zero} and at most"
            f" {MAX_SECONDS / 86400:.0f}, got {value!r}"
        )


def _require(name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_WHOLE:
        raise ValueError(
            f"setting {name!r} must be a whole number >= {minimum} and < 2**63, got {value!r}"
        )
