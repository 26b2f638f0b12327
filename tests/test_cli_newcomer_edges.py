"""The rough edges a newcomer met in the ``turnkit`` command (issue 30, item 3): a module in the
current folder, the closing "continue with" line, Ctrl-C at start, two terminals on one thread,
``/help``, the scripted model's answer to what it cannot do, and the demo's temporary folder."""

from __future__ import annotations

import io
import itertools
import os
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pexpect
import pytest

from test_cli import TURNKIT, ask_for_a_price_change, env, flat, words
from test_cli_first_hour import no_traceback
from turnkit.cli.chat import COMMANDS  # internal: the commands the chat says it has
from turnkit.cli.options import STOPPED  # internal: the line a Ctrl-C ends with

pytestmark = pytest.mark.slow  # end to end: skip locally with -m 'not slow'

MYAPP = """
class Tools:
    key = "notes"

    def read(self, input, ctx):
        return {"notes": []}

    def api_tools(self):
        return [{"name": "notes.list_notes", "scope": "notes.items:read",
                 "permission": "notes.view", "handler": self.read,
                 "annotations": {"read_only": True},
                 "input_schema": {"type": "object", "properties": {}}}]
"""


def turnkit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``turnkit`` run in ``cwd`` with no PYTHONPATH: only the console script's own path."""
    clean = {k: v for k, v in env().items() if k != "PYTHONPATH"}
    return subprocess.run(
        [TURNKIT, *args], cwd=cwd, env=clean, capture_output=True, text=True, timeout=120
    )


# --- 1. --module myapp:obj from the folder that holds myapp.py --------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["tools", "--grant", "notes.view"],
        ["keys", "create", "--user", "u", "--scope", "notes.items:read"],
    ],
    ids=["tools", "keys-create"],
)
def test_a_module_in_the_current_folder_is_found(tmp_path, command):
    (tmp_path / "myapp.py").write_text(MYAPP)
    done = turnkit(*command, "--module", "myapp:Tools", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    no_traceback(done)
    assert "ignored" not in done.stdout + done.stderr  # the module's tool is valid: it loads
    if command[0] == "tools":
        assert "notes_list_notes" in done.stdout  # the table's model name: the tool is listed


def test_a_tool_the_registry_leaves_out_is_told_once(tmp_path):
    twice = MYAPP.replace("return [{", "return 2 * [{")  # the same tool declared twice
    (tmp_path / "myapp.py").write_text(twice)
    done = turnkit("tools", "--grant", "notes.view", "--module", "myapp:Tools", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    no_traceback(done)
    said = flat(done.stdout + done.stderr)
    assert said.count("'notes.list_notes' ignored") == 1, said  # the warning: line, not logging's


def test_a_module_not_found_says_where_python_looked_and_what_to_do(tmp_path):
    done = turnkit("tools", "--module", "myap:Tools", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    no_traceback(done)
    said = flat(done.stdout)
    assert f"--module 'myap:Tools': no module 'myap' in the current folder ({tmp_path})" in said
    assert "run turnkit in the folder that holds myap.py" in said
    assert "PYTHONPATH" in said


# --- 2. "continue with:" repeats the options that matter ----------------------------------------


def spawn(args: list[str], cwd: Path, columns: int = 400) -> pexpect.spawn:
    """``turnkit`` in a terminal wide enough that no line of it wraps."""
    wide = {**env(), "COLUMNS": str(columns), "LINES": "50"}  # rich: both, or 80 wide
    return pexpect.spawn(TURNKIT, args, cwd=str(cwd), env=wide, encoding="utf-8", timeout=60,
                         dimensions=(50, columns))  # fmt: skip


def continued(child: pexpect.spawn) -> list[str]:
    """The command of the chat's closing line, as a shell would split it."""
    child.expect(r"continue with: (.*?)\r?\n")
    line = child.match.group(1)
    child.expect(pexpect.EOF)
    return shlex.split(line)


def test_the_closing_line_repeats_the_options_given_and_continues_the_chat(tmp_path):
    pairs = [("--model", "scripted"), ("--db", "my store.sqlite"), ("--catalogue", "cat.sqlite"),
             ("--user", "alice"), ("--grant", "catalogue.view"), ("--grant", "catalogue.manage"),
             ("--act", "catalogue")]  # fmt: skip
    options = ["--demo", *(word for pair in pairs for word in pair)]
    child = spawn(["chat", *options, "--thread", "t-again"], tmp_path)
    ask_for_a_price_change(child)
    child.sendline("a")
    child.expect(words("Done: I changed the price of ACC-0001"))
    child.sendline("/quit")
    again = continued(child)
    assert again[:3] == ["turnkit", "chat", "--demo"]
    given = list(itertools.pairwise(again))
    assert all(pair in given for pair in pairs), " ".join(again)
    assert again[again.index("--thread") + 1] == "t-again"
    child = spawn(again[1:], tmp_path)
    child.expect(r"turnkit chat · thread t-again · session:alice")
    child.expect("you>")
    assert "no conversation" not in child.before
    child.sendline("/quit")
    child.expect(pexpect.EOF)


def test_the_closing_line_repeats_a_module_its_rights_and_a_model_server(tmp_path):
    """The four options the newcomer lost: --module, --permissions, --base-url and --model."""
    (tmp_path / "myapp.py").write_text(
        MYAPP + "\n\ndef rights(caller):\n    return {'notes.view'}\n"
    )
    pairs = [("--module", "myapp:Tools"), ("--permissions", "myapp:rights"),
             ("--base-url", "http://127.0.0.1:9/v1"), ("--model", "llama3.1"),
             ("--user", "ana")]  # fmt: skip
    child = spawn(["chat", *(word for pair in pairs for word in pair)], tmp_path)
    child.expect("you>")
    child.sendline("/quit")
    again = continued(child)
    given = list(itertools.pairwise(again))
    assert all(pair in given for pair in pairs), " ".join(again)
    assert "--thread" in again


def test_the_closing_line_hides_a_database_password(tmp_path):
    url = os.environ.get("TURNKIT_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("PostgreSQL tests need TURNKIT_TEST_POSTGRES_URL (bash .ci/run sets it)")
    with_password = url.replace("postgres@", "postgres:s3cret@", 1)
    child = spawn(["chat", "--demo", "--model", "scripted", "--db", with_password], tmp_path)
    child.expect("you>")
    child.sendline("/quit")
    again = continued(child)
    assert "s3cret" not in " ".join(again)
    assert again[again.index("--db") + 1] == with_password.replace("s3cret", "***")


# --- 5. the writes that still wait are this thread's ---------------------------------------------


def test_leaving_counts_the_writes_that_wait_in_this_thread_only(tmp_path):
    for thread in ("t-one", "t-two"):
        child = spawn(["chat", "--demo", "--model", "scripted", "--thread", thread], tmp_path)
        ask_for_a_price_change(child)
        child.sendcontrol("d")
        child.expect(r"(\d+) write\(s\) still wait for a decision")
        assert child.match.group(1) == "1"
        child.expect(pexpect.EOF)


# --- 6. /help lists the chat's commands --------------------------------------------------------


def test_help_lists_the_chats_commands_and_sends_nothing_to_the_model(tmp_path):
    child = spawn(["chat", "--demo", "--model", "scripted"], tmp_path)
    child.expect(words("/help lists the commands"))
    child.expect("you>")
    child.sendline("/help")
    for command, said in COMMANDS.items():
        child.expect(rf"{command}\s+{re.escape(said[:30])}")
    child.expect("you>")
    assert "→" not in child.before  # no tool call: the model was not asked
    child.sendline("/nope")
    child.expect(words("the chat has no command '/nope': /help lists its commands"))
    child.expect("you>")
    child.sendline("/exit")
    child.expect(pexpect.EOF)


# --- 8. the scripted demo model says what it can do ----------------------------------------------


def test_the_scripted_model_answers_a_question_it_cannot_follow_with_what_it_can_do(tmp_path):
    child = spawn(["chat", "--demo", "--model", "scripted"], tmp_path)
    child.expect("you>")
    child.sendline("what's the weather in Lisbon?")
    child.expect(words("I can do one thing: list the catalogue's products"))
    child.expect("you>")
    assert "→" not in child.before  # no tool call: no price cut
    child.sendline("/quit")
    child.expect(pexpect.EOF)


# --- 4. two terminals on one thread ------------------------------------------------------------


def test_an_answer_to_a_write_decided_in_another_terminal_says_who_decided_what(tmp_path):
    first = spawn(["chat", "--demo", "--model", "scripted", "--thread", "t-two"], tmp_path)
    ask_for_a_price_change(first)
    second = spawn(["chat", "--demo", "--model", "scripted", "--thread", "t-two"], tmp_path)
    second.expect(words("1 write(s) of this thread wait for your decision"))
    second.expect(words("approve, edit or reject"))
    first.sendline("r")
    first.expect(words("why (optional"))
    first.sendline("not today")
    first.expect(words("The price change was rejected"))
    first.expect("you>")
    second.sendline("a")
    second.expect(words("already decided elsewhere:"))
    second.expect(words("catalogue.set_prices rejected by session:demo at"))
    second.expect(words("your answer changes nothing"))
    second.expect("you>")
    assert "← ok" not in second.before
    for child in (first, second):
        child.sendline("/quit")
        child.expect(pexpect.EOF)


# --- 9. the demo leaves no folder in the temporary directory -----------------------------------


def in_temp(tmp_path: Path) -> dict[str, str]:
    """The environment of a ``turnkit`` whose temporary directory is ``tmp_path/temp``."""
    (tmp_path / "temp").mkdir()
    return {**env(), "TMPDIR": str(tmp_path / "temp")}


@pytest.mark.parametrize("extra", [[], ["--db", "nowhere/x.sqlite"]], ids=["whole", "bad-db"])
def test_the_demo_leaves_its_temporary_directory_as_it_found_it(tmp_path, extra):
    done = subprocess.run([TURNKIT, "demo", *extra], cwd=tmp_path, env=in_temp(tmp_path),
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == (2 if extra else 0), done.stdout + done.stderr
    assert list((tmp_path / "temp").iterdir()) == []


def test_the_demo_stopped_by_ctrl_c_leaves_no_folder(tmp_path):
    child = pexpect.spawn(TURNKIT, ["demo"], cwd=str(tmp_path), env=in_temp(tmp_path),
                          encoding="utf-8", timeout=60)  # fmt: skip
    child.expect(words("you> Make our first product"))
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert list((tmp_path / "temp").iterdir()) == []


# --- 3. Ctrl-C at any moment: one line, exit status 130 ------------------------------------------

EARLY = [0.0, 0.1, 0.3, 0.6, 1.0, 1.5]
"""Seconds after the start to press Ctrl-C: while Python starts, imports turnkit, parses the
options, opens the storage, builds the graph (the moments are the point: no state to wait for)."""
PYTHON_STARTING = "Fatal Python error: init_import_site"
"""What Python says, with its own traceback and status 1, when a Ctrl-C lands while it imports
``site``: before the console script's first line (``_turnkit_entry``), out of turnkit's reach. At
0.0 s it happens when Python starts slowly (a loaded machine: seen with pytest -n 4 on 2 cores)."""


@pytest.mark.parametrize("delay", EARLY)
@pytest.mark.parametrize(
    "command", [["demo"], ["chat", "--demo", "--model", "scripted"]], ids=["demo", "chat"]
)
def test_ctrl_c_in_the_first_moments_ends_in_one_line_with_status_130(tmp_path, command, delay):
    child = pexpect.spawn(TURNKIT, command, cwd=str(tmp_path), env=in_temp(tmp_path),
                          encoding="utf-8", timeout=60)  # fmt: skip
    child.logfile_read = shown = io.StringIO()
    time.sleep(delay)
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    said = shown.getvalue()
    lines = [line for line in said.splitlines() if line.strip() and line.strip() != "^C"]
    if lines and lines[0].removeprefix("^C").startswith(PYTHON_STARTING):  # a busy machine: the
        assert child.exitstatus == 1, said  # Ctrl-C came while Python imported its site module,
        assert list((tmp_path / "temp").iterdir()) == []  # before any code of turnkit's could run
        return
    assert "Traceback" not in said, said
    assert "KeyboardInterrupt" not in said, said
    if command == ["demo"] and "the price write ran 1 time(s)" in said:  # done before the Ctrl-C
        assert child.exitstatus == 0 or child.signalstatus == signal.SIGINT  # or while closing
    elif child.signalstatus is not None:  # what a shell reports as 130 too: before Python could
        assert child.signalstatus == signal.SIGINT  # catch it, or once the command had ended
        assert not lines or "the price write ran" in said or "bye · continue with:" in said, said
    else:
        assert child.exitstatus == 130, said
        assert lines[-1].strip() == STOPPED or lines[-1].startswith("bye · continue with:"), said
    assert list((tmp_path / "temp").iterdir()) == []


def test_ctrl_c_at_the_chats_prompt_says_how_to_continue_and_ends_with_status_130(tmp_path):
    child = spawn(["chat", "--demo", "--model", "scripted", "--thread", "t-c"], tmp_path)
    child.expect("you>")
    child.sendintr()
    child.expect(words("bye · continue with: turnkit chat --demo --thread t-c"))
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    assert STOPPED not in child.before  # the closing line is the one line
