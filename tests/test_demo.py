"""The demo catalogue through the executor, the scripted demo model, and a full turn on both.

Reaches ``turnkit.demo.model`` and ``turnkit.turn.tools``: the scripted demo model's label and
tool names, and the definitions a model is sent (``for_model``), are what it checks, and no
public name holds them."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from turnkit import Caller, Executor
from turnkit.demo import (
    CATEGORIES,
    DEMO_CALLER,
    PRODUCTS,
    Catalogue,
    demo_executor,
    demo_permissions,
    ledger_path,
    scripted_demo_model,
)
from turnkit.demo.model import CAN_DO, LABEL, LIST_TOOL, SET_PRICES_TOOL
from turnkit.graph import TurnContext, build_turn_graph
from turnkit.turn.tools import for_model

READ = "catalogue.products:read"
WRITE = "catalogue.products:write"


@pytest.fixture
def db(tmp_path) -> Path:
    return tmp_path / "demo" / "catalogue.sqlite"


@pytest.fixture
def executor(db) -> Iterator[Executor]:
    ex = demo_executor(db)
    yield ex
    ex.close()


@pytest.fixture
def key() -> Caller:
    """An API key of the demo user with both catalogue scopes (its writes are not held)."""
    return Caller.key("k-demo", user_id="demo", scopes={READ, WRITE})


def catalogue_of(executor: Executor) -> Catalogue:
    return executor.registry.modules["catalogue"]  # type: ignore[return-value]


def connect(db: Path) -> closing[sqlite3.Connection]:
    """A connection to an existing catalogue file (never creates one), closed after use."""
    return closing(sqlite3.connect(f"{db.as_uri()}?mode=rw", uri=True, isolation_level=None))


def price_of(db: Path, sku: str) -> float | None:
    with connect(db) as conn:
        row = conn.execute("SELECT price FROM products WHERE sku = ?", [sku]).fetchone()
    return None if row is None else row[0]


def count_price_writes(executor: Executor, db: Path) -> None:
    """Log every UPDATE of a price in the catalogue file (the ground truth of "how often")."""
    catalogue_of(executor).setup()
    with connect(db) as conn:
        conn.executescript(
            "CREATE TABLE price_writes (sku TEXT, price REAL);"
            "CREATE TRIGGER log_price AFTER UPDATE OF price ON products"
            " BEGIN INSERT INTO price_writes VALUES (new.sku, new.price); END;"
        )


def price_writes(db: Path) -> list[tuple[str, float]]:
    with connect(db) as conn:
        return conn.execute("SELECT sku, price FROM price_writes").fetchall()


def result(answer: dict) -> dict:
    assert answer["status"] == "ok", answer
    return answer["result"]


def error_code(answer: dict) -> str:
    assert answer["status"] == "error", answer
    return answer["error"]["code"]


# --- the module and its storage -------------------------------------------------------------


def test_the_file_is_created_on_first_use_with_a_few_dozen_products(executor, db):
    assert not db.exists()  # building the module and the executor opened nothing
    assert ledger_path(db).exists()
    listed = result(executor.execute(DEMO_CALLER, "catalogue.list_products", {}))
    assert db.exists()
    assert listed["total"] == len(PRODUCTS) >= 24
    with connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM products").fetchone()[0] == len(PRODUCTS)
    assert {p["category"] for p in PRODUCTS} == set(CATEGORIES)
    assert len({p["sku"] for p in PRODUCTS}) == len(PRODUCTS)


def test_a_second_module_on_the_same_file_sees_the_same_data(executor, db, key):
    result(
        executor.execute(key, "catalogue.set_prices", {"prices": [{"sku": "TEA-0001", "price": 9}]})
    )
    again = Catalogue(db)
    assert again.get_product({"sku": "TEA-0001"})["product"]["price"] == 9
    assert again.list_products({})["total"] == len(PRODUCTS)  # not seeded twice


def test_every_declaration_is_valid_and_the_demo_user_sees_all_four(executor):
    assert executor.registry.warnings == ()
    names = [tool.name for tool in executor.visible_for(DEMO_CALLER)]
    assert names == [
        "catalogue.list_products",
        "catalogue.get_product",
        "catalogue.set_prices",
        "catalogue.delete_product",
    ]
    definitions, _ = for_model(executor.visible_for(DEMO_CALLER))
    assert all(d["function"]["description"] for d in definitions)


def test_rights_scopes_and_the_session_switch(executor):
    reader = Caller.key("k-read", user_id="demo", scopes={READ})
    assert [t.name for t in executor.visible_for(reader)] == [
        "catalogue.list_products",
        "catalogue.get_product",
    ]
    assert executor.visible_for(Caller.session("stranger")) == []
    assert executor.visible_for(Caller.public()) == []
    executor.ledger.set_setting("api_session_write_modules", [])
    assert all(not t.is_write for t in executor.visible_for(DEMO_CALLER))
    rights = demo_permissions()
    assert rights(DEMO_CALLER) == {"catalogue.view", "catalogue.manage"}


# --- reads ----------------------------------------------------------------------------------


def test_list_filters_by_category_name_and_price(executor):
    def listed(**filters):
        return result(executor.execute(DEMO_CALLER, "catalogue.list_products", filters))

    tea = listed(category="tea", limit=50)
    assert tea["total"] == sum(p["category"] == "tea" for p in PRODUCTS)
    assert {p["category"] for p in tea["items"]} == {"tea"}

    beans = listed(name_contains="BEANS")
    assert beans["total"] == sum("beans" in p["name"].lower() for p in PRODUCTS) > 0

    cheap = listed(min_price=5, max_price=8, limit=50)
    expected = sorted(p["sku"] for p in PRODUCTS if 5 <= p["price"] <= 8)
    assert [p["sku"] for p in cheap["items"]] == expected

    assert listed(category="cocoa", name_contains="nothing like this")["items"] == []


def test_list_pages_through_everything(executor):
    seen, offset = [], 0
    while offset is not None:
        page = result(
            executor.execute(
                DEMO_CALLER, "catalogue.list_products", {"limit": 15, "offset": offset}
            )
        )
        assert len(page["items"]) <= 15
        seen += [p["sku"] for p in page["items"]]
        offset = page["next_offset"]
    assert seen == sorted(p["sku"] for p in PRODUCTS)
    default = result(executor.execute(DEMO_CALLER, "catalogue.list_products", {}))
    assert len(default["items"]) == 20
    past = result(executor.execute(DEMO_CALLER, "catalogue.list_products", {"offset": 1000}))
    assert past == {"items": [], "total": len(PRODUCTS), "offset": 1000, "next_offset": None}


@pytest.mark.parametrize(
    "bad",
    [
        {"limit": 0},
        {"limit": 51},
        {"offset": -1},
        {"category": "wine"},
        {"name_contains": ""},
        {"min_price": -1},
        {"colour": "red"},
    ],
)
def test_list_refuses_bad_filters_with_a_path(executor, bad):
    answer = executor.execute(DEMO_CALLER, "catalogue.list_products", bad)
    assert error_code(answer) == "invalid_input"
    assert answer["error"]["details"]["violations"]


def test_get_found_and_not_found(executor):
    found = result(executor.execute(DEMO_CALLER, "catalogue.get_product", {"sku": "COF-0004"}))
    assert found == {"found": True, "product": next(p for p in PRODUCTS if p["sku"] == "COF-0004")}
    missing = result(executor.execute(DEMO_CALLER, "catalogue.get_product", {"sku": "ZZZ-9999"}))
    assert missing["found"] is False
    assert missing["sku"] == "ZZZ-9999"
    assert "catalogue_list_products" in missing["message"]  # what the model should do next
    bad = executor.execute(DEMO_CALLER, "catalogue.get_product", {"sku": "tea-1"})
    assert error_code(bad) == "invalid_input"


# --- writes ---------------------------------------------------------------------------------


def test_set_prices_updates_known_skus_in_one_go_and_reports_unknown_ones(executor, db, key):
    answer = executor.execute(
        key,
        "catalogue.set_prices",
        {
            "prices": [
                {"sku": "TEA-0001", "price": 3.456},
                {"sku": "NOP-0001", "price": 1},
                {"sku": "COF-0001", "price": 12},
            ]
        },
    )
    assert result(answer) == {
        "updated": [
            {"sku": "TEA-0001", "old_price": 4.36, "price": 3.46},
            {"sku": "COF-0001", "old_price": 5.25, "price": 12.0},
        ],
        "unknown_skus": ["NOP-0001"],
    }
    assert price_of(db, "TEA-0001") == 3.46
    assert price_of(db, "COF-0001") == 12.0


def test_set_prices_the_last_price_of_a_repeated_sku_wins(executor, db, key):
    prices = [{"sku": "TEA-0002", "price": 1}, {"sku": "TEA-0002", "price": 2}]
    updated = result(executor.execute(key, "catalogue.set_prices", {"prices": prices}))["updated"]
    assert [u["price"] for u in updated] == [2]
    assert price_of(db, "TEA-0002") == 2


def test_set_prices_is_one_transaction(executor, db, key, expect_errors):
    """A failure part-way leaves every price as it was."""
    expect_errors(
        "tool 'catalogue.set_prices' raised .*IntegrityError: cocoa is frozen"
    )  # the write fails on purpose
    catalogue_of(executor).setup()
    with connect(db) as conn:
        conn.execute(
            "CREATE TRIGGER no_cocoa BEFORE UPDATE ON products WHEN old.sku = 'COC-0001'"
            " BEGIN SELECT RAISE(ABORT, 'cocoa is frozen'); END"
        )
    prices = [{"sku": "TEA-0003", "price": 1}, {"sku": "COC-0001", "price": 1}]
    answer = executor.execute(key, "catalogue.set_prices", {"prices": prices})
    assert error_code(answer) == "internal_error"
    assert price_of(db, "TEA-0003") == 7.1


@pytest.mark.parametrize(
    "prices",
    [[], [{"sku": "TEA-0001", "price": 0}], [{"sku": "TEA-0001"}], [{"sku": "x", "price": 1}]],
)
def test_set_prices_refuses_bad_input(executor, key, prices):
    answer = executor.execute(key, "catalogue.set_prices", {"prices": prices})
    assert error_code(answer) == "invalid_input"


def test_set_prices_max_items_cost_and_batch_hold(executor, key):
    def prices(n):
        return {"prices": [{"sku": f"TEA-{i:04d}", "price": 5} for i in range(1, n + 1)]}

    too_many = executor.execute(key, "catalogue.set_prices", prices(201))
    assert error_code(too_many) == "too_many_items"
    assert too_many["error"]["details"]["max_items"] == 200

    for n, cost in [(1, 1), (50, 1), (51, 2), (120, 3), (200, 4)]:
        dry = executor.execute(key, "catalogue.set_prices", prices(n), {"dry_run": True})
        assert dry["cost"] == cost, n
        assert dry["would_hold"] is (n > 50), n  # a key's batch over 50 waits for a person

    held = executor.execute(key, "catalogue.set_prices", prices(60))
    assert held["status"] == "confirmation_required"


def test_a_session_write_is_held_and_runs_once_when_approved(executor, db):
    count_price_writes(executor, db)
    held = executor.execute(
        DEMO_CALLER, "catalogue.set_prices", {"prices": [{"sku": "ACC-0002", "price": 7.5}]}
    )
    assert held["status"] == "confirmation_required"
    assert price_of(db, "ACC-0002") == 8.4
    first = executor.confirm(held["confirmation_id"], DEMO_CALLER, "approve")
    second = executor.confirm(held["confirmation_id"], DEMO_CALLER, "approve")
    assert result(first)["updated"] == [{"sku": "ACC-0002", "old_price": 8.4, "price": 7.5}]
    assert second["result"] == first["result"]
    assert price_writes(db) == [("ACC-0002", 7.5)]


def test_delete_is_always_held_even_for_a_key(executor, db, key):
    catalogue_of(executor).setup()
    held = executor.execute(key, "catalogue.delete_product", {"sku": "ACC-0010"})
    assert held["status"] == "confirmation_required"
    dry = executor.execute(key, "catalogue.delete_product", {"sku": "ACC-0010"}, {"dry_run": True})
    assert dry["would_hold"] is True
    assert executor.registry["catalogue.delete_product"].annotations.destructive
    assert price_of(db, "ACC-0010") == 19.36

    done = result(executor.confirm(held["confirmation_id"], key, "approve"))
    assert done["deleted"] is True
    assert done["product"]["sku"] == "ACC-0010"
    assert price_of(db, "ACC-0010") is None
    gone = result(executor.execute(key, "catalogue.get_product", {"sku": "ACC-0010"}))
    assert gone["found"] is False

    again = executor.execute(key, "catalogue.delete_product", {"sku": "ACC-0010"})
    outcome = result(executor.confirm(again["confirmation_id"], key, "approve"))
    assert outcome["deleted"] is False
    assert "ACC-0010" in outcome["message"]


def test_handlers_are_safe_under_threads(tmp_path):
    catalogue = Catalogue(tmp_path / "threads.sqlite")  # first use from many threads at once
    skus = [p["sku"] for p in PRODUCTS[:16]]
    errors: list[BaseException] = []
    start = threading.Barrier(len(skus))

    def work(sku: str) -> None:
        try:
            start.wait()
            catalogue.set_prices({"prices": [{"sku": sku, "price": 1.25}]})
            assert catalogue.get_product({"sku": sku})["product"]["price"] == 1.25
            catalogue.list_products({"limit": 50})
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(sku,)) for sku in skus]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert catalogue.list_products({"max_price": 1.25, "limit": 50})["total"] == len(skus)


# --- the scripted demo model ----------------------------------------------------------------

TOOLS = [
    {"type": "function", "function": {"name": name, "description": "", "parameters": {}}}
    for name in (LIST_TOOL, SET_PRICES_TOOL)
]


def test_the_scripted_model_follows_its_script():
    model = scripted_demo_model().bind_tools(TOOLS)
    messages = [HumanMessage("make tea cheaper")]
    first = model.invoke(messages)
    assert first.tool_calls[0]["name"] == LIST_TOOL
    assert first.tool_calls[0]["args"] == {"limit": 5}
    listed = {
        "executed": True,
        "status": "ok",
        "result": {"items": [{"sku": "TEA-0001", "name": "Tea", "price": 4.36}], "total": 1},
    }
    messages += [first, _tool_result(first, listed)]
    second = model.invoke(messages)
    assert second.tool_calls[0]["name"] == SET_PRICES_TOOL
    assert second.tool_calls[0]["args"] == {"prices": [{"sku": "TEA-0001", "price": 3.92}]}
    assert second.tool_calls[0]["id"] != first.tool_calls[0]["id"]

    rejected = {"executed": False, "status": "rejected", "message": "too cheap"}
    text = model.invoke([*messages, second, _tool_result(second, rejected)]).content
    assert text.startswith(LABEL)
    assert "rejected" in text
    assert "too cheap" in text
    held = {"status": "confirmation_required", "confirmation_id": "c-1"}
    assert "waiting" in model.invoke([*messages, second, _tool_result(second, held)]).content


async def test_the_scripted_model_works_async_and_without_write_tools():
    model = scripted_demo_model()
    reads_only = model.bind_tools(TOOLS[:1])
    first = await reads_only.ainvoke([HumanMessage("show the products")])
    assert first.tool_calls[0]["name"] == LIST_TOOL
    listed = {"executed": True, "status": "ok", "result": {"items": [], "total": 0}}
    asked = HumanMessage("show the products")
    empty = await reads_only.ainvoke([asked, first, _tool_result(first, listed)])
    assert "no products" in empty.content
    nothing = await model.ainvoke([HumanMessage("hi")])
    assert not nothing.tool_calls
    assert nothing.content.startswith(LABEL)


@pytest.mark.parametrize("said", ["what's the weather", "/help", "hi"])
def test_the_scripted_model_says_what_it_can_do_to_what_it_does_not_follow(said):
    model = scripted_demo_model().bind_tools(TOOLS)
    answer = model.invoke([HumanMessage(said)])
    assert not answer.tool_calls  # no price cut for a message about something else
    assert answer.content == f"{LABEL} {CAN_DO}"
    assert "make the first product cheaper" in answer.content


def _tool_result(ai: AIMessage, answer: dict) -> ToolMessage:
    return ToolMessage(json.dumps(answer), tool_call_id=ai.tool_calls[0]["id"])


# --- a whole turn ---------------------------------------------------------------------------


def test_a_turn_lists_holds_the_price_change_and_applies_it_once_when_approved(executor, db):
    count_price_writes(executor, db)
    graph = build_turn_graph(
        executor, scripted_demo_model(), checkpointer=InMemorySaver(), default_caller=DEMO_CALLER
    )
    config = {"configurable": {"thread_id": "demo-1"}}
    stopped = graph.invoke({"messages": [("user", "make something cheaper")]}, config)

    (interrupt,) = stopped["__interrupt__"]
    payload = interrupt.value
    assert payload["version"] == 1
    assert payload["type"] == "turnkit.confirmations"
    (held,) = payload["confirmations"]
    assert held["tool"] == "catalogue.set_prices"
    assert held["title"] == "Set product prices"
    assert held["arguments"] == {"prices": [{"sku": "ACC-0001", "price": 6.33}]}  # 7.03 - 10 %
    assert held["expires_at"].endswith("Z")
    assert price_of(db, "ACC-0001") == 7.03
    assert price_writes(db) == []

    done = graph.invoke(Command(resume={held["confirmation_id"]: "approve"}), config)
    kinds = [type(m).__name__ for m in done["messages"]]
    assert kinds == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage", "ToolMessage",
                     "AIMessage"]  # fmt: skip
    assert (
        '"updated":[{"sku":"ACC-0001","old_price":7.03,"price":6.33}]'
        in done["messages"][4].content
    )
    assert done["messages"][-1].content == (
        f"{LABEL} Done: I changed the price of ACC-0001 from 7.03 to 6.33."
    )
    assert price_of(db, "ACC-0001") == 6.33
    assert price_writes(db) == [("ACC-0001", 6.33)]

    graph.invoke(Command(resume={held["confirmation_id"]: "approve"}), config)  # nothing pending
    assert price_writes(db) == [("ACC-0001", 6.33)]


async def test_an_async_turn_with_a_rejection_changes_nothing(executor, db):
    count_price_writes(executor, db)
    graph = build_turn_graph(executor, scripted_demo_model(), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "demo-2"}}
    context = TurnContext(caller=DEMO_CALLER)
    stopped = await graph.ainvoke(
        {"messages": [("user", "make it cheaper")]}, config, context=context
    )
    cid = stopped["__interrupt__"][0].value["confirmations"][0]["confirmation_id"]
    resume = Command(resume={cid: {"action": "reject", "message": "not now"}})
    done = await graph.ainvoke(resume, config, context=context)
    assert "rejected" in done["messages"][-1].content
    assert "not now" in done["messages"][-1].content
    assert price_writes(db) == []
    assert price_of(db, "ACC-0001") == 7.03
