"""One decision sent from an inbox page, and what became of it, in a person's words.

A card's form, a confirmation's own page and each item of a bulk decision all decide through
``decide_one``: ``Executor.adecide`` under the person's allow list, the outcome read back from
the ledger (ran, rejected, waiting for another approval, decided before, expired, refused). The
write runs at most once whoever decides first, from whichever process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from turnkit.executor.answers import Answer, Held, Ran, Refused, shown_outcome
from turnkit.executor.confirmations import approver_of, could_be_id
from turnkit.executor.executor import Executor
from turnkit.ledger.records import Confirmation, iso
from turnkit.server.ui import present
from turnkit.server.ui.access import may_decide
from turnkit.server.ui.session import Person

__all__ = ["NOT_YOURS", "Decided", "DecidedKind", "decide_one", "notice"]

NOT_YOURS = "There is no such confirmation for you to decide."
"""What a page says of a confirmation that is not there, or not this person's to see."""


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
    if before is None or not await may_decide(executor, who, before):
        return Decided(kind="not_found", status=404, title="Not found", text=NOT_YOURS)
    if before.status == "expired":
        return Decided(kind="expired", status=410, title="Expired", text=_expired(before),
                       held=before)  # fmt: skip
    seen = fields.get("seen") or None  # the arguments the page showed (a form may lack it)
    answer = await executor.adecide(
        before.id, who.caller, _decision(action, before, fields), allow=who.allow, seen=seen
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
                here = code in ("cannot_decide_here", "arguments_changed")  # 409 Conflict
            case _:
                here, said = False, "the decision was not applied"
        return Decided(kind="not_applied", status=409 if here else 422, title="Not applied",
                       text=f"Nothing was applied: {said}", held=after)  # fmt: skip
    return Decided(kind="decided", status=200, title="Decided", text=_said(after), held=after)


async def notice(executor: Executor, who: Person, decided: str) -> str:
    """What became of the confirmation this person just decided (read from the ledger)."""
    if not decided or not could_be_id(decided):
        return ""
    held = await executor.aconfirmation(decided)
    if held is None or not await may_decide(executor, who, held):
        return ""
    if held.status == "pending":
        mine = any(a.by == approver_of(who.caller) for a in held.approvals)
        return f"{held.tool}: {_waiting(held)}" if mine else ""
    return f"{held.tool}: {_said(held)}"


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
