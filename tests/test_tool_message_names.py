"""Every tool message the turn graph emits names the tool the model called (``ToolMessage.name``,
the model-facing name): results, refusals of bad calls, held notices and the outcomes that replace
them (every run mode, every backend)."""

from __future__ import annotations

from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.types import Command

from _shop import prices
from turnkit import Caller
from turnkit.graph import TurnContext
from turnkit.testing import ScriptedModel

ALICE = TurnContext(caller=Caller.session("alice"))


def names(messages) -> dict[str, str | None]:
    return {m.tool_call_id: m.name for m in messages if isinstance(m, ToolMessage)}


def test_every_tool_message_carries_the_model_facing_name_of_its_call(turns):
    round_one = {
        "tool_calls": [
            {"name": "shop_list_products", "args": {}, "id": "read"},
            {"name": "shop_burn_it_down", "args": {}, "id": "unknown"},
            {"name": "shop_set_prices", "args": {"prices": "cheap"}, "id": "bad"},
            {"name": "shop_set_prices", "args": prices("TEA-0001"), "id": "held"},
        ],
        "invalid_tool_calls": [{"name": "shop_list_products", "args": "{oops", "id": "json"}],
    }
    model = ScriptedModel([round_one, "Done."])
    paused = turns.send(model, {"messages": [HumanMessage("go")]}, ALICE)
    expected = {
        "read": "shop_list_products",
        "unknown": "shop_burn_it_down",
        "bad": "shop_set_prices",
        "held": "shop_set_prices",
        "json": "shop_list_products",
    }
    assert names(paused.messages) == expected
    (held,) = paused.confirmations
    done = turns.send(model, Command(resume={held["confirmation_id"]: "approve"}), ALICE)
    assert names(done.messages) == expected  # the outcome replaced the held notice, name kept


def test_a_refusal_when_no_call_is_valid_names_its_call(turns):
    model = ScriptedModel([{"tool_calls": [{"name": "nope", "args": {}, "id": "x"}]}, "Sorry."])
    done = turns.send(model, {"messages": [HumanMessage("go")]}, ALICE)
    assert names(done.messages) == {"x": "nope"}
