"""``turnkit confirmations show ID``: one confirmation whole, as an approver needs it — tool, who
asked, thread, times, arguments, preview (or why there is none), the request that led to it,
approvals, decision, outcome and the audit trail; ``--json`` for scripts.

Reaches ``turnkit.ledger.records`` for ``Preview`` (a stored preview has no public name): the
confirmations with a preview, an unavailable one and a request are stored as the executor stores
them, then read by the real ``turnkit`` command.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest

import _review_app
from _shop import prices
from test_cli import TURNKIT, UUID, env, flat
from turnkit import Caller, Confirmation, Executor, Registry, StaticPermissions, open_ledger
from turnkit.ledger.records import Preview

pytestmark = pytest.mark.slow  # end to end: skip locally with -m 'not slow'

KEY = Caller.key("key_0a1b2c3d", user_id="alice", scopes={"shop.products:write"})


def show(db: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TURNKIT, "confirmations", "show", *args, "--db", db], cwd=cwd,
                          env=env(), capture_output=True, text=True, timeout=120)  # fmt: skip


def stored(ledger, **fields) -> str:
    """A pending confirmation of a price change held under alice's key, with ``fields``."""
    now = time.time()
    cid = str(uuid.uuid4())
    given = {"id": cid, "caller": KEY, "tool": "shop.set_prices", "input": prices("TEA-0001"),
             "input_hash": "h1", "idempotency_key": None, "status": "pending",
             "created_at": now - 300, "expires_at": now + 3300} | fields  # fmt: skip
    ledger.create_confirmation(Confirmation(**given))
    return cid


def test_show_prints_the_preview_the_request_the_key_and_the_approvals(ledger_url, tmp_path):
    ledger = open_ledger(ledger_url)
    try:
        cid = stored(
            ledger,
            thread_id="chat-42",
            caller_name="billing bot",
            preview=Preview(value=[{"sku": "TEA-0001", "before": 4.5, "after": 5.0}]),
            request={"user": "Make tea 5 euros.", "model": "I will set the price of TEA-0001."},
            approvals_needed=2,
            separate_duties=True,
        )
        assert ledger.add_approval(cid, "session:bob", "h1", time.time())
    finally:
        ledger.close()
    done = show(ledger_url, tmp_path, cid[:8])
    assert done.returncode == 0, done.stdout + done.stderr
    out = flat(done.stdout)
    assert f"{cid} · pending" in out
    assert "asked by key key_0a1b2c3d (billing bot) of alice" in out
    assert "thread chat-42" in out
    assert '"sku": "TEA-0001"' in out
    assert '"before": 4.5, "after": 5.0' in out.replace("\n", "")
    assert "person said Make tea 5 euros." in out
    assert "model said I will set the price of TEA-0001." in out
    assert "approvals 1 of 2; the caller may not approve it (separate duties)" in out
    assert "approved by session:bob at" in out
    assert "decision - (waiting)" in out
    as_json = json.loads(show(ledger_url, tmp_path, cid, "--json").stdout)
    assert as_json["preview"] == {"value": [{"sku": "TEA-0001", "before": 4.5, "after": 5.0}]}
    assert as_json["request"]["user"] == "Make tea 5 euros."
    assert as_json["caller_label"] == "key key_0a1b2c3d (billing bot) of alice"
    assert as_json["approvals"]["given"] == 1
    assert as_json["approvals"]["needed"] == 2
    assert as_json["approvals"]["by"][0]["by"] == "session:bob"


def test_show_says_when_there_is_no_preview_or_it_was_unavailable(tmp_path):
    db = str(tmp_path / "ledger.sqlite")
    ledger = open_ledger(db)
    try:
        none = stored(ledger)
        slow = stored(ledger, preview=Preview(unavailable="the preview took longer than 2 s"))
        cut = stored(ledger, preview=Preview(value='[{"sku": "TEA-0001", "bef', truncated=True))
    finally:
        ledger.close()
    assert "preview none (its tool declares no preview)" in flat(show(db, tmp_path, none).stdout)
    assert "request - (no conversation's words were recorded)" in flat(
        show(db, tmp_path, none).stdout
    )
    out = flat(show(db, tmp_path, slow).stdout)
    assert "preview unavailable: the preview took longer than 2 s" in out
    assert json.loads(show(db, tmp_path, slow, "--json").stdout)["preview"] == {
        "unavailable": "the preview took longer than 2 s"
    }
    assert 'preview (cut to fit) [{"sku": "TEA-0001", "bef' in flat(show(db, tmp_path, cut).stdout)


def test_show_of_a_decided_one_has_its_decision_outcome_and_audit_trail(tmp_path, shop):
    db = str(tmp_path / "ledger.sqlite")
    ledger = open_ledger(db)
    rights = StaticPermissions({"alice": {"shop.view", "shop.manage"}})
    executor = Executor(Registry([shop]), ledger=ledger, permissions=rights)
    try:
        ledger.set_setting("api_session_write_modules", ["shop"])
        alice = Caller.session("alice")
        ran = executor.execute(alice, "shop.set_prices", prices())["confirmation_id"]
        executor.confirm(ran, alice, "approve")
        no = executor.execute(alice, "shop.delete_product", {"sku": "TEA-0001"})
        executor.confirm(no["confirmation_id"], alice, {"action": "reject", "message": "keep it"})
    finally:
        executor.close()
        ledger.close()
    out = flat(show(db, tmp_path, ran).stdout)
    assert "· approved: ok" in out
    assert "decision approved by session:alice at" in out
    assert 'outcome the write ran: {"updated": 1}' in out
    trail = out[out.index("audit:") :]
    assert trail.index("confirmation_required") < trail.index(" ok ")  # oldest first
    rejected = flat(show(db, tmp_path, no["confirmation_id"]).stdout)
    assert "decision rejected by session:alice at" in rejected
    assert "keep it" in rejected
    assert "outcome rejected, nothing ran: keep it" in rejected
    audit = json.loads(show(db, tmp_path, ran, "--json").stdout)["audit"]
    assert [row["status"] for row in audit] == ["confirmation_required", "ok"]
    assert len(shop.writes()) == 1  # showing runs nothing


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("0000aaaa", "no confirmation '0000aaaa': `turnkit confirmations list --all` shows them"),
        ("ab", "'ab' is too short: give the id, or its first 4 characters or more"),
        ("not an id!", "no confirmation 'not an id!'"),
    ],
)
def test_show_of_an_unknown_id_says_what_to_do_without_a_traceback(tmp_path, given, said):
    done = show(str(tmp_path / "ledger.sqlite"), tmp_path, given)
    assert done.returncode == 2
    assert said in flat(done.stdout)
    assert "Traceback" not in done.stdout + done.stderr


def test_show_of_an_ambiguous_prefix_asks_for_more(tmp_path):
    db = str(tmp_path / "ledger.sqlite")
    ledger = open_ledger(db)
    try:
        for tail in ("1", "2"):
            stored(ledger, id=f"abcd0000-0000-4000-8000-00000000000{tail}")
    finally:
        ledger.close()
    done = show(db, tmp_path, "abcd")
    assert done.returncode == 2
    assert "'abcd' is the start of several confirmations" in flat(done.stdout)


def test_show_of_writes_held_by_the_executor_has_their_preview_or_why_not(tmp_path, monkeypatch):
    """``_review_app``'s price write previews before and after; its drop's preview fails."""
    monkeypatch.setenv("TURNKIT_TEST_APP_DIR", str(tmp_path))
    db = str(tmp_path / "ledger.sqlite")
    ledger = open_ledger(db)
    rights = StaticPermissions({"alice": {"shop.manage"}})
    executor = Executor(Registry([_review_app.Review]), ledger=ledger, permissions=rights)
    try:
        ledger.set_setting("api_session_write_modules", ["review"])
        alice = Caller.session("alice")
        priced = executor.execute(alice, "review.set_price", {"sku": "TEA-0001", "price": 5.0})
        dropped = executor.execute(alice, "review.drop_item", {"sku": "TEA-0001"})
    finally:
        executor.close()
        ledger.close()
    out = show(db, tmp_path, priced["confirmation_id"]).stdout
    assert '"before": 4.5,' in out
    assert '"after": 5.0' in out
    assert "approvals 0 of 2; the caller may not approve it (separate duties)" in flat(out)
    out = flat(show(db, tmp_path, dropped["confirmation_id"]).stdout)
    assert "preview unavailable: it failed: LookupError: the catalogue is offline" in out


@pytest.mark.parametrize("columns", ["160", "60"])  # the table, or one block per confirmation
def test_show_takes_the_id_list_prints(tmp_path, columns):
    db = str(tmp_path / "ledger.sqlite")
    ledger = open_ledger(db)
    try:
        cid = stored(ledger)
    finally:
        ledger.close()
    listed = subprocess.run([TURNKIT, "confirmations", "list", "--db", db], cwd=tmp_path,
                            env=env() | {"COLUMNS": columns}, capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    (printed,) = UUID.findall(listed.stdout)
    assert printed == cid
    done = show(db, tmp_path, printed)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{cid} · pending" in done.stdout
