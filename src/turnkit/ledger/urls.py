"""Storage URLs: one grammar for ``open_ledger``, ``open_storage`` and the ``--db`` option.

Accepted: a SQLite file (a path ending in ``.sqlite``, ``.sqlite3`` or ``.db``), ``sqlite:///path``
(any path), and ``postgresql://...`` (or ``postgres://``). Anything else is refused with a
``StorageError`` that names what was given (credentials hidden) and what to write instead: a typo
such as ``postgres:/u@h/db`` would otherwise become a file of that name, and so would a bare word.

A PostgreSQL URL may carry two options of turnkit's own, taken out before connecting (libpq
would refuse them): ``pooler=transaction`` says a pooler in transaction mode (PgBouncer, ...) is in
between, and ``pool_size=N`` bounds each of turnkit's connection pools (``postgres_target``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from turnkit.errors import StorageError

__all__ = [
    "ACCEPTED",
    "SQLITE_SUFFIXES",
    "PostgresTarget",
    "parse_url",
    "pooler_problem",
    "postgres_target",
    "shown",
    "sqlite_problem",
]

SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
"""The endings that make a bare path a SQLite file."""
ACCEPTED = (
    "a SQLite file (ending in .sqlite, .sqlite3 or .db), sqlite:///path,"
    " or postgresql://user@host:port/db"
)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")  # two letters at least: C:\ is a drive


def parse_url(url: str | os.PathLike[str]) -> tuple[Literal["sqlite", "postgres"], str]:
    """``("postgres", url)`` or ``("sqlite", file path)`` for ``url``.

    Raises:
        StorageError: ``url`` is none of the accepted forms.
    """
    text = os.path.expanduser(os.fspath(url))
    if text.startswith(("postgresql://", "postgres://")):
        postgres_target(text)  # a bad turnkit option is refused now, like a bad URL
        return "postgres", text
    if text.startswith("sqlite:///"):
        path = text.removeprefix("sqlite:///")
        if path.strip() and path != ":memory:" and not path.startswith("file:"):
            return "sqlite", path
    elif "://" in text:
        raise StorageError(f"unsupported storage URL {shown(text)!r}: use {ACCEPTED}")
    elif _SCHEME.match(text) and not Path(text).exists():
        raise StorageError(
            f"{shown(text)!r} looks like a URL but is not one (a URL has '://'): use {ACCEPTED}"
        )
    elif text.lower().endswith(SQLITE_SUFFIXES):
        return "sqlite", text
    if not text.strip() or ":memory:" in text or text.startswith(("file:", "sqlite:")):
        raise StorageError(
            f"storage needs a SQLite file shared by processes and threads, got {text!r}"
            f" (an in-memory database is a new empty one in every thread): use {ACCEPTED}"
        )
    example = "" if re.search(r"[:/@\\]", text) else f" (for example {text}.sqlite)"
    raise StorageError(
        f"{shown(text)!r} is neither a SQLite file nor a URL: use {ACCEPTED}{example}"
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class PostgresTarget:
    """A PostgreSQL URL with turnkit's own options read and taken out."""

    conninfo: str
    """The URL psycopg connects to: the given one without ``pooler=`` and ``pool_size=``."""
    pooler: bool
    """``pooler=transaction`` was given: a pooler in transaction mode is in between, so nothing
    may rely on a session (no prepared statements; setup locks held by a transaction)."""
    pool_size: int | None
    """``pool_size=N``: the most connections each of turnkit's pools opens (None: its default)."""


POOLER_MODES = ("transaction",)
"""The values ``pooler=`` accepts (a pooler in session mode behaves as a server: no option)."""


def postgres_target(url: str) -> PostgresTarget:
    """``url``'s connection string and turnkit's options in it (``pooler=``, ``pool_size=``).

    A URL without them is returned as given, to the character.

    Raises:
        StorageError: an option has a value turnkit does not accept.
    """
    base, mark, query = url.partition("?")
    kept, pooler, pool_size = [], False, None
    for part in query.split("&") if mark else []:
        name, _, value = part.partition("=")
        if name == "pooler":
            if value not in POOLER_MODES:
                raise StorageError(
                    f"{shown(url)!r}: pooler={value!r} is not an option; write pooler=transaction"
                    " when a pooler in transaction mode (PgBouncer, ...) is in between, and"
                    " nothing for a direct connection or a pooler in session mode"
                )
            pooler = True
        elif name == "pool_size":
            if not (value.isdigit() and 0 < int(value) <= 1000):
                raise StorageError(
                    f"{shown(url)!r}: pool_size={value!r} is not a number of connections;"
                    " write pool_size=N with N from 1 to 1000"
                )
            pool_size = int(value)
        else:
            kept.append(part)
    if not pooler and pool_size is None:
        return PostgresTarget(conninfo=url, pooler=False, pool_size=None)
    conninfo = f"{base}?{'&'.join(kept)}" if kept else base
    return PostgresTarget(conninfo=conninfo, pooler=pooler, pool_size=pool_size)


PREPARED_STATEMENT_STATES = frozenset({"42P05", "26000"})
"""The SQLSTATEs of a prepared statement that already exists (``DuplicatePreparedStatement``) or
is gone (``InvalidSqlStatementName``): what a pooler in transaction mode does to psycopg's
prepared statements when the URL does not say ``pooler=transaction``."""


def pooler_problem(url: str | None, exc: BaseException) -> StorageError | None:
    """The ``StorageError`` to raise in place of ``exc`` when it is a prepared-statement error
    on a URL without ``pooler=transaction`` (a pooler in transaction mode, such as PgBouncer, is in
    between and turnkit was not told), naming the URL to write instead; else None.

    ``url`` is None where the URL is not at hand (the message then says "the URL").

    Examples:
        >>> class Duplicate(Exception):
        ...     sqlstate = "42P05"
        >>> told = pooler_problem("postgresql://u:pw@h:6432/db", Duplicate("prepared ..."))
        >>> str(told).partition("does not say so: ")[2]
        "write 'postgresql://u:***@h:6432/db?pooler=transaction'"
    """
    if getattr(exc, "sqlstate", None) not in PREPARED_STATEMENT_STATES:
        return None
    if url is not None and postgres_target(url).pooler:
        return None  # told already: this is another fault, not the missing option
    reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:160]
    if url is None:
        fix = "add ?pooler=transaction to the PostgreSQL URL (&pooler=transaction after a ?)"
    else:
        fix = f"write {shown(url) + ('&' if '?' in url else '?') + 'pooler=transaction'!r}"
    return StorageError(
        f"a prepared statement broke ({reason}): a pooler in transaction mode (PgBouncer, ...)"
        f" is in between, and the URL does not say so: {fix}"
    )


def sqlite_problem(path: str | os.PathLike[str]) -> str | None:
    """Why the SQLite file at ``path`` cannot be opened or created, or None."""
    target = Path(path)
    if target.is_dir():
        return f"{str(target)!r} is a folder, not a SQLite file"
    folder = target.parent
    for parent in [folder, *folder.parents]:
        if parent.exists() and not parent.is_dir():
            return f"{str(parent)!r} is a file, so {str(target)!r} cannot be created in it"
    if not folder.exists():
        return f"the folder {str(folder)!r} does not exist: create it first (mkdir -p {folder})"
    if not os.access(folder, os.W_OK) and not target.exists():
        return f"the folder {str(folder)!r} is not writable, so {str(target)!r} cannot be created"
    return None


_PASSWORD_PARAM = re.compile(r"(password=)[^&;\s]*", re.IGNORECASE)


def shown(url: str) -> str:
    """``url`` without its password, for messages and reprs: the password in the user info
    before an ``@`` (``scheme://user:pw@``, also in typos such as ``postgres:/u:pw@h``) and any
    ``password=``; the user stays, to tell which account a message is about.

    Examples:
        >>> shown("postgresql://app:hunter2@db:5432/turnkit")
        'postgresql://app:***@db:5432/turnkit'
        >>> shown("postgresql://app@db/turnkit?password=hunter2")
        'postgresql://app@db/turnkit?password=***'
        >>> shown("postgresql://app:a/b@c@db/turnkit")  # a password with '/' and '@' in it
        'postgresql://app:***@db/turnkit'
    """
    text = _PASSWORD_PARAM.sub(r"\1***", url)
    if "@" not in text:
        return text
    before, _, after = text.rpartition("@")
    # the user info: after '://', or after the last '/' in a typo (postgres:/u:pw@h)
    start = before.index("://") + 3 if "://" in before else before.rfind("/") + 1
    user, colon, _password = before[start:].partition(":")
    return f"{before[:start]}{user}{':***' if colon else ''}@{after}"
