"""The ``turnkit`` console script's first code: Ctrl-C at any moment ends the command with one
line and exit status 130, never a traceback.

``turnkit.cli.main`` answers a Ctrl-C once it runs; this module covers the half second before it
can, while Python imports turnkit, its CLI and their libraries. It lives outside the ``turnkit``
package because importing any ``turnkit.*`` module first runs ``turnkit/__init__.py``, and it
imports nothing but the standard library before that import.
"""

from __future__ import annotations

import _thread
import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable

INTERRUPTED = 130
"""``turnkit.cli.options.INTERRUPTED`` (this module may not import turnkit before it is loaded)."""
STOPPED = "stopped (Ctrl-C)"
"""``turnkit.cli.options.STOPPED``."""
REDELIVER_AFTER = 0.05
"""Seconds after a Ctrl-C that Python could not raise to send it again: long enough for the hook
that saw it to have returned."""


_pressed = False
"""Whether a Ctrl-C came while the command was loading (``_noted``)."""


def main() -> None:
    """Load the ``turnkit`` command and run it (``turnkit.cli.main``)."""
    sys.unraisablehook = _unraisable
    signal.signal(signal.SIGINT, _noted)
    try:
        try:
            run = _load()
        except Exception:
            if not _pressed:
                raise
            raise KeyboardInterrupt from None  # a library turned the Ctrl-C into its own error
        signal.signal(signal.SIGINT, signal.default_int_handler)
        run()
    except SystemExit:  # the command has ended: a Ctrl-C while Python shuts down (its threads,
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # atexit) ends it at once, 130 to a shell
        raise
    except KeyboardInterrupt:  # while importing, or in main's own closing
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # a second Ctrl-C ends it at once
        print(f"\n{STOPPED}", flush=True)
        sys.exit(INTERRUPTED)


def _load() -> Callable[[], None]:
    from turnkit.cli import main as run

    return run


def _noted(signum: int, frame: object) -> None:
    """SIGINT while the command loads: Python's own handler, remembering it was pressed.
    pydantic-core, building a validator at import, catches the ``KeyboardInterrupt`` and raises
    a ``SchemaError`` that only names it; ``main`` still ends that in the one line."""
    global _pressed
    _pressed = True
    raise KeyboardInterrupt


def _unraisable(unraisable: sys.UnraisableHookArgs) -> None:
    """A Ctrl-C that landed where Python cannot raise it (a callback inside a C library, such as
    pydantic-core building a validator, or the import system's weakref callbacks) is sent again
    to the main thread, instead of printed as "Exception ignored" with a traceback and lost.

    It is sent from another thread once this hook has returned: raised in the hook itself, it
    would be ignored in turn. As a real signal it also wakes a main thread already blocked in a
    read."""
    if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
        with contextlib.suppress(RuntimeError):  # Python is shutting down: the command ends
            _thread.start_new_thread(_redeliver, ())
        return
    sys.__unraisablehook__(unraisable)


def _redeliver() -> None:
    time.sleep(REDELIVER_AFTER)
    if signal.getsignal(signal.SIGINT) in (signal.default_int_handler, _noted):  # still running
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
