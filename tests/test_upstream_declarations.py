"""What an upstream declares: names under its key, the MCP hints as annotations, default rights,
``tools=`` settings (an exact name before patterns), a schema outside the subset left out with
one warning naming why, and a handler identity of its own per upstream and tool."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from _upstream import ANN, ANN_KEY, NotesServer, notes_http, rights
from turnkit import ConfigError, Executor, McpUpstream, ModuleWarning, Registry
from turnkit.registry.declaration import (  # internal: no public name for these
    fingerprint,
    handler_ref,
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NotesServer]:
    with notes_http(tmp_path_factory.mktemp("notes-http")) as running:
        yield running


@pytest.fixture(scope="module")
def notes(server: NotesServer) -> Iterator[McpUpstream]:
    with McpUpstream("notes", url=server.url) as upstream:
        yield upstream


def test_each_tool_is_named_under_the_key_in_the_upstream_order(notes):
    assert Registry([notes]).names() == [
        "notes.read_note",
        "notes.write_note",
        "notes.wait_read",
        "notes.wait_write",
        "notes.fail_always",
        "notes.show_headers",
        "notes.get_picture",
        "notes.read_stats",
    ]


def test_hints_and_default_rights(notes):
    registry = Registry([notes])
    read, write = registry["notes.read_note"], registry["notes.write_note"]
    assert (read.title, read.description) == ("Read a note", "The text of a note.")
    assert (read.module, read.scope, read.permission) == ("notes", "notes.tools:read", "notes.read")
    assert read.annotations.read_only
    assert not read.annotations.destructive
    assert read.annotations.open_world  # the MCP default
    assert (write.scope, write.permission) == ("notes.tools:write", "notes.write")
    assert write.is_write
    assert write.annotations.destructive
    assert write.danger is None
    assert write.cost is None
    assert write.input_schema == {
        "type": "object",
        "properties": {"name": {"type": "string", "minLength": 1}, "text": {"type": "string"}},
        "required": ["name", "text"],
        "additionalProperties": False,
    }


def test_a_tool_outside_the_schema_subset_is_left_out_with_one_warning_the_rest_work(notes):
    registry = Registry([notes])
    [warning] = registry.warnings
    assert isinstance(warning, ModuleWarning)
    assert warning.module == "notes"
    [problem] = warning.problems
    assert problem.startswith("tool 'notes.pick_shape' ignored: input_schema:")
    assert "keyword 'anyOf' is not supported" in problem
    [(tool, why)] = notes.left_out
    assert tool == "pick_shape"
    assert "'anyOf'" in why
    executor = Executor(registry, permissions=rights())
    assert executor.execute(ANN, "notes.read_note", {"name": "welcome"})["status"] == "ok"


def test_tool_settings_take_the_exact_name_before_the_first_matching_pattern(server):
    tools = {
        "wait_*": {"danger": "always", "cost": 2, "permission": "notes.slow"},
        "*": {"description": "any tool"},
        "write_note": {"scope": "notes.notes:write", "permission": "notes.author"},
        "read_note": {"name": "fetch_note", "read_only": False},
    }
    with McpUpstream("notes", url=server.url, tools=tools) as upstream:
        registry = Registry([upstream])
    wait, write = registry["notes.wait_write"], registry["notes.write_note"]
    assert (wait.danger, wait.cost, wait.permission) == ("always", 2, "notes.slow")
    assert wait.description == "Log, sleep, answer."  # the first pattern only, not merged
    assert (write.scope, write.permission, write.danger) == (
        "notes.notes:write",
        "notes.author",
        None,
    )
    assert registry["notes.show_headers"].description == "any tool"
    fetch = registry["notes.fetch_note"]
    assert fetch.is_write
    assert fetch.scope == "notes.tools:write"
    assert "notes.read_note" not in registry


def test_danger_always_holds_a_key_write(server):
    tools = {"write_*": {"danger": "always"}}
    with McpUpstream("notes", url=server.url, tools=tools) as upstream:
        executor = Executor(Registry([upstream]), permissions=rights())
        answer = executor.execute(ANN_KEY, "notes.write_note", {"name": "k", "text": "t"})
    assert answer["status"] == "confirmation_required"


def test_a_renamed_tool_is_called_by_its_upstream_name(server):
    tools = {"read_note": {"name": "fetch_note"}}
    with McpUpstream("notes", url=server.url, tools=tools) as upstream:
        executor = Executor(Registry([upstream]), permissions=rights())
        answer = executor.execute(ANN, "notes.fetch_note", {"name": "welcome"})
    assert answer["result"] == "hello from the notes server"


def test_a_bad_override_leaves_only_that_tool_out_saying_why(server):
    tools = {"read_note": {"scope": "not a scope"}}
    with McpUpstream("notes", url=server.url, tools=tools) as upstream:
        registry = Registry([upstream])
        left_out = dict(upstream.left_out)
    assert "notes.read_note" not in registry
    assert "notes.write_note" in registry
    assert "scope: 'not a scope' must be" in left_out["read_note"]


def test_two_upstreams_tools_of_one_name_have_different_fingerprints(server):
    with (
        McpUpstream("notes", url=server.url) as notes,
        McpUpstream("notes", url=server.url) as again,
        McpUpstream("jotter", url=server.url) as other,
    ):
        ours = fingerprint(Registry([notes])["notes.write_note"])
        same = fingerprint(Registry([again])["notes.write_note"])
        theirs = fingerprint(Registry([other])["jotter.write_note"])
        handler = Registry([other])["jotter.write_note"].handler
    assert ours == same  # another process declaring the same upstream decides its holds
    assert ours != theirs
    assert "UpstreamCall(jotter:write_note)" in handler_ref(handler)


def test_parse_takes_a_url_or_a_command():
    url = McpUpstream.parse("files=http://127.0.0.1:9000/mcp", timeout=5)
    command = McpUpstream.parse("fs=npx -y @modelcontextprotocol/server-filesystem '/srv/my docs'")
    assert (url.key, url.target.url, url.timeout) == ("files", "http://127.0.0.1:9000/mcp", 5.0)
    assert (command.key, command.target.command) == (
        "fs",
        ("npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv/my docs"),
    )


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda: McpUpstream.parse("files"), "write NAME=URL"),
        (lambda: McpUpstream.parse("Files=http://x/mcp"), "upstream key 'Files'"),
        (lambda: McpUpstream("files"), "give either url="),
        (lambda: McpUpstream("files", url="ftp://x/mcp"), "must start with http://"),
        (lambda: McpUpstream("f", url="http://x/mcp", env={"A": "b"}), "env and cwd are for"),
        (lambda: McpUpstream("f", command=["x"], headers={"A": "b"}), "headers and token_env"),
        (lambda: McpUpstream("f", url="http://x/mcp", timeout=0), "timeout must be"),
        (lambda: McpUpstream("f", url="http://x/mcp", tools={"*": {"colour": 1}}), "'colour'"),
        (lambda: McpUpstream("f", url="http://x/mcp", tools={"*": {"name": "a_b"}}), "no pattern"),
    ],
)
def test_a_configuration_that_names_nothing_usable_raises_config_error(make, said):
    with pytest.raises(ConfigError, match=said.replace("(", r"\(")):
        make()


def test_the_repr_shows_no_credentials():
    upstream = McpUpstream("files", url="http://user:pw@127.0.0.1:9000/mcp?token=x")
    assert repr(upstream) == "McpUpstream('files', url='http://127.0.0.1:9000/mcp')"
