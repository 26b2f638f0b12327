"""Model names: 1-64 characters of ``[a-zA-Z0-9_-]``, dots become underscores, the first wins."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnkit import model_name, model_names
from turnkit.registry.names import is_model_name  # internal: the rule itself

MODEL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
"""The rule model APIs state, written out here independently of the code under test."""

TOOL_NAME = r"^[a-z][a-z0-9]*(_[a-z0-9]+)*\.[a-z][a-z0-9]*(_[a-z0-9]+)+$"
"""The registry's tool-name rule (docs/concepts/tools.md, "Declaring tools")."""

tool_names = st.from_regex(TOOL_NAME, fullmatch=True)
# Few letters, so that names clash ("a.b_c" and "a_b.c") and some run past 64 characters.
clashing_names = st.text(alphabet="ab._", min_size=1, max_size=6)
long_names = st.integers(60, 70).map(lambda n: "a" * (n - 4) + ".b_c")
any_names = tool_names | clashing_names | long_names | st.text(max_size=70)


def _follows_the_rule(name: object) -> bool:
    return isinstance(name, str) and MODEL_NAME.fullmatch(name) is not None


@given(st.text())
def test_model_name_of_any_text_is_none_or_follows_the_rule(text: str) -> None:
    name = model_name(text)
    assert name is None or _follows_the_rule(name)


@given(st.text())
def test_model_name_refuses_exactly_the_texts_that_cannot_follow_the_rule(text: str) -> None:
    if text.startswith("local."):  # a local tool is shown by its own name, which has no dots
        shown = text.removeprefix("local.")
        fits = 1 <= len(shown) <= 64 and all(MODEL_NAME.fullmatch(c) for c in shown)
    else:
        fits = 1 <= len(text) <= 64 and all(c == "." or MODEL_NAME.fullmatch(c) for c in text)
    assert (model_name(text) is not None) is fits


def test_a_local_prefix_with_nothing_or_dots_after_it_has_no_model_name() -> None:
    assert model_name("local.") is None  # found by the property above (an empty own name)
    assert model_name("local.a.b") is None
    assert model_name("local.get_weather") == "get_weather"


@given(tool_names)
def test_model_name_of_a_tool_name_replaces_dots_with_underscores(name: str) -> None:
    result = model_name(name)
    if len(name) > 64:
        assert result is None
    else:
        assert result == name.replace(".", "_")
        assert _follows_the_rule(result)


@given(st.text())
def test_is_model_name_is_the_rule(text: str) -> None:
    assert is_model_name(text) is _follows_the_rule(text)


def test_model_name_maps_dots_to_underscores() -> None:
    assert model_name("catalogue.list_products") == "catalogue_list_products"


@pytest.mark.parametrize("name", ["a" * 64, "a" * 60 + ".b_c", "A-z_0", "x", "0", "-", "_"])
def test_model_name_accepts_up_to_64_allowed_characters(name: str) -> None:
    assert model_name(name) == name.replace(".", "_")
    assert is_model_name(name.replace(".", "_"))


@pytest.mark.parametrize(
    "name",
    [
        "",
        "a" * 65,
        "a" * 61 + ".b_c",
        "café.list",
        "\uff43atalogue.list",  # a fullwidth "c"
        "名前.list",
        "a b.c",
        "a\n",
        "a/b",
        "a:b",
    ],
)
def test_model_name_refuses_empty_long_and_non_ascii_names(name: str) -> None:
    assert model_name(name) is None
    assert not is_model_name(name)


@pytest.mark.parametrize("value", [None, 5, b"abc", ["abc"]])
def test_is_model_name_refuses_what_is_not_a_string(value: object) -> None:
    assert not is_model_name(value)


def test_model_names_keeps_the_first_of_two_clashing_names() -> None:
    assert model_names(["a.b_c", "a_b.c"], str) == {"a_b_c": "a.b_c"}
    assert model_names(["a_b.c", "a.b_c"], str) == {"a_b_c": "a_b.c"}


def test_model_names_leaves_out_invalid_and_too_long_names() -> None:
    too_long = "x" * 61 + ".y_z"  # 65 characters
    assert model_names(["", too_long, "café.list", "ok.list_all"], str) == {
        "ok_list_all": "ok.list_all"
    }


def test_model_names_preserves_order() -> None:
    items = ["z.last_one", "a.first_one", "m.middle_one"]
    assert list(model_names(items, str)) == ["z_last_one", "a_first_one", "m_middle_one"]


def test_model_names_returns_the_items_themselves() -> None:
    items = [{"name": "shop.list_orders"}, {"name": "shop.get_order"}]
    chosen = model_names(items, lambda item: item["name"])
    assert chosen["shop_list_orders"] is items[0]
    assert chosen["shop_get_order"] is items[1]


@given(st.lists(any_names, max_size=12))
def test_model_names_keeps_each_first_valid_name_in_order(names: list[str]) -> None:
    items = list(enumerate(names))  # distinct items even when two names are equal
    chosen = model_names(items, lambda item: item[1])

    for key, (index, name) in chosen.items():
        assert _follows_the_rule(key)
        assert model_name(name) == key
        assert all(model_name(earlier) != key for _, earlier in items[:index])  # the first wins
    for _, name in items:  # no valid name is lost
        assert model_name(name) is None or model_name(name) in chosen
    positions = [index for index, _ in chosen.values()]
    assert positions == sorted(positions)
