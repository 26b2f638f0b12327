"""Every code block of the README runs as written.

Each ``python`` block runs on its own, in a fresh process and an empty folder, as a user who copies
it would run it. A block that names an OpenAI model talks to the local scripted OpenAI-compatible
server (``OPENAI_BASE_URL``), which answers any question by calling the first tool offered and then
saying what it returned. Each ``sh`` block is run where it is cheap, or by the test named beside
it in ``SHELL``; a new ``sh`` block fails here until it is given one.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _openai_server import OpenAIServer, call, reply

pytestmark = pytest.mark.slow  # end to end: skip locally with -m 'not slow'

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks(language: str) -> list[tuple[str, str]]:
    """``(heading, code)`` of every block in ``language``, the heading being the last one above."""
    found = []
    for match in FENCE.finditer(README):
        if match.group(1) != language:
            continue
        headings = re.findall(r"^#+ (.+)$|^\*\*(\d+\. [^*]+)\*\*", README[: match.start()], re.M)
        heading = next((h or b for h, b in reversed(headings)), "top")
        found.append((heading.strip(), match.group(2)))
    return found


SERVED = "Serve your tools: REST and MCP"
"""The section whose blocks talk to a running ``turnkit serve``: tests/test_readme_serve.py runs
them all, in order, against one."""
PYTHON = [(heading, code) for heading, code in blocks("python") if heading != SERVED]
SHELL = {
    "Two commands": "tests/test_cli.py::"
    "test_ci_runs_the_readme_commands_which_install_what_ci_checks_and_run_every_test",
    "4. Studio.": "tests/test_studio.py::"
    "test_a_studio_turn_holds_the_write_and_applies_it_once_on_resume",
    SERVED: "tests/test_readme_serve.py::test_the_serve_section_runs_as_written",
    "Approvals": "tests/test_readme_serve.py::test_the_approvals_section_runs_as_written",
    "Retention": "tests/test_retention.py::test_the_retention_section_runs_as_written",
    "At the terminal: read one, decide many": "tests/test_cli_bulk_decide.py::"
    "test_the_terminal_section_runs_as_written",
    "What people decided: the approval report": "tests/test_approval_report.py::"
    "test_the_report_section_runs_as_written",
    "Notifications": "tests/test_notify_cli.py::test_the_notifications_section_runs_as_written",
    "The audit: query and export": "tests/test_audit_cli.py::"
    "test_the_audit_section_runs_as_written",
}
"""The test that runs each ``sh`` block (by the README heading above it): it must exist, and its
file (or a ``tests/_helper`` module it imports) must set every variable and pass every ``--flag``
the block does."""


def answer_anything(body: dict[str, Any]) -> Any:
    """Call the first tool offered, filling its required strings from the question; then say
    what the tool returned."""
    messages = body["messages"]
    last = messages[-1]
    if last["role"] == "tool":
        return f"Here is what I found: {last['content']}"
    tools = body.get("tools") or []
    if not tools:
        return "Hello."
    function = tools[0]["function"]
    words = re.findall(r"[A-Z][a-z]+", str(last.get("content")))
    schema = function["parameters"]
    args = {
        name: words[-1] if words else "x"
        for name in schema.get("required", [])
        if schema["properties"][name].get("type") == "string"
    }
    return reply(tool_calls=[call(function["name"], json.dumps(args))])


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer([answer_anything] * 50) as running:
        yield running
    assert running.errors == []


@pytest.mark.parametrize(("heading", "code"), PYTHON, ids=[h for h, _ in PYTHON])
def test_a_python_block_runs_as_written(heading, code, tmp_path, server):
    (tmp_path / "block.py").write_text(code)
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TURNKIT_"))}
    env = {**keep, "OPENAI_BASE_URL": server.url, "LANGSMITH_TRACING": "false"}
    done = subprocess.run(
        [sys.executable, "block.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, f"the block under {heading!r} failed:\n{done.stderr[-3000:]}"
    assert done.stdout.strip(), f"the block under {heading!r} printed nothing"


def test_the_readme_has_python_blocks_and_every_shell_block_is_run_somewhere():
    assert len(PYTHON) >= 5
    unknown = [heading for heading, _ in blocks("sh") if heading not in SHELL]
    assert unknown == [], f"give these README sh blocks a test, and a line in SHELL: {unknown}"


@pytest.mark.parametrize("heading", sorted(SHELL))
def test_the_test_named_for_a_shell_block_exists_and_runs_it_as_written(heading):
    code = "\n".join(code for above, code in blocks("sh") if above == heading)
    path, _, name = SHELL[heading].partition("::")
    source = (ROOT / path).read_text()
    assert f"def {name}(" in source, f"SHELL names {SHELL[heading]!r}, which does not exist"
    for helper in re.findall(r"^from (_[a-z]\w*) import", source, re.M):  # e.g. _studio's launch()
        source += (ROOT / "tests" / f"{helper}.py").read_text()
    if "blocks(" in source:
        return  # it runs the README's own text: nothing to copy
    variables = re.findall(r"\b([A-Z][A-Z0-9_]+)=(\S+)", code)
    flags = re.findall(r"(?<!\S)(--[a-z][a-z-]*)", code)
    missing = [f"{k}={v}" for k, v in variables if not re.search(rf"{k}\W+{v}\b", source)]
    missing += [flag for flag in flags if f'"{flag}"' not in source]
    assert missing == [], f"{path} does not run the block under {heading!r} with {missing}"
