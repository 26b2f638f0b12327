"""``never_held``: the promise the turn graph relies on to run plain reads without a key.

A call that ``needs_hold`` must carry an idempotency key (a repeat returns the same held answer,
not a second confirmation), so ``tool.never_held`` may be True only when no caller, input or
setting can hold the tool's calls.

Reaches ``turnkit.executor.steps`` directly: it tests the pipeline's own hold rule (``needs_hold``),
which no public name exposes.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnkit import CallContext, Caller, Settings, Tool
from turnkit.executor.steps import needs_hold


def _broken_check(value: dict, ctx: CallContext) -> bool:
    raise RuntimeError("broken check")


def _danger(kind: str) -> Any:
    if kind == "raises":
        return _broken_check
    return {"none": None, "always": "always", "yes": lambda v, c: True, "no": lambda v, c: False}[
        kind
    ]


_tools = st.builds(
    lambda read_only, danger, audience: Tool(
        name="lab.do_thing",
        audience=audience,
        scope=None if audience == "public" else "lab.things:write",
        permission=None if audience == "public" else "lab.manage",
        handler=lambda input, ctx: None,
        annotations={"read_only": read_only},
        danger=_danger(danger),
    ),
    st.booleans(),
    st.sampled_from(["none", "always", "yes", "no", "raises"]),
    st.sampled_from(["admin", "public"]),
)
_callers = st.sampled_from(
    [Caller.session("u_1"), Caller.key("k", scopes={"lab.things:write"}), Caller.public()]
)


_CALLS = {
    "tool": _tools,
    "caller": _callers,
    "items": st.integers(0, 200),
    "batch": st.integers(1, 100),
    "operator": st.booleans(),
}
"""Every tool, caller, list length, batch setting and ``hold_key_writes`` the properties draw."""


def _ctx(tool: Tool, caller: Caller, batch: int, operator: bool) -> CallContext:
    """The dry-run context of a call under ``confirm_batch_over=batch`` and ``hold_key_writes``."""
    settings = Settings(confirm_batch_over=batch, hold_key_writes=operator)
    return CallContext(
        caller=caller, tool=tool, permissions=frozenset(), settings=settings, call_id="c"
    )


@given(**_CALLS)
def test_a_tool_that_is_never_held_is_not_held_by_any_caller_input_or_setting(
    tool, caller, items, batch, operator
):
    value = {"items": list(range(items))}
    ctx = _ctx(tool, caller, batch, operator)
    if tool.never_held:
        assert not needs_hold(tool, caller, value, ctx)


def test_only_a_read_without_danger_is_never_held():
    def tool(**fields: Any) -> Tool:
        return Tool(
            name="lab.do_thing",
            scope="lab.things:write",
            permission="lab.manage",
            handler=lambda i, c: None,
            **fields,
        )

    assert tool(annotations={"read_only": True}).never_held
    assert not tool(annotations={"read_only": True}, danger="always").never_held
    assert not tool(annotations={"read_only": True}, danger=lambda v, c: False).never_held
    assert not tool().never_held  # a write


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # see the body
@given(**_CALLS)
def test_the_hold_follows_designs_rule_for_every_tool_caller_and_input(
    tool, caller, items, batch, operator, expect_errors
):
    """docs/architecture.md §4, step 7: a session's write, a danger that holds, or the batch rule
    (an admin write whose longest list is over the setting) — the batch rule whatever the danger
    check — or, when the operator sets ``hold_key_writes``, every write of a key."""
    # the broken check's failure is logged: each input that draws it says so (the fixture is
    # not reset between inputs, so the declarations add up, as meant)
    if tool.danger is _broken_check:
        expect_errors("danger check of 'lab.do_thing' failed; holding the call")
    value = {"items": list(range(items))}
    ctx = _ctx(tool, caller, batch, operator)
    danger = tool.danger
    if callable(danger):
        try:
            dangerous = bool(danger(value, ctx))
        except Exception:
            dangerous = True
    else:
        dangerous = danger == "always"
    batch_rule = tool.audience == "admin" and tool.is_write and items > batch
    session_write = tool.is_write and caller.kind == "session"
    operators = operator and tool.is_write and caller.kind == "key"
    expected = session_write or dangerous or batch_rule or operators
    assert needs_hold(tool, caller, value, ctx) == expected


def test_an_admin_write_over_the_batch_limit_is_held_though_its_danger_check_says_no():
    from turnkit import Executor, Registry, StaticPermissions

    ran: list[int] = []

    class Shop:
        key = "shop"

        def api_tools(self) -> list[dict[str, Any]]:
            return [
                {
                    "name": "shop.set_prices",
                    "scope": "shop.prices:write",
                    "permission": "shop.manage",
                    "danger": lambda value, ctx: any(p["price"] <= 0 for p in value["prices"]),
                    "input_schema": {
                        "type": "object",
                        "properties": {"prices": {"type": "array", "items": {"type": "object"}}},
                    },
                    "handler": lambda i, c: ran.append(len(i["prices"])) or {"n": len(i["prices"])},
                }
            ]

    executor = Executor(
        Registry([Shop()]), permissions=StaticPermissions({"alice": {"shop.manage"}})
    )
    key = Caller.key("k", user_id="alice", scopes={"shop.prices:write"})
    prices = [{"sku": f"s{i}", "price": 1} for i in range(51)]
    try:
        control = {"idempotency_key": "i1"}
        held = executor.execute(key, "shop.set_prices", {"prices": prices}, control)
        assert held["status"] == "confirmation_required", held
        assert ran == []
        small = executor.execute(key, "shop.set_prices", {"prices": prices[:50]})
        assert small["result"] == {"n": 50}
        assert ran == [50]
        tool = executor.registry.get("shop.set_prices")
        assert tool is not None
        assert executor.hold_rule(key, tool) == "input or batch"
    finally:
        executor.close()


def test_hold_key_writes_holds_a_keys_small_write_and_says_so(executor, key, shop):
    from _shop import prices

    assert executor.execute(key, "shop.set_prices", prices())["status"] == "ok"
    executor.ledger.set_setting("hold_key_writes", True)
    held = executor.execute(key, "shop.set_prices", prices())
    assert held["status"] == "confirmation_required"
    tool = executor.registry.get("shop.set_prices")
    assert executor.hold_rule(key, tool, executor.settings_now()) == "operator"
    assert executor.hold_rule(key, executor.registry.get("shop.list_products"),
                              executor.settings_now()) == "never"  # fmt: skip
    assert executor.execute(key, "shop.list_products", {})["status"] == "ok"  # reads run
    assert len(shop.writes()) == 1
