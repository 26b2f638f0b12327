"""What the REST API shows of a tool and of a confirmation (JSON data, described for OpenAPI)."""

from __future__ import annotations

import dataclasses
from typing import Any

from fastapi import Request
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException

from turnkit.executor.executor import Executor
from turnkit.ledger.records import Confirmation, iso
from turnkit.registry.caller import Caller
from turnkit.registry.names import model_name
from turnkit.registry.settings import Settings
from turnkit.registry.tool import Tool

__all__ = ["Missing", "ToolView", "confirmation_view", "tool_view"]

_HELD = {"person": True, "operator": True, "always": True, "never": False}


class ToolView(BaseModel):
    """A tool as a key sees it."""

    model_config = ConfigDict(frozen=True)

    name: str
    """The registry name (``shop.set_prices``): what ``/v1/tools/{name}`` takes."""
    model_name: str | None
    """The name shown to models and MCP clients (``shop_set_prices``)."""
    title: str
    description: str
    input_schema: dict[str, Any]
    """JSON Schema of the input, without the control fields."""
    output_schema: dict[str, Any] | None
    annotations: dict[str, bool]
    """``read_only``, ``destructive``, ``idempotent``, ``open_world``."""
    hold_rule: str
    """When calls wait for a person: ``always``, ``never``, ``batch``, ``input``, ..."""
    would_hold: bool | None
    """Whether a call would be held; null when it depends on the input (ask with dry_run)."""


def tool_view(tool: Tool, caller: Caller, settings: Settings | None = None) -> ToolView:
    """What ``caller`` is told about ``tool`` (under ``settings``, those in force now)."""
    rule = Executor.hold_rule(caller, tool, settings)
    output = tool.output_schema
    return ToolView(
        name=tool.name,
        model_name=model_name(tool.name),
        title=tool.title or tool.name,
        description=tool.description,
        input_schema=Executor.input_schema(tool),
        output_schema=None if output is None else dict(output),  # type: ignore[arg-type]  # a dict once built
        annotations=dataclasses.asdict(tool.annotations),  # type: ignore[arg-type]  # normalised when built
        hold_rule=rule,
        would_hold=_HELD.get(rule),
    )


def confirmation_view(
    held: Confirmation, request: Request, *, approver: bool = False
) -> dict[str, Any]:
    """The confirmation resource: what was held, its state, and where to decide it; for an
    ``approver`` (a reader who may decide it) also what approvers see: the preview, the request
    that led to it, the caller's key name, the approvals. The caller whose write it is reads no
    preview: it may be the model's own client (docs/architecture.md, "Deciding well")."""
    base = f"{request.scope.get('root_path', '')}/v1/confirmations/{held.id}"
    view = {
        "id": held.id,
        "tool": held.tool,
        "caller": held.caller.identity,
        "input": held.input,
        "input_hash": held.input_hash,
        "status": held.status,
        "created_at": iso(held.created_at),
        "expires_at": iso(held.expires_at),
        "decided_at": None if held.decided_at is None else iso(held.decided_at),
        "decided_by": held.decided_by,
        "decision": held.decision,
        "outcome": held.outcome,
        "links": {
            "self": base,
            "approve": f"{base}/approve",
            "reject": f"{base}/reject",
            "edit": f"{base}/edit",
        },
        "thread_id": held.thread_id,
        "approvals": {
            "given": held.approvals_given,
            "needed": held.approvals_needed,
            "separate_duties": held.separate_duties,
            "by": [{"by": a.by, "at": iso(a.at)} for a in held.approvals],
        },
    }
    if approver:
        view |= {
            "caller_name": held.caller_name,
            "caller_label": held.caller_label(),
            "preview": None if held.preview is None else held.preview.to_json(),
            "request": held.request,
        }
    return view


class Missing(HTTPException):
    """A 404 problem with a detail saying what is missing."""

    def __init__(self, detail: str) -> None:
        super().__init__(404, detail)
