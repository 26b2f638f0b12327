"""The guide "Govern an MCP server you don't own" (docs/guides/upstream-mcp.md), run as written
against the third-party server it names: ``@modelcontextprotocol/server-filesystem`` from the npm
registry, fronted by ``turnkit serve --upstream``.

Its files (the blocks with a ``title``) are saved in an empty folder and its commands run there,
as a newcomer would type them in the activated virtual environment, with two departures, each
checked: the ``npm install`` line is not run (tests never reach a registry; ``.ci/run`` installed
the same package at the same version, and its folder is linked where the line would put it), and
the server listens on a free port instead of 8080. The browser's part of step 5 (sign in, press
approve) is done over HTTP with the page's own form."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from _doors import cards, csrf_of, sign_in
from _serving import free_port, wait_healthy
from test_docs_blocks import ROOT, page_blocks

pytestmark = pytest.mark.slow  # a Node.js server under the turnkit command

GUIDE = ROOT / "docs" / "guides" / "upstream-mcp.md"
FILE = re.compile(r'^```(?:python|toml) title="([\w.]+)"\n(.*?)^```$', re.MULTILINE | re.DOTALL)
SECRET = re.compile(r"\btk_[A-Za-z0-9_-]+")


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TURNKIT_", "PYTHONPATH"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["COLUMNS"] = "200"
    return env


def run(line: str, folder: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", line], cwd=folder, env=environment() | env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


@pytest.fixture
def folder(tmp_path, mcp_filesystem) -> Path:
    """An empty folder with the guide's files, and the filesystem server where step 1's
    ``npm install --prefix mcp`` puts it."""
    files = dict(FILE.findall(GUIDE.read_text()))
    assert set(files) == {"upstreams.toml", "rights.py", "gateway.py"}
    for name, code in files.items():
        (tmp_path / name).write_text(code)
    installed = Path(mcp_filesystem).parent.parent  # <prefix>/node_modules/.bin/<command>
    (tmp_path / "mcp").mkdir()
    (tmp_path / "mcp" / "node_modules").symlink_to(installed)
    return tmp_path


@pytest.fixture
def serving(folder) -> Iterator[Callable[[str], str]]:
    """``serving(line)``: step 4's ``turnkit serve`` line, run on a free port until the test
    ends; its URL."""
    process: subprocess.Popen[str] | None = None

    def start(line: str) -> str:
        nonlocal process
        port = free_port()
        log = (folder / "serve.log").open("w")
        process = subprocess.Popen([*shlex.split(line), "--port", str(port)], cwd=folder,
                                   env=environment(), stdout=log, stderr=subprocess.STDOUT,
                                   text=True, start_new_session=True)  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, process, folder / "serve.log")
        return url

    yield start
    if process is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def test_the_guide_runs_as_written(folder, serving):
    steps = [block.code for block in page_blocks("sh", GUIDE)]
    install, offers, keys_and_serve, call = steps
    npm, make_folder = install.splitlines()
    ci = (ROOT / ".ci" / "run").read_text()
    assert npm.split()[-1] in ci  # the package and version .ci/run installed for this test
    done = run(make_folder, folder)
    assert done.returncode == 0, done.stderr

    listed = run(offers, folder)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "files.read_text_file" in listed.stdout
    assert "files.write_file" in listed.stdout
    assert "Traceback" not in listed.stdout + listed.stderr

    bot_line, root_line, serve_line = keys_and_serve.splitlines()
    secrets = []
    for line in (bot_line, root_line):
        made = run(line, folder)
        assert made.returncode == 0, made.stdout + made.stderr
        secrets.append(SECRET.findall(made.stdout)[0])
    bot, root = secrets
    url = serving(serve_line)

    export, read, write = call.replace("http://127.0.0.1:8080", url).split("\ncurl")
    assert export.startswith("export TURNKIT_KEY=")  # the bot's secret: given as TURNKIT_KEY here
    read, write = "curl" + read, "curl" + write
    answered = run(read, folder, TURNKIT_KEY=bot)
    assert answered.returncode == 0, answered.stderr
    assert "hello from disk" in answered.stdout
    held = run(write, folder, TURNKIT_KEY=bot)
    assert " 202 " in held.stdout.splitlines()[0], held.stdout
    confirmation_id = re.search(r'"id"\s*:\s*"([^"]+)"', held.stdout).group(1)  # type: ignore[union-attr]
    target = folder / "shared" / "notes.txt"
    assert not target.exists()  # held: nothing reached the server

    with httpx.Client(base_url=url, timeout=60, follow_redirects=True) as inbox:
        sign_in(inbox, root)
        page = inbox.get("/ui/")
        assert confirmation_id in cards(page.text)
        token = csrf_of(page)
        approved = inbox.post(f"/ui/confirmations/{confirmation_id}/approve", data={"csrf": token})
        assert approved.status_code == 200, approved.text[:500]
        assert target.read_bytes() == b"written once"  # byte for byte

        target.write_bytes(b"changed after the approval")  # a second run would write it back
        again = inbox.post(f"/ui/confirmations/{confirmation_id}/approve", data={"csrf": token})
        assert again.status_code < 500, again.text[:500]
        assert confirmation_id not in cards(inbox.get("/ui/").text)
    assert target.read_bytes() == b"changed after the approval"  # it ran once, never again


def test_the_python_file_builds_the_same_module(folder):
    (folder / "shared").mkdir()  # step 1
    done = run(f"{sys.executable} -c 'import gateway; print(gateway.executor.registry.names())'",
               folder)  # fmt: skip
    assert "files.write_file" in done.stdout, done.stdout + done.stderr
