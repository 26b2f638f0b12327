"""What a hold stores beside the call for the people who decide it: the tool's preview, the
request that led to it, the caller's key name, and how many must approve (docs/architecture.md,
"Deciding well").

A preview runs when its call is held, under a dry-run context, bounded in time
(``preview_timeout``) and size (``agent_tool_result_chars``). It is shown to approvers and never
to the model: the held answer carries none. One that fails, is slow or is not JSON data leaves the
call held all the same, its preview "unavailable" with the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from turnkit.executor.effects import HandlerOutcome, RunHandler, Steps, on_ledger
from turnkit.ledger import Ledger
from turnkit.ledger.keys import ApiKey
from turnkit.ledger.records import Preview
from turnkit.registry.caller import Caller
from turnkit.registry.context import CallContext
from turnkit.registry.json_limits import json_problem
from turnkit.registry.json_text import compact
from turnkit.registry.settings import Settings
from turnkit.registry.tool import Quorum, Tool

__all__ = ["REQUEST_CHARS", "bounded_request", "caller_name", "preview_of", "quorum"]

log = logging.getLogger("turnkit.executor")

REQUEST_CHARS = 2000
"""The most characters of each text of a request kept with a hold."""


def preview_of(tool: Tool, value: dict[str, Any], ctx: CallContext) -> Steps[Preview | None]:
    """The tool's preview of this held call (None when it declares none), run as a dry run."""
    if tool.preview is None:
        return None
    settings = ctx.settings
    dry = ctx if ctx.dry_run else replace(ctx, dry_run=True)
    outcome: HandlerOutcome = yield RunHandler(tool.preview, value, dry, settings.preview_timeout)
    return _bounded(tool, outcome, settings)


def _bounded(tool: Tool, outcome: HandlerOutcome, settings: Settings) -> Preview:
    if outcome.kind == "timeout":
        why = f"it took longer than {settings.preview_timeout:g} s (setting 'preview_timeout')"
        log.warning("the preview of %r is unavailable: %s", tool.name, why)
        return Preview(unavailable=why)
    if outcome.kind == "error":
        failure = outcome.value
        log.warning("the preview of %r failed: %r", tool.name, failure)
        return Preview(unavailable=f"it failed: {type(failure).__name__}: {failure}"[:300])
    problem = json_problem(outcome.value)
    if problem is not None:
        log.warning("the preview of %r is not JSON data: %s", tool.name, problem)
        return Preview(unavailable=f"it was not JSON data: {problem}"[:300])
    text = compact(outcome.value)
    limit = settings.agent_tool_result_chars
    if len(text) > limit:
        return Preview(value=text[:limit], truncated=True)
    return Preview(value=outcome.value)


def quorum(tool: Tool, need: object) -> tuple[int, bool]:
    """How many must approve a held call and whether its caller may not: the tool's own, raised
    (never lowered) by a ``Quorum`` its danger check returned."""
    approvals, separate = tool.approvals, tool.separate_duties
    if isinstance(need, Quorum):
        approvals, separate = max(approvals, need.approvals), separate or need.separate_duties
    return approvals, separate


def caller_name(caller: Caller) -> Steps[str | None]:
    """The name of the caller's API key, as the ledger keeps it (None: not a key, no name)."""
    if caller.kind != "key" or caller.key_id is None:
        return None
    key: ApiKey | None = yield on_ledger(Ledger.api_key, caller.key_id)
    return None if key is None else key.name


def bounded_request(request: object) -> dict[str, str] | None:
    """The request texts a door passed (``user``, ``model``), each cut to ``REQUEST_CHARS``;
    None when there are none. Anything else passed is left out."""
    if not isinstance(request, Mapping):
        return None
    kept = {
        part: text[:REQUEST_CHARS]
        for part in ("user", "model")
        if isinstance(text := request.get(part), str) and text.strip()
    }
    return kept or None
