"""An upstream's ``tools/call`` result as a turnkit answer.

- ``isError: true``: ``ToolError`` with the upstream's text, so the model reads it and can act.
- ``structuredContent``: the result, as the upstream gave it.
- otherwise the content: one text block is the result as text, or as the JSON value it holds
  when it is a JSON object or array (what a model reads either way, without escaped quotes);
  no block is ``None``; several blocks, or any that is not text, are a list with one entry per
  block — text as ``{"type": "text", "text": ...}``, an image or audio as its type, MIME type
  and size in bytes, a resource as its URI, MIME type and size — never the bytes themselves.
"""

from __future__ import annotations

import json
from typing import Any

from mcp import types

from turnkit.errors import ToolError

__all__ = ["result_of"]

MAX_ERROR_CHARS = 2000
"""The most of an upstream's error text kept (the executor keeps as much of a message)."""


def result_of(key: str, tool: str, result: types.CallToolResult) -> Any:
    """The answer of upstream ``key``'s ``tool`` from its ``result``; ``ToolError`` for an
    ``isError`` result."""
    if result.is_error:
        text = "\n".join(
            block.text for block in result.content if isinstance(block, types.TextContent)
        ).strip()
        message = text[:MAX_ERROR_CHARS] or (
            f"upstream {key!r} answered an error for {tool!r} without saying why"
        )
        raise ToolError(message, upstream=key, tool=tool)
    if result.structured_content is not None:
        return result.structured_content
    blocks = result.content
    if not blocks:
        return None
    if len(blocks) == 1 and isinstance(blocks[0], types.TextContent):
        return _text(blocks[0].text)
    return [_block(block) for block in blocks]


def _text(text: str) -> Any:
    """``text``, or the JSON object or array it holds."""
    start = text.lstrip()[:1]
    if start in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def _block(block: Any) -> dict[str, Any]:
    if isinstance(block, types.TextContent):
        return {"type": "text", "text": block.text}
    if isinstance(block, types.ImageContent | types.AudioContent):
        kind = "image" if isinstance(block, types.ImageContent) else "audio"
        return {"type": kind, "mime_type": block.mime_type, "bytes": _size(block.data)}
    if isinstance(block, types.ResourceLink):
        return {
            "type": "resource_link",
            "uri": str(block.uri),
            "name": block.name,
            "mime_type": block.mime_type,
        }
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        summary: dict[str, Any] = {
            "type": "resource",
            "uri": str(resource.uri),
            "mime_type": resource.mime_type,
        }
        if isinstance(resource, types.TextResourceContents):
            summary["chars"] = len(resource.text)
        elif isinstance(resource, types.BlobResourceContents):
            summary["bytes"] = _size(resource.blob)
        return summary
    return {"type": str(getattr(block, "type", "unknown"))}


def _size(data: str) -> int | None:
    """The size in bytes that base64 ``data`` decodes to (counted, not decoded); None when it
    is not base64."""
    text = "".join(data.split())
    if len(text) % 4:
        return None
    return len(text) * 3 // 4 - len(text) + len(text.rstrip("="))
