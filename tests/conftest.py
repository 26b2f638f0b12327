"""Shared fixtures: ledgers on every backend, a small shop module, callers and an executor.

The ``ledger_url`` fixture runs a test once on a SQLite file and once on PostgreSQL. PostgreSQL
comes from ``TURNKIT_TEST_POSTGRES_URL`` (``.ci/run`` starts a server and sets it); without it the
PostgreSQL half is skipped locally and **fails** in CI (``CI`` set), where it is mandatory.

An ERROR (or worse) logged by ``turnkit`` or ``turnkit.*`` fails the test that was running when it
was logged (its setup, body or teardown, in any thread of this process), unless the test declared
it: ``expect_errors(pattern, ...)``, each of which must then be logged. One logged while no test
runs (a thread outliving its test, a module fixture's teardown) fails the run, named in the
summary with the test that ran last. Logs of subprocesses are not seen.

Under pytest-xdist (``-n``) each worker keeps its own records; those logged while no test ran are
handed to the controller when the worker ends, which fails the run and names them as above.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from _agent_runs import AGENT_MODES, AgentRuns
from _doors import Gate, gate_executor
from _modes import RUN_MODES, Turns
from _openai_server import OpenAIServer
from _otel import Listening, installed
from _pgbouncer import PgBouncer
from _shop import Shop
from turnkit import Caller, Executor, Ledger, Registry, Settings, StaticPermissions, open_ledger

POSTGRES_ENV = "TURNKIT_TEST_POSTGRES_URL"

# The tests run with the terminal size of no terminal, as a serial run does. pytest-xdist's
# controller imports readline, which exports LINES and COLUMNS (80x24 without a terminal), and its
# workers inherit them: rich's consoles made at import (turnkit.cli's) would then keep 80 columns
# whatever COLUMNS a test gives typer's runner.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)


def postgres_url() -> str:
    """A fresh PostgreSQL schema's URL (skipped locally without a server; mandatory in CI)."""
    base = os.environ.get(POSTGRES_ENV)
    if not base:
        if os.environ.get("CI"):
            pytest.fail(f"{POSTGRES_ENV} is not set: CI must run the PostgreSQL tests")
        pytest.skip(f"PostgreSQL tests need {POSTGRES_ENV} (bash .ci/run sets it)")
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in base else "?"
    return f"{base}{separator}options=-csearch_path%3D{schema}"


class ErrorLogs(logging.Handler):
    """Every record at ERROR or above from turnkit's loggers (``turnkit``, ``turnkit.*``), kept
    for the test that ran when it was logged (its setup, body and teardown, in any thread), or
    as a stray when none ran (a thread logging after its test ended)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.test: list[logging.LogRecord] | None = None
        """The records of the test running now; None between tests."""
        self.last = "(before the first test)"
        """The id of the test that ran last: strays are most likely its."""
        self.strays: list[tuple[str, str]] = []
        """``(last test, record as _said tells it)`` of records logged while no test ran: this
        process's, and under pytest-xdist's controller those the workers handed over."""

    def emit(self, record: logging.LogRecord) -> None:
        kept = self.test
        if kept is not None:
            kept.append(record)
        else:
            self.strays.append((self.last, _said(record)))


ERROR_LOGS = ErrorLogs()
logging.getLogger("turnkit").addHandler(ERROR_LOGS)
_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


def _said(record: logging.LogRecord) -> str:
    """A record as ``expect_errors`` patterns match it: logger, message and exception."""
    text = f"{record.name}: {record.getMessage()}"
    if record.exc_info and record.exc_info[1] is not None:
        error = record.exc_info[1]
        text += f" [{type(error).__name__}: {error}]"
    return text


class ExpectedErrors:
    """The ERROR records a test says it causes (``expect_errors(pattern, ...)``)."""

    def __init__(self) -> None:
        self.patterns: list[re.Pattern[str]] = []

    def __call__(self, *patterns: str) -> None:
        """Declare that turnkit logs, during this test, at least one ERROR matching each of
        ``patterns`` (``re.search`` on ``"<logger>: <message> [<exception>]"``); any other is
        still a failure."""
        self.patterns += [re.compile(pattern) for pattern in patterns]

    def problems(self, records: list[logging.LogRecord]) -> list[str]:
        """What is wrong with ``records``: unexpected ones, and expected ones never logged."""
        said = [_said(record) for record in records]
        found = [f"unexpected: {text}" for text in said
                 if not any(p.search(text) for p in self.patterns)]  # fmt: skip
        found += [f"expected, never logged: an ERROR matching {p.pattern!r}"
                  for p in self.patterns if not any(p.search(text) for text in said)]  # fmt: skip
        return found


@pytest.fixture
def expect_errors(turnkit_error_logs: ExpectedErrors) -> ExpectedErrors:
    """``expect_errors(pattern, ...)``: this test makes turnkit log those ERROR records on
    purpose (a failing handler, a failing cost function); each must happen."""
    return turnkit_error_logs


@pytest.fixture(autouse=True)
def turnkit_error_logs(request: pytest.FixtureRequest) -> Iterator[ExpectedErrors]:
    """Fails the test when turnkit logs an ERROR (or worse) during it, unless it declared it
    with ``expect_errors``. Set up before and torn down after the test's other fixtures of its
    scope, so their teardown counts too; a test that failed otherwise is not failed again."""
    expected, records = ExpectedErrors(), []
    ERROR_LOGS.test = records
    try:
        yield expected
    finally:
        ERROR_LOGS.test, ERROR_LOGS.last = None, request.node.nodeid
    reports = request.node.stash.get(_REPORTS, {})
    if any(report.failed for report in reports.values()):
        return
    problems = expected.problems(records)
    if problems:
        pytest.fail("turnkit logged ERROR records:\n" + "\n".join(problems), pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Keep each phase's report, for ``turnkit_error_logs`` to see whether the test failed."""
    report = yield
    item.stash.setdefault(_REPORTS, {})[report.when] = report
    return report


def _encodable(data: Any) -> Any:
    """``data`` with every string UTF-8 can encode (a lone surrogate written as ``\\udc80``)."""
    if isinstance(data, str):
        try:
            data.encode()
        except UnicodeEncodeError:
            return data.encode("utf-8", "backslashreplace").decode()
        return data
    if isinstance(data, dict):
        return {_encodable(key): _encodable(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return type(data)(_encodable(item) for item in data)
    return data


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(
    config: pytest.Config, report: pytest.TestReport | pytest.CollectReport
):
    """A report a pytest-xdist worker sends can hold a lone surrogate (a test's captured log of a
    handler's exception message, on purpose): execnet refuses those and the worker would crash."""
    data = yield
    return _encodable(data)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object | None) -> None:
    """pytest-xdist's controller: take the ERROR records a worker saw logged while no test ran."""
    output = getattr(node, "workeroutput", None) or {}
    ERROR_LOGS.strays += [(last, said) for last, said in output.get("turnkit_strays", [])]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """ERROR records logged while no test ran fail the run (listed in the summary); a
    pytest-xdist worker hands its own to the controller (``pytest_testnodedown``)."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["turnkit_strays"] = [list(stray) for stray in ERROR_LOGS.strays]
    if ERROR_LOGS.strays and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """One line per reason the run skipped tests, with how many (not one line per test); the
    ERROR records turnkit logged while no test ran, with the test that ran last."""
    for last, said in ERROR_LOGS.strays:
        terminalreporter.write_line(f"turnkit logged an ERROR after {last} ended: {said}")
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    for reason, count in sorted(reasons.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"{count} skipped: {reason}")


@pytest.fixture(params=["sqlite", "postgres"])
def ledger_url(request, tmp_path) -> str:
    """A URL of an empty ledger database: a SQLite file, then a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return str(tmp_path / "ledger.sqlite")
    return postgres_url()


@pytest.fixture
def ledger(ledger_url) -> Iterator[Ledger]:
    opened = open_ledger(ledger_url)
    yield opened
    opened.close()


@pytest.fixture
def rights() -> StaticPermissions:
    """Alice may view and manage the shop; Bob may only view; Root may decide for anyone."""
    return StaticPermissions(
        {
            "alice": {"shop.view", "shop.manage"},
            "bob": {"shop.view"},
            "root": {"shop.view", "system.confirm_any"},
        }
    )


@pytest.fixture
def shop(tmp_path) -> Shop:
    return Shop(tmp_path / "writes.log")


@pytest.fixture
def clock():
    """A clock the test moves by hand."""

    class Clock:
        now = 1_800_000_000.0

        def __call__(self) -> float:
            return self.now

    return Clock()


@pytest.fixture
def executor(ledger, shop, rights, clock) -> Iterator[Executor]:
    ex = Executor(
        Registry([shop]),
        ledger=ledger,
        permissions=rights,
        settings=Settings(handler_timeout=2.0),
        clock=clock,
    )
    yield ex
    ex.close()


@pytest.fixture
def alice() -> Caller:
    """A signed-in user: the agent acts for her."""
    return Caller.session("alice")


@pytest.fixture
def key() -> Caller:
    """Alice's API key with every shop scope."""
    return Caller.key(
        "key-1", user_id="alice", scopes={"shop.products:read", "shop.products:write"}
    )


@pytest.fixture
def strict_checkpoints(monkeypatch) -> None:
    """Every checkpointer made in the test uses LangGraph's strict msgpack serializer."""
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    strict = JsonPlusSerializer(allowed_msgpack_modules=None)
    monkeypatch.setattr(BaseCheckpointSaver, "serde", strict)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def backend(request, tmp_path) -> Iterator[tuple[str, Ledger]]:
    """``(backend, ledger)``: ``memory`` and its ledger (a SQLite file), or a storage URL and a
    ledger on that database."""
    if request.param == "memory":
        url, ledger = "memory", open_ledger(str(tmp_path / "ledger.sqlite"))
    else:
        url = str(tmp_path / "turns.sqlite") if request.param == "sqlite" else postgres_url()
        ledger = open_ledger(url)
    yield url, ledger
    ledger.close()


def _shop_on(ledger: Ledger, shop, rights, clock) -> Callable[[Any], Executor]:
    """Let the agent act in the shop on ``ledger``; make the shop's executor on a given ledger."""
    ledger.set_setting("api_session_write_modules", ["shop"])

    def executor(on: Any) -> Executor:
        settings = Settings(handler_timeout=2.0)
        return Executor(
            Registry([shop]), ledger=on, permissions=rights, settings=settings, clock=clock
        )

    return executor


@pytest.fixture
def log(shop) -> str:
    """The shop's write log, as a path a spawned worker opens."""
    return str(shop.log)


@pytest.fixture
def agent_may_write(ledger_url) -> None:
    """Alice's session may write in the shop (the write is then held for her confirmation)."""
    from turnkit.storage import open_storage

    with open_storage(ledger_url) as storage:
        storage.ledger.set_setting("api_session_write_modules", ["shop"])


@pytest.fixture(params=RUN_MODES)
def turns(request, backend, strict_checkpoints, shop, rights, clock) -> Turns:
    """A thread to run turns on: every run mode x every backend, strict checkpoints; the agent
    may act in the shop (a session's writes are held)."""
    url, ledger = backend
    executor = _shop_on(ledger, shop, rights, clock)
    return Turns(url, request.param, executor, ledger=ledger, checks=executor(ledger))


@pytest.fixture(params=AGENT_MODES)
def agents(request, backend, strict_checkpoints, shop, rights, clock) -> AgentRuns:
    """A ``create_agent`` thread governed by ``TurnkitMiddleware``: every run mode x every
    backend, strict checkpoints; the agent may act in the shop (a session's writes are held)."""
    url, ledger = backend
    return AgentRuns(url, request.param, _shop_on(ledger, shop, rights, clock), ledger=ledger)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    """The scripted OpenAI-compatible server (HTTP/1.1, keep-alive); the test must use every
    reply it scripts, and the server must have seen no malformed request."""
    with OpenAIServer() as running:
        yield running
    running.assert_done()


@pytest.fixture
def no_openai_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No real key or endpoint leaks in: every model of the test talks to a local server."""
    for name in [n for n in os.environ if n.startswith("OPENAI_")]:
        monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def pgbouncer() -> Iterator[PgBouncer]:
    """One ``pgbouncer`` (``pool_mode = transaction``) in front of the test server."""
    server = postgres_url().partition("?")[0]  # skips (or fails in CI) without a server
    try:
        running = PgBouncer(server)
    except FileNotFoundError as missing:  # a server to test on, but no pooler: not a skip
        pytest.fail(f"{POSTGRES_ENV} is set, but {missing}")
    yield running
    running.close()


@pytest.fixture
def database(pgbouncer) -> Iterator[str]:
    """A fresh database's name, dropped afterwards (a schema cannot be chosen through
    PgBouncer 1.18: it refuses the ``options`` startup parameter the other tests use)."""
    import psycopg

    server = postgres_url().partition("?")[0]
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield name
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def gate() -> Iterator[Gate]:
    """A gate the door tests' slow tools wait at until the test opens it."""
    gate = Gate()
    yield gate
    gate.opened.set()  # no handler thread outlives the test


@pytest.fixture
def gated(ledger, shop, gate, rights, clock) -> Iterator[Executor]:
    """An executor over the shop and the gate (its handlers wait for the test)."""
    executor = gate_executor(ledger, shop, gate, rights, clock)
    yield executor
    executor.close()


@pytest.fixture
def traced() -> Iterator[Listening]:
    """The spans the test ends, recorded by an OpenTelemetry SDK (``_otel``): read them with
    ``traced.stop()``."""
    exporter, _ = installed()
    exporter.listen()
    yield exporter
    exporter.stop()


MCP_FILESYSTEM_ENV = "TURNKIT_TEST_MCP_FILESYSTEM"


@pytest.fixture(scope="session")
def mcp_filesystem() -> str:
    """The ``mcp-server-filesystem`` command of ``@modelcontextprotocol/server-filesystem``, a
    third-party MCP server from the npm registry (skipped locally without it; mandatory in CI,
    where ``.ci/run`` installs it and sets ``TURNKIT_TEST_MCP_FILESYSTEM``)."""
    command = os.environ.get(MCP_FILESYSTEM_ENV)
    if not command:
        if os.environ.get("CI"):
            pytest.fail(f"{MCP_FILESYSTEM_ENV} is not set: CI must run the third-party MCP tests")
        pytest.skip(f"the third-party MCP server tests need {MCP_FILESYSTEM_ENV} (.ci/run sets it)")
    if not os.access(command, os.X_OK):
        pytest.fail(f"{MCP_FILESYSTEM_ENV}={command} is not an executable")
    return command
