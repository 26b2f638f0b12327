"""Registry: collection from modules and entry points, system namespace, warnings, order, lookup."""

from __future__ import annotations

import importlib
import logging
import sys
import textwrap

import pytest

from turnkit import ModuleError, Registry, Tool, UnknownToolError


def handler(input: dict, ctx: object) -> list:
    return []


def declaration(name: str, **overrides) -> dict:
    module = name.split(".")[0]
    fields = {
        "name": name,
        "scope": f"{module}.things:read",
        "permission": f"{module}.view",
        "handler": handler,
        "annotations": {"read_only": True},
    }
    fields.update(overrides)
    return fields


class Module:
    def __init__(self, key: str, tools: list, enabled: object = None) -> None:
        self.key = key
        self._tools = tools
        if enabled is not None:
            self.enabled = enabled

    def api_tools(self) -> list:
        return self._tools


def test_tools_are_collected_in_module_then_declaration_order():
    registry = Registry(
        [
            Module("shop", [declaration("shop.list_orders"), declaration("shop.get_order")]),
            Module("blog", [declaration("blog.list_posts")]),
        ]
    )
    assert registry.names() == ["shop.list_orders", "shop.get_order", "blog.list_posts"]
    assert [t.module for t in registry] == ["shop", "shop", "blog"]
    assert len(registry) == 3


def test_tool_objects_and_declarations_are_both_accepted():
    tool = Tool(**declaration("shop.list_orders"))
    registry = Registry([Module("shop", [tool, declaration("shop.get_order")])])
    assert registry["shop.list_orders"].module == "shop"
    assert registry["shop.get_order"].module == "shop"


def test_lookup_by_registry_name():
    registry = Registry([Module("shop", [declaration("shop.list_orders")])])
    assert registry.get("shop.list_orders") is registry["shop.list_orders"]
    assert registry.get("shop.nothing_here") is None
    assert "shop.list_orders" in registry
    with pytest.raises(UnknownToolError, match=r"no tool named 'shop\.nope_x' is registered"):
        registry["shop.nope_x"]


def test_a_bad_tool_gives_one_warning_and_the_modules_other_tools_still_work(caplog):
    bad_one = declaration("shop.set_prices", scope=None)
    bad_two = declaration("Shop.Broken", handler="no_such.module:f")
    module = Module("shop", [declaration("shop.list_orders"), bad_one, bad_two])
    with caplog.at_level(logging.WARNING, logger="turnkit.registry"):
        registry = Registry([module])
    assert registry.names() == ["shop.list_orders"]
    assert len(registry.warnings) == 1
    warning = registry.warnings[0]
    assert warning.module == "shop"
    assert len(warning.problems) == 2
    assert warning.problems[0].startswith("tool 'shop.set_prices' ignored: scope: an admin tool")
    assert "handler: 'no_such.module:f' could not be loaded" in warning.problems[1]
    assert len([r for r in caplog.records if r.name == "turnkit.registry"]) == 1
    assert "module 'shop': 2 problem(s)" in caplog.records[0].getMessage()


def test_a_modules_system_tool_is_ignored():
    module = Module("sneaky", [declaration("system.drop_all", scope=None, permission=None)])
    registry = Registry([module])
    assert "system.drop_all" not in registry
    assert "'system.' namespace is reserved" in registry.warnings[0].problems[0]


def test_the_registry_keeps_its_own_system_tools_first():
    own = Tool(name="system.list_tools", handler=handler, annotations={"read_only": True})
    registry = Registry([Module("shop", [declaration("shop.list_orders")])], system_tools=[own])
    assert registry.names() == ["system.list_tools", "shop.list_orders"]
    assert registry["system.list_tools"].module == "system"
    assert registry.is_enabled("system")


def test_a_non_system_tool_cannot_be_given_as_a_system_tool():
    with pytest.raises(ValueError, match=r"must be named 'system\.<verb>_<noun>'"):
        Registry(system_tools=[Tool(**declaration("shop.list_orders"))])


def test_the_first_of_two_same_named_tools_wins():
    first = Module("shop", [declaration("shop.list_orders", title="first")])
    second = Module("shop2", [declaration("shop.list_orders", title="second")])
    registry = Registry([first, second])
    assert registry["shop.list_orders"].title == "first"
    assert registry.warnings[0].module == "shop2"
    assert "module 'shop' registered it first" in registry.warnings[0].problems[0]


def test_a_duplicate_module_key_is_ignored_with_a_warning():
    registry = Registry(
        [
            Module("shop", [declaration("shop.list_orders")]),
            Module("shop", [declaration("shop.x_y")]),
        ]
    )
    assert registry.names() == ["shop.list_orders"]
    assert "already registered" in registry.warnings[0].problems[0]


def test_api_tools_that_raises_keeps_what_came_before():
    class Partial:
        key = "shop"

        def api_tools(self):
            yield declaration("shop.list_orders")
            raise RuntimeError("database down")

    registry = Registry([Partial()])
    assert registry.names() == ["shop.list_orders"]
    assert registry.warnings[0].problems == ("api_tools() raised RuntimeError: database down",)


def test_something_that_is_not_a_tool_is_reported():
    registry = Registry([Module("shop", ["shop.list_orders"])])
    assert "must return Tool objects or declaration dicts" in registry.warnings[0].problems[0]


@pytest.mark.parametrize("module", [object(), Module("", []), "shop"])
def test_an_object_that_is_not_a_module_is_refused(module):
    with pytest.raises(ModuleError, match="is not a module"):
        Registry([module])


def test_order_is_deterministic():
    modules = [Module(f"m{i}", [declaration(f"m{i}.list_things")]) for i in range(20)]
    assert Registry(modules).names() == Registry(modules).names()


def test_enabled_is_asked_on_every_call():
    state = {"on": True}
    registry = Registry([Module("shop", [declaration("shop.list_orders")], lambda: state["on"])])
    assert registry.is_enabled("shop")
    state["on"] = False
    assert not registry.is_enabled("shop")
    assert not registry.is_enabled("unknown")


def test_enabled_that_raises_counts_as_disabled(expect_errors):
    expect_errors(r"module 'shop': enabled\(\) raised")  # the module's bug, with its traceback

    def broken():
        raise RuntimeError("boom")

    registry = Registry([Module("shop", [declaration("shop.list_orders")], broken)])
    assert not registry.is_enabled("shop")


# --- entry points -----------------------------------------------------------------------------


@pytest.fixture
def installed_plugins(tmp_path, monkeypatch):
    """A real distribution on sys.path declaring modules in the `turnkit.modules` group."""
    (tmp_path / "tk_plugin.py").write_text(
        textwrap.dedent(
            """
            def _h(input, ctx):
                return []

            class Blog:
                key = "blog"
                def api_tools(self):
                    return [{"name": "blog.list_posts", "scope": "blog.posts:read",
                             "permission": "blog.view", "handler": _h}]

            class Shop:
                key = "shop"
                def api_tools(self):
                    return [{"name": "shop.list_orders", "scope": "shop.orders:read",
                             "permission": "shop.view", "handler": _h}]

            shop = Shop()
            """
        )
    )
    dist = tmp_path / "tk_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tk-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[turnkit.modules]\n"
        "b_shop = tk_plugin:shop\n"
        "a_blog = tk_plugin:Blog\n"
        "c_broken = tk_plugin:does_not_exist\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield
    sys.modules.pop("tk_plugin", None)


def test_modules_are_discovered_from_entry_points_sorted_by_name(installed_plugins):
    registry = Registry(entry_points=True)
    assert registry.names() == ["blog.list_posts", "shop.list_orders"]
    assert registry.warnings[0].module == "c_broken"
    assert "failed to load" in registry.warnings[0].problems[0]


def test_explicit_modules_come_before_discovered_ones(installed_plugins):
    registry = Registry([Module("news", [declaration("news.list_items")])], entry_points=True)
    assert registry.names()[0] == "news.list_items"


def test_entry_points_are_not_read_unless_asked(installed_plugins):
    assert Registry().names() == []


def test_a_module_given_as_a_class_is_instantiated():
    class Orders:
        key = "orders"

        def api_tools(self):
            return [{"name": "orders.list_orders", "audience": "public",
                     "annotations": {"read_only": True}, "handler": lambda i, c: []}]  # fmt: skip

    registry = Registry([Orders])
    assert registry.names() == ["orders.list_orders"]
    assert isinstance(registry.modules["orders"], Orders)
