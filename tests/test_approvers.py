"""What a hold keeps for its approvers, and writes that need more than one: previews (run as a
dry run, bounded, never shown to the model), the request and the key's name, quorum and separate
duties enforced by the ledger, two processes racing the last approval (exactly one run)."""

from __future__ import annotations

import asyncio
import multiprocessing

import pytest

import _vault
from _vault import Vault
from turnkit import Caller, Decision, Executor, Quorum, Registry, Settings, StaticPermissions, Tool

ALICE = Caller.session("alice")
BOB = Caller.session("bob")
CAROL = Caller.session("carol")


@pytest.fixture
def vault(tmp_path) -> Vault:
    return Vault(tmp_path / "vault.log")


@pytest.fixture
def ex(ledger, vault, clock):
    executor = Executor(
        Registry([vault]),
        ledger=ledger,
        permissions=StaticPermissions(_vault.RIGHTS),
        settings=Settings(handler_timeout=2.0, preview_timeout=0.5),
        clock=clock,
    )
    ledger.set_setting("api_session_write_modules", ["vault"])
    yield executor
    executor.close()


def hold(ex, tool="vault.move_funds", amount=100, note=None, caller=ALICE, **kwargs):
    args = {"account": "ops", "amount": amount} | ({} if note is None else {"note": note})
    answer = ex.call(caller, tool, args, **kwargs)
    assert answer.status == "confirmation_required", answer
    return answer.confirmation_id


# --- previews ---------------------------------------------------------------------------------


def test_a_held_call_stores_its_preview_and_the_model_never_sees_it(ex, vault):
    answer = ex.execute(ALICE, "vault.move_funds", {"account": "ops", "amount": 120})
    assert set(answer) == {"executed", "status", "confirmation_id", "expires_at"}
    held = ex.ledger.get_confirmation(answer["confirmation_id"])
    assert held.preview.value == {"account": "ops", "before": 500, "after": 380}
    assert held.preview.unavailable is None
    assert not held.preview.truncated
    assert vault.writes() == []
    assert vault.previews == 1


def test_a_tool_without_preview_stores_none(ex):
    held = ex.ledger.get_confirmation(hold(ex, "vault.pay_invoice", amount=5))
    assert held.preview is None


@pytest.mark.parametrize(
    ("note", "why"),
    [
        ("fail", "it failed: RuntimeError: the notes service is down"),
        ("slow", "it took longer than 0.5 s (setting 'preview_timeout')"),
        ("not json", "it was not JSON data"),
    ],
)
def test_a_failing_slow_or_odd_preview_never_blocks_the_hold(ex, note, why):
    held = ex.ledger.get_confirmation(hold(ex, "vault.set_note", note=note))
    assert held.status == "pending"
    assert held.preview.value is None
    assert held.preview.unavailable.startswith(why)


def test_a_large_preview_is_cut_to_the_result_limit(ex):
    ex.ledger.set_setting("agent_tool_result_chars", 1000)
    held = ex.ledger.get_confirmation(hold(ex, "vault.set_note", note="big"))
    assert held.preview.truncated
    assert len(held.preview.value) == 1000
    assert held.preview.value.startswith('{"text":"xxx')


def test_an_async_preview_runs_in_every_mode(ex):
    held = ex.ledger.get_confirmation(hold(ex, "vault.set_memo", note="hi"))
    assert held.preview.value == {"async": "hi"}

    async def run():
        answer = await ex.acall(ALICE, "vault.set_memo", {"account": "ops", "amount": 1})
        return ex.ledger.get_confirmation(answer.confirmation_id)

    assert asyncio.run(run()).preview.value == {"async": ""}


def test_an_async_call_stores_a_sync_preview_too(ex):
    async def run():
        answer = await ex.acall(ALICE, "vault.move_funds", {"account": "payroll", "amount": 1})
        return ex.ledger.get_confirmation(answer.confirmation_id)

    assert asyncio.run(run()).preview.value == {"account": "payroll", "before": 9000, "after": 8999}


def test_a_dry_run_and_a_read_run_no_preview(ex, vault):
    answer = ex.call(ALICE, "vault.move_funds", {"account": "ops", "amount": 1}, {"dry_run": True})
    assert answer.status == "dry_run"
    assert vault.previews == 0


def test_a_bad_preview_declaration_is_refused():
    problems = Tool.problems(
        name="vault.set_x", scope="vault.x:write", permission="p", handler=lambda i, c: 1,
        preview="not a function", approvals=11, separate_duties=1,
    )  # fmt: skip
    assert any(p.startswith("preview:") for p in problems)
    assert any(p.startswith("approvals:") for p in problems)
    assert any(p.startswith("separate_duties:") for p in problems)
    with pytest.raises(ValueError, match="approvals"):
        Quorum(0)


# --- request and caller name ------------------------------------------------------------------


def test_the_request_and_the_thread_are_kept_bounded(ex):
    request = {"user": "move 100 from ops " + "!" * 3000, "model": "I will move it.", "x": "y"}
    cid = hold(ex, thread="t-1", request=request)
    held = ex.ledger.get_confirmation(cid)
    assert held.thread_id == "t-1"
    assert held.request == {"user": request["user"][:2000], "model": "I will move it."}
    assert ex.ledger.list_confirmations(thread="t-1")[0].id == cid


def test_a_keys_name_and_user_are_kept_with_its_hold(ex):
    key, _ = ex.ledger.keys.create("alice", ["vault.funds:write"], name="billing bot")
    cid = hold(ex, "vault.pay_invoice", amount=5000, caller=key.caller)
    held = ex.ledger.get_confirmation(cid)
    assert held.caller_name == "billing bot"
    assert held.caller_label() == f"key {key.id} (billing bot) of alice"
    assert ex.ledger.get_confirmation(hold(ex)).caller_label() == "alice (signed in)"


def test_a_key_name_is_checked():
    from turnkit import CallerError, MemoryLedger

    with pytest.raises(CallerError, match="name"):
        MemoryLedger().keys.create("alice", [], name="  ")


# --- quorum and separate duties ---------------------------------------------------------------


def test_two_distinct_people_must_approve_and_the_caller_may_not(ex, vault):
    cid = hold(ex)
    held = ex.ledger.get_confirmation(cid)
    assert (held.approvals_needed, held.separate_duties, held.approvals_given) == (2, True, 0)

    mine = ex.decide(cid, ALICE, "approve")
    assert mine.status == "error"
    assert mine.code == "forbidden"
    assert "separate duties" in mine.message
    first = ex.decide(cid, BOB, "approve")
    assert first.to_json()["approvals"] == {"given": 1, "needed": 2}
    again = ex.decide(cid, BOB, "approve")  # the same person twice is still one
    assert again.to_json()["approvals"] == {"given": 1, "needed": 2}
    assert vault.writes() == []
    assert ex.ledger.get_confirmation(cid).status == "pending"
    assert [a.by for a in ex.ledger.get_confirmation(cid).approvals] == ["user:bob"]

    done = ex.decide(cid, CAROL, "approve")
    assert done.to_json() == {"executed": True, "status": "ok", "result": {"done": True}}
    assert len(vault.writes()) == 1
    assert ex.decide(cid, BOB, "approve").already_decided


def test_two_keys_of_one_person_are_one_approver(ex, vault):
    cid = hold(ex)
    bob_key = Caller.key("k-b1", user_id="bob", scopes={"system.confirmations:decide"})
    assert ex.decide(cid, BOB, "approve").approvals_given == 1
    assert ex.decide(cid, bob_key, "approve").approvals_given == 1
    assert vault.writes() == []


def test_anyone_who_may_decide_rejects_at_once_the_caller_too(ex, vault):
    cid = hold(ex)
    assert ex.decide(cid, BOB, "approve").approvals_given == 1
    answer = ex.decide(cid, ALICE, Decision.reject("changed my mind"))
    assert answer.status == "rejected"
    assert vault.writes() == []
    assert ex.ledger.get_confirmation(cid).status == "rejected"


def test_an_edit_resets_the_approvals_given_for_the_old_input(ex, vault):
    cid = hold(ex)
    assert ex.decide(cid, BOB, "approve").approvals_given == 1
    edited = ex.decide(cid, CAROL, Decision.edit({"account": "ops", "amount": 50}))
    assert edited.to_json()["approvals"] == {"given": 1, "needed": 2}  # carol's, for the new input
    assert ex.ledger.get_confirmation(cid).input == {"account": "ops", "amount": 50}
    assert vault.writes() == []
    ran = ex.decide(cid, BOB, "approve")
    assert ran.status == "ok"
    assert vault.writes()[0]["input"] == {"account": "ops", "amount": 50}


def test_a_danger_check_may_ask_for_a_quorum(ex, vault):
    key = Caller.key("k-a", user_id="alice", scopes={"vault.funds:write"})
    small = ex.call(key, "vault.pay_invoice", {"account": "ops", "amount": 10})
    assert small.status == "ok"
    cid = hold(ex, "vault.pay_invoice", amount=5000, caller=key)
    held = ex.ledger.get_confirmation(cid)
    assert (held.approvals_needed, held.separate_duties) == (2, True)
    assert ex.decide(cid, Caller.session("alice"), "approve").code == "forbidden"


def test_quorum_in_async_decisions(ex, vault):
    cid = hold(ex)

    async def run():
        first = await ex.adecide(cid, BOB, "approve")
        second = await ex.adecide(cid, CAROL, "approve")
        return first, second

    first, second = asyncio.run(run())
    assert first.approvals_given == 1
    assert second.status == "ok"
    assert len(vault.writes()) == 1


def test_an_expired_quorum_runs_nothing(ex, vault, clock):
    cid = hold(ex)
    assert ex.decide(cid, BOB, "approve").approvals_given == 1
    clock.now += 7200
    late = ex.decide(cid, CAROL, "approve")
    assert late.code == "confirmation_expired"
    assert vault.writes() == []


def test_two_processes_racing_the_last_approval_run_it_once(ledger_url, tmp_path):
    log = str(tmp_path / "vault.log")
    ex = _vault.vault_executor(ledger_url, log)
    ex.ledger.set_setting("api_session_write_modules", ["vault"])
    try:
        for _ in range(3):  # a few rounds: the race must never run a write twice
            cid = hold(ex)
            ctx = multiprocessing.get_context("spawn")
            barrier, results = ctx.Barrier(2), ctx.Queue()
            workers = [
                ctx.Process(
                    target=_vault.approve_as, args=(ledger_url, log, cid, who, barrier, results)
                )
                for who in ("bob", "carol")
            ]
            for worker in workers:
                worker.start()
            answers = dict(results.get(timeout=120) for _ in workers)
            for worker in workers:
                worker.join(60)
            ran = [  # the other learns the stored outcome, or that it waited for one more
                who
                for who, answer in answers.items()
                if answer.get("status") == "ok" and not answer.get("already_decided")
            ]
            assert len(ran) == 1, answers
            assert ex.ledger.get_confirmation(cid).status == "done"
        assert len(Vault(tmp_path / "vault.log").writes()) == 3
    finally:
        ex.close()
        ex.ledger.close()


# --- an edit asks again what its new input needs ----------------------------------------------


def test_an_edit_that_would_need_a_quorum_gets_one_and_its_caller_may_not_make_it(ex, vault):
    cid = hold(ex, "vault.pay_invoice", amount=500)  # a session's write: held, one approval
    assert ex.ledger.get_confirmation(cid).approvals_needed == 1
    big = Decision.edit({"account": "ops", "amount": 5000})
    mine = ex.decide(cid, ALICE, big)
    assert mine.code == "forbidden"
    assert "separate duties" in mine.message
    assert ex.ledger.get_confirmation(cid).input["amount"] == 500
    first = ex.decide(cid, BOB, big)  # the danger check asks two people for 5000
    assert first.to_json()["approvals"] == {"given": 1, "needed": 2}
    held = ex.ledger.get_confirmation(cid)
    assert (held.approvals_needed, held.separate_duties) == (2, True)
    assert held.input["amount"] == 5000
    assert vault.writes() == []
    assert ex.decide(cid, ALICE, "approve").code == "forbidden"
    assert ex.decide(cid, CAROL, "approve").status == "ok"
    assert [w["input"]["amount"] for w in vault.writes()] == [5000]


def test_a_small_edit_of_a_one_approval_hold_still_runs_at_once(ex, vault):
    cid = hold(ex, "vault.pay_invoice", amount=500)
    answer = ex.decide(cid, ALICE, Decision.edit({"account": "ops", "amount": 400}))
    assert answer.status == "ok"
    assert [w["input"]["amount"] for w in vault.writes()] == [400]


def test_an_edit_gets_the_preview_of_its_new_input(ex, vault):
    cid = hold(ex, amount=100)
    before = ex.ledger.get_confirmation(cid).preview.value
    assert before == {"account": "ops", "before": 500, "after": 400}
    ex.decide(cid, BOB, Decision.edit({"account": "payroll", "amount": 1}))
    after = ex.ledger.get_confirmation(cid).preview.value
    assert after == {"account": "payroll", "before": 9000, "after": 8999}


def test_a_one_approval_edit_keeps_the_preview_of_what_ran(ex):
    cid = hold(ex, "vault.set_note", note="first")
    ex.decide(cid, ALICE, Decision.edit({"account": "ops", "amount": 1, "note": "second"}))
    assert ex.ledger.get_confirmation(cid).preview.value == {"note": "second"}


def test_an_edit_in_a_quorum_is_recorded_as_the_decision_and_the_report_counts_it(ex, vault):
    from turnkit.ledger.report import approval_report  # internal: the report has no public name

    cid = hold(ex)
    ex.decide(cid, BOB, Decision.edit({"account": "ops", "amount": 50}))
    assert ex.decide(cid, CAROL, "approve").status == "ok"
    held = ex.ledger.get_confirmation(cid)
    assert held.decision == {"action": "edit", "arguments": {"account": "ops", "amount": 50}}
    (row,) = approval_report(ex.ledger, now=ex.clock())
    assert (row.approved, row.edited) == (0, 1)


def test_an_approval_of_arguments_edited_since_the_person_looked_is_refused(ex, vault):
    cid = hold(ex)
    looked = ex.ledger.get_confirmation(cid).input_hash  # what carol's page shows
    ex.decide(cid, BOB, Decision.edit({"account": "payroll", "amount": 5000}))
    stale = ex.decide(cid, CAROL, "approve", seen=looked)
    assert stale.code == "arguments_changed"
    assert "edited by someone else since you looked" in stale.message
    held = ex.ledger.get_confirmation(cid)
    assert [a.by for a in held.approvals] == ["user:bob"]
    assert vault.writes() == []
    assert ex.decide(cid, CAROL, "approve", seen=held.input_hash).status == "ok"
    assert [w["input"]["amount"] for w in vault.writes()] == [5000]


def test_a_single_approval_checks_what_the_person_saw_too(ex, vault):
    cid = hold(ex, "vault.pay_invoice", amount=5)
    assert ex.decide(cid, ALICE, "approve", seen="0" * 64).code == "arguments_changed"
    assert ex.confirm(cid, ALICE, "reject", seen="0" * 64)["status"] == "rejected"  # always
    assert vault.writes() == []
