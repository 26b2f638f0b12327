"""A line typed at a prompt, with Ctrl-C acted on at every moment.

``input()`` looks for a Ctrl-C only when its blocking read is interrupted. One that lands in
the instant after the prompt is shown and before that read blocks is acted on by nobody: the
person pressed Ctrl-C and nothing happens until the next key. On a terminal, the line is waited
for in short ``select`` calls first, so Python acts on such a Ctrl-C within ``POLL`` seconds;
``input()`` then reads a line that is already there.
"""

from __future__ import annotations

import os
import select
import sys

from rich.console import Console

POLL = 0.1
"""Seconds between two looks for a Ctrl-C while a prompt waits for its line."""


def read_line(console: Console, prompt: str) -> str:
    """Show ``prompt`` (Rich markup) and return the line typed after it, without its newline.

    Raises ``EOFError`` on Ctrl-D and ``KeyboardInterrupt`` on Ctrl-C, as ``input()`` does."""
    console.print(prompt, end="")
    _wait_for_a_line()
    return console.input()


def _wait_for_a_line() -> None:
    """Return once the terminal has a line (or the end of input) to read; at once when standard
    input is not a terminal (a pipe's reader may hold lines a ``select`` cannot see)."""
    try:
        fd = sys.stdin.fileno()
        if not os.isatty(fd):
            return
    except (AttributeError, OSError, ValueError):  # replaced by an object without a file
        return
    while not select.select([fd], [], [], POLL)[0]:
        pass
