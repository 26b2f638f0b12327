"""The graph factory: a deployment built on first use from configuration (``TURNKIT_*``), with
nothing opened or written at import, one executor shared by the graph and the REST/MCP app, and
every mistake in the configuration told by the variable that holds it."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from starlette.testclient import TestClient

from _openai_server import call, reply
from turnkit import Caller, ConfigError, ModelError, PostgresLedger, SqliteLedger
from turnkit.deploy import DeployConfig, Deployment
from turnkit.deploy.deployment import NO_TOOLS  # internal: the warning's text, no public name
from turnkit.graph import TurnContext
from turnkit.ledger.urls import ACCEPTED  # internal: the storage forms the message lists

TESTS = Path(__file__).resolve().parent
APP = {"TURNKIT_MODULES": "_deploy_app:shop", "TURNKIT_PERMISSIONS": "_deploy_app:rights"}


def _python(code: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("TURNKIT_", "OPENAI_"))}
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env={**keep, "PYTHONPATH": str(TESTS), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_importing_what_langgraph_json_names_opens_and_writes_nothing(tmp_path):
    done = _python(
        "import turnkit.demo.studio, turnkit.demo.server, turnkit.deploy.env, _deploy_auth;"
        " print('imported')",
        tmp_path,
        TURNKIT_DATABASE_URL="ledger.sqlite",
        **APP,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_demo_factory_builds_its_files_on_first_call_and_then_returns_the_same_graph(
    tmp_path, monkeypatch
):
    from turnkit.demo import studio  # internal: the Studio graph langgraph.json names

    monkeypatch.setenv("TURNKIT_DEMO_DB", str(tmp_path / "demo" / "catalogue.sqlite"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert not (tmp_path / "demo").exists()
    try:
        first = asyncio.run(studio.graph())
        assert asyncio.run(studio.graph()) is first
        assert (tmp_path / "demo" / "catalogue.ledger.sqlite").exists()
        assert studio.deployment.executor().ledger.path.endswith("catalogue.ledger.sqlite")
    finally:
        studio.deployment.close()


SCRIPTED = "turnkit.demo:scripted_demo_model"
"""The demo's scripted model, named as a deployment takes it (offline)."""


def _deployment(url: str, monkeypatch: pytest.MonkeyPatch, **env: str) -> Deployment:
    monkeypatch.syspath_prepend(str(TESTS))
    return Deployment.from_env({"TURNKIT_DATABASE_URL": url, **APP, **env})


def test_a_deployment_from_the_environment_runs_its_modules_for_its_default_user(
    ledger_url, tmp_path, monkeypatch, server, no_openai_environment
):
    monkeypatch.setenv("SHOP_LOG", str(tmp_path / "writes.log"))
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    server.script(reply(tool_calls=[call("shop_list_products", {})]), reply("One product."))
    deployment = _deployment(
        ledger_url, monkeypatch, TURNKIT_MODEL="fake-model", TURNKIT_DEFAULT_USER="bob"
    )
    try:
        graph = asyncio.run(deployment.agraph())
        done = graph.invoke({"messages": [HumanMessage("what is for sale?")]})
        ledger = deployment.executor().ledger
    finally:
        deployment.close()
    assert isinstance(ledger, PostgresLedger if ledger_url.startswith("postgres") else SqliteLedger)
    assert done["messages"][-1].content == "One product."
    assert [t["function"]["name"] for t in server.requests[0]["tools"]] == ["shop_list_products"]
    assert server.requests[0]["model"] == "fake-model"


def test_the_executor_and_graph_are_built_once_and_shared(tmp_path, monkeypatch):
    deployment = _deployment(
        str(tmp_path / "l.sqlite"),
        monkeypatch,
        TURNKIT_MODEL_FACTORY=SCRIPTED,
    )
    try:
        executor = deployment.executor()
        assert asyncio.run(deployment.aexecutor()) is executor
        assert deployment.graph() is asyncio.run(deployment.agraph())
    finally:
        deployment.close()


def test_a_run_of_a_deployment_without_sign_in_or_default_user_fails_clearly(tmp_path, monkeypatch):
    deployment = _deployment(
        str(tmp_path / "l.sqlite"),
        monkeypatch,
        TURNKIT_MODEL_FACTORY=SCRIPTED,
    )
    try:
        with pytest.raises(Exception, match="sign the request in"):
            deployment.graph().invoke({"messages": [HumanMessage("hi")]})
        context = TurnContext(caller=Caller.session("alice"))  # in-process code still may
        assert deployment.graph().invoke({"messages": [HumanMessage("hi")]}, context=context)
    finally:
        deployment.close()


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({}, "set TURNKIT_DATABASE_URL to the ledger: a SQLite file"),
        (
            {"TURNKIT_DATABASE_URL": "postgres:/u@h/db"},
            "TURNKIT_DATABASE_URL: 'postgres:/u@h/db' looks like",
        ),
        ({"TURNKIT_DATABASE_URL": "ledger"}, "neither a SQLite file nor a URL"),
        ({"TURNKIT_DATABASE_URL": "mysql://h/db"}, "unsupported storage URL"),
        ({"TURNKIT_MODULES": "myapp.shop"}, "TURNKIT_MODULES: 'myapp.shop' is not 'package"),
        ({"TURNKIT_PERMISSIONS": "rights"}, "TURNKIT_PERMISSIONS: 'rights' is not 'package"),
        ({"TURNKIT_MODEL_FACTORY": "models"}, "TURNKIT_MODEL_FACTORY: 'models' is not 'package"),
        (
            {"TURNKIT_MODEL": "gpt-4o", "TURNKIT_MODEL_FACTORY": "myapp.models:chat"},
            "set TURNKIT_MODEL or TURNKIT_MODEL_FACTORY, not both",
        ),
        (  # the deployment does not know the demo: its model is named by reference
            {"TURNKIT_MODEL": "scripted"},
            "for the demo's scripted model set"
            " TURNKIT_MODEL_FACTORY=turnkit.demo:scripted_demo_model instead",
        ),
    ],
)
def test_a_malformed_variable_is_refused_when_read(env, says):
    with pytest.raises(ConfigError, match=re.escape(says)):
        DeployConfig.from_env({"TURNKIT_DATABASE_URL": "ledger.sqlite", **env} if env else {})


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"TURNKIT_MODULES": "_deploy_app:nope"}, "TURNKIT_MODULES: '_deploy_app:nope' could not"),
        ({"TURNKIT_MODULES": "no_such_app.tools:Shop"}, "No module named 'no_such_app'"),
        ({"TURNKIT_MODULES": "_deploy_app:broken"}, r"failed when called \(RuntimeError: the shop"),
        ({"TURNKIT_PERMISSIONS": "_deploy_app:not_a_provider"}, "int, not a permission provider"),
    ],
)
def test_a_reference_that_cannot_be_loaded_is_refused_when_built_and_opens_no_ledger(
    env, says, tmp_path, monkeypatch
):
    deployment = _deployment(str(tmp_path / "l.sqlite"), monkeypatch, **env)
    with pytest.raises(ConfigError, match=says):
        asyncio.run(deployment.agraph())
    assert not (tmp_path / "l.sqlite").exists()


def test_a_model_factory_that_fails_is_told_by_its_variable(tmp_path, monkeypatch):
    deployment = _deployment(
        str(tmp_path / "l.sqlite"), monkeypatch, TURNKIT_MODEL_FACTORY="_deploy_app:broken"
    )
    try:
        with pytest.raises(ConfigError, match=r"TURNKIT_MODEL_FACTORY: '_deploy_app:broken' fail"):
            deployment.graph()
    finally:
        deployment.close()


def test_a_ledger_that_cannot_be_opened_is_told_by_its_variable(tmp_path, monkeypatch):
    deployment = _deployment(str(tmp_path / "missing" / "l.sqlite"), monkeypatch)
    with pytest.raises(ConfigError, match=r"TURNKIT_DATABASE_URL: .* does not exist"):
        deployment.executor()


def test_a_model_that_cannot_be_built_fails_the_build_which_a_later_call_retries(
    tmp_path, monkeypatch, no_openai_environment
):
    deployment = _deployment(str(tmp_path / "l.sqlite"), monkeypatch)  # gpt-4o-mini, no key
    with pytest.raises(ModelError, match="OPENAI_API_KEY"):
        deployment.graph()
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    try:
        assert deployment.graph() is deployment.graph()
    finally:
        deployment.close()


def test_the_env_module_stops_a_server_with_a_bad_environment_at_import(tmp_path):
    done = _python("import turnkit.deploy.env", tmp_path, TURNKIT_MODULES="shop")
    assert done.returncode != 0
    assert "ConfigError: set TURNKIT_DATABASE_URL" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_app_serves_the_deployments_executor_once_started_and_nothing_else(
    tmp_path, monkeypatch
):
    deployment = _deployment(
        str(tmp_path / "l.sqlite"),
        monkeypatch,
        TURNKIT_MODEL_FACTORY=SCRIPTED,
    )
    prepared: list[Any] = []
    app = deployment.app(prepare=prepared.append)
    assert TestClient(app).get("/healthz").status_code == 404  # not started: nothing served
    assert not (tmp_path / "l.sqlite").exists()
    try:
        with TestClient(app) as client:
            assert client.get("/healthz").json() == {"status": "ok"}
            assert client.get("/v1/tools").status_code == 401
            assert client.get("/threads").status_code == 404  # left to LangGraph's routes
        assert prepared == [deployment.executor()]
    finally:
        deployment.close()


def test_the_apps_mcp_answers_the_hosts_and_origins_the_environment_names(tmp_path, monkeypatch):
    deployment = _deployment(
        str(tmp_path / "l.sqlite"),
        monkeypatch,
        TURNKIT_MODEL_FACTORY=SCRIPTED,
        TURNKIT_MCP_ALLOWED_HOSTS="tools.example.com, api.example.com",
        TURNKIT_MCP_ALLOWED_ORIGINS="https://app.example.com",
    )
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    mcp = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    answered = {
        ("api.example.com", "https://app.example.com"): 401,  # let through: no key was sent
        ("evil.example", None): 421,
        ("tools.example.com", "https://evil.example"): 403,
    }
    try:
        with TestClient(deployment.app()) as client:
            for (host, origin), status in answered.items():
                headers = mcp | {"Host": host} | ({"Origin": origin} if origin else {})
                assert client.post("/mcp", json=listing, headers=headers).status_code == status
    finally:
        deployment.close()


def test_a_deployment_without_modules_says_its_agent_has_no_tools(tmp_path, monkeypatch, caplog):
    import _deploy_app

    monkeypatch.syspath_prepend(str(TESTS))
    deployment = Deployment.from_env({"TURNKIT_DATABASE_URL": str(tmp_path / "ledger.sqlite"),
                                      "TURNKIT_MODEL_FACTORY": "_deploy_app:words_only_model",
                                      "TURNKIT_DEFAULT_USER": "bob"})  # fmt: skip
    try:
        with caplog.at_level("WARNING", logger="turnkit.deploy"):
            graph = deployment.graph()
            assert deployment.graph() is graph  # built once: told once
        done = graph.invoke({"messages": [HumanMessage("hello")]})
    finally:
        deployment.close()
    told = [r.getMessage() for r in caplog.records if r.name == "turnkit.deploy"]
    assert told == [NO_TOOLS]
    assert "the agent has no tools" in NO_TOOLS
    assert "set TURNKIT_MODULES=package.module:object" in NO_TOOLS
    assert done["messages"][-1].content == "Hello in words."
    (model,) = _deploy_app.MODELS
    assert [call["tools"] for call in model.calls] == [[]]  # offered none


@pytest.mark.slow  # a real langgraph dev, with its reloader, as a person starts it
def test_langgraph_dev_without_a_database_url_stops_in_one_line_not_in_its_reloader(tmp_path):
    from _serving import free_port
    from _studio import LANGGRAPH, offline_env

    config = {"dependencies": [str(TESTS.parent)], "graphs": {"agent": "turnkit.deploy.env:graph"},
              "http": {"app": "turnkit.deploy.env:app", "disable_mcp": True}}  # fmt: skip
    (tmp_path / "langgraph.json").write_text(json.dumps(config))
    done = subprocess.run([str(LANGGRAPH), "dev", "--no-browser", "--host", "127.0.0.1",
                           "--port", str(free_port())], cwd=tmp_path, env=offline_env(),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=90)  # fmt: skip  # waiting in its reloader: TimeoutExpired
    said = done.stdout + done.stderr
    told = [line for line in said.splitlines() if "TURNKIT_DATABASE_URL" in line]
    assert told == [
        f"turnkit: ConfigError: set TURNKIT_DATABASE_URL to the ledger: {ACCEPTED}; the server"
        " stops"
    ], said
    assert "Traceback" not in said
