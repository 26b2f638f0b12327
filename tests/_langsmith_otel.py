"""A turn traced by LangSmith in OpenTelemetry mode and by turnkit, in this process: prints each
span as JSON (name, trace, span, parent). Run by tests/test_observe_langsmith.py.

LangSmith is the real client (``LANGSMITH_TRACING_MODE=otel``: its runs become OpenTelemetry
spans of this process's provider, nothing is sent to LangSmith; the endpoint is unreachable on
purpose). ``python _langsmith_otel.py LOG`` with ``--app-span`` to run the turn in a span of the
application's.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.update(
    LANGSMITH_TRACING="true",
    LANGSMITH_TRACING_MODE="otel",
    LANGSMITH_API_KEY="lsv2_pt_test_only",
    LANGSMITH_ENDPOINT="http://127.0.0.1:9",
)

from langchain_core.messages import HumanMessage
from langchain_core.tracers.langchain import wait_for_all_tracers
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from _shop import Shop
from turnkit import Caller, Executor, MemoryLedger, Registry, StaticPermissions
from turnkit.graph import TurnContext, build_turn_graph
from turnkit.testing import ScriptedModel

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

executor = Executor(
    Registry([Shop(Path(sys.argv[1]))]),
    ledger=MemoryLedger(),
    permissions=StaticPermissions({"alice": {"shop.view"}}),
)
read = {"name": "shop_list_products", "args": {}, "id": "r1"}
model = ScriptedModel([{"tool_calls": [read]}, "Done."])
graph = build_turn_graph(executor, model, checkpointer=InMemorySaver())
turn = (
    {"messages": [HumanMessage("go")]},
    {"configurable": {"thread_id": "t"}},
)
context = TurnContext(caller=Caller.session("alice"))
if "--app-span" in sys.argv:
    with trace.get_tracer("app").start_as_current_span("app"):
        graph.invoke(*turn, context=context)
else:
    graph.invoke(*turn, context=context)
wait_for_all_tracers()
from langsmith.run_trees import get_cached_client  # noqa: E402

get_cached_client().flush()
provider.force_flush()
for span in exporter.get_finished_spans():
    print(json.dumps({
        "name": span.name,
        "trace": f"{span.context.trace_id:032x}",
        "span": f"{span.context.span_id:016x}",
        "parent": None if span.parent is None else f"{span.parent.span_id:016x}",
    }))  # fmt: skip
executor.close()
