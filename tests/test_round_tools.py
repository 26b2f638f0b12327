"""One round for the model (docs/architecture.md §5): for_model, arguments, fit, held_result.

Reaches ``turnkit.turn.tools`` directly: it tests one round's own functions, which no public name
exposes."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnkit import Tool
from turnkit.turn.tools import FIT_MINIMUM, arguments, fit, for_model, held_result


def _compact(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=8) | st.dictionaries(st.text(max_size=8), inner, max_size=8)
    ),
    max_leaves=60,
)
limits = st.integers(min_value=FIT_MINIMUM, max_value=2_000)


@settings(max_examples=400, deadline=None)
@given(json_values, limits)
def test_fit_never_returns_json_over_the_limit(value, limit):
    assert len(_compact(fit(value, limit))) <= limit


@settings(max_examples=300, deadline=None)
@given(json_values, limits)
def test_fit_returns_the_input_unchanged_when_it_fits(value, limit):
    if len(_compact(value)) <= limit:
        assert fit(value, limit) is value


@settings(max_examples=400, deadline=None)
@given(json_values, limits)
def test_fit_partial_is_a_prefix_of_the_original_json(value, limit):
    fitted = fit(value, limit)
    if fitted is not value:
        assert fitted["truncated"] is True
        assert _compact(value).startswith(fitted["partial"])
        assert fitted["hint"] == "" or "narrow" in fitted["hint"]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet='"\\\n\x01é€😀a', min_size=200, max_size=3_000), limits)
def test_fit_counts_the_escaping_of_the_partial(text, limit):
    fitted = fit({"text": text}, limit)
    assert len(_compact(fitted)) <= limit


def test_fit_keeps_as_much_as_fits():
    value = {"rows": ["x" * 50] * 100}
    fitted = fit(value, 1_000)
    assert 1_000 - len(_compact(fitted)) <= 2  # at most one escaped character short
    assert "narrower arguments" in fitted["hint"]


def test_fit_counts_non_ascii_as_one_character():
    value = {"name": "é" * 150}
    assert fit(value, len(_compact(value))) is value


def test_fit_refuses_a_limit_too_small_for_the_notice():
    with pytest.raises(ValueError, match="at least 100"):
        fit({"a": 1}, 99)


def test_fit_of_ten_megabytes_fits():
    value = {"rows": [{"id": i, "text": "y" * 90} for i in range(100_000)]}
    text = _compact(value)
    assert len(text) > 10_000_000
    fitted = fit(value, 20_000)
    assert len(_compact(fitted)) <= 20_000
    assert text.startswith(fitted["partial"])
    assert len(fitted["partial"]) > 15_000  # the quotes in it are escaped: \" takes two
    assert "over the 20000 you can receive" in fitted["hint"]


@pytest.mark.parametrize(
    "value",
    [{"text": "é" * 5_000}, ["ab"] * 3_000, {"a": {"b": list(range(3_000))}}, "x" * 9_999],
)
def test_the_quick_path_for_long_results_keeps_the_promises(value):
    fitted = fit(value, 1_000)
    assert len(_compact(fitted)) <= 1_000
    assert _compact(value).startswith(fitted["partial"])


# --- for_model ----------------------------------------------------------------------------------


def _tool(name: str, **overrides) -> Tool:
    fields = {"name": name, "handler": lambda i, c: None, "audience": "public"}
    return Tool(**{**fields, **overrides})


def test_for_model_gives_openai_function_tools_and_the_name_map():
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    tool = _tool("catalogue.list_products", description="List them.", input_schema=schema)
    definitions, by_name = for_model([tool])
    assert definitions == [
        {
            "type": "function",
            "function": {
                "name": "catalogue_list_products",
                "description": "List them.",
                "parameters": schema,
            },
        }
    ]
    assert by_name == {"catalogue_list_products": tool}


def test_for_model_describes_with_the_title_when_there_is_no_description():
    definitions, _ = for_model([_tool("shop.list_orders", title="List orders")])
    assert definitions[0]["function"]["description"] == "List orders"


def test_for_model_leaves_out_long_names_and_keeps_the_first_of_a_clash():
    long = _tool("shop.list_" + "x" * 60)
    first, second = _tool("shop_x.list_items"), _tool("shop.x_list_items")
    definitions, by_name = for_model([long, first, second])
    assert list(by_name) == ["shop_x_list_items"]
    assert by_name["shop_x_list_items"] is first
    assert len(definitions) == 1


# --- arguments, held ----------------------------------------------------------------------------


def test_arguments_strip_control_fields():
    sent = {"sku": "A", "dry_run": True, "confirm_token": "t", "idempotency_key": "k"}
    assert arguments(sent) == {"sku": "A"}
    assert arguments('{"sku": "A", "dry_run": false}') == {"sku": "A"}


@pytest.mark.parametrize("bad", [[1], "[1]", "not json", 3, None, '"text"', b"\xff"])
def test_anything_but_a_json_object_is_an_error(bad):
    assert arguments(bad) is None


def test_held_result_carries_no_token_preview_or_arguments():
    assert held_result("c1") == {"status": "confirmation_required", "confirmation_id": "c1"}
