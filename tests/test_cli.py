"""The ``turnkit`` command: demo, tools, confirmations, and chat through a pseudo-terminal."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

import _cli_app
from _shop import prices
from turnkit import Caller, Executor, Registry, open_ledger

pytestmark = pytest.mark.slow  # end to end: skip locally with -m 'not slow'

ROOT = Path(__file__).resolve().parent.parent
TURNKIT = str(Path(sys.executable).with_name("turnkit"))
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
PLAIN = {"NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "160", "LANGSMITH_TRACING": "false"}


def env() -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TURNKIT_"))}
    return {**keep, **PLAIN}


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TURNKIT, *args], cwd=cwd, env=env(), capture_output=True, text=True, timeout=120
    )


def test_demo_shows_the_whole_flow_offline_labelled_as_scripted(tmp_path):
    done = run("demo", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "scripted demo model: no language model is used" in out
    assert "→ catalogue_list_products" in out
    assert "→ catalogue_set_prices" in out
    assert "waits for your decision" in out
    assert "(the demo approves)" in out
    assert '← ok: {"updated": [{"sku": "ACC-0001", "old_price": 7.03, "price": 6.33}]' in out
    assert "Done: I changed the price of ACC-0001 from 7.03 to 6.33." in out
    assert "the price write ran 1 time(s)" in out


def test_tools_lists_what_a_caller_sees(tmp_path):
    session = run("tools", "--demo", cwd=tmp_path)
    assert session.returncode == 0, session.stderr
    assert "catalogue.set_prices" in session.stdout
    assert "yes: the agent acts for a person" in session.stdout
    reader = run("tools", "--demo", "--caller", "key:k1", "--scope", "catalogue.products:read",
                 cwd=tmp_path)  # fmt: skip
    assert "catalogue.list_products" in reader.stdout
    assert "catalogue.set_prices" not in reader.stdout
    nobody = run("tools", "--demo", "--caller", "public", cwd=tmp_path)
    assert nobody.returncode == 0
    assert "public:anonymous sees no tools now:" in nobody.stdout
    assert "catalogue.set_prices: the tool needs an API key or a signed-in session" in flat(
        nobody.stdout
    )


def test_chat_without_a_model_says_what_to_set(tmp_path):
    done = run("chat", "--demo", cwd=tmp_path)
    assert done.returncode == 2
    assert "Set OPENAI_API_KEY" in done.stdout
    assert "OPENAI_BASE_URL" in done.stdout
    assert "turnkit demo" in done.stdout


def words(text: str) -> str:
    """A pattern for ``text`` that survives the terminal wrapping it at any space."""
    return r"\s+".join(re.escape(word) for word in text.split())


def spawn_chat(tmp_path: Path, *extra: str) -> pexpect.spawn:
    child = pexpect.spawn(
        TURNKIT,
        ["chat", "--demo", "--model", "scripted", *extra],
        cwd=str(tmp_path),
        env=env(),
        encoding="utf-8",
        timeout=60,
        dimensions=(50, 160),
    )
    child.expect(words("scripted demo model"))
    child.expect("you>")
    return child


def ask_for_a_price_change(child: pexpect.spawn) -> None:
    child.sendline("make the first product cheaper")
    child.expect(words("→ catalogue_list_products"))
    child.expect(words("→ catalogue_set_prices"))
    child.expect(words("waits for your decision"))
    child.expect(words('"sku": "ACC-0001"'))
    child.expect(words("approve, edit or reject"))


def test_chat_shows_a_held_write_and_approving_it_at_the_prompt_runs_it(tmp_path):
    child = spawn_chat(tmp_path, "--thread", "t1")
    ask_for_a_price_change(child)
    child.sendline("a")
    child.expect(words('← ok: {"updated": [{"sku": "ACC-0001", "old_price": 7.03, "price": 6.33}]'))
    child.expect(words("Done: I changed the price of ACC-0001 from 7.03 to 6.33"))
    child.expect("you>")
    child.sendline("/quit")
    child.expect(words("turnkit chat --demo --thread t1"))
    child.expect(pexpect.EOF)


def test_chat_edit_runs_the_edited_arguments(tmp_path):
    child = spawn_chat(tmp_path)
    ask_for_a_price_change(child)
    child.sendline("e")
    child.expect(words("new arguments"))
    child.sendline('{"prices": [{"sku": "ACC-0001", "price": 5.55}]}')
    child.expect(words('"price": 5.55'))
    child.expect(words("Done: I changed the price of ACC-0001 from 7.03 to 5.55"))
    child.sendline("/quit")
    child.expect(pexpect.EOF)


def test_chat_reject_runs_nothing_and_the_model_hears_why(tmp_path):
    child = spawn_chat(tmp_path)
    ask_for_a_price_change(child)
    child.sendline("r")
    child.expect("why")
    child.sendline("too cheap")
    child.expect("rejected")
    child.expect(words("nothing changed: too cheap"))
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    listing = run("confirmations", "list", "--all", cwd=tmp_path)
    assert "rejected" in listing.stdout


def test_a_write_decided_out_of_band_is_honoured_when_the_chat_resumes(tmp_path):
    child = spawn_chat(tmp_path, "--thread", "t2")
    ask_for_a_price_change(child)
    child.sendcontrol("c")  # leave without deciding
    child.expect(pexpect.EOF)
    listing = run("confirmations", "list", cwd=tmp_path)
    assert "catalogue.set_prices" in listing.stdout
    (confirmation_id,) = UUID.findall(listing.stdout)
    approved = run("confirmations", "approve", confirmation_id, "--demo", cwd=tmp_path)
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert "← ok" in approved.stdout
    from turnkit import open_ledger

    ledger = open_ledger(tmp_path / ".turnkit" / "turnkit.sqlite")
    assert ledger.get_confirmation(confirmation_id).decided_by == "session:operator"
    ledger.close()
    child = pexpect.spawn(
        TURNKIT,
        ["chat", "--demo", "--model", "scripted", "--thread", "t2"],
        cwd=str(tmp_path),
        env=env(),
        encoding="utf-8",
        timeout=60,
        dimensions=(50, 160),
    )
    child.logfile_read = shown = io.StringIO()
    child.expect(words("1 write(s) of this thread were decided elsewhere:"))
    child.expect(words("catalogue.set_prices approved by session:operator at"))
    child.expect(words("Done: I changed the price of ACC-0001 from 7.03 to 6.33"))
    child.expect("you>")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    assert "wait for your decision" not in flat(shown.getvalue())  # none is left to decide


def ci_takes(marker: str) -> str:
    """What ``.ci/run`` takes from the README after ``<!-- marker -->``, by its own command."""
    script = (ROOT / ".ci" / "run").read_text()
    (line,) = [line for line in script.splitlines() if f"<!-- {marker} -->" in line]
    extract = line.partition("=$(")[2].removesuffix(")")  # the awk command that reads README.md
    assert extract.startswith("awk "), line
    assert extract.endswith(" README.md"), line
    done = subprocess.run(["bash", "-c", extract], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_ci_runs_the_readme_commands_which_install_what_ci_checks_and_run_every_test():
    """.ci/run runs the README's two blocks verbatim (and checks the demo's outcome): here, that
    the test block installs the extras CI installs and runs the whole suite, not a part of it."""
    script = (ROOT / ".ci" / "run").read_text()
    (extras,) = re.findall(r'^\.venv/bin/pip install -q -e "(\.\[[a-z,]+\])"$', script, re.M)
    test = ci_takes("test-command")
    assert test == (
        f'python3 -m venv .venv && .venv/bin/pip install -e "{extras}"'
        " && .venv/bin/python -m pytest -q -n 2"  # pytest-xdist: both of CI's cores
    )
    run_command = ci_takes("run-command")
    assert run_command.endswith("&& .venv/bin/turnkit demo"), run_command
    assert 'grep -q "the price write ran 1 time(s)"' in script  # what the demo prints, checked


# --- deciding with the application's permission provider ----------------------------------------


class App:
    """The shop application of ``_cli_app`` in ``folder``, its ledger, and ``turnkit`` run on it."""

    def __init__(self, tmp_path: Path) -> None:
        self.folder = tmp_path / "app"
        self.folder.mkdir()
        self.rights = self.folder / "rights.json"
        self.rights.write_text(json.dumps({"alice": ["shop.view", "shop.manage"]}))
        self.db = str(tmp_path / "app.sqlite")
        self.env = {"PYTHONPATH": str(ROOT / "tests"), "TURNKIT_TEST_APP_DIR": str(self.folder)}
        self.ledger = open_ledger(self.db)
        self.ledger.set_setting("api_session_write_modules", ["shop"])
        self.executor = Executor(Registry([_cli_app.App]), ledger=self.ledger,
                                 permissions=_cli_app.permissions)  # fmt: skip

    def hold(self) -> str:
        """A price write of alice's, held."""
        return self.executor.execute(Caller.session("alice"), "shop.set_prices", prices())[
            "confirmation_id"
        ]

    def grant(self, user: str, *names: str) -> None:
        """``user`` holds exactly ``names`` from now on."""
        self.rights.write_text(json.dumps({**json.loads(self.rights.read_text()), user: names}))

    def writes(self) -> list[str]:
        log = self.folder / "writes.log"
        return log.read_text().splitlines() if log.exists() else []

    def status(self, cid: str) -> str:
        return self.ledger.get_confirmation(cid).status

    def turnkit(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [TURNKIT, *args], cwd=self.folder, env={**env(), **self.env},
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    def decide(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.turnkit("confirmations", *args, "--db", self.db, "--module", "_cli_app:App")


@pytest.fixture
def app(tmp_path, monkeypatch) -> Iterator[App]:
    """The application, with its rights in a file a test may change between two commands."""
    monkeypatch.setenv("TURNKIT_TEST_APP_DIR", str(tmp_path / "app"))
    made = App(tmp_path)
    yield made
    made.executor.close()
    made.ledger.close()


PROVIDER = ("--permissions", "_cli_app:permissions")


def flat(text: str) -> str:
    """``text`` with its line wrapping undone."""
    return " ".join(text.split())


def test_approving_without_the_provider_is_refused_and_burns_nothing(app):
    cid = app.hold()
    done = app.decide("approve", cid, "--as", "alice")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "pass --permissions package.module:provider" in flat(done.stdout)
    assert "still pending" in done.stdout
    assert app.status(cid) == "pending"
    assert app.writes() == []


def test_approving_with_the_provider_runs_the_write_once(app):
    cid = app.hold()
    done = app.decide("approve", cid, "--as", "alice", *PROVIDER)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "← ok" in done.stdout
    assert len(app.writes()) == 1
    assert app.status(cid) == "done"


def test_a_decider_without_the_right_to_decide_is_refused_and_it_stays_pending(app):
    cid = app.hold()
    done = app.decide("approve", cid, "--as", "bob", *PROVIDER)
    assert done.returncode == 2, done.stdout  # refused: a rule said no
    assert "forbidden" in done.stdout
    assert "still pending" in done.stdout
    assert app.status(cid) == "pending"
    app.grant("root", "system.confirm_any")
    done = app.decide("approve", cid, "--as", "root", *PROVIDER)
    assert done.returncode == 0, done.stdout
    assert len(app.writes()) == 1  # it ran as alice, on root's decision


def test_an_approved_write_that_runs_and_fails_exits_1_a_failure_not_a_refusal(app):
    cid = app.hold()
    (app.folder / "writes.log").mkdir()  # the shop's write fails: its log is a folder
    done = app.decide("approve", cid, "--as", "alice", *PROVIDER)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "internal_error" in done.stdout
    assert "it is closed: the write was tried and failed" in flat(done.stdout)
    assert "Traceback" not in done.stdout  # the tool's own exception is logged, on stderr


def test_rights_revoked_while_waiting_close_the_confirmation_with_the_reason(app):
    cid = app.hold()
    app.grant("alice", "shop.view")  # shop.manage revoked
    done = app.decide("approve", cid, "--as", "alice", *PROVIDER)
    assert done.returncode == 2, done.stdout  # refused: the rights are gone
    assert "forbidden" in done.stdout
    assert "shop.manage" in done.stdout
    assert "closed: nothing ran" in flat(done.stdout)
    held = app.executor.ledger.get_confirmation(cid)
    assert held.status == "done"
    assert held.outcome["error"]["code"] == "forbidden"
    assert "shop.manage" in held.outcome["error"]["message"]
    assert app.writes() == []


def test_approving_a_tool_whose_module_is_not_loaded_is_refused(app):
    cid = app.hold()
    done = app.turnkit("confirmations", "approve", cid, "--db", app.db, *PROVIDER)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "approving runs the held tool's code: pass --module" in flat(done.stdout)
    assert app.status(cid) == "pending"
    done = app.turnkit("confirmations", "approve", cid, "--db", app.db, "--demo", *PROVIDER)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "is not loaded in this command: pass --module" in flat(done.stdout)
    assert app.status(cid) == "pending"


def test_a_permissions_option_that_does_not_load_says_why(app):
    cid = app.hold()
    done = app.decide("approve", cid, "--permissions", "_cli_app:nope")
    assert done.returncode == 2
    assert "--permissions '_cli_app:nope' could not be loaded" in flat(done.stdout)
    assert app.status(cid) == "pending"


def test_chat_on_a_thread_another_program_is_running_says_so_and_stays_alive(tmp_path):
    """A second ``turnkit chat`` (or any program) on the same thread and database: the thread's
    lease keeps this one out, and the person is told why, not shown a traceback."""
    (tmp_path / ".turnkit").mkdir()
    ledger = open_ledger(tmp_path / ".turnkit" / "turnkit.sqlite")
    held = ledger.thread_leases().take("t4")  # another program is in a turn on thread t4
    assert held is not None
    child = spawn_chat(tmp_path, "--thread", "t4")
    child.logfile_read = shown = io.StringIO()
    child.sendline("make the first product cheaper")
    child.expect(words("thread t4 is busy: another turnkit chat or program"))
    child.expect(words("nothing was sent; wait for it to end, then type again"))
    child.expect("you>")
    ledger.thread_leases().release(held)  # that program's turn ended
    ask_for_a_price_change(child)
    child.sendcontrol("c")
    child.expect(pexpect.EOF)
    ledger.close()
    assert "Traceback" not in shown.getvalue()
