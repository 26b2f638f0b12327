"""Deciding a held write: approve, reject (with a message) or edit (new input, same tool).

Pending -> decided is one atomic update in the ledger, so deciding twice, or from two processes at
once, runs the write at most once; everyone else gets the stored outcome. Approval re-runs the whole
pipeline from step 1 as the caller who was held, with a single-use token that lets it past the hold.
"""

from __future__ import annotations

import secrets
from collections.abc import Collection
from dataclasses import replace
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from turnkit.executor import steps, tracing
from turnkit.executor.answers import NO_REASON, Answer, Refused, Rejected
from turnkit.executor.calls import Call
from turnkit.executor.closing import close_held, expire
from turnkit.executor.door import door_refusal
from turnkit.executor.effects import Environment, Permissions, Steps, on_ledger
from turnkit.executor.pipeline import WAIT_GRACE, execute_steps, settings_now
from turnkit.executor.quorum import (
    Edit,
    approve_one,
    approver_of,
    arguments_changed,
    edited,
    same_person,
    separate_refusal,
    still_waiting,
)
from turnkit.executor.settled import abandon, decided_before, settled
from turnkit.ledger import Ledger
from turnkit.ledger.keys import ApiKey
from turnkit.ledger.records import Confirmation, Readable
from turnkit.registry import ids
from turnkit.registry.caller import Caller
from turnkit.registry.control import CONTROL_FIELDS
from turnkit.registry.visibility import Allow

__all__ = [
    "CONFIRM_ANY",
    "DECIDE_SCOPE",
    "Decision",
    "DecisionAction",
    "approver_of",
    "confirm_steps",
    "could_be_id",
    "current_steps",
    "decides_for_others",
    "key_gone",
    "key_holds_steps",
    "parse_decision",
    "refusal_for_others",
    "same_person",
]

CONFIRM_ANY = "system.confirm_any"
"""The permission that lets a person decide confirmations held for someone else."""
DECIDE_SCOPE = "system.confirmations:decide"
"""The scope a key needs, beside its owner's ``CONFIRM_ANY``, to see and decide confirmations
held for others: a key limited to reading must not approve anyone's writes."""
ID_LIMIT = 200
"""The longest text that may name a confirmation (its ids are uuids)."""


def refusal_for_others(
    decider: Caller, held: Confirmation, permissions: Collection[str], allow: Allow = "all"
) -> str | None:
    """Why ``decider`` (holding ``permissions`` now, limited to ``allow``) may not see or decide
    ``held``, a confirmation held for another caller; None when they may. The one rule for every
    surface: the executor, REST and MCP.

    A person deciding for others needs ``CONFIRM_ANY``; a key also needs the scope
    ``DECIDE_SCOPE`` and, with an allow list, the held tool in it.
    """
    who = f"confirmation {held.id!r} was held for another caller"
    if CONFIRM_ANY not in permissions:
        return f"{who}; only they, or someone with the permission {CONFIRM_ANY!r}, may decide it"
    if decider.kind == "key" and DECIDE_SCOPE not in decider.scopes:
        return f"{who}; a key decides others' confirmations only with the scope {DECIDE_SCOPE!r}"
    if allow != "all" and held.tool not in allow:
        return f"{who}, for {held.tool!r}, which this key's allow list leaves out"
    return None


def decides_for_others(decider: Caller, permissions: Collection[str]) -> bool:
    """Whether ``decider`` (holding ``permissions`` now) may decide confirmations held for others
    (those of the tools its allow list names, for a key that has one): ``refusal_for_others``'s
    rule without a confirmation at hand, for listing."""
    return CONFIRM_ANY in permissions and (decider.kind != "key" or DECIDE_SCOPE in decider.scopes)


DecisionAction: TypeAlias = Literal["approve", "reject", "edit"]


class Decision(BaseModel):
    """A person's decision on a held write: the one grammar of decisions, for the executor, the
    turn graph's resume value, the command line and every other surface.

    Written as ``"approve"``, ``"reject"``, or an object: ``{"action": "approve"}``,
    ``{"action": "reject", "message": "why"}``, ``{"action": "edit", "arguments": {...}}``.

    Examples:
        >>> Decision.edit({"prices": [{"sku": "TEA-0001", "price": 4.0}]}).action
        'edit'
        >>> Decision.of("reject")
        Decision(action='reject', message=None, arguments=None)
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: DecisionAction
    """``approve`` runs the held input, ``reject`` runs nothing, ``edit`` runs ``arguments``."""
    message: str | None = None
    """Why it was rejected (given to the model); a rejection only."""
    arguments: dict[str, Any] | None = None
    """The new input of an edit, for the same tool, validated again; an edit only."""

    @model_validator(mode="before")
    @classmethod
    def _words(cls, value: Any) -> Any:
        """``"approve"`` / ``"reject"`` as the objects they abbreviate."""
        return {"action": value} if value in ("approve", "reject") else value

    @model_validator(mode="after")
    def _fields_fit_the_action(self) -> Decision:
        if self.message is not None and self.action != "reject":
            raise ValueError("only a rejection carries a 'message'")
        if self.action == "edit" and self.arguments is None:
            raise ValueError("an edit needs 'arguments': the new input object for the same tool")
        if self.action != "edit" and self.arguments is not None:
            raise ValueError("only an edit carries 'arguments'")
        control = sorted(CONTROL_FIELDS & set(self.arguments or ()))
        if control:
            raise ValueError(
                f"an edit's 'arguments' are the tool's new input; {control} are control fields"
                " of a call, not input: leave them out"
            )
        return self

    @classmethod
    def approve(cls) -> Decision:
        """Run the held call as it is."""
        return cls(action="approve")

    @classmethod
    def reject(cls, message: str | None = None) -> Decision:
        """Run nothing; ``message`` tells the model why."""
        return cls(action="reject", message=message)

    @classmethod
    def edit(cls, arguments: dict[str, Any]) -> Decision:
        """Run the same tool with ``arguments`` instead."""
        return cls(action="edit", arguments=arguments)

    @classmethod
    def of(cls, value: object) -> Decision:
        """The decision ``value`` writes (a ``Decision``, a word, or an object).

        Raises:
            pydantic.ValidationError: ``value`` is not a decision.
        """
        return value if isinstance(value, Decision) else cls.model_validate(value)

    def to_json(self) -> dict[str, Any]:
        """The decision as JSON data, as the ledger stores it."""
        return self.model_dump(exclude_none=True)


def parse_decision(value: object) -> Decision | str:
    """A ``Decision`` from what ``Decision.of`` takes, or what is wrong with ``value``."""
    try:
        return Decision.of(value)
    except ValidationError as exc:
        return "; ".join(_problem(p) for p in exc.errors()[:3]) + (
            ". A decision is 'approve', 'reject', {'action': 'reject', 'message': ...} or"
            " {'action': 'edit', 'arguments': {...}}"
        )


def _problem(problem: Any) -> str:
    where = ".".join(str(part) for part in problem["loc"])
    message = str(problem["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def confirm_steps(
    env: Environment,
    confirmation_id: object,
    decider: Caller,
    decision: object,
    allow: Allow = "all",
    seen: str | None = None,
) -> Steps[Answer]:
    """Decide ``confirmation_id`` for ``decider`` and answer with the (stored) outcome, in a
    ``decide`` span linked to the hold's (``tracing``).

    ``allow`` is the deciding key's allow list now; the held caller deciding runs under it.
    ``seen``: the input hash of the arguments the person was shown; an approval or an edit of
    other arguments (another approver edited them since) is refused ``arguments_changed``, in
    the statement that would record it.
    """
    deciding = tracing.decision_started(confirmation_id, decider)
    try:
        answer = yield from _decide(env, deciding, confirmation_id, decider, decision, allow, seen)
    except BaseException as stop:
        tracing.decision_failed(deciding, stop)
        raise
    tracing.decision_ended(deciding, answer)
    return answer


def _decide(
    env: Environment,
    deciding: tracing.Deciding,
    confirmation_id: object,
    decider: Caller,
    decision: object,
    allow: Allow,
    seen: str | None,
) -> Steps[Answer]:
    parsed = parse_decision(decision)
    if isinstance(parsed, str):
        return Refused("invalid_input", f"invalid decision: {parsed}")
    if not could_be_id(confirmation_id):
        return Refused("not_found", f"no confirmation {str(confirmation_id)[:80]!r}")
    cid: str = confirmation_id  # type: ignore[assignment]  # could_be_id: a str
    held: Confirmation | None = yield on_ledger(Ledger.get_confirmation, cid)
    if held is None:
        return Refused("not_found", f"no confirmation {cid[:80]!r}")
    if decider.identity != held.caller.identity:
        permissions = yield Permissions(decider)
        refused = refusal_for_others(decider, held, permissions, allow)
        if refused is not None:
            return Refused("forbidden", refused)
    overrides = yield on_ledger(Ledger.settings)
    settings = env.settings(overrides)
    now = env.clock()
    tracing.decision_of(deciding, held, parsed.action, now)
    if held.status == "pending" and held.expires_at <= now:
        yield from expire(held, now)
        return (yield from settled(env, held.id, settings.handler_timeout))
    if held.status != "pending":
        return (yield from decided_before(env, held.id, settings.handler_timeout))

    if parsed.action == "reject":  # runs nothing: any door may reject, whatever it declares
        rejected = Rejected(parsed.message or NO_REASON)
        closed = yield from close_held(held, "rejected", rejected, now, decider, parsed.to_json())
        if not closed:  # another process decided first, or the time ran out just now
            return (yield from decided_before(env, held.id, settings.handler_timeout))
        return (yield from settled(env, held.id, settings.handler_timeout))

    edit = parsed.action == "edit"
    if held.separate_duties and same_person(decider, held.caller):
        return separate_refusal(held.id)
    if seen is not None and seen != held.input_hash:
        return arguments_changed(held.id)
    blocked = yield from door_refusal(env, held, settings, overrides, edit=edit)
    if blocked is not None:  # this door cannot run it as it was held: it stays pending
        return blocked
    # the write runs as the held caller with their rights now: the deciding caller when it is
    # them (a key's scopes and allow list as the request carried them), else as held
    himself = decider.identity == held.caller.identity
    runner, run_allow = (decider, allow) if himself else (held.caller, "all")
    key: ApiKey | None = None
    if held.caller.kind == "key":  # the key the write was held under, as the ledger has it now
        key = yield on_ledger(Ledger.api_key, held.caller.key_id or "")
        if key is not None:  # (None: a key the application keeps itself, not in the ledger)
            if key.gone(now) is not None:
                return (yield from _refuse_revoked(env, held, key, now, decider, parsed))
            if not himself:
                runner, run_allow = key.caller, key.allowed

    change: Edit | None = None
    if edit:
        checked = yield from _edit_of(env, held, parsed, settings)
        if isinstance(checked, Refused):
            return checked
        change = checked
        if change.separate_duties and same_person(decider, held.caller):
            return separate_refusal(held.id)
    decided = parsed.to_json()
    several = held.approvals_needed > 1 or (change is not None and change.approvals > 1)
    if several:  # one of several approvals: recorded; the last one claims and runs it
        ready = yield from approve_one(env, held, decider, change, now, seen)
        if not isinstance(ready, Confirmation):
            return ready
        held, change = ready, None  # its input, as approved (an edit is in place already)
        if (held.decision or {}).get("action") == "edit":
            decided = held.decision or decided  # the write runs edited: say so
    token = secrets.token_urlsafe(24)
    won = yield on_ledger(
        Ledger.claim_confirmation,
        held.id,
        decided_by=decider.identity,
        decision=decided,
        token=token,
        now=now,
        input=None if change is None else change.input,
        input_hash=None if change is None else change.input_hash,
        key_id=None if key is None else key.id,
        preview=None if change is None else change.preview,
        seen=seen if not several else None,
    )
    if not won and several:  # another approval came, or an edit reset them
        waiting = yield from still_waiting(held.id)
        if waiting is not None:
            return waiting
    if won and several:  # the input the claim counted approvals for, frozen now it runs
        held = (yield on_ledger(Ledger.get_confirmation, held.id)) or held
    if not won and seen is not None:  # edited by another approver since the person looked?
        now_held: Confirmation | None = yield on_ledger(Ledger.get_confirmation, held.id)
        if now_held is not None and now_held.status == "pending" and now_held.input_hash != seen:
            return arguments_changed(held.id)
    if not won:  # another process decided first, the time ran out, or the key went just now
        if key is not None:
            now_key: ApiKey | None = yield on_ledger(Ledger.api_key, key.id)
            if now_key is not None and now_key.gone(env.clock()) is not None:
                return (yield from _refuse_revoked(env, held, now_key, now, decider, parsed))
        return (yield from decided_before(env, held.id, settings.handler_timeout))
    run = Call(  # as the held caller with their rights now (a key's scopes and allow list)
        caller=runner,
        name=held.tool,
        input=held.input if change is None else change.input,
        control={"confirm_token": token},
        allow=run_allow,
        call_id=ids.uuid4_text(),
        confirmation_id=held.id,
        thread=held.thread_id,
        parent=deciding.span,
    )
    try:
        answer = yield from execute_steps(env, run)
    except Exception:
        if (
            not run.started
        ):  # nothing ran (a provider failed, the run was cancelled): undo the claim
            yield on_ledger(Ledger.reopen_confirmation, held.id)
        raise
    if isinstance(answer, Refused) and answer.code == "rate_limited":
        # nothing ran: the person may approve again
        yield on_ledger(Ledger.reopen_confirmation, held.id)
        pending = "; the confirmation stays pending: approve it again later"
        return replace(answer, message=answer.message + pending)
    if not run.started and held.reserved_units and held.reserved_window is not None:
        # closed without a run (the held user's rights now): its hold's units come back
        yield on_ledger(
            Ledger.refund_all, steps.budgets(held.caller), held.reserved_window, held.reserved_units
        )
    outcome = answer.to_json()  # as the ledger stores it
    yield on_ledger(Ledger.finish_confirmation, held.id, outcome)
    return answer


def could_be_id(confirmation_id: object) -> bool:
    """Whether ``confirmation_id`` could name a confirmation: text every database can be asked
    for (no NUL, no lone surrogate, at most ``ID_LIMIT`` characters). Anything else names none."""
    return (
        isinstance(confirmation_id, str)
        and 0 < len(confirmation_id) <= ID_LIMIT
        and steps.plain_text(confirmation_id)
    )


def current_steps(env: Environment, confirmation_id: str) -> Steps[Confirmation | None]:
    """The confirmation as it stands now, or None. One whose time ran out while it waited is
    closed as expired first (once, in the ledger), and an approved write whose run stopped (its
    process died) is closed as ``outcome_unknown``, so its ``outcome`` says so."""
    if not could_be_id(confirmation_id):
        return None
    held: Confirmation | None = yield on_ledger(Ledger.get_confirmation, confirmation_id)
    now = env.clock()
    if held is not None and held.status == "pending" and held.expires_at <= now:
        yield from expire(held, now)
        held = yield on_ledger(Ledger.get_confirmation, confirmation_id)
    elif held is not None and held.status == "running":
        settings = yield from settings_now(env)
        stale_before = now - settings.handler_timeout - WAIT_GRACE
        if (held.decided_at or 0) < stale_before:
            yield from abandon(held.id, stale_before)
            held = yield on_ledger(Ledger.get_confirmation, confirmation_id)
    return held


def _refuse_revoked(
    env: Environment,
    held: Confirmation,
    key: ApiKey,
    now: float,
    decider: Caller,
    decision: Decision,
) -> Steps[Answer]:
    """Close a confirmation whose API key was revoked or expired: ``forbidden``, nothing ran."""
    outcome = key_gone(key, now)
    closed = yield from close_held(held, "forbidden", outcome, now, decider, decision.to_json())
    timeout = env.defaults.handler_timeout  # nothing runs: no write to wait for
    if not closed:
        return (yield from decided_before(env, held.id, timeout))
    return (yield from settled(env, held.id, timeout))


def key_holds_steps(env: Environment, key: ApiKey, by: str) -> Steps[int]:
    """Close every pending confirmation held under ``key`` as ``forbidden`` when the key was
    revoked or has expired (``turnkit keys revoke`` does it at once; deciding one does it too);
    how many were closed. ``by``: who is recorded as having closed them."""
    now = env.clock()
    if key.gone(now) is None:
        return 0
    found: list[Confirmation] = yield on_ledger(
        Ledger.list_confirmations, status="pending", readable=Readable(identity=key.caller.identity)
    )
    closed = 0
    for held in found:
        closed += bool((yield from close_held(held, "forbidden", key_gone(key, now), now, by)))
    return closed


def key_gone(key: ApiKey, now: float) -> Refused:
    """The outcome of a write held under ``key``, revoked or expired by ``now``: forbidden,
    nothing ran, ``details.reason`` "key revoked" or "key expired"."""
    return Refused(
        "forbidden",
        f"{key.refused(now)}: the write it asked for does not run (a key's holds end with it)",
        {"reason": f"key {key.gone(now)}"},
    )


def _edit_of(
    env: Environment, held: Confirmation, decision: Decision, settings: Any
) -> Steps[Edit | Refused]:
    """An edit's new input checked against the same tool's schema (nothing is applied if not),
    and what it needs of its approvers (``quorum.edited``)."""
    tool = env.registry.get(held.tool)
    if tool is None:
        return Refused("not_found", f"the tool {held.tool!r} is no longer registered")
    problem, text = steps.input_error(tool, decision.arguments, settings)
    if problem is None:
        problem = steps.too_many_items(tool, decision.arguments or {})
    if problem is not None:
        return replace(problem, message="the edit was not applied: " + problem.message)
    new_input: dict[str, Any] = decision.arguments or {}
    digest = steps.input_hash(text)
    return (yield from edited(env, held, tool, new_input, digest, decision.to_json(), settings))
