"""What may leave the process: arguments and results only when the operator opts in.

(docs/architecture.md §14) A span or a log line never carries a tool's arguments or its result
unless content capture is on: ``configure(capture_content=True)`` in code, or the GenAI
conventions' own switch, ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``, in the
environment (what LangSmith's and Langfuse's instrumentations read too).
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["CAPTURE_ENV", "CONTENT_CHARS", "capture_content", "configure", "content_text"]

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The environment variable that opts in to arguments and results on spans and log lines."""
CONTENT_CHARS = 8_000
"""At most this many characters of an argument or result go on a span (the rest is cut)."""

_capture: bool | None = None  # set by configure(); None: read the environment


def configure(*, capture_content: bool | None = None) -> None:
    """Opt in to (True) or out of (False) arguments and results on spans and log lines; None
    goes back to the environment's ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``."""
    global _capture
    _capture = capture_content


def capture_content() -> bool:
    """Whether arguments and results may leave the process now."""
    if _capture is not None:
        return _capture
    return os.environ.get(CAPTURE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def content_text(value: Any) -> str:
    """``value`` as the JSON a span carries, cut to ``CONTENT_CHARS``.

    Examples:
        >>> content_text({"sku": "A-1", "price": 12})
        '{"sku":"A-1","price":12}'
    """
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= CONTENT_CHARS else text[:CONTENT_CHARS] + "…"
