"""One structured log line per call and per decision, with its trace id.

(docs/architecture.md §14) Lines go to the ``turnkit.calls`` logger at INFO: nothing is written
unless the application (or ``turnkit serve --log-format``) turns it on. ``JsonFormatter`` writes
each record as one JSON object; the fields of a call's or a decision's line are under their own
keys, never its arguments unless content capture is on (``content.capture_content``).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from turnkit.observe.content import capture_content, content_text

__all__ = ["JsonFormatter", "log_call", "log_decision", "use_json_logs", "use_logs"]

log = logging.getLogger("turnkit.calls")
FIELDS = "turnkit"
"""The ``LogRecord`` attribute holding a line's fields (``record.turnkit``)."""


def log_call(
    *,
    tool: str,
    caller: str,
    status: str,
    code: str | None,
    duration_ms: float,
    confirmation_id: str | None,
    trace_id: str | None,
    arguments: Any = None,
) -> None:
    """The line of one executor call (``arguments`` only when content capture is on)."""
    if not log.isEnabledFor(logging.INFO):
        return
    fields: dict[str, Any] = {
        "event": "call",
        "tool": tool,
        "caller": caller,
        "status": status,
        "code": code,
        "duration_ms": round(duration_ms, 3),
        "confirmation_id": confirmation_id,
        "trace_id": trace_id,
    }
    if arguments is not None and capture_content():
        fields["arguments"] = content_text(arguments)
    log.info(
        "call %s %s%s by %s in %.1f ms%s",
        tool,
        status,
        f" ({code})" if code else "",
        caller,
        duration_ms,
        f" trace {trace_id}" if trace_id else "",
        extra={FIELDS: fields},
    )


def log_decision(
    *,
    tool: str,
    confirmation_id: str,
    decision: str,
    decider: str,
    outcome: str,
    trace_id: str | None,
) -> None:
    """The line of one decision on a held write."""
    if not log.isEnabledFor(logging.INFO):
        return
    fields = {
        "event": "decision",
        "tool": tool,
        "confirmation_id": confirmation_id,
        "decision": decision,
        "decider": decider,
        "outcome": outcome,
        "trace_id": trace_id,
    }
    log.info(
        "decision %s on %s (%s) by %s: %s%s",
        decision,
        tool,
        confirmation_id,
        decider,
        outcome,
        f" trace {trace_id}" if trace_id else "",
        extra={FIELDS: fields},
    )


class JsonFormatter(logging.Formatter):
    """Each record as one line of JSON: ``time``, ``level``, ``logger``, ``message`` and, for
    turnkit's call and decision lines, their fields.

    Examples:
        >>> record = logging.LogRecord("turnkit.calls", logging.INFO, "", 0, "hi", None, None)
        >>> record.created, record.msecs = 0.0, 0.0
        >>> JsonFormatter().format(record)[:60]
        '{"time": "1970-01-01T00:00:00.000Z", "level": "INFO", "logge'
    """

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        body: dict[str, Any] = {
            "time": f"{stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, FIELDS, None)
        if isinstance(fields, dict):
            body.update(fields)
        if record.exc_info:
            body["exception"] = self.formatException(record.exc_info)
        return json.dumps(body, ensure_ascii=False, default=str)


def use_logs(format: str) -> logging.Handler | None:
    """Write the call and decision lines to stderr from now on: ``text`` (``turnkit.calls``
    only, one readable line each), ``json`` (every turnkit logger, ``use_json_logs``) or
    ``off``; the handler added (None for ``off``)."""
    if format == "json":
        return use_json_logs()
    if format != "text":
        return None
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    return handler


def use_json_logs(level: int = logging.INFO) -> logging.Handler:
    """Write turnkit's log lines as JSON to stderr from now on (``--log-format json``); the
    handler added, to remove again."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("turnkit")
    logger.addHandler(handler)
    logger.setLevel(min(level, logger.level or level))
    return handler
