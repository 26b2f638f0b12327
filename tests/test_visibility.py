"""``visible`` lists exactly the tools ``hidden_reason`` finds no reason to hide: the fast pass
and the rules that explain a refusal are one rule (Hypothesis, over callers, rights and tools).

Reaches ``turnkit.registry.visibility`` directly: it tests ``visible`` and ``hidden_reason``
themselves, which no public name exposes."""

from __future__ import annotations

import logging

from hypothesis import given
from hypothesis import strategies as st

from turnkit import Caller, Executor, Registry, Settings, StaticPermissions, Tool
from turnkit.registry.visibility import hidden_reason, visible

MODULES = ["shop", "crm", "system"]
NAMES = [f"shop.do_thing_{i}" for i in range(8)]


@st.composite
def tools(draw) -> list[Tool]:
    made = []
    for index in range(draw(st.integers(0, 8))):
        module = draw(st.sampled_from(MODULES[:2]))
        public = draw(st.booleans())
        read_only = draw(st.booleans())
        system = not public and draw(st.integers(0, 5)) == 0
        name = f"system.do_thing_{index}" if system else f"{module}.do_thing_{index}"
        scope = None if public or system else f"{module}.things:{draw(st.sampled_from(['r', 'w']))}"
        permission = (
            None if public or system else f"{module}.{draw(st.sampled_from(['view', 'manage']))}"
        )
        tool = Tool(name=name, audience="public" if public else "admin", scope=scope,
                    permission=permission, annotations={"read_only": read_only},
                    handler=lambda i, c: None)  # fmt: skip
        made.append(tool.with_module("system" if system else module))
    return made


callers = st.sampled_from(
    [
        Caller.public(),
        Caller.session("u"),
        Caller.key("k", user_id="u", scopes={"shop.things:r"}),
        Caller.key("k2", user_id="u", scopes={"shop.things:r", "shop.things:w", "crm.things:w"}),
    ]
)
permission_sets = st.frozensets(st.sampled_from(["shop.view", "shop.manage", "crm.view"]))


@given(
    tools(),
    callers,
    permission_sets,
    st.frozensets(st.sampled_from(MODULES)),
    st.frozensets(st.sampled_from(MODULES)),
    st.one_of(
        st.just("all"), st.frozensets(st.sampled_from([f"shop.do_thing_{i}" for i in range(8)]))
    ),
)
def test_visible_is_exactly_what_hidden_reason_does_not_hide(
    found, caller, permissions, switch, disabled, allow
):
    settings = Settings(api_session_write_modules=switch)
    rights = {
        "permissions": permissions if caller.kind != "public" else frozenset(),
        "settings": settings,
        "enabled": lambda module: module not in disabled,
        "allow": allow,
    }
    expected = [t for t in found if hidden_reason(caller, t, **rights) is None]
    assert visible(caller, found, **rights) == expected


def test_the_switch_warning_is_not_silenced_by_a_caller_listed_first_who_lacks_the_right(caplog):
    class Orders:
        key = "orders"

        def api_tools(self) -> list[dict]:
            return [
                {"name": "orders.cancel_order", "scope": "orders.orders:write",
                 "permission": "orders.manage", "handler": lambda i, c: {"cancelled": True}},
            ]  # fmt: skip

    rights = StaticPermissions({"alice": {"orders.manage"}, "bob": set()})
    executor = Executor(Registry([Orders()]), permissions=rights)
    try:
        with caplog.at_level(logging.WARNING, logger="turnkit.executor"):
            executor.visible_for(Caller.session("bob"))  # lacks the permission: no warning
            assert caplog.records == []
            for _ in range(3):
                executor.visible_for(Caller.session("alice"))
        (warning,) = [r.getMessage() for r in caplog.records]
        assert "orders.cancel_order" in warning
    finally:
        executor.close()
