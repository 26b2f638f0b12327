"""The site's blocks that are not programs still say true things: every ``json`` block parses,
every ``yaml`` block parses (the Prometheus scrape config asks for the path turnkit serves), and
every ``text`` block of environment settings asks ``turnkit serve`` for what it says — the
variables parse into an export plan, and the extras a ``pip install`` line names exist."""

from __future__ import annotations

import json
import re
import shlex
import tomllib

import yaml

from test_docs_blocks import ROOT, all_blocks
from turnkit.observe import plan_export

EXTRAS = set(
    tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
)
CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def settings_groups(code: str) -> list[dict[str, str]]:
    """The environment each run of lines sets (a blank or comment line ends a run); a line
    ``A=1 B=2 turnkit serve ...`` sets A and B."""
    groups: list[dict[str, str]] = [{}]
    for line in code.splitlines():
        if not line.strip() or line.startswith("#"):
            groups.append({})
            continue
        if line.startswith("pip install"):
            continue
        for word in shlex.split(line):
            name, equals, value = word.partition("=")
            if not equals or not re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
                break
            groups[-1][name] = value
    return [group for group in groups if group]


def test_every_json_block_parses():
    found = all_blocks("json")
    assert len(found) >= 2  # the serve guide's and the LangGraph server's langgraph.json
    for block in found:
        json.loads(block.code)


def test_every_yaml_block_parses_and_scrapes_the_path_turnkit_serves():
    (scrape,) = all_blocks("yaml")
    config = yaml.safe_load(scrape.code)
    assert config["scrape_configs"][0]["metrics_path"] == "/metrics"


def test_every_text_block_of_settings_asks_for_what_it_says():
    texts = all_blocks("text")
    assert texts, "the observe pages show their settings in text blocks"
    groups = [group for block in texts for group in settings_groups(block.code)]
    for block in texts:
        for extra in re.findall(r"pip install 'turnkit\[(\w+)\]'", block.code):
            assert extra in EXTRAS, f"{block.page} installs an extra that does not exist: {extra}"
    exporting = [group for group in groups if CAPTURE not in group]
    assert len(exporting) >= 5
    for group in exporting:
        plan = plan_export(group)
        assert plan.problem is None, (group, plan.problem)
        assert plan.traces == "otlp", group
        if group.get("OTEL_METRICS_EXPORTER") == "none":
            assert plan.metrics is None, group
    capture = [group for group in groups if CAPTURE in group]
    assert capture
    assert all(group[CAPTURE] == "true" for group in capture)
