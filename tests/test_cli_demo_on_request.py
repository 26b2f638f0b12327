"""The demo is loaded only on request (``--demo``): a command given no tools says what to pass,
and approving a write held by the application's own module never runs the demo's tool of the
same name (the README's own ``catalogue.set_prices``)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

import _myapp
from test_cli import ROOT, TURNKIT, env, flat, words
from test_cli_first_hour import no_traceback
from turnkit import Caller, Executor, Registry, open_ledger

pytestmark = pytest.mark.slow  # end to end: skip locally with -m 'not slow'

PRICES = {"prices": [{"sku": "ACC-0001", "price": 6.33}]}
"""A price change both ``catalogue.set_prices`` accept: the application's and the demo's."""
MODULE = ("--module", "_myapp:MyCatalogue", "--permissions", "_myapp:permissions")


class MyApp:
    """The application of ``_myapp`` in ``tmp_path/app``: its ledger ``app.sqlite``, and
    ``turnkit`` run in its folder (where the demo would keep ``.turnkit/catalogue.sqlite``)."""

    def __init__(self, tmp_path: Path) -> None:
        self.folder = tmp_path / "app"
        self.folder.mkdir()
        self.db = str(self.folder / "app.sqlite")
        self.ledger = open_ledger(self.db)
        self.ledger.set_setting("api_session_write_modules", ["catalogue"])
        self.executor = Executor(Registry([_myapp.MyCatalogue()]), ledger=self.ledger,
                                 permissions=_myapp.permissions)  # fmt: skip

    def hold(self) -> str:
        """A price write the agent made for alice through the application's module, held."""
        held = self.executor.execute(Caller.session("alice"), "catalogue.set_prices", PRICES)
        return str(held["confirmation_id"])

    def status(self, cid: str) -> str:
        return self.ledger.get_confirmation(cid).status

    def demo_ran(self) -> bool:
        """Whether the demo catalogue was touched here (its file is made on first use)."""
        return (self.folder / ".turnkit" / "catalogue.sqlite").exists()

    def turnkit(self, *args: str) -> subprocess.CompletedProcess[str]:
        extra = {"PYTHONPATH": str(ROOT / "tests"), "TURNKIT_TEST_APP_DIR": str(self.folder)}
        return subprocess.run([TURNKIT, *args], cwd=self.folder, env={**env(), **extra},
                              capture_output=True, text=True, timeout=120)  # fmt: skip


@pytest.fixture
def myapp(tmp_path, monkeypatch) -> Iterator[MyApp]:
    monkeypatch.setenv("TURNKIT_TEST_APP_DIR", str(tmp_path / "app"))
    made = MyApp(tmp_path)
    yield made
    made.executor.close()
    made.ledger.close()


def test_approving_without_a_module_runs_no_code_and_says_what_to_pass(myapp):
    """The issue's scenario: without --module, the demo's catalogue.set_prices answered the
    application's held write and closed it ``approved: ok``; now nothing runs and it waits."""
    cid = myapp.hold()
    done = myapp.turnkit("confirmations", "approve", cid, "--db", myapp.db)
    assert done.returncode == 2, done.stdout + done.stderr
    said = flat(done.stdout)
    assert (
        "approving runs the held tool's code: pass --module package.module:object (the module"
        " 'catalogue', which declares 'catalogue.set_prices'), --upstream NAME=URL if an MCP"
        " server's tool held it, or --demo if it was held by the demo" in said
    )
    assert "nothing was decided: it is still pending" in said
    no_traceback(done)
    assert myapp.status(cid) == "pending"
    assert not myapp.demo_ran()
    assert _myapp.writes() == []

    approved = myapp.turnkit("confirmations", "approve", cid, "--as", "alice", "--db", myapp.db,
                             *MODULE)  # fmt: skip
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert '"myapp_updated": 1' in approved.stdout
    assert myapp.status(cid) == "done"
    assert _myapp.writes() == [PRICES]  # the application's own handler ran, once
    assert not myapp.demo_ran()


def test_rejecting_needs_no_module_and_runs_nothing(myapp):
    cid = myapp.hold()
    done = myapp.turnkit("confirmations", "reject", cid, "--db", myapp.db, "--message", "no")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rejected" in done.stdout
    assert myapp.status(cid) == "rejected"
    assert _myapp.writes() == []
    assert not myapp.demo_ran()


@pytest.mark.parametrize(
    ("command", "example"),
    [(["tools"], "turnkit tools --demo"), (["chat"], "turnkit chat --demo --model scripted")],
)
def test_a_command_given_no_tools_says_what_to_pass(myapp, command, example):
    done = myapp.turnkit(*command)
    assert done.returncode == 2, done.stdout + done.stderr
    said = flat(done.stdout)
    assert "no tools to load: pass --module package.module:object" in said
    assert f"or --demo for the demo catalogue ({example})" in said
    assert "`turnkit demo` shows the whole flow offline" in said
    no_traceback(done)
    assert not (myapp.folder / ".turnkit").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["tools"],
        ["chat", "--model", "scripted"],
        ["confirmations", "approve", "abcd"],
        ["confirmations", "reject", "abcd"],
        ["keys", "create", "--user", "alice"],
    ],
)
def test_the_demo_and_a_module_together_are_refused(myapp, command):
    done = myapp.turnkit(*command, "--demo", "--module", "_myapp:MyCatalogue", "--db", myapp.db)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--demo loads the demo catalogue alone: leave out --module" in flat(done.stdout)
    no_traceback(done)
    assert myapp.ledger.keys.list() == []


@pytest.mark.parametrize(
    "command",
    [
        ["tools", "--module", "_myapp:MyCatalogue"],
        ["confirmations", "approve", "abcd", "--module", "_myapp:MyCatalogue"],
        ["confirmations", "reject", "abcd"],
    ],
)
def test_a_catalogue_without_the_demo_is_refused(myapp, command):
    done = myapp.turnkit(*command, "--catalogue", "shop.sqlite", "--db", myapp.db)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--catalogue 'shop.sqlite' is the demo catalogue's file: add --demo" in flat(done.stdout)
    no_traceback(done)


def test_leaving_a_chat_on_your_modules_says_how_to_continue_with_them(myapp):
    """The command that continues the thread repeats the options that loaded its tools: without
    them, it would be refused (or, before --demo, answered by the demo)."""
    child = pexpect.spawn(
        TURNKIT, ["chat", "--module", "_myapp:MyCatalogue", "--model", "scripted", "--thread",
                  "t-mine", "--db", myapp.db], cwd=str(myapp.folder),
        env={**env(), "PYTHONPATH": str(ROOT / "tests"), "TURNKIT_TEST_APP_DIR": str(myapp.folder)},
        encoding="utf-8", timeout=60, dimensions=(50, 160),
    )  # fmt: skip
    child.expect("you>")
    child.sendcontrol("d")
    child.expect(words("continue with: turnkit chat --module _myapp:MyCatalogue --thread t-mine"))
    child.expect(pexpect.EOF)


def test_approving_with_the_demo_a_write_another_module_held_runs_nothing(myapp):
    """--demo loads the demo's own catalogue.set_prices: another declaration than the one that
    held the write, so the executor refuses it (cannot_decide_here) and it stays pending."""
    cid = myapp.hold()
    catalogue = myapp.folder / "demo.sqlite"
    done = myapp.turnkit("confirmations", "approve", cid, "--as", "alice", "--demo", "--db",
                         myapp.db, "--catalogue", str(catalogue),
                         "--permissions", "_myapp:permissions")  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    said = flat(done.stdout)
    assert "differently from the declaration that held it" in said
    assert "still pending" in said
    no_traceback(done)
    assert myapp.status(cid) == "pending"
    assert not catalogue.exists()  # the demo's handler never ran (it makes its file when used)
    assert _myapp.writes() == []
