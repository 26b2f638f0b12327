"""The inbox's routes under ``/ui``: sign in, the pending confirmations, a confirmation's own
page, decide one or many, history.

Plain HTML forms (approve and reject work without JavaScript); ``inbox.js`` adds the expiry
countdown, keeps "5 minutes ago" current and drops confirmations that left the list (it polls
``/ui/pending.json``). What a page shows comes from ``views.py``, who may see it from
``access.py``, and every decision goes through ``deciding.decide_one``: the write runs at most
once whoever decides first, from whichever process; a second decider is told who decided and
how. Every message a page shows is built from the ledger, never taken from the request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.staticfiles import StaticFiles

from turnkit.executor.confirmations import could_be_id
from turnkit.executor.executor import Executor
from turnkit.ledger.keys import ApiKeys
from turnkit.server.ui import present, report, session
from turnkit.server.ui.access import may_decide
from turnkit.server.ui.deciding import NOT_YOURS, decide_one, notice
from turnkit.server.ui.session import IDLE_SECONDS, Person, SignIn
from turnkit.server.ui.views import (
    DECIDED,
    PAGE,
    Filters,
    bulk_values,
    decidable,
    detail_values,
    history_rows,
    inbox_values,
)

__all__ = ["inbox_router", "static_files"]

_templates = Environment(
    loader=PackageLoader("turnkit.server.ui", "templates"),
    autoescape=select_autoescape(default=True),
)
_templates.filters["marked"] = present.marked  # hidden characters shown as markers
_templates.tests["hiding"] = present.has_hidden
BULK_MOST = PAGE
"""The most confirmations one bulk decision takes (a page's worth)."""
_HEADERS = {
    "cache-control": "no-store",
    "x-frame-options": "DENY",
    "content-security-policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'",
    "referrer-policy": "same-origin",
}


def static_files() -> StaticFiles:
    """The inbox's script and style sheet, served from the package (never from a CDN)."""
    return StaticFiles(directory=Path(__file__).parent / "static")


def inbox_router(
    executor: Executor, keys: ApiKeys, sign_in: SignIn | None, *, idle: float = IDLE_SECONDS
) -> APIRouter:
    """The inbox's routes (mounted under ``/ui`` by ``create_app``); a key's sign-in ends when
    it was not used for ``idle`` seconds."""
    router = APIRouter(prefix="/ui", include_in_schema=False)

    async def person(request: Request, *, touch: bool = True) -> Person | None:
        return await session.person_of(request, keys, sign_in, executor.clock(), idle=idle,
                                       touch=touch)  # fmt: skip

    def page(
        request: Request, who: Person | None, name: str, status: int = 200, **values: Any
    ) -> HTMLResponse:
        response = HTMLResponse(status_code=status, headers=_HEADERS)
        values |= {"person": who, "root": _root(request), "own_sign_in": sign_in is None,
                   "now": executor.clock()}  # fmt: skip
        values["csrf"] = session.csrf_token(request, who, response)
        response.body = response.render(_templates.get_template(name).render(**values))
        response.headers["content-length"] = str(len(response.body))
        return response

    def message(
        request: Request, who: Person | None, status: int, title: str, text: str
    ) -> Response:
        return page(request, who, "message.html", status, title=title, message=text)

    def to_sign_in(request: Request) -> Response:
        return RedirectResponse(f"{_root(request)}/sign-in", status_code=303)

    def refused_form(request: Request, who: Person | None) -> Response:
        return message(request, who, 403, "Form refused", "This form was stale or did not come"
                       " from this page. Reload the page and try again.")  # fmt: skip

    @router.get("/sign-in")
    async def sign_in_form(request: Request) -> Response:
        if sign_in is not None:
            return message(request, None, 401, "Sign in",
                           "Sign in with the application this inbox belongs to.")  # fmt: skip
        if await person(request) is not None:
            return RedirectResponse(f"{_root(request)}/", status_code=303)
        return page(request, None, "sign_in.html", error="")

    @router.post("/sign-in")
    async def sign_in_post(request: Request) -> Response:
        form = await request.form()
        if sign_in is not None or session.forged(request, None, form.get("csrf")):
            return refused_form(request, None)
        response = RedirectResponse(f"{_root(request)}/", status_code=303)
        secret = form.get("key")
        error = await session.sign_in_with_key(keys, secret if isinstance(secret, str) else "",
                                               response, request, executor.clock(),
                                               idle=idle)  # fmt: skip
        if error:
            return page(request, None, "sign_in.html", status=401, error=error)
        return response

    @router.post("/sign-out")
    async def sign_out(request: Request) -> Response:
        who = await person(request)
        form = await request.form()
        if session.forged(request, who, form.get("csrf")):
            return refused_form(request, who)
        response = to_sign_in(request)
        await session.sign_out(keys, who, request, response)
        return response

    @router.get("/")
    async def inbox(
        request: Request, decided: str = "", tool: str = "", thread: str = "", after: str = ""
    ) -> Response:
        who = await person(request)
        if who is None:
            return to_sign_in(request)
        shown = Filters.of(tool, thread, after)
        values = await inbox_values(executor, who, shown)
        values["notice"] = await notice(executor, who, decided)
        return page(request, who, "inbox.html", **values)

    @router.get("/pending.json")
    async def pending_ids(request: Request, ids: str = "") -> Response:
        """Which of ``ids`` (the cards a page shows, comma-separated) still wait for this
        person; without ``ids``, the first page's."""
        who = await person(request, touch=False)  # the page's own poll: not a use by the person
        if who is None:
            return JSONResponse({"signed_in": False, "ids": []}, status_code=401)
        asked = [i for i in ids.split(",")[:PAGE] if could_be_id(i)] if ids else None
        still = [held.id for held in await decidable(executor, who, Filters(), asked)]
        headers = {"cache-control": "no-store"}
        return JSONResponse({"signed_in": True, "ids": still}, headers=headers)

    @router.post("/confirmations/{confirmation_id}/{action}")
    async def decide(confirmation_id: str, action: str, request: Request) -> Response:
        who = await person(request)
        form = await request.form()
        if session.forged(request, who, form.get("csrf")):
            return refused_form(request, who)
        if who is None:
            return to_sign_in(request)
        if action not in ("approve", "reject", "edit"):
            return message(request, who, 404, "Not found",
                           "There is no such action: approve, reject or edit.")  # fmt: skip
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        done = await decide_one(executor, who, confirmation_id, action, fields)
        back = fields.get("back") == "detail"
        match done.kind:
            case "not_found" | "expired" | "already" | "not_applied":
                return message(request, who, done.status, done.title, done.text)
            case "invalid" if back and done.held is not None:
                values = await detail_values(executor, who, done.held)
                values |= {"problems": done.problems, "edited": fields}
                return page(request, who, "detail.html", status=422, **values)
            case "invalid" if done.held is not None:
                values = await inbox_values(executor, who, Filters())
                values["problems"] = {done.held.id: done.problems}
                values["edited"] = {done.held.id: fields}
                return page(request, who, "inbox.html", status=422, **values)
        decided = done.held.id if done.held is not None else confirmation_id
        if back:
            return RedirectResponse(f"{_root(request)}/confirmations/{decided}?decided=1",
                                    status_code=303)  # fmt: skip
        return RedirectResponse(f"{_root(request)}/?decided={decided}", status_code=303)

    @router.get("/confirmations/{confirmation_id}")
    async def detail(confirmation_id: str, request: Request, decided: str = "") -> Response:
        who = await person(request)
        if who is None:
            return to_sign_in(request)
        held = await executor.aconfirmation(confirmation_id)
        if held is None or not await may_decide(executor, who, held):
            return message(request, who, 404, "Not found", NOT_YOURS)
        values = await detail_values(executor, who, held)
        if decided:
            values["notice"] = await notice(executor, who, held.id)
        return page(request, who, "detail.html", **values)

    @router.post("/bulk")
    async def bulk(request: Request) -> Response:
        """Many confirmations decided at once: the first post asks (the count and the tools,
        never deciding); only the page it shows, sent with ``confirmed``, decides, each one
        through the same path as a single decision."""
        who = await person(request)
        form = await request.form()
        if session.forged(request, who, form.get("csrf")):
            return refused_form(request, who)
        if who is None:
            return to_sign_in(request)
        action = form.get("action")
        if action not in ("approve", "reject"):
            return message(request, who, 422, "Choose approve or reject",
                           "Bulk decisions approve or reject; edit one at a time.")  # fmt: skip
        asked = [i for i in form.getlist("id") if isinstance(i, str) and could_be_id(i)]
        ids = list(dict.fromkeys(asked))[:BULK_MOST]
        if not ids:
            return message(request, who, 422, "Nothing selected",
                           "Tick the confirmations to decide, then choose approve or"
                           " reject.")  # fmt: skip
        reason = form.get("message")
        fields = {"message": reason if isinstance(reason, str) else ""}
        if form.get("confirmed") != "yes":
            values = await bulk_values(executor, who, ids)
            return page(request, who, "bulk_confirm.html", action=action, **values,
                        message=fields["message"])  # fmt: skip
        rows = []
        for confirmation_id in ids:  # each on the arguments the confirming page listed
            seen = form.get(f"seen:{confirmation_id}")
            asked_fields = fields | ({"seen": seen} if isinstance(seen, str) else {})
            done = await decide_one(executor, who, confirmation_id, action, asked_fields)
            rows.append({"id": confirmation_id, "tool": done.held.tool if done.held else "",
                         "kind": done.kind, "text": done.text})  # fmt: skip
        return page(request, who, "bulk_done.html", action=action, rows=rows)

    @router.get("/history")
    async def history(
        request: Request, tool: str = "", status: str = "", after: str = ""
    ) -> Response:
        who = await person(request)
        if who is None:
            return to_sign_in(request)
        chosen = status if status in DECIDED else ""
        shown = Filters.of(tool, "", after)
        rows, following = await history_rows(executor, who, shown, chosen)
        tools = sorted(t.name for t in executor.registry.tools)
        return page(request, who, "history.html", rows=rows, tools=tools, tool=shown.tool,
                    chosen=chosen, statuses=DECIDED, following=following,
                    paged=shown.after is not None)  # fmt: skip

    @router.get("/confirmations/{confirmation_id}/{action}")
    async def decide_by_address(request: Request) -> Response:
        return message(request, await person(request), 405, "Use the buttons",
                       "A decision is made with the buttons on the inbox page or the"
                       " confirmation's page, not by opening its address.")  # fmt: skip

    report.add_report(router, executor, person, page, to_sign_in)  # GET /report (report.py)

    @router.get("/{unknown:path}")
    async def unknown_page(request: Request, unknown: str) -> Response:
        text = "There is no such page: the pending confirmations are at the inbox."
        return message(request, await person(request), 404, "Not found", text)

    return router


def _root(request: Request) -> str:
    """Where the inbox is mounted (under a host app's prefix too)."""
    return str(request.scope.get("root_path", "")) + "/ui"
