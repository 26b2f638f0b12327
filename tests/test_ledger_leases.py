"""The ledger's thread leases: lock rows that expire on SQLite, advisory locks on PostgreSQL,
memory for a checkpointer that lives in one process (``turnkit.ledger.leases``).

Reaches ``turnkit.ledger.leases`` and ``turnkit.threads.leases`` directly: it tests the lease
rows and locks themselves, which no public name exposes."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psycopg
import pytest

from conftest import postgres_url
from turnkit import open_ledger
from turnkit.ledger.leases import HOLDER, LocalLeases


@pytest.fixture
def sqlite(tmp_path):
    ledger = open_ledger(str(tmp_path / "leases.sqlite"))
    yield ledger
    ledger.close()


@pytest.fixture
def postgres():
    url = postgres_url()
    first, second = open_ledger(url), open_ledger(url)  # two pools: two sessions' worth
    yield url, first, second
    first.close()
    second.close()


def test_a_sqlite_lease_is_one_holders_until_released_and_each_taking_has_a_new_token(sqlite):
    leases = sqlite.thread_leases(ttl=30)
    first = leases.take("t")
    assert first is not None
    assert first.token == 1
    assert first.holder == HOLDER
    assert leases.take("t") is None  # held
    assert leases.holder("t") == f"{HOLDER}#1"
    assert leases.take("other") is not None  # per thread
    assert first.vouched()
    assert first.recheck()
    leases.release(first)
    assert leases.holder("t") is None
    second = leases.take("t")
    assert second is not None
    assert second.token == 2
    assert not first.recheck()  # an old taking's token is never current again


def test_a_renewal_that_comes_after_the_release_does_not_take_the_lease_back(sqlite):
    leases = sqlite.thread_leases(ttl=30)
    lease = leases.take("t")
    assert lease is not None
    leases.release(lease)
    assert not leases.renew(lease)  # the renewer's late turn: refused
    assert leases.holder("t") is None
    assert leases.take("t") is not None


def test_a_sqlite_lease_expires_unless_renewed_and_a_taken_over_one_cannot_renew(sqlite):
    leases = sqlite.thread_leases(ttl=0.4)
    lease = leases.take("t")
    assert lease is not None
    time.sleep(0.25)
    assert leases.renew(lease)  # its holder runs on: pushed ahead
    time.sleep(0.25)
    assert leases.take("t") is None  # renewed, so still held
    time.sleep(0.5)
    assert not lease.vouched()  # past its expiry, the holder cannot vouch for it alone...
    other = leases.take("t")  # ...and another run may take it
    assert other is not None
    assert other.token == lease.token + 1
    assert not lease.recheck()
    assert not leases.renew(lease)


def test_a_sqlite_lease_past_its_expiry_that_nobody_took_is_renewed_by_its_check(sqlite):
    leases = sqlite.thread_leases(ttl=0.3)
    lease = leases.take("t")
    assert lease is not None
    time.sleep(0.4)
    assert not lease.vouched()
    assert lease.recheck()  # same token: nobody took the thread, so the run may go on
    assert lease.vouched()


def test_postgres_leases_exclude_other_sessions_and_name_their_holder(postgres):
    _, first, second = postgres
    held = first.thread_leases().take("t")
    assert held is not None
    assert held.vouched()
    assert held.recheck()  # asked again: its session still has the lock
    assert second.thread_leases().take("t") is None
    assert second.thread_leases().holder("t") == held.name
    assert second.thread_leases().take("another thread") is not None
    first.thread_leases().release(held)
    assert second.thread_leases().holder("t") is None
    again = second.thread_leases().take("t")
    assert again is not None
    assert again.token > held.token
    second.thread_leases().release(again)


def test_a_postgres_lease_holds_no_transaction_id_or_snapshot_while_it_lasts(postgres):
    """A lease lasts a whole run (model calls included): its open transaction must not hold back
    vacuum, nor stall ``CREATE INDEX CONCURRENTLY`` of another process's setup."""
    url, first, _ = postgres
    held = first.thread_leases().take("t")
    assert held is not None
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT state, backend_xid, backend_xmin FROM pg_stat_activity"
            " WHERE application_name = %s",
            (held.name,),
        ).fetchall()
    assert rows == [("idle in transaction", None, None)]
    with psycopg.connect(url, autocommit=True) as conn:  # and no table lock: its settings read
        locked = conn.execute(  # ended before (an ALTER TABLE would queue every turn behind it)
            "SELECT c.relname FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
            " JOIN pg_class c ON c.oid = l.relation WHERE a.application_name = %s",
            (held.name,),
        ).fetchall()
    assert locked == []
    first.thread_leases().release(held)


def test_a_postgres_lease_reads_the_settings_in_its_own_round_trip(postgres):
    """The run's one settings read rides on the lease's statement (``list_tools`` uses it);
    lock rows (SQLite, behind a pooler) read none, and ``list_tools`` asks the ledger."""
    _, first, _ = postgres
    first.set_setting("confirm_batch_over", 7)
    held = first.thread_leases().take("t")
    assert held is not None
    assert held.overrides == {"confirm_batch_over": 7} == first.settings()
    first.thread_leases().release(held)
    first.clear_setting("confirm_batch_over")
    held = first.thread_leases().take("t")
    assert held is not None
    assert held.overrides == {}
    first.thread_leases().release(held)


def test_a_sqlite_lease_reads_no_settings(sqlite):
    held = sqlite.thread_leases().take("t")
    assert held is not None
    assert held.overrides is None
    sqlite.thread_leases().release(held)


def test_a_postgres_lease_whose_session_ended_is_lost_and_the_thread_free(postgres):
    url, first, second = postgres
    held = first.thread_leases().take("t")
    assert held is not None
    with psycopg.connect(url, autocommit=True) as conn:
        ended = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (held.name,),
        ).fetchall()
    assert ended == [(True,)]
    deadline = time.monotonic() + 10
    while held.vouched() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not held.vouched()
    assert not held.recheck()
    taken = second.thread_leases().take("t")
    assert taken is not None
    first.thread_leases().release(held)  # a dead session's release is quiet
    second.thread_leases().release(taken)


def test_postgres_leases_of_two_ledgers_in_two_schemas_do_not_meet(postgres):
    """Advisory locks are per database; ledgers are per schema: a thread id used by two
    applications in one database is two threads."""
    _, first, _ = postgres
    elsewhere = open_ledger(postgres_url())  # a fresh schema of the same database
    try:
        mine = first.thread_leases().take("thread-1")
        theirs = elsewhere.thread_leases().take("thread-1")
        assert mine is not None
        assert theirs is not None
        first.thread_leases().release(mine)
        elsewhere.thread_leases().release(theirs)
    finally:
        elsewhere.close()


def test_local_leases_live_in_memory():
    leases = LocalLeases()
    lease = leases.take("t")
    assert lease is not None
    assert lease.vouched()
    assert leases.take("t") is None
    assert leases.holder("t") == lease.name
    leases.release(lease)
    assert not lease.vouched()
    assert leases.holder("t") is None
    assert leases.take("t").token == 2


def test_a_taking_cancelled_while_it_asks_gives_back_what_it_won(sqlite):
    """A run's timeout (or a client gone) cancels ``atake`` while its worker thread asks the
    database; the lease that thread may still win is given back, not left held until it expires."""
    import asyncio
    import threading

    from turnkit.threads.leases import atake

    leases = sqlite.thread_leases(ttl=30)
    asking, answered = threading.Event(), threading.Event()
    real_take = leases.take

    def slow_take(thread_id):
        asking.set()
        time.sleep(0.3)  # the database is slow to answer...
        try:
            return real_take(thread_id)
        finally:
            answered.set()

    leases.take = slow_take

    async def main():
        task = asyncio.create_task(atake(leases, "t", 0))
        await asyncio.to_thread(asking.wait, 5)
        task.cancel()  # ...and the run is cancelled meanwhile
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert answered.wait(5)
    deadline = time.monotonic() + 5
    while leases.holder("t") is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert leases.holder("t") is None
    leases.take = real_take
    assert leases.take("t") is not None


def _take_and_vanish(path: str) -> None:
    ledger = open_ledger(path)
    assert ledger.thread_leases(ttl=300).take("t") is not None
    os._exit(0)  # gone without giving it back, as a crash would


def test_a_lease_whose_holder_on_this_machine_is_gone_is_taken_at_once(sqlite):
    from _spawn import SPAWN

    child = SPAWN.Process(target=_take_and_vanish, args=(sqlite.path,))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    leases = sqlite.thread_leases(ttl=300)
    assert leases.holder("t") == f"{HOLDER.rpartition(':')[0]}:{child.pid}#1"  # still held...
    lease = leases.take("t")  # ...by a process that is no more: taken at once
    assert lease is not None
    assert lease.token == 2
    assert leases.take("t") is None  # and now held by this one, which is alive


def _stalled_after(ledger, read, meanwhile):
    """Make the next take of ``ledger``'s leases stall right after its statement starting with
    ``read``, while ``meanwhile()`` runs (another run of this process: the same holder);
    its outcome goes into the list returned."""
    rows = ledger._rows
    ran = []

    def stalled(sql, params=()):
        found = rows(sql, params)
        if sql.startswith(read) and ledger._rows is stalled:
            ledger._rows = rows  # the other run takes the usual way
            ran.append(meanwhile())
        return found

    ledger._rows = stalled
    return ran


def _dead_holder() -> str:
    """A holder on this machine whose process no longer exists."""
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    return f"{HOLDER.rpartition(':')[0]}:{ended.pid}"


@pytest.mark.parametrize("gives_back", [False, True], ids=["held", "given back"])
def test_a_taking_stalled_after_its_token_read_never_shares_a_token(sqlite, gives_back):
    """A run that stalls (the GIL, a paused VM) between reading the thread's token and its
    upsert, while another run of the same process takes the thread (and gives it back, or
    not), does not take it with the other's token: its upsert takes only from the token it
    read. Both holding one token would let the stale run's writes pass the fence. It reads
    again: a lease given back meanwhile is taken with the next token, a held one is busy."""
    leases = sqlite.thread_leases(ttl=30)
    leases.release(leases.take("t"))  # token 1, free

    def other_run():
        lease = leases.take("t")
        if gives_back:
            leases.release(lease)
        return lease

    ran = _stalled_after(sqlite, "SELECT token", other_run)
    stale = leases.take("t")
    assert ran[0] is not None
    assert ran[0].token == 2
    if gives_back:
        assert stale is not None
        assert stale.token == 3
        assert not ran[0].recheck()
    else:
        assert stale is None
        assert ran[0].recheck()  # still the other run's


def test_a_taking_from_the_dead_stalled_after_its_read_never_shares_a_token(sqlite):
    """Two runs find the thread's holder dead; the one that stalled after reading it does not
    take the lease the other took from the dead meanwhile (its update is conditioned on the
    token it saw, and its rowcount read)."""
    leases = sqlite.thread_leases(ttl=300)
    assert leases.take("t") is not None
    sqlite._run("UPDATE turnkit_thread_leases SET holder = ?", (_dead_holder(),))
    ran = _stalled_after(sqlite, "SELECT holder, token, machine", lambda: leases.take("t"))
    stale = leases.take("t")
    assert ran[0] is not None
    assert ran[0].token == 2
    assert stale is None
    assert ran[0].recheck()
    assert leases.holder("t") == f"{HOLDER}#2"


def test_thread_leases_behind_a_pooler_take_in_one_statement_on_postgres(postgres):
    """Behind a pooler, PostgreSQL's lease rows are taken with ``RETURNING`` (one round trip;
    it holds nothing there), SQLite's without (it would keep the file's write lock)."""
    from turnkit.ledger.leases import POSTGRES_NOW, ThreadLeases

    url = postgres[0]
    ledger = open_ledger(url + ("&" if "?" in url else "?") + "pooler=transaction")
    try:
        leases = ledger.thread_leases(ttl=30)
        assert isinstance(leases, ThreadLeases)
        assert POSTGRES_NOW in leases._take
        assert leases._take.endswith("RETURNING token")
        lease = leases.take("t")
        assert lease is not None
        assert leases.take("t") is None
        ledger._run("UPDATE turnkit_thread_leases SET holder = ?", (_dead_holder(),))
        taken = leases.take("t")  # from a dead holder: its token seen + 1, by the rowcount
        assert taken is not None
        assert taken.token == lease.token + 1
        leases.release(taken)
    finally:
        ledger.close()


def test_a_sqlite_lease_taken_leaves_the_write_lock_before_it_returns(tmp_path, monkeypatch):
    """Taking a lease (and taking one from a dead holder) commits when SQLite hands control back
    to Python: another writer finds the file free at that moment (a ``RETURNING`` statement
    kept the lock until its rows were read, across the wait for the GIL). Asking for a held
    lease writes nothing."""
    from _write_lock import probing

    path = str(tmp_path / "leases.sqlite")
    writes = ("INSERT INTO turnkit_thread_leases", "UPDATE turnkit_thread_leases SET token")
    with probing(path, monkeypatch, writes) as found:
        ledger = open_ledger(path)
        try:
            leases = ledger.thread_leases(ttl=30)
            first = leases.take("t")
            assert first is not None
            assert first.token == 1
            assert leases.take("t") is None  # held: read, and nothing written
            ledger._run("UPDATE turnkit_thread_leases SET holder = ?", (_dead_holder(),))
            taken = leases.take("t")
            assert taken is not None
            assert taken.token == 2
        finally:
            ledger.close()
    assert found == ["free"] * 2  # the two takings; the busy ask took no write lock
