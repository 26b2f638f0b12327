"""The attribute names turnkit's spans, metrics and log lines use, in one place.

The ``gen_ai.*`` names follow OpenTelemetry's GenAI semantic conventions (repository
``open-telemetry/semantic-conventions-genai``, ``docs/gen-ai/execute-tool.md`` and ``mcp.md``,
Development status, as of 2026-11); ``input.value``/``output.value`` are what LangSmith's and
Langfuse's OTLP ingest read for a tool run; the ``turnkit.*`` names are turnkit's own.
"""

from __future__ import annotations

__all__ = [
    "CALLER_KIND",
    "CONFIRMATION_ID",
    "CONVERSATION_ID",
    "COST",
    "DECIDER_KIND",
    "DECISION",
    "ERROR_TYPE",
    "INPUT_VALUE",
    "OPERATION",
    "OUTCOME",
    "OUTPUT_VALUE",
    "REPLAYED",
    "TOOL_ARGUMENTS",
    "TOOL_CALL_ID",
    "TOOL_NAME",
    "TOOL_RESULT",
    "TOOL_TYPE",
    "WAITED",
]

OPERATION = "gen_ai.operation.name"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
CONVERSATION_ID = "gen_ai.conversation.id"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"
INPUT_VALUE = "input.value"
OUTPUT_VALUE = "output.value"

CALLER_KIND = "turnkit.caller.kind"
"""``session``, ``key`` or ``public``: who called."""
OUTCOME = "turnkit.outcome"
"""How the call ended: ``ok``, ``error``, ``held``, ``dry_run``, ``rejected`` or a refusal's
status (``refused``), as the audit row writes it."""
CONFIRMATION_ID = "turnkit.confirmation.id"
REPLAYED = "turnkit.replayed"
"""True when an idempotent repeat was answered from its record (nothing ran)."""
COST = "turnkit.cost"
"""Rate-limit units the call was charged (or its hold reserved)."""
DECISION = "turnkit.decision"
"""``approve``, ``reject`` or ``edit``."""
DECIDER_KIND = "turnkit.decider.kind"
WAITED = "turnkit.confirmation.waited_s"
"""Seconds from the hold to this decision."""
