"""Writes that need more than one person: each approval recorded, the last one claims the
write; separate duties between people, not keys; an edit asks again what its new input needs
(docs/architecture.md §13).

An approval is a row per (confirmation, person) holding the input hash approved. The claim
(``Ledger.claim_confirmation``) counts the rows for the input as it stands, so the approvals
given before an edit count no more, and of two last approvals at once exactly one claims.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from turnkit.executor import previews
from turnkit.executor.answers import Answer, Held, Refused
from turnkit.executor.closing import expire
from turnkit.executor.effects import Environment, Permissions, Steps, on_ledger
from turnkit.executor.pipeline import hold_need
from turnkit.executor.settled import decided_before, settled
from turnkit.ledger import Ledger
from turnkit.ledger.records import Confirmation, Preview
from turnkit.registry import ids
from turnkit.registry.caller import Caller
from turnkit.registry.context import CallContext
from turnkit.registry.settings import Settings
from turnkit.registry.tool import Tool

__all__ = [
    "Edit",
    "approve_one",
    "approver_of",
    "arguments_changed",
    "edited",
    "progress",
    "same_person",
    "separate_refusal",
    "still_waiting",
]


def same_person(decider: Caller, held: Caller) -> bool:
    """Whether ``decider`` is the person ``held`` acts for: the same caller, or any key or
    session of the same user (separate duties are between people, not between their keys)."""
    return decider.identity == held.identity or (
        decider.user_id is not None and decider.user_id == held.user_id
    )


def approver_of(decider: Caller) -> str:
    """Who an approval counts for: the person (``user:<id>``) when the decider has a user, so
    two keys of one person are one approver; else the caller's identity."""
    return f"user:{decider.user_id}" if decider.user_id else decider.identity


def separate_refusal(confirmation_id: str) -> Refused:
    """The answer to the person whose write it is, approving or editing under separate duties."""
    return Refused(
        "forbidden",
        f"confirmation {confirmation_id!r} needs another person's approval (separate duties):"
        " the person whose write it is may not approve or edit it; they may still reject it",
    )


@dataclass(frozen=True, slots=True)
class Edit:
    """An edit's new input, checked, and what it asks of its approvers."""

    input: dict[str, Any]
    input_hash: str
    approvals: int
    """The approvals it needs: the danger check's ``Quorum`` for the new input, never fewer
    than the hold's."""
    separate_duties: bool
    preview: Preview | None
    """The tool's preview of the new input (the old one would tell approvers a wrong story)."""
    decision: dict[str, Any]
    """The edit, as the ledger stores the decision."""


def edited(
    env: Environment,
    held: Confirmation,
    tool: Tool,
    new_input: dict[str, Any],
    new_hash: str,
    decision: dict[str, Any],
    settings: Settings,
) -> Steps[Edit]:
    """What an edit's new input needs: the danger check and the preview run again on it, as a
    dry run for the held caller (an edit must not slip a write past the quorum its new input
    would have been held for)."""
    permissions = frozenset() if held.caller.kind == "public" else (yield Permissions(held.caller))
    ctx = CallContext(
        caller=held.caller,
        tool=tool,
        permissions=permissions,
        settings=settings,
        call_id=ids.uuid4_text(),
        dry_run=True,
        idempotency_key=held.idempotency_key,
    )
    need = yield from hold_need(tool, held.caller, new_input, ctx)
    approvals, separate = previews.quorum(tool, need)
    preview = yield from previews.preview_of(tool, new_input, ctx)
    return Edit(
        input=new_input,
        input_hash=new_hash,
        approvals=max(approvals, held.approvals_needed),
        separate_duties=separate or held.separate_duties,
        preview=preview,
        decision=decision,
    )


def arguments_changed(confirmation_id: str) -> Refused:
    """The answer to a decision on arguments that are no longer the held ones."""
    return Refused(
        "arguments_changed",
        f"the arguments of confirmation {confirmation_id!r} were edited by someone else since"
        " you looked: nothing was decided. Look at them again",
    )


def approve_one(
    env: Environment,
    held: Confirmation,
    decider: Caller,
    edit: Edit | None,
    now: float,
    seen: str | None = None,
) -> Steps[Answer | Confirmation]:
    """Record ``decider``'s approval of a write that needs several (an edit first replaces its
    input, preview and quorum in one statement), for the input hashed ``seen`` (the arguments
    the person was shown) or else as held when read. The confirmation as it stands when the
    approvals that count may now be enough (the caller claims it); else the answer for the
    decider: waiting for more, or why theirs was not recorded."""
    digest = held.input_hash if seen is None else seen
    timeout = env.defaults.handler_timeout
    if edit is not None:
        replaced = yield on_ledger(
            Ledger.edit_pending,
            held.id,
            edit.input,
            edit.input_hash,
            now,
            preview=edit.preview,
            approvals_needed=edit.approvals,
            separate_duties=edit.separate_duties,
            decision=edit.decision,
        )
        if not replaced:
            return (yield from decided_before(env, held.id, timeout))
        digest = edit.input_hash
    recorded = yield on_ledger(Ledger.add_approval, held.id, approver_of(decider), digest, now)
    current: Confirmation | None = yield on_ledger(Ledger.get_confirmation, held.id)
    if current is None or current.status != "pending":
        return (yield from decided_before(env, held.id, timeout))
    if not recorded and current.expires_at <= now:
        yield from expire(current, now)
        return (yield from settled(env, held.id, timeout))
    if current.input_hash != digest:
        return arguments_changed(held.id)
    if current.approvals_given >= current.approvals_needed:
        return current
    return progress(current)


def still_waiting(confirmation_id: str) -> Steps[Answer | None]:
    """After a claim that lost: the progress of a confirmation still pending, or None."""
    current: Confirmation | None = yield on_ledger(Ledger.get_confirmation, confirmation_id)
    if current is None or current.status != "pending":
        return None
    return progress(current)


def progress(held: Confirmation) -> Held:
    """The answer to an approver of a write that still needs more approvals."""
    return Held(held.id, held.expires_at_iso, held.approvals_given, held.approvals_needed)
