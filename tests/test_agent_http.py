"""``Agent`` and ``chat`` with ChatOpenAI over real HTTP, against a local scripted server.

The server (``_openai_server.py``) records every request body, so these tests check what actually
goes over the wire: tool names and schemas, the tool-call/tool-message pairing of the second
request, fitted results, held writes resumed with ``confirm``, streaming, usage and structured
output. It also refuses a history OpenAI would refuse, and a call beyond the script fails loudly.

Reaches ``turnkit.agent``'s modules for ``LocalModule``, ``resolve_model`` and ``instruction``:
local tools beside a registry module, a ChatOpenAI pointed at the test server and the
structured-output prompt checked on the wire have no public name.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from _openai_server import call, reply
from _shop import Shop
from _weather import get_time, get_weather
from turnkit import (
    Agent,
    AgentTimeout,
    Caller,
    Executor,
    Registry,
    Settings,
    StaticPermissions,
    StructuredOutputError,
    chat,
    tool,
)
from turnkit.agent.local_tools import LocalModule
from turnkit.agent.models import resolve_model
from turnkit.agent.structured import instruction

pytestmark = pytest.mark.usefixtures("no_openai_environment")

CONTROL = ("dry_run", "confirm_token", "idempotency_key")
READER = Caller.key("key-r", user_id="alice", scopes={"shop.products:read"})
WRITER = Caller.key("key-w", user_id="alice", scopes={"shop.products:read", "shop.products:write"})


@tool(read_only=True)
def get_forecast(city: str) -> list[dict[str, Any]]:
    """A 30-day forecast: far more than the model may receive."""
    return [{"city": city, "day": day, "sky": "sunny", "high": 22} for day in range(30)]


@pytest.fixture
def model(server):
    """``"openai:test-model"`` built by turnkit for the local server (non-streaming)."""
    return resolve_model("openai:test-model", base_url=server.url)


@pytest.fixture
def streaming_model(server):
    """A ChatOpenAI built by hand, streaming with usage."""
    return ChatOpenAI(
        model="test-model",
        base_url=server.url,
        api_key="test",
        use_responses_api=False,
        streaming=True,
        stream_usage=True,
    )


@pytest.fixture
def shop(tmp_path) -> Shop:
    return Shop(tmp_path / "writes.log")


@pytest.fixture
def executor(shop):
    """The agent's own ``get_weather`` and the shop module; alice may view and manage."""
    rights = StaticPermissions({"alice": {"shop.view", "shop.manage"}})
    ex = Executor(Registry([LocalModule([get_weather]), shop]), permissions=rights)
    yield ex
    ex.close()


def tools_of(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"] for t in body.get("tools", [])}


def tool_contents(body: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


# --- what the model is shown -----------------------------------------------------------------


def test_local_and_registry_tools_go_out_under_their_model_names(server, model, executor):
    server.script("Hello.")
    with Agent(model, executor=executor, caller=READER) as agent:
        agent.prompt("hi")
    (body,) = server.requests
    assert body["model"] == "test-model"
    assert body["stream"] is False
    assert [t["type"] for t in body["tools"]] == ["function", "function"]
    shown = tools_of(body)
    assert list(shown) == ["get_weather", "shop_list_products"]
    assert shown["get_weather"]["description"] == "Get current weather conditions for a city."
    assert shown["shop_list_products"]["description"] == "shop.list_products"  # its title
    weather = shown["get_weather"]["parameters"]
    assert weather["type"] == "object"
    assert set(weather["properties"]) == {"city", "units"}
    assert weather["required"] == ["city"]
    assert shown["shop_list_products"]["parameters"] == {
        "type": "object",
        "additionalProperties": False,
        "properties": {"limit": {"type": "integer", "minimum": 1}},
    }
    assert body["messages"] == [{"role": "user", "content": "hi"}]


def test_control_fields_never_reach_the_model(server, model, executor):
    server.script("Hello.")
    with Agent(model, executor=executor, caller=WRITER) as agent:
        agent.prompt("hi")
    (body,) = server.requests
    assert list(tools_of(body)) == [
        "get_weather",
        "shop_list_products",
        "shop_set_prices",
        "shop_delete_product",
    ]
    sent = json.dumps(body["tools"])
    for field in CONTROL:
        assert field not in sent


# --- a round of tool calls --------------------------------------------------------------------


def test_the_second_request_pairs_each_tool_call_with_its_fitted_result(server, model):
    server.script(
        reply(
            tool_calls=[
                call("get_weather", {"city": "Lisbon"}, id="call_w"),
                call("get_forecast", {"city": "Lisbon"}, id="call_f"),
            ]
        ),
        "Sunny all month.",
    )
    settings = Settings(agent_tool_result_chars=200)
    with Agent(model, tools=[get_weather, get_forecast], settings=settings) as agent:
        response = agent.prompt("Weather in Lisbon this month?")

    assert response.content == "Sunny all month."
    first, second = server.requests
    user, assistant, *tools = second["messages"]
    assert user == {"role": "user", "content": "Weather in Lisbon this month?"}
    assert assistant["role"] == "assistant"
    assert assistant["content"] is None
    assert [(c["id"], c["type"], c["function"]["name"]) for c in assistant["tool_calls"]] == [
        ("call_w", "function", "get_weather"),
        ("call_f", "function", "get_forecast"),
    ]
    assert [json.loads(c["function"]["arguments"]) for c in assistant["tool_calls"]] == [
        {"city": "Lisbon"},
        {"city": "Lisbon"},
    ]
    assert [m["role"] for m in tools] == ["tool", "tool"]
    contents = tool_contents(second)
    assert json.loads(contents["call_w"]) == {
        "executed": True,
        "status": "ok",
        "result": "Lisbon: 22°C",
    }
    fitted = contents["call_f"]
    assert len(fitted) <= 200
    truncated = json.loads(fitted)
    assert set(truncated) == {"truncated", "partial", "hint"}
    assert truncated["truncated"] is True
    assert truncated["partial"].startswith('{"executed":true,"status":"ok","result":[{"city"')
    assert truncated["hint"]
    assert first["tools"] == second["tools"]  # listed once per turn


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["prompt", "aprompt"])
async def test_a_turn_works_end_to_end_and_adds_up_the_reported_usage(
    server, model, streaming_model, streaming, asynchronous
):
    server.script(
        reply(
            tool_calls=[call("get_weather", {"city": "Porto", "units": "fahrenheit"})],
            usage={"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
        ),
        reply(
            "Porto is at 22°F, oddly.",
            usage={"prompt_tokens": 20, "completion_tokens": 6, "total_tokens": 26},
        ),
    )
    chosen = streaming_model if streaming else model
    with Agent(chosen, tools=[get_weather], system="Be brief.") as agent:
        if asynchronous:
            response = await agent.aprompt("And in Porto?")
        else:
            response = agent.prompt("And in Porto?")

    assert response.content == "Porto is at 22°F, oddly."
    assert response.usage == {"input_tokens": 31, "output_tokens": 9, "total_tokens": 40}
    (record,) = response.tool_calls
    assert record.name == "get_weather"
    assert record.arguments == {"city": "Porto", "units": "fahrenheit"}
    assert record.answer == {"executed": True, "status": "ok", "result": "Porto: 22°F"}
    assert [r["stream"] for r in server.requests] == [streaming, streaming]
    if streaming:
        assert all(r["stream_options"] == {"include_usage": True} for r in server.requests)
    assert server.requests[0]["messages"][0] == {"role": "system", "content": "Be brief."}
    (answer,) = tool_contents(server.requests[1]).values()
    assert json.loads(answer)["result"] == "Porto: 22°F"


# --- held writes ----------------------------------------------------------------------------


def _held_delete(server, model, executor):
    server.script(
        reply(tool_calls=[call("shop_delete_product", {"sku": "TEA-0001"}, id="call_del")])
    )
    agent = Agent(model, executor=executor, caller=WRITER)
    first = agent.prompt("Delete TEA-0001.")
    return agent, first


def test_a_held_write_waits_and_runs_once_when_approved(server, model, executor, shop):
    agent, first = _held_delete(server, model, executor)
    with agent:
        assert first.content == ""
        (pending,) = first.pending
        assert pending.tool == "shop.delete_product"
        assert pending.arguments == {"sku": "TEA-0001"}
        expires = datetime.fromisoformat(pending.expires_at.replace("Z", "+00:00"))
        assert timedelta(minutes=55) < expires - datetime.now(UTC) <= timedelta(hours=1, seconds=1)
        assert shop.writes() == []
        assert len(server.requests) == 1

        server.script("TEA-0001 is deleted.")
        done = agent.confirm({pending.id: "approve"})

    assert shop.writes() == [{"tool": "delete_product", "input": {"sku": "TEA-0001"}}]
    assert done.content == "TEA-0001 is deleted."
    assert done.pending == []
    second = server.requests[1]
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "tool"]
    assert json.loads(tool_contents(second)["call_del"]) == {
        "executed": True,
        "status": "ok",
        "result": {"deleted": "TEA-0001"},
    }


def test_a_rejected_write_runs_nothing_and_the_model_reads_why(server, model, executor, shop):
    agent, first = _held_delete(server, model, executor)
    with agent:
        (pending,) = first.pending
        server.script("Understood, I kept it.")
        done = agent.confirm({pending.id: {"action": "reject", "message": "we still sell it"}})

    assert shop.writes() == []
    assert done.content == "Understood, I kept it."
    assert json.loads(tool_contents(server.requests[1])["call_del"]) == {
        "executed": False,
        "status": "rejected",
        "message": "we still sell it",
    }


# --- chat(), structured output ---------------------------------------------------------------


class CityReport(BaseModel):
    city: str
    temperature_c: int
    local_time: str


def test_chat_runs_several_tools_and_parses_the_structured_answer(server):
    server.script(
        reply(
            tool_calls=[
                call("get_weather", {"city": "Lisbon"}),
                call("get_time", {"city": "Lisbon"}),
            ]
        ),
        '{"city": "Lisbon", "temperature_c": 22, "local_time": "14:00"}',
    )
    response = chat(
        "Weather and time in Lisbon?",
        model="openai:test-model",
        base_url=server.url,
        tools=[get_weather, get_time],
        schema=CityReport,
        system="You are brief.",
    )
    assert response.parsed == CityReport(city="Lisbon", temperature_c=22, local_time="14:00")
    assert [c.answer["result"] for c in response.tool_calls] == ["Lisbon: 22°C", "Lisbon: 14:00"]
    first, second = server.requests
    assert list(tools_of(first)) == ["get_weather", "get_time"]
    system = first["messages"][0]
    assert system == {"role": "system", "content": f"You are brief.\n\n{instruction(CityReport)}"}
    assert '"temperature_c"' in system["content"]
    assert len(tool_contents(second)) == 2


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("It is sunny and 22 degrees.", "the model's answer is not JSON"),
        ('{"city": "Lisbon"}', "does not match CityReport: temperature_c: Field required"),
    ],
)
def test_chat_says_what_is_wrong_with_an_invalid_structured_answer(server, answer, problem):
    server.script(answer)
    with pytest.raises(StructuredOutputError, match=problem) as raised:
        chat("Lisbon?", model="openai:test-model", base_url=server.url, schema=CityReport)
    assert raised.value.content == answer


# --- configuration ----------------------------------------------------------------------------


def test_a_model_string_without_key_or_base_url_says_what_to_set():
    with pytest.raises(ValueError, match=r"OPENAI_API_KEY.*OPENAI_BASE_URL") as raised:
        Agent("openai:gpt-4o-mini")
    assert "base_url=" in str(raised.value)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        chat("hi", model="openai:gpt-4o-mini")


def test_openai_base_url_alone_reaches_a_local_server(server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    server.script("Hi from the local server.")
    with Agent("openai:local-model") as agent:
        assert agent.prompt("hi").content == "Hi from the local server."
    assert server.requests[0]["model"] == "local-model"


def test_an_unscripted_call_fails_loudly_without_retries(server, model):
    with Agent(model) as agent, pytest.raises(Exception, match="is not scripted"):
        agent.prompt("hi")
    assert len(server.requests) == 1  # x-should-retry: false
    (error,) = server.errors
    assert "not scripted" in error
    server.errors.clear()


def test_the_server_refuses_a_tool_call_without_its_answer(server):
    """The fake is as strict as OpenAI about dangling tool calls (so tests can rely on it)."""
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_x", "type": "function",
                 "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "user", "content": "again"},
        ],
    }  # fmt: skip
    answer = httpx.post(f"{server.url}/chat/completions", json=body, timeout=10)
    assert answer.status_code == 400
    assert "call_x" in answer.json()["error"]["message"]
    assert answer.headers["x-should-retry"] == "false"
    server.errors.clear()


@pytest.mark.parametrize("streams", [False, True], ids=["invoked", "streamed"])
def test_arguments_nested_ten_thousand_deep_are_answered_as_beyond_the_limits(
    server, model, streaming_model, executor, shop, streams
):
    """ChatOpenAI cannot parse such text (its parser overflows) and leaves it unparsed: the
    model is told the limit it broke, not that its JSON was invalid, and nothing runs."""
    text = '{"limit": ' + '{"a": ' * 10_000 + "1" + "}" * 10_001
    server.script(reply(tool_calls=[call("shop_list_products", text, id="call_deep")]), "Sorry.")
    with Agent(streaming_model if streams else model, executor=executor, caller=READER) as agent:
        assert agent.prompt("List the products.").content == "Sorry."
    answer = json.loads(tool_contents(server.requests[1])["call_deep"])
    assert answer["error"]["code"] == "invalid_input"
    assert "nests deeper than 64 levels" in answer["error"]["message"]
    assert shop.reads == 0


def test_after_a_timeout_the_next_request_is_one_openai_accepts(server, model):
    """A turn cancelled inside a tool leaves no unanswered tool call in what is sent next."""

    @tool
    async def wait_forever(city: str) -> str:
        """Never answers."""
        await asyncio.Event().wait()
        return city

    server.script(reply(tool_calls=[call("wait_forever", {"city": "Lisbon"}, id="call_hang")]))
    with Agent(model, tools=[wait_forever]) as agent:
        with pytest.raises(AgentTimeout):
            agent.prompt("Lisbon?", timeout=0.5)
        server.script("Sorry, that took too long.")
        assert agent.prompt("Never mind.").content == "Sorry, that took too long."
    roles = [m["role"] for m in server.requests[1]["messages"]]
    assert roles == ["user", "assistant", "tool", "user"]
    answer = json.loads(tool_contents(server.requests[1])["call_hang"])
    assert answer["status"] == "error"
