"""A small MCP server for turnkit's upstream tests, built on the SDK's own low-level ``Server``.

    python notes.py stdio            serve over stdin and stdout
    python notes.py http PORT        serve Streamable HTTP on 127.0.0.1:PORT at /mcp

Its tools, chosen to exercise what ``turnkit.upstream`` maps:

- ``read_note`` (``readOnlyHint``): the text of a note, or ``isError`` when there is none.
- ``write_note`` (no hints: a write): appends one JSON line to the file ``NOTES_LOG`` names
  (the note, its text and the ``_meta`` the call carried), so a test counts the runs.
- ``wait_read`` (read-only) and ``wait_write`` (a write, logged like ``write_note`` *before* it
  sleeps): sleep ``seconds``, for the timeout tests; ``label`` tells the calls apart.
- ``pick_shape``: an ``anyOf`` schema, outside turnkit's subset.
- ``fail_always``: answers ``isError`` with a text the model can read.
- ``show_headers`` (read-only): the ``x-team`` and ``authorization`` headers of the request.
- ``get_picture`` (read-only): one image and one text block.
- ``read_stats`` (read-only): a text block holding JSON, and structured content.

When the file ``NOTES_SCHEMA`` names exists and holds ``2``, ``write_note`` requires a ``tag``
too (its schema changed). ``NOTES_PID`` names a file the server writes its pid to.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from starlette.requests import Request

NOTES = {"welcome": "hello from the notes server"}


def _schema_version() -> int:
    path = os.environ.get("NOTES_SCHEMA")
    if path and Path(path).exists() and Path(path).read_text().strip() == "2":
        return 2
    return 1


def _write_note_schema() -> dict[str, Any]:
    properties: dict[str, Any] = {
        "name": {"type": "string", "minLength": 1},
        "text": {"type": "string"},
    }
    required = ["name", "text"]
    if _schema_version() == 2:
        properties["tag"] = {"type": "string"}
        required.append("tag")
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _tools() -> list[types.Tool]:
    read = types.ToolAnnotations(read_only_hint=True)
    seconds = {
        "type": "object",
        "properties": {"seconds": {"type": "number"}, "label": {"type": "string"}},
        "required": ["seconds", "label"],
    }
    empty = {"type": "object", "properties": {}}
    return [
        types.Tool(
            name="read_note",
            title="Read a note",
            description="The text of a note.",
            input_schema={
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
            annotations=read,
        ),
        types.Tool(
            name="write_note", description="Save a note.", input_schema=_write_note_schema()
        ),
        types.Tool(
            name="wait_read",
            description="Sleep, then answer.",
            input_schema=seconds,
            annotations=read,
        ),
        types.Tool(name="wait_write", description="Log, sleep, answer.", input_schema=seconds),
        types.Tool(
            name="pick_shape",
            description="A schema outside turnkit's subset.",
            input_schema={
                "type": "object",
                "properties": {"shape": {"anyOf": [{"type": "string"}, {"type": "number"}]}},
            },
            annotations=read,
        ),
        types.Tool(
            name="fail_always", description="Always fails.", input_schema=empty, annotations=read
        ),
        types.Tool(
            name="show_headers",
            description="Request headers.",
            input_schema=empty,
            annotations=read,
        ),
        types.Tool(
            name="get_picture", description="A picture.", input_schema=empty, annotations=read
        ),
        types.Tool(
            name="read_stats", description="Stats as JSON.", input_schema=empty, annotations=read
        ),
    ]


def _log(entry: dict[str, Any]) -> None:
    with open(os.environ["NOTES_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


async def list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=_tools())


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    meta = json.loads(json.dumps(dict(params.meta or {}), default=str))
    name = params.name
    if name == "read_note":
        note = NOTES.get(args.get("name", ""))
        if note is None:
            return _text(f"no note {args.get('name')!r}; try 'welcome'", error=True)
        return _text(note)
    if name == "write_note":
        NOTES[args["name"]] = args["text"]
        _log({"tool": name, "args": args, "meta": meta})
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="saved")],
            structured_content={"saved": args["name"]},
        )
    if name in ("wait_read", "wait_write"):
        if name == "wait_write":
            _log({"tool": name, "args": args, "meta": meta})
        await anyio.sleep(float(args["seconds"]))
        return _text("woke up")
    if name == "fail_always":
        return _text("the disk is full; free some space and try again", error=True)
    if name == "show_headers":
        request = getattr(ctx, "request", None)
        headers = request.headers if isinstance(request, Request) else {}
        return types.CallToolResult(
            content=[],
            structured_content={
                "x_team": headers.get("x-team"),
                "authorization": headers.get("authorization"),
            },
        )
    if name == "get_picture":
        data = base64.b64encode(b"\x89PNG" + b"\0" * 96).decode()
        return types.CallToolResult(
            content=[
                types.ImageContent(type="image", data=data, mime_type="image/png"),
                types.TextContent(type="text", text="a tiny picture"),
            ]
        )
    if name == "read_stats":
        return _text(json.dumps({"notes": len(NOTES), "version": _schema_version()}))
    return _text(f"unknown tool {name!r}", error=True)


def main() -> None:
    if path := os.environ.get("NOTES_PID"):
        Path(path).write_text(str(os.getpid()))
    server: Server[Any] = Server("notes", on_list_tools=list_tools, on_call_tool=call_tool)
    if sys.argv[1] == "stdio":
        from mcp.server.stdio import stdio_server

        async def serve() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(serve)
        return
    import uvicorn

    app = server.streamable_http_app(json_response=True, stateless_http=True)
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")


if __name__ == "__main__":
    main()
