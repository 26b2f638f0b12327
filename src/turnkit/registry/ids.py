"""Ids made without letting go of the GIL: unique, and not to be guessed from others.

``uuid.uuid4()`` and ``os.urandom`` read the kernel's random source through a system call and
release the GIL around it. On the event loop's thread that is a hand-over whenever a worker
thread waits for the GIL (a handler just given to the pool): the worker takes it, and the
loop's thread then waits to get it back. With 500 concurrent turns, the ids turnkit made on
the loop (a call's id, its audit row's, its tool message's) had the loop's thread wait on a
futex 2,895 times against 495 with ids made here, the six-step shape's 538
(``strace -ff``, ``docs/performance.md``).

An id here is a keyed BLAKE2b of a counter: the key is 32 bytes of ``os.urandom``, drawn at
import and again in a forked child (which must not repeat its parent's ids), so the ids do not
repeat and cannot be told from, or foretold by, the ones a caller has seen (a call's id reaches
its handler, an upstream server, an error's text). Nothing an application does with ``random``
reaches them. Keys, tokens, sign-ins and confirmations still come from ``secrets`` and
``uuid4()``: they are made off the hot path, and their own modules say how.
"""

from __future__ import annotations

import hashlib
import itertools
import os

__all__ = ["random_hex", "uuid4_text"]

_MOST_BITS = 512  # BLAKE2b's longest digest
_counter = itertools.count()  # next() is one C call: threads never get the same number
_key = os.urandom(32)


def _new_key() -> None:
    global _key
    _key = os.urandom(32)


os.register_at_fork(after_in_child=_new_key)

_VERSION_4 = (0x4 << 76) | (0x2 << 62)  # version 4, variant 10 (RFC 9562)
_KEEP = ~((0xF << 76) | (0x3 << 62)) & ((1 << 128) - 1)


def _digest(size: int) -> bytes:
    """``size`` bytes no other call of this process (or of a forked one) gets."""
    return hashlib.blake2b(
        next(_counter).to_bytes(16, "little"), key=_key, digest_size=size
    ).digest()


def uuid4_text() -> str:
    """A random (version 4) UUID as ``str(uuid.uuid4())`` writes it.

    Examples:
        >>> import uuid
        >>> made = uuid.UUID(uuid4_text())
        >>> (made.version, made.variant == uuid.RFC_4122)
        (4, True)
    """
    digits = f"{int.from_bytes(_digest(16)) & _KEEP | _VERSION_4:032x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def random_hex(bits: int) -> str:
    """``bits`` random bits as lower-case hex digits.

    Raises:
        ValueError: ``bits`` is not a multiple of 4 from 4 to 512.
    """
    if not 0 < bits <= _MOST_BITS or bits % 4:
        raise ValueError(f"bits must be a multiple of 4 from 4 to {_MOST_BITS}, got {bits}")
    return _digest((bits + 7) // 8).hex()[: bits // 4]
