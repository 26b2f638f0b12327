"""Spans: ``execute_tool {tool}`` per call (GenAI conventions), a hold's span stored with its
confirmation, a decision's span linked to it, and the approved run under the decision.

Reaches ``turnkit.observe.spans`` for ``context_of`` checks (public through ``turnkit.observe``).
"""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry import trace

from _shop import prices
from turnkit import Caller, Decision, Executor, Registry, Tool
from turnkit.observe import configure, context_of


def by_name(spans, name):
    found = [s for s in spans if s.name == name]
    assert found, f"no span {name!r} in {[s.name for s in spans]}"
    return found


@pytest.fixture
def writes_held(executor):
    executor.ledger.set_setting("api_session_write_modules", ["shop"])


def test_a_read_is_one_execute_tool_span_with_the_conventions_attributes(executor, alice, traced):
    answer = executor.execute(alice, "shop.list_products", {}, thread="t-1")
    assert answer["status"] == "ok"
    (span,) = by_name(traced.stop(), "execute_tool shop.list_products")
    assert span.kind == trace.SpanKind.INTERNAL
    a = span.attributes
    assert a["gen_ai.operation.name"] == "execute_tool"
    assert a["gen_ai.tool.name"] == "shop.list_products"
    assert a["gen_ai.tool.type"] == "function"
    assert a["gen_ai.conversation.id"] == "t-1"
    assert a["gen_ai.tool.call.id"]
    assert a["turnkit.caller.kind"] == "session"
    assert a["turnkit.outcome"] == "ok"
    assert a["turnkit.replayed"] is False
    assert "error.type" not in a
    assert "gen_ai.tool.call.arguments" not in a  # not opted in
    assert "input.value" not in a


def test_a_refusal_sets_error_type_and_an_error_status(executor, alice, traced, writes_held):
    executor.execute(alice, "shop.set_prices", {"prices": [{"sku": "bad"}]})
    (span,) = by_name(traced.stop(), "execute_tool shop.set_prices")
    assert span.attributes["error.type"] == "invalid_input"
    assert span.attributes["turnkit.outcome"] == "error"
    assert span.status.status_code == trace.StatusCode.ERROR


def test_arguments_and_results_are_on_the_span_only_when_opted_in(executor, alice, traced):
    configure(capture_content=True)
    try:
        executor.execute(alice, "shop.list_products", {})
    finally:
        configure(capture_content=None)
    (span,) = by_name(traced.stop(), "execute_tool shop.list_products")
    assert span.attributes["gen_ai.tool.call.arguments"] == "{}"
    assert span.attributes["input.value"] == "{}"
    assert span.attributes["output.value"] == span.attributes["gen_ai.tool.call.result"]
    assert "TEA-0001" in span.attributes["output.value"]


def test_the_audit_row_carries_the_call_s_trace_id(executor, alice, traced):
    executor.execute(alice, "shop.list_products", {})
    (span,) = by_name(traced.stop(), "execute_tool shop.list_products")
    (row,) = executor.ledger.audit_rows(1)
    assert row["trace_id"] == f"{span.context.trace_id:032x}"


def test_held_decided_ran_is_one_linked_story(executor, alice, shop, traced, writes_held):
    outer = trace.get_tracer("test")
    with outer.start_as_current_span("request that held"):
        held = executor.execute(alice, "shop.set_prices", prices("TEA-0001"))
    cid = held["confirmation_id"]
    with outer.start_as_current_span("request that decided"):
        answer = executor.confirm(cid, alice, Decision.approve())
    assert answer["status"] == "ok"
    spans = traced.stop()
    first, ran = by_name(spans, "execute_tool shop.set_prices")
    (hold,) = by_name(spans, "hold shop.set_prices")
    (decide,) = by_name(spans, "decide shop.set_prices")
    holding_request, deciding_request = (
        by_name(spans, "request that held")[0],
        by_name(spans, "request that decided")[0],
    )
    # the hold: the held call's child, its context stored with the confirmation
    assert first.parent.span_id == holding_request.context.span_id
    assert hold.parent.span_id == first.context.span_id
    assert first.attributes["turnkit.outcome"] == "confirmation_required"
    assert first.attributes["turnkit.confirmation.id"] == cid
    stored = executor.ledger.get_confirmation(cid).trace_context
    assert context_of(stored).span_id == hold.context.span_id
    # the decision: the deciding request's child, linked to the hold
    assert decide.parent.span_id == deciding_request.context.span_id
    assert [link.context.span_id for link in decide.links] == [hold.context.span_id]
    assert decide.attributes["turnkit.decision"] == "approve"
    assert decide.attributes["turnkit.outcome"] == "ok"
    assert decide.attributes["turnkit.confirmation.waited_s"] >= 0
    # the run: the decision's child, linked to the hold too
    assert ran.parent.span_id == decide.context.span_id
    assert [link.context.span_id for link in ran.links] == [hold.context.span_id]
    assert ran.attributes["turnkit.outcome"] == "ok"


def test_a_rejection_is_a_decision_span_and_nothing_runs(executor, alice, traced, writes_held):
    cid = executor.execute(alice, "shop.set_prices", prices("TEA-0001"))["confirmation_id"]
    executor.confirm(cid, alice, Decision.reject("no"))
    spans = traced.stop()
    (decide,) = by_name(spans, "decide shop.set_prices")
    assert decide.attributes["turnkit.outcome"] == "rejected"
    assert len(by_name(spans, "execute_tool shop.set_prices")) == 1  # the hold's call only


def test_deciding_an_unknown_confirmation_is_a_decision_span_that_says_so(executor, alice, traced):
    executor.confirm("no-such-id", alice, "approve")
    (decide,) = by_name(traced.stop(), "decide")
    assert decide.attributes["error.type"] == "not_found"
    assert decide.links == ()


def test_the_async_drivers_trace_the_same_story(executor, alice, traced, writes_held):
    async def both():
        held = await executor.aexecute(alice, "shop.set_prices", prices("TEA-0001"))
        return await executor.aconfirm(held["confirmation_id"], alice, "approve")

    assert asyncio.run(both())["status"] == "ok"
    spans = traced.stop()
    (hold,) = by_name(spans, "hold shop.set_prices")
    (decide,) = by_name(spans, "decide shop.set_prices")
    ran = by_name(spans, "execute_tool shop.set_prices")[-1]
    assert ran.parent.span_id == decide.context.span_id
    assert [link.context.span_id for link in decide.links] == [hold.context.span_id]


class _Traced:
    """A module of two public reads whose handlers open spans of their own."""

    key = "t"

    def api_tools(self):
        inner = trace.get_tracer("handler")

        def work(input, ctx):
            with inner.start_as_current_span("inside the handler"):
                return {"ok": True}

        async def awork(input, ctx):
            with inner.start_as_current_span("inside the async handler"):
                return {"ok": True}

        read = {"read_only": True}
        return [
            Tool(name="t.read_sync", audience="public", handler=work, annotations=read),
            Tool(name="t.read_async", audience="public", handler=awork, annotations=read),
        ]


def test_a_handler_s_own_spans_nest_under_its_call(ledger, traced):
    executor = Executor(Registry([_Traced()]), ledger=ledger)
    try:
        executor.execute(Caller.public(), "t.read_sync", {})
        asyncio.run(executor.aexecute(Caller.public(), "t.read_async", {}))
    finally:
        executor.close()
    spans = traced.stop()
    for call, inside in (
        ("t.read_sync", "inside the handler"),
        ("t.read_async", "inside the async handler"),
    ):
        (span,) = by_name(spans, f"execute_tool {call}")
        (child,) = by_name(spans, inside)
        assert child.parent.span_id == span.context.span_id
