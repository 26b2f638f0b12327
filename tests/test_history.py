"""The ``messages`` channel: ``add_messages`` semantics, stored as deltas, replayed exactly.

The reducer is checked against ``add_messages`` and for the two properties a replay needs
(deterministic ids, batching invariance); then through LangGraph's real snapshot-and-replay on a
SQLite file, and on a turnkit thread whose bytes per round must not grow.

Reaches ``turnkit.nodes.history`` directly: it tests the messages reducer's own behaviour
(``fold_messages``, ``message_id``), which no public name exposes.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

from turnkit import Caller, Executor, Registry
from turnkit.graph import TurnContext, build_turn_graph
from turnkit.nodes.history import fold_messages, message_id
from turnkit.storage import open_async_storage, open_storage
from turnkit.testing import ReplyModel

AI_CALL = AIMessage(
    "",
    id="ai-1",
    tool_calls=[{"name": "shop_list_products", "args": {"limit": 2}, "id": "call-1"}],
    usage_metadata={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
    response_metadata={"model_name": "scripted"},
)
TOOL = ToolMessage('{"status": "ok"}', tool_call_id="call-1", id="tool-1", name="shop_list")


def test_messages_with_ids_fold_exactly_as_add_messages_merges_them():
    current = [HumanMessage("hi", id="h-1"), AI_CALL]
    writes = [
        TOOL,
        [AIMessage("done", id="ai-2")],
        ToolMessage("new", tool_call_id="call-1", id="tool-1"),
    ]
    expected: Any = current
    for write in writes:
        expected = add_messages(expected, write)
    assert fold_messages(current, writes) == expected
    assert fold_messages(current, writes)[2].content == "new"  # replaced in place, same id


def test_a_message_without_an_id_gets_the_same_id_on_every_fold():
    first = fold_messages([], [HumanMessage("hello")])
    again = fold_messages([], [HumanMessage("hello")])
    assert first[0].id == again[0].id == message_id(None, HumanMessage("hello"))
    # The id depends on what comes before: the same words later in a thread are another message.
    later = fold_messages(first, [HumanMessage("hello")])
    assert [m.content for m in later] == ["hello", "hello"]
    assert later[0].id != later[1].id


def test_the_writes_and_the_current_list_are_not_changed():
    message = HumanMessage("hello")
    current = [SystemMessage("be brief", id="s")]
    fold_messages(current, [message])
    assert message.id is None
    assert current == [SystemMessage("be brief", id="s")]


def test_removals_apply_in_order_and_remove_all_clears_what_came_before():
    current = [HumanMessage("a", id="a"), HumanMessage("b", id="b")]
    removed = fold_messages(current, [RemoveMessage(id="a"), HumanMessage("a again", id="a")])
    assert [(m.id, m.content) for m in removed] == [("b", "b"), ("a", "a again")]
    cleared = fold_messages(
        current, [[RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("c", id="c")]]
    )
    assert [m.id for m in cleared] == ["c"]


def test_removing_an_unknown_id_is_refused_as_add_messages_refuses_it():
    with pytest.raises(ValueError, match="doesn't exist \\('nope'\\)"):
        fold_messages([HumanMessage("a", id="a")], [RemoveMessage(id="nope")])


def test_a_message_stored_as_a_dict_comes_back_field_for_field():
    """``langgraph dev`` may hand writes back as dicts: nothing may land in additional_kwargs."""
    originals = [
        HumanMessage([{"type": "text", "text": "hi"}], id="h"),
        AI_CALL,
        TOOL,
        SystemMessage("rules", id="s", name="system"),
    ]
    folded = fold_messages([], [[m.model_dump() for m in originals]])
    assert folded == originals
    assert all(m.additional_kwargs == {} for m in folded)
    assert type(folded[1]) is AIMessage
    assert folded[1].usage_metadata == AI_CALL.usage_metadata


def test_chunks_and_other_add_messages_inputs_are_still_accepted():
    folded = fold_messages(
        [],
        [
            AIMessageChunk("streamed", id="c"),
            [("user", "a tuple")],
            {"role": "assistant", "content": "an OpenAI dict"},
            "a string",
            {"type": "human", "content": "a dict without an id"},
        ],
    )
    assert [type(m) for m in folded] == [
        AIMessage,
        HumanMessage,
        AIMessage,
        HumanMessage,
        HumanMessage,
    ]
    assert all(m.id for m in folded)
    assert folded[3].content == "a string"


def test_every_accepted_write_reads_back_from_storage_as_the_same_messages():
    """What a replay folds is what the serializer gave back: tuples come back as lists."""
    serde = JsonPlusSerializer()
    writes = [
        HumanMessage("no id"),
        [("user", "a tuple in a list"), ("assistant", [{"type": "text", "text": "blocks"}])],
        "a string",
        {"role": "assistant", "content": "an OpenAI dict"},
        {"type": "human", "content": "a typed dict", "id": "typed"},
        AIMessageChunk("a chunk", id="chunk"),
        [AI_CALL, TOOL],
        HumanMessage([{"type": "text", "text": "content with a tuple", "meta": ("a", 1)}]),
    ]
    stored = [serde.loads_typed(serde.dumps_typed(write)) for write in writes]
    replayed, live = fold_messages([], stored), fold_messages([], writes)

    def as_json(messages: list) -> str:  # a tuple inside content is a list once stored, as ever
        return json.dumps([[type(m).__name__, m.model_dump()] for m in messages], default=str)

    assert len(live) == 10
    assert as_json(replayed) == as_json(live)


def test_a_bare_tuple_write_is_refused_and_the_thread_goes_on(tmp_path):
    """A tuple would be stored as a list (two messages on replay): refused before it counts."""
    with pytest.raises(TypeError, match=r"not the tuple \('user', 'hello'\): write \[\(role"):
        fold_messages([], [("user", "hello")])
    builder = StateGraph(_Chat)
    builder.add_node("echo", _echo)
    builder.add_edge(START, "echo")
    config = {"configurable": {"thread_id": "chat"}}
    with sqlite3.connect(tmp_path / "chat.sqlite", check_same_thread=False) as conn:
        graph = builder.compile(checkpointer=SqliteSaver(conn))
        graph.invoke({"messages": [HumanMessage("first")]}, config)
        with pytest.raises(TypeError, match="not the tuple"):
            graph.invoke({"messages": ("user", "hello")}, config)
        result = graph.invoke({"messages": [HumanMessage("again")]}, config)
        reloaded = graph.get_state(config).values["messages"]
    assert [m.content for m in reloaded] == ["first", "echo first", "again", "echo again"]
    assert reloaded == result["messages"]


# A write: a new message (with or without an id), a replacement of an earlier id, or a removal.
_ids = st.sampled_from(["m0", "m1", "m2", "m3", None])
_messages = st.builds(
    lambda text, id_, kind: (HumanMessage if kind else AIMessage)(text, id=id_),
    st.sampled_from(["x", "y", "z"]),
    _ids,
    st.booleans(),
)
_removals = st.sampled_from(["m0", "m1", "m2", "m3", REMOVE_ALL_MESSAGES]).map(
    lambda id_: RemoveMessage(id=id_)
)
_writes = st.lists(st.one_of(_messages, st.lists(_messages, max_size=3), _removals), max_size=12)


def _fold_or_error(current: list, writes: list) -> Any:
    try:
        return fold_messages(current, writes)
    except ValueError:
        return "refused"


@settings(max_examples=300, deadline=None)
@given(writes=_writes, cut=st.integers(min_value=0, max_value=12))
def test_folding_writes_at_once_equals_folding_them_in_two_batches(writes, cut):
    """What a replay relies on: ``fold(fold(s, xs), ys) == fold(s, xs + ys)``."""
    at_once = _fold_or_error([], writes)
    first = _fold_or_error([], writes[:cut])
    in_two = "refused" if first == "refused" else _fold_or_error(first, writes[cut:])
    assert at_once == in_two


class _Chat(TypedDict):
    messages: Annotated[list, DeltaChannel(fold_messages, list, snapshot_frequency=3)]


def _echo(state: _Chat) -> dict[str, Any]:
    return {"messages": [AIMessage(f"echo {state['messages'][-1].content}")]}


def test_langgraph_replays_the_writes_across_snapshots_to_the_same_messages(tmp_path):
    """A real ``SqliteSaver``: a snapshot every 3 updates, and a fresh graph reloads the thread."""
    builder = StateGraph(_Chat)
    builder.add_node("echo", _echo)
    builder.add_edge(START, "echo")
    config = {"configurable": {"thread_id": "chat"}}
    path = tmp_path / "chat.sqlite"
    with sqlite3.connect(path, check_same_thread=False) as conn:
        live = builder.compile(checkpointer=SqliteSaver(conn))
        for i in range(7):
            result = live.invoke({"messages": [HumanMessage(f"line {i}")]}, config)
    with sqlite3.connect(path, check_same_thread=False) as conn:
        reloaded = builder.compile(checkpointer=SqliteSaver(conn)).get_state(config)
    assert reloaded.values["messages"] == result["messages"]
    assert [m.content for m in result["messages"]][-2:] == ["line 6", "echo line 6"]
    assert len({m.id for m in result["messages"]}) == 14


class _ListThenAnswer(ReplyModel):
    """Scripted (for tests): list products, then answer from the tool's result; forever."""

    @property
    def _llm_type(self) -> str:
        return "scripted-list-then-answer"

    def reply(self, messages: list, tools: list[dict[str, Any]]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage(f"{len(messages)} messages so far")
        return AIMessage(
            "",
            tool_calls=[
                {"name": "shop_list_products", "args": {"limit": 20}, "id": f"call-{len(messages)}"}
            ],
        )


def _stored_bytes(path) -> int:
    with sqlite3.connect(path) as conn:
        (checkpoints,) = conn.execute(
            "SELECT coalesce(sum(length(checkpoint) + length(metadata)), 0) FROM checkpoints"
        ).fetchone()
        (writes,) = conn.execute("SELECT coalesce(sum(length(value)), 0) FROM writes").fetchone()
    return checkpoints + writes


def test_a_turnkit_thread_stores_the_same_bytes_per_round_however_long_it_gets(
    tmp_path, shop, rights
):
    path = tmp_path / "thread.sqlite"
    config = {"configurable": {"thread_id": "long"}}
    context = TurnContext(caller=Caller.session("alice"))
    per_round = []
    with open_storage(path) as storage:
        executor = Executor(Registry([shop]), ledger=storage.ledger, permissions=rights)
        graph = build_turn_graph(executor, _ListThenAnswer(), checkpointer=storage.checkpointer)
        before = _stored_bytes(path)
        for i in range(30):
            result = graph.invoke(
                {"messages": [HumanMessage(f"round {i}")]}, config, context=context
            )
            after = _stored_bytes(path)
            per_round.append(after - before)
            before = after
        executor.close()
    assert len(result["messages"]) == 4 * 30
    early, late = sum(per_round[5:10]), sum(per_round[25:30])
    assert late <= 1.1 * early, per_round  # the default channel: round 30 stores ~5x round 6

    with open_storage(path) as storage:  # a new process's view of the same thread
        executor = Executor(Registry([shop]), ledger=storage.ledger, permissions=rights)
        graph = build_turn_graph(executor, _ListThenAnswer(), checkpointer=storage.checkpointer)
        assert graph.get_state(config).values["messages"] == result["messages"]
        executor.close()


def test_the_storage_savers_replay_across_snapshots_sync_and_async(ledger_url):
    """``open_storage``'s savers (SQLite and PostgreSQL), written async and read back sync."""
    builder = StateGraph(_Chat)
    builder.add_node("echo", _echo)
    builder.add_edge(START, "echo")
    config = {"configurable": {"thread_id": "chat"}}

    async def write() -> list:
        async with open_async_storage(ledger_url) as storage:
            graph = builder.compile(checkpointer=storage.checkpointer)
            for i in range(7):
                result = await graph.ainvoke({"messages": [HumanMessage(f"line {i}")]}, config)
        return result["messages"]

    live = asyncio.run(write())
    with open_storage(ledger_url) as storage:
        reloaded = builder.compile(checkpointer=storage.checkpointer).get_state(config)
    assert reloaded.values["messages"] == live
    assert len(live) == 14
