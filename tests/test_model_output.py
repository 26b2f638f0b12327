"""What a hostile or broken model sends never crashes a turn, never runs when it should not, and
is answered in the order of its calls — in every run mode, on every checkpointer (strict msgpack).

Reaches ``turnkit.registry.json_limits`` (``MAX_DEPTH``, the nesting limit a refusal names) and
``turnkit.turn.keys`` (how a call's idempotency key is made and read back): no public name holds
them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.types import Command

from _modes import Outcome
from _shop import prices
from turnkit import Caller, Executor, Registry
from turnkit.graph import TurnContext
from turnkit.registry.json_limits import MAX_DEPTH
from turnkit.testing import ScriptedModel

ALICE = TurnContext(caller=Caller.session("alice"))
SCOPES = {"shop.products:read", "shop.products:write"}
KEY = TurnContext(caller=Caller.key("key-1", user_id="alice", scopes=SCOPES))
HI = {"messages": [HumanMessage("go")]}


def deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def tool_answers(outcome: Outcome) -> list[tuple[str, dict[str, Any]]]:
    """``(tool_call_id, answer)`` of every tool message, in the order of the thread."""
    return [
        (m.tool_call_id, json.loads(m.content))
        for m in outcome.messages
        if isinstance(m, ToolMessage)
    ]


def ais(outcome: Outcome) -> list[AIMessage]:
    return [m for m in outcome.messages if isinstance(m, AIMessage)]


def assert_every_call_answered_once(outcome: Outcome) -> None:
    calls = [cid for ai in ais(outcome) for cid in _ids(ai)]
    answered = [cid for cid, _ in tool_answers(outcome)]
    assert sorted(calls) == sorted(answered)
    assert len(set(calls)) == len(calls)


def _ids(ai: AIMessage) -> list[str]:
    return [c["id"] for c in ai.tool_calls] + [c["id"] for c in ai.invalid_tool_calls]


# --- 1. arguments no checkpointer can store ------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ({"limit": 10**30}, "outside the 64-bit range"),
        ({"limit": -(2**63) - 1}, "outside the 64-bit range"),
        ({"limit": 1, "filter": deep(300)}, f"nests deeper than {MAX_DEPTH} levels"),
    ],
    ids=["huge-int", "below-int64", "300-deep"],
)
def test_arguments_no_checkpointer_stores_are_answered_and_the_turn_goes_on(
    turns, shop, args, reason
):
    model = ScriptedModel(
        [{"tool_calls": [{"name": "shop_list_products", "args": args, "id": "c1"}]}, "Sorry."]
    )
    outcome = turns.send(model, HI, KEY)
    assert outcome.messages[-1].content == "Sorry."
    ((cid, answer),) = tool_answers(outcome)
    assert cid == "c1"
    assert answer["error"]["code"] == "invalid_input"
    assert reason in answer["error"]["message"]
    assert "nothing was run" in answer["error"]["message"]
    assert shop.reads == 0
    (ai, _) = ais(outcome)
    assert ai.tool_calls == []
    assert [bad["id"] for bad in ai.invalid_tool_calls] == ["c1"]
    model.assert_done()


def deep_text(depth: int) -> str:
    """The JSON text of ``deep(depth)``, as a server sends a call's arguments."""
    return '{"a": ' * depth + "1" + "}" * depth


TEN_THOUSAND_DEEP = {
    "parsed": {"tool_calls": [{"name": "shop_list_products", "args": {"limit": 1,
                               "filter": deep(10_000)}, "id": "c1"}]},
    "text": {"invalid_tool_calls": [{"name": "shop_list_products", "id": "c1",
                                     "args": f'{{"limit": 1, "filter": {deep_text(10_000)}}}'}]},
}  # fmt: skip
"""A call nested 10,000 deep: parsed into ``tool_calls`` (a model of our own making), and as the
raw text ChatOpenAI leaves in ``invalid_tool_calls`` when it cannot parse it."""


@pytest.mark.parametrize("sent", TEN_THOUSAND_DEEP)
def test_arguments_nested_ten_thousand_deep_are_invalid_input_and_the_turn_goes_on(
    turns, shop, sent
):
    """Far beyond the stack (``json.dumps`` and ``repr`` overflow): answered like any call
    beyond the limits, in every mode, and nothing runs."""
    model = ScriptedModel([TEN_THOUSAND_DEEP[sent], "Sorry."])
    outcome = turns.send(model, HI, KEY)
    assert outcome.messages[-1].content == "Sorry."
    ((cid, answer),) = tool_answers(outcome)
    assert cid == "c1"
    assert answer["error"]["code"] == "invalid_input"
    assert f"nests deeper than {MAX_DEPTH} levels" in answer["error"]["message"]
    assert "nothing was run" in answer["error"]["message"]
    assert shop.reads == 0
    (ai, _) = ais(outcome)
    assert ai.tool_calls == []
    assert [bad["id"] for bad in ai.invalid_tool_calls] == ["c1"]
    model.assert_done()


def test_metadata_nested_ten_thousand_deep_is_dropped_not_fatal(turns):
    reply = AIMessage(
        content="Hello.",
        additional_kwargs={"extra": deep(10_000)},
        response_metadata={"logprobs": deep(10_000)},
    )
    outcome = turns.send(ScriptedModel([reply]), HI, KEY)
    assert outcome.messages[-1].content == "Hello."
    assert outcome.messages[-1].response_metadata == {}


def test_a_result_no_checkpointer_stores_reaches_the_model_as_text(turns):
    class Numbers:
        key = "numbers"

        def api_tools(self) -> list[dict]:
            return [
                {
                    "name": "numbers.get_big",
                    "audience": "public",
                    "handler": lambda input, ctx: {"n": 10**30, "deep": deep(300)},
                    "annotations": {"read_only": True},
                }
            ]

    turns.executor = lambda on: Executor(Registry([Numbers()]), ledger=on)
    model = ScriptedModel([{"tool_calls": [{"name": "numbers_get_big", "args": {}}]}, "Big."])
    outcome = turns.send(model, HI, TurnContext(caller=Caller.public()))
    assert outcome.messages[-1].content == "Big."
    ((_, answer),) = tool_answers(outcome)
    assert answer["result"]["n"] == 10**30


def test_usage_or_metadata_no_checkpointer_stores_is_dropped_not_fatal(turns):
    reply = AIMessage(
        content="Hello.",
        usage_metadata={"input_tokens": 10**30, "output_tokens": 1, "total_tokens": 10**30},
        response_metadata={"logprobs": deep(400)},
    )
    outcome = turns.send(ScriptedModel([reply]), HI, KEY)
    assert outcome.messages[-1].content == "Hello."
    assert outcome.messages[-1].usage_metadata is None


# --- 2. answers in the order of the calls ---------------------------------------------------------


def test_answers_come_in_the_order_of_the_calls_whatever_the_mix(turns, shop):
    calls = [
        {"name": "shop_list_products", "args": {"limit": 1}, "id": "a-read"},
        {"name": "shop_unknown", "args": {}, "id": "b-unknown"},
        {"name": "shop_list_products", "args": {"limit": "x"}, "id": "c-schema"},
        {"name": "shop_set_prices", "args": prices("TEA-0001"), "id": "d-held"},
        {"name": "shop_list_products", "args": {"limit": 2}, "id": "e-read"},
    ]
    bad = [{"name": "shop_list_products", "args": "{not json", "id": "f-unparsed"}]
    model = ScriptedModel([{"tool_calls": calls, "invalid_tool_calls": bad}, "Done."])
    paused = turns.send(model, HI, ALICE)
    order = [cid for cid, _ in tool_answers(paused)]
    assert order == ["a-read", "b-unknown", "c-schema", "d-held", "e-read", "f-unparsed"]
    answers = dict(tool_answers(paused))
    assert answers["a-read"]["status"] == "ok"
    assert answers["b-unknown"]["error"]["code"] == "not_found"
    assert answers["c-schema"]["error"]["code"] == "invalid_input"
    assert answers["d-held"]["status"] == "confirmation_required"
    assert answers["f-unparsed"]["error"]["code"] == "invalid_input"
    (held,) = paused.confirmations
    done = turns.send(model, Command(resume={held["confirmation_id"]: "approve"}), ALICE)
    assert [cid for cid, _ in tool_answers(done)] == order
    assert dict(tool_answers(done))["d-held"]["status"] == "ok"
    assert len(shop.writes()) == 1


def test_every_call_of_an_only_bad_message_is_answered_in_order(turns):
    calls = [
        {"name": "shop_nope", "args": {}, "id": "x1"},
        {"name": "shop_list_products", "args": {"limit": 0}, "id": "x2"},
        {"name": "shop_other", "args": {}, "id": "x3"},
    ]
    outcome = turns.send(ScriptedModel([{"tool_calls": calls}, "ok"]), HI, KEY)
    assert [cid for cid, _ in tool_answers(outcome)] == ["x1", "x2", "x3"]


# --- 3. tool call ids: repeated, missing ----------------------------------------------------------


def test_a_repeated_write_id_holds_one_write_and_refuses_the_other(turns, shop):
    first, second = prices("TEA-0001", price=5.0), prices("TEA-0002", price=6.0)
    calls = [
        {"name": "shop_set_prices", "args": first, "id": "dup"},
        {"name": "shop_set_prices", "args": second, "id": "dup"},
    ]
    model = ScriptedModel([{"tool_calls": calls}, "Done."])
    paused = turns.send(model, HI, ALICE)
    (held,) = paused.confirmations
    assert held["arguments"] == first
    assert [c.id for c in turns.checks.pending()] == [held["confirmation_id"]]
    (answered_first, answered_second) = tool_answers(paused)
    assert answered_first == ("dup", {"status": "confirmation_required",
                                      "confirmation_id": held["confirmation_id"]})  # fmt: skip
    assert answered_second[0] == "dup-2"
    assert answered_second[1]["error"]["code"] == "invalid_input"
    assert "repeats the id 'dup'" in answered_second[1]["error"]["message"]
    assert_every_call_answered_once(paused)
    turns.send(model, Command(resume={held["confirmation_id"]: "approve"}), ALICE)
    assert [w["input"] for w in shop.writes()] == [first]
    assert turns.checks.pending() == []


def test_long_call_ids_that_share_their_first_255_characters_are_two_writes(turns, shop):
    """The idempotency key holds the thread, message and call ids: long ids are hashed, never
    cut, so two calls whose ids differ only after 255 characters are not one call."""
    first, second = prices("TEA-0001", price=5.0), prices("TEA-0002", price=6.0)
    stem = "call_" + "x" * 300
    calls = [
        {"name": "shop_set_prices", "args": first, "id": stem + "1"},
        {"name": "shop_set_prices", "args": second, "id": stem + "2"},
    ]
    model = ScriptedModel([{"tool_calls": calls}, "Done."])
    paused = turns.send(model, HI, ALICE)
    held = paused.confirmations
    assert [h["arguments"] for h in held] == [first, second]
    decisions = {h["confirmation_id"]: "approve" for h in held}
    turns.send(model, Command(resume=decisions), ALICE)
    assert [w["input"] for w in shop.writes()] == [first, second]


def test_an_idempotency_key_is_never_cut_and_names_its_thread_when_it_fits():
    from turnkit.turn.keys import idempotency_key, thread_of

    def key(thread: str, call_id: str) -> str:
        found = idempotency_key(thread, {"message_id": "m", "id": call_id})  # type: ignore[typeddict-item]
        assert found is not None
        return found

    assert key("t", "c") == "turn:t:m:c"
    assert thread_of(key("t", "c")) == "t"
    long_ids = {key("t", "c" * 300 + end) for end in "ab"}
    assert len(long_ids) == 2
    assert all(len(k) < 255 and thread_of(k) == "t" for k in long_ids)
    huge_thread = {key("t" * 300 + end, "c") for end in "ab"}
    assert len(huge_thread) == 2
    assert all(len(k) < 255 and thread_of(k) is None for k in huge_thread)


def test_a_repeated_read_id_runs_once_and_every_call_is_answered(turns, shop):
    calls = [
        {"name": "shop_list_products", "args": {"limit": 1}, "id": "r"},
        {"name": "shop_list_products", "args": {"limit": 1}, "id": "r"},
    ]
    outcome = turns.send(ScriptedModel([{"tool_calls": calls}, "ok"]), HI, KEY)
    assert shop.reads == 1
    assert [cid for cid, _ in tool_answers(outcome)] == ["r", "r-2"]
    assert_every_call_answered_once(outcome)


def test_calls_without_ids_get_distinct_ids_and_answers(turns, shop):
    reply = AIMessage(
        content="",
        tool_calls=[
            {"name": "shop_list_products", "args": {"limit": 1}, "id": None},
            {"name": "shop_list_products", "args": {"limit": 2}, "id": ""},
        ],
    )
    outcome = turns.send(ScriptedModel([reply, "ok"]), HI, KEY)
    assert shop.reads == 2
    ids = [cid for cid, _ in tool_answers(outcome)]
    assert len(set(ids)) == 2
    assert all(ids)
    assert_every_call_answered_once(outcome)


def test_a_server_reusing_message_and_call_ids_keeps_every_round(turns, shop):
    def same_ids(content: str = "", **calls: Any) -> AIMessage:
        tool_calls = [{"name": "shop_list_products", "args": {"limit": 1}, "id": "call_0"}]
        return AIMessage(content=content, id="chatcmpl-1", tool_calls=tool_calls if calls else [])

    model = ScriptedModel([same_ids(call=True), same_ids(call=True), same_ids("Done.")])
    outcome = turns.send(model, HI, KEY)
    assert len(ais(outcome)) == 3
    assert len({ai.id for ai in ais(outcome)}) == 3
    assert len(tool_answers(outcome)) == 2
    assert outcome.messages[-1].content == "Done."
    assert shop.reads == 2


# --- 4. argument text cut off -------------------------------------------------------------------


def test_cut_off_argument_text_never_runs_in_any_mode(turns, shop):
    cut = '{"prices": [{"sku": "TEA-0001", "price": 35'
    model = ScriptedModel(
        [{"invalid_tool_calls": [{"name": "shop_set_prices", "args": cut, "id": "cut"}]}, "Oops."]
    )
    outcome = turns.send(model, HI, KEY)  # a key's write is not held: it would run at once
    assert shop.writes() == []
    ((cid, answer),) = tool_answers(outcome)
    assert cid == "cut"
    assert answer["error"]["code"] == "invalid_input"
    assert "not valid JSON" in answer["error"]["message"]
    assert outcome.interrupts == []


def test_a_reply_cut_off_at_its_length_limit_runs_none_of_its_calls(turns, shop):
    reply = AIMessage(
        content="",
        tool_calls=[{"name": "shop_set_prices", "args": prices("TEA-0001"), "id": "len"}],
        response_metadata={"finish_reason": "length"},
    )
    outcome = turns.send(ScriptedModel([reply, "Oops."]), HI, KEY)
    assert shop.writes() == []
    ((_, answer),) = tool_answers(outcome)
    assert answer["error"]["code"] == "invalid_input"
    assert "cut off" in answer["error"]["message"]


# --- found by review: chunks returned whole, other cut-off keys, order of refused calls ---


def test_a_model_that_answers_with_a_chunk_never_runs_cut_off_text(turns, shop):
    from langchain_core.messages import AIMessageChunk

    cut = '{"prices": [{"sku": "TEA-0001", "price": 35'
    chunk = AIMessageChunk(
        content="",
        tool_call_chunks=[{"name": "shop_set_prices", "args": cut, "id": "c", "index": 0}],
    )
    assert chunk.tool_calls  # LangChain repaired the text leniently
    outcome = turns.send(ScriptedModel([lambda m, t: chunk, "Oops."]), HI, KEY)
    assert shop.writes() == []
    ((_, answer),) = tool_answers(outcome)
    assert answer["error"]["code"] == "invalid_input"


@pytest.mark.parametrize(
    "metadata",
    [{"done_reason": "length"}, {"stopReason": "max_tokens"}, {"stop_reason": "max_tokens"}],
    ids=["ollama", "bedrock", "anthropic"],
)
def test_a_reply_cut_off_is_recognised_by_every_providers_key(turns, shop, metadata):
    reply = AIMessage(
        content="",
        tool_calls=[{"name": "shop_set_prices", "args": prices("TEA-0001"), "id": "len"}],
        response_metadata=metadata,
    )
    outcome = turns.send(ScriptedModel([reply, "Oops."]), HI, KEY)
    assert shop.writes() == []
    assert "cut off" in tool_answers(outcome)[0][1]["error"]["message"]


def test_refused_calls_keep_their_order_among_the_invalid_ones(turns):
    calls = [
        {"name": "shop_list_products", "args": {"limit": 10**30}, "id": "first"},
        {"name": "shop_list_products", "args": {"limit": 1}, "id": "second"},
        {"name": "shop_list_products", "args": {"limit": 2}, "id": "second"},
        {"name": "shop_list_products", "args": {"limit": 3}, "id": "third"},
    ]
    outcome = turns.send(ScriptedModel([{"tool_calls": calls}, "ok"]), HI, KEY)
    assert [cid for cid, _ in tool_answers(outcome)] == ["second", "third", "first", "second-2"]
