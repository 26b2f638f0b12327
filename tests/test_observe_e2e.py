"""Held → decided → ran, as a collector sees it (docs/observe-traces.md): a key's write held by
one ``turnkit serve`` process, approved over REST through another on the same ledger (two
workers), every span exported over OTLP/HTTP to a local receiver because ``OTEL_*`` said so.

The saved trace ``docs/trace-held-decided-ran.json`` is such a run: this test checks that its
shape (names, kinds, services, parents and links by name) is what a fresh run exports, and
rewrites it when ``TURNKIT_SAVE_TRACE=1``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from _otlp_receiver import Received, Span, otlp_receiver
from _serving import free_port, wait_healthy
from test_cli import TURNKIT, env

pytestmark = pytest.mark.slow  # end to end: skip locally with -m 'not slow'

SAVED = Path(__file__).resolve().parent.parent / "docs" / "trace-held-decided-ran.json"
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TOOL = "catalogue.delete_product"  # danger "always": every call waits for a person


def turnkit(*args: str, cwd: Path) -> str:
    done = subprocess.run([TURNKIT, *args], cwd=cwd, env=env(), capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture
def serving(tmp_path) -> Iterator[Any]:
    """``serving(variables, *args)``: ``turnkit serve --demo *args`` with ``variables`` in its
    environment; ``stop(process)`` ends one with SIGTERM and waits for it."""
    started: list[subprocess.Popen[str]] = []

    def start(variables: dict[str, str], *args: str) -> tuple[str, subprocess.Popen[str]]:
        port = free_port()
        log_path = tmp_path / f"serve-{port}.log"
        process = subprocess.Popen([TURNKIT, "serve", "--demo", "--db", str(tmp_path / "t.sqlite"),
                                    "--catalogue", str(tmp_path / "catalogue.sqlite"),
                                    "--no-notify", "--port", str(port), *args],
                                   cwd=tmp_path, env={**env(), **variables},
                                   stdout=log_path.open("w"), stderr=subprocess.STDOUT,
                                   text=True, start_new_session=True)  # fmt: skip
        started.append(process)
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, process, log_path)
        return url, process

    yield start
    for process in started:
        stop(process)


def stop(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):  # it may have stopped already
        os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=30)


def story(received: Received, confirmation_id: str) -> list[Span]:
    """The spans of the held write's two traces, in the order they started."""
    with received.lock:
        spans = list(received.spans)
    (decide,) = [s for s in spans if s.name == f"decide {TOOL}"
                 and s.attributes.get("turnkit.confirmation.id") == confirmation_id]  # fmt: skip
    traces = {CALLER_TRACE, decide.trace_id}
    return sorted((s for s in spans if s.trace_id in traces), key=lambda s: s.start_ns)


def shape(spans: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The trace with its ids replaced by the names they point to."""
    names = {span["span_id"]: span["name"] for span in spans} | {CALLER_SPAN: "the caller's span"}
    return [
        (
            span["name"],
            span["kind"],
            span["service.name"],
            names.get(span["parent_span_id"]),
            sorted(names.get(link["span_id"], "?") for link in span["links"]),
        )
        for span in spans
    ]


def test_a_write_held_by_one_process_and_approved_in_another_is_one_story_in_the_collector(
    serving, tmp_path
):
    db = str(tmp_path / "t.sqlite")
    made = turnkit("keys", "create", "--user", "demo", "--scope", "catalogue.products:write",
                   "--json", "--db", db, cwd=tmp_path)  # fmt: skip
    writer = {"Authorization": f"Bearer {json.loads(made)['secret']}"}
    made = turnkit("keys", "create", "--user", "demo", "--scope", "system.confirmations:decide",
                   "--json", "--db", db, cwd=tmp_path)  # fmt: skip
    decider = {"Authorization": f"Bearer {json.loads(made)['secret']}"}
    with otlp_receiver() as (collector, received):
        exporting = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector, "OTEL_BSP_SCHEDULE_DELAY": "50"}
        holding, first = serving(exporting)
        # the second process batches for 5 s (the default): only its flush on stopping sends
        named = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector, "OTEL_SERVICE_NAME": "turnkit-approvals"}
        approving, second = serving(named, "--workers", "2")
        caller = {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"}  # the agent's own span
        held = httpx.post(f"{holding}/v1/tools/{TOOL}/invoke", json={"input": {"sku": "ACC-0001"}},
                          headers=writer | caller, timeout=30)  # fmt: skip
        assert held.status_code == 202, held.text
        confirmation_id = held.json()["id"]
        received.wait_for(lambda spans: any(s.name == f"hold {TOOL}" for s in spans))
        approved = httpx.post(f"{approving}/v1/confirmations/{confirmation_id}/approve",
                              headers=decider, timeout=30)  # fmt: skip
        assert approved.status_code == 200, approved.text
        assert approved.json()["status"] == "done"
        stop(second)
        stop(first)
        spans = story(received, confirmation_id)
    (banner, _) = sorted(tmp_path.glob("serve-*.log"), key=lambda p: p.stat().st_mtime)
    assert f"telemetry: traces → OTLP {collector}/v1/traces" in " ".join(banner.read_text().split())

    by_name: dict[str, list[Span]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    (request,) = by_name["POST /v1/tools/{name}/invoke"]
    (held_run, ran) = by_name[f"execute_tool {TOOL}"]
    (hold,) = by_name[f"hold {TOOL}"]
    (decide,) = by_name[f"decide {TOOL}"]
    (approval,) = by_name["POST /v1/confirmations/{confirmation_id}/approve"]
    # held: the caller's trace goes on through the first process's request to the hold
    assert (request.kind, request.trace_id, request.parent_span_id) == (
        "SERVER",
        CALLER_TRACE,
        CALLER_SPAN,
    )
    assert held_run.parent_span_id == request.span_id
    assert held_run.attributes["turnkit.outcome"] == "confirmation_required"
    assert hold.parent_span_id == held_run.span_id
    assert hold.attributes["turnkit.confirmation.id"] == confirmation_id
    # decided: in the second process, under its HTTP request, linked to the hold
    assert approval.kind == "SERVER"
    assert decide.parent_span_id == approval.span_id
    assert {(link["trace_id"], link["span_id"]) for link in decide.links} == {
        (CALLER_TRACE, hold.span_id)
    }
    assert decide.attributes["turnkit.decision"] == "approve"
    # ran: the decision's child, linked to the hold too
    assert ran.parent_span_id == decide.span_id
    assert ran.attributes["turnkit.outcome"] == "ok"
    assert [link["span_id"] for link in ran.links] == [hold.span_id]
    # each process names itself
    assert {s.resource["service.name"] for s in (request, held_run, hold)} == {"turnkit"}
    assert {s.resource["service.name"] for s in (approval, decide, ran)} == {"turnkit-approvals"}

    exported = [span.to_json() for span in spans]
    if os.environ.get("TURNKIT_SAVE_TRACE") == "1":
        about = (
            "One exported trace pair (tests/test_observe_e2e.py): a key's write held by one"
            " turnkit serve process (service turnkit), approved over REST through another"
            " (service turnkit-approvals) on the same ledger, as the local OTLP receiver"
            " decoded it. The decide span is a child of the second process's HTTP request and"
            " links to the hold span; the approved run is the decide span's child."
        )
        SAVED.write_text(json.dumps({"about": about, "spans": exported}, indent=2) + "\n")
    saved = json.loads(SAVED.read_text())["spans"]
    assert shape(saved) == shape(exported)
