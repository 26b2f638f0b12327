"""Held writes: approve, reject, edit, who may decide, expiry, revoked rights, two processes."""

from __future__ import annotations

import multiprocessing

import pytest

import _workers
from _shop import prices
from turnkit import Caller, Decision
from turnkit.executor.confirmations import DECIDE_SCOPE  # internal: the scope has no public name


@pytest.fixture
def held(executor, alice):
    """Alice's agent may act in the shop; her write of TEA-0001 waits for her."""
    executor.ledger.set_setting("api_session_write_modules", ["shop"])
    answer = executor.execute(alice, "shop.set_prices", prices("TEA-0001"))
    assert answer["status"] == "confirmation_required"
    return answer["confirmation_id"]


def test_approve_runs_the_held_write_once_and_answers_its_result(executor, alice, shop, held):
    assert shop.writes() == []
    answer = executor.confirm(held, alice, "approve")
    assert answer == {"executed": True, "status": "ok", "result": {"updated": 1}}
    assert len(shop.writes()) == 1
    assert shop.writes()[0]["caller"] == "session:alice"


def test_deciding_again_returns_the_stored_outcome_and_runs_nothing(executor, alice, shop, held):
    first = executor.confirm(held, alice, Decision.approve())
    late = {**first, "already_decided": True}  # the stored outcome, marked as not this decision
    assert executor.confirm(held, alice, "approve") == late
    assert executor.confirm(held, alice, "reject") == late
    assert len(shop.writes()) == 1


def test_reject_runs_nothing_and_keeps_the_message(executor, alice, shop, held):
    answer = executor.confirm(held, alice, Decision.reject("not today"))
    assert answer == {"executed": False, "status": "rejected", "message": "not today"}
    assert shop.writes() == []
    assert executor.confirm(held, alice, "approve") == {**answer, "already_decided": True}
    assert executor.ledger.get_confirmation(held).status == "rejected"


def test_edit_runs_the_new_input_for_the_same_tool(executor, alice, shop, held):
    answer = executor.confirm(held, alice, Decision.edit(prices("TEA-0002", "TEA-0003")))
    assert answer["result"] == {"updated": 2}
    assert shop.writes()[0]["input"] == prices("TEA-0002", "TEA-0003")
    stored = executor.ledger.get_confirmation(held)
    assert stored.decision == {"action": "edit", "arguments": prices("TEA-0002", "TEA-0003")}


def test_an_invalid_edit_is_refused_and_the_confirmation_stays_pending(executor, alice, shop, held):
    answer = executor.confirm(
        held, alice, {"action": "edit", "arguments": {"prices": [{"sku": "x"}]}}
    )
    assert answer["error"]["code"] == "invalid_input"
    assert answer["error"]["message"].startswith("the edit was not applied: ")
    assert executor.ledger.get_confirmation(held).status == "pending"
    assert executor.confirm(held, alice, "approve")["status"] == "ok"
    assert shop.writes()[0]["input"] == prices("TEA-0001")


def test_an_edit_can_never_switch_tools(executor, alice, shop, held):
    decision = {"action": "edit", "arguments": {"sku": "TEA-0001"}, "tool": "shop.delete_product"}
    answer = executor.confirm(held, alice, decision)
    assert answer["error"]["code"] == "invalid_input"
    assert executor.ledger.get_confirmation(held).status == "pending"
    assert shop.writes() == []


@pytest.mark.parametrize(
    "decision",
    [
        "yes",
        42,
        {"action": "maybe"},
        {"action": "edit"},
        {"action": "approve", "arguments": {}},
        {"action": "edit", "input": {}},  # one word for the new input: arguments
        {"action": "approve", "message": "x"},
        {"action": "reject", "message": 5},
    ],
)
def test_a_malformed_decision_is_refused_and_nothing_is_applied(executor, alice, held, decision):
    answer = executor.confirm(held, alice, decision)
    assert answer["error"]["code"] == "invalid_input"
    assert answer["error"]["message"].startswith("invalid decision: ")
    assert executor.ledger.get_confirmation(held).status == "pending"


def test_an_unknown_confirmation_is_not_found(executor, alice):
    assert executor.confirm("no-such-id", alice, "approve")["error"]["code"] == "not_found"
    assert executor.confirm(None, alice, "approve")["error"]["code"] == "not_found"


def test_only_the_held_caller_may_decide(executor, shop, held):
    answer = executor.confirm(held, Caller.session("bob"), "approve")
    assert answer["error"]["code"] == "forbidden"
    assert shop.writes() == []
    assert executor.ledger.get_confirmation(held).status == "pending"


def test_a_holder_of_confirm_any_may_decide_for_another(executor, shop, held):
    answer = executor.confirm(held, Caller.session("root"), "approve")
    assert answer["status"] == "ok"
    assert shop.writes()[0]["caller"] == "session:alice"  # it runs as the held caller


def test_a_key_of_a_confirm_any_owner_decides_for_another_only_with_the_decide_scope(
    executor, shop, held
):
    tool = executor.ledger.get_confirmation(held).tool
    read_only = Caller.key("k-read", user_id="root", scopes={"shop.products:read"})
    limited = Caller.key("k-lim", user_id="root", scopes={DECIDE_SCOPE})
    deciding = Caller.key("k-dec", user_id="root", scopes={DECIDE_SCOPE})
    refused = executor.confirm(held, read_only, "approve")
    assert refused["error"]["code"] == "forbidden"
    assert DECIDE_SCOPE in refused["error"]["message"]
    outside = executor.confirm(held, limited, "approve", allow={"shop.list_products"})
    assert "allow list" in outside["error"]["message"]
    assert shop.writes() == []
    assert executor.ledger.get_confirmation(held).status == "pending"
    assert executor.confirm(held, deciding, "approve", allow={tool})["status"] == "ok"
    assert len(shop.writes()) == 1


def test_a_permission_revoked_while_waiting_blocks_the_write(executor, alice, rights, shop, held):
    rights.revoke("alice", "shop.manage")
    answer = executor.confirm(held, alice, "approve")
    assert answer["error"]["code"] == "forbidden"
    assert shop.writes() == []
    assert executor.confirm(held, alice, "approve") == {**answer, "already_decided": True}
    closed = executor.ledger.get_confirmation(held)  # closed for good, the reason kept
    assert closed.status == "done"
    assert "shop.manage" in closed.outcome["error"]["message"]
    assert executor.pending() == []


def test_switching_the_agent_off_while_waiting_blocks_the_write(executor, alice, shop, held):
    executor.ledger.set_setting("api_session_write_modules", [])
    assert executor.confirm(held, alice, "approve")["error"]["code"] == "forbidden"
    assert shop.writes() == []


def test_an_expired_confirmation_runs_nothing(executor, alice, shop, clock, held):
    clock.now += 3601
    answer = executor.confirm(held, alice, "approve")
    assert answer["error"]["code"] == "confirmation_expired"
    assert shop.writes() == []
    assert executor.ledger.get_confirmation(held).status == "expired"
    assert executor.pending() == []


def test_the_ttl_setting_is_read_at_hold_time(executor, alice, clock):
    executor.ledger.set_setting("api_session_write_modules", ["shop"])
    executor.ledger.set_setting("confirmation_ttl", 60)
    answer = executor.execute(alice, "shop.set_prices", prices())
    clock.now += 61
    assert executor.confirm(answer["confirmation_id"], alice, "approve")["error"]["code"] == (
        "confirmation_expired"
    )


def test_a_confirm_token_cannot_be_forged(executor, key, shop):
    held = executor.execute(key, "shop.delete_product", {"sku": "TEA-0001"})
    cid = held["confirmation_id"]
    again = executor.execute(
        key, "shop.delete_product", {"sku": "TEA-0001"}, {"confirm_token": cid}
    )
    assert again["error"]["code"] == "forbidden"  # refused: neither run nor held again
    assert "runs nothing" in again["error"]["message"]
    assert [c.id for c in executor.ledger.list_confirmations()] == [cid]
    assert shop.writes() == []


async def test_async_confirm(executor, alice, shop, held):
    answer = await executor.aconfirm(held, alice, "approve")
    assert answer["status"] == "ok"
    assert len(shop.writes()) == 1


def test_two_processes_approving_at_once_run_the_write_exactly_once(
    executor, alice, shop, ledger_url, held
):
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    workers = [
        ctx.Process(
            target=_workers.approve, args=(ledger_url, str(shop.log), held, barrier, results)
        )
        for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    assert len(shop.writes()) == 1
    ran = {"executed": True, "status": "ok", "result": {"updated": 1}}
    assert sorted(outcomes, key=len) == [ran, {**ran, "already_decided": True}]  # one decided
    assert executor.ledger.get_confirmation(held).status == "done"


def test_an_approval_refused_by_the_rate_limit_stays_pending_and_can_be_approved_later(
    executor, alice, shop, clock
):
    executor.ledger.set_setting("rate_limit_units", 0)  # held with rate limits off: none reserved
    executor.ledger.set_setting("api_session_write_modules", ["shop"])
    held = executor.execute(alice, "shop.set_prices", prices("TEA-0001"))["confirmation_id"]
    executor.ledger.set_setting("rate_limit_units", 1)
    assert executor.execute(alice, "shop.list_products", {})["status"] == "ok"  # spends the window
    refused = executor.confirm(held, alice, "approve")
    assert refused["error"]["code"] == "rate_limited"
    assert "stays pending" in refused["error"]["message"]
    assert executor.ledger.get_confirmation(held).status == "pending"
    assert shop.writes() == []
    clock.now += 60
    assert executor.confirm(held, alice, "approve")["status"] == "ok"
    assert len(shop.writes()) == 1


async def test_an_approval_cancelled_mid_write_is_settled_as_unknown_not_stuck(
    ledger, rights, shop, clock
):
    import asyncio

    from turnkit import Executor, Registry, Settings

    started, release = asyncio.Event(), asyncio.Event()

    async def slow_delete(input, ctx):
        started.set()
        await release.wait()
        return {"deleted": input["sku"]}

    class Slow:
        key = "shop"

        def api_tools(self):
            rights = {"scope": "shop.products:write", "permission": "shop.manage"}
            return [{"name": "shop.delete_product", "handler": slow_delete, "danger": "always",
                     **rights}]  # fmt: skip

    executor = Executor(
        Registry([Slow()]), ledger=ledger, permissions=rights, clock=clock,
        settings=Settings(handler_timeout=5),
    )  # fmt: skip
    key = Caller.key("k", user_id="alice", scopes={"shop.products:write"})
    held = executor.execute(key, "shop.delete_product", {})["confirmation_id"]
    task = asyncio.create_task(executor.aconfirm(held, key, "approve"))
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert executor.ledger.get_confirmation(held).status == "running"
    clock.now += 10  # past handler_timeout and the grace: the run is over, its outcome unknown
    answer = await executor.aconfirm(held, key, "approve")
    assert answer["error"]["code"] == "outcome_unknown"
    assert executor.ledger.get_confirmation(held).status == "done"
    release.set()
    executor.close()


def test_a_key_whose_scope_was_removed_cannot_approve_its_held_write(executor, shop):
    key = Caller.key("k-7", user_id="alice", scopes={"shop.products:write"})
    held = executor.execute(key, "shop.delete_product", {"sku": "TEA-0001"})["confirmation_id"]
    narrowed = Caller.key("k-7", user_id="alice", scopes=set())
    answer = executor.confirm(held, narrowed, "approve")
    assert answer["error"]["code"] == "forbidden"
    assert "scope" in answer["error"]["details"]["reason"]
    assert shop.writes() == []


def test_an_edit_as_a_plain_object_names_its_new_input_arguments(executor, alice, shop, held):
    answer = executor.confirm(held, alice, {"action": "edit", "arguments": prices("TEA-0009")})
    assert answer["status"] == "ok"
    assert shop.writes()[0]["input"] == prices("TEA-0009")


def test_a_confirm_token_never_turns_a_dry_run_into_a_write(executor, key, shop):
    answer = executor.execute(
        key, "shop.delete_product", {"sku": "TEA-0001"}, {"dry_run": True, "confirm_token": "x"}
    )
    assert answer["dry_run"] is True
    assert shop.writes() == []


def test_an_allow_list_narrowed_while_waiting_blocks_the_write(executor, key, shop):
    held = executor.execute(key, "shop.delete_product", {"sku": "TEA-0001"})["confirmation_id"]
    answer = executor.confirm(held, key, "approve", allow=["shop.list_products"])
    assert answer["error"]["code"] == "forbidden"
    assert "allow list" in answer["error"]["details"]["reason"]
    assert shop.writes() == []


class Flaky:
    """A permission provider whose first answer is ``first`` (raised when an exception), and
    ``rights``' after that."""

    _UNSET = object()

    def __init__(self, rights, first) -> None:
        self.rights, self.first = rights, first

    def __call__(self, caller):
        first, self.first = self.first, self._UNSET
        if first is self._UNSET:
            return self.rights(caller)
        if isinstance(first, BaseException):
            raise first
        return first


@pytest.mark.parametrize(
    "first",
    [ConnectionError("role store down"), None, "shop.manage", KeyboardInterrupt()],
    ids=["raises", "answers-none", "answers-a-string", "ctrl-c-while-asking"],
)
def test_an_approval_whose_provider_fails_leaves_the_confirmation_pending(
    ledger, shop, rights, clock, first
):
    from turnkit import Executor, ProviderError, Registry

    ledger.set_setting("api_session_write_modules", ["shop"])
    alice = Caller.session("alice")
    holding = Executor(Registry([shop]), ledger=ledger, permissions=rights, clock=clock)
    cid = holding.execute(alice, "shop.set_prices", prices())["confirmation_id"]
    approving = Executor(
        Registry([shop]), ledger=ledger, permissions=Flaky(rights, first), clock=clock
    )
    raised = type(first) if isinstance(first, BaseException) else ProviderError
    with pytest.raises(raised):
        approving.confirm(cid, alice, "approve")
    assert ledger.get_confirmation(cid).status == "pending"  # nothing ran: decidable again
    assert shop.writes() == []
    assert approving.confirm(cid, alice, "approve")["status"] == "ok"
    assert len(shop.writes()) == 1
    holding.close()
    approving.close()


@pytest.mark.parametrize("field", ["dry_run", "confirm_token", "idempotency_key"])
def test_an_edit_carrying_a_control_field_is_refused_and_stays_pending(
    executor, alice, shop, held, field
):
    edited = {**prices(), field: True if field == "dry_run" else "x"}
    answer = executor.confirm(held, alice, {"action": "edit", "arguments": edited})
    assert answer["error"]["code"] == "invalid_input"
    assert f"['{field}'] are control fields" in answer["error"]["message"]
    assert executor.ledger.get_confirmation(held).status == "pending"
    assert shop.writes() == []
