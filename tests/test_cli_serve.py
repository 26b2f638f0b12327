"""``turnkit serve``: the command a person runs to serve tools, with keys made by ``turnkit keys``
on the same ``--db`` (one and several worker processes), and its mistakes told in a line."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from _serving import free_port, wait_healthy
from conftest import postgres_url
from test_cli import TURNKIT, env

pytestmark = pytest.mark.slow  # end to end: skip locally with -m 'not slow'


def turnkit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TURNKIT, *args], cwd=cwd, env=env(), capture_output=True, text=True,
                          timeout=120)  # fmt: skip


@pytest.fixture
def serving(tmp_path) -> Iterator[object]:
    """``serving(*args)``: ``turnkit serve *args --port P`` running until the test ends."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> str:
        port = free_port()
        log = (tmp_path / f"serve-{port}.log").open("w")
        tests = str(Path(__file__).resolve().parent)  # --module _cli_app:Shop
        process = subprocess.Popen([TURNKIT, "serve", *args, "--port", str(port)], cwd=tmp_path,
                                   env={**env(), "PYTHONPATH": tests,
                                        "TURNKIT_TEST_APP_DIR": str(tmp_path)}, stdout=log,
                                   stderr=subprocess.STDOUT, text=True,
                                   start_new_session=True)  # fmt: skip
        started.append(process)
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, process, tmp_path / f"serve-{port}.log")
        return url

    yield start
    for process in started:
        with contextlib.suppress(ProcessLookupError):  # it may have stopped on its own
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_key_made_by_the_cli_reads_the_demo_through_the_server(serving, ledger_url, tmp_path,
                                                                 workers):  # fmt: skip
    catalogue = str(tmp_path / "catalogue.sqlite")
    made = turnkit("keys", "create", "--user", "demo", "--scope", "catalogue.products:read",
                   "--json", "--db", ledger_url, cwd=tmp_path)  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    secret = json.loads(made.stdout)["secret"]
    url = serving("--demo", "--db", ledger_url, "--catalogue", catalogue, "--workers", workers)
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {secret}"}) as client:
        for _ in range(4):  # with two workers, requests land on both
            listed = client.get("/v1/tools")
            assert listed.status_code == 200, listed.text
            names = {tool["name"] for tool in listed.json()}
            assert "catalogue.list_products" in names
            assert "catalogue.set_prices" not in names  # the key has no write scope
    assert httpx.get(f"{url}/v1/tools").status_code == 401


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ([], "nothing to serve"),
        (["--demo", "--module", "_cli_app:Shop"], "--demo serves the demo catalogue alone"),
        (["--module", "nowhere.at_all:Shop"], "--module"),
        (["--demo", "--db", "postgres:/nobody@nowhere"], "postgresql://"),
        (
            ["--module", "_cli_app:App", "--catalogue", "x.sqlite"],
            "--catalogue 'x.sqlite' is the demo catalogue's file: add --demo",
        ),
    ],
)
def test_a_mistake_is_told_in_a_line_before_anything_listens(tmp_path, args, said):
    done = turnkit("serve", *args, "--port", str(free_port()), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert said in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_the_banner_hides_the_databases_password(serving, tmp_path):
    url = postgres_url().replace("postgres@", "postgres:hunter2@", 1)
    served = serving("--demo", "--db", url, "--catalogue", str(tmp_path / "catalogue.sqlite"))
    (log,) = tmp_path.glob("serve-*.log")
    banner = log.read_text()
    assert "turnkit serve · REST" in banner
    assert f"inbox {served}/ui/" in " ".join(banner.split())  # where people approve
    assert "postgresql://postgres:***@127.0.0.1" in banner  # the user shown, not the password
    assert "hunter2" not in banner
    assert httpx.get(f"{served}/healthz").status_code == 200


def test_serving_a_module_without_permissions_says_what_keys_will_miss(serving, tmp_path):
    served = serving("--module", "_cli_app:App", "--db", str(tmp_path / "t.sqlite"))
    (log,) = tmp_path.glob("serve-*.log")
    assert "no --permissions: key owners hold no permissions" in log.read_text()
    assert httpx.get(f"{served}/healthz").status_code == 200


def test_the_banner_states_the_hold_rule_in_force(serving, tmp_path):
    db = str(tmp_path / "t.sqlite")
    serving("--demo", "--db", db, "--catalogue", str(tmp_path / "catalogue.sqlite"))
    set_ = turnkit("settings", "set", "hold_key_writes", "true", "--db", db, cwd=tmp_path)
    assert set_.returncode == 0, set_.stdout + set_.stderr
    serving("--demo", "--db", db, "--catalogue", str(tmp_path / "catalogue.sqlite"))
    logs = sorted(tmp_path.glob("serve-*.log"), key=lambda p: p.stat().st_mtime)
    first, second = (" ".join(log.read_text().split()) for log in logs)
    assert "hold rule: a key's write waits for a person's yes when its tool's danger says so" in (
        first
    )
    assert "hold rule: every write a key makes waits for a person's yes" in second


def test_mcp_answers_the_hosts_and_origins_allowed_and_no_docs_unless_asked(serving, tmp_path):
    served = serving("--demo", "--db", str(tmp_path / "t.sqlite"), "--catalogue",
                     str(tmp_path / "catalogue.sqlite"), "--allowed-host", "tools.example.com",
                     "--allowed-origin", "https://app.example.com")  # fmt: skip
    (log,) = tmp_path.glob("serve-*.log")
    assert "docs" not in log.read_text()
    assert httpx.get(f"{served}/docs").status_code == 404
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    mcp = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    answered = {
        ("tools.example.com:8080", None): 401,  # allowed: on to the key (none was sent)
        ("tools.example.com:8080", "https://app.example.com"): 401,
        (served.removeprefix("http://"), None): 401,  # the address it listens on
        ("evil.example", None): 421,
        ("tools.example.com", "https://evil.example"): 403,
    }
    for (host, origin), status in answered.items():
        headers = mcp | {"Host": host} | ({"Origin": origin} if origin else {})
        assert httpx.post(f"{served}/mcp", json=listing, headers=headers).status_code == status


def test_the_api_docs_are_served_when_asked_and_the_banner_says_where(serving, tmp_path):
    served = serving("--demo", "--db", str(tmp_path / "t.sqlite"), "--catalogue",
                     str(tmp_path / "catalogue.sqlite"), "--docs")  # fmt: skip
    (log,) = tmp_path.glob("serve-*.log")
    assert f"docs {served}/docs" in " ".join(log.read_text().split())
    assert httpx.get(f"{served}/docs").status_code == 200


def test_a_port_in_use_is_told_in_a_line_naming_port_before_the_banner(tmp_path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        demo = ["--demo", "--db", str(tmp_path / "t.sqlite"), "--catalogue",
                str(tmp_path / "catalogue.sqlite")]  # fmt: skip
        done = turnkit("serve", *demo, "--port", str(port), cwd=tmp_path)
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    assert f"port {port} on 127.0.0.1 is in use" in said
    assert "give another --port" in said
    assert "turnkit serve · REST" not in said  # told before the banner, not after it
    assert "Errno" not in said
    assert "Traceback" not in said
    assert len(done.stdout.strip().splitlines()) == 1, said
