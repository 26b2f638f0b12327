"""Observing from the doors a person uses: a decision made at the terminal is exported like one
made over REST (linked to its hold), and ``turnkit serve`` writes a line per call and decision —
readable by default, JSON with ``--log-format json`` — with the trace id, never the arguments."""

from __future__ import annotations

import json
import subprocess
import time

import httpx
import pytest

from _otlp_receiver import otlp_receiver
from test_cli import TURNKIT, env
from test_observe_e2e import TOOL, serving, stop, turnkit

pytestmark = pytest.mark.slow  # real servers and commands in processes of their own

__all__ = ["serving"]  # the fixture, used here


def writer_key(tmp_path) -> dict[str, str]:
    made = turnkit("keys", "create", "--user", "demo", "--scope", "catalogue.products:write",
                   "--json", "--db", str(tmp_path / "t.sqlite"), cwd=tmp_path)  # fmt: skip
    return {"Authorization": f"Bearer {json.loads(made)['secret']}"}


def test_an_approval_at_the_terminal_is_exported_linked_to_its_hold(serving, tmp_path):
    key = writer_key(tmp_path)
    with otlp_receiver() as (collector, received):
        exporting = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector, "OTEL_BSP_SCHEDULE_DELAY": "50"}
        url, process = serving(exporting)
        held = httpx.post(f"{url}/v1/tools/{TOOL}/invoke", json={"input": {"sku": "ACC-0001"}},
                          headers=key, timeout=30)  # fmt: skip
        assert held.status_code == 202, held.text
        cid = held.json()["id"]
        (hold,) = [s for s in received.wait_for(lambda spans: any(
            s.name == f"hold {TOOL}" for s in spans)) if s.name == f"hold {TOOL}"]  # fmt: skip
        done = subprocess.run(
            [TURNKIT, "confirmations", "approve", cid, "--demo", "--db", str(tmp_path / "t.sqlite"),
             "--catalogue", str(tmp_path / "catalogue.sqlite")],
            cwd=tmp_path, env={**env(), "OTEL_EXPORTER_OTLP_ENDPOINT": collector,
                               "OTEL_SERVICE_NAME": "turnkit-cli"},
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        spans = received.wait_for(lambda spans: any(s.name == f"decide {TOOL}" for s in spans))
        stop(process)
    (decide,) = [s for s in spans if s.name == f"decide {TOOL}"]
    (ran,) = [s for s in spans if s.parent_span_id == decide.span_id]
    assert [link["span_id"] for link in decide.links] == [hold.span_id]
    assert decide.attributes["turnkit.decider.kind"] == "session"
    assert decide.resource["service.name"] == "turnkit-cli"
    assert ran.name == f"execute_tool {TOOL}"
    assert ran.attributes["turnkit.outcome"] == "ok"


@pytest.mark.parametrize("form", ["text", "json"])
def test_serve_writes_a_line_per_call_and_decision_with_the_trace_id(serving, tmp_path, form):
    key = writer_key(tmp_path)
    with otlp_receiver() as (collector, _):  # traced: the caller's trace goes on through it
        url, process = serving({"OTEL_EXPORTER_OTLP_ENDPOINT": collector}, "--log-format", form)
        text = _held_and_logged(url, key, tmp_path)
        stop(process)  # while the collector listens: its last spans are sent, not retried
    assert "ACC-0001" not in text  # no arguments unless content capture is on
    if form == "text":
        assert f"call {TOOL} confirmation_required by key:" in text
        assert f"trace {'ab' * 16}" in text
    else:
        (line,) = [json.loads(x) for x in text.splitlines() if x.startswith("{") and '"call"' in x]
        assert (line["event"], line["tool"]) == ("call", TOOL)
        assert line["status"] == "confirmation_required"
        assert line["trace_id"] == "ab" * 16
        assert line["confirmation_id"]


def _held_and_logged(url: str, key: dict[str, str], tmp_path) -> str:
    held = httpx.post(
        f"{url}/v1/tools/{TOOL}/invoke",
        json={"input": {"sku": "ACC-0001"}},
        headers=key | {"traceparent": f"00-{'ab' * 16}-{'cd' * 8}-01"},
        timeout=30,
    )
    assert held.status_code == 202, held.text
    log = next(tmp_path.glob("serve-*.log"))
    for _ in range(100):  # the line is written as the answer goes out
        text = log.read_text()
        if f"call {TOOL}" in text:
            break
        time.sleep(0.05)
    return text


def test_a_wrong_log_format_is_refused_with_what_to_give(tmp_path):
    done = subprocess.run([TURNKIT, "serve", "--demo", "--log-format", "xml"], cwd=tmp_path,
                          env=env(), capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2
    assert "give text, json or off" in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
