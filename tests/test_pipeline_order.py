"""The ten steps of execute, in order: each step's failure code, and the earlier failure wins."""

from __future__ import annotations

import pytest

from _shop import prices
from turnkit import Caller


def code(answer: dict) -> str:
    assert answer["status"] == "error", answer
    return answer["error"]["code"]


def test_a_read_runs_and_answers_ok(executor, key):
    answer = executor.execute(key, "shop.list_products", {"limit": 1})
    assert answer == {
        "executed": True,
        "status": "ok",
        "result": [{"sku": "TEA-0001", "price": 4.5}],
    }


def test_step1_unknown_tool_is_not_found(executor, key):
    assert code(executor.execute(key, "shop.no_such_tool", {})) == "not_found"


def test_step1_public_caller_gets_not_found_for_a_tool_it_cannot_see(executor):
    answer = executor.execute(Caller.public(), "shop.list_products", {})
    assert code(answer) == "not_found"
    assert "scope" not in answer["error"]["message"]


def test_step1_key_without_the_scope_is_forbidden_with_the_reason(executor):
    reader = Caller.key("k2", user_id="alice", scopes={"shop.products:read"})
    answer = executor.execute(reader, "shop.set_prices", prices())
    assert code(answer) == "forbidden"
    assert answer["error"]["details"]["reason"] == "the key lacks the scope 'shop.products:write'"


def test_step1_missing_permission_is_forbidden(executor):
    bobs_key = Caller.key("k3", user_id="bob", scopes={"shop.products:write"})
    answer = executor.execute(bobs_key, "shop.set_prices", prices())
    assert answer["error"]["details"]["reason"] == "the caller lacks the permission 'shop.manage'"


def test_step1_session_writes_need_the_module_in_the_setting(executor, alice):
    answer = executor.execute(alice, "shop.set_prices", prices())
    assert "api_session_write_modules" in answer["error"]["details"]["reason"]
    executor.ledger.set_setting("api_session_write_modules", ["shop"])
    assert executor.execute(alice, "shop.set_prices", prices())["status"] == "confirmation_required"


def test_step1_allow_list_limits_a_key(executor, key):
    answer = executor.execute(key, "shop.list_products", {}, allow=["shop.set_prices"])
    assert "allow list" in answer["error"]["details"]["reason"]


def test_step1_disabled_module_hides_its_tools(executor, key, shop):
    shop.enabled = lambda: False
    assert code(executor.execute(key, "shop.list_products", {})) == "forbidden"


def test_step2_control_of_wrong_type_is_invalid_input(executor, key):
    answer = executor.execute(key, "shop.list_products", {}, {"dry_run": "yes"})
    assert code(answer) == "invalid_input"
    assert "'dry_run' must be a bool" in answer["error"]["message"]


def test_step3_schema_violations_are_all_reported_with_paths(executor, key):
    answer = executor.execute(key, "shop.set_prices", {"prices": [{"sku": "x", "price": 0}, {}]})
    assert code(answer) == "invalid_input"
    paths = sorted(v["path"] for v in answer["error"]["details"]["violations"])
    assert paths == ["/prices/0/price", "/prices/0/sku", "/prices/1", "/prices/1"]
    assert "fix these and call again" in answer["error"]["message"]


def test_step4_too_many_items(executor, key):
    answer = executor.execute(key, "shop.set_prices", prices(*["TEA-0001"] * 101))
    assert code(answer) == "too_many_items"
    assert answer["error"]["details"] == {"max_items": 100, "got": 101}


def test_step6_dry_run_charges_holds_and_runs_nothing(executor, key, shop):
    answer = executor.execute(key, "shop.delete_product", {"sku": "TEA-0001"}, {"dry_run": True})
    assert answer == {"executed": False, "dry_run": True, "would_hold": True, "cost": 1}
    answer = executor.execute(key, "shop.set_prices", prices(*["TEA-0001"] * 99), {"dry_run": True})
    assert answer == {"executed": False, "dry_run": True, "would_hold": True, "cost": 2}
    assert shop.writes() == []
    assert executor.pending() == []


def test_step7_danger_always_holds_a_keys_write(executor, key, shop):
    answer = executor.execute(key, "shop.delete_product", {"sku": "TEA-0001"})
    assert answer["status"] == "confirmation_required"
    assert answer["executed"] is False
    assert shop.writes() == []
    (pending,) = executor.pending()
    assert pending.id == answer["confirmation_id"]
    assert pending.input == {"sku": "TEA-0001"}


def test_step7_batch_rule_holds_a_long_list(executor, key, shop):
    assert executor.execute(key, "shop.set_prices", prices(*["TEA-0001"] * 50))["status"] == "ok"
    held = executor.execute(key, "shop.set_prices", prices(*["TEA-0001"] * 51))
    assert held["status"] == "confirmation_required"
    assert len(shop.writes()) == 1


def test_step9_write_runs_and_answers_ok(executor, key, shop):
    answer = executor.execute(key, "shop.set_prices", prices("TEA-0001", "TEA-0002"))
    assert answer == {"executed": True, "status": "ok", "result": {"updated": 2}}
    assert shop.writes()[0]["caller"] == "key:key-1"


# --- the earlier failure wins -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("caller_scopes", "control", "input", "expected"),
    [
        # forbidden (1) beats bad control (2), bad input (3) and too many items (4)
        ({"shop.products:read"}, {"dry_run": 1}, {"prices": "x"}, "forbidden"),
        # bad control (2) beats bad input (3)
        (None, {"dry_run": 1}, {"prices": "x"}, "invalid_input"),
        # bad input (3) beats too many items (4): a schema violation among 101 items
        (None, {}, {"prices": [{"sku": "x", "price": 1}] * 101}, "invalid_input"),
        # too many items (4) beats dry run (6)
        (None, {"dry_run": True}, prices(*["TEA-0001"] * 101), "too_many_items"),
    ],
)
def test_a_call_failing_two_checks_reports_the_earlier(
    executor, caller_scopes, control, input, expected
):
    scopes = caller_scopes or {"shop.products:read", "shop.products:write"}
    caller = Caller.key("k9", user_id="alice", scopes=scopes)
    answer = executor.execute(caller, "shop.set_prices", input, control)
    assert code(answer) == expected


def test_bad_control_is_reported_before_the_message_about_the_input(executor, key):
    answer = executor.execute(key, "shop.set_prices", [], {"idempotency_key": 5})
    assert "'idempotency_key' must be a str" in answer["error"]["message"]


def test_every_call_leaves_an_audit_row_without_secrets(executor, key):
    executor.execute(key, "shop.list_products", {})
    executor.execute(key, "shop.nope_x", {})
    executor.execute(key, "shop.set_prices", prices(), {"idempotency_key": "secret-key-1"})
    rows = executor.ledger.audit_rows()
    assert [(r["tool"], r["status"], r["code"]) for r in reversed(rows)] == [
        ("shop.list_products", "ok", None),
        ("shop.nope_x", "error", "not_found"),
        ("shop.set_prices", "ok", None),
    ]
    assert all(r["caller"] == "key:key-1" and r["duration_ms"] >= 0 for r in rows)
    assert "secret-key-1" not in repr(rows)
    assert "TEA-0001" not in repr(rows)


async def test_async_twin_runs_the_same_steps(executor, key, shop):
    answer = await executor.aexecute(key, "shop.set_prices", prices())
    assert answer["status"] == "ok"
    assert (await executor.aexecute(key, "shop.nope_x", {}))["error"]["code"] == "not_found"
    assert len(shop.writes()) == 1


def test_visible_for_lists_what_each_caller_may_use_now(executor, alice, key, rights):
    names = lambda caller: [t.name for t in executor.visible_for(caller)]  # noqa: E731
    assert names(key) == ["shop.list_products", "shop.set_prices", "shop.delete_product"]
    assert names(alice) == ["shop.list_products"]
    assert names(Caller.public()) == []
    executor.ledger.set_setting("api_session_write_modules", ["shop"])
    assert names(alice) == ["shop.list_products", "shop.set_prices", "shop.delete_product"]
    rights.revoke("alice", "shop.manage")
    assert names(alice) == ["shop.list_products"]


def test_input_schema_has_no_control_fields(executor):
    schema = executor.input_schema(executor.registry["shop.set_prices"])
    assert set(schema["properties"]) == {"prices"}


def test_a_tool_error_is_shown_to_the_caller_with_its_details(ledger, rights):
    from turnkit import Executor, Registry, ToolError

    def get(input, ctx):
        raise ToolError(f"no product {input['sku']!r}", known=["TEA-0001"])

    class Module:
        key = "shop"

        def api_tools(self):
            schema = {"type": "object", "properties": {"sku": {"type": "string"}}}
            return [{"name": "shop.get_product", "audience": "public", "handler": get,
                     "annotations": {"read_only": True}, "input_schema": schema}]  # fmt: skip

    executor = Executor(Registry([Module()]), ledger=ledger, permissions=rights)
    answer = executor.execute(Caller.public(), "shop.get_product", {"sku": "X"})
    executor.close()
    assert answer["error"] == {
        "code": "tool_error",
        "message": "no product 'X'",
        "details": {"known": ["TEA-0001"]},
    }


def test_the_session_write_switch_hides_public_writes_too(ledger, rights):
    from turnkit import Executor, Registry

    class Guestbook:
        key = "guestbook"

        def api_tools(self):
            return [{"name": "guestbook.add_entry", "audience": "public",
                     "handler": lambda input, ctx: {"added": True}}]  # fmt: skip

    executor = Executor(Registry([Guestbook()]), ledger=ledger, permissions=rights)
    alice = Caller.session("alice")
    assert executor.visible_for(alice) == []
    answer = executor.execute(alice, "guestbook.add_entry", {})
    assert answer["error"]["code"] == "forbidden"
    assert "api_session_write_modules" in answer["error"]["message"]
    assert [t.name for t in executor.visible_for(Caller.public())] == ["guestbook.add_entry"]
    ledger.set_setting("api_session_write_modules", ["guestbook"])
    assert [t.name for t in executor.visible_for(alice)] == ["guestbook.add_entry"]
    assert executor.execute(alice, "guestbook.add_entry", {})["status"] == "confirmation_required"
    executor.close()
