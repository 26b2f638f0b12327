"""``turnkit bench serve``: a load a person runs against their own ``turnkit serve``, its figures
per route, and every mistake told in a line before any load (exit 2); errors under load are
counted per route and end the command with 1.

Reaches ``turnkit.cli.load``, the generator the command wraps (``run_load`` and its routes, for
bench/ too), and ``turnkit.cli``'s app, to refuse options in this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from typer.testing import CliRunner

from _serving import free_port, wait_healthy
from test_cli import TURNKIT, env
from test_docs_blocks import blocks
from test_docs_serve import reader_env
from turnkit import open_ledger
from turnkit.cli import app
from turnkit.cli import load as load_module
from turnkit.cli.load import LoadError, Route, arun_load, rest_tools, run_load

pytestmark = pytest.mark.slow  # end to end: skip locally with -m 'not slow'


class Served(NamedTuple):
    url: str
    db: str
    secret: str
    folder: Path


def turnkit(*args: str, cwd: Path, key: str | None = None) -> subprocess.CompletedProcess[str]:
    extra = {"COLUMNS": "1000"} | ({} if key is None else {"TURNKIT_KEY": key})
    return subprocess.run([TURNKIT, *args], cwd=cwd, env=env() | extra, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def shell(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``code`` run by ``bash`` as a reader's shell runs it (``test_docs_serve.reader_env``)."""
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=cwd, env=reader_env(),
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, f"{code}\n{done.stdout}\n{done.stderr}"
    return done


LOAD_TEST = "Load-test your own server"
"""The section of docs/performance.md whose commands serve the demo these tests load."""
SECRET = re.compile(r"tk_[A-Za-z0-9_-]{43}")


def section() -> tuple[list[str], str]:
    """The section's first block (make a key, turn the rate limit off, serve) as lines, and its
    second (the load) as written."""
    first, second = [code for heading, code in blocks("sh") if heading == LOAD_TEST]
    return first.strip().splitlines(), second


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    """The server of docs/performance.md's "Load-test your own server", made as written in an
    empty folder (``turnkit serve`` given a free port): the demo on a ledger of its own, its rate
    limit off, and a key that may read the catalogue."""
    folder = tmp_path_factory.mktemp("bench")
    make_key, rate_limit_off, serve = section()[0]
    (secret,) = SECRET.findall(shell(make_key, folder).stdout)
    shell(rate_limit_off, folder)
    db = str(folder / "load.sqlite")
    assert f"--db {Path(db).name}" in serve
    port = free_port()
    log = folder / "serve.log"
    with log.open("w") as out:
        process = subprocess.Popen(["bash", "-c", f"exec {serve} --port {port}"], cwd=folder,
                                   env=reader_env(), stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, log)
        yield Served(url, db, secret, folder)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def writer_key(served: Served) -> str:
    """A key that may also write the catalogue (the section's may only read)."""
    ledger = open_ledger(served.db)
    try:
        _, secret = ledger.keys.create("demo", {"catalogue.products:read",
                                                "catalogue.products:write"})  # fmt: skip
    finally:
        ledger.close()
    return secret


def test_the_load_test_section_runs_as_written(served):
    """The section's load, as written but for the port and shorter: a reader waits 10 s with
    50 clients, a test 1 s with 5."""
    code = section()[1]
    assert "--clients 50 --duration 10s" in code
    port = served.url.rsplit(":", 1)[1]
    filled = (code.replace("tk_...", served.secret).replace(":8080", f":{port}")
              .replace("--clients 50 --duration 10s", "--clients 5 --duration 1s"))  # fmt: skip
    said = shell(filled, served.folder).stdout
    assert "5 clients" in said
    assert "tool catalogue.list_products" in said  # the first read that takes no input
    for column in ("requests", "errors", "req/s", "p50 ms", "p99 ms", "max ms"):
        assert column in said
    rows = [line.split()[1] for line in said.splitlines() if line.startswith("│")]
    assert rows == ["invoke", "tools", "mcp", "total"]
    flat = " ".join(said.split())
    assert f"this machine: {os.cpu_count()} CPU(s), shared by the server and the load" in flat


def bench(served: Served, *args: str, key: str | None = None) -> subprocess.CompletedProcess[str]:
    return turnkit("bench", "serve", *args, cwd=served.folder,
                   key=served.secret if key is None else key)  # fmt: skip


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The refusal a command said: exit 2, one line, no traceback."""
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, done.stdout
    return lines[0]


def test_a_load_reports_each_route_and_the_total_as_json(served):
    done = bench(served, served.url, "--clients", "3", "--duration", "1s", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["tool"] == "catalogue.list_products"  # the first read that takes no input
    assert [r["route"] for r in report["routes"]] == ["invoke", "tools", "mcp"]
    assert report["cpus"] == os.cpu_count()
    assert 0 < report["generator_cpu"] < 2
    for figures in [*report["routes"], report["total"]]:
        assert figures["requests"] > 0
        assert figures["errors"] == 0
        assert figures["first_error"] is None
        assert 0 < figures["p50_ms"] <= figures["p99_ms"] <= figures["max_ms"]
    assert report["total"]["requests"] == sum(r["requests"] for r in report["routes"])


def test_requests_bounds_the_load_before_the_time(served):
    started = time.monotonic()
    done = bench(served, served.url, "--routes", "tools", "--clients", "4", "--requests", "40",
                 "--duration", "1m", "--json")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["total"]["requests"] == 40
    assert time.monotonic() - started < 30


def test_a_tool_and_its_input_are_loaded_on_the_routes_asked_in_their_order(served):
    done = bench(served, served.url, "--tool", "catalogue.get_product", "--input",
                 '{"sku": "TEA-0001"}', "--routes", "mcp,invoke", "--clients", "2",
                 "--duration", "1s", "--json")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert [r["label"] for r in report["routes"]] == [  # in the order --routes gives them
        "MCP tools/call catalogue_get_product",
        "POST /v1/tools/catalogue.get_product/invoke",
    ]
    assert report["total"]["errors"] == 0


def refused(*args: str, key: str = "tk_any") -> str:
    """``turnkit bench serve *args`` in this process, refused before it reaches any server: what
    it said, on one logical line (the console wraps it)."""
    done = CliRunner().invoke(app, ["bench", "serve", *args], env={"TURNKIT_KEY": key})
    assert done.exit_code == 2, done.output
    assert isinstance(done.exception, SystemExit), done.exception
    return " ".join(done.output.split())


@pytest.mark.parametrize("url", ["http://192.0.2.10:8080", "http://tools.example.com"])
def test_a_server_on_another_machine_is_refused_unless_allowed(url):
    said = refused(url)
    assert "is not this machine" in said
    assert "--allow-remote" in said


def test_allow_remote_loads_a_host_that_is_not_a_loopback_name(served):
    """``0.0.0.0`` is no loopback address, yet reaches this machine's listener (on Linux): the
    flag lets it through; MCP, which answers loopback names only, is left out."""
    remote = served.url.replace("127.0.0.1", "0.0.0.0")
    args = ("--routes", "invoke,tools", "--clients", "2", "--duration", "1s", "--json")
    assert "--allow-remote" in refused(remote, *args)
    done = bench(served, remote, *args, "--allow-remote")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["total"]["errors"] == 0


def test_a_key_the_server_refuses_is_told_in_one_line(served):
    said = one_line(bench(served, served.url, key="tk_not_a_key"))
    assert "the server refused the key (401" in said
    assert "turnkit keys create" in said


def test_no_key_is_told_with_where_to_give_it():
    said = refused("http://127.0.0.1:8080", key="")
    assert "--key tk_..." in said
    assert "TURNKIT_KEY" in said


def test_an_unknown_tool_is_told_with_the_tools_the_key_may_use(served):
    said = one_line(bench(served, served.url, "--tool", "catalogue.nothing"))
    assert "no tool named 'catalogue.nothing'" in said
    assert "catalogue.list_products" in said


def test_a_write_tool_is_refused_unless_writes_are_allowed(served):
    key = writer_key(served)
    said = one_line(bench(served, served.url, "--tool", "catalogue.set_prices", key=key))
    assert "catalogue.set_prices writes" in said
    assert "--allow-writes" in said


def test_an_input_the_tool_refuses_is_told_before_any_load(served):
    said = one_line(bench(served, served.url, "--tool", "catalogue.get_product"))
    assert "answered 422" in said
    assert "sku" in said


@pytest.mark.parametrize(
    ("given", "told"),
    [("0s", "is not a period"), ("ten", "is not a period"), ("1.5s", "is not a period"),
     ("2h", "give at most 10m")],
)  # fmt: skip
def test_a_bad_duration_is_refused(given, told):
    assert told in refused("--duration", given)


@pytest.mark.parametrize(
    ("args", "told"),
    [(["--routes", "invoke,soap"], "--routes 'invoke,soap': give some of invoke, tools, mcp"),
     (["--input", "[1]"], "is not a JSON object"),
     (["--clients", "0"], "--clients"),
     (["--input", '{"sku": "TEA-0001"}'], "--input is a tool's input: give --tool NAME too"),
     (["https://127.0.0.1:8080"], "is not an http://HOST:PORT URL")],
)  # fmt: skip
def test_bad_options_are_refused(args, told):
    assert told in refused(*args)


def test_a_server_that_is_not_running_is_told_in_one_line(served):
    said = one_line(bench(served, f"http://127.0.0.1:{free_port()}"))
    assert "nothing answers at" in said
    assert "turnkit serve" in said


def test_an_answer_that_is_not_2xx_is_counted_as_an_error_of_its_route(served):
    headers = {"Authorization": f"Bearer {served.secret}"}
    missing = Route(name="missing", label="GET /v1/nothing", method="GET", path="/v1/nothing",
                    headers=headers)  # fmt: skip
    load = run_load(served.url, [rest_tools(headers), missing], clients=2, seconds=0.5)
    listed, refused = load.routes
    assert listed.requests > 0
    assert listed.errors == 0
    assert refused.requests > 0
    assert refused.errors == refused.requests
    assert refused.first_error is not None
    assert refused.first_error.startswith("HTTP 404: ")
    assert load.total.errors == refused.errors


def test_a_key_revoked_under_load_makes_401s_counted_per_route_and_exit_1(served):
    ledger = open_ledger(served.db)
    try:
        key, secret = ledger.keys.create("demo", {"catalogue.products:read"})
    finally:
        ledger.close()
    command = [TURNKIT, "bench", "serve", served.url, "--routes", "invoke,mcp", "--clients", "2",
               "--duration", "2s", "--json"]  # fmt: skip
    running = subprocess.Popen(command, cwd=served.folder, env=env() | {"TURNKIT_KEY": secret},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)  # fmt: skip
    ledger = open_ledger(served.db)
    try:
        deadline = time.monotonic() + 30
        while sum(key.id in str(row["caller"]) for row in ledger.audit_rows(100)) < 20:
            assert time.monotonic() < deadline, "the load did not start within 30 s"
            assert running.poll() is None, running.communicate()
            time.sleep(0.05)
        ledger.keys.revoke(key.id)
    finally:
        ledger.close()
    out, err = running.communicate(timeout=60)
    assert running.returncode == 1, out + err
    report = json.loads(out)
    for figures in report["routes"]:
        assert figures["errors"] > 0
        assert "revoked" in figures["first_error"]
    assert report["routes"][0]["first_error"].startswith("HTTP 401: ")


Reply = Callable[[bytes, int], bytes | None]
"""What a raw server answers to the n-th request for a path: the bytes, ``b""`` to close the
connection without an answer, or None to answer never."""
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"


@contextlib.asynccontextmanager
async def raw_server(reply: Reply) -> AsyncIterator[tuple[str, asyncio.Server]]:
    """An HTTP/1.1 server on 127.0.0.1 in this loop, answering every request with ``reply``;
    its URL and the server (to stop listening)."""
    handlers: list[asyncio.Task[Any]] = []
    count = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal count
        handlers.append(asyncio.current_task())  # type: ignore[arg-type]  # in a task
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = re.search(rb"Content-Length: (\d+)", head)
                await reader.readexactly(int(length[1]) if length else 0)
                count += 1
                answer = reply(head.split(b" ")[1], count)
                if answer is None:
                    await asyncio.Event().wait()  # never answered: cancelled at the end
                writer.write(answer or b"")
                if not answer or b"Connection: close" in answer:
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", server
    finally:
        server.close()
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)


def get(name: str, path: str) -> Route:
    return Route(name=name, label=f"GET {path}", method="GET", path=path)


async def test_chunked_answers_are_read_and_closed_connections_opened_again():
    def reply(path: bytes, n: int) -> bytes:
        if path == b"/chunked":
            return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
        return b"HTTP/1.1 204 No Content\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"

    async with raw_server(reply) as (url, _):
        load = await arun_load(url, [get("chunked", "/chunked"), get("close", "/close")],
                               clients=3, seconds=0.3)  # fmt: skip
    for figures in load.routes:
        assert figures.requests > 10
        assert figures.errors == 0, figures.first_error


async def test_a_server_that_goes_away_is_counted_and_ends_the_load_early():
    def reply(path: bytes, n: int) -> bytes:
        if n == 50:
            server.close()  # stops listening: no client can connect again
        return OK if n < 50 else b""

    async with raw_server(reply) as (url, server):
        started = time.monotonic()
        load = await arun_load(url, [get("gone", "/")], clients=3, seconds=10)
    assert time.monotonic() - started < 5  # each client stopped when it could not reconnect
    (gone,) = load.routes
    assert gone.errors == 3  # one lost connection per client
    assert gone.requests == 49 - 3 + 3  # answered after the warm-up, and the three lost
    assert gone.first_error is not None
    assert gone.first_error.startswith("connection: ")


async def test_an_answer_that_never_comes_is_counted_and_the_load_still_ends(monkeypatch):
    monkeypatch.setattr(load_module, "GRACE", 0.2)

    def reply(path: bytes, n: int) -> bytes | None:
        return OK if n <= 2 * 2 else None  # the warm-up is answered, then nothing

    async with raw_server(reply) as (url, _):
        load = await arun_load(url, [get("a", "/a"), get("b", "/b")], clients=2, seconds=0.2)
    assert load.total.requests == 2
    assert load.total.errors == 2
    assert load.total.first_error == "no answer within 0.2 s after the end"


async def test_the_warm_up_is_sent_but_not_counted():
    answered = 0

    def reply(path: bytes, n: int) -> bytes:
        nonlocal answered
        answered = n
        return OK

    async with raw_server(reply) as (url, _):
        load = await arun_load(url, [get("a", "/")], clients=2, seconds=0.2, warmup=0.2)
    assert load.total.errors == 0
    assert load.seconds < 0.4  # the window alone: with the warm-up it would be 0.4 or more
    assert answered > 2 + load.total.requests + 10  # the first round, and a warm-up's load


async def test_nothing_listening_stops_the_load_before_it_starts():
    with pytest.raises(LoadError, match=r"cannot reach 127\.0\.0\.1"):
        await arun_load(f"http://127.0.0.1:{free_port()}", [get("x", "/")], seconds=1)
