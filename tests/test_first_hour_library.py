"""The library as a new user meets it: mistakes raise a ``TurnkitError`` that says what to do."""

from __future__ import annotations

import asyncio
import logging

import pytest

from _openai_server import OpenAIServer
from turnkit import (
    Agent,
    Caller,
    Executor,
    ModelError,
    Registry,
    StaticPermissions,
    StorageError,
    ToolDeclarationError,
    TurnkitError,
    tool,
)
from turnkit.agent.models import resolve_model  # internal: a model from a string

pytestmark = pytest.mark.usefixtures("no_openai_environment")

DOWN = "http://127.0.0.1:9/v1"
"""A base URL where no server listens (the discard port)."""


@pytest.mark.parametrize(
    ("model", "said"),
    [
        (42, "model must be a LangChain chat model or a string"),
        ("nonexistent:model", "Unsupported provider='nonexistent'"),
        (":gpt", "write it as 'provider:model'"),
    ],
)
def test_a_model_that_cannot_be_built_raises_model_error(model, said):
    with pytest.raises(ModelError, match=said) as raised:
        Agent(model)
    assert isinstance(raised.value, TurnkitError)
    with pytest.raises(ModelError):
        resolve_model(model)


def test_a_model_server_that_is_down_raises_model_error_naming_it():
    with Agent("openai:m", base_url=DOWN) as agent:
        with pytest.raises(ModelError) as sync:
            agent.prompt("Hi.")
        with pytest.raises(ModelError) as async_:
            asyncio.run(agent.aprompt("Hi."))
    for raised in (sync, async_):
        said = str(raised.value)
        assert f"cannot reach the model's server at {DOWN!r}" in said
        assert "Check that the server is running and that base_url=" in said
        assert "The conversation is kept" in said


@pytest.mark.parametrize("name", ["llama3.1:8b", "qwen2.5:7b-instruct-q4_K_M"])
def test_a_tagged_model_name_is_the_servers_own_name_when_a_base_url_is_set(name, monkeypatch):
    with OpenAIServer(["Hello.", "Hello again."]) as server:
        with Agent(name, base_url=server.url) as agent:
            assert agent.prompt("Hi.").content == "Hello."
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        with Agent(name) as agent:
            assert agent.prompt("Hi.").content == "Hello again."
    server.assert_done()
    assert [request["model"] for request in server.requests] == [name, name]


def test_a_tagged_model_name_without_a_base_url_says_to_give_one():
    with pytest.raises(ModelError, match=r"with base_url=\.\.\. or OPENAI_BASE_URL set"):
        Agent("llama3.1:8b")


def test_an_agent_storage_that_cannot_be_opened_raises_storage_error(tmp_path):
    with pytest.raises(StorageError, match="does not exist: create it first"):
        Agent("openai:m", base_url="http://127.0.0.1:9/v1", storage=tmp_path / "no" / "a.sqlite")
    with pytest.raises(StorageError, match="neither a SQLite file nor a URL"):
        Agent("openai:m", base_url="http://127.0.0.1:9/v1", storage="garbage")


def test_a_function_tool_without_a_docstring_or_type_hints_is_refused_saying_how_to_fix():
    def lookup(city, units: str = "c"):
        return city

    with pytest.raises(ToolDeclarationError) as refused:
        tool(lookup)
    problems = refused.value.problems
    assert any("has no docstring: add one" in p for p in problems)
    assert any("parameter 'city' has no type hint: write e.g. city: str" in p for p in problems)
    assert len(problems) == 2

    def described(city):
        "Find a city."
        return city

    with pytest.raises(ToolDeclarationError, match="'city' has no type hint"):
        Agent("openai:m", base_url="http://127.0.0.1:9/v1", tools=[described])

    def typed(city: str) -> str:
        return city

    assert tool(description="Find a city.")(typed).description == "Find a city."


class Orders:
    key = "orders"

    def api_tools(self) -> list[dict]:
        return [
            {"name": "orders.list_orders", "scope": "orders.orders:read",
             "permission": "orders.view", "annotations": {"read_only": True},
             "handler": lambda i, c: []},
            {"name": "orders.cancel_order", "scope": "orders.orders:write",
             "permission": "orders.manage", "handler": lambda i, c: {"cancelled": True}},
        ]  # fmt: skip


def test_a_session_missing_writes_only_for_the_switch_gets_one_warning_naming_it(caplog):
    rights = StaticPermissions({"alice": {"orders.view", "orders.manage"}, "bob": {"orders.view"}})
    executor = Executor(Registry([Orders()]), permissions=rights)
    with caplog.at_level(logging.WARNING, logger="turnkit.executor"):
        for _ in range(3):
            executor.visible_for(Caller.session("alice"))
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "orders.cancel_order" in warning
    assert "'api_session_write_modules'" in warning
    assert "add 'orders' to it" in warning
    caplog.clear()
    other = Executor(Registry([Orders()]), permissions=rights)
    with caplog.at_level(logging.WARNING, logger="turnkit.executor"):
        other.visible_for(Caller.session("bob"))  # bob lacks the permission: not the switch
    assert caplog.records == []
    executor.close()
    other.close()


def test_an_executor_without_a_ledger_leaves_no_folder_behind(tmp_path, monkeypatch):
    import tempfile

    from turnkit import MemoryLedger, chat
    from turnkit.testing import ScriptedModel

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    executor = Executor(Registry())
    assert isinstance(executor.ledger, MemoryLedger)  # its own ledger is in memory: no file
    assert list(tmp_path.iterdir()) == []
    executor.close()
    assert list(tmp_path.iterdir()) == []
    for _ in range(3):
        assert chat("hi", model=ScriptedModel(["Hello."])).content == "Hello."
    assert list(tmp_path.iterdir()) == []
