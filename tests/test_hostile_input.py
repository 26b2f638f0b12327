"""Hostile input to ``execute``: every bad call gets its error envelope and an audit row, the
handler never runs, and nothing raises (docs/architecture.md §4, steps 1-3)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from _shop import prices
from turnkit import Caller, Executor, Registry, Settings

TEN_MB = 10 * 1024 * 1024
MESSAGE_BOUND = 300


def deep_list(depth: int) -> list:
    root: list = []
    current = root
    for _ in range(depth):
        inner: list = []
        current.append(inner)
        current = inner
    return root


def deep_dict(depth: int) -> dict:
    root: dict = {}
    current = root
    for _ in range(depth):
        inner: dict = {}
        current["a"] = inner
        current = inner
    return root


def circular() -> dict:
    value: dict = {"limit": 1}
    value["self"] = value
    return value


class Notes:
    """A module whose only tool records that it ran; its schema caps one field and not another."""

    key = "notes"

    def __init__(self) -> None:
        self.runs: list[dict] = []

    def set_note(self, input: dict, ctx: Any) -> dict:
        self.runs.append(input)
        return {"saved": True}

    def api_tools(self) -> list[dict]:
        return [
            {
                "name": "notes.set_note",
                "scope": "notes.notes:write",
                "permission": "shop.manage",
                "handler": self.set_note,
                "input_schema": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "note": {"type": "string", "maxLength": 100},
                        "free": {"type": "string"},
                    },
                },
            }
        ]


@pytest.fixture
def notes() -> Notes:
    return Notes()


@pytest.fixture
def notes_executor(ledger, rights, clock, notes):
    ex = Executor(
        Registry([notes]), ledger=ledger, permissions=rights, settings=Settings(), clock=clock
    )
    yield ex
    ex.close()


@pytest.fixture
def notes_key() -> Caller:
    return Caller.key("notes-key", user_id="alice", scopes={"notes.notes:write"})


def only_audit_row(executor: Executor) -> dict:
    """The audit row of the one call the test made (each test has a fresh ledger)."""
    rows = executor.ledger.audit_rows()
    assert len(rows) == 1, rows
    return rows[0]


def assert_error(answer: dict, code: str) -> dict:
    assert answer["executed"] is False
    assert answer["status"] == "error"
    assert answer["error"]["code"] == code, answer["error"]
    assert isinstance(answer["error"]["message"], str)
    assert isinstance(answer["error"]["details"], dict)
    json.dumps(answer, allow_nan=False)  # the answer itself is plain JSON
    return answer["error"]


def assert_audited(executor: Executor, code: str) -> dict:
    row = only_audit_row(executor)
    assert row["status"] == "error"
    assert row["code"] == code
    return row


# --- the input is not an object ---------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [[], [prices()], "prices", "", None, 42, 3.5, True],
    ids=["empty-list", "list", "string", "empty-string", "none", "int", "float", "bool"],
)
def test_an_input_that_is_not_an_object_is_invalid_input(executor, key, shop, value):
    error = assert_error(executor.execute(key, "shop.set_prices", value), "invalid_input")
    assert "must be a JSON object" in error["message"]
    assert shop.writes() == []
    assert_audited(executor, "invalid_input")


# --- control fields ---------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["dry_run", "confirm_token", "idempotency_key"])
async def test_a_control_field_inside_the_input_never_reaches_a_handler(field):
    """Over MCP or REST a client may put ``dry_run`` in the arguments: refused, never run (a tool
    with an open schema would take it as data and write for real)."""
    received: list[dict[str, Any]] = []

    class Open:
        key = "open"

        def api_tools(self) -> list[dict[str, Any]]:
            return [{"name": "open.add_note", "audience": "public", "danger": None,
                     "input_schema": {"type": "object"},
                     "handler": lambda value, ctx: received.append(value) or "noted"}]  # fmt: skip

    executor = Executor(Registry([Open()]))
    value = {"text": "hi", field: True if field == "dry_run" else "x"}
    try:
        anyone = Caller.public()
        answers = [executor.execute(anyone, "open.add_note", value),
                   await executor.aexecute(anyone, "open.add_note", value)]  # fmt: skip
        for answer in answers:
            error = assert_error(answer, "invalid_input")
            assert f"{field!r} in the input" in error["message"]
            assert error["details"]["control_fields"] == [field]
        assert received == []
        assert (
            executor.execute(Caller.public(), "open.add_note", {"text": "hi"})["result"] == "noted"
        )
    finally:
        executor.close()


@pytest.mark.parametrize(
    "control",
    ["dry_run", ["dry_run"], ("dry_run", True), 1, True],
    ids=["string", "list", "tuple", "int", "bool"],
)
def test_control_that_is_not_a_mapping_is_invalid_input(executor, key, shop, control):
    answer = executor.execute(key, "shop.set_prices", prices(), control)
    error = assert_error(answer, "invalid_input")
    assert "control" in error["message"]
    assert shop.writes() == []
    assert_audited(executor, "invalid_input")


@pytest.mark.parametrize(
    "control",
    [{"force": True}, {"DRY_RUN": True}, {"dry_run": False, "confirm": "yes"}, {1: True}],
    ids=["force", "wrong-case", "beside-a-known-one", "int-key"],
)
def test_an_unknown_control_field_is_invalid_input(executor, key, shop, control):
    answer = executor.execute(key, "shop.set_prices", prices(), control)
    error = assert_error(answer, "invalid_input")
    assert "is not a control field" in error["message"]
    assert error["details"]["problems"]
    assert shop.writes() == []
    assert_audited(executor, "invalid_input")


def test_a_huge_unknown_control_field_is_named_briefly(executor, key, shop):
    answer = executor.execute(key, "shop.set_prices", prices(), {"x" * 1_000_000: True})
    error = assert_error(answer, "invalid_input")
    assert len(error["message"]) < MESSAGE_BOUND
    assert shop.writes() == []
    assert_audited(executor, "invalid_input")


@pytest.mark.parametrize(
    "control",
    [
        {"dry_run": "yes"},
        {"dry_run": 1},
        {"dry_run": 0},
        {"dry_run": None},
        {"idempotency_key": 5},
        {"idempotency_key": None},
        {"idempotency_key": b"key"},
        {"confirm_token": ["token"]},
        {"confirm_token": {"token": "t"}},
        {"idempotency_key": ""},
        {"idempotency_key": "k" * 256},
        {"idempotency_key": "k" * 1_000_000},
    ],
    ids=[
        "dry_run-string",
        "dry_run-1",
        "dry_run-0",
        "dry_run-none",
        "key-int",
        "key-none",
        "key-bytes",
        "token-list",
        "token-dict",
        "key-empty",
        "key-256",
        "key-1M",
    ],
)
def test_a_control_field_of_the_wrong_type_is_invalid_input(executor, key, shop, control):
    answer = executor.execute(key, "shop.set_prices", prices(), control)
    error = assert_error(answer, "invalid_input")
    assert error["message"].startswith("invalid control fields")
    assert len(error["message"]) < MESSAGE_BOUND
    assert shop.writes() == []
    assert_audited(executor, "invalid_input")


def test_an_idempotency_key_of_255_characters_is_accepted(executor, key, shop):
    answer = executor.execute(key, "shop.set_prices", prices(), {"idempotency_key": "k" * 255})
    assert answer == {"executed": True, "status": "ok", "result": {"updated": 1}}
    assert len(shop.writes()) == 1


# --- 10 MB arguments --------------------------------------------------------------------------


def test_a_huge_string_over_max_length_is_invalid_input(notes_executor, notes_key, notes, ledger):
    # the input limit (1 000 000 characters by default) refuses it before the schema is asked
    answer = notes_executor.execute(notes_key, "notes.set_note", {"note": "a" * TEN_MB})
    assert assert_error(answer, "invalid_input")["details"]["limit"] == 1_000_000
    # with the limit raised, the schema's maxLength refuses it
    ledger.set_setting("max_input_chars", 50 * TEN_MB)
    answer = notes_executor.execute(notes_key, "notes.set_note", {"note": "a" * TEN_MB})
    error = assert_error(answer, "invalid_input")
    assert [v["path"] for v in error["details"]["violations"]] == ["/note"]
    assert notes.runs == []
    assert [row["code"] for row in ledger.audit_rows()] == ["invalid_input", "invalid_input"]


def test_a_huge_string_in_an_unknown_field_is_invalid_input(executor, key, shop, ledger):
    huge = {**prices(), "comment": "a" * TEN_MB}
    answer = executor.execute(key, "shop.set_prices", huge)
    assert assert_error(answer, "invalid_input")["details"]["limit"] == 1_000_000
    ledger.set_setting("max_input_chars", 50 * TEN_MB)
    error = assert_error(executor.execute(key, "shop.set_prices", huge), "invalid_input")
    assert "comment" in error["message"]
    assert [v["path"] for v in error["details"]["violations"]] == [""]
    assert shop.writes() == []
    assert [row["code"] for row in ledger.audit_rows()] == ["invalid_input", "invalid_input"]


def test_a_huge_input_the_schema_accepts_is_refused_by_max_input_chars(
    notes_executor, notes_key, notes
):
    answer = notes_executor.execute(notes_key, "notes.set_note", {"free": "a" * TEN_MB})
    error = assert_error(answer, "invalid_input")
    assert error["details"] == {"limit": 1_000_000}
    assert "1000000" in error["message"]
    assert len(error["message"]) < MESSAGE_BOUND
    assert notes.runs == []
    assert_audited(notes_executor, "invalid_input")


def test_max_input_chars_is_read_from_the_ledger_at_call_time(
    notes_executor, notes_key, notes, ledger
):
    ledger.set_setting("max_input_chars", 50)
    answer = notes_executor.execute(notes_key, "notes.set_note", {"free": "a" * 60})
    assert assert_error(answer, "invalid_input")["details"] == {"limit": 50}
    ledger.clear_setting("max_input_chars")
    answer = notes_executor.execute(notes_key, "notes.set_note", {"free": "a" * 60})
    assert answer["status"] == "ok"
    assert len(notes.runs) == 1


def test_a_schema_violation_does_not_echo_a_huge_value(notes_executor, notes_key, notes):
    answer = notes_executor.execute(notes_key, "notes.set_note", {"note": "a" * 200_000})
    assert_error(answer, "invalid_input")
    assert notes.runs == []
    assert len(json.dumps(answer)) < 10_000


# --- deep nesting -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        {"prices": deep_list(10_000)},
        {"prices": [deep_dict(10_000)]},
        {"prices": [{"sku": "TEA-0001", "price": deep_list(10_000)}]},
        {"nested": deep_dict(10_000)},
    ],
    ids=["lists", "dicts", "list-in-a-valid-item", "dicts-in-an-unknown-field"],
)
@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
def test_input_nested_ten_thousand_deep_is_invalid_input(executor, key, shop, value, dry_run):
    answer = executor.execute(key, "shop.set_prices", value, {"dry_run": dry_run})
    error = assert_error(answer, "invalid_input")
    assert len(error["message"]) < MESSAGE_BOUND
    assert shop.writes() == []
    assert_audited(executor, "invalid_input")


def test_a_circular_input_is_invalid_input(executor, key, shop):
    error = assert_error(executor.execute(key, "shop.list_products", circular()), "invalid_input")
    assert "circular reference" in error["message"]
    assert_audited(executor, "invalid_input")


# --- tool names -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "shop.no_such_tool",
        "",
        "SHOP.LIST_PRODUCTS",
        "shop.list_products ",
        "x" * 1_000_000,
        42,
        None,
        3.5,
        b"shop.list_products",
        ["shop.list_products"],
        {"name": "shop.list_products"},
    ],
    ids=[
        "unknown",
        "empty",
        "upper-case",
        "trailing-space",
        "1MB",
        "int",
        "none",
        "float",
        "bytes",
        "list",
        "dict",
    ],
)
def test_an_unknown_tool_name_is_not_found_with_a_bounded_message(executor, key, name):
    error = assert_error(executor.execute(key, name, {}), "not_found")
    assert len(error["message"]) < MESSAGE_BOUND
    row = assert_audited(executor, "not_found")
    assert len(row["tool"]) <= 200


def test_a_tool_name_with_a_lone_surrogate_is_not_found(executor, key):
    assert_error(executor.execute(key, "shop.\ud800", {}), "not_found")
    assert_audited(executor, "not_found")


@pytest.mark.parametrize("field", ["idempotency_key", "confirm_token"])
def test_a_control_string_with_a_lone_surrogate_is_invalid_input_and_writes_nothing(
    executor, key, shop, field
):
    answer = executor.execute(key, "shop.set_prices", prices(), {field: "k\udc80"})
    error = assert_error(answer, "invalid_input")
    assert f"{field!r} must be printable Unicode text" in error["message"]
    assert shop.writes() == []
    assert_audited(executor, "invalid_input")


@pytest.mark.parametrize("where", ["name", "idempotency_key", "confirm_token"])
def test_a_nul_character_in_a_name_or_control_string_is_refused_and_writes_nothing(
    executor, key, shop, where
):
    if where == "name":
        answer = executor.execute(key, "shop.\x00", prices())
        assert_error(answer, "not_found")
        assert_audited(executor, "not_found")
    else:
        answer = executor.execute(key, "shop.set_prices", prices(), {where: "k\x00k"})
        error = assert_error(answer, "invalid_input")
        assert f"{where!r} must be printable Unicode text" in error["message"]
        assert_audited(executor, "invalid_input")
    assert shop.writes() == []


# --- values that are not JSON -----------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [object(), {1, 2}, frozenset(), math.nan, math.inf, -math.inf, b"bytes", 1 + 2j, circular()],
    ids=["object", "set", "frozenset", "nan", "inf", "-inf", "bytes", "complex", "circular"],
)
def test_a_value_that_is_not_json_inside_the_input_is_invalid_input(executor, key, shop, value):
    answer = executor.execute(
        key, "shop.set_prices", {"prices": [{"sku": "TEA-0001", "price": value}]}
    )
    error = assert_error(answer, "invalid_input")
    assert "not plain JSON" in error["message"]
    assert len(error["message"]) < MESSAGE_BOUND
    assert shop.writes() == []
    assert_audited(executor, "invalid_input")


@pytest.mark.parametrize(
    "value",
    [
        {1: 5},
        {None: 1},
        {True: 1},
        {1.5: 1},
        {(1, 2): 1},
        {"limit": 1, 2: 3},
        {"prices": [{"sku": "TEA-0001", "price": 1, 7: 8}]},
        {"prices": [{"sku": "TEA-0001", 1: 1}]},
    ],
    ids=[
        "int",
        "none",
        "bool",
        "float",
        "tuple",
        "beside-a-string-key",
        "nested-beside-valid-keys",
        "nested-alone",
    ],
)
def test_a_dict_key_that_is_not_a_string_is_invalid_input(executor, key, shop, value):
    error = assert_error(executor.execute(key, "shop.set_prices", value), "invalid_input")
    assert len(error["message"]) < MESSAGE_BOUND
    assert shop.writes() == []
    assert_audited(executor, "invalid_input")


# --- the same through aexecute ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "control", "code"),
    [
        ("shop.set_prices", ["not", "an", "object"], None, "invalid_input"),
        ("shop.set_prices", prices(), {"dry_run": "yes"}, "invalid_input"),
        ("shop.set_prices", prices(), {"idempotency_key": ""}, "invalid_input"),
        ("shop.set_prices", {"prices": deep_list(10_000)}, None, "invalid_input"),
        ("shop.set_prices", {"prices": [{"sku": "TEA-0001", "price": {3}}]}, None, "invalid_input"),
        ("shop.set_prices", {1: prices()}, None, "invalid_input"),
        ("shop.set_prices", {**prices(), "comment": "a" * TEN_MB}, None, "invalid_input"),
        ("x" * 1_000_000, {}, None, "not_found"),
        (None, {}, None, "not_found"),
    ],
    ids=[
        "list-input",
        "dry_run-string",
        "empty-key",
        "deep",
        "set",
        "int-key",
        "10MB",
        "1MB-name",
        "none-name",
    ],
)
async def test_hostile_input_through_aexecute_gets_the_same_answers(
    executor, key, shop, name, value, control, code
):
    error = assert_error(await executor.aexecute(key, name, value, control), code)
    assert len(error["message"]) < MESSAGE_BOUND
    assert shop.writes() == []
    rows = await executor.ledger.aaudit_rows()
    assert [row["code"] for row in rows] == [code]
