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
from turnkit.registry.ledger import open_ledger

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
    (row,) = json.loads(keys("list", "--json", db=ledger_url, cwd=tmp_path).stdout)
    assert row["id"] == key.id
    assert "secret" not in row

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
