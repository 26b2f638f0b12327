"""Every rule of a tool declaration (docs/architecture.md §1), one behaviour per test."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, Field

from turnkit import Annotations, Tool, ToolDeclarationError


def handler(input: dict, ctx: object) -> dict:
    return {"ok": True}


def admin(**overrides):
    """A valid admin write declaration, with ``overrides`` applied."""
    fields = {
        "name": "shop.set_prices",
        "scope": "shop.prices:write",
        "permission": "shop.manage_catalog",
        "handler": handler,
    }
    fields.update(overrides)
    return fields


def problems_of(**overrides) -> list[str]:
    return Tool.problems(admin(**overrides))


def only_problem(**overrides) -> str:
    problems = problems_of(**overrides)
    assert len(problems) == 1, problems
    return problems[0]


# --- defaults ---------------------------------------------------------------------------------


def test_defaults_are_filled_in():
    tool = Tool(**admin())
    assert tool.title == "shop.set_prices"
    assert tool.description == ""
    assert tool.input_schema == {"type": "object", "properties": {}, "additionalProperties": False}
    assert tool.output_schema is None
    assert tool.annotations == Annotations()
    assert tool.danger is None
    assert tool.max_items is None
    assert tool.cost is None
    assert tool.module is None
    assert tool.audience == "admin"


def test_a_tool_is_a_write_unless_read_only():
    assert Tool(**admin()).is_write
    assert not Tool(**admin(annotations={"read_only": True})).is_write
    assert not Tool(**admin(annotations=Annotations(read_only=True))).is_write


def test_system_tools_are_recognised():
    assert Tool(name="system.list_tools", handler=handler).is_system
    assert not Tool(**admin()).is_system


def test_tool_is_immutable():
    tool = Tool(**admin())
    with pytest.raises(AttributeError):
        tool.name = "shop.other_name"  # type: ignore[misc]


def test_input_schema_is_copied_so_later_mutation_of_the_declaration_cannot_change_it():
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    tool = Tool(**admin(input_schema=schema))
    schema["properties"]["n"]["type"] = "string"
    assert tool.input_schema["properties"]["n"]["type"] == "integer"


# --- every problem at once --------------------------------------------------------------------


def test_building_reports_every_problem_in_one_exception():
    with pytest.raises(ToolDeclarationError) as caught:
        Tool(name="Bad Name", handler=42, audience="public", scope="x", cost=0, max_items=0)
    fields = [p.split(":")[0] for p in caught.value.problems]
    assert fields == ["name", "scope", "handler", "max_items", "cost"]
    assert "has 5 problems" in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_build_returns_the_problems_without_raising():
    built = Tool.build(name="bad", handler=handler)
    assert built.tool is None
    assert any(p.startswith("name:") for p in built.problems)
    good = Tool.build(admin())
    assert good.problems == []
    assert good.tool is not None
    assert good.tool.name == "shop.set_prices"


def test_build_reports_unknown_fields_with_the_known_ones():
    problems = Tool.problems(admin(scopes=["x"]))
    assert problems[0].startswith("scopes: unknown field; known fields: annotations, approvals")


# --- name -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "shop",
        "shop.prices",
        "Shop.set_prices",
        "shop.set-prices",
        "shop.set__prices",
        "1shop.set_x",
    ],
)
def test_name_must_be_namespace_dot_verb_noun_in_lowercase(name):
    problem = only_problem(name=name)
    assert problem.startswith(f"name: {name!r} must be '<namespace>.<verb>_<noun>'")
    assert "e.g. 'catalogue.list_products'" in problem


def test_name_is_at_most_100_characters():
    name = "shop.set_" + "x" * 92
    assert len(name) == 101
    problem = only_problem(name=name)
    assert problem.startswith("name:")
    assert "101 characters; at most 100 allowed" in problem
    assert Tool.problems(admin(name=name[:100])) == []


def test_name_must_be_a_string():
    assert only_problem(name=7).startswith("name: must be a string like 'catalogue.list_products'")


# --- audience, scope, permission --------------------------------------------------------------


def test_audience_is_admin_or_public():
    problem = only_problem(audience="private")
    assert problem == "audience: 'private' is neither 'admin' (a key or session) nor 'public'"


def test_admin_tool_needs_a_scope():
    problem = only_problem(scope=None)
    assert problem.startswith("scope: an admin tool needs the scope a key must carry")


def test_admin_tool_needs_a_permission():
    problem = only_problem(permission=None)
    assert problem.startswith("permission: an admin tool needs the role permission")


def test_system_admin_tool_needs_neither_scope_nor_permission():
    assert Tool.problems(name="system.list_tools", handler=handler) == []


@pytest.mark.parametrize(
    "scope", ["shop.prices", "shop:write", "Shop.prices:write", "shop.prices:"]
)
def test_scope_is_module_resource_action(scope):
    problem = only_problem(scope=scope)
    assert problem.startswith(f"scope: {scope!r} must be '<module>.<resource>:<action>'")


@pytest.mark.parametrize("permission", ["", "Shop", "shop manage", 5])
def test_permission_is_a_lowercase_permission_name(permission):
    problem = only_problem(permission=permission)
    assert problem.startswith(f"permission: {permission!r} must be a lowercase permission name")


def test_public_tool_has_neither_scope_nor_permission():
    problems = problems_of(audience="public")
    assert len(problems) == 2
    assert problems[0].startswith("scope: a public tool is called without a key")
    assert problems[1].startswith("permission: a public tool is called without a key")
    assert "make the tool audience='admin'" in problems[0]
    assert Tool.problems(name="shop.list_products", audience="public", handler=handler) == []


# --- title, description -----------------------------------------------------------------------


def test_title_and_description_must_be_text():
    assert only_problem(title=3) == "title: must be a string, got int"
    assert only_problem(description=["x"]) == "description: must be a string, got list"


def test_title_is_kept_when_given():
    assert Tool(**admin(title="Set prices")).title == "Set prices"


# --- input and output schema ------------------------------------------------------------------


def test_input_schema_root_must_be_an_object():
    problem = only_problem(input_schema={"type": "array"})
    assert problem.startswith("input_schema: the root must be 'type': 'object'")


def test_input_schema_may_not_declare_a_control_field():
    schema = {"type": "object", "properties": {"dry_run": {"type": "boolean"}}}
    problem = only_problem(input_schema=schema)
    assert problem == (
        "input_schema: property 'dry_run' is a control field turnkit sets itself;"
        " rename the property"
    )


def test_input_schema_outside_the_subset_names_the_path_and_keyword():
    schema = {"type": "object", "properties": {"q": {"oneOf": [{"type": "string"}]}}}
    problem = only_problem(input_schema=schema)
    assert problem.startswith("input_schema: /properties/q/oneOf: keyword 'oneOf' is not supported")


def test_input_schema_must_be_a_mapping_or_model():
    problem = only_problem(input_schema="object")
    assert problem.startswith("input_schema: must be a JSON Schema object or a pydantic model")


def test_output_schema_is_checked_against_the_subset():
    problem = only_problem(output_schema={"type": "object", "$ref": "#/x"})
    assert problem.startswith("output_schema: /$ref: keyword '$ref' is not supported")
    tool = Tool(**admin(output_schema={"type": "array", "items": {"type": "integer"}}))
    assert tool.output_validator is not None
    assert tool.output_validator.is_valid([1, 2])


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sku: str = Field(pattern=r"^[A-Z]{3}-[0-9]{4}$")
    price: float = Field(gt=0)
    note: str | None = None


class SetPrices(BaseModel):
    prices: list[Price] = Field(min_length=1)


def test_pydantic_model_becomes_a_subset_schema():
    tool = Tool(**admin(input_schema=SetPrices))
    assert tool.input_model is SetPrices
    item = tool.input_schema["properties"]["prices"]["items"]
    assert item["additionalProperties"] is False
    assert item["properties"]["note"]["type"] == ["string", "null"]
    assert item["properties"]["price"]["exclusiveMinimum"] == 0
    assert tool.input_validator.is_valid({"prices": [{"sku": "TEA-0001", "price": 2}]})
    assert not tool.input_validator.is_valid({"prices": [{"sku": "tea", "price": 2}]})


def test_pydantic_model_outside_the_subset_is_refused_with_the_path():
    class Loose(BaseModel):
        tags: dict[str, int]

    problem = only_problem(input_schema=Loose)
    assert problem.startswith("input_schema: /properties/tags/additionalProperties: ")


def test_recursive_pydantic_model_is_refused():
    class Node(BaseModel):
        children: list[Node] = []

    problems = problems_of(input_schema=Node)
    assert any("'$ref' is not supported" in p for p in problems)


# --- handler ----------------------------------------------------------------------------------


def test_handler_string_is_imported():
    tool = Tool(**admin(handler="json:dumps"))
    import json

    assert tool.handler is json.dumps


def test_handler_string_needs_module_and_function():
    assert (
        only_problem(handler="json.dumps")
        == "handler: 'json.dumps' must be written 'package.module:attribute'"
    )


def test_handler_string_that_does_not_import_is_reported():
    problem = only_problem(handler="no_such_pkg.mod:run")
    assert problem.startswith("handler: 'no_such_pkg.mod:run' could not be loaded: ModuleNotFound")
    problem = only_problem(handler="json:no_such_function")
    assert "AttributeError" in problem


def test_handler_must_be_callable():
    problem = only_problem(handler=3)
    assert problem.startswith("handler: must be a callable (input, ctx) -> result")


def test_async_handler_is_accepted():
    async def run(input, ctx):
        return {}

    assert Tool(**admin(handler=run)).handler is run


# --- annotations, danger, max_items, cost -----------------------------------------------------


def test_annotations_flags_are_known_booleans():
    assert only_problem(annotations={"readonly": True}).startswith(
        "annotations: unknown flag 'readonly'; known flags: read_only"
    )
    assert only_problem(annotations={"read_only": "yes"}) == (
        "annotations: 'read_only' must be true or false, got 'yes'"
    )
    assert only_problem(annotations=["read_only"]).startswith("annotations: must be Annotations")


def test_danger_is_none_always_or_a_check():
    assert Tool.problems(admin(danger="always")) == []
    assert Tool.problems(admin(danger=lambda input, ctx: True)) == []
    assert only_problem(danger="sometimes").startswith("danger: 'sometimes' is not None")


@pytest.mark.parametrize("value", [0, -1, 2.5, True, "10"])
def test_max_items_is_a_positive_whole_number(value):
    assert only_problem(max_items=value).startswith("max_items: must be a whole number >= 1")


@pytest.mark.parametrize("value", [0, 1001, -5, 2.0, True, "3"])
def test_cost_is_1_to_1000_or_a_function(value):
    assert only_problem(cost=value).startswith(f"cost: {value!r} must be None (the default rule)")


@pytest.mark.parametrize("value", [None, 1, 1000, len])
def test_valid_costs(value):
    assert Tool.problems(admin(cost=value)) == []


def test_with_module_marks_the_declaring_module_and_keeps_the_model():
    tool = Tool(**admin(input_schema=SetPrices)).with_module("shop")
    assert tool.module == "shop"
    assert tool.input_model is SetPrices
