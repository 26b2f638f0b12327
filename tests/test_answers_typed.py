"""Answers are typed values inside turnkit and the same JSON at its doors: each kind's JSON is
what the executor always answered, a stored answer reads back as the value it was, and the
public ``Executor.execute`` / ``confirm`` still return that JSON.

Reaches ``turnkit.executor.answers`` directly: the typed answers are the package's own values (its
doors match on them); the public API gives their JSON."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from _shop import prices
from turnkit import Caller, Confirmation
from turnkit.executor.answers import (
    Answer,
    DryRun,
    Held,
    Ran,
    Refused,
    Rejected,
    Unreadable,
    answer_from_json,
    shown_outcome,
    stored_outcome,
)

AT = "2027-01-15T08:00:00Z"

KINDS: list[tuple[Answer, dict[str, Any]]] = [
    (Ran({"updated": 2}), {"executed": True, "status": "ok", "result": {"updated": 2}}),
    (Ran(None), {"executed": True, "status": "ok", "result": None}),
    (
        Held("c-1", AT),
        {
            "executed": False,
            "status": "confirmation_required",
            "confirmation_id": "c-1",
            "expires_at": AT,
        },
    ),
    (
        DryRun(True, 3),
        {"executed": False, "dry_run": True, "would_hold": True, "cost": 3},
    ),
    (
        Rejected("too cheap"),
        {"executed": False, "status": "rejected", "message": "too cheap"},
    ),
    (
        Rejected(),
        {"executed": False, "status": "rejected", "message": "rejected by a person"},
    ),
    (
        Refused("forbidden", "no", {"reason": "key revoked"}),
        {
            "executed": False,
            "status": "error",
            "error": {"code": "forbidden", "message": "no", "details": {"reason": "key revoked"}},
        },
    ),
    (
        Refused("not_found", "no tool named 'x'"),
        {
            "executed": False,
            "status": "error",
            "error": {"code": "not_found", "message": "no tool named 'x'", "details": {}},
        },
    ),
]
"""Each kind, and the dict the builders of ``answers.py`` made for it before answers were typed."""


def _text(value: Any) -> str:
    """The JSON text a tool message or a response carries: key order included."""
    return json.dumps(value, separators=(",", ":"))


@pytest.mark.parametrize(("answer", "expected"), KINDS)
def test_each_kind_turns_into_the_json_the_executor_always_answered(answer, expected):
    assert _text(answer.to_json()) == _text(expected)


@pytest.mark.parametrize(("answer", "expected"), KINDS)
def test_the_marks_of_a_repeat_come_last_as_before(answer, expected):
    replayed = replace(answer, replayed=True).to_json()
    late = replace(answer, already_decided=True).to_json()
    assert _text(replayed) == _text({**expected, "replayed": True})
    assert _text(late) == _text({**expected, "already_decided": True})


@pytest.mark.parametrize(("answer", "expected"), KINDS)
@pytest.mark.parametrize("marks", [{}, {"replayed": True}, {"already_decided": True}])
def test_a_stored_answer_reads_back_as_the_value_it_was(answer, expected, marks):
    marked = replace(answer, **marks)
    assert answer_from_json(marked.to_json()) == marked
    assert answer_from_json({**expected, **marks}) == marked


@pytest.mark.parametrize(
    "stored",
    [
        None,
        "ok",
        [],
        {},
        {"executed": True, "status": "ok"},  # no result
        {"executed": "true", "status": "ok", "result": 1},
        {"executed": False, "status": "ok", "result": 1},
        {"executed": True, "status": "ok", "result": 1, "extra": 1},
        {"executed": False, "status": "confirmation_required", "confirmation_id": "c-1"},
        {
            "executed": False,
            "status": "confirmation_required",
            "confirmation_id": 1,
            "expires_at": AT,
        },
        {"executed": False, "dry_run": True, "would_hold": "yes", "cost": 1},
        {"executed": False, "dry_run": True, "would_hold": True, "cost": True},
        {"executed": False, "status": "rejected"},
        {"executed": False, "status": "error", "error": "forbidden"},
        {"executed": False, "status": "error", "error": {"code": "forbidden", "message": "no"}},
        {
            "executed": False,
            "status": "error",
            "error": {"code": "no_such_code", "message": "no", "details": {}},
        },
        {"executed": True, "status": "ok", "result": 1, "replayed": False},
        {"executed": False, "status": "maybe"},
    ],
)
def test_a_malformed_stored_answer_is_refused_saying_what_is_wrong(stored):
    with pytest.raises(ValueError, match=r"not the JSON of an answer \(.+\): "):
        answer_from_json(stored)


def test_only_a_rate_limit_or_a_cap_of_holds_ran_nothing():
    assert Refused("rate_limited", "later").ran_nothing
    assert Refused("too_many_pending", "later").ran_nothing
    assert not Refused("forbidden", "no").ran_nothing
    assert not Ran(1).ran_nothing
    assert not Held("c-1", AT).ran_nothing


def test_execute_still_answers_json_and_call_the_typed_value(executor, key):
    refused = executor.execute(key, "shop.no_such_tool", {})
    assert refused == {
        "executed": False,
        "status": "error",
        "error": {
            "code": "not_found",
            "message": "no tool named 'shop.no_such_tool'",
            "details": {},
        },
    }
    dry = executor.execute(key, "shop.set_prices", prices(), {"dry_run": True})
    assert dry == {"executed": False, "dry_run": True, "would_hold": False, "cost": 1}
    control = {"idempotency_key": "typed-1"}
    held = executor.execute(key, "shop.delete_product", {"sku": "TEA-0001"}, control)
    assert type(held) is dict
    assert held["status"] == "confirmation_required"
    assert held["confirmation_id"] == executor.pending()[0].id
    again = executor.execute(key, "shop.delete_product", {"sku": "TEA-0001"}, control)
    assert again == {**held, "replayed": True}
    typed = executor.call(key, "shop.delete_product", {"sku": "TEA-0001"}, control)
    assert typed == Held(held["confirmation_id"], held["expires_at"], replayed=True)


async def test_aexecute_still_answers_json_and_acall_the_typed_value(executor, key):
    refused = await executor.aexecute(key, "shop.set_prices", {"prices": "all"})
    assert refused["status"] == "error"
    assert refused["error"]["code"] == "invalid_input"
    dry = await executor.aexecute(key, "shop.set_prices", prices(), {"dry_run": True})
    assert dry == {"executed": False, "dry_run": True, "would_hold": False, "cost": 1}
    control = {"idempotency_key": "typed-2"}
    held = await executor.aexecute(key, "shop.delete_product", {"sku": "TEA-0001"}, control)
    assert held["status"] == "confirmation_required"
    again = await executor.aexecute(key, "shop.delete_product", {"sku": "TEA-0001"}, control)
    assert again == {**held, "replayed": True}
    typed = await executor.acall(key, "shop.delete_product", {"sku": "TEA-0001"}, control)
    assert typed == Held(held["confirmation_id"], held["expires_at"], replayed=True)


def test_confirm_still_answers_json_and_decide_the_typed_value(executor, key, shop):
    held = executor.execute(key, "shop.delete_product", {"sku": "TEA-0001"})
    done = executor.confirm(held["confirmation_id"], key, "approve")
    assert done == {"executed": True, "status": "ok", "result": {"deleted": "TEA-0001"}}
    late = executor.decide(held["confirmation_id"], key, "reject")
    assert late == Ran({"deleted": "TEA-0001"}, already_decided=True)
    assert executor.confirm(held["confirmation_id"], key, "reject") == late.to_json()
    assert len(shop.writes()) == 1


async def test_aconfirm_still_answers_json_and_adecide_the_typed_value(executor, key, shop):
    held = await executor.aexecute(key, "shop.delete_product", {"sku": "TEA-0001"})
    rejected = await executor.aconfirm(held["confirmation_id"], key, {"action": "reject"})
    assert rejected == {"executed": False, "status": "rejected", "message": "rejected by a person"}
    late = await executor.adecide(held["confirmation_id"], key, "approve")
    assert late == Rejected(already_decided=True)
    assert shop.writes() == []


def _closed(outcome: dict[str, Any]) -> Confirmation:
    now = 1_700_000_000.0
    return Confirmation(
        id="c1", caller=Caller.session("demo"), tool="shop.set_prices", input={},
        input_hash="h", idempotency_key=None, status="done", created_at=now,
        expires_at=now + 60, outcome=outcome,
    )  # fmt: skip


def test_what_a_person_reads_shows_an_unreadable_outcome_instead_of_failing():
    from turnkit.server.ui.views import outcome_of  # internal: the inbox's words for it

    row = _closed({"status": "ok"})  # no turnkit wrote this: edited by hand
    with pytest.raises(ValueError, match="not the JSON of an answer"):
        stored_outcome(row)  # the executor and the turn read strictly
    shown = shown_outcome(row)
    assert isinstance(shown, Unreadable)
    assert "not the JSON of an answer" in shown.reason
    assert outcome_of(row) == "done: its stored outcome is unreadable (check the ledger)"
    assert shown_outcome(_closed(Ran({"n": 1}).to_json())) == Ran({"n": 1})
    assert outcome_of(_closed(Ran({"n": 1}).to_json())) == "the write ran"
