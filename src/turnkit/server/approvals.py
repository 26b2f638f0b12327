"""``/v1/confirmations``: the held writes a key may decide, read and decided over REST.

A key may read the confirmations it was held under, and decide them only when it carries the
scope ``system.confirmations:decide`` (a headless client must not approve its own write: the
operator gives a key that scope on purpose). It may see and decide others' when its owner holds
``system.confirm_any`` and the key carries the scope ``system.confirmations:decide`` (for the
tools of its allow list, if it has one): ``refusal_for_others``, the executor's one rule, which
``executor.aconfirm`` applies again. Deciding is the executor's atomic ledger update: the write
runs at most once, whoever decides first, from whichever process.

Answers: 200 with the confirmation resource when this request decided it (its ``outcome`` says
what the write did); 409 ``already_decided`` when it had been decided before (the problem carries
the stored ``outcome``, and nothing runs again); 410 when it expired; a refused decision (not
this key's, an edit that fails the tool's schema) is a problem and leaves it pending.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from turnkit.executor.answers import Held, Refused
from turnkit.executor.confirmations import DECIDE_SCOPE, decides_for_others, refusal_for_others
from turnkit.executor.executor import Executor
from turnkit.ledger.keys import ApiKey
from turnkit.ledger.records import Confirmation, Cursor, Readable
from turnkit.registry.caller import apermissions_now
from turnkit.server import problems
from turnkit.server.auth import ExecutorDep, Key
from turnkit.server.views import Missing, confirmation_view

__all__ = ["router"]

router = APIRouter(prefix="/confirmations", tags=["confirmations"])


class Rejection(BaseModel):
    """The optional body of a rejection."""

    model_config = ConfigDict(extra="forbid")
    message: str | None = Field(None, max_length=2000, description="Why (told to the caller).")


class Edit(BaseModel):
    """The body of an edit: the new input for the same tool, validated again."""

    model_config = ConfigDict(extra="forbid")
    arguments: dict[str, Any] = Field(description="The new input object.")


PAGE = 50
"""Confirmations per page by default (``limit`` may ask for up to ``MAX_PAGE``)."""
MAX_PAGE = 200
Status = Literal["pending", "running", "done", "rejected", "expired", "forbidden", "all"]


@router.get("")
async def list_confirmations(
    request: Request,
    response: Response,
    key: Key,
    executor: ExecutorDep,
    status: Annotated[Status, Query(description="Which ones; 'all' for every status.")] = "pending",
    tool: Annotated[str | None, Query(max_length=200, description="Only this tool's.")] = None,
    thread: Annotated[
        str | None, Query(max_length=200, description="Only those held in this conversation.")
    ] = None,
    after: Annotated[
        str | None, Query(max_length=400, description="The cursor of the page before (Link).")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="At most this many.")] = PAGE,
) -> list[dict[str, Any]]:
    """Confirmations this key may read, oldest first, a page at a time: the ones it was held
    under, and others' it may decide (``decidable`` says whether it may decide each one now).

    By default the pending ones that have not expired. A full page carries ``Link: <...>;
    rel="next"``, the address of the next one.
    """
    cursor = None
    if after is not None:
        cursor = Cursor.parse(after)
        if cursor is None:
            raise HTTPException(422, "'after' is not a cursor: pass the one a Link header gave")
    permissions = await apermissions_now(executor.permissions, key.caller)  # asked once
    others_too = decides_for_others(key.caller, permissions)
    readable = Readable(
        identity=key.caller.identity, others=(key.allow or "all") if others_too else None
    )
    now = executor.clock()
    found = await executor.ledger.alist_confirmations(
        status=None if status == "all" else status,
        tool=tool,
        thread=thread,
        readable=readable,
        after=cursor,
        limit=limit,
        unexpired_at=now if status == "pending" else None,
    )
    if len(found) == limit:
        following = request.url.include_query_params(after=Cursor.of(found[-1]).text())
        response.headers["Link"] = f'<{following}>; rel="next"'
    return [
        confirmation_view(held, request, approver=_approver(key, held))
        | {
            "decidable": held.status == "pending"
            and held.expires_at > now  # past it, deciding is 410: not decidable now
            and _refusal(key, held, permissions) is None
        }
        for held in found
    ]


@router.get("/{confirmation_id}")
async def get_confirmation(
    confirmation_id: str, request: Request, key: Key, executor: ExecutorDep
) -> dict[str, Any]:
    """One confirmation as it stands now: one this key was held for, or may decide."""
    held = await _found(executor, confirmation_id)
    await _check_reader(executor, key, held)
    return confirmation_view(held, request, approver=_approver(key, held))


@router.post("/{confirmation_id}/approve")
async def approve(
    confirmation_id: str, request: Request, key: Key, executor: ExecutorDep
) -> Response:
    """Run the held call as it is. ``If-Match: "<input_hash>"`` (the confirmation's, as read)
    approves only those arguments: once another approver edited them, 409 ``arguments_changed``."""
    return await _decide(confirmation_id, {"action": "approve"}, request, key, executor)


@router.post("/{confirmation_id}/reject")
async def reject(
    confirmation_id: str,
    request: Request,
    key: Key,
    executor: ExecutorDep,
    body: Rejection | None = None,
) -> Response:
    """Run nothing; the optional ``message`` says why."""
    decision = {"action": "reject", "message": None if body is None else body.message}
    return await _decide(confirmation_id, decision, request, key, executor)


@router.post("/{confirmation_id}/edit")
async def edit(
    confirmation_id: str, body: Edit, request: Request, key: Key, executor: ExecutorDep
) -> Response:
    """Run the same tool with new ``arguments`` (refused, and nothing applied, when invalid)."""
    decision = {"action": "edit", "arguments": body.arguments}
    return await _decide(confirmation_id, decision, request, key, executor)


async def _decide(
    confirmation_id: str,
    decision: dict[str, Any],
    request: Request,
    key: ApiKey,
    executor: ExecutorDep,
) -> Response:
    before = await _found(executor, confirmation_id)
    refused = _refusal(key, before, await apermissions_now(executor.permissions, key.caller))
    if refused is not None:
        raise HTTPException(403, refused)
    seen = request.headers.get("if-match", "").strip().strip('"') or None  # the input it read
    answer = await executor.adecide(before.id, key.caller, decision, allow=key.allowed, seen=seen)
    after = await executor.aconfirmation(before.id)
    if after is None or after.status in ("pending", "expired"):
        # refused and still pending (an invalid edit, a rate limit), or expired: the answer says
        if isinstance(answer, Refused):
            return problems.answer_problem(answer)
        waiting = isinstance(answer, Held) and answer.approvals_needed is not None
        return JSONResponse(answer.to_json(), status_code=202 if waiting else 200)
    view = confirmation_view(after, request, approver=True)
    if before.status != "pending" or answer.already_decided:  # another decided first
        return problems.problem(
            409,
            f"confirmation {after.id!r} was already decided ({after.status}); nothing ran again:"
            " its outcome is in 'outcome'",
            code="already_decided",
            outcome=after.outcome,
            confirmation=view,
        )
    return JSONResponse(view)


async def _found(executor: Executor, confirmation_id: str) -> Confirmation:
    held = await executor.aconfirmation(confirmation_id)  # an id no database stores names none
    if held is None:
        raise Missing(f"no confirmation {confirmation_id[:80]!r}")
    return held


def _approver(key: ApiKey, held: Confirmation) -> bool:
    """Whether ``key`` reads ``held`` as one who may decide it (another's hold, or its own with
    ``DECIDE_SCOPE``): it then sees the preview and the request; the held caller does not."""
    return held.caller.identity != key.caller.identity or DECIDE_SCOPE in key.scopes


def _refusal(key: ApiKey, held: Confirmation, permissions: Collection[str]) -> str | None:
    """Why ``key`` (its owner holding ``permissions``) may not decide ``held``, or None. Its own
    hold needs ``DECIDE_SCOPE``: a headless client holding the key must not approve its own
    write (the operator gives that scope on purpose); another's, ``refusal_for_others``."""
    if held.caller.identity != key.caller.identity:
        return refusal_for_others(key.caller, held, permissions, key.allowed)
    if DECIDE_SCOPE in key.scopes:
        return None
    return (
        f"confirmation {held.id!r} waits for a person: this key was held and may read it,"
        f" but decides its own holds only with the scope {DECIDE_SCOPE!r} (a person decides it"
        f" with `turnkit confirmations approve {held.id} --module package.module:object`, or"
        " with a key of theirs that may)"
    )


async def _check_reader(executor: Executor, key: ApiKey, held: Confirmation) -> None:
    """A 403 unless the key may see ``held``: its own hold, or another's it may decide."""
    refused = await executor.arefusal_to_decide(key.caller, held, key.allowed)
    if refused is not None:
        raise HTTPException(403, refused)
