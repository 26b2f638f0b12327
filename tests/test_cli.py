"""The ``turnkit`` command: demo, tools, confirmations, and chat through a pseudo-terminal."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

ROOT = Path(__file__).resolve().parent.parent
TURNKIT = str(Path(sys.executable).with_name("turnkit"))
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
    session = run("tools", cwd=tmp_path)
    assert session.returncode == 0, session.stderr
    assert "catalogue.set_prices" in session.stdout
    assert "yes: the agent acts for a person" in session.stdout
    reader = run("tools", "--caller", "key:k1", "--scope", "catalogue.products:read", cwd=tmp_path)
    assert "catalogue.list_products" in reader.stdout
    assert "catalogue.set_prices" not in reader.stdout
    nobody = run("tools", "--caller", "public", cwd=tmp_path)
    assert "catalogue." not in nobody.stdout


def test_chat_without_a_model_says_what_to_set(tmp_path):
    done = run("chat", cwd=tmp_path)
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
        ["chat", "--model", "scripted", *extra],
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
    child.expect(words("turnkit chat --thread t1"))
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
    (line,) = [row for row in listing.stdout.splitlines() if "catalogue.set_prices" in row]
    confirmation_id = line.split("│")[1].strip()
    approved = run("confirmations", "approve", confirmation_id, cwd=tmp_path)
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert "← ok" in approved.stdout
    from turnkit import open_ledger

    ledger = open_ledger(tmp_path / ".turnkit" / "turnkit.sqlite")
    assert ledger.get_confirmation(confirmation_id).decided_by == "session:operator"
    ledger.close()
    child = pexpect.spawn(
        TURNKIT,
        ["chat", "--model", "scripted", "--thread", "t2"],
        cwd=str(tmp_path),
        env=env(),
        encoding="utf-8",
        timeout=60,
        dimensions=(50, 160),
    )
    child.expect(words("wait for your decision"))
    child.expect(words("Done: I changed the price of ACC-0001 from 7.03 to 6.33"))
    child.expect("you>")
    child.sendline("/quit")
    child.expect(pexpect.EOF)


@pytest.mark.parametrize("command", ["run", "test"])
def test_the_readme_names_both_commands(command):
    readme = (ROOT / "README.md").read_text()
    if command == "run":
        assert "turnkit demo" in readme.split("<!-- test-command -->")[0]
    else:
        assert ".venv/bin/python -m pytest" in readme.split("<!-- test-command -->")[1]
