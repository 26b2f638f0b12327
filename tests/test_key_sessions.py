"""Sign-ins of keys to the web inbox, in the ledger: an idle timeout, uses that extend it (with
at most one write a minute), sign-ins that ended purged at the next sign-in, and a ledger made
before the idle timeout existed upgraded in place; on SQLite and PostgreSQL.

Reaches ``turnkit.ledger.keys`` directly: it tests the key store's own sign-ins (``ApiKeys``,
``SESSION_TOUCH``), which no public name exposes."""

from __future__ import annotations

import multiprocessing
import sqlite3

import pytest

import _workers
from turnkit import Ledger, open_ledger
from turnkit.ledger.keys import SESSION_TOUCH, ApiKeys

NOW = 1_800_000_000.0
IDLE = 600.0
OLD_SESSIONS = """
    CREATE TABLE turnkit_key_sessions (
        token_hash TEXT PRIMARY KEY,
        key_id TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL
    )
"""
"""The sign-ins' table as turnkit made it before the idle timeout (no ``last_seen``)."""


@pytest.fixture
def keys(ledger) -> ApiKeys:
    return ledger.keys


def signed_in(keys: ApiKeys, until: float = NOW + 8 * 3600, at: float = NOW) -> tuple[str, str]:
    """A new sign-in of a new key of alice's at ``at``: the key's id and the token."""
    key, _ = keys.create("alice", {"system.confirmations:decide"}, now=at)
    return key.id, keys.open_session(key.id, until, idle=IDLE, now=at)


def last_seen(ledger: Ledger) -> list[float]:
    return [row[0] for row in ledger._rows("SELECT last_seen FROM turnkit_key_sessions")]


def test_a_sign_in_unused_for_the_idle_timeout_ends(keys):
    key_id, token = signed_in(keys)

    assert keys.by_session(token, NOW + IDLE - 1, idle=IDLE, touch=False).id == key_id
    assert keys.by_session(token, NOW + IDLE, idle=IDLE) is None
    assert keys.by_session(token, NOW + IDLE) is not None  # no idle timeout: until it expires


def test_each_use_extends_a_sign_in_writing_the_ledger_at_most_once_a_minute(keys, ledger):
    _, token = signed_in(keys)

    for seconds in range(0, int(SESSION_TOUCH), 10):  # uses within the first minute
        assert keys.by_session(token, NOW + seconds, idle=IDLE) is not None
    assert last_seen(ledger) == [NOW]  # not written
    assert keys.by_session(token, NOW + SESSION_TOUCH, idle=IDLE) is not None
    assert last_seen(ledger) == [NOW + SESSION_TOUCH]
    later = NOW + SESSION_TOUCH + IDLE - 1  # idle since that use, but not for the whole timeout
    assert keys.by_session(token, later, idle=IDLE) is not None
    assert keys.by_session(token, later + IDLE - 1, idle=IDLE) is not None


def test_a_look_that_is_not_a_use_does_not_extend_a_sign_in(keys, ledger):
    _, token = signed_in(keys)

    assert keys.by_session(token, NOW + IDLE - 1, idle=IDLE, touch=False) is not None

    assert last_seen(ledger) == [NOW]
    assert keys.by_session(token, NOW + IDLE, idle=IDLE) is None


def test_a_sign_in_purges_the_sign_ins_that_ended(keys, ledger):
    _, expired = signed_in(keys, until=NOW + 100)
    _, idle = signed_in(keys)
    _, live = signed_in(keys)
    assert keys.by_session(live, NOW + IDLE - 10, idle=IDLE) is not None  # used: stays
    assert len(last_seen(ledger)) == 3

    _, newest = signed_in(keys, at=NOW + IDLE + 1)

    assert len(last_seen(ledger)) == 2
    assert keys.by_session(live, NOW + IDLE + 2, idle=IDLE) is not None
    assert keys.by_session(newest, NOW + IDLE + 2, idle=IDLE) is not None
    for ended in (expired, idle):
        assert keys.by_session(ended, NOW + IDLE + 2) is None  # gone, whatever the timeout


@pytest.fixture
def old_ledger_url(ledger_url) -> str:
    """A ledger database whose sign-ins' table is the old one, holding one sign-in of NOW."""
    row = ("hash-of-an-old-token", "key_old", NOW, NOW + 8 * 3600)
    if ledger_url.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(ledger_url, autocommit=True) as conn:
            conn.execute(OLD_SESSIONS)
            conn.execute("INSERT INTO turnkit_key_sessions VALUES (%s, %s, %s, %s)", row)
    else:
        with sqlite3.connect(ledger_url) as conn:
            conn.execute(OLD_SESSIONS)
            conn.execute("INSERT INTO turnkit_key_sessions VALUES (?, ?, ?, ?)", row)
        conn.close()
    return ledger_url


def test_a_ledger_made_before_the_idle_timeout_is_upgraded_in_place(old_ledger_url):
    ledger = open_ledger(old_ledger_url)
    try:
        keys = ledger.keys
        key_id, token = signed_in(keys, at=NOW + 1)  # the new column, written
        assert keys.by_session(token, NOW + 2, idle=IDLE).id == key_id
        rows = ledger._rows("SELECT key_id, last_seen FROM turnkit_key_sessions ORDER BY key_id")
        assert rows == [(key_id, NOW + 1), ("key_old", None)]  # the old sign-in kept
        ledger.setup()  # again: nothing more to add
    finally:
        ledger.close()


def test_many_processes_opening_an_old_ledger_at_once_all_succeed(old_ledger_url):
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        results = pool.map(_workers.open_and_count_settings, [old_ledger_url] * 8)
    assert results == [0] * 8
