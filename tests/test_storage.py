"""``open_storage`` / ``open_async_storage``: one URL, a checkpointer and a ledger on one database.

Every turn test runs on a SQLite file and on a fresh PostgreSQL schema (``ledger_url``). A turn
stops at its interrupt; a brand-new storage, executor and graph on the same URL resume it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sqlite3
import sys
import threading
import time
import traceback
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.types import Command

from _shop import Shop, prices
from turnkit import Caller, Executor, Registry, StorageError, open_ledger
from turnkit.graph import TurnContext, build_turn_graph
from turnkit.storage import AsyncStorage, Storage, open_async_storage, open_storage
from turnkit.testing import ScriptedModel

ALICE = TurnContext(caller=Caller.session("alice"))
CONFIG = {"configurable": {"thread_id": "storage-thread"}}
SET_PRICES = {"tool_calls": [{"name": "shop_set_prices", "args": prices("TEA-0001")}]}
CHECKPOINT_TABLES = {"sqlite": {"checkpoints", "writes"}, "postgres": {"checkpoints",
                     "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations"}}  # fmt: skip
LEDGER_TABLES = {"turnkit_confirmations", "turnkit_idempotency", "turnkit_rate_usage",
                 "turnkit_settings", "turnkit_audit"}  # fmt: skip


def backend(url: str) -> str:
    return "postgres" if url.startswith("postgres") else "sqlite"


@contextmanager
def turn(url: str, shop: Shop, rights, *steps):
    """A new storage, executor and graph on ``url``; all closed afterwards."""
    with open_storage(url) as storage:
        executor = Executor(Registry([shop]), ledger=storage.ledger, permissions=rights)
        model = ScriptedModel(list(steps))
        try:
            yield build_turn_graph(executor, model, checkpointer=storage.checkpointer), model
        finally:
            executor.close()


@asynccontextmanager
async def aturn(url: str, shop: Shop, rights, *steps):
    """As ``turn``, on the async savers."""
    async with open_async_storage(url) as storage:
        executor = Executor(Registry([shop]), ledger=storage.ledger, permissions=rights)
        model = ScriptedModel(list(steps))
        try:
            yield build_turn_graph(executor, model, checkpointer=storage.checkpointer), model
        finally:
            await asyncio.to_thread(executor.close)


def allow_agent_writes(url: str) -> None:
    with open_storage(url) as storage:
        storage.ledger.set_setting("api_session_write_modules", ["shop"])


def held_of(result) -> tuple[str, str]:
    """The held call's confirmation id and the id of its tool message."""
    (interrupt,) = result["__interrupt__"]
    (held,) = interrupt.value["confirmations"]
    message = next(
        m for m in result["messages"] if getattr(m, "tool_call_id", "") == held["tool_call_id"]
    )
    return held["confirmation_id"], message.id


def assert_finished(messages, held_message_id: str) -> None:
    kinds = [type(m) for m in messages]
    assert kinds == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    assert messages[2].id == held_message_id
    assert messages[2].tool_call_id == messages[1].tool_calls[0]["id"]
    assert json.loads(messages[2].content) == {
        "executed": True,
        "status": "ok",
        "result": {"updated": 1},
    }
    assert messages[3].content == "Prices updated."


def test_a_turn_held_in_one_storage_resumes_in_a_new_one(ledger_url, shop, rights):
    allow_agent_writes(ledger_url)
    with turn(ledger_url, shop, rights, SET_PRICES) as (graph, model):
        first = graph.invoke({"messages": [HumanMessage("cheaper tea")]}, CONFIG, context=ALICE)
        model.assert_done()
    confirmation_id, message_id = held_of(first)
    assert shop.writes() == []

    with turn(ledger_url, Shop(shop.log), rights, "Prices updated.") as (graph, model):
        final = graph.invoke(Command(resume={confirmation_id: "approve"}), CONFIG, context=ALICE)
        model.assert_done()
        assert graph.get_state(CONFIG).next == ()
    assert len(shop.writes()) == 1
    assert_finished(final["messages"], message_id)


async def test_an_async_turn_held_in_one_storage_resumes_in_a_new_one(ledger_url, shop, rights):
    await asyncio.to_thread(allow_agent_writes, ledger_url)
    async with aturn(ledger_url, shop, rights, SET_PRICES) as (graph, model):
        first = await graph.ainvoke({"messages": [HumanMessage("tea")]}, CONFIG, context=ALICE)
        model.assert_done()
    confirmation_id, message_id = held_of(first)
    assert shop.writes() == []

    async with aturn(ledger_url, Shop(shop.log), rights, "Prices updated.") as (graph, model):
        resume = Command(resume={confirmation_id: "approve"})
        final = await graph.ainvoke(resume, CONFIG, context=ALICE)
        model.assert_done()
        assert (await graph.aget_state(CONFIG)).next == ()
    assert len(shop.writes()) == 1
    assert_finished(final["messages"], message_id)


async def test_sync_and_async_storage_read_the_same_threads(ledger_url, shop, rights):
    await asyncio.to_thread(allow_agent_writes, ledger_url)

    def start() -> str:
        with turn(ledger_url, shop, rights, SET_PRICES) as (graph, _):
            first = graph.invoke({"messages": [HumanMessage("tea")]}, CONFIG, context=ALICE)
        return held_of(first)[0]

    confirmation_id = await asyncio.to_thread(start)
    async with aturn(ledger_url, Shop(shop.log), rights, "Prices updated.") as (graph, _):
        await graph.ainvoke(Command(resume={confirmation_id: "approve"}), CONFIG, context=ALICE)
    assert len(shop.writes()) == 1


def tables_of(url: str) -> set[str]:
    """The tables the database at ``url`` holds (for PostgreSQL: in the URL's schema)."""
    if backend(url) == "sqlite":
        with sqlite3.connect(url) as conn:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        conn.close()
        return {name for (name,) in rows}
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
    return {name for (name,) in rows}


def count(url: str, table: str) -> int:
    if backend(url) == "sqlite":
        conn = sqlite3.connect(url)
        try:
            return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


@pytest.mark.parametrize("opener", ["sync", "async"])
def test_the_checkpointer_and_the_ledger_share_one_database(ledger_url, shop, rights, opener):
    allow_agent_writes(ledger_url)
    if opener == "sync":
        with turn(ledger_url, shop, rights, SET_PRICES) as (graph, _):
            graph.invoke({"messages": [HumanMessage("tea")]}, CONFIG, context=ALICE)
    else:

        async def run() -> None:
            async with aturn(ledger_url, shop, rights, SET_PRICES) as (graph, _):
                await graph.ainvoke({"messages": [HumanMessage("tea")]}, CONFIG, context=ALICE)

        asyncio.run(run())
    tables = tables_of(ledger_url)
    assert CHECKPOINT_TABLES[backend(ledger_url)] | LEDGER_TABLES <= tables
    assert count(ledger_url, "checkpoints") > 0
    assert count(ledger_url, "turnkit_confirmations") == 1
    if backend(ledger_url) == "sqlite":  # one file, no other database beside it
        assert sorted(p.name for p in Path(ledger_url).parent.glob("*.sqlite")) == ["ledger.sqlite"]


def test_sqlite_urls_and_paths_open_the_same_file(tmp_path):
    path = tmp_path / "one.sqlite"
    for url in (path, str(path), f"sqlite:///{path}"):
        with open_storage(url) as storage:
            storage.ledger.set_setting("max_rounds", 3)
            assert storage.url == os.fspath(url)
    assert CHECKPOINT_TABLES["sqlite"] | LEDGER_TABLES <= tables_of(str(path))
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm"))) == [
        "one.sqlite"
    ]


def test_first_opens_racing_on_one_fresh_database_all_succeed(ledger_url):
    """Several processes starting at once each set the database up; none may fail for it."""
    barrier, failures, opened = threading.Barrier(4, timeout=30), [], []

    async def open_async() -> None:
        async with open_async_storage(ledger_url) as storage:
            await storage.checkpointer.aget_tuple(CONFIG)
            opened.append(await storage.ledger.asettings())

    def open_one(index: int) -> None:
        try:
            barrier.wait()
            if index % 2:
                asyncio.run(open_async())
                return
            with open_storage(ledger_url) as storage:
                storage.checkpointer.get_tuple(CONFIG)
                opened.append(storage.ledger.settings())
        except Exception:  # reported below
            failures.append(traceback.format_exc())

    threads = [threading.Thread(target=open_one, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []
    assert opened == [{}] * 4


async def test_opening_async_sqlite_storage_connects_off_the_event_loop(tmp_path, monkeypatch):
    loop_thread, connecting = threading.get_ident(), []
    connect = sqlite3.connect

    def spy(*args, **kwargs):
        connecting.append(threading.get_ident())
        return connect(*args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", spy)
    async with open_async_storage(tmp_path / "ledger.sqlite") as storage:
        await storage.ledger.asettings()
        await storage.checkpointer.aget_tuple(CONFIG)
    assert len(connecting) >= 2  # the ledger's and the saver's connections
    assert loop_thread not in connecting


BAD_URLS = [
    "mysql://user@host/db",
    "http://example.com/db",
    "sqlite://relative.db",
    "",
    ":memory:",
    "sqlite:///:memory:",
    "file:x.db?mode=memory",
]


ACCEPTED_FORMS = (
    r"a SQLite file \(ending in \.sqlite, \.sqlite3 or \.db\), sqlite:///path, or postgresql://"
)


@pytest.mark.parametrize("url", [*BAD_URLS, "postgres:/u@h/db", "garbage", "postgresql:u@h/db"])
def test_bad_urls_are_refused_with_the_accepted_forms(url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StorageError, match=ACCEPTED_FORMS):
        open_storage(url)
    with pytest.raises(StorageError, match=ACCEPTED_FORMS):
        open_async_storage(url)
    with pytest.raises(StorageError, match=ACCEPTED_FORMS):
        open_ledger(url)
    assert list(tmp_path.iterdir()) == []  # no file named after the typo


@pytest.mark.parametrize(
    ("where", "said"),
    [
        ("missing/folder/x.sqlite", "the folder 'missing/folder' does not exist: create it first"),
        (
            "a-file.txt/x.sqlite",
            "'a-file.txt' is a file, so 'a-file.txt/x.sqlite' cannot be created",
        ),
        ("a-folder.sqlite", "'a-folder.sqlite' is a folder, not a SQLite file"),
    ],
)
def test_a_sqlite_path_that_cannot_be_opened_names_it_and_says_why(
    where, said, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file.txt").write_text("x")
    (tmp_path / "a-folder.sqlite").mkdir()
    with pytest.raises(StorageError, match=re.escape(said)):
        open_storage(where)
    with pytest.raises(StorageError, match=re.escape(said)):
        open_ledger(where)
    assert not (tmp_path / "missing").exists()


def test_a_postgres_server_that_refuses_is_named_at_once():
    url = "postgresql://nobody:hunter2@127.0.0.1:1/none"
    started = time.monotonic()
    with pytest.raises(
        StorageError,
        match=r"cannot connect to PostgreSQL at 'postgresql://nobody:\*\*\*@127.0.0.1:1/none'",
    ) as refused:
        open_storage(url)
    assert "hunter2" not in str(refused.value)
    with pytest.raises(StorageError, match="Is the server running"):
        open_ledger(url)
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    "url",
    [
        "mysql://admin:hunter2@db.example.com/app",
        "postgres:/admin:hunter2@db.example.com/app",
        "postgresql//admin:hunter2@db.example.com/app",
        "admin:hunter2@db.example.com",
        "pg://db.example.com/app?password=hunter2",
        "postgresql://admin:hunter2/x@y@db.example.com/app",  # '/' and '@' in the password
    ],
)
def test_a_refused_url_does_not_echo_its_password(url):
    with pytest.raises(StorageError) as refused:
        open_storage(url)
    assert "hunter2" not in str(refused.value)
    assert "db.example.com" in str(refused.value)
    assert "admin" in str(refused.value) or "password=***" in str(refused.value)  # who, not how


def test_a_refused_url_does_not_echo_its_password_in_a_repr():
    assert "hunter2" not in repr(Storage(None, None, "postgresql://a:hunter2@h/db", lambda: None))  # type: ignore[arg-type]


@pytest.mark.parametrize("missing", ["psycopg_pool", "langgraph.checkpoint.postgres"])
def test_a_missing_postgres_extra_says_how_to_install_it(monkeypatch, missing):
    monkeypatch.setitem(sys.modules, missing, None)
    with pytest.raises(ImportError, match=r"pip install 'turnkit\[postgres\]'"):
        open_storage("postgresql://nobody@127.0.0.1:1/none")
    with pytest.raises(ImportError, match=r"pip install 'turnkit\[postgres\]'"):
        asyncio.run(_open_and_close("postgres://nobody@127.0.0.1:1/none"))


async def _open_and_close(url: str) -> None:
    storage = await open_async_storage(url)
    await storage.aclose()


def open_files(path: Path) -> list[str]:
    """This process's open file descriptors on the SQLite file and its WAL/SHM companions."""
    fds = Path("/proc/self/fd")
    found = []
    for fd in fds.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed while listing (the listing's own descriptor)
            continue
        if target.startswith(str(path)):
            found.append(target)
    return found


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_close_releases_every_sqlite_connection(tmp_path, shop, rights):
    path = tmp_path / "ledger.sqlite"
    allow_agent_writes(str(path))
    assert open_files(path) == []
    storage = open_storage(path)
    executor = Executor(Registry([shop]), ledger=storage.ledger, permissions=rights)
    graph = build_turn_graph(
        executor, ScriptedModel([SET_PRICES]), checkpointer=storage.checkpointer
    )
    graph.invoke({"messages": [HumanMessage("tea")]}, CONFIG, context=ALICE)  # ledger threads too
    assert open_files(path) != []
    storage.close()
    assert open_files(path) == []
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        storage.checkpointer.get_tuple(CONFIG)
    storage.close()  # again: nothing left to do
    executor.close()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
async def test_aclose_releases_every_async_sqlite_connection(tmp_path):
    path = tmp_path / "ledger.sqlite"
    storage = await open_async_storage(path)
    assert isinstance(storage, AsyncStorage)
    await storage.ledger.asettings()
    await storage.checkpointer.aget_tuple(CONFIG)
    assert open_files(path) != []
    await storage.aclose()
    assert open_files(path) == []
    await storage.aclose()


def _pools(storage) -> list:
    return [storage.checkpointer.conn, storage.ledger._pool]


@pytest.mark.parametrize("ledger_url", ["postgres"], indirect=True)
@pytest.mark.parametrize("opener", ["sync", "async"])
def test_close_releases_every_postgres_connection(ledger_url, opener):
    from psycopg_pool import PoolClosed

    if opener == "sync":
        storage = open_storage(ledger_url)
        storage.checkpointer.get_tuple(CONFIG)
        assert [pool.closed for pool in _pools(storage)] == [False, False]
        storage.close()
        storage.close()
        assert [pool.closed for pool in _pools(storage)] == [True, True]
        with pytest.raises(PoolClosed):
            storage.checkpointer.get_tuple(CONFIG)
        return

    async def run() -> None:
        async with open_async_storage(ledger_url) as storage:
            await storage.checkpointer.aget_tuple(CONFIG)
            assert [pool.closed for pool in _pools(storage)] == [False, False]
        assert [pool.closed for pool in _pools(storage)] == [True, True]
        with pytest.raises(PoolClosed):
            await storage.checkpointer.aget_tuple(CONFIG)

    asyncio.run(run())


def test_a_path_under_the_home_folder_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    ledger = open_ledger("~/ledger.sqlite")
    try:
        assert (tmp_path / "ledger.sqlite").exists()
    finally:
        ledger.close()


def modes(path: Path) -> dict[str, int]:
    """The permission bits of the SQLite file at ``path`` and of its -wal and -shm files."""
    found = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
    return {file.name: file.stat().st_mode & 0o777 for file in found if file.exists()}


SAVED = {"configurable": {"thread_id": "modes", "checkpoint_ns": ""}}


async def async_modes(path: Path) -> dict[str, int]:
    async with open_async_storage(path) as storage:
        await storage.checkpointer.aput(SAVED, empty_checkpoint(), {}, {})
        return modes(path)


@pytest.mark.parametrize("opened", ["ledger", "storage", "async storage"])
def test_a_sqlite_file_turnkit_creates_is_its_owners_only(tmp_path, opened):
    path = tmp_path / "new.sqlite"
    if opened == "async storage":
        seen = asyncio.run(async_modes(path))
    elif opened == "storage":
        with open_storage(path) as storage:
            storage.checkpointer.put(SAVED, empty_checkpoint(), {}, {})
            storage.ledger.set_setting("confirm_batch_over", 20)
            seen = modes(path)
    else:
        ledger = open_ledger(path)
        try:
            ledger.set_setting("confirm_batch_over", 20)
            seen = modes(path)
        finally:
            ledger.close()
    assert seen == {"new.sqlite": 0o600, "new.sqlite-wal": 0o600, "new.sqlite-shm": 0o600}


def test_an_existing_sqlite_file_keeps_its_mode(tmp_path):
    path = tmp_path / "shared.sqlite"
    path.touch()
    path.chmod(0o640)  # the operator's choice: a group that backs it up
    with open_storage(path) as storage:
        storage.ledger.set_setting("confirm_batch_over", 20)
        assert modes(path)["shared.sqlite"] == 0o640
