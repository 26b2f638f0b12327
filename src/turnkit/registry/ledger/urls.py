"""Storage URLs: one grammar for ``open_ledger``, ``open_storage`` and the ``--db`` option.

Accepted: a SQLite file (a path ending in ``.sqlite``, ``.sqlite3`` or ``.db``), ``sqlite:///path``
(any path), and ``postgresql://...`` (or ``postgres://``). Anything else is refused with a
``StorageError`` that names what was given (credentials hidden) and what to write instead: a typo
such as ``postgres:/u@h/db`` would otherwise become a file of that name, and so would a bare word.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from turnkit.errors import StorageError

__all__ = ["ACCEPTED", "SQLITE_SUFFIXES", "parse_url", "shown", "sqlite_problem"]

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
    """``url`` without its credentials, for messages and reprs: the user info before an ``@``
    (``scheme://user:pw@``, also in typos such as ``postgres:/u:pw@h``) and any ``password=``."""
    text = _PASSWORD_PARAM.sub(r"\1***", url)
    if "@" not in text:
        return text
    before, _, after = text.rpartition("@")
    return f"{before[: before.rfind('/') + 1]}***@{after}"  # the user info: after the last '/'
