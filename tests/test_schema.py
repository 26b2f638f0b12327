"""The schema subset: what check_schema refuses, what validate reports, and the bounded caches.

Reaches ``turnkit.registry.schema`` directly: it tests ``compile_schema`` and the module's
caches, which no public name exposes."""

from __future__ import annotations

import pytest

from turnkit import CompiledSchema, SchemaError, Violation, check_schema, validate
from turnkit.registry import schema as schema_module
from turnkit.registry.schema import compile_schema

TYPICAL = {
    "type": "object",
    "required": ["prices"],
    "additionalProperties": False,
    "properties": {
        "prices": {
            "type": "array",
            "minItems": 1,
            "maxItems": 3,
            "items": {
                "type": "object",
                "required": ["sku", "price"],
                "additionalProperties": False,
                "properties": {
                    "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
                    "price": {"type": "number", "exclusiveMinimum": 0},
                    "currency": {"enum": ["EUR", "USD"]},
                },
            },
        },
        "note": {"type": ["string", "null"], "maxLength": 10},
    },
}


@pytest.mark.parametrize(
    ("keyword", "value"),
    [
        ("$ref", "#/$defs/x"),
        ("$defs", {}),
        ("anyOf", [{"type": "string"}]),
        ("oneOf", [{"type": "string"}]),
        ("allOf", [{"type": "string"}]),
        ("not", {"type": "string"}),
        ("if", {"type": "string"}),
        ("patternProperties", {"^x": {}}),
        ("dependentRequired", {}),
        ("contains", {}),
        ("frobnicate", 1),
    ],
)
def test_check_schema_refuses_keywords_outside_the_subset_with_their_path(keyword, value):
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {keyword: value}}}}
    problems = check_schema(schema)
    assert len(problems) == 1
    path, message = problems[0]
    assert path == f"/properties/a/items/{keyword}"
    assert message.startswith(f"keyword {keyword!r} is not supported; ")


def test_check_schema_accepts_every_supported_keyword():
    schema = {
        "type": "object",
        "title": "t",
        "description": "d",
        "examples": [{}],
        "default": {},
        "properties": {
            "s": {
                "type": "string",
                "minLength": 1,
                "maxLength": 5,
                "pattern": "^a",
                "format": "uri",
            },
            "n": {"type": "number", "minimum": 0, "maximum": 9, "multipleOf": 0.5},
            "x": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 9},
            "l": {"type": "array", "items": {"const": 1}, "minItems": 0, "uniqueItems": True},
            "e": {"enum": ["a", None], "maxItems": 3},
        },
        "required": ["s"],
        "additionalProperties": False,
    }
    assert check_schema(schema) == []


@pytest.mark.parametrize(
    ("schema", "path", "fragment"),
    [
        ({"type": "text"}, "/type", "'type' 'text' is not a JSON type"),
        ({"type": []}, "/type", "'type' is an empty list"),
        ({"type": ["string", "string"]}, "/type", "lists a type twice"),
        ({"required": "a"}, "/required", "'required' must be a list of property names"),
        ({"required": ["a", "a"]}, "/required", "names a property twice"),
        ({"additionalProperties": {}}, "/additionalProperties", "must be true or false"),
        ({"items": [{}]}, "/items", "tuple validation is not supported"),
        ({"minItems": -1}, "/minItems", "'minItems' must be a whole number >= 0"),
        ({"maxLength": 1.5}, "/maxLength", "'maxLength' must be a whole number >= 0"),
        ({"uniqueItems": 1}, "/uniqueItems", "'uniqueItems' must be true or false"),
        ({"enum": []}, "/enum", "'enum' must be a non-empty list"),
        ({"pattern": "("}, "/pattern", "is not a valid regular expression"),
        ({"format": "hostname"}, "/format", "'format' 'hostname' is not supported"),
        ({"minimum": "0"}, "/minimum", "'minimum' must be a finite number"),
        ({"maximum": float("inf")}, "/maximum", "'maximum' must be a finite number"),
        ({"exclusiveMinimum": True}, "/exclusiveMinimum", "must be a finite number"),
        ({"multipleOf": 0}, "/multipleOf", "'multipleOf' must be a number > 0"),
        ({"title": 1}, "/title", "'title' must be a string"),
        ({"examples": {}}, "/examples", "'examples' must be a list"),
        ({"properties": []}, "/properties", "'properties' must be an object"),
        ({"properties": {"a": 1}}, "/properties/a", "a schema must be a JSON object, got int"),
        ({"minItems": 3, "maxItems": 2}, "", "'minItems' 3 and 'maxItems' 2 leave nothing to fit"),
        ({"minimum": 5, "maximum": 1}, "", "'minimum' 5 and 'maximum' 1 leave nothing to fit"),
        ({"exclusiveMinimum": 5, "exclusiveMaximum": 5}, "", "leave nothing to fit"),
        ({"format": []}, "/format", "'format' [] is not supported"),
        ({"pattern": "\\p{Zz}"}, "/pattern", "is not a valid regular expression"),
    ],
)
def test_check_schema_explains_each_bad_value(schema, path, fragment):
    problems = check_schema(schema)
    assert len(problems) == 1, problems
    assert problems[0][0] == path
    assert fragment in problems[0][1]


def test_check_schema_reports_every_problem_not_only_the_first():
    schema = {"type": "object", "anyOf": [], "properties": {"a": {"minLength": -1, "not": {}}}}
    paths = [path for path, _ in check_schema(schema)]
    assert paths == ["/anyOf", "/properties/a/minLength", "/properties/a/not"]


def test_check_schema_escapes_pointer_characters():
    problems = check_schema({"properties": {"a/b~c": {"oneOf": []}}})
    assert problems[0][0] == "/properties/a~1b~0c/oneOf"


def test_check_schema_refuses_a_non_object_schema():
    assert check_schema([]) == [("", "a schema must be a JSON object, got list")]


def test_check_schema_bounds_nesting():
    schema: dict = {"type": "object"}
    for _ in range(80):
        schema = {"type": "array", "items": schema}
    problems = check_schema(schema)
    assert len(problems) == 1
    assert "nests deeper than 64 levels" in problems[0][1]


def test_check_schema_of_non_json_content_reports_it_without_crashing():
    # the schema is sent to the model and kept in checkpoints: it must be plain JSON data
    ((path, message),) = check_schema({"default": object(), "type": "object"})
    assert path == ""
    assert message.endswith("checkpoint can store: at /default: object is not JSON data")


def test_ensure_compile_raises_schema_error_listing_every_problem():
    with pytest.raises(SchemaError) as caught:
        compile_schema({"anyOf": [], "minLength": -1})
    assert [p for p, _ in caught.value.problems] == ["/anyOf", "/minLength"]
    assert isinstance(caught.value, ValueError)


def test_validate_accepts_a_valid_value():
    assert validate(TYPICAL, {"prices": [{"sku": "TEA-0001", "price": 4.5}], "note": None}) == []


def test_validate_reports_every_violation_with_its_pointer():
    value = {
        "prices": [{"sku": "tea", "price": 0}, {"price": 3, "extra": 1}],
        "note": "much too long",
        "other": True,
    }
    violations = validate(TYPICAL, value)
    assert all(isinstance(v, Violation) for v in violations)
    by_path = {v.path: v.message for v in violations}
    assert set(by_path) == {"/prices/0/sku", "/prices/0/price", "/prices/1", "/note", ""}
    assert "does not match" in by_path["/prices/0/sku"]
    assert "minimum of 0" in by_path["/prices/0/price"]
    assert "/prices/1" in by_path
    assert len(violations) == 6  # /prices/1 misses sku and has an extra property


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("date", "2024-02-29", "2024-02-30"),
        ("date-time", "2024-01-01T10:00:00Z", "2024-01-01 10:00"),
        ("email", "a@example.org", "example.org"),
        ("uuid", "123e4567-e89b-12d3-a456-426614174000", "123e4567"),
        ("uri", "https://example.org/a", "example.org"),
    ],
)
def test_formats_are_asserted(fmt, good, bad):
    schema = {"type": "string", "format": fmt}
    assert validate(schema, good) == []
    assert len(validate(schema, bad)) == 1


def test_validate_of_non_json_value_is_a_violation_not_a_crash():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    violations = validate(schema, {"a": object()})
    assert len(violations) == 1
    assert violations[0].path == ""
    assert "is not a JSON value" in violations[0].message
    assert validate(schema, {1: "a"})[0].message.startswith("is not a JSON value")


def test_validate_survives_10000_deep_nesting_and_10_mb_strings():
    deep: object = "x"
    for _ in range(10_000):
        deep = [deep]
    schema = {"type": "object", "properties": {"q": {"type": "string", "maxLength": 100}}}
    assert validate(schema, {"deep": deep}) == [
        Violation("", "nests too deeply; send flatter data")
    ]
    assert len(validate(schema, {"q": "x" * 10_000_000})) == 1


def test_validate_with_a_compiled_schema():
    compiled = compile_schema(TYPICAL)
    assert isinstance(compiled, CompiledSchema)
    assert validate(compiled, {"prices": []})[0].path == "/prices"
    assert compile_schema(compiled) is compiled


def test_compiled_schemas_are_shared_for_equal_schemas():
    assert compile_schema(dict(TYPICAL)) is compile_schema(dict(TYPICAL))


def test_caches_stay_bounded_for_schemas_built_from_changing_data():
    limit = schema_module.cache_sizes()["limit"]
    for n in range(limit + 50):
        schema = {"type": "object", "properties": {"x": {"enum": [n]}}}
        check_schema(schema)
        validate(schema, {"x": n})
    sizes = schema_module.cache_sizes()
    assert sizes["checked"] <= limit
    assert sizes["compiled"] <= limit
    assert sizes["by_identity"] <= limit


def test_identity_cache_never_confuses_a_new_schema_with_a_dead_one():
    for n in range(200):
        schema = {"type": "integer", "minimum": n}
        assert validate(schema, n) == []
        assert validate(schema, n - 1) != []


def test_non_string_keys_are_reported_not_hidden_by_caching():
    problems = check_schema({"type": "object", "properties": {1: {"type": "string"}}})
    assert problems == [("/properties", "property name 1 is not a string")]


def test_a_pattern_is_checked_in_the_dialect_that_validates():
    assert check_schema({"type": "string", "pattern": "^\\p{L}+$"}) == []  # ECMA, not Python re


def test_a_schema_number_no_checkpoint_can_store_is_refused():
    schema = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 10**30}}}
    ((path, message),) = check_schema(schema)
    assert path == ""
    assert "/properties/n/maximum" in message
    assert "outside the 64-bit range" in message


def test_a_whole_number_written_as_a_float_is_a_count_as_in_json_schema():
    schema = {"type": "object", "properties": {"code": {"type": "string", "maxLength": 2.0}}}
    assert check_schema(schema) == []
    assert validate(schema, {"code": "ab"}) == []
    assert validate(schema, {"code": "abc"})[0].path == "/code"
    assert check_schema({"type": "string", "maxLength": 2.5})[0][1].startswith("'maxLength' must")
