"""Run a worker in a spawned process and wait for how it ended (the crash tests' one runner)."""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable
from typing import Any

import pytest

SPAWN = multiprocessing.get_context("spawn")


def run(target: Callable[..., Any], *args: Any, exitcode: int = -signal.SIGKILL) -> None:
    """Run ``target`` in a spawned process and wait (bounded) for it to end with ``exitcode``."""
    process = SPAWN.Process(target=target, args=args, daemon=True)
    process.start()
    process.join(timeout=120)
    if process.is_alive():
        process.kill()
        process.join(timeout=10)
        pytest.fail(f"{target.__name__} did not end within 120 s")
    assert process.exitcode == exitcode, f"{target.__name__} ended with {process.exitcode}"
