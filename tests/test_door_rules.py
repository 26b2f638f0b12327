"""Seven doors, one promise (docs/architecture.md §4), in the core: a held write is decided only
where it can run as it was held. A door whose registry declares the tool differently or not at all,
whose module is disabled, or whose own settings in code leave out the agent's switch, answers
``cannot_decide_here`` and leaves the write pending, saying what differs; rejecting runs nothing and
works anywhere. On SQLite and PostgreSQL, sync and async."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _shop import Shop, prices
from turnkit import Caller, Executor, Registry, Settings
from turnkit.registry.declaration import fingerprint, handler_ref  # internal: what doors compare


class OtherShop(Shop):
    """Another application's module under the same key, declaring the same names with its own
    handlers (the issue's case: a user's ``catalogue.set_prices`` beside the demo's)."""

    def set_prices(self, input: dict, ctx: Any) -> dict:
        self._write({"tool": "other.set_prices", "input": input})
        return {"other": True}

    def delete_product(self, input: dict, ctx: Any) -> dict:
        self._write({"tool": "other.delete_product", "input": input})
        return {"other": True}


class WiderShop(Shop):
    """The shop's own handlers with a changed input schema for ``shop.delete_product``."""

    def api_tools(self) -> list[dict]:
        tools = super().api_tools()
        tools[2] = {**tools[2], "input_schema": {"type": "object", "properties": {}}}
        return tools


class Switchable(Shop):
    """The shop, switched off in this process."""

    def enabled(self) -> bool:
        return False


@pytest.fixture
def root() -> Caller:
    """Someone who may decide for anyone (the ``rights`` fixture grants system.confirm_any)."""
    return Caller.session("root")


@pytest.fixture
def door(ledger, rights, clock) -> Iterator[Any]:
    """``door(module, settings=None)``: another executor over the same ledger, as another
    process or application would have it."""
    made: list[Executor] = []

    def make(module: Any, settings: Settings | None = None) -> Executor:
        made.append(
            Executor(
                Registry([module]),
                ledger=ledger,
                permissions=rights,
                settings=settings or Settings(handler_timeout=2.0),
                clock=clock,
            )
        )
        return made[-1]

    yield make
    for executor in made:
        executor.close()


def assert_refused_here(answer: dict, *words: str) -> str:
    assert answer["status"] == "error", answer
    assert answer["error"]["code"] == "cannot_decide_here", answer
    message = answer["error"]["message"]
    assert "still pending" in message
    for word in words:
        assert word in message, message
    return message


def test_a_hold_records_the_module_and_the_fingerprint_of_its_declaration(executor, key):
    cid = executor.execute(key, "shop.delete_product", {"sku": "TEA-0001"})["confirmation_id"]
    held = executor.confirmation(cid)
    tool = executor.registry.get("shop.delete_product")
    assert (held.module, held.fingerprint) == ("shop", fingerprint(tool))
    assert len(held.fingerprint) == 32


def test_fingerprints_tell_handlers_apart_by_where_they_live(tmp_path):
    ours = Registry([Shop(tmp_path / "a")]).get("shop.set_prices")
    same = Registry([Shop(tmp_path / "b")]).get("shop.set_prices")  # another instance, same code
    other = Registry([OtherShop(tmp_path / "c")]).get("shop.set_prices")
    assert fingerprint(ours) == fingerprint(same)
    assert fingerprint(ours) != fingerprint(other)
    assert handler_ref(ours.handler) == "_shop:Shop.set_prices"
    assert handler_ref(other.handler) == "test_door_rules:OtherShop.set_prices"


def test_a_changed_schema_changes_the_fingerprint(tmp_path):
    ours = Registry([Shop(tmp_path / "a")]).get("shop.delete_product")
    wider = Registry([WiderShop(tmp_path / "b")]).get("shop.delete_product")
    assert fingerprint(ours) != fingerprint(wider)


@pytest.mark.parametrize("decision", ["approve", {"action": "edit", "arguments": {"sku": "X"}}])
def test_a_door_declaring_the_tool_with_another_handler_does_not_decide_it(
    executor, door, key, root, shop, tmp_path, decision
):
    cid = executor.execute(key, "shop.delete_product", {"sku": "TEA-0001"})["confirmation_id"]
    other = OtherShop(tmp_path / "other.log")
    answer = door(other).confirm(cid, root, decision)
    assert_refused_here(answer, "'shop.delete_product'", "module 'shop'", "differently")
    assert executor.confirmation(cid).status == "pending"
    assert other.writes() == []
    assert executor.confirm(cid, root, "approve")["result"] == {"deleted": "TEA-0001"}
    assert len(shop.writes()) == 1
    assert other.writes() == []


def test_a_door_that_does_not_declare_the_tool_does_not_decide_it(executor, door, key, root):
    cid = executor.execute(key, "shop.delete_product", {"sku": "TEA-0001"})["confirmation_id"]
    bare = Executor(Registry(), ledger=executor.ledger, permissions=executor.permissions)
    try:
        answer = bare.confirm(cid, root, "approve")
    finally:
        bare.close()
    assert_refused_here(answer, "does not declare the tool 'shop.delete_product'", "--module")
    assert executor.confirmation(cid).status == "pending"


def test_a_door_whose_schema_differs_does_not_decide_it(executor, door, key, root, tmp_path):
    cid = executor.execute(key, "shop.delete_product", {"sku": "TEA-0001"})["confirmation_id"]
    wider = WiderShop(tmp_path / "wider.log")
    assert_refused_here(door(wider).confirm(cid, root, "approve"), "differently")
    assert wider.writes() == []
    assert executor.confirmation(cid).status == "pending"


def test_a_door_where_the_module_is_disabled_leaves_it_pending(executor, door, key, root, tmp_path):
    cid = executor.execute(key, "shop.delete_product", {"sku": "TEA-0001"})["confirmation_id"]
    answer = door(Switchable(tmp_path / "off.log")).confirm(cid, root, "approve")
    assert_refused_here(answer, "disabled")
    assert executor.confirmation(cid).status == "pending"


async def test_any_door_may_reject_a_write_it_cannot_run(executor, door, key, root, tmp_path):
    cid = executor.execute(key, "shop.delete_product", {"sku": "TEA-0001"})["confirmation_id"]
    answer = await door(OtherShop(tmp_path / "o.log")).aconfirm(cid, root, "reject")
    assert answer["status"] == "rejected"
    assert executor.confirmation(cid).status == "rejected"


async def test_the_refusal_is_the_same_on_the_async_path(executor, door, key, root, tmp_path):
    cid = executor.execute(key, "shop.delete_product", {"sku": "TEA-0001"})["confirmation_id"]
    answer = await door(OtherShop(tmp_path / "o.log")).aconfirm(cid, root, "approve")
    assert_refused_here(answer, "differently")


def test_a_confirmation_made_before_fingerprints_is_decided_by_the_tool_it_names(
    executor, key, root, shop
):
    cid = executor.execute(key, "shop.delete_product", {"sku": "TEA-0001"})["confirmation_id"]
    executor.ledger._run("UPDATE turnkit_confirmations SET fingerprint = NULL, module = NULL")
    assert executor.confirm(cid, root, "approve")["status"] == "ok"
    assert len(shop.writes()) == 1


# --- the agent's switch: the door's own settings in code --------------------------------------


def test_a_door_whose_settings_leave_out_the_agents_switch_leaves_the_write_pending(
    executor, door, alice, root, shop
):
    app = door(Shop(shop.log), Settings(api_session_write_modules={"shop"}))  # acts in code
    cid = app.execute(alice, "shop.set_prices", prices())["confirmation_id"]
    served = door(Shop(shop.log))  # as `turnkit serve` runs: the defaults, no switch
    answer = served.confirm(cid, root, "approve")
    assert_refused_here(answer, "'api_session_write_modules'", "module 'shop'", "turnkit settings")
    assert served.confirmation(cid).status == "pending"
    assert shop.writes() == []
    assert app.confirm(cid, alice, "approve")["status"] == "ok"  # the door that can, does
    assert len(shop.writes()) == 1


def test_the_operators_switch_in_the_ledger_is_the_rule_for_every_door(
    executor, door, alice, root, shop
):
    app = door(Shop(shop.log), Settings(api_session_write_modules={"shop"}))
    cid = app.execute(alice, "shop.set_prices", prices())["confirmation_id"]
    executor.ledger.set_setting("api_session_write_modules", [])  # the operator turns it off
    answer = app.confirm(cid, alice, "approve")
    assert answer["error"]["code"] == "forbidden"  # the held user's right now: closed for good
    assert "api_session_write_modules" in answer["error"]["message"]
    assert app.confirmation(cid).status == "done"
    assert shop.writes() == []


def test_a_door_given_the_switch_decides_a_write_held_in_another(door, alice, root, shop):
    app = door(Shop(shop.log), Settings(api_session_write_modules={"shop"}))
    cid = app.execute(alice, "shop.set_prices", prices())["confirmation_id"]
    cli = door(Shop(shop.log), Settings(api_session_write_modules={"shop"}))  # --act shop
    assert cli.confirm(cid, root, "approve")["status"] == "ok"


def test_the_crash_workers_shop_keeps_the_shops_declarations(tmp_path: Path):
    from _workers import _CrashingShop

    ours = Registry([Shop(tmp_path / "a")]).get("shop.set_prices")
    crashing = Registry([_CrashingShop(tmp_path / "b")]).get("shop.set_prices")
    assert fingerprint(ours) == fingerprint(crashing)


def test_a_script_and_the_command_importing_it_agree_on_its_handlers(tmp_path):
    """``python app.py`` holds (its functions live in ``__main__``); ``turnkit confirmations
    approve --module app:...`` imports ``app``: the same declaration, the same fingerprint."""
    import subprocess
    import sys

    (tmp_path / "app.py").write_text(
        "from turnkit.registry.declaration import handler_ref\n"
        "def set_note(input, ctx):\n    return {}\n"
        "if __name__ == '__main__':\n    print(handler_ref(set_note))\n"
    )
    run = [sys.executable, "app.py"]
    as_script = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, check=True)
    imported = subprocess.run(
        [sys.executable, "-c", "import app\nfrom turnkit.registry.declaration import handler_ref"
         "\nprint(handler_ref(app.set_note))"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert as_script.stdout == imported.stdout == "app:set_note\n"


def test_tools_wrapping_objects_of_one_class_are_told_apart_by_their_names():
    class Wrapped:
        def __init__(self, name: str) -> None:
            self.name = name

    def wrap(inner: Wrapped):
        def run(input, ctx):
            return inner.name

        return run

    assert handler_ref(wrap(Wrapped("a"))) != handler_ref(wrap(Wrapped("b")))
    assert handler_ref(wrap(Wrapped("a"))) == handler_ref(wrap(Wrapped("a")))


def test_a_door_whose_input_limit_is_lower_leaves_the_write_pending(door, key, root, shop):
    executor = door(Shop(shop.log))
    big = {"sku": "TEA-" + "0" * 3000}
    cid = executor.execute(key, "shop.delete_product", big)["confirmation_id"]
    strict = door(Shop(shop.log), Settings(max_input_chars=1000))
    answer = strict.confirm(cid, root, "approve")
    assert_refused_here(answer, "'max_input_chars' is 1000")
    assert executor.confirmation(cid).status == "pending"
    assert executor.confirm(cid, root, "approve")["status"] == "ok"


def test_a_door_whose_input_limit_is_lower_may_apply_an_edit_that_fits(door, key, root, shop):
    executor = door(Shop(shop.log))
    cid = executor.execute(key, "shop.delete_product", {"sku": "TEA-" + "0" * 3000})
    strict = door(Shop(shop.log), Settings(max_input_chars=1000))
    edit = {"action": "edit", "arguments": {"sku": "TEA-0001"}}
    assert strict.confirm(cid["confirmation_id"], root, edit)["status"] == "ok"
    assert len(shop.writes()) == 1
