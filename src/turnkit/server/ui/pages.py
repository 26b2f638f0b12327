"""The inbox's pages under ``/ui``: sign in, the pending confirmations, decide, history.

Plain HTML forms (approve and reject work without JavaScript); ``inbox.js`` adds the expiry
countdown and drops confirmations that left the list (it polls ``/ui/pending.json``). Deciding is
the executor's ``aconfirm`` under the person's allow list: the write runs at most once whoever
decides first, from whichever process; a second decider is told who decided and how. Every
message a page shows is built here from the ledger, never taken from the request.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.staticfiles import StaticFiles

from turnkit.executor.answers import Answer, Held, Ran, Refused, Unreadable, shown_outcome
from turnkit.executor.confirmations import (
    approver_of,
    could_be_id,
    decides_for_others,
    refusal_for_others,
)
from turnkit.executor.executor import Executor
from turnkit.ledger.keys import ApiKeys
from turnkit.ledger.records import (
    Confirmation,
    ConfirmationStatus,
    Cursor,
    Readable,
    iso,
)
from turnkit.registry.caller import apermissions_now
from turnkit.server.ui import present, session
from turnkit.server.ui.session import IDLE_SECONDS, Person, SignIn

__all__ = ["inbox_router", "static_files"]

_templates = Environment(
    loader=PackageLoader("turnkit.server.ui", "templates"),
    autoescape=select_autoescape(default=True),
)
_templates.filters["marked"] = present.marked  # hidden characters shown as markers
_templates.tests["hiding"] = present.has_hidden
_DECIDED: tuple[ConfirmationStatus, ...] = ("done", "rejected", "expired", "forbidden", "running")
PAGE = 50
"""Confirmations per page, in the inbox and in the history."""
GROUP_OVER = 5
"""More cards than this of one tool on a page are folded into one group, with their count."""
BULK_MOST = 2 * PAGE
"""The most confirmations one bulk decision takes."""
_NOT_YOURS = "There is no such confirmation for you to decide."
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
        values = await _inbox_values(executor, who, shown)
        values["notice"] = await _notice(executor, who, decided)
        return page(request, who, "inbox.html", **values)

    @router.get("/pending.json")
    async def pending_ids(request: Request, ids: str = "") -> Response:
        """Which of ``ids`` (the cards a page shows, comma-separated) still wait for this
        person; without ``ids``, the first page's."""
        who = await person(request, touch=False)  # the page's own poll: not a use by the person
        if who is None:
            return JSONResponse({"signed_in": False, "ids": []}, status_code=401)
        asked = [i for i in ids.split(",")[:PAGE] if could_be_id(i)] if ids else None
        still = [held.id for held in await _decidable(executor, who, Filters(), asked)]
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
                values = await _detail_values(executor, who, done.held)
                values |= {"problems": done.problems, "edited": fields}
                return page(request, who, "detail.html", status=422, **values)
            case "invalid" if done.held is not None:
                values = await _inbox_values(executor, who, Filters())
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
        if held is None or not await _may_decide(executor, who, held):
            return message(request, who, 404, "Not found", _NOT_YOURS)
        values = await _detail_values(executor, who, held)
        if decided:
            values["notice"] = await _notice(executor, who, held.id)
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
            values = await _bulk_values(executor, who, ids)
            return page(request, who, "bulk_confirm.html", action=action, **values,
                        message=fields["message"])  # fmt: skip
        rows = []
        for confirmation_id in ids:
            done = await decide_one(executor, who, confirmation_id, action, fields)
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
        chosen = status if status in _DECIDED else ""
        shown = Filters.of(tool, "", after)
        rows, following = await _history(executor, who, shown, chosen)
        tools = sorted(t.name for t in executor.registry.tools)
        return page(request, who, "history.html", rows=rows, tools=tools, tool=shown.tool,
                    chosen=chosen, statuses=_DECIDED, following=following,
                    paged=shown.after is not None)  # fmt: skip

    @router.get("/confirmations/{confirmation_id}/{action}")
    async def decide_by_address(request: Request) -> Response:
        return message(request, await person(request), 405, "Use the buttons",
                       "A decision is made with the buttons on the inbox page or the"
                       " confirmation's page, not by opening its address.")  # fmt: skip

    @router.get("/{unknown:path}")
    async def unknown_page(request: Request, unknown: str) -> Response:
        text = "There is no such page: the pending confirmations are at the inbox."
        return message(request, await person(request), 404, "Not found", text)

    return router


async def _permissions(executor: Executor, who: Person) -> Collection[str]:
    return await apermissions_now(executor.permissions, who.caller)


def _theirs(who: Person, held: Confirmation, permissions: Collection[str]) -> bool:
    """Whether ``who`` may see and decide ``held``: the executor's rule, within their allow
    list (a key's allow list binds the person who signed in with it, as it does over REST)."""
    if who.allow != "all" and held.tool not in who.allow:
        return False
    if held.caller.identity == who.caller.identity:
        return True
    return refusal_for_others(who.caller, held, permissions, who.allow) is None


async def _may_decide(executor: Executor, who: Person, held: Confirmation) -> bool:
    return _theirs(who, held, await _permissions(executor, who))


DecidedKind: TypeAlias = Literal[
    "decided", "waiting", "not_found", "expired", "already", "invalid", "not_applied"
]


@dataclass(frozen=True, kw_only=True, slots=True)
class Decided:
    """What became of one decision sent from a page, read back from the ledger."""

    kind: DecidedKind
    """``decided`` (it ran or was rejected), ``waiting`` (an approval that needs another),
    ``not_found`` (none this person may decide), ``expired``, ``already`` (decided before),
    ``invalid`` (an edit the schema refused: nothing applied), ``not_applied`` (refused, still
    pending)."""
    status: int
    """The HTTP status a page of this alone answers with."""
    title: str
    """The heading of that page."""
    text: str
    """What happened, in a sentence."""
    held: Confirmation | None = None
    """The confirmation as it stands after the decision (None when there is none to show)."""
    problems: dict[str, str] | None = None
    """An invalid edit's violations by JSON pointer."""


async def decide_one(
    executor: Executor, who: Person, confirmation_id: str, action: str, fields: dict[str, str]
) -> Decided:
    """Decide one confirmation for ``who`` as a page's form says (``action`` is approve,
    reject or edit; ``fields`` the form), through ``Executor.adecide`` under their allow list:
    the single decision's path, and each of a bulk decision's."""
    before = await executor.aconfirmation(confirmation_id)
    if before is None or not await _may_decide(executor, who, before):
        return Decided(kind="not_found", status=404, title="Not found", text=_NOT_YOURS)
    if before.status == "expired":
        return Decided(kind="expired", status=410, title="Expired", text=_expired(before),
                       held=before)  # fmt: skip
    answer = await executor.adecide(
        before.id, who.caller, _decision(action, before, fields), allow=who.allow
    )
    after = await executor.aconfirmation(before.id) or before
    if after.status == "expired":
        return Decided(kind="expired", status=410, title="Expired", text=_expired(after),
                       held=after)  # fmt: skip
    if before.status != "pending" or answer.already_decided:
        return Decided(kind="already", status=409, title="Already decided",
                       text=_already(after), held=after)  # fmt: skip
    if isinstance(answer, Held) and after.status == "pending":
        return Decided(kind="waiting", status=200, title="Waiting", text=_waiting(after),
                       held=after)  # fmt: skip
    if after.status == "pending" and action == "edit":  # invalid: nothing applied
        return Decided(kind="invalid", status=422, title="Not applied", held=after,
                       text="Nothing was applied: the edited arguments are not valid.",
                       problems=_violations(answer))  # fmt: skip
    if after.status == "pending":  # refused and still pending (a rate limit, this door, ...)
        match answer:
            case Refused(code=code, message=said):
                here = code == "cannot_decide_here"  # this server's configuration: 409
            case _:
                here, said = False, "the decision was not applied"
        return Decided(kind="not_applied", status=409 if here else 422, title="Not applied",
                       text=f"Nothing was applied: {said}", held=after)  # fmt: skip
    return Decided(kind="decided", status=200, title="Decided", text=_said(after), held=after)


@dataclass(frozen=True, kw_only=True, slots=True)
class Filters:
    """What a page of the inbox or the history shows: one tool's, one conversation's, and the
    page after a cursor."""

    tool: str = ""
    thread: str = ""
    after: Cursor | None = None

    @classmethod
    def of(cls, tool: str, thread: str, after: str) -> Filters:
        """The filters of a page's query (anything malformed is left out, never an error)."""
        return cls(
            tool=tool if could_be_id(tool) else "",
            thread=thread if could_be_id(thread) else "",
            after=Cursor.parse(after) if after else None,
        )

    def query(self, after: Cursor | None) -> str:
        """The query string of the page after ``after`` under these filters."""
        given = {"tool": self.tool, "thread": self.thread}
        if after is not None:
            given["after"] = after.text()
        return urlencode({name: value for name, value in given.items() if value})


async def _listed(
    executor: Executor,
    who: Person,
    status: ConfirmationStatus | tuple[ConfirmationStatus, ...],
    shown: Filters,
    *,
    ids: list[str] | None = None,
    newest_first: bool = False,
) -> tuple[list[Confirmation], Cursor | None]:
    """A page of the confirmations of ``status`` that ``who`` may see (read from the ledger as
    such: their own, and others' when they may decide them, within their allow list), and the
    cursor of the next page when there may be one."""
    permissions = await _permissions(executor, who)
    others = "all" if decides_for_others(who.caller, permissions) else None
    found = await executor.ledger.alist_confirmations(
        status=status,
        tool=shown.tool or None,
        thread=shown.thread or None,
        tools=None if who.allow == "all" else who.allow,
        ids=ids,
        readable=Readable(identity=who.caller.identity, others=others),
        after=shown.after,
        limit=PAGE,
        newest_first=newest_first,
        unexpired_at=executor.clock() if status == "pending" else None,
    )
    following = Cursor.of(found[-1]) if len(found) == PAGE else None
    return [held for held in found if _theirs(who, held, permissions)], following


async def _decidable(
    executor: Executor, who: Person, shown: Filters, ids: list[str] | None = None
) -> list[Confirmation]:
    """A page of the pending, unexpired confirmations ``who`` may decide, oldest first."""
    return (await _listed(executor, who, "pending", shown, ids=ids))[0]


def _card(executor: Executor, held: Confirmation, now: float) -> dict[str, Any]:
    """What a card (and the detail page) shows of a pending or decided confirmation."""
    tool = executor.registry.get(held.tool)
    return {
        "id": held.id,
        "tool": held.tool,
        "title": (tool.title if tool is not None and tool.title else held.tool),
        "caller": present.asked_by(held.caller),
        "label": held.caller_label(),
        "thread": held.thread_id,
        "created_at": iso(held.created_at),
        "created": present.when(held.created_at, now),
        "expires_at": iso(held.expires_at),
        "expires": present.when(held.expires_at, now),
        "seconds_left": max(0, int(held.expires_at - now)),
        "arguments": present.node(held.input),
        "preview": present.preview_shown(held.preview),
        "needed": held.approvals_needed,
        "given": held.approvals_given,
        "separate_duties": held.separate_duties,
    }


async def _inbox_values(executor: Executor, who: Person, shown: Filters) -> dict[str, Any]:
    now = executor.clock()
    found, following = await _listed(executor, who, "pending", shown)
    items = [_card(executor, held, now) for held in found]
    return {
        "items": items,
        "entries": _entries(items),
        "notice": "",
        "problems": {},
        "edited": {},
        "filters": shown,
        "tools": sorted(t.name for t in executor.registry.tools),
        "following": None if following is None else shown.query(following),
    }


def _entries(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cards of a page in order, those of a tool with more than ``GROUP_OVER`` on it
    folded into one group where its first card was (the group states its size)."""
    counts: dict[str, int] = {}
    for item in items:
        counts[item["tool"]] = counts.get(item["tool"], 0) + 1
    entries: list[dict[str, Any]] = []
    groups: dict[str, dict[str, Any]] = {}
    for index, item in enumerate(items, start=1):
        item["n"] = index  # the card's own field ids
        if counts[item["tool"]] <= GROUP_OVER:
            entries.append({"group": False, "items": [item]})
        elif item["tool"] in groups:
            groups[item["tool"]]["items"].append(item)
        else:
            groups[item["tool"]] = {"group": True, "tool": item["tool"], "items": [item]}
            entries.append(groups[item["tool"]])
    return entries


async def _detail_values(executor: Executor, who: Person, held: Confirmation) -> dict[str, Any]:
    """What the page of one confirmation shows: the card's facts, the request that led to it,
    its approvals, what became of it and its audit trail."""
    now = executor.clock()
    trail = await executor.ledger.aaudit_rows(limit=PAGE, confirmation_ids=[held.id])
    approvals = [
        {"by": a.by, "at": present.when(a.at, now), "counts": a.input_hash == held.input_hash}
        for a in held.approvals
    ]
    decided = held.status != "pending"
    return {
        "item": _card(executor, held, now) | {"n": 1},
        "state": held.status,
        "asked": held.request or {},
        "approvals": approvals,
        "decision": _decision_shown(held, now) if decided else None,
        "trail": [
            {
                "at": present.when(float(row["at"]), now),
                "caller": row["caller"],
                "status": row["status"],
                "code": row["code"] or "",
                "duration_ms": row["duration_ms"],
                "detail": row["detail"] or "",
            }
            for row in trail
        ],
        "notice": "",
        "problems": {},
        "edited": {},
    }


def _decision_shown(held: Confirmation, now: float) -> dict[str, Any]:
    """A decided confirmation's decision as the history and the detail page show it."""
    decision = held.decision or {}
    reason = decision.get("message") if decision.get("action") == "reject" else None
    at = held.decided_at if held.decided_at is not None else held.expires_at
    return {
        "action": decision.get("action", held.status),
        "by": held.decided_by or "",
        "at": present.when(at, now),
        "at_iso": iso(at),
        "reason": reason if isinstance(reason, str) else "",
        "outcome": outcome_of(held),
    }


async def _bulk_values(executor: Executor, who: Person, ids: list[str]) -> dict[str, Any]:
    """What a bulk decision is about to decide: those of ``ids`` still waiting for ``who``
    (counted per tool), and how many of the rest are gone (decided, expired, not theirs)."""
    waiting = await _decidable(executor, who, Filters(), ids)
    per_tool: dict[str, int] = {}
    for held in waiting:
        per_tool[held.tool] = per_tool.get(held.tool, 0) + 1
    now = executor.clock()
    return {
        "items": [_card(executor, held, now) for held in waiting],
        "per_tool": sorted(per_tool.items()),
        "gone": len(ids) - len(waiting),
    }


async def _notice(executor: Executor, who: Person, decided: str) -> str:
    """What became of the confirmation this person just decided (read from the ledger)."""
    if not decided or not could_be_id(decided):
        return ""
    held = await executor.aconfirmation(decided)
    if held is None or not await _may_decide(executor, who, held):
        return ""
    if held.status == "pending":
        mine = any(a.by == approver_of(who.caller) for a in held.approvals)
        return f"{held.tool}: {_waiting(held)}" if mine else ""
    return f"{held.tool}: {_said(held)}"


async def _history(
    executor: Executor, who: Person, shown: Filters, status: str
) -> tuple[list[dict[str, Any]], str | None]:
    """A page of the decided confirmations ``who`` may see, newest first, each with what became
    of its write (from the confirmation itself: a repeat of a rejected call is no write)."""
    chosen: tuple[ConfirmationStatus, ...] = tuple(s for s in _DECIDED if s == status) or _DECIDED
    found, following = await _listed(executor, who, chosen, shown, newest_first=True)
    now = executor.clock()
    rows = [
        {
            "id": held.id,
            "tool": held.tool,
            "caller": present.asked_by(held.caller),
            "status": held.status,
            "arguments": present.node(held.input),
        }
        | _decision_shown(held, now)
        for held in found
    ]
    return rows, None if following is None else shown.query(following)


def outcome_of(held: Confirmation) -> str:
    """What became of a confirmation's write, in a few words: whether a write ran."""
    if held.status == "running":
        return "the write is running"
    match shown_outcome(held):
        case Ran():
            return "the write ran"
        case Unreadable():
            return f"{held.status}: its stored outcome is unreadable (check the ledger)"
        case Refused(code="outcome_unknown"):
            return "unknown: the write's process stopped (check the data)"
        case Refused(code="timeout" | "internal_error" | "tool_error" as code) if (
            held.status == "done"
        ):
            return f"the write failed ({code})"
        case Refused(code=code, details=details):
            reason = details.get("reason")
            why = f"{code}, {reason}" if reason else code
            return f"no write ran ({held.status}: {why})"
    return f"no write ran ({held.status})"


def _decision(action: str, held: Confirmation, fields: dict[str, str]) -> dict[str, Any]:
    if action == "approve":
        return {"action": "approve"}
    if action == "reject":
        return {"action": "reject", "message": fields.get("message", "").strip()[:2000] or None}
    return {"action": "edit", "arguments": present.rebuilt(held.input, fields)}


def _violations(answer: Answer) -> dict[str, str]:
    """The answer's schema violations by JSON pointer (``""`` for the rest)."""
    if not isinstance(answer, Refused):
        return {}
    found: dict[str, str] = {}
    for violation in answer.details.get("violations", []):
        path = str(violation.get("path", ""))
        found[path] = (found.get(path, "") + " " + str(violation.get("message", ""))).strip()
    if not found:
        found[""] = answer.message
    return found


def _said(held: Confirmation) -> str:
    action = (held.decision or {}).get("action", held.status)
    outcome = shown_outcome(held)
    if isinstance(outcome, Ran):
        return "edited; the write ran" if action == "edit" else "approved; the write ran"
    if action == "reject":
        return "rejected; nothing ran"
    if held.status == "running":
        return "approved; the write is running"
    return f"{action}: {outcome.message if isinstance(outcome, Refused) else held.status}"


def _waiting(held: Confirmation) -> str:
    return (
        f"approved, {held.approvals_given} of {held.approvals_needed} approvals; nothing runs"
        " until another person approves it"
    )


def _already(held: Confirmation) -> str:
    action = (held.decision or {}).get("action", held.status)
    when = iso(held.decided_at) if held.decided_at else "earlier"
    return (
        f"This confirmation was already decided: {action} by {held.decided_by or 'someone'}"
        f" at {when} ({held.status}). Nothing ran again."
    )


def _expired(held: Confirmation) -> str:
    return f"This confirmation expired at {held.expires_at_iso}: nothing ran. Ask again."


def _root(request: Request) -> str:
    """Where the inbox is mounted (under a host app's prefix too)."""
    return str(request.scope.get("root_path", "")) + "/ui"
