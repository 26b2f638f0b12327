"""A write held under an API key ends with the key (docs/architecture.md §4: a revoked key's holds
never run).

Deciding re-checks the key in the ledger: revoked or expired, the confirmation is closed
``forbidden`` (reason "key revoked" / "key expired") and nothing runs, whoever approves. The write
otherwise runs with the key as it is now. ``Executor.end_key_holds`` (what ``turnkit keys
revoke`` calls) closes them all at once, giving back the units their holds reserved."""

from __future__ import annotations

import json
import subprocess

import pytest

from _shop import prices
from test_cli import TURNKIT, env
from turnkit import Caller
from turnkit.executor.steps import window_start  # internal: names a rate-limit window

DELETE = {"sku": "TEA-0001"}


@pytest.fixture
def root() -> Caller:
    return Caller.session("root")  # holds system.confirm_any (conftest's rights)


@pytest.fixture
def made(executor, clock):
    """Alice's key as the ledger keeps it (``ledger.keys``), and its caller."""
    key, _ = executor.ledger.keys.create(
        "alice", {"shop.products:write"}, expires_in=600, now=clock.now
    )
    return key


def hold(executor, key) -> str:
    return executor.execute(key.caller, "shop.delete_product", DELETE)["confirmation_id"]


def assert_closed_forbidden(executor, cid: str, reason: str) -> None:
    closed = executor.confirmation(cid)
    assert closed.status == "forbidden"
    assert closed.outcome["error"]["code"] == "forbidden"
    assert closed.outcome["error"]["details"]["reason"] == reason


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_revoked_keys_held_write_never_runs_whoever_approves(
    executor, made, root, shop, clock, mode
):
    cid = hold(executor, made)
    assert executor.ledger.keys.revoke(made.id, now=clock.now)
    if mode == "sync":
        answer = executor.confirm(cid, root, "approve")
    else:
        answer = await executor.aconfirm(cid, root, "approve")
    assert answer["error"]["code"] == "forbidden"
    assert f"the key {made.id} was revoked" in answer["error"]["message"]
    assert_closed_forbidden(executor, cid, "key revoked")
    assert shop.writes() == []
    assert executor.confirm(cid, root, "approve")["already_decided"] is True  # settled
    assert shop.writes() == []


def test_an_expired_keys_held_write_never_runs(executor, made, root, shop, clock):
    cid = hold(executor, made)
    clock.now += 601  # the key expired; its hold has not (an hour)
    answer = executor.confirm(cid, root, {"action": "edit", "arguments": {"sku": "TEA-0002"}})
    assert "expired" in answer["error"]["message"]
    assert_closed_forbidden(executor, cid, "key expired")
    assert shop.writes() == []


def test_a_revoked_keys_hold_may_still_be_rejected(executor, made, root, clock):
    cid = hold(executor, made)
    executor.ledger.keys.revoke(made.id, now=clock.now)
    assert executor.confirm(cid, root, "reject")["status"] == "rejected"


def test_a_live_keys_write_runs_with_the_key_as_the_ledger_has_it_now(executor, made, root, shop):
    cid = hold(executor, made)
    assert executor.confirm(cid, root, "approve")["status"] == "ok"
    assert len(shop.writes()) == 1


def test_a_key_the_application_keeps_itself_is_decided_as_before(executor, key, root, shop):
    cid = executor.execute(key, "shop.delete_product", DELETE)["confirmation_id"]  # not in ledger
    assert executor.confirm(cid, root, "approve")["status"] == "ok"
    assert len(shop.writes()) == 1


def test_ending_a_revoked_keys_holds_closes_them_all_and_gives_their_units_back(
    executor, made, clock, shop
):
    executor.ledger.set_setting("rate_limit_units", 2)
    first, second = hold(executor, made), hold(executor, made)
    window = window_start(clock.now, 60)
    assert executor.ledger.usage(made.caller.identity, window) == 2
    assert executor.end_key_holds(made) == 0  # the key still works: nothing ends
    executor.ledger.keys.revoke(made.id, now=clock.now)
    revoked = executor.ledger.keys.get(made.id)
    assert executor.end_key_holds(revoked) == 2
    for cid in (first, second):
        assert_closed_forbidden(executor, cid, "key revoked")
    assert executor.ledger.usage(made.caller.identity, window) == 0
    assert executor.ledger.usage("user:alice", window) == 0
    assert executor.end_key_holds(revoked) == 0
    assert shop.writes() == []


@pytest.mark.slow
def test_turnkit_keys_revoke_closes_the_keys_pending_holds(executor, made, tmp_path, ledger_url):
    cid = hold(executor, made)
    session = executor.execute(Caller.session("alice"), "shop.list_products", {})
    assert session["status"] == "ok"  # someone else's use is untouched
    done = subprocess.run([TURNKIT, "keys", "revoke", made.id, "--db", ledger_url], cwd=tmp_path,
                          env=env(), capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 write(s) it made that waited for a person are closed" in done.stdout
    assert_closed_forbidden(executor, cid, "key revoked")
    listed = subprocess.run([TURNKIT, "confirmations", "list", "--all", "--json", "--db",
                             ledger_url], cwd=tmp_path, env=env(), capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    (row,) = json.loads(listed.stdout)
    assert row["status"] == "forbidden"


def test_a_session_hold_is_not_touched_by_a_keys_revocation(executor, made, alice, clock):
    executor.ledger.set_setting("api_session_write_modules", ["shop"])
    cid = executor.execute(alice, "shop.set_prices", prices())["confirmation_id"]
    executor.ledger.keys.revoke(made.id, now=clock.now)
    assert executor.end_key_holds(executor.ledger.keys.get(made.id)) == 0
    assert executor.confirmation(cid).status == "pending"


def test_a_key_revoked_between_the_check_and_the_claim_still_stops_the_write(
    executor, made, root, shop, clock, monkeypatch
):
    """The decider looked at the key (it worked), then ``turnkit keys revoke`` ran before the
    claim: the claim is conditional on the key, so the write never runs."""
    cid = hold(executor, made)
    claim = executor.ledger.claim_confirmation

    def revoked_first(*args, **kwargs):
        executor.ledger.keys.revoke(made.id, now=clock.now)
        return claim(*args, **kwargs)

    monkeypatch.setattr(executor.ledger, "claim_confirmation", revoked_first)
    answer = executor.confirm(cid, root, "approve")
    assert answer["error"]["details"]["reason"] == "key revoked"
    assert_closed_forbidden(executor, cid, "key revoked")
    assert shop.writes() == []
