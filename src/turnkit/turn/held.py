"""Writes held for a person, in a round: which are still waiting, one question for all of them
(asked through the door's ``interrupt``), and what each decision came to."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from turnkit.errors import ResumeError
from turnkit.executor.answers import Answer, Held, Refused, stored_outcome
from turnkit.ledger import Confirmation
from turnkit.turn.bound import Bound
from turnkit.turn.decisions import HOW_TO_RESUME, asked, payload, refusals, resume_schema
from turnkit.turn.hitl import StaleDecisions
from turnkit.turn.messages import answered, held_name, settled, tool_message
from turnkit.turn.state import HeldCall

__all__ = ["Pending", "ask_decisions", "note_outcome", "replace_settled", "split_held"]

Pending = list[tuple[HeldCall, Confirmation]]


def split_held(
    held: list[HeldCall], found: list[Confirmation | None]
) -> tuple[Pending, dict[str, Answer]]:
    """The calls still waiting, and the outcomes of those decided, expired or gone already."""
    pending: Pending = []
    done: dict[str, Answer] = {}
    for call, confirmation in zip(held, found, strict=True):
        if confirmation is not None and confirmation.outcome is None:
            pending.append((call, confirmation))
        else:
            done[call["confirmation_id"]] = settled(call["confirmation_id"], confirmation)
    return pending, done


def ask_decisions(
    pending: Pending, held: list[HeldCall], bound: Bound, interrupt: Callable[..., Any]
) -> dict[str, Any]:
    """One ``interrupt`` (LangGraph's, given by the node or the middleware) for every pending
    call; the validated decisions by confirmation id.

    Any id held in the thread is accepted, also one decided elsewhere since the person was asked
    (its decision is then moot: the stored outcome stands). LangChain's positional decisions
    that outnumber the pending calls are asked again only when calls of ``held`` were settled
    since (the person may have seen them); with every held call pending they are a wrong count
    and raise ``ResumeError``, as too few do.
    """
    if not pending:
        return {}
    tools = {tool.name: tool for tool in bound.executor.registry.tools}
    ids = tuple(call["confirmation_id"] for call in held)
    schema = resume_schema(ids, asked(pending))
    for _ in held:  # each pass is one interrupt of the node; LangGraph resumes them in order
        try:
            resume = interrupt(payload(pending, tools), response_schema=schema)
            break
        except ValidationError as exc:
            if not _stale(exc):
                raise ResumeError(ids, refusals(exc), HOW_TO_RESUME) from None
            # HITL decisions for a round that may have shrunk since the person was asked: ask again
    else:  # pragma: no cover - each pass needs a held call settled, and they are few
        raise ResumeError(ids, ["the held calls kept changing"], HOW_TO_RESUME)
    waiting = {confirmation.id for _, confirmation in pending}
    return {cid: decision for cid, decision in resume.root.items() if cid in waiting}


def _stale(exc: ValidationError) -> bool:
    """Whether ``exc`` is only that positional decisions outnumber the calls still waiting by
    no more than the calls settled since (``StaleDecisions``)."""
    found = [error.get("ctx", {}).get("error") for error in exc.errors()]
    return bool(found) and all(isinstance(error, StaleDecisions) for error in found)


def note_outcome(
    cid: str,
    answer: Answer,
    after: Confirmation | None,
    done: dict[str, Answer],
    problems: dict[str, str],
) -> None:
    """Record a decision's outcome when it is final; else why it was not applied."""
    outcome = None if after is None else stored_outcome(after)
    if outcome is not None:
        done[cid] = outcome
    elif isinstance(answer, Refused):
        problems[cid] = answer.message
    elif isinstance(answer, Held) and answer.approvals_needed is not None:
        problems[cid] = (
            f"approved {answer.approvals_given} of {answer.approvals_needed}: it runs once"
            " another person approves it"
        )


def replace_settled(
    held: list[HeldCall], done: dict[str, Answer], problems: dict[str, str], limit: int
) -> tuple[list[Any], list[HeldCall]]:
    """The tool messages that replace the held notices of the calls settled in ``done`` (same
    message id: the model reads the outcome where it read "held"), and the calls still held, each
    with the reason its decision was not applied (``problems``) for the next question."""
    messages: list[Any] = []
    still: list[HeldCall] = []
    for call in held:
        cid = call["confirmation_id"]
        if cid in done:
            messages.append(
                tool_message(
                    call["tool_call_id"],
                    answered(done[cid], limit),
                    name=held_name(call["tool"]),
                    message_id=call["message_id"],
                )
            )
        else:
            problem = problems.get(cid)
            still.append(HeldCall(**{**call, "problem": problem}) if problem else call)
    return messages, still
