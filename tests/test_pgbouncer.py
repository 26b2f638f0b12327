"""PostgreSQL storage behind PgBouncer in transaction mode (``pooler=transaction`` in the URL).

A pooler in transaction mode hands each transaction whatever server connection is free, so
nothing may live in a session: prepared statements (PgBouncer 1.18, Debian 12's, keeps none),
session advisory locks, LISTEN. Each test gets a fresh database on the test server, reached
through one ``pgbouncer`` started for the session (``tests/_pgbouncer.py``). Skipped without
``TURNKIT_TEST_POSTGRES_URL``; with it, a missing ``pgbouncer`` fails (``.ci/run`` installs it).

Reaches ``turnkit.ledger.urls``, ``turnkit.ledger.leases`` and ``turnkit.ledger.postgres`` directly:
it tests how a ``pooler=transaction`` URL is read and which leases it gets, which no public name
exposes.
"""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import HumanMessage
from langgraph.types import Command

from _shop import Shop, prices
from _spawn import SPAWN
from test_cli import run
from turnkit import Caller, Executor, Registry, StorageError, open_ledger
from turnkit.graph import TurnContext, build_turn_graph
from turnkit.ledger.urls import postgres_target
from turnkit.storage import open_async_storage, open_storage
from turnkit.testing import ScriptedModel

pytestmark = pytest.mark.slow  # a pgbouncer process and a database per test

ALICE = TurnContext(caller=Caller.session("alice"))
CONFIG = {"configurable": {"thread_id": "bounced-thread"}}
SET_PRICES = {"tool_calls": [{"name": "shop_set_prices", "args": prices("TEA-0001")}]}


@pytest.fixture
def url(pgbouncer, database) -> str:
    """The fresh database through PgBouncer, with the option that says so."""
    return f"{pgbouncer.url(database)}?pooler=transaction"


def test_sync_storage_opens_and_works_behind_pgbouncer(url):
    with open_storage(url) as storage:
        for round_ in range(8):  # past the ledger's default prepare threshold (5)
            storage.ledger.set_setting("max_rounds", round_)
            assert storage.ledger.settings() == {"max_rounds": round_}
            assert storage.checkpointer.get_tuple(CONFIG) is None


async def test_async_storage_opens_and_works_behind_pgbouncer(url):
    async with open_async_storage(url) as storage:
        for round_ in range(8):
            await storage.ledger.aset_setting("max_rounds", round_)
            assert await storage.ledger.asettings() == {"max_rounds": round_}
            assert await storage.checkpointer.aget_tuple(CONFIG) is None


def _open_at_once(url: str, barrier, mode: str) -> None:
    """A spawned process: wait for the other, then open the storage and read through it."""
    barrier.wait(timeout=60)
    if mode == "async":

        async def run() -> None:
            async with open_async_storage(url) as storage:
                await storage.checkpointer.aget_tuple(CONFIG)
                assert await storage.ledger.asettings() == {}

        asyncio.run(run())
        return
    with open_storage(url) as storage:
        storage.checkpointer.get_tuple(CONFIG)
        assert storage.ledger.settings() == {}


@pytest.mark.parametrize("modes", [("sync", "sync"), ("sync", "async")])
def test_two_processes_opening_one_fresh_database_at_once_both_succeed(url, modes):
    barrier = SPAWN.Barrier(len(modes))
    processes = [SPAWN.Process(target=_open_at_once, args=(url, barrier, m)) for m in modes]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [p.exitcode for p in processes] == [0, 0]


def _graph(storage, shop: Shop, rights, *steps):
    executor = Executor(Registry([shop]), ledger=storage.ledger, permissions=rights)
    model = ScriptedModel(list(steps))
    return build_turn_graph(executor, model, checkpointer=storage.checkpointer), executor, model


def test_a_held_write_decided_out_of_band_runs_once_on_invoke(url, shop, rights):
    with open_storage(url) as storage:
        storage.ledger.set_setting("api_session_write_modules", ["shop"])
        graph, executor, model = _graph(storage, shop, rights, SET_PRICES)
        paused = graph.invoke({"messages": [HumanMessage("cheaper tea")]}, CONFIG, context=ALICE)
        executor.close()
        model.assert_done()
    (held,) = paused["__interrupt__"][0].value["confirmations"]
    assert shop.writes() == []

    with open_storage(url) as storage:  # elsewhere: Alice approves in the inbox
        inbox = Executor(Registry([Shop(shop.log)]), ledger=storage.ledger, permissions=rights)
        answer = inbox.confirm(held["confirmation_id"], Caller.session("alice"), "approve")
        assert answer["status"] == "ok"
        inbox.close()
    assert len(shop.writes()) == 1

    with open_storage(url) as storage:  # the paused run resumes: no second write
        graph, executor, model = _graph(storage, Shop(shop.log), rights, "Prices updated.")
        done = graph.invoke(
            Command(resume={held["confirmation_id"]: "approve"}), CONFIG, context=ALICE
        )
        executor.close()
        model.assert_done()
        assert graph.get_state(CONFIG).next == ()
    assert done["messages"][-1].content == "Prices updated."
    assert len(shop.writes()) == 1


async def test_a_held_write_decided_out_of_band_runs_once_on_ainvoke(url, shop, rights):
    async with open_async_storage(url) as storage:
        await storage.ledger.aset_setting("api_session_write_modules", ["shop"])
        graph, executor, model = _graph(storage, shop, rights, SET_PRICES)
        paused = await graph.ainvoke({"messages": [HumanMessage("tea")]}, CONFIG, context=ALICE)
        await asyncio.to_thread(executor.close)
        model.assert_done()
    (held,) = paused["__interrupt__"][0].value["confirmations"]
    assert shop.writes() == []

    async with open_async_storage(url) as storage:
        inbox = Executor(Registry([Shop(shop.log)]), ledger=storage.ledger, permissions=rights)
        answer = await inbox.aconfirm(held["confirmation_id"], Caller.session("alice"), "approve")
        assert answer["status"] == "ok"
        await asyncio.to_thread(inbox.close)
    assert len(shop.writes()) == 1

    async with open_async_storage(url) as storage:
        graph, executor, model = _graph(storage, Shop(shop.log), rights, "Prices updated.")
        resume = Command(resume={held["confirmation_id"]: "approve"})
        done = await graph.ainvoke(resume, CONFIG, context=ALICE)
        await asyncio.to_thread(executor.close)
        model.assert_done()
        assert (await graph.aget_state(CONFIG)).next == ()
    assert done["messages"][-1].content == "Prices updated."
    assert len(shop.writes()) == 1


def test_api_keys_work_behind_pgbouncer(url):
    ledger = open_ledger(url)
    try:
        keys = ledger.keys
        for _ in range(6):  # past the default prepare threshold
            key, secret = keys.create("alice", {"shop.products:read"})
            assert keys.by_secret(secret) == key
            assert keys.get(key.id) == key
        assert keys.revoke(key.id) is True
        assert keys.revoke(key.id) is False
        assert "was revoked" in keys.by_secret(secret).refused(now=key.created_at)
        assert len(keys.list()) == 6
    finally:
        ledger.close()


def test_the_options_are_taken_out_of_the_url_before_connecting():
    plain = "postgresql://u@h:5/db?sslmode=disable&options=-csearch_path%3Dx"
    assert postgres_target(plain).conninfo == plain
    target = postgres_target("postgresql://u@h:5/db?pooler=transaction&sslmode=disable&pool_size=3")
    assert (target.conninfo, target.pooler, target.pool_size) == (
        "postgresql://u@h:5/db?sslmode=disable",
        True,
        3,
    )
    assert postgres_target("postgresql://u@h/db?pooler=transaction").conninfo == (
        "postgresql://u@h/db"
    )


@pytest.mark.parametrize(
    ("option", "said"),
    [
        ("pooler=session", "pooler='session' is not an option; write pooler=transaction"),
        ("pooler=true", "pooler='true' is not an option; write pooler=transaction"),
        ("pool_size=0", "pool_size='0' is not a number of connections"),
        ("pool_size=many", "pool_size='many' is not a number of connections"),
    ],
)
def test_a_bad_option_is_refused_at_once_and_says_what_to_write(option, said):
    url = f"postgresql://u:hunter2@127.0.0.1:1/db?{option}"
    for opener in (open_storage, open_async_storage, open_ledger):
        with pytest.raises(StorageError, match=said) as refused:
            opener(url)
        assert "hunter2" not in str(refused.value)


@pytest.mark.parametrize("opener", ["sync", "async"])
def test_pool_size_bounds_both_pools(url, opener):
    sized = f"{url}&pool_size=3"
    if opener == "sync":
        with open_storage(sized) as storage:
            assert [storage.checkpointer.conn.max_size, storage.ledger._pool.max_size] == [3, 3]
        return

    async def run() -> None:
        async with open_async_storage(sized) as storage:
            assert [storage.checkpointer.conn.max_size, storage.ledger._pool.max_size] == [3, 3]

    asyncio.run(run())


def _use_without_the_option(url: str) -> None:
    with open_storage(url) as storage:  # may break already while it sets up
        for round_ in range(8):
            storage.ledger.set_setting("max_rounds", round_)
            storage.checkpointer.get_tuple(CONFIG)
            storage.ledger.settings()


def test_without_the_option_a_broken_prepared_statement_says_to_add_it(pgbouncer, database):
    """Why the option exists: psycopg prepares statements on a connection, PgBouncer 1.18 then
    runs the next transaction of another client on that server connection. The error says so."""
    with pytest.raises(StorageError, match="prepared statement") as broken:
        _use_without_the_option(pgbouncer.url(database))
    assert f"write '{pgbouncer.url(database)}?pooler=transaction'" in str(broken.value)
    cause = type(broken.value.__cause__).__name__
    assert cause in {"DuplicatePreparedStatement", "InvalidSqlStatementName"}


def test_the_cli_behind_pgbouncer_without_the_option_says_to_add_it(pgbouncer, database,
                                                                    tmp_path):  # fmt: skip
    """A command on a URL without ``pooler=transaction`` breaks (on its first run or a later
    one: it depends on which server connection PgBouncer hands out); when it does, it says the
    URL to write, in a line, with status 2, and no traceback."""
    url = pgbouncer.url(database)
    runs = [run("keys", "list", "--db", url, cwd=tmp_path) for _ in range(6)]
    broken = [done for done in runs if done.returncode != 0]
    assert broken, "six commands ran without a prepared statement breaking"
    for done in broken:
        said = done.stdout + done.stderr
        assert done.returncode == 2, said
        assert f"write '{url}?pooler=transaction'" in " ".join(said.split())
        assert "Traceback" not in said


def test_behind_the_pooler_leases_are_rows_and_exclude_across_ledgers(url):
    from turnkit.ledger.leases import ThreadLeases
    from turnkit.ledger.postgres import PostgresLeases

    first, second = open_ledger(url), open_ledger(url)
    try:
        leases = first.thread_leases(ttl=30)
        assert type(leases) is ThreadLeases
        assert not isinstance(leases, PostgresLeases)
        held = leases.take("t")
        assert held is not None
        assert held.vouched()
        assert second.thread_leases().take("t") is None
        assert second.thread_leases().holder("t") == held.name
        leases.release(held)
        assert second.thread_leases().take("t") is not None
    finally:
        first.close()
        second.close()


def test_more_turns_at_once_than_the_pooler_has_server_connections_all_finish(url):
    """A lease held as an open transaction would pin a server connection for the whole turn:
    with more turns at once than PgBouncer's pool (20), none would find one for its checkpoint.
    Behind the pooler a lease is a row, so all 30 turns finish."""
    import time as clock

    def slow(messages, tools):
        clock.sleep(0.5)  # the model thinks while the turn holds its thread
        return "Done."

    async def main():
        async with open_async_storage(url) as storage:
            executor = Executor(Registry([]), ledger=storage.ledger)
            graph = build_turn_graph(
                executor, ScriptedModel([slow] * 30), checkpointer=storage.checkpointer
            )
            runs = [
                graph.ainvoke(
                    {"messages": [HumanMessage("hi")]},
                    {"configurable": {"thread_id": f"crowd-{n}"}},
                    context=ALICE,
                )
                for n in range(30)
            ]
            return await asyncio.wait_for(asyncio.gather(*runs), 120)

    outs = asyncio.run(main())
    assert [out["messages"][-1].content for out in outs] == ["Done."] * 30
