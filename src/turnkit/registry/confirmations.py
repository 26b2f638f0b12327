"""Deciding a held write: approve, reject (with a message) or edit (new input, same tool).

Pending -> decided is one atomic update in the ledger, so deciding twice, or from two processes at
once, runs the write at most once; everyone else gets the stored outcome. Approval re-runs the whole
pipeline from step 1 as the caller who was held, with a single-use token that lets it past the hold.
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from turnkit.registry import answers, steps
from turnkit.registry.answers import Answer
from turnkit.registry.caller import Caller
from turnkit.registry.effects import Pause, Permissions, Steps, Store
from turnkit.registry.ledger.records import Confirmation, iso
from turnkit.registry.pipeline import (
    OUTCOME_UNKNOWN,
    POLL_SECONDS,
    WAIT_GRACE,
    Call,
    Setup,
    execute_steps,
    settings_now,
)
from turnkit.registry.visibility import Allow

__all__ = [
    "CONFIRM_ANY",
    "Decision",
    "DecisionAction",
    "confirm_steps",
    "current_steps",
    "parse_decision",
]

CONFIRM_ANY = "system.confirm_any"
"""The permission that lets a person decide confirmations held for someone else."""

DecisionAction: TypeAlias = Literal["approve", "reject", "edit"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Decision:
    """A person's decision on a held write.

    Example:
        >>> Decision.edit({"prices": [{"sku": "TEA-0001", "price": 4.0}]}).action
        'edit'
    """

    action: DecisionAction
    """``approve`` runs the held input, ``reject`` runs nothing, ``edit`` runs ``input`` instead."""
    message: str | None = None
    """Why it was rejected (given to the model)."""
    input: dict[str, Any] | None = field(default=None)
    """The replacement input of an edit, for the same tool; validated again."""

    @classmethod
    def approve(cls) -> Decision:
        """Run the held call as it is."""
        return cls(action="approve")

    @classmethod
    def reject(cls, message: str | None = None) -> Decision:
        """Run nothing; ``message`` tells the model why."""
        return cls(action="reject", message=message)

    @classmethod
    def edit(cls, input: dict[str, Any]) -> Decision:
        """Run the same tool with ``input`` instead."""
        return cls(action="edit", input=input)

    def to_json(self) -> dict[str, Any]:
        """The decision as JSON data, as the ledger stores it."""
        data: dict[str, Any] = {"action": self.action}
        if self.message is not None:
            data["message"] = self.message
        if self.input is not None:
            data["input"] = self.input
        return data


def parse_decision(value: object) -> Decision | str:
    """A ``Decision`` from a ``Decision``, ``"approve"``, ``"reject"`` or a dict; else the problem.

    Accepted dicts: ``{"action": "approve"}``, ``{"action": "reject", "message": "..."}``,
    ``{"action": "edit", "input": {...}}``.
    """
    if isinstance(value, Decision):
        return value
    if value in ("approve", "reject"):
        return Decision(action=value)  # type: ignore[arg-type]  # checked just above
    if not isinstance(value, Mapping):
        return "a decision is 'approve', 'reject', or an object with 'action'"
    if "input" in value and "arguments" in value:
        return "give the edit's new input once: 'input' or 'arguments'"
    action, message = value.get("action"), value.get("message")
    new_input = value.get("input", value.get("arguments"))
    unknown = sorted(set(value) - {"action", "message", "input", "arguments"})
    if unknown:
        return f"unknown decision fields {unknown}; use 'action', 'message', 'input'"
    if action not in ("approve", "reject", "edit"):
        return f"decision action {action!r} is not 'approve', 'reject' or 'edit'"
    if message is not None and (action != "reject" or not isinstance(message, str)):
        return "'message' is a string, and only a rejection carries one"
    if action == "edit" and not isinstance(new_input, dict):
        return "an edit needs 'input': the new input object for the same tool"
    if action != "edit" and new_input is not None:
        return "only an edit carries 'input'"
    return Decision(action=action, message=message, input=new_input)


def confirm_steps(
    setup: Setup,
    confirmation_id: object,
    decider: Caller,
    decision: object,
    allow: Allow = "all",
) -> Steps[Answer]:
    """Decide ``confirmation_id`` for ``decider`` and answer with the (stored) outcome.

    ``allow`` is the deciding key's allow list now; the held caller deciding runs under it.
    """
    parsed = parse_decision(decision)
    if isinstance(parsed, str):
        return answers.error("invalid_input", f"invalid decision: {parsed}")
    if not isinstance(confirmation_id, str):
        return answers.error("not_found", f"no confirmation {confirmation_id!r}")
    held: Confirmation | None = yield Store("get_confirmation", (confirmation_id,))
    if held is None:
        return answers.error("not_found", f"no confirmation {confirmation_id[:80]!r}")
    if decider.identity != held.caller.identity:
        permissions = yield Permissions(decider)
        if CONFIRM_ANY not in permissions:
            return answers.error(
                "forbidden",
                f"confirmation {held.id!r} was held for another caller; only they, or someone"
                f" with the permission {CONFIRM_ANY!r}, may decide it",
            )
    settings = yield from settings_now(setup)
    now = setup.clock()
    if held.status == "pending" and held.expires_at <= now:
        yield from _expire(held, now)
        return (yield from _settled(setup, held.id, settings.handler_timeout))
    if held.status != "pending":
        return (yield from _settled(setup, held.id, settings.handler_timeout))

    if parsed.action == "reject":
        yield Store(
            "close_confirmation",
            (held.id,),
            {
                "status": "rejected",
                "outcome": answers.rejected(parsed.message),
                "now": now,
                "decided_by": decider.identity,
                "decision": parsed.to_json(),
            },
        )
        return (yield from _settled(setup, held.id, settings.handler_timeout))

    new_input, new_hash = None, None
    if parsed.action == "edit":
        problem, new_input, new_hash = _checked_edit(setup, held, parsed, settings)
        if problem is not None:
            return problem
    token = secrets.token_urlsafe(24)
    won = yield Store(
        "claim_confirmation",
        (held.id,),
        {
            "decided_by": decider.identity,
            "decision": parsed.to_json(),
            "token": token,
            "now": now,
            "input": new_input,
            "input_hash": new_hash,
        },
    )
    if not won:  # another process decided first, or the time ran out just now
        return (yield from _settled(setup, held.id, settings.handler_timeout))
    run = Call(  # the held caller deciding runs with their caller now (a key's current scopes)
        caller=decider if decider.identity == held.caller.identity else held.caller,
        name=held.tool,
        input=held.input if new_input is None else new_input,
        control={"confirm_token": token},
        allow=allow if decider.identity == held.caller.identity else "all",
        call_id=str(uuid.uuid4()),
        confirmation_id=held.id,
    )
    try:
        outcome = yield from execute_steps(setup, run)
    except Exception:
        if (
            not run.started
        ):  # nothing ran (a provider failed, the run was cancelled): undo the claim
            yield Store("reopen_confirmation", (held.id,))
        raise
    if answers.is_error(outcome, "rate_limited"):  # nothing ran: the person may approve again
        yield Store("reopen_confirmation", (held.id,))
        outcome["error"]["message"] += "; the confirmation stays pending: approve it again later"
        return outcome
    yield Store("finish_confirmation", (held.id, outcome))
    return outcome


def current_steps(setup: Setup, confirmation_id: str) -> Steps[Confirmation | None]:
    """The confirmation as it stands now, or None. One whose time ran out while it waited is
    closed as expired first (once, in the ledger), and an approved write whose run stopped (its
    process died) is closed as ``outcome_unknown``, so its ``outcome`` says so."""
    held: Confirmation | None = yield Store("get_confirmation", (confirmation_id,))
    now = setup.clock()
    if held is not None and held.status == "pending" and held.expires_at <= now:
        yield from _expire(held, now)
        held = yield Store("get_confirmation", (confirmation_id,))
    elif held is not None and held.status == "running":
        settings = yield from settings_now(setup)
        stale_before = now - settings.handler_timeout - WAIT_GRACE
        if (held.decided_at or 0) < stale_before:
            yield from _abandon(held.id, stale_before)
            held = yield Store("get_confirmation", (confirmation_id,))
    return held


def _abandon(confirmation_id: str, stale_before: float) -> Steps[None]:
    """Close an approved write whose run stopped before ``stale_before``: outcome unknown."""
    what = f"approved write of {confirmation_id!r}"
    unknown = answers.error("outcome_unknown", OUTCOME_UNKNOWN.format(what=what))
    yield Store("abandon_confirmation", (confirmation_id, unknown, stale_before))


def _expire(held: Confirmation, now: float) -> Steps[None]:
    """Close a pending confirmation whose time ran out (a no-op once decided or closed)."""
    expired = answers.error(
        "confirmation_expired",
        f"confirmation {held.id!r} expired at {iso(held.expires_at)}; nothing was run",
    )
    yield Store(
        "close_confirmation",
        (held.id,),
        {"status": "expired", "outcome": expired, "now": now, "only_expired": True},
    )


def _checked_edit(
    setup: Setup, held: Confirmation, decision: Decision, settings: Any
) -> tuple[Answer | None, dict[str, Any] | None, str | None]:
    """An edit's new input checked against the same tool's schema; nothing is applied if not."""
    tool = setup.registry.get(held.tool)
    if tool is None:
        return (
            answers.error("not_found", f"the tool {held.tool!r} is no longer registered"),
            None,
            None,
        )
    problem, text = steps.input_error(tool, decision.input, settings)
    if problem is None:
        problem = steps.too_many_items(tool, decision.input)  # type: ignore[arg-type]
    if problem is not None:
        problem["error"]["message"] = "the edit was not applied: " + problem["error"]["message"]
        return problem, None, None
    return None, decision.input, steps.input_hash(text)


def _settled(setup: Setup, confirmation_id: str, timeout: float) -> Steps[Answer]:
    """The stored outcome of a decided confirmation, waiting while its write runs elsewhere."""
    deadline = time.monotonic() + timeout + WAIT_GRACE
    stale_before = setup.clock() - timeout - WAIT_GRACE
    while True:
        current: Confirmation | None = yield Store("get_confirmation", (confirmation_id,))
        if current is None:
            return answers.error("not_found", f"no confirmation {confirmation_id!r}")
        if current.outcome is not None:
            return current.outcome
        if current.status == "running" and (current.decided_at or 0) < stale_before:
            yield from _abandon(confirmation_id, stale_before)
            continue
        if current.status == "pending":
            return answers.error(
                "in_progress", f"confirmation {confirmation_id!r} is still waiting for a decision"
            )
        if time.monotonic() >= deadline:
            return answers.error(
                "in_progress",
                f"the approved write of {confirmation_id!r} has not finished; its outcome is"
                " unknown yet: ask again later",
            )
        yield Pause(POLL_SECONDS)
