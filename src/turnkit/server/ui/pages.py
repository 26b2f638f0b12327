"""The inbox's pages under ``/ui``: sign in, the pending confirmations, decide, history.

Plain HTML forms (approve and reject work without JavaScript); ``inbox.js`` adds the expiry
countdown and drops confirmations decided elsewhere (it polls ``/ui/pending.json``). Deciding is
the executor's ``aconfirm``: the write runs at most once whoever decides first, from whichever
process; a second decider is told who decided and how.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.staticfiles import StaticFiles

from turnkit.registry.answers import is_error
from turnkit.registry.caller import apermissions_now
from turnkit.registry.confirmations import refusal_for_others
from turnkit.registry.executor import Executor
from turnkit.registry.ledger.keys import ApiKeys
from turnkit.registry.ledger.records import Confirmation, iso
from turnkit.server.ui import present, session
from turnkit.server.ui.session import Person, SignIn

__all__ = ["inbox_router", "static_files"]

_templates = Environment(
    loader=PackageLoader("turnkit.server.ui", "templates"),
    autoescape=select_autoescape(default=True),
)
_DECIDED = ("done", "rejected", "expired", "running")


def static_files() -> StaticFiles:
    """The inbox's script and style sheet, served from the package (never from a CDN)."""
    return StaticFiles(directory=Path(__file__).parent / "static")


def inbox_router(executor: Executor, keys: ApiKeys, sign_in: SignIn | None) -> APIRouter:
    """The inbox's routes (mounted under ``/ui`` by ``create_app``)."""
    router = APIRouter(prefix="/ui", include_in_schema=False)

    async def person(request: Request) -> Person | None:
        return await session.person_of(request, keys, sign_in)

    def page(request: Request, name: str, status: int = 200, **values: Any) -> HTMLResponse:
        token, new = session.csrf_token(request)
        values |= {"csrf": token, "root": _root(request), "own_sign_in": sign_in is None}
        html = _templates.get_template(name).render(**values)
        response = HTMLResponse(html, status, headers={"cache-control": "no-store"})
        if new:
            session.remember_csrf(request, response, token)
        return response

    def to_sign_in(request: Request) -> Response:
        return RedirectResponse(f"{_root(request)}/sign-in", status_code=303)

    @router.get("/sign-in")
    async def sign_in_form(request: Request) -> Response:
        if sign_in is not None:
            return page(request, "message.html", status=401, title="Sign in",
                        message="Sign in with the application this inbox belongs to.")  # fmt: skip
        return page(request, "sign_in.html", error="")

    @router.post("/sign-in")
    async def sign_in_post(request: Request) -> Response:
        form = await request.form()
        if session.forged(request, form.get("csrf")):
            return _forged(request, page)
        response = RedirectResponse(f"{_root(request)}/", status_code=303)
        secret = form.get("key")
        error = await session.sign_in_with_key(
            keys, secret if isinstance(secret, str) else "", response, request.url.scheme == "https"
        )
        if error:
            return page(request, "sign_in.html", status=401, error=error)
        return response

    @router.post("/sign-out")
    async def sign_out(request: Request) -> Response:
        form = await request.form()
        if session.forged(request, form.get("csrf")):
            return _forged(request, page)
        response = to_sign_in(request)
        session.sign_out(response)
        return response

    @router.get("/")
    async def inbox(request: Request) -> Response:
        who = await person(request)
        if who is None:
            return to_sign_in(request)
        return page(request, "inbox.html", **await _inbox_values(executor, who, request))

    @router.get("/pending.json")
    async def pending_ids(request: Request) -> Response:
        who = await person(request)
        if who is None:
            return JSONResponse({"signed_in": False, "ids": []}, status_code=401)
        ids = [held.id for held in await _decidable(executor, who)]
        return JSONResponse({"signed_in": True, "ids": ids}, headers={"cache-control": "no-store"})

    @router.post("/confirmations/{confirmation_id}/{action}")
    async def decide(confirmation_id: str, action: str, request: Request) -> Response:
        form = await request.form()
        if session.forged(request, form.get("csrf")):
            return _forged(request, page)
        who = await person(request)
        if who is None:
            return to_sign_in(request)
        if action not in ("approve", "reject", "edit"):
            return page(request, "message.html", status=404, title="Not found",
                        message="There is no such action: approve, reject or edit.")  # fmt: skip
        before = await executor.aconfirmation(confirmation_id)
        if before is None or await executor.arefusal_to_decide(who.caller, before) is not None:
            return page(request, "message.html", status=404, title="Not found",
                        message="There is no such confirmation for you to decide.")  # fmt: skip
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        decision = _decision(action, before, fields)
        answer = await executor.aconfirm(before.id, who.caller, decision)
        after = await executor.aconfirmation(before.id) or before
        if before.status != "pending" or answer.get("already_decided"):
            return page(request, "message.html", status=409, title="Already decided",
                        message=_already(after))  # fmt: skip
        if after.status == "pending" and action == "edit":  # invalid: nothing applied
            values = await _inbox_values(executor, who, request)
            values["problems"] = {before.id: _violations(answer)}
            values["edited"] = {before.id: fields}
            return page(request, "inbox.html", status=422, **values)
        if after.status == "pending":  # refused and still pending (a rate limit, a right lost)
            message = answer.get("error", {}).get("message", "the decision was not applied")
            return page(request, "message.html", status=422, title="Not applied",
                        message=f"Nothing was applied: {message}")  # fmt: skip
        notice = f"{after.tool}: {_said(after)}"
        return RedirectResponse(f"{_root(request)}/?{urlencode({'notice': notice})}", 303)

    @router.get("/history")
    async def history(request: Request, tool: str = "", status: str = "") -> Response:
        who = await person(request)
        if who is None:
            return to_sign_in(request)
        rows = await _history(executor, who, tool, status)
        tools = sorted({row["tool"] for row in rows} | ({tool} if tool else set()))
        shown = [r for r in rows if (not tool or r["tool"] == tool)
                 and (not status or r["status"] == status)]  # fmt: skip
        return page(request, "history.html", person=who, rows=shown, tools=tools, tool=tool,
                    chosen=status, statuses=_DECIDED)  # fmt: skip

    return router


async def _decidable(executor: Executor, who: Person) -> list[Confirmation]:
    """The pending, unexpired confirmations ``who`` may decide, oldest first."""
    found = await executor.ledger.alist_confirmations(status="pending")
    return await _theirs(executor, who, found, pending=True)


async def _theirs(
    executor: Executor, who: Person, found: list[Confirmation], *, pending: bool
) -> list[Confirmation]:
    permissions: Collection[str] = await apermissions_now(executor.permissions, who.caller)
    now = executor.clock()
    return [
        held
        for held in found
        if (not pending or held.expires_at > now)
        and (
            held.caller.identity == who.caller.identity
            or refusal_for_others(who.caller, held, permissions) is None
        )
    ]


async def _inbox_values(executor: Executor, who: Person, request: Request) -> dict[str, Any]:
    now = executor.clock()
    items = []
    for held in await _decidable(executor, who):
        tool = executor.registry.get(held.tool)
        items.append(
            {
                "id": held.id,
                "tool": held.tool,
                "title": (tool.title if tool is not None and tool.title else held.tool),
                "caller": held.caller.identity,
                "created_at": iso(held.created_at),
                "expires_at": iso(held.expires_at),
                "seconds_left": max(0, int(held.expires_at - now)),
                "arguments": present.node(held.input),
            }
        )
    notice = request.query_params.get("notice", "")
    return {"person": who, "items": items, "notice": notice[:300], "problems": {}, "edited": {}}


async def _history(executor: Executor, who: Person, tool: str, status: str) -> list[dict[str, Any]]:
    found: list[Confirmation] = []
    for state in _DECIDED:
        found += await executor.ledger.alist_confirmations(status=state)  # type: ignore[arg-type]
    mine = await _theirs(executor, who, found, pending=False)
    audits = await executor.ledger.aaudit_rows(1000)
    outcome_of: dict[str, str] = {}
    for row in reversed(audits):  # oldest first: the latest run of a confirmation wins
        if row["confirmation_id"] and row["status"] != "confirmation_required":
            outcome_of[row["confirmation_id"]] = (
                row["status"] if not row["code"] else f"{row['status']} ({row['code']})"
            )
    mine.sort(key=lambda held: held.decided_at or held.expires_at, reverse=True)
    return [
        {
            "id": held.id,
            "tool": held.tool,
            "caller": held.caller.identity,
            "status": held.status,
            "decided_by": held.decided_by or "",
            "decided_at": iso(held.decided_at) if held.decided_at else iso(held.expires_at),
            "decision": (held.decision or {}).get("action", "expired"),
            "outcome": outcome_of.get(held.id, "no write ran"),
        }
        for held in mine
    ]


def _decision(action: str, held: Confirmation, fields: dict[str, str]) -> dict[str, Any]:
    if action == "approve":
        return {"action": "approve"}
    if action == "reject":
        return {"action": "reject", "message": fields.get("message", "").strip()[:2000] or None}
    return {"action": "edit", "arguments": present.rebuilt(held.input, fields)}


def _violations(answer: dict[str, Any]) -> dict[str, str]:
    """The answer's schema violations by JSON pointer (``""`` for the rest)."""
    if not is_error(answer):
        return {}
    error = answer["error"]
    found: dict[str, str] = {}
    for violation in error.get("details", {}).get("violations", []):
        path = str(violation.get("path", ""))
        found[path] = (found.get(path, "") + " " + str(violation.get("message", ""))).strip()
    if not found:
        found[""] = str(error.get("message", "the decision was refused"))
    return found


def _said(held: Confirmation) -> str:
    kind = (held.decision or {}).get("action", held.status)
    outcome = held.outcome or {}
    if outcome.get("status") == "ok":
        return f"{kind}d; the write ran" if kind != "edit" else "edited; the write ran"
    if kind == "reject":
        return "rejected; nothing ran"
    return f"{kind}: {outcome.get('error', {}).get('message', held.status)}"


def _already(held: Confirmation) -> str:
    kind = (held.decision or {}).get("action", held.status)
    when = iso(held.decided_at) if held.decided_at else "earlier"
    return (
        f"This confirmation was already decided: {kind} by {held.decided_by or 'someone'}"
        f" at {when} ({held.status}). Nothing ran again."
    )


def _forged(request: Request, page: Any) -> Response:
    response: Response = page(
        request,
        "message.html",
        status=403,
        title="Form refused",
        message="This form was stale or did not come from this page. Reload the page and try"
        " again.",
    )
    return response


def _root(request: Request) -> str:
    """Where the inbox is mounted (under a host app's prefix too)."""
    return str(request.scope.get("root_path", "")) + "/ui"
