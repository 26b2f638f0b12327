"""The ``turnkit`` command as a new user meets it: no approval by default, no setting changed by
a listing, mistakes told in a line or two (exit 2, never a traceback), and legible listings."""

from __future__ import annotations

import io
import json
import re
import subprocess
import time
import uuid
from pathlib import Path

import pexpect
import pytest

from test_cli import TURNKIT, UUID, ask_for_a_price_change, env, flat, run, spawn_chat, words
from turnkit import Caller, Confirmation, Ledger, open_ledger
from turnkit.cli.settings import _parsed  # internal: how `settings set` reads a value
from turnkit.executor import Ran, Refused  # internal: the typed answers whose JSON a row keeps

pytestmark = pytest.mark.slow  # end to end: skip locally with -m 'not slow'

DB = Path(".turnkit") / "turnkit.sqlite"


def confirmation(
    ledger: Ledger, cid: str | None = None, status: str = "pending", **decided: object
) -> str:
    """A price write of the demo user's, stored in ``ledger`` as the executor would hold it."""
    now = time.time()
    held = Confirmation(
        id=cid or str(uuid.uuid4()), caller=Caller.session("demo"), tool="catalogue.set_prices",
        input={"prices": [{"sku": "ACC-0001", "price": 6.33}]}, input_hash="h",
        idempotency_key=None, status=status, created_at=now, expires_at=now + 3600, **decided,
    )  # fmt: skip
    ledger.create_confirmation(held)
    return held.id


def no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr


def held_id(tmp_path: Path, *extra: str) -> str:
    """Leave a chat (with ``extra`` options) at the decision prompt; the id of the write it
    held."""
    child = spawn_chat(tmp_path, *extra)
    ask_for_a_price_change(child)
    child.sendcontrol("d")
    child.expect(words("1 write(s) still wait for a decision"))
    child.expect(words("continue with: turnkit chat --demo --thread"))
    child.expect(pexpect.EOF)
    ledger = open_ledger(tmp_path / DB)
    (pending,) = ledger.list_confirmations(status="pending")
    ledger.close()
    return pending.id


# --- a write needs an explicit yes ------------------------------------------------------------


def test_enter_at_the_decision_prompt_approves_nothing_and_words_are_understood(tmp_path):
    child = spawn_chat(tmp_path)
    ask_for_a_price_change(child)
    child.sendline("")
    child.expect(words("type a (approve), e (edit) or r (reject)"))
    child.sendline("yes")
    child.expect(words("type a (approve), e (edit) or r (reject)"))
    child.sendline("Approve")
    child.expect(words("Done: I changed the price of ACC-0001"))
    child.sendline("/quit")
    child.expect(pexpect.EOF)


@pytest.mark.parametrize("key", ["c", "d"], ids=["ctrl-c", "ctrl-d"])
@pytest.mark.parametrize(
    ("answer", "prompt"),
    [(None, None), ("e", "new arguments (one JSON object):"), ("r", "why (optional")],
    ids=["decision-prompt", "edit-prompt", "reject-prompt"],
)
def test_leaving_at_a_prompt_of_a_held_write_keeps_it_pending_and_says_how_to_continue(
    tmp_path, answer, prompt, key
):
    child = spawn_chat(tmp_path, "--thread", "t-leave")
    child.logfile_read = shown = io.StringIO()
    ask_for_a_price_change(child)
    if answer is not None:
        child.sendline(answer)
        child.expect(words(prompt))
    child.sendcontrol(key)
    child.expect(words("1 write(s) still wait for a decision"))
    child.expect(words("continue with: turnkit chat --demo --thread t-leave"))
    child.expect(pexpect.EOF)
    assert "Traceback" not in shown.getvalue()
    listing = run("confirmations", "list", cwd=tmp_path)
    assert "pending" in listing.stdout


@pytest.mark.parametrize("key", ["c", "d"], ids=["ctrl-c", "ctrl-d"])
def test_leaving_at_the_message_prompt_says_how_to_continue(tmp_path, key):
    child = spawn_chat(tmp_path, "--thread", "t-bye")
    child.logfile_read = shown = io.StringIO()
    child.sendcontrol(key)
    child.expect(words("continue with: turnkit chat --demo --thread t-bye"))
    child.expect(pexpect.EOF)
    assert "Traceback" not in shown.getvalue()


def test_a_thread_that_does_not_exist_yet_is_said_to_start_new(tmp_path):
    child = pexpect.spawn(
        TURNKIT, ["chat", "--demo", "--model", "scripted", "--thread", "never-seen"],
        cwd=str(tmp_path),
        env=env(), encoding="utf-8", timeout=60, dimensions=(50, 160),
    )  # fmt: skip
    child.expect(words("no conversation 'never-seen' yet: a new one starts"))
    child.expect("you>")
    child.sendline("/quit")
    child.expect(pexpect.EOF)


# --- flags change nothing persistent; settings change only on purpose --------------------------


def test_a_listing_flag_changes_no_setting(tmp_path):
    done = run("tools", "--demo", "--act", "catalogue", "--act", "orders", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    demo = run("demo", "--db", str(tmp_path / "demo.sqlite"), cwd=tmp_path)
    assert demo.returncode == 0
    for db in (tmp_path / DB, tmp_path / "demo.sqlite"):
        ledger = open_ledger(db)
        assert ledger.settings() == {}
        ledger.close()


def test_settings_are_set_listed_and_unset_by_command_saying_what_changed(tmp_path):
    done = run("settings", "set", "api_session_write_modules", '["catalogue"]', cwd=tmp_path)
    assert done.returncode == 0, done.stdout
    assert 'api_session_write_modules: the default -> ["catalogue"]' in done.stdout
    listed = run("settings", "list", cwd=tmp_path)
    row = next(line for line in listed.stdout.splitlines() if "api_session_write_modules" in line)
    assert row.count('["catalogue"]') == 2  # the override, and so the value in force
    done = run("settings", "set", "confirm_batch_over", "20", cwd=tmp_path)
    assert "confirm_batch_over: the default -> 20" in done.stdout
    done = run("settings", "unset", "confirm_batch_over", cwd=tmp_path)
    assert "confirm_batch_over: 20 -> the default (50)" in done.stdout
    ledger = open_ledger(tmp_path / DB)
    assert ledger.settings() == {"api_session_write_modules": ["catalogue"]}
    ledger.close()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["confirm_batch_over", "0"], "'confirm_batch_over' must be a whole number >= 1"),
        (["api_session_write_modules", "shop"], "must be a collection of module keys"),
        (["no_such_setting", "1"], "no setting 'no_such_setting'"),
        (["rate_limit_units", "-1"], "'rate_limit_units' must be a whole number >= 0"),
        (["rate_limit_window", "-0.5"], "'rate_limit_window' must be a number of seconds > 0"),
        (["rate_limit_window", "NaN"], "'rate_limit_window' must be a number of seconds > 0"),
        (["rate_limit_window", "1e999"], "'rate_limit_window' must be a number of seconds > 0"),
        (["rate_limit_window", "Infinity"], "'rate_limit_window' must be a number of seconds > 0"),
        (["max_rounds", "-Infinity"], "'max_rounds' must be a whole number >= 1"),
        (["api_session_write_modules", "[NaN]"], "must be a collection of module keys"),
    ],
)
def test_a_bad_setting_is_refused_and_nothing_changes(tmp_path, args, said):
    done = run("settings", "set", *args, cwd=tmp_path)
    assert done.returncode == 2
    assert said in flat(done.stdout)
    no_traceback(done)
    if (tmp_path / DB).exists():
        ledger = open_ledger(tmp_path / DB)
        assert ledger.settings() == {}
        ledger.close()


@pytest.mark.parametrize("typed", ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "[1, NaN]"])
def test_a_number_that_is_not_finite_is_no_number_to_the_settings_command(typed):
    # kept as typed, so every setting's rule refuses it, whatever Settings does with NaN
    assert _parsed(typed) == typed
    assert _parsed("-1.5") == -1.5
    assert _parsed('["shop"]') == ["shop"]


@pytest.mark.parametrize(
    "command",
    [
        ["settings", "list"],
        ["settings", "set", "max_rounds", "5"],
        ["settings", "unset", "max_rounds"],
        ["confirmations", "list"],
        ["confirmations", "list", "--all", "--json"],
    ],
)
def test_commands_on_the_records_load_no_module_and_make_no_folder(tmp_path, command):
    store, work = tmp_path / "store", tmp_path / "work"
    store.mkdir()
    work.mkdir()
    ledger = open_ledger(store / "x.sqlite")
    ledger.set_setting("api_session_write_modules", [])  # would warn a demo session
    ledger.close()
    done = run(*command, "--db", str(store / "x.sqlite"), cwd=work)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "may not act" not in flat(done.stdout + done.stderr)
    assert "warning" not in done.stdout + done.stderr
    assert list(work.iterdir()) == []  # no .turnkit/ (no demo catalogue) where it ran


def test_the_switch_set_in_the_ledger_wins_over_act_and_the_command_says_so(tmp_path):
    run("settings", "set", "api_session_write_modules", "[]", cwd=tmp_path)
    done = run("tools", "--demo", cwd=tmp_path)
    assert "the agent may not act in 'catalogue'" in flat(done.stdout)
    assert "catalogue.set_prices" not in done.stdout


# --- deciding ------------------------------------------------------------------------------------


def test_a_demo_write_held_for_another_user_is_not_approved_with_the_demos_rights(tmp_path):
    """The demo's permissions are the demo user's: a write the chat made for alice with rights
    given by --grant is not approved by lending her the demo's; it stays pending, and rejecting
    it needs no module and no rights of hers."""
    grants = ["--grant", "catalogue.view", "--grant", "catalogue.manage"]
    cid = held_id(tmp_path, "--user", "alice", *grants)
    done = run("confirmations", "approve", cid, "--demo", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    said = flat(done.stdout)
    assert "approving runs 'catalogue.set_prices' as session:alice" in said
    assert "only the demo user 'demo' holds the demo's permissions" in said
    assert "still pending" in said
    assert "← ok" not in said
    rejected = run("confirmations", "reject", cid, "--message", "not now", cwd=tmp_path)
    assert rejected.returncode == 0, rejected.stdout + rejected.stderr
    ledger = open_ledger(tmp_path / DB)
    held = ledger.get_confirmation(cid)
    ledger.close()
    assert held.caller == Caller.session("alice")
    assert held.status == "rejected"


def test_the_demo_warns_that_its_permissions_are_its_own_users(tmp_path):
    done = run("tools", "--demo", "--caller", "session:alice", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    said = flat(done.stdout)
    assert "with --demo, only the demo user 'demo' holds the demo's permissions" in said
    assert "session:alice sees no tools now:" in said
    assert "catalogue.set_prices: the caller lacks the permission 'catalogue.manage'" in said


def test_deciding_a_decided_confirmation_says_by_whom_and_runs_nothing(tmp_path):
    cid = held_id(tmp_path)
    assert run("confirmations", "approve", cid[:8], "--demo", cwd=tmp_path).returncode == 0
    again = run("confirmations", "reject", cid, cwd=tmp_path)
    assert again.returncode == 3
    said = flat(again.stdout)
    assert "already decided:" in said
    assert "approved by session:operator at" in said
    assert "nothing ran now" in said
    assert "← ok" not in said


def test_an_id_prefix_is_accepted_and_an_unknown_one_is_explained(tmp_path):
    cid = held_id(tmp_path)
    unknown = run("confirmations", "approve", "ffffffff", "--demo", cwd=tmp_path)
    assert unknown.returncode == 2
    assert "no confirmation 'ffffffff'" in flat(unknown.stdout)
    no_traceback(unknown)
    approved = run("confirmations", "approve", cid[:6], "--demo", cwd=tmp_path)
    assert approved.returncode == 0, approved.stdout
    assert "← ok" in approved.stdout


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_an_ambiguous_or_too_short_prefix_is_explained_and_decides_nothing(tmp_path, decision):
    db = tmp_path / "x.sqlite"
    ledger = open_ledger(db)
    first = confirmation(ledger, "abcd1234-0000-4000-8000-000000000001")
    second = confirmation(ledger, "abcd1234-0000-4000-8000-000000000002")
    ledger.close()
    ambiguous = run("confirmations", decision, "abcd1234", "--db", str(db), cwd=tmp_path)
    assert ambiguous.returncode == 2, ambiguous.stdout + ambiguous.stderr
    said = flat(ambiguous.stdout)
    assert "'abcd1234' is the start of several confirmations" in said
    assert first in said
    assert second in said
    no_traceback(ambiguous)
    for short in ("", "ab", "abc"):
        refused = run("confirmations", decision, short, "--db", str(db), cwd=tmp_path)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert f"{short!r} is too short: give the id, or its first 4 characters" in flat(
            refused.stdout
        )
        no_traceback(refused)
    ledger = open_ledger(db)
    assert [c.status for c in ledger.list_confirmations()] == ["pending", "pending"]
    ledger.close()


def test_the_list_shows_thread_created_status_and_whole_ids_and_prints_json(tmp_path):
    cid = held_id(tmp_path)
    listing = run("confirmations", "list", cwd=tmp_path)
    assert cid in listing.stdout  # never wrapped
    assert re.search(r"chat-[0-9a-f]{8}", listing.stdout)  # the thread
    assert "pending" in listing.stdout
    as_json = json.loads(run("confirmations", "list", "--json", cwd=tmp_path).stdout)
    (row,) = as_json
    assert row["id"] == cid
    assert row["thread"].startswith("chat-")
    assert row["status"] == "pending"
    assert row["created_at"].endswith("Z")
    assert row["arguments"] == {"prices": [{"sku": "ACC-0001", "price": 6.33}]}


@pytest.mark.parametrize("columns", [80, 120, 250])
def test_the_list_shows_every_whole_id_and_status_at_any_width(tmp_path, columns):
    db = tmp_path / "x.sqlite"
    ledger = open_ledger(db)
    made = {
        confirmation(ledger): "pending",
        confirmation(ledger, status="rejected"): "rejected",
        confirmation(ledger, status="done", outcome=Ran({}).to_json()): "approved: ok",
        confirmation(
            ledger, status="done", outcome=Refused("forbidden", "no right").to_json()
        ): "approved: forbidden",
        # a row no turnkit wrote (edited by hand): shown as such, never a traceback
        confirmation(ledger, status="done", outcome={"status": "ok"}): "done: outcome unreadable",
    }
    ledger.close()
    listing = subprocess.run(
        [TURNKIT, "confirmations", "list", "--all", "--db", str(db)], cwd=tmp_path,
        env={**env(), "COLUMNS": str(columns)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert listing.returncode == 0, listing.stdout + listing.stderr
    assert sorted(UUID.findall(listing.stdout)) == sorted(made)  # each id once, whole
    for cid, status in made.items():
        line = next(line for line in listing.stdout.splitlines() if cid in line)
        assert status in line, listing.stdout  # its status beside it
    assert max(map(len, listing.stdout.splitlines())) <= columns  # nothing runs off the edge


def test_a_write_whose_process_died_is_listed_as_outcome_unknown(tmp_path):
    cid = held_id(tmp_path)
    ledger = open_ledger(tmp_path / DB)
    claimed = ledger.claim_confirmation(
        cid, decided_by="session:demo", decision={"action": "approve"}, token="t", now=1.0
    )  # a process approved it long ago and died inside the write
    ledger.close()
    assert claimed
    listing = run("confirmations", "list", "--all", cwd=tmp_path)
    assert "outcome unknown" in listing.stdout
    assert "done" not in listing.stdout


# --- storage, model and option mistakes: one or two lines, exit 2 ------------------------------

BAD_DB = [
    ("postgresql://nobody@127.0.0.1:1/none", "cannot connect to PostgreSQL at"),
    ("missing/folder/x.sqlite", "the folder 'missing/folder' does not exist"),
    ("postgres:/u@h/db", "looks like a URL but is not one"),
    ("garbage", "'garbage' is neither a SQLite file nor a URL"),
    ("a-file/x.sqlite", "'a-file' is a file"),
]


@pytest.mark.parametrize(("db", "said"), BAD_DB, ids=[d for d, _ in BAD_DB])
@pytest.mark.parametrize(
    "command",
    [["tools", "--demo"], ["confirmations", "list"], ["settings", "list"], ["chat", "--demo"]],
)
def test_a_bad_db_is_told_in_a_line_or_two_by_every_command(tmp_path, db, said, command):
    (tmp_path / "a-file").write_text("x")
    extra = ["--model", "scripted"] if command[0] == "chat" else []
    done = run(*command, "--db", db, *extra, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert said in flat(done.stdout)
    assert len(done.stdout.strip().splitlines()) <= 4
    no_traceback(done)
    assert not (tmp_path / "garbage").exists()
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["chat", "--demo", "--model", "nonexistent:model"], "Unsupported provider='nonexistent'"),
        (
            ["chat", "--demo", "--model", "scripted", "--user", ""],
            "--user must name the signed-in user",
        ),
        (["tools", "--demo", "--caller", "robot:x"], "--caller 'robot:x': use session:<user>"),
        (["tools", "--module", "no_such_pkg:Thing"], "--module 'no_such_pkg:Thing': no module"),
        (
            ["tools", "--demo", "--permissions", "json:dumps"],
            "--permissions 'json:dumps' failed when called (TypeError: Object of type Caller is"
            " not JSON serializable)",
        ),
        (
            ["confirmations", "approve", "abcd", "--demo", "--permissions", "json:dumps"],
            "--permissions 'json:dumps' failed when called",
        ),
        (
            ["tools", "--demo", "--permissions", "json:JSONDecodeError"],
            "--permissions 'json:JSONDecodeError' failed when called (TypeError:",
        ),
        (
            ["tools", "--module", "os.path:join"],
            "--module 'os.path:join' failed when called (TypeError: join() missing 1 required"
            " positional argument",
        ),
        (
            ["chat", "--model", "scripted", "--module", "json:JSONDecodeError"],
            "--module 'json:JSONDecodeError' failed when called (TypeError:",
        ),
    ],
)
def test_option_mistakes_are_told_in_a_line_or_two(tmp_path, args, said):
    done = run(*args, cwd=tmp_path)
    no_traceback(done)
    assert done.returncode == 2, done.stdout + done.stderr
    assert said in flat(done.stdout)
    assert len(done.stdout.strip().splitlines()) <= 4


def test_a_model_server_that_is_down_keeps_the_chat_alive_and_the_thread_resumable(tmp_path):
    child = pexpect.spawn(
        TURNKIT,
        ["chat", "--demo", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--thread",
         "t-down"],
        cwd=str(tmp_path), env=env(), encoding="utf-8", timeout=120, dimensions=(50, 160),
    )  # fmt: skip
    child.expect("you>")
    child.sendline("hello?")
    child.expect(words("the turn stopped:"))
    child.expect(words("what was said is kept in the thread"))
    child.expect("you>")
    child.sendline("/quit")
    child.expect(words("continue with: turnkit chat --demo --thread t-down"))
    child.expect(pexpect.EOF)
    assert "Traceback" not in child.before
