"""``Agent``, ``chat`` and ``AgentPool`` on a scripted model, no HTTP (docs/architecture.md §7).

The developer API's examples (a weather tool as a function and as a tool object, several tools,
history, reset, stateless mode, structured output) and the behaviours around them: a busy agent
refuses a second prompt, a timed-out turn leaves the agent usable with a valid history, and a
conversation (or a held write) started in one process goes on in another.
"""

from __future__ import annotations

import asyncio
import json
import logging
import multiprocessing
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from langchain_core.exceptions import ModelConnectionError
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool as langchain_tool
from pydantic import BaseModel

import _agent_workers as workers
from _shop import Shop, prices
from _weather import get_time, get_weather
from turnkit import (
    Agent,
    AgentBusy,
    AgentPool,
    AgentTimeout,
    Caller,
    Executor,
    ModelError,
    Registry,
    StaticPermissions,
    StructuredOutputError,
    as_langchain_tool,
    as_langchain_tools,
    chat,
    tool,
)
from turnkit.agent.structured import instruction  # internal: the prompt checked
from turnkit.testing import ScriptedModel

SPAWN = multiprocessing.get_context("spawn")
WAIT = 60.0
"""The bound of every wait on another thread or process."""


# --- the example tools -----------------------------------------------------------------------


WEATHER_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "The city name"},
        "units": {
            "type": "string",
            "enum": ["celsius", "fahrenheit"],
            "description": "Temperature units",
        },
    },
    "required": ["city"],
}


class WeatherTool:
    """A tool object: name, description, parameters_schema, execute."""

    name = "get_weather"
    description = "Get current weather conditions for a city"
    parameters_schema = WEATHER_SCHEMA

    def execute(self, args: dict[str, Any], opts: dict[str, Any]) -> tuple[str, str]:
        city = args["city"]
        if city == "Atlantis":
            return ("error", f"no weather station in {city!r}; ask for a real city")
        units = args.get("units", "celsius")
        return ("ok", f"{city}: 22°{units[0].upper()}")


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """A scripted reply calling ``(name, args)`` tools."""
    return {"tool_calls": [{"name": name, "args": args} for name, args in pairs]}


def texts(messages: list[Any]) -> list[tuple[str, str]]:
    return [(type(m).__name__, m.text) for m in messages]


def tool_answers(messages: list[Any]) -> dict[str, Any]:
    return {m.tool_call_id: json.loads(m.content) for m in messages if isinstance(m, ToolMessage)}


def unanswered(messages: list[Any]) -> list[str]:
    """Tool call ids of AI messages that no tool message answers (a model API refuses them)."""
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return [
        c["id"]
        for m in messages
        if isinstance(m, AIMessage)
        for c in [*m.tool_calls, *m.invalid_tool_calls]
        if c["id"] not in answered
    ]


# --- tools -----------------------------------------------------------------------------------


def test_a_decorated_function_answers_the_weather_question():
    model = ScriptedModel(
        [calls(("get_weather", {"city": "Lisbon"})), "The weather in Lisbon is 22°C and sunny."]
    )
    with Agent(model, tools=[get_weather]) as agent:
        response = agent.prompt("What's the weather in Lisbon?")
    assert response.content == "The weather in Lisbon is 22°C and sunny."
    (record,) = response.tool_calls
    assert (record.name, record.arguments) == ("get_weather", {"city": "Lisbon"})
    assert record.answer == {"executed": True, "status": "ok", "result": "Lisbon: 22°C"}
    (shown,) = model.calls[0]["tools"]
    assert shown["function"]["name"] == "get_weather"
    assert shown["function"]["description"] == "Get current weather conditions for a city."
    assert tool_answers(model.calls[1]["messages"]) == {record.id: record.answer}
    model.assert_done()


def test_a_phoenix_style_class_is_a_tool_with_its_own_schema():
    model = ScriptedModel(
        [calls(("get_weather", {"city": "Lisbon", "units": "fahrenheit"})), "72°F, sunny."]
    )
    with Agent(model, tools=[WeatherTool]) as agent:
        response = agent.prompt("Weather in Lisbon, in fahrenheit?")
    (shown,) = model.calls[0]["tools"]
    assert shown["function"] == {
        "name": "get_weather",
        "description": "Get current weather conditions for a city",
        "parameters": WEATHER_SCHEMA,
    }
    assert response.tool_calls[0].answer["result"] == "Lisbon: 22°F"
    assert response.content == "72°F, sunny."


def test_an_error_result_reaches_the_model_as_an_error_it_can_read():
    model = ScriptedModel([calls(("get_weather", {"city": "Atlantis"})), "Atlantis has no data."])
    with Agent(model, tools=[WeatherTool()]) as agent:
        response = agent.prompt("Weather in Atlantis?")
    (message,) = [m for m in model.calls[1]["messages"] if isinstance(m, ToolMessage)]
    assert message.status == "error"
    answer = json.loads(message.content)
    assert answer["status"] == "error"
    assert answer["error"]["code"] == "tool_error"
    assert answer["error"]["message"] == "no weather station in 'Atlantis'; ask for a real city"
    assert response.content == "Atlantis has no data."


def test_a_schema_violation_is_answered_so_the_model_can_correct_itself():
    model = ScriptedModel(
        [
            calls(("get_weather", {"city": "Lisbon", "units": "kelvin"})),
            calls(("get_weather", {"city": "Lisbon"})),
            "22°C.",
        ]
    )
    with Agent(model, tools=[WeatherTool]) as agent:
        response = agent.prompt("Weather in Lisbon in kelvin?")
    first = next(iter(tool_answers(model.calls[1]["messages"]).values()))
    assert first["error"]["code"] == "invalid_input"
    assert "units" in first["error"]["message"]
    assert response.content == "22°C."
    model.assert_done()


def test_the_model_chooses_among_several_tools_and_both_run_in_one_round():
    model = ScriptedModel(
        [
            calls(("get_weather", {"city": "Porto"}), ("get_time", {"city": "Porto"})),
            "Porto: 22°C at 14:00.",
        ]
    )
    with Agent(model, tools=[get_weather, get_time, WeatherTool]) as agent:
        response = agent.prompt("Weather and time in Porto?")
    # WeatherTool has the same model name as get_weather: the first one wins.
    assert [t["function"]["name"] for t in model.calls[0]["tools"]] == ["get_weather", "get_time"]
    assert [r.answer["result"] for r in response.tool_calls] == ["Porto: 22°C", "Porto: 14:00"]
    assert response.content == "Porto: 22°C at 14:00."


def test_a_langchain_tool_is_a_local_tool():
    @langchain_tool
    def city_population(city: str) -> int:
        """How many people live in a city."""
        return {"Lisbon": 545_000}.get(city, 0)

    model = ScriptedModel([calls(("city_population", {"city": "Lisbon"})), "About 545 000."])
    with Agent(model, tools=[city_population]) as agent:
        response = agent.prompt("How many people live in Lisbon?")
    (shown,) = model.calls[0]["tools"]
    assert shown["function"]["name"] == "city_population"
    assert shown["function"]["description"] == "How many people live in a city."
    assert shown["function"]["parameters"]["required"] == ["city"]
    assert response.tool_calls[0].answer == {"executed": True, "status": "ok", "result": 545_000}


# --- registry tools as LangChain tools -------------------------------------------------------


@pytest.fixture
def shop(tmp_path) -> Shop:
    return Shop(tmp_path / "writes.log")


@pytest.fixture
def shop_executor(shop):
    rights = StaticPermissions({"alice": {"shop.view", "shop.manage"}, "bob": {"shop.view"}})
    executor = Executor(Registry([shop]), permissions=rights)
    yield executor
    executor.close()


def test_registry_tools_become_langchain_tools_that_run_through_the_executor(shop_executor, shop):
    alice = Caller.key(
        "key-a", user_id="alice", scopes={"shop.products:read", "shop.products:write"}
    )
    tools = {t.name: t for t in as_langchain_tools(shop_executor, alice)}
    assert list(tools) == ["shop_list_products", "shop_set_prices", "shop_delete_product"]
    assert tools["shop_list_products"].invoke({"limit": 1}) == {
        "executed": True,
        "status": "ok",
        "result": [{"sku": "TEA-0001", "price": 4.5}],
    }
    assert tools["shop_set_prices"].invoke(prices("TEA-0001"))["result"] == {"updated": 1}
    assert shop.writes() == [
        {"tool": "set_prices", "input": prices("TEA-0001"), "caller": "key:key-a"}
    ]
    held = tools["shop_delete_product"].invoke({"sku": "TEA-0001"})
    assert held["status"] == "confirmation_required"
    assert len(shop.writes()) == 1


def test_a_langchain_tool_answers_forbidden_for_a_caller_without_the_right(shop_executor, shop):
    bob = Caller.key("key-b", user_id="bob", scopes={"shop.products:read", "shop.products:write"})
    assert [t.name for t in as_langchain_tools(shop_executor, bob)] == ["shop_list_products"]
    set_prices = as_langchain_tool(shop_executor, "shop.set_prices", caller=bob)
    answer = set_prices.invoke(prices("TEA-0001"))
    assert answer["executed"] is False
    assert answer["error"]["code"] == "forbidden"
    assert "shop.manage" in answer["error"]["message"]
    assert shop.writes() == []


# --- history ---------------------------------------------------------------------------------


def test_history_is_kept_across_prompts():
    model = ScriptedModel(["Hello Alice.", "Your name is Alice."])
    with Agent(model, system="You are helpful.") as agent:
        agent.prompt("My name is Alice.")
        response = agent.prompt("What is my name?")
        kept = agent.get_messages()
    assert response.content == "Your name is Alice."
    expected = [
        ("SystemMessage", "You are helpful."),
        ("HumanMessage", "My name is Alice."),
        ("AIMessage", "Hello Alice."),
        ("HumanMessage", "What is my name?"),
    ]
    assert texts(model.calls[1]["messages"]) == expected
    assert texts(kept) == [*expected, ("AIMessage", "Your name is Alice.")]


def test_reset_starts_a_new_conversation_and_keeps_the_configuration():
    model = ScriptedModel(["Hello Alice.", "Hello again."])
    with Agent(model, system="You are helpful.", tools=[get_weather]) as agent:
        agent.prompt("My name is Alice.")
        before = agent.thread_id
        agent.reset()
        assert agent.thread_id != before
        assert agent.get_messages() == []
        agent.prompt("Hi.")
    assert texts(model.calls[1]["messages"]) == [
        ("SystemMessage", "You are helpful."),
        ("HumanMessage", "Hi."),
    ]
    assert model.calls[1]["tools"] == model.calls[0]["tools"]


def test_stateless_mode_keeps_nothing_and_takes_the_history_given():
    model = ScriptedModel(["Hello Alice.", "Your name is Alice.", "I don't know your name."])
    with Agent(model, system="You are helpful.", manage_history=False) as agent:
        history: list[Any] = []
        r1 = agent.prompt("My name is Alice.", messages=history)
        history += [
            {"role": "user", "content": "My name is Alice."},
            {"role": "assistant", "content": r1.content},
        ]
        r2 = agent.prompt("What is my name?", messages=history)
        r3 = agent.prompt("What is my name?")
        assert agent.get_messages() == []
    assert r2.content == "Your name is Alice."
    assert r3.content == "I don't know your name."
    assert texts(model.calls[1]["messages"]) == [
        ("SystemMessage", "You are helpful."),
        ("HumanMessage", "My name is Alice."),
        ("AIMessage", "Hello Alice."),
        ("HumanMessage", "What is my name?"),
    ]
    assert texts(model.calls[2]["messages"]) == [
        ("SystemMessage", "You are helpful."),
        ("HumanMessage", "What is my name?"),
    ]


def test_messages_are_refused_when_the_agent_keeps_history():
    with (
        Agent(ScriptedModel([])) as agent,
        pytest.raises(ValueError, match="manage_history=False"),
    ):
        agent.prompt("hi", messages=[{"role": "user", "content": "earlier"}])


# --- structured output -----------------------------------------------------------------------


class Person(BaseModel):
    name: str
    age: int


PERSON_SHORTHAND = {"name": "string", "age": "integer"}
PERSON_JSON_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
}


@pytest.mark.parametrize(
    ("schema", "parsed"),
    [
        (Person, Person(name="Alice", age=30)),
        (PERSON_SHORTHAND, {"name": "Alice", "age": 30}),
        (PERSON_JSON_SCHEMA, {"name": "Alice", "age": 30}),
    ],
    ids=["pydantic", "shorthand", "json-schema"],
)
def test_structured_output_is_parsed_and_validated(schema, parsed):
    model = ScriptedModel(['```json\n{"name": "Alice", "age": 30}\n```'])
    with Agent(model, system="Extract people.", schema=schema) as agent:
        response = agent.prompt("Extract user info from: Alice, 30")
    assert response.parsed == parsed
    (system, _) = model.calls[0]["messages"]
    assert isinstance(system, SystemMessage)
    assert system.text == f"Extract people.\n\n{instruction(schema)}"


@pytest.mark.parametrize(
    ("schema", "answer", "problem"),
    [
        (Person, "Alice is 30.", "is not JSON"),
        (Person, '{"name": "Alice", "age": "thirty"}', "age: Input should be a valid integer"),
        (PERSON_SHORTHAND, '{"name": "Alice"}', "'age' is a required property"),
        (PERSON_JSON_SCHEMA, '{"name": "Alice", "age": -1}', "/age: -1 is less than"),
    ],
)
def test_a_structured_answer_that_does_not_match_says_what_is_wrong(schema, answer, problem):
    with Agent(ScriptedModel([answer]), schema=schema) as agent:
        with pytest.raises(StructuredOutputError, match=problem) as raised:
            agent.prompt("Extract: Alice, 30")
        assert raised.value.content == answer


def test_chat_is_one_turn_with_tools_and_a_schema():
    model = ScriptedModel(
        [
            calls(("get_weather", {"city": "Lisbon"}), ("get_time", {"city": "Lisbon"})),
            '{"name": "Lisbon", "age": 2700}',
        ]
    )
    response = chat(
        [("user", "How old is Lisbon?")], model=model, tools=[get_weather, get_time], schema=Person
    )
    assert response.parsed == Person(name="Lisbon", age=2700)
    assert len(response.tool_calls) == 2
    model.assert_done()


# --- AgentPool -------------------------------------------------------------------------------


class RecordingAgent(Agent):
    """An Agent that notes when it is closed."""

    closed = False

    def close(self) -> None:
        self.closed = True
        super().close()


def test_the_pool_gives_the_same_agent_for_a_name_and_drop_closes_it():
    pool = AgentPool()
    made: list[RecordingAgent] = []

    def factory() -> RecordingAgent:
        made.append(RecordingAgent(ScriptedModel([])))
        return made[-1]

    first = pool.get("support:42", factory)
    assert pool.get("support:42", factory) is first
    other = pool.get("support:43", factory)
    assert other is not first
    assert pool.names() == ["support:42", "support:43"]
    assert "support:42" in pool
    pool.drop("support:42")
    assert first.closed
    assert not other.closed
    assert "support:42" not in pool
    assert pool.get("support:42", factory) is not first
    assert len(made) == 3
    pool.drop("nobody")  # nothing happens
    for name in pool.names():
        pool.drop(name)
    assert all(agent.closed for agent in made)


# --- busy and timeout --------------------------------------------------------------------------


class Gate:
    """``slow_lookup``: a tool that says when it started, then waits until the gate opens."""

    def __init__(self) -> None:
        self.entered, self.opened = threading.Event(), threading.Event()

        @tool(read_only=True)
        def slow_lookup(city: str) -> str:
            """Waits until the test lets it finish."""
            self.entered.set()
            assert self.opened.wait(WAIT), "the test never opened the gate"
            return f"{city}: found"

        self.tool = slow_lookup


@pytest.fixture
def gate() -> Any:
    return Gate()


def test_a_second_prompt_or_a_reset_while_a_prompt_runs_is_refused(gate):
    model = ScriptedModel([calls(("slow_lookup", {"city": "Lisbon"})), "Found it.", "Next."])
    with Agent(model, tools=[gate.tool]) as agent, ThreadPoolExecutor(1) as pool:
        running = pool.submit(agent.prompt, "Look up Lisbon.")
        try:
            assert gate.entered.wait(WAIT), "the first prompt never reached the tool"
            thread = agent.thread_id
            with pytest.raises(AgentBusy, match="answering a prompt"):
                agent.prompt("Another question.")
            with pytest.raises(AgentBusy, match="answering a prompt"):
                agent.reset()
        finally:
            gate.opened.set()
        assert running.result(WAIT).content == "Found it."
        assert agent.thread_id == thread  # the refused reset changed nothing
        assert agent.prompt("Another question.").content == "Next."
    model.assert_done()


async def test_aprompt_is_refused_while_a_prompt_runs(gate):
    model = ScriptedModel([calls(("slow_lookup", {"city": "Lisbon"})), "Found it."])
    with Agent(model, tools=[gate.tool]) as agent:
        running = asyncio.ensure_future(agent.aprompt("Look up Lisbon."))
        try:
            assert await asyncio.to_thread(gate.entered.wait, WAIT)
            with pytest.raises(AgentBusy):
                await agent.aprompt("Another question.")
        finally:
            gate.opened.set()
        assert (await asyncio.wait_for(running, WAIT)).content == "Found it."


def test_a_hung_tool_times_out_and_the_agent_answers_the_next_prompt():
    @tool
    async def wait_forever(city: str) -> str:
        """Never answers."""
        await asyncio.Event().wait()
        return city

    model = ScriptedModel([calls(("wait_forever", {"city": "Lisbon"})), "Sorry about that."])
    with Agent(model, tools=[wait_forever]) as agent:
        with pytest.raises(AgentTimeout, match=r"longer than 0\.5 s"):
            agent.prompt("Lisbon?", timeout=0.5)
        response = agent.prompt("Never mind.")
        kept = agent.get_messages()
    assert response.content == "Sorry about that."
    sent = model.calls[1]["messages"]
    assert unanswered(sent) == []  # a model API would refuse a tool call without its answer
    assert isinstance(sent[-1], HumanMessage)
    assert sent[-1].text == "Never mind."
    (answer,) = tool_answers(sent).values()
    assert answer["status"] == "error"
    assert unanswered(kept) == []
    model.assert_done()


HANG = "<hang>"


class HangingModel(ScriptedModel):
    """A scripted model whose ``HANG`` step never returns, as a stuck server would not."""

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        result = self._generate(messages, stop, None, **kwargs)
        if result.generations[0].message.text == HANG:
            await asyncio.Event().wait()
        return result


def test_a_model_call_that_hangs_times_out_and_leaves_no_trace():
    model = HangingModel([HANG, "Here I am."])
    with Agent(model, system="Be quick.") as agent:
        with pytest.raises(AgentTimeout):
            agent.prompt("Hello?", timeout=0.5)
        assert agent.prompt("Hello again?").content == "Here I am."
    assert texts(model.calls[1]["messages"]) == [
        ("SystemMessage", "Be quick."),
        ("HumanMessage", "Hello?"),
        ("HumanMessage", "Hello again?"),
    ]


def unreachable(messages: list[Any], tools: list[Any]) -> Any:
    """A scripted step that fails as a model whose server is down does."""
    raise ModelConnectionError("Connection error.")


def test_a_prompt_that_cannot_reach_the_model_raises_model_error_and_keeps_the_conversation():
    model = ScriptedModel(["Hello Alice.", unreachable, "Your name is Alice."])
    with Agent(model) as agent:
        assert agent.prompt("My name is Alice.").content == "Hello Alice."
        with pytest.raises(ModelError, match="The conversation is kept"):
            agent.prompt("What is my name?")
        assert agent.prompt("What is my name?").content == "Your name is Alice."
    assert texts(model.calls[2]["messages"]) == [
        ("HumanMessage", "My name is Alice."),
        ("AIMessage", "Hello Alice."),
        ("HumanMessage", "What is my name?"),
        ("HumanMessage", "What is my name?"),
    ]
    model.assert_done()


async def test_a_confirm_that_cannot_reach_the_model_is_sent_again_and_runs_nothing_twice():
    deleted: list[str] = []

    @tool(danger="always")
    def delete_note(title: str) -> str:
        """Delete a note."""
        deleted.append(title)
        return f"deleted {title}"

    model = ScriptedModel([calls(("delete_note", {"title": "groceries"})), unreachable, "Done."])
    with Agent(model, tools=[delete_note]) as agent:
        (held,) = (await agent.aprompt("Delete my groceries note.")).pending
        with pytest.raises(ModelError, match=r"send the prompt \(or the confirm\) again"):
            await agent.aconfirm({held.id: "approve"})
        assert deleted == ["groceries"]
        answer = await agent.aconfirm({held.id: "approve"})
    assert answer.content == "Done."
    assert answer.pending == []
    assert deleted == ["groceries"]
    model.assert_done()


# --- across processes --------------------------------------------------------------------------


def _run(target: Any, *args: Any) -> Any:
    """Run ``target(*args, results)`` in a spawned process; return what it put in ``results``."""
    results = SPAWN.Queue()
    process = SPAWN.Process(target=target, args=(*args, results), daemon=True)
    process.start()
    try:
        value = results.get(timeout=WAIT)
    finally:
        process.join(WAIT)
        if process.is_alive():
            process.kill()
    assert process.exitcode == 0, f"the worker exited with {process.exitcode}"
    return value


def test_a_conversation_started_in_one_process_goes_on_in_another(tmp_path):
    storage = str(tmp_path / "agent.sqlite")
    thread_id = f"support-{uuid.uuid4()}"
    assert _run(workers.first_exchange, storage, thread_id) == "Hello Alice."

    model = ScriptedModel(["Your name is Alice."])
    with Agent(model, system="A new prompt.", storage=storage, thread_id=thread_id) as agent:
        response = agent.prompt("What is my name?")
        kept = agent.get_messages()
    assert response.content == "Your name is Alice."
    assert texts(model.calls[0]["messages"]) == [
        ("SystemMessage", workers.SYSTEM),  # the thread's own system prompt, not re-added
        ("HumanMessage", "My name is Alice."),
        ("AIMessage", "Hello Alice."),
        ("HumanMessage", "What is my name?"),
    ]
    assert len(kept) == 5


def test_a_write_held_in_one_process_is_confirmed_in_another(tmp_path):
    storage, log = str(tmp_path / "agent.sqlite"), tmp_path / "deleted.log"
    thread_id = f"notes-{uuid.uuid4()}"
    started = _run(workers.start_held_delete, storage, thread_id, str(log))
    assert started["content"] == ""
    (pending,) = started["pending"]
    assert pending["tool"] == "local.delete_note"
    assert pending["arguments"] == {"title": "groceries"}
    assert not log.exists()

    model = ScriptedModel(["I deleted your groceries note."])
    tools = workers.notes_tools(str(log))
    with Agent(model, tools=tools, storage=storage, thread_id=thread_id) as agent:
        done = agent.confirm({pending["id"]: "approve"})
    assert done.content == "I deleted your groceries note."
    assert done.pending == []
    assert Path(log).read_text() == "groceries\n"
    (answer,) = tool_answers(model.calls[0]["messages"]).values()
    assert answer == {"executed": True, "status": "ok", "result": {"deleted": "groceries"}}
    model.assert_done()


def test_a_closed_agent_says_so():
    agent = Agent(ScriptedModel([]))
    agent.close()
    with pytest.raises(RuntimeError, match="this agent is closed"):
        agent.prompt("hi")


def test_a_resumed_turn_reports_only_what_it_added():
    @tool(danger="always")
    def delete_note(note_id: str) -> str:
        "Delete a note."
        return f"deleted {note_id}"

    usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    first = AIMessage(
        "", tool_calls=[{"name": "delete_note", "args": {"note_id": "n1"}, "id": "c1"}],
        usage_metadata=usage,
    )  # fmt: skip
    with Agent(ScriptedModel([first, AIMessage("Deleted.", usage_metadata=usage)]),
               tools=[delete_note]) as agent:  # fmt: skip
        held = agent.prompt("delete n1")
        assert held.usage == usage
        assert held.pending
        done = agent.confirm({held.pending[0].id: "approve"})
        assert done.content == "Deleted."
        assert done.usage == usage
        assert done.tool_calls == []


def test_get_messages_after_a_timeout_is_a_history_a_model_accepts():
    release = threading.Event()

    @tool
    def slow_lookup(city: str) -> str:
        "Look up slowly."
        release.wait(30)
        return city

    model = ScriptedModel([calls(("slow_lookup", {"city": "Lisbon"}))])
    with Agent(model, tools=[slow_lookup]) as agent:
        with pytest.raises(AgentTimeout):
            agent.prompt("Lisbon?", timeout=0.3)
        release.set()
        kinds = [type(m).__name__ for m in agent.get_messages()]
        assert kinds == ["HumanMessage", "AIMessage", "ToolMessage"]


def _recorders_end() -> None:
    """Wait (bounded) for every thread that records a cancelled call's outcome to end."""
    for thread in [t for t in threading.enumerate() if t.name == "turnkit-record"]:
        thread.join(WAIT)
        assert not thread.is_alive(), "a cancelled call's outcome is still being recorded"


@pytest.mark.parametrize("ends", ["before-close", "after-close"])
def test_an_agent_closed_while_a_cancelled_call_records_its_outcome_logs_no_error(caplog, ends):
    """The agent's executor is closed before its ledger: a handler that ended by then has its
    outcome recorded first; one still running is told not to record it (a warning), never left
    to fail on a closed database."""
    release = threading.Event()

    @tool
    def slow_lookup(city: str) -> str:
        "Look up slowly."
        release.wait(WAIT)
        return city

    agent = Agent(ScriptedModel([calls(("slow_lookup", {"city": "Lisbon"}))]), tools=[slow_lookup])
    with pytest.raises(AgentTimeout):
        agent.prompt("Lisbon?", timeout=0.3)
    if ends == "before-close":
        release.set()
    agent.close()
    release.set()
    _recorders_end()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    if ends == "after-close":
        assert "'local.slow_lookup'" in caplog.text
        assert "its outcome is not recorded" in caplog.text


def test_an_edit_no_checkpoint_can_store_is_refused_before_it_reaches_langgraph():
    from turnkit import ResumeError

    @tool(danger="always")
    def set_limit(limit: int) -> str:
        "Set the limit."
        return f"limit {limit}"

    call = AIMessage("", tool_calls=[{"name": "set_limit", "args": {"limit": 5}, "id": "c1"}])
    with Agent(ScriptedModel([call, "Set."]), tools=[set_limit]) as agent:
        (pending,) = agent.prompt("set it").pending
        edit = {"action": "edit", "arguments": {"limit": 10**30}}
        with pytest.raises(ResumeError, match="outside the 64-bit range"):
            agent.confirm({pending.id: edit})
        assert agent.confirm({pending.id: "approve"}).content == "Set."  # still waiting
