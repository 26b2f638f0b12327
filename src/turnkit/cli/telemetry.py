"""A command's spans exported as the ``OTEL_*`` variables ask: a decision made at the terminal
is traced like one made over REST (linked to its hold), and sent before the command ends."""

from __future__ import annotations

import atexit

from turnkit.observe import configure_sdk

__all__ = ["export_this_command"]

_done = False


def export_this_command() -> None:
    """Set up the SDK once for this process when ``OTEL_*`` asks for export (nothing otherwise),
    its spans sent when the command ends."""
    global _done
    if _done:
        return
    _done = True
    sdk = configure_sdk()
    if sdk is not None:
        atexit.register(sdk.shutdown)
