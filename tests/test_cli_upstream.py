"""``--upstream`` on the command line: an MCP server's tools for ``turnkit tools``, ``serve``,
``keys create`` and ``confirmations approve``, and every mistake a person can make with it told
in a line (exit status 2), never a traceback."""

from __future__ import annotations

import json
import sys

import pytest

from test_cli import run

pytestmark = pytest.mark.slow  # subprocesses of the turnkit command

UNREACHABLE = "files=http://127.0.0.1:9/mcp"
"""An upstream no server answers (port 9, discard: nothing listens on loopback)."""


def told(done, *said: str) -> str:
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "Traceback" not in out, out
    for words in said:
        assert words in " ".join(out.split()), out
    return out


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("nonsense", "give NAME=URL, NAME='COMMAND ARGS' or a .toml file of upstreams"),
        ("missing.toml", "cannot read it"),
        ("files=", "files"),
    ],
)
def test_a_value_that_names_no_upstream_is_refused_in_a_line(tmp_path, given, said):
    told(run("tools", "--upstream", given, "--db", str(tmp_path / "t.sqlite"), cwd=tmp_path), said)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[files]\nurl = 'http://127.0.0.1:9/mcp'\nport = 3\n", "unknown port; it takes url"),
        ("[files\n", "not TOML"),
        ("", "no upstream in it"),
        ("files = 3\n", "a table of options, not a int"),
    ],
)
def test_a_file_of_upstreams_with_a_mistake_is_refused_naming_it(tmp_path, text, said):
    (tmp_path / "up.toml").write_text(text)
    done = run("tools", "--upstream", "up.toml", "--db", str(tmp_path / "t.sqlite"), cwd=tmp_path)
    told(done, said)


def test_two_upstreams_of_one_name_are_refused(tmp_path):
    done = run("tools", "--upstream", UNREACHABLE, "--upstream", UNREACHABLE, "--db",
               str(tmp_path / "t.sqlite"), cwd=tmp_path)  # fmt: skip
    told(done, "'files' is named twice")


@pytest.mark.parametrize("command", [["tools"], ["serve", "--port", "1"]])
def test_the_demo_is_served_alone(tmp_path, command):
    done = run(*command, "--demo", "--upstream", UNREACHABLE, "--db", str(tmp_path / "t.sqlite"),
               cwd=tmp_path)  # fmt: skip
    told(done, "--demo")


def test_an_upstream_that_cannot_be_reached_is_told_in_a_line(tmp_path):
    done = run("tools", "--upstream", UNREACHABLE, "--db", str(tmp_path / "t.sqlite"), cwd=tmp_path)
    told(done, "files", "http://127.0.0.1:9/mcp")


def test_approving_without_modules_names_the_upstream_option(tmp_path):
    done = run("confirmations", "approve", "--all", "--yes", "--db", str(tmp_path / "t.sqlite"),
               cwd=tmp_path)  # fmt: skip
    told(done, "--upstream NAME=URL")


def test_turnkit_chat_holds_an_upstream_write_and_runs_it_once_when_approved(tmp_path):
    """``turnkit chat --upstream``: a model over real HTTP (the local OpenAI-compatible server)
    asks for the notes server's write; it waits at the prompt, and ``a`` runs it once."""
    import pexpect

    from _openai_server import OpenAIServer, call, reply
    from _upstream import NOTES, NotesFiles
    from test_cli import TURNKIT, env, words

    files = NotesFiles.under(tmp_path / "notes")
    write = {"name": "from-chat", "text": "said in the terminal"}
    script = [reply(tool_calls=[call("notes_write_note", json.dumps(write))]), "Saved it."]
    table = {"command": [sys.executable, str(NOTES), "stdio"], "env": files.env()}
    (tmp_path / "up.toml").write_text(  # the child sees env, not the command's environment
        "[notes]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in table.items() if k != "env")
        + "[notes.env]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in files.env().items())
    )  # fmt: skip
    upstream = "up.toml"
    with OpenAIServer(script) as model:
        child = pexpect.spawn(
            TURNKIT,
            ["chat", "--upstream", upstream, "--model", "m", "--base-url", model.url,
             "--user", "ann", "--grant", "notes.read", "--grant", "notes.write", "--act", "notes",
             "--db", str(tmp_path / "t.sqlite")],
            cwd=str(tmp_path), env={**env(), "OPENAI_API_KEY": "test"},
            encoding="utf-8", timeout=60, dimensions=(50, 160),
        )  # fmt: skip
        child.expect("you>")
        child.sendline("save a note")
        child.expect(words("→ notes_write_note"))
        child.expect(words("approve, edit or reject"))
        assert files.runs(name="from-chat") == []
        child.sendline("a")
        child.expect(words("Saved it."))
        child.expect("you>")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    assert len(files.runs(name="from-chat")) == 1
