"""``turnkit keys create|list|revoke``: the secret is printed once, listed never, and the key store
is the one every command given the same ``--db`` (and ``turnkit serve``) uses."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from test_cli import TURNKIT, env
from turnkit import open_ledger

pytestmark = pytest.mark.slow  # end to end: skip locally with -m 'not slow'

SECRET = re.compile(r"tk_[A-Za-z0-9_-]{43}")


def keys(*args: str, db: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TURNKIT, "keys", *args, "--db", db], cwd=cwd, env=env(),
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_a_key_is_created_listed_and_revoked_and_its_secret_shown_once(ledger_url, tmp_path):
    made = keys("create", "--user", "alice", "--scope", "shop.products:read",
                "--allow", "shop.list_products", "--expires-in", "30d", db=ledger_url,
                cwd=tmp_path)  # fmt: skip
    assert made.returncode == 0, made.stderr
    (secret,) = SECRET.findall(made.stdout)
    assert "shown this once" in made.stdout
    assert f"\n{secret}\n" in made.stdout  # alone on its line: copied whole
    ledger = open_ledger(ledger_url)
    try:
        key = ledger.keys.by_secret(secret)
        assert key is not None
        assert key.caller.user_id == "alice"
        assert key.scopes == {"shop.products:read"}
        assert key.allow == {"shop.list_products"}
        assert abs(key.expires_at - time.time() - 30 * 86400) < 300
    finally:
        ledger.close()

    listed = keys("list", db=ledger_url, cwd=tmp_path)
    assert listed.returncode == 0
    assert key.id in listed.stdout
    assert "active" in listed.stdout
    assert secret not in listed.stdout
    assert secret[3:20] not in listed.stdout
    assert "created" in listed.stdout
    assert "last used" in listed.stdout
    (row,) = json.loads(keys("list", "--json", db=ledger_url, cwd=tmp_path).stdout)
    assert row["id"] == key.id
    assert "secret" not in row
    assert row["created_at"].endswith("Z")
    assert row["last_used_at"].endswith("Z")  # by_secret above was a use of the key

    revoked = keys("revoke", key.id, db=ledger_url, cwd=tmp_path)
    assert revoked.returncode == 0
    assert "refused from now on" in revoked.stdout
    again = keys("revoke", key.id, db=ledger_url, cwd=tmp_path)
    assert again.returncode == 0
    assert "nothing changed" in again.stdout
    assert "revoked" in keys("list", db=ledger_url, cwd=tmp_path).stdout


def test_json_create_gives_the_secret_to_scripts(tmp_path):
    db = str(tmp_path / "t.sqlite")
    made = keys("create", "--user", "bob", "--json", db=db, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    data = json.loads(made.stdout)
    assert SECRET.fullmatch(data["secret"])
    assert data["user_id"] == "bob"
    assert data["scopes"] == []


def test_a_key_is_named_for_approvers_and_the_name_is_listed(tmp_path):
    db = str(tmp_path / "t.sqlite")
    made = keys("create", "--user", "alice", "--name", "billing bot", db=db, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert "(billing bot) for alice" in made.stdout
    assert "billing bot" in keys("list", db=db, cwd=tmp_path).stdout
    (row,) = json.loads(keys("list", "--json", db=db, cwd=tmp_path).stdout)
    assert row["name"] == "billing bot"
    blank = keys("create", "--user", "alice", "--name", " ", db=db, cwd=tmp_path)
    assert blank.returncode == 2
    assert "a key's name is 1 to 100 printable characters" in blank.stdout
    assert "Traceback" not in blank.stdout + blank.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["create", "--user", "alice", "--expires-in", "forever"], "is not a duration"),
        (["create", "--user", "alice", "--expires-in", "0d"], "is not a duration"),
        (["create", "--user", " ", "--scope", "shop.products:read"], "belongs to a user"),
        (["create", "--user", "alice", "--scope", "Shop Products"], "<module>.<resource>:<action>"),
        (["revoke", "key_nope"], "no key 'key_nope'"),
    ],
)
def test_a_mistake_is_told_in_a_line_and_changes_nothing(tmp_path, args, said):
    db = str(tmp_path / "t.sqlite")
    done = keys(*args, db=db, cwd=tmp_path)
    assert done.returncode == 2
    assert said in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    assert "no keys yet" in keys("list", db=db, cwd=tmp_path).stdout


def create(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``turnkit keys create --user alice *args`` on a new ledger, with the tests' modules."""
    tests = str(Path(__file__).resolve().parent)  # --module _cli_app:App
    return subprocess.run([TURNKIT, "keys", "create", "--user", "alice", *args, "--db",
                           str(cwd / "t.sqlite")], cwd=cwd,
                          env={**env(), "PYTHONPATH": tests, "TURNKIT_TEST_APP_DIR": str(cwd)},
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def made(done: subprocess.CompletedProcess[str]) -> str:
    """The key was made anyway (exit 0, its secret printed); what the command said, unwrapped."""
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(SECRET.findall(done.stdout)) == 1
    assert "Traceback" not in done.stdout + done.stderr
    return " ".join(done.stdout.split())


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--demo", "--scope", "catalogue.products:raed"],
            "warning: no loaded tool uses the scope 'catalogue.products:raed': it gives the key"
            " nothing (the known scopes: 'catalogue.products:read', 'catalogue.products:write',"
            " 'system.audit:read', 'system.confirmations:decide')",
        ),
        (
            [
                "--module",
                "_cli_app:App",
                "--scope",
                "shop.products:read",
                "--allow",
                "shop.list_product",
            ],
            "warning: no loaded module declares the tool 'shop.list_product' (--allow): the key"
            " can never call it",
        ),
        (
            [
                "--demo",
                "--scope",
                "catalogue.products:write",
                "--scope",
                "system.confirmations:decide",
            ],
            "warning: the key may call the write tools 'catalogue.set_prices',"
            " 'catalogue.delete_product' and may decide held writes"
            " ('system.confirmations:decide'): a client holding it could approve its own held"
            " writes, and no person's yes would be needed. Make two keys instead",
        ),
    ],
    ids=["unknown-scope", "unknown-tool", "write-and-decide"],
)
def test_a_key_its_modules_cannot_serve_as_meant_is_made_with_a_warning(tmp_path, args, said):
    assert said in made(create(*args, cwd=tmp_path))


def test_a_key_that_writes_through_none_of_its_allowed_tools_may_decide_unwarned(tmp_path):
    said = made(create("--demo", "--scope", "catalogue.products:write", "--scope",
                       "system.confirmations:decide", "--allow", "catalogue.list_products",
                       "--scope", "catalogue.products:read", cwd=tmp_path))  # fmt: skip
    assert "warning" not in said
    assert "checked against no tools" not in said


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--scope", "system.confirmation:decide"],
            "warning: turnkit knows no scope 'system.confirmation:decide': the system scopes a"
            " key may carry are 'system.audit:read', 'system.confirmations:decide'",
        ),
        (
            ["--scope", "catalogue.products:write", "--scope", "system.confirmations:decide"],
            "warning: the key carries 'catalogue.products:write', by its name a scope of write"
            " tools, and may decide held writes ('system.confirmations:decide'): a client holding"
            " it could approve its own held writes",
        ),
    ],
    ids=["unknown-system-scope", "write-and-decide-by-name"],
)
def test_without_modules_a_key_is_checked_by_its_scopes_names_and_says_so(tmp_path, args, said):
    out = made(create(*args, cwd=tmp_path))
    assert said in out
    assert (
        "no --module, --entry-points or --demo: the scopes and --allow were checked against no"
        " tools" in out
    )


def test_json_create_keeps_its_warnings_off_the_json(tmp_path):
    done = create("--demo", "--scope", "catalogue.products:raed", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert SECRET.fullmatch(json.loads(done.stdout)["secret"])
    assert "no loaded tool uses the scope 'catalogue.products:raed'" in " ".join(
        done.stderr.split()
    )


def test_a_module_that_does_not_load_makes_no_key(tmp_path):
    done = create("--module", "no_such_pkg:Thing", "--scope", "shop.products:read", cwd=tmp_path)
    assert done.returncode == 2
    assert "--module 'no_such_pkg:Thing': no module 'no_such_pkg'" in " ".join(done.stdout.split())
    assert "no keys yet" in keys("list", db=str(tmp_path / "t.sqlite"), cwd=tmp_path).stdout
