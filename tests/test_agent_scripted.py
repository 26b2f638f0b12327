"""``Agent("scripted")``: the scripted demo model by the name ``turnkit chat --model scripted``
and ``TURNKIT_MODEL=scripted`` take, offline (no key, no server)."""

from __future__ import annotations

from turnkit import Agent, Registry, Settings
from turnkit.demo import DEMO_CALLER, Catalogue, ScriptedDemoModel, demo_permissions
from turnkit.demo.model import CAN_DO  # internal: the answer the script gives to other questions


def test_an_agent_takes_the_scripted_demo_model_by_name_and_holds_its_price_write(tmp_path):
    registry = Registry([Catalogue(tmp_path / "catalogue.sqlite")])
    acts = Settings(api_session_write_modules=frozenset({"catalogue"}))
    with Agent("scripted", registry=registry, permissions=demo_permissions(),
               caller=DEMO_CALLER, settings=acts) as agent:  # fmt: skip
        assert isinstance(agent.model, ScriptedDemoModel)
        held = agent.prompt("make the first product cheaper")
        (pending,) = held.pending
        assert pending.tool == "catalogue.set_prices"
        done = agent.confirm({pending.id: "approve"})
    assert "Done: I changed the price of ACC-0001 from 7.03 to 6.33." in done.content


def test_the_scripted_model_alone_says_what_it_can_do(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with Agent("scripted") as agent:
        answer = agent.prompt("what's the weather in Lisbon?")
    assert CAN_DO in answer.content


def test_a_provider_prefix_names_a_real_model_called_scripted(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    with Agent("openai:scripted") as agent:
        assert not isinstance(agent.model, ScriptedDemoModel)
