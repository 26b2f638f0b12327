"""One structured log line per call and per decision, with its trace id; JSON when asked;
never the arguments unless content capture is on."""

from __future__ import annotations

import json
import logging

import pytest

from _shop import prices
from turnkit.observe import JsonFormatter, configure, use_json_logs


@pytest.fixture
def lines(caplog):
    caplog.set_level(logging.INFO, logger="turnkit.calls")
    return caplog


def fields(caplog):
    return [r.turnkit for r in caplog.records if r.name == "turnkit.calls"]


def test_a_call_and_a_decision_each_write_one_line_with_the_trace_id(
    executor, alice, lines, traced
):
    executor.ledger.set_setting("api_session_write_modules", ["shop"])
    cid = executor.execute(alice, "shop.set_prices", prices("TEA-0001"))["confirmation_id"]
    executor.confirm(cid, alice, "approve")
    spans = traced.stop()
    held, ran, decision = fields(lines)  # the decision ends once its run has
    assert held["event"] == "call"
    assert held["status"] == "confirmation_required"
    assert held["confirmation_id"] == cid
    assert held["caller"] == "session:alice"
    assert decision == {
        "event": "decision",
        "tool": "shop.set_prices",
        "confirmation_id": cid,
        "decision": "approve",
        "decider": "session:alice",
        "outcome": "ok",
        "trace_id": decision["trace_id"],
    }
    assert ran["status"] == "ok"
    decide = next(s for s in spans if s.name == "decide shop.set_prices")
    assert decision["trace_id"] == ran["trace_id"] == f"{decide.context.trace_id:032x}"
    assert all("arguments" not in line for line in fields(lines))
    assert "TEA-0001" not in lines.text


def test_arguments_are_logged_only_when_content_capture_is_on(executor, alice, lines):
    configure(capture_content=True)
    try:
        executor.execute(alice, "shop.list_products", {"query": "tea"})
    finally:
        configure(capture_content=None)
    (line,) = fields(lines)
    assert json.loads(line["arguments"]) == {"query": "tea"}


def test_a_refusal_line_names_its_code(executor, alice, lines):
    executor.execute(alice, "shop.no_such_tool", {})
    (line,) = fields(lines)
    assert (line["status"], line["code"]) == ("error", "not_found")
    assert "not_found" in lines.records[-1].getMessage()


def test_nothing_is_formatted_when_the_logger_is_off(executor, alice, caplog):
    caplog.set_level(logging.WARNING, logger="turnkit.calls")
    executor.execute(alice, "shop.list_products", {})
    assert fields(caplog) == []


def test_json_lines_carry_the_fields(executor, alice, capsys):
    handler = use_json_logs()
    try:
        executor.execute(alice, "shop.list_products", {})
    finally:
        logging.getLogger("turnkit").removeHandler(handler)
    (line,) = [json.loads(x) for x in capsys.readouterr().err.splitlines() if '"call"' in x]
    assert line["logger"] == "turnkit.calls"
    assert line["event"] == "call"
    assert line["tool"] == "shop.list_products"
    assert line["status"] == "ok"
    assert "trace_id" in line
    assert line["message"].startswith("call shop.list_products ok by session:alice in ")
    assert isinstance(JsonFormatter(), logging.Formatter)
