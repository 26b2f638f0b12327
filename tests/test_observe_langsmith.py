"""turnkit's spans and LangSmith's, in OpenTelemetry mode, with the real LangSmith client.

LangSmith (``LANGSMITH_TRACING_MODE=otel``) turns a LangGraph run into spans once the run has
ended, parented on the span that was current when it began; it makes no span current while a
node runs. So a turn run inside a span of the application's (a request's, a job's) is one trace:
LangSmith's run and turnkit's ``execute_tool`` are both that span's children. Each case runs in
a process of its own (a process sets its tracer provider and LangSmith its client once).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # two fresh interpreters that import LangGraph and LangSmith

SCRIPT = Path(__file__).with_name("_langsmith_otel.py")


def spans(tmp_path, *flags: str) -> list[dict]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "writes.jsonl"), *flags],
        capture_output=True, text=True, timeout=120, cwd=SCRIPT.parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_in_an_application_span_langsmith_s_run_and_turnkit_s_calls_are_one_trace(tmp_path):
    found = spans(tmp_path, "--app-span")
    (app,) = [s for s in found if s["name"] == "app"]
    (call,) = [s for s in found if s["name"] == "execute_tool shop.list_products"]
    (run,) = [s for s in found if s["name"] == "turnkit"]  # LangSmith's span of the graph's run
    assert [s for s in found if s["name"] == "execute"]  # and of the execute node
    assert {s["trace"] for s in found} == {app["trace"]}
    assert call["parent"] == run["parent"] == app["span"]


def test_without_one_turnkit_s_call_is_a_trace_of_its_own_not_a_broken_child(tmp_path):
    found = spans(tmp_path)
    (call,) = [s for s in found if s["name"] == "execute_tool shop.list_products"]
    assert call["parent"] is None
    assert [s for s in found if s["name"] == "execute"]
