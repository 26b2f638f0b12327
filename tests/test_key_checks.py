"""``turnkit keys create``'s warnings as values: what a key's scopes and allow list can be known
to miss, against the loaded tools or, without them, by the scopes' names alone.

Reaches ``turnkit.cli.key_checks`` directly: it tests ``key_warnings`` itself, which no public
name exposes."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnkit import Registry, Tool
from turnkit.cli.key_checks import key_warnings
from turnkit.demo import Catalogue

READ, WRITE = "catalogue.products:read", "catalogue.products:write"
DECIDE = "system.confirmations:decide"


@pytest.fixture
def tools(tmp_path: Path) -> list[Tool]:
    """The demo catalogue's tools (two reads, two writes); its file is never opened."""
    return list(Registry([Catalogue(tmp_path / "never-opened.sqlite")]).tools)


def test_a_key_whose_scopes_and_tools_all_exist_is_not_warned(tools):
    assert key_warnings({READ, DECIDE}, None, tools) == []
    assert key_warnings({READ, WRITE}, {"catalogue.set_prices"}, tools) == []


def test_each_unknown_scope_and_allowed_tool_is_one_warning(tools):
    found = key_warnings({READ, "catalogue.product:read", "system.nope:x"}, {"shop.x_y"}, tools)
    assert [line.split(":")[0] for line in found] == [
        "no loaded tool uses the scope 'catalogue.product",
        "no loaded tool uses the scope 'system.nope",
        "no loaded module declares the tool 'shop.x_y' (--allow)",
    ]


def test_write_and_decide_names_the_write_tools_the_key_may_call(tools):
    (found,) = key_warnings({WRITE, DECIDE}, None, tools)
    assert "may call the write tools 'catalogue.set_prices', 'catalogue.delete_product'" in found
    assert "Make two keys instead" in found
    (found,) = key_warnings({READ, WRITE, DECIDE}, {"catalogue.delete_product"}, tools)
    assert "'catalogue.set_prices'" not in found  # the allow list leaves it out
    assert key_warnings({WRITE, DECIDE}, {"catalogue.get_product"}, tools) == []  # no write


def test_without_tools_only_what_the_scopes_names_show_is_warned():
    assert key_warnings({READ, "shop.orders:delete", DECIDE}, {"anything.at_all"}, None) == []
    (found,) = key_warnings({"system.confirm_any:x"}, None, None)
    assert found.startswith("turnkit knows no scope 'system.confirm_any:x'")
    (found,) = key_warnings({WRITE, DECIDE}, None, None)
    assert f"carries {WRITE!r}, by its name a scope of write tools" in found
    assert key_warnings({WRITE}, None, None) == []  # writing alone is what the key is for
