"""Ids that must be unique but need not be secret, made without letting go of the GIL.

``uuid.uuid4()`` and ``os.urandom`` read the kernel's random source through a system call and
release the GIL around it. On the event loop's thread that is a hand-over whenever a worker
thread waits for the GIL (a handler just given to the pool): the worker takes it, and the
loop's thread then waits to get it back. With 500 concurrent turns, the ids turnkit made on
the loop (a call's id, its audit row's, its tool message's) had the loop's thread wait on a
futex 2,895 times against 518 with ids made here, the six-step shape's 538
(``strace -ff``, ``docs/performance.md``).

These are ids for telling things apart and ordering them: a call's id, an audit row's, a
message's. What must not be guessed (keys, tokens, sign-ins, confirmations) keeps ``secrets``.
The source is a ``random.Random`` of this module's own, seeded from ``os.urandom`` and seeded
again in a forked child, so neither an application's ``random.seed`` nor a fork of a worker
repeats the ids.
"""

from __future__ import annotations

import os
import random

__all__ = ["random_hex", "uuid4_text"]

_source = random.Random()  # seeded from os.urandom
os.register_at_fork(after_in_child=_source.seed)  # a child must not repeat its parent's ids

_VERSION_4 = (0x4 << 76) | (0x2 << 62)  # version 4, variant 10 (RFC 9562)
_KEEP = ~((0xF << 76) | (0x3 << 62)) & ((1 << 128) - 1)


def uuid4_text() -> str:
    """A random (version 4) UUID as ``str(uuid.uuid4())`` writes it.

    Examples:
        >>> import uuid
        >>> made = uuid.UUID(uuid4_text())
        >>> (made.version, made.variant == uuid.RFC_4122)
        (4, True)
    """
    digits = f"{_source.getrandbits(128) & _KEEP | _VERSION_4:032x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def random_hex(bits: int) -> str:
    """``bits`` random bits as lower-case hex digits (``bits`` a multiple of 4).

    Raises:
        ValueError: ``bits`` is not a positive multiple of 4.
    """
    if bits <= 0 or bits % 4:
        raise ValueError(f"bits must be a positive multiple of 4, got {bits}")
    return f"{_source.getrandbits(bits):0{bits // 4}x}"
