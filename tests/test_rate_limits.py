"""Rate limits (docs/architecture.md §4, step 8): calls are charged their cost to the caller's
window, read from the ledger's settings at call time; the call that does not fit answers
``rate_limited`` and does not run; replays and dry runs are not charged. A hold reserves its cost
when it is made (a hold is work for a person: it is not free); its approved write is not charged
again, and a hold that never runs (rejected, expired, refused) gives its units back. A key's calls
are charged to the key and to its user: a user's keys share one budget."""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from _shop import prices
from turnkit import Caller, Executor, Registry, Settings
from turnkit.executor.steps import window_start  # internal: names a rate-limit window

WINDOW = 60.0


def skus(count: int) -> list[str]:
    return [f"TEA-{i:04d}" for i in range(count)]


def used(executor: Executor, caller: Caller, clock: Any) -> int:
    """Units ``caller`` spent in the window the clock is in now."""
    return executor.ledger.usage(caller.identity, window_start(clock.now, WINDOW))


def assert_ok(answer: dict) -> Any:
    assert answer["status"] == "ok", answer
    assert answer["executed"] is True
    assert "replayed" not in answer
    return answer["result"]


def assert_rate_limited(answer: dict) -> dict:
    assert answer["executed"] is False
    assert answer["status"] == "error"
    assert answer["error"]["code"] == "rate_limited", answer["error"]
    details = answer["error"]["details"]
    assert 0 < details["retry_after"] <= WINDOW
    return details


@pytest.fixture
def units(ledger) -> Callable[[int], None]:
    """Set the operator's ``rate_limit_units`` in the ledger (read by the next call)."""
    return lambda n: ledger.set_setting("rate_limit_units", n)


class Meter:
    """A module of tools with the costs a test gives."""

    key = "meter"

    def __init__(self, tools: list[dict]) -> None:
        self._tools = tools
        self.runs: list[str] = []

    def api_tools(self) -> list[dict]:
        return self._tools


@pytest.fixture
def meter(ledger, rights, clock) -> Iterator[Callable[..., tuple[Executor, Meter]]]:
    """Build an executor over ``meter.*`` tools: ``meter(name=cost, ...)`` (write tools)."""
    made: list[Executor] = []

    def make(read_only: bool = False, **costs: Any) -> tuple[Executor, Meter]:
        module = Meter([])

        def handler_for(name: str) -> Callable[[dict, Any], dict]:
            def handler(input: dict, ctx: Any) -> dict:
                module.runs.append(name)
                return {"items": len(input.get("items", []))}

            return handler

        module._tools = [
            {
                "name": f"meter.{name}",
                "scope": "meter.things:write",
                "permission": "shop.manage",
                "handler": handler_for(name),
                "cost": cost,
                "annotations": {"read_only": read_only},
                "input_schema": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"items": {"type": "array", "items": {"type": "integer"}}},
                },
            }
            for name, cost in costs.items()
        ]
        executor = Executor(
            Registry([module]), ledger=ledger, permissions=rights, settings=Settings(), clock=clock
        )
        assert executor.registry.warnings == ()
        made.append(executor)
        return executor, module

    yield make
    for executor in made:
        executor.close()


@pytest.fixture
def meter_key() -> Caller:
    return Caller.key("meter-key", user_id="alice", scopes={"meter.things:write"})


# --- what a call costs ------------------------------------------------------------------------


def test_a_call_is_charged_one_unit_by_default(executor, key, clock, units):
    units(100)
    assert_ok(executor.execute(key, "shop.list_products", {}))
    assert used(executor, key, clock) == 1
    assert_ok(executor.execute(key, "shop.set_prices", prices("TEA-0001", "TEA-0002")))
    assert used(executor, key, clock) == 2


@pytest.mark.parametrize(("count", "cost"), [(1, 1), (49, 1), (50, 1), (51, 2), (100, 2)])
def test_an_admin_write_costs_one_unit_per_fifty_items(
    executor, key, clock, units, ledger, shop, count, cost
):
    units(100)
    ledger.set_setting("confirm_batch_over", 1000)  # so the batch runs instead of being held
    value = prices(*skus(count))
    assert executor.execute(key, "shop.set_prices", value, {"dry_run": True})["cost"] == cost
    assert assert_ok(executor.execute(key, "shop.set_prices", value)) == {"updated": count}
    assert used(executor, key, clock) == cost
    assert len(shop.writes()) == 1


def test_a_fixed_cost_is_charged(meter, meter_key, clock, units, ledger):
    executor, module = meter(set_fixed=7)
    units(20)
    ledger.set_setting("confirm_batch_over", 1000)
    assert_ok(executor.execute(meter_key, "meter.set_fixed", {}))
    assert used(executor, meter_key, clock) == 7
    # the default rule would charge ceil(500 / 50) = 10; the fixed cost stays 7
    assert_ok(executor.execute(meter_key, "meter.set_fixed", {"items": list(range(500))}))
    assert used(executor, meter_key, clock) == 14
    details = assert_rate_limited(executor.execute(meter_key, "meter.set_fixed", {}))
    assert (details["cost"], details["limit"]) == (7, 20)
    assert used(executor, meter_key, clock) == 14
    assert module.runs == ["set_fixed", "set_fixed"]


def test_a_cost_function_decides_the_units(meter, meter_key, clock, units):
    seen: list[dict] = []

    def cost(value: dict) -> int:
        seen.append(value)
        return len(value.get("items", [])) + 1

    executor, _ = meter(set_counted=cost)
    units(100)
    value = {"items": [1, 2, 3, 4]}
    assert executor.execute(meter_key, "meter.set_counted", value, {"dry_run": True})["cost"] == 5
    assert used(executor, meter_key, clock) == 0
    assert_ok(executor.execute(meter_key, "meter.set_counted", value))
    assert used(executor, meter_key, clock) == 5
    assert seen == [value, value]


def _raises(value: dict) -> int:
    raise RuntimeError("cost service down")


BROKEN_COSTS = {
    "raises": _raises,
    "zero": lambda value: 0,
    "negative": lambda value: -2,
    "string": lambda value: "3",
    "float": lambda value: 2.5,
    "bool": lambda value: True,
    "none": lambda value: None,
}


@pytest.mark.parametrize("broken", list(BROKEN_COSTS))
@pytest.mark.parametrize(("read_only", "default"), [(False, 3), (True, 1)], ids=["write", "read"])
def test_a_cost_function_that_fails_falls_back_to_the_default_rule(
    meter, meter_key, clock, units, ledger, caplog, broken, read_only, default, expect_errors
):
    if broken == "raises":  # the application's function failed: logged with its traceback
        expect_errors("cost function of 'meter.set_broken' failed; using the default rule")
    executor, module = meter(read_only=read_only, set_broken=BROKEN_COSTS[broken])
    units(100)
    ledger.set_setting("confirm_batch_over", 1000)
    value = {"items": list(range(120))}  # the default rule: ceil(120 / 50) = 3 for a write
    with caplog.at_level(logging.WARNING, logger="turnkit.executor"):
        dry = executor.execute(meter_key, "meter.set_broken", value, {"dry_run": True})
        assert dry["cost"] == default
        assert_ok(executor.execute(meter_key, "meter.set_broken", value))
    assert used(executor, meter_key, clock) == default
    assert module.runs == ["set_broken"]
    assert "using the default rule" in caplog.text


# --- the budget of a window -------------------------------------------------------------------


def test_the_call_over_the_budget_is_rate_limited_and_does_not_run(
    executor, key, clock, units, shop
):
    units(3)
    for sku in skus(3):
        assert_ok(executor.execute(key, "shop.set_prices", prices(sku)))
    clock.now += 15
    answer = executor.execute(key, "shop.set_prices", prices("TEA-0099"))
    details = assert_rate_limited(answer)
    assert details["retry_after"] == pytest.approx(WINDOW - 15)
    assert (details["cost"], details["limit"]) == (1, 3)
    assert len(shop.writes()) == 3
    assert used(executor, key, clock) == 3
    newest = executor.ledger.audit_rows()[0]
    assert (newest["tool"], newest["status"], newest["code"]) == (
        "shop.set_prices",
        "error",
        "rate_limited",
    )


def test_a_call_larger_than_what_is_left_is_refused_without_charging(
    executor, key, clock, units, ledger, shop
):
    units(3)
    ledger.set_setting("confirm_batch_over", 1000)
    assert_ok(executor.execute(key, "shop.set_prices", prices(*skus(60))))  # 2 units
    details = assert_rate_limited(executor.execute(key, "shop.set_prices", prices(*skus(60))))
    assert details["cost"] == 2
    assert used(executor, key, clock) == 2
    assert_ok(executor.execute(key, "shop.set_prices", prices("TEA-0001")))  # 1 unit still fits
    assert used(executor, key, clock) == 3
    assert len(shop.writes()) == 2


def test_the_next_window_allows_calls_again(executor, key, clock, units, shop):
    units(2)
    assert_ok(executor.execute(key, "shop.list_products", {}))
    clock.now += 59.5
    assert_ok(executor.execute(key, "shop.list_products", {}))
    details = assert_rate_limited(executor.execute(key, "shop.list_products", {}))
    assert details["retry_after"] == pytest.approx(0.5)

    clock.now += details["retry_after"]
    assert used(executor, key, clock) == 0
    assert_ok(executor.execute(key, "shop.list_products", {}))
    assert_ok(executor.execute(key, "shop.set_prices", prices()))
    assert used(executor, key, clock) == 2
    assert_rate_limited(executor.execute(key, "shop.set_prices", prices()))
    assert len(shop.writes()) == 1


def test_rate_limit_settings_are_read_at_call_time(executor, key, clock, units, ledger):
    units(1)
    assert_ok(executor.execute(key, "shop.list_products", {}))
    assert_rate_limited(executor.execute(key, "shop.list_products", {}))
    units(2)
    assert_ok(executor.execute(key, "shop.list_products", {}))
    assert_rate_limited(executor.execute(key, "shop.list_products", {}))

    ledger.set_setting("rate_limit_window", 10.0)  # a new window length: windows named by
    clock.now += 3  # their start, so the 10 s one starting now-3 s holds what was spent then
    details = assert_rate_limited(executor.execute(key, "shop.list_products", {}))
    assert details["retry_after"] == pytest.approx(7.0)
    clock.now += details["retry_after"]
    for _ in range(2):
        assert_ok(executor.execute(key, "shop.list_products", {}))
    assert_rate_limited(executor.execute(key, "shop.list_products", {}))


def test_zero_units_turns_rate_limiting_off(meter, meter_key, clock, units):
    executor, module = meter(set_costly=1000)
    units(0)
    for _ in range(25):
        assert_ok(executor.execute(meter_key, "meter.set_costly", {}))
    assert len(module.runs) == 25
    assert used(executor, meter_key, clock) == 0


def test_a_cost_above_the_whole_budget_is_always_refused(meter, meter_key, clock, units):
    executor, module = meter(set_costly=10)
    units(5)
    answer = executor.execute(meter_key, "meter.set_costly", {})
    assert answer["error"]["code"] == "rate_limited"
    details = answer["error"]["details"]
    assert details == {"retry_after": None, "cost": 10, "limit": 5}  # waiting would not help
    assert "it can never run" in answer["error"]["message"]
    assert module.runs == []
    assert used(executor, meter_key, clock) == 0
    clock.now += WINDOW
    assert executor.execute(meter_key, "meter.set_costly", {})["error"]["code"] == "rate_limited"


# --- idempotency keys -------------------------------------------------------------------------


def test_a_rate_limited_call_does_not_burn_its_idempotency_key(executor, key, clock, units, shop):
    units(1)
    assert_ok(executor.execute(key, "shop.list_products", {}))
    control = {"idempotency_key": "price-update-1"}
    details = assert_rate_limited(executor.execute(key, "shop.set_prices", prices(), control))
    assert (
        executor.ledger.get_idempotency(key.identity, "shop.set_prices", "price-update-1") is None
    )
    assert shop.writes() == []

    clock.now += details["retry_after"]
    retry = executor.execute(key, "shop.set_prices", prices(), control)
    assert assert_ok(retry) == {"updated": 1}
    assert len(shop.writes()) == 1
    clock.now += WINDOW
    assert executor.execute(key, "shop.set_prices", prices(), control) == {
        **retry,
        "replayed": True,
    }
    assert len(shop.writes()) == 1


def test_a_replayed_call_is_not_charged(executor, key, clock, units, shop):
    units(1)
    control = {"idempotency_key": "once"}
    first = executor.execute(key, "shop.set_prices", prices(), control)
    assert_ok(first)
    assert used(executor, key, clock) == 1
    for _ in range(3):  # the budget is spent, yet a replay still answers
        assert executor.execute(key, "shop.set_prices", prices(), control) == {
            **first,
            "replayed": True,
        }
    assert used(executor, key, clock) == 1
    assert len(shop.writes()) == 1


# --- dry runs and held writes -----------------------------------------------------------------


def test_a_dry_run_is_not_charged_and_reports_its_cost(executor, key, clock, units, shop):
    units(1)
    dry = {"dry_run": True}
    for _ in range(5):
        answer = executor.execute(key, "shop.set_prices", prices(), dry)
        assert answer == {"executed": False, "dry_run": True, "would_hold": False, "cost": 1}
    assert used(executor, key, clock) == 0
    assert_ok(executor.execute(key, "shop.set_prices", prices()))
    assert used(executor, key, clock) == 1
    # with the budget spent, a dry run still answers what the call would do
    assert executor.execute(key, "shop.set_prices", prices(*skus(60)), dry) == {
        "executed": False,
        "dry_run": True,
        "would_hold": True,
        "cost": 2,
    }
    assert used(executor, key, clock) == 1
    assert len(shop.writes()) == 1


def test_a_hold_reserves_its_cost_and_its_approved_write_is_not_charged_again(
    executor, alice, clock, units, ledger, shop
):
    ledger.set_setting("api_session_write_modules", ["shop"])
    units(1)
    held = [executor.execute(alice, "shop.set_prices", prices(sku, price=9.0)) for sku in skus(3)]
    assert held[0]["status"] == "confirmation_required"
    assert_rate_limited(held[1])  # a hold is not free: no room, no hold
    assert_rate_limited(held[2])
    assert len(executor.ledger.list_confirmations()) == 1
    assert used(executor, alice, clock) == 1
    assert shop.writes() == []

    outcome = executor.confirm(held[0]["confirmation_id"], alice, "approve")
    assert assert_ok(outcome) == {"updated": 1}
    assert used(executor, alice, clock) == 1  # settled: the reserved units were the charge
    assert len(shop.writes()) == 1


@pytest.mark.parametrize("ending", ["reject", "expire"])
def test_a_hold_that_never_runs_gives_its_units_back(
    executor, alice, clock, units, ledger, shop, ending
):
    ledger.set_setting("api_session_write_modules", ["shop"])
    ledger.set_setting("confirmation_ttl", 5)
    units(1)
    held = executor.execute(alice, "shop.set_prices", prices())["confirmation_id"]
    assert used(executor, alice, clock) == 1
    if ending == "reject":
        assert executor.confirm(held, alice, "reject")["status"] == "rejected"
    else:
        clock.now += 5
        assert executor.confirmation(held).status == "expired"
    assert used(executor, alice, clock) == 0
    assert executor.execute(alice, "shop.set_prices", prices())["status"] == (
        "confirmation_required"
    )
    assert shop.writes() == []


def test_a_write_is_not_held_when_the_budget_is_spent(executor, alice, clock, units, ledger, shop):
    ledger.set_setting("api_session_write_modules", ["shop"])
    units(1)
    assert_ok(executor.execute(alice, "shop.list_products", {}))
    assert_rate_limited(executor.execute(alice, "shop.list_products", {}))
    assert_rate_limited(executor.execute(alice, "shop.set_prices", prices()))
    assert executor.ledger.list_confirmations() == []

    clock.now += WINDOW
    held = executor.execute(alice, "shop.set_prices", prices())
    assert held["status"] == "confirmation_required"
    assert assert_ok(executor.confirm(held["confirmation_id"], alice, "approve")) == {"updated": 1}
    assert used(executor, alice, clock) == 1
    assert len(shop.writes()) == 1


def test_a_batch_held_by_the_batch_rule_reserves_its_cost_when_held(
    executor, key, clock, units, shop
):
    units(10)
    held = executor.execute(key, "shop.set_prices", prices(*skus(80)))
    assert held["status"] == "confirmation_required"
    assert used(executor, key, clock) == 2
    assert assert_ok(executor.confirm(held["confirmation_id"], key, "approve")) == {"updated": 80}
    assert used(executor, key, clock) == 2
    assert len(shop.writes()) == 1


# --- callers ----------------------------------------------------------------------------------


def test_each_caller_has_its_own_budget_and_a_users_keys_share_one(
    executor, key, alice, clock, units
):
    units(2)
    other_key = Caller.key("key-2", user_id="alice", scopes={"shop.products:read"})
    bobs_key = Caller.key("key-3", user_id="bob", scopes={"shop.products:read"})
    bob = Caller.session("bob")
    for _ in range(2):
        assert_ok(executor.execute(key, "shop.list_products", {}))
    assert_rate_limited(executor.execute(key, "shop.list_products", {}))
    # a second key of alice's draws on her user's budget too: more keys are no more budget
    assert_rate_limited(executor.execute(other_key, "shop.list_products", {}))
    assert used(executor, other_key, clock) == 0
    assert executor.ledger.usage("user:alice", window_start(clock.now, WINDOW)) == 2

    for caller in (alice, bob, bobs_key):  # alice's session is not her key; bob is not alice
        assert_ok(executor.execute(caller, "shop.list_products", {}))
        assert used(executor, caller, clock) == 1
    assert used(executor, key, clock) == 2
    assert_rate_limited(executor.execute(key, "shop.list_products", {}))


def test_concurrent_calls_never_spend_more_than_the_budget(executor, key, clock, units):
    units(10)
    answers: list[dict] = []
    lock = threading.Lock()
    start = threading.Barrier(20)

    def call() -> None:
        start.wait(10)
        answer = executor.execute(key, "shop.list_products", {})
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=call) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(answers) == 20
    codes = sorted(a["status"] if a["status"] == "ok" else a["error"]["code"] for a in answers)
    assert codes == ["ok"] * 10 + ["rate_limited"] * 10
    assert used(executor, key, clock) == 10


# --- async ------------------------------------------------------------------------------------


async def test_rate_limits_apply_through_aexecute(executor, key, clock, units, shop):
    units(2)
    for sku in skus(2):
        assert_ok(await executor.aexecute(key, "shop.set_prices", prices(sku)))
    assert_rate_limited(await executor.aexecute(key, "shop.set_prices", prices("TEA-0099")))
    assert len(shop.writes()) == 2
    dry = await executor.aexecute(key, "shop.set_prices", prices(), {"dry_run": True})
    assert dry["cost"] == 1
    clock.now += WINDOW
    assert_ok(await executor.aexecute(key, "shop.set_prices", prices("TEA-0099")))
    assert used(executor, key, clock) == 1
    assert math.isclose(len(shop.writes()), 3)


# --- pending holds ----------------------------------------------------------------------------


def test_a_caller_may_have_at_most_max_pending_holds_waiting(executor, key, clock, shop):
    executor.ledger.set_setting("max_pending_holds", 2)
    first, second = (
        executor.execute(key, "shop.delete_product", {"sku": sku})["confirmation_id"]
        for sku in ("A", "B")
    )
    clock.now += 10
    third = executor.execute(key, "shop.delete_product", {"sku": "C"}, {"idempotency_key": "c"})
    assert third["error"]["code"] == "too_many_pending"
    details = third["error"]["details"]
    assert (details["limit"], details["pending"]) == (2, 2)
    assert details["retry_after"] == pytest.approx(3590)  # when the oldest expires
    assert "max_pending_holds" in third["error"]["message"]
    assert len(executor.ledger.list_confirmations()) == 2
    assert used(executor, key, clock) == 2  # the refused hold's units were given back

    executor.confirm(first, key, "reject")  # room again; the key was not kept
    again = executor.execute(key, "shop.delete_product", {"sku": "C"}, {"idempotency_key": "c"})
    assert again["status"] == "confirmation_required"
    other = Caller.key("key-9", user_id="alice", scopes={"shop.products:write"})
    assert executor.execute(other, "shop.delete_product", {"sku": "D"})["status"] == (
        "confirmation_required"
    )  # the cap is per caller (here another key of the same user)
    assert executor.confirmation(second).status == "pending"
    assert shop.writes() == []


def test_expired_holds_do_not_count_against_the_cap(executor, key, clock):
    executor.ledger.set_setting("max_pending_holds", 1)
    executor.ledger.set_setting("confirmation_ttl", 5)
    assert executor.execute(key, "shop.delete_product", {"sku": "A"})["status"] == (
        "confirmation_required"
    )
    clock.now += 5
    assert executor.execute(key, "shop.delete_product", {"sku": "B"})["status"] == (
        "confirmation_required"
    )


def test_a_cap_of_zero_holds_without_limit(executor, key):
    executor.ledger.set_setting("max_pending_holds", 0)
    for sku in range(5):
        held = executor.execute(key, "shop.delete_product", {"sku": str(sku)})
        assert held["status"] == "confirmation_required"


def test_an_approval_refused_for_the_held_users_rights_gives_the_units_back(
    executor, alice, clock, units, ledger, rights, shop
):
    ledger.set_setting("api_session_write_modules", ["shop"])
    units(5)
    held = executor.execute(alice, "shop.set_prices", prices())["confirmation_id"]
    assert used(executor, alice, clock) == 1
    rights.revoke("alice", "shop.manage")
    assert executor.confirm(held, alice, "approve")["error"]["code"] == "forbidden"
    assert used(executor, alice, clock) == 0
    assert shop.writes() == []


def test_an_edit_that_costs_less_gives_the_difference_back(executor, key, clock, units, shop):
    units(10)
    held = executor.execute(key, "shop.set_prices", prices(*skus(80)))["confirmation_id"]
    assert used(executor, key, clock) == 2
    edit = {"action": "edit", "arguments": prices("TEA-0001")}
    assert assert_ok(executor.confirm(held, key, edit)) == {"updated": 1}
    assert used(executor, key, clock) == 1
