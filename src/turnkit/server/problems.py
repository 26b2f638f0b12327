"""Errors as RFC 9457 problem documents (``application/problem+json``), in one place.

A problem has ``type`` (``about:blank``: the HTTP status says what kind), ``title`` (the status
phrase), ``status``, ``detail`` (the executor's message, or what was wrong with the request) and
``code``: the executor's error code, or for a request refused before the executor an HTTP-level
code (``unauthorized``, ``malformed_json``, ``unsupported_media_type``, ``payload_too_large``,
``invalid_request``, ``not_found``, ``method_not_allowed``). An executor error also carries its
``details`` (for example ``violations`` of an invalid input, ``retry_after`` of a rate limit).

How executor codes map to statuses (``STATUS``); the three judgement calls:
- ``confirmation_expired`` is **410 Gone**: the confirmation existed and can never be decided now.
- ``tool_error`` is **422**: the tool refused this input for a reason of its domain (stock, state)
  that the caller can act on; the gateway did not fail, so not 502.
- ``outcome_unknown`` is **500** with the executor's message (not the generic text): the process
  running the call stopped, and the caller must check the data before trying again.
- ``cannot_decide_here`` is **409 Conflict**: this server's own configuration (its modules, its
  settings given in code) differs from the one that held the write; it stays pending.
Every answer that says when to try again (``rate_limited``, ``too_many_pending``, ``in_progress``)
carries ``Retry-After``.
An ``internal_error`` is 500 with a generic text; its detail stays in the audit row.
"""

from __future__ import annotations

import math
from http import HTTPStatus
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from turnkit.executor.answers import ErrorCode, Refused
from turnkit.server.headers import security_headers

__all__ = [
    "MEDIA_TYPE",
    "RESPONSES",
    "STATUS",
    "Problem",
    "answer_problem",
    "install",
    "is_json",
    "problem",
]

MEDIA_TYPE: Final = "application/problem+json"

STATUS: Final[dict[ErrorCode, int]] = {
    "not_found": 404,
    "forbidden": 403,
    "invalid_input": 422,
    "too_many_items": 422,
    "idempotency_conflict": 422,
    "in_progress": 409,
    "rate_limited": 429,
    "confirmation_expired": 410,
    "internal_error": 500,
    "timeout": 504,
    "tool_error": 422,
    "outcome_unknown": 500,
    "too_many_pending": 429,
    "cannot_decide_here": 409,
    "arguments_changed": 409,
}
"""The HTTP status of each executor error code."""


class Problem(BaseModel):
    """An RFC 9457 problem document (``application/problem+json``): every error answer."""

    model_config = ConfigDict(extra="allow")
    type: str = Field("about:blank", description="The HTTP status says what kind.")
    title: str = Field(description="The status phrase.")
    status: int = Field(description="The HTTP status.")
    detail: str = Field(description="What was wrong, and what to do.")
    code: str = Field(description="The executor's error code, or an HTTP-level one.")


RESPONSES: Final[dict[int | str, dict[str, Any]]] = {
    status: {
        "description": f"{HTTPStatus(status).phrase}: a problem document",
        "content": {MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }
    for status in (400, 401, 403, 404, 409, 410, 413, 415, 422, 429, 500, 504)
}
"""The error answers every route may give, for the OpenAPI document (``Problem``'s schema is
added to its components by ``install``)."""

_HTTP_CODES: Final[dict[int, str]] = {
    400: "malformed_json",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
}
_GENERIC = "the server failed to answer this request; the error was logged"


def problem(
    status: int,
    detail: str,
    *,
    code: str | None = None,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    """A problem document response; ``extra`` members are added beside the standard ones."""
    body = {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "code": code or _HTTP_CODES.get(status, "error"),
        **extra,
    }
    return JSONResponse(body, status_code=status, headers=headers, media_type=MEDIA_TYPE)


def answer_problem(answer: Refused, **extra: Any) -> JSONResponse:
    """The problem document of an executor error answer (``Refused``)."""
    code, details = answer.code, answer.details
    status = STATUS.get(code, 500)
    headers = {}
    retry_after = details.get("retry_after")
    if isinstance(retry_after, int | float) and not isinstance(retry_after, bool):
        headers["Retry-After"] = str(max(1, math.ceil(retry_after)))
    detail = _GENERIC if code == "internal_error" else answer.message
    return problem(status, detail, code=code, headers=headers, details=details, **extra)


def install(app: FastAPI) -> None:
    """Answer FastAPI's and Starlette's own errors, and any bug, with problem documents."""
    app.add_exception_handler(HTTPException, _http_error)  # type: ignore[arg-type]  # Starlette's handler type is wider
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]  # the same
    app.add_exception_handler(Exception, _bug)
    generated = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = generated()
            schemas = document.setdefault("components", {}).setdefault("schemas", {})
            schemas["Problem"] = Problem.model_json_schema()
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to extend it


async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"no route {request.method} {request.url.path[:200]!r}; the API is under /v1"
    elif exc.status_code == 405:
        detail = f"{request.method} is not allowed on {request.url.path[:200]!r}"
    return problem(exc.status_code, detail, headers=dict(exc.headers or {}))


async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = exc.errors()
    if any(error.get("type") == "json_invalid" for error in errors):
        return problem(400, "the request body is not valid JSON")
    if request.headers.get("content-length", "0") != "0" and not is_json(request):
        return problem(415, "send the request body as JSON (Content-Type: application/json)")
    shown = [
        {"loc": [str(part) for part in error.get("loc", ())], "message": str(error.get("msg"))}
        for error in errors[:10]
    ]
    listed = "; ".join(f"{'.'.join(e['loc'])}: {e['message']}" for e in shown)
    return problem(422, f"the request does not match the API: {listed}", errors=shown)


async def _bug(request: Request, exc: Exception) -> JSONResponse:
    # answered by Starlette's outermost middleware, outside SecurityHeaders: add them here
    return problem(500, _GENERIC, code="internal_error", headers=security_headers(request.scope))


def is_json(request: Request) -> bool:
    """Whether the request's content type is JSON (``application/json`` or ``*/*+json``)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    return kind == "application/json" or (
        kind.startswith("application/") and kind.endswith("+json")
    )
