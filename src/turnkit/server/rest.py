"""The REST API under ``/v1``: the key's tools, calls, the confirmations it may decide, and the
audit (``audit.py``, for a key with its scope).

Every call goes through the executor's async methods with the key's caller and allow list, so
rights are checked at call time and each request that addresses a tool leaves the executor's audit
row (an unknown tool is audited as ``not_found``; a body that cannot be read is audited as
``invalid_input`` after the tool and rights checks, which answer first).

Answers map to HTTP (``problems.STATUS`` for errors): ok, dry runs and replays 200; a held write
202 with the confirmation resource and ``Location``.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from turnkit.executor.answers import Answer, Held, Refused
from turnkit.executor.executor import Executor
from turnkit.server import approvals, audit, auth, problems, views
from turnkit.server.auth import ExecutorDep, Key

__all__ = ["INVOKE_PATH", "invoke_route", "router"]

router = APIRouter(prefix="/v1", responses=problems.RESPONSES)
INVOKE_PATH = "/v1/tools/{name}/invoke"
_BODY_FIELDS = ("input", "dry_run")


class InvokeBody(BaseModel):
    """The body of ``POST /v1/tools/{name}/invoke``."""

    model_config = ConfigDict(extra="forbid")

    input: dict[str, Any] = Field(default_factory=dict, description="The tool's input.")
    dry_run: bool = Field(False, description="Say what the call would do; do nothing.")


_INVOKE_DOC = {  # what FastAPI would say of the dependencies invoke finds by itself
    "requestBody": {
        "required": False,
        "content": {"application/json": {"schema": InvokeBody.model_json_schema()}},
    },
    "security": [{"ApiKey": []}],
    "parameters": [
        {
            "name": "idempotency-key",
            "in": "header",
            "required": False,
            "schema": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Idempotency-Key"},
        }
    ],
}


@router.get("/tools", tags=["tools"])
async def list_tools(key: Key, executor: ExecutorDep) -> list[views.ToolView]:
    """The tools this key may use now, with their input schemas (without control fields)."""
    settings = await executor.asettings_now()
    tools = await executor.avisible_for(key.caller, key.allowed, settings=settings)
    return [views.tool_view(tool, key.caller, settings) for tool in tools]


@router.get("/tools/{name}", tags=["tools"])
async def get_tool(name: str, key: Key, executor: ExecutorDep) -> views.ToolView:
    """One tool this key may use now (404 when there is none, or the key may not use it)."""
    settings = await executor.asettings_now()
    for tool in await executor.avisible_for(key.caller, key.allowed, settings=settings):
        if tool.name == name:
            return views.tool_view(tool, key.caller, settings)
    raise views.Missing(f"this key may use no tool named {name[:100]!r}; GET /v1/tools lists them")


@router.post(
    "/tools/{name}/invoke",
    tags=["tools"],
    openapi_extra=_INVOKE_DOC,
    responses={202: {"description": "Held for a person: the confirmation, and its Location"}},
)
async def invoke(name: str, request: Request) -> Response:
    """Call a tool: 200 with the answer, 202 when a person must confirm, else a problem.

    ``Idempotency-Key`` (IETF draft semantics): the same key with the same body replays the first
    answer without running again (``Idempotent-Replayed: true``); with a different body it is
    422; while the first call still runs it is 409 ``in_progress`` at once, with ``Retry-After``
    (send it again then for the first call's answer). Keys are scoped to the API key and the
    tool and kept ``retention_days`` (30 by default: ``turnkit ledger prune``); an input that
    fails validation is refused before the key is recorded, so a corrected retry may reuse it.

    There is no approval token in the body: a held write is approved by a person at
    ``/v1/confirmations/{id}/approve`` (or the inbox, the CLI), which runs it once.

    The hot path of the API: the key is looked up (with the operator's settings, in one
    statement) in the thread that runs the call, and FastAPI's dependencies are left out (the
    OpenAPI document still shows the bearer and the header: ``_INVOKE_DOC``).
    """
    secret = auth.bearer_secret(request)
    executor: Executor = request.app.state.executor
    body, trouble = await _invoke_body(request)
    control: dict[str, object] = {}
    if body.get("dry_run") is not None:  # the executor's step 2 checks its type
        control["dry_run"] = body["dry_run"]
    idempotency_key = request.headers.get("idempotency-key")
    if idempotency_key is not None:
        control["idempotency_key"] = idempotency_key
    # an unreadable body still goes through the executor (input None fails its step 3), so the
    # tool and rights checks answer first and the call is audited
    given = body.get("input", {}) if trouble is None else None
    find = auth.key_finder(request)(secret)
    answer = await executor.acall_as(find, name, given, control, wait=False)
    if isinstance(answer, str):
        raise auth.refused(answer)
    if trouble is not None and isinstance(answer, Refused) and answer.code == "invalid_input":
        return problems.problem(trouble[0], trouble[1], details=answer.details)
    return await _answered(request, executor, answer)


async def invoke_route(request: Request) -> Response:
    """``invoke`` as a plain Starlette endpoint: the route ``create_app`` puts first, so the API's
    busiest request skips FastAPI's route matching and request handling (measured: ~0.1 ms of
    CPU a call); the FastAPI route stays for the OpenAPI document."""
    return await invoke(request.path_params["name"], request)


async def _invoke_body(request: Request) -> tuple[dict[str, Any], tuple[int, str] | None]:
    """The body as an object, or ``({}, (status, what is wrong))``."""
    raw = await request.body()
    if not raw:
        return {}, None
    if not problems.is_json(request):
        return {}, (415, "send the body as JSON (Content-Type: application/json)")
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        return {}, (400, "the request body is not valid JSON")
    if not isinstance(body, dict):
        return {}, (422, 'the body is an object: {"input": {...}, "dry_run": false}')
    unknown = sorted(str(field)[:40] for field in body if field not in _BODY_FIELDS)
    if unknown:
        token = (
            " (no token approves a write here: a person approves it at"
            " /v1/confirmations/{id}/approve)"
            if "confirm_token" in body
            else ""
        )
        return {}, (
            422,
            f"unknown body fields {unknown}: the body has 'input' and 'dry_run'{token}; an"
            " idempotency key travels in the Idempotency-Key header",
        )
    return body, None


async def _answered(request: Request, executor: Executor, answer: Answer) -> Response:
    """An executor answer as an HTTP response."""
    replayed = {"Idempotent-Replayed": "true"} if answer.replayed else {}
    match answer:
        case Refused():
            problem = problems.answer_problem(answer)
            problem.headers.update(replayed)
            return problem
        case Held(confirmation_id=confirmation_id):
            held = await executor.aconfirmation(confirmation_id)
            if held is not None:
                view = views.confirmation_view(held, request)
                location = {"Location": view["links"]["self"]}
                return JSONResponse(view, status_code=202, headers=location | replayed)
    return JSONResponse(answer.to_json(), headers=replayed)


router.include_router(approvals.router)
router.include_router(audit.router)
