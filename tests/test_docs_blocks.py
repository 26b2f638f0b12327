"""Every code block of the README and of every page of the docs site runs as written.

Each ``python`` block runs on its own, in a fresh process and an empty folder, as a user who copies
it would run it. A block that names an OpenAI model talks to the local scripted OpenAI-compatible
server (``OPENAI_BASE_URL``), which answers any question by calling the first tool offered and then
saying what it returned. Each ``sh`` block is run where it is cheap, or by the test named beside
it in ``SHELL``; a new ``sh`` block fails here until it is given one. Blocks in other languages
(``json``, ``text``, ...) are read by the tests that use them, or are output shown to the reader.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from _openai_server import OpenAIServer, call, reply

pytestmark = pytest.mark.slow  # end to end: skip locally with -m 'not slow'

ROOT = Path(__file__).resolve().parent.parent
SITE = sorted(page for page in (ROOT / "docs").rglob("*.md") if "_hooks" not in page.parts)
PAGES = [ROOT / "README.md", *SITE]
"""The README and every page of the site (``docs/``; not the hooks' folder ``docs/_hooks``)."""
FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
"""A fenced block: its language, its attributes (``title="shop.py"``: a file a page's commands
use, not a program of its own) and its code."""
FILES = {
    "docs/guides/own-module.md": "tests/test_docs_own_module.py",
    "docs/guides/upstream-mcp.md": "tests/test_docs_upstream.py",
}
"""The pages whose blocks with a ``title`` are files, and the test that saves and uses them."""
HEADING = re.compile(r"^#+ (.+)$|^\*\*(\d+\. [^*]+)\*\*", re.MULTILINE)


class Block(NamedTuple):
    page: str  # relative to the repository, e.g. "docs/guides/serve.md"
    heading: str  # the last heading above the block (a "**1. Step.**" counts), or "top"
    code: str


def page_blocks(language: str, page: Path) -> list[Block]:
    """Every block in ``language`` on ``page``, with the heading above it (fenced code, whose
    ``# comments`` look like headings, is not searched for headings)."""
    text = page.read_text()
    prose = FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)  # same offsets
    name = str(page.relative_to(ROOT))
    found = []
    for match in FENCE.finditer(text):
        if match.group(1) != language or match.group(2).strip():
            continue
        headings = HEADING.findall(prose[: match.start()])
        heading = next((h or b for h, b in reversed(headings)), "top")
        found.append(Block(name, heading.strip(), match.group(3)))
    return found


def all_blocks(language: str) -> list[Block]:
    return [block for page in PAGES for block in page_blocks(language, page)]


def blocks(language: str) -> list[tuple[str, str]]:
    """``(heading, code)`` of every block in ``language`` on every page: the tests that run one
    section's blocks find them by heading, which is unique across the site."""
    return [(block.heading, block.code) for block in all_blocks(language)]


SERVED = "Serve your tools: REST and MCP"
"""The section whose blocks talk to a running ``turnkit serve``: tests/test_docs_serve.py runs
them all, in order, against one."""
PYTHON = [block for block in all_blocks("python") if block.heading != SERVED]
CI_COMMANDS = (
    "tests/test_cli.py::"
    "test_ci_runs_the_readme_commands_which_install_what_ci_checks_and_run_every_test"
)
SHELL = {
    "Two commands": CI_COMMANDS,
    "Install and run": CI_COMMANDS,  # docs/get-started.md: the README's, word for word (below)
    "Run the tests": CI_COMMANDS,
    "What a caller sees": "tests/test_docs_own_module.py::test_the_guide_runs_as_written",
    "A held write, decided at the terminal": "tests/test_docs_own_module.py::"
    "test_the_guide_runs_as_written",
    "Studio": "tests/test_studio.py::"
    "test_a_studio_turn_holds_the_write_and_applies_it_once_on_resume",
    SERVED: "tests/test_docs_serve.py::test_the_serve_section_runs_as_written",
    "Approvals": "tests/test_docs_serve.py::test_the_approvals_section_runs_as_written",
    "Retention": "tests/test_retention.py::test_the_retention_section_runs_as_written",
    "At the terminal: read one, decide many": "tests/test_cli_bulk_decide.py::"
    "test_the_terminal_section_runs_as_written",
    "What people decided: the approval report": "tests/test_approval_report.py::"
    "test_the_report_section_runs_as_written",
    "Notifications": "tests/test_notify_cli.py::test_the_notifications_section_runs_as_written",
    "The audit: query and export": "tests/test_audit_cli.py::"
    "test_the_audit_section_runs_as_written",
    "Load-test your own server": "tests/test_cli_bench.py::"
    "test_the_load_test_section_runs_as_written",  # and its fixture serves the first block
    **dict.fromkeys(
        [
            "1. Install it, and give it a folder.",
            "3. See what it offers.",
            "4. Make two keys and serve.",
            "5. Call it.",
        ],
        "tests/test_docs_upstream.py::test_the_guide_runs_as_written",
    ),
}
"""The test that runs each ``sh`` block (by the heading above it): it must exist, and its
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


@pytest.mark.parametrize("block", PYTHON, ids=[f"{b.page}: {b.heading}" for b in PYTHON])
def test_a_python_block_runs_as_written(block, tmp_path, server):
    heading, code = f"{block.page}: {block.heading}", block.code
    (tmp_path / "block.py").write_text(code)
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TURNKIT_"))}
    env = {**keep, "OPENAI_BASE_URL": server.url, "LANGSMITH_TRACING": "false"}
    done = subprocess.run(
        [sys.executable, "block.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, f"the block under {heading!r} failed:\n{done.stderr[-3000:]}"
    assert done.stdout.strip(), f"the block under {heading!r} printed nothing"


def test_the_pages_have_python_blocks_and_every_shell_block_is_run_somewhere():
    assert len(PYTHON) >= 5
    unknown = [f"{b.page}: {b.heading}" for b in all_blocks("sh") if b.heading not in SHELL]
    assert unknown == [], f"give these sh blocks a test, and a line in SHELL: {unknown}"


def test_headings_with_blocks_are_unique_across_the_site():
    """A test finds a section's blocks by its heading: two pages with one heading would mix them."""
    where: dict[str, set[str]] = {}
    for language in ("python", "sh", "json"):
        for block in all_blocks(language):
            where.setdefault(block.heading, set()).add(block.page)
    shared = {heading: sorted(pages) for heading, pages in where.items() if len(pages) > 1}
    assert shared == {}, f"these headings hold blocks on more than one page: {shared}"


@pytest.mark.parametrize("heading", sorted(SHELL))
def test_the_test_named_for_a_shell_block_exists_and_runs_it_as_written(heading):
    code = "\n".join(code for above, code in blocks("sh") if above == heading)
    path, _, name = SHELL[heading].partition("::")
    source = (ROOT / path).read_text()
    assert f"def {name}(" in source, f"SHELL names {SHELL[heading]!r}, which does not exist"
    for helper in re.findall(r"^from (_[a-z]\w*) import", source, re.M):  # e.g. _studio's launch()
        source += (ROOT / "tests" / f"{helper}.py").read_text()
    if "blocks(" in source:  # it runs the page's own text: it must read this section, or page
        pages = {b.page for b in all_blocks("sh") if b.heading == heading}
        stems = {Path(page).stem for page in pages}  # e.g. "own-module": the test reads the page
        named = heading[:15] in source or any(stem in source for stem in stems)
        assert named, f"{path} reads blocks, but not those under {heading!r}"
        return
    variables = re.findall(r"\b([A-Z][A-Z0-9_]+)=(\S+)", code)
    flags = re.findall(r"(?<!\S)(--[a-z][a-z-]*)", code)
    missing = [f"{k}={v}" for k, v in variables if not re.search(rf"{k}\W+{v}\b", source)]
    missing += [flag for flag in flags if f'"{flag}"' not in source]
    assert missing == [], f"{path} does not run the block under {heading!r} with {missing}"


def test_get_started_gives_the_readmes_two_commands_word_for_word():
    """CI runs the README's two commands; the site's first page must not drift from them."""
    readme = [b.code for b in page_blocks("sh", ROOT / "README.md") if b.heading == "Two commands"]
    page = ROOT / "docs" / "get-started.md"
    steps = ("Install and run", "Run the tests")
    site = [b.code for b in page_blocks("sh", page) if b.heading in steps]
    assert readme == site


def test_a_block_with_attributes_is_a_file_a_named_test_uses():
    """A ``python title="..."`` block is not run on its own: only on a page whose test saves it."""
    titled = [
        (str(page.relative_to(ROOT)), match.group(2).strip())
        for page in PAGES
        for match in FENCE.finditer(page.read_text())
        if match.group(2).strip()
    ]
    assert titled, "docs/guides/own-module.md shows its files as titled blocks"
    for page, attributes in titled:
        assert page in FILES, f"{page}: a block with {attributes} that no test runs"
        assert Path(page).stem in (ROOT / FILES[page]).read_text(), f"{FILES[page]} reads {page}"


def test_the_readme_is_short_and_links_into_the_site():
    """The README says what, why, the two commands, one example and the hold rule; the rest is
    on the site, where its links lead."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 250
    linked = set(re.findall(r"\]\((docs/[\w/.-]+\.md)", text))
    assert {"docs/get-started.md", "docs/concepts/hold-rule.md", "docs/reference/api.md"} <= linked
    assert [page for page in linked if not (ROOT / page).exists()] == []
