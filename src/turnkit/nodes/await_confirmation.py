"""``await_confirmation``: one interrupt for every held call; apply the person's decisions.

Decisions already taken elsewhere (the CLI, another process) are honoured without asking, and a
confirmation whose time ran out is closed as expired, never offered for a decision. The rest
are listed in one ``interrupt()`` (see ``decisions.py`` for the payload and the resume value). Each
decision goes to ``Executor.confirm`` as the turn's caller; its outcome replaces the held tool
message (same message id). A call without a decision stays held and is asked again; a decision the
executor refused (an invalid edit, a rate limit) is asked again with the reason.

Everything before ``interrupt()`` only reads, so LangGraph may run this node again on resume.
"""

from __future__ import annotations

from typing import Any

from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.types import interrupt
from pydantic import ValidationError

from turnkit.errors import ResumeError
from turnkit.nodes.bound import Bound
from turnkit.nodes.decisions import HOW_TO_RESUME, asked, payload, refusals, resume_schema
from turnkit.nodes.hitl import StaleDecisions
from turnkit.nodes.messages import answered, held_name, settled, tool_message
from turnkit.registry import answers
from turnkit.registry.ledger import Confirmation
from turnkit.registry.settings import Settings
from turnkit.turn.leases import asettle_run, settle_run
from turnkit.turn.state import HeldCall, TurnState

__all__ = [
    "aawait_confirmation",
    "ask_decisions",
    "await_confirmation",
    "note_outcome",
    "split_held",
]

Pending = list[tuple[HeldCall, Confirmation]]


def await_confirmation(state: TurnState, runtime: Runtime[Any], *, bound: Bound) -> dict[str, Any]:
    """Sync node: ask for the held calls' decisions and apply them."""
    caller, allow = bound.caller(runtime)
    executor = bound.executor
    held = state.get("held") or []
    pending, done = split_held(held, [executor.confirmation(h["confirmation_id"]) for h in held])
    problems: dict[str, str] = {}
    decisions = ask_decisions(pending, held, bound)
    if decisions:
        settle_run(get_config())  # the rule before acting (the resume saved it all already)
    for cid, decision in decisions.items():
        answer = executor.confirm(cid, caller, decision, allow=allow)
        note_outcome(cid, answer, executor.confirmation(cid), done, problems)
    overrides = executor.ledger.settings()  # a resumed run reads the settings anew
    return _update(held, done, problems, overrides, bound.both_settings(overrides)[1])


async def aawait_confirmation(
    state: TurnState, runtime: Runtime[Any], *, bound: Bound
) -> dict[str, Any]:
    """Async node: as ``await_confirmation``."""
    caller, allow = bound.caller(runtime)
    executor = bound.executor
    held = state.get("held") or []
    pending, done = split_held(
        held, [await executor.aconfirmation(h["confirmation_id"]) for h in held]
    )
    problems: dict[str, str] = {}
    decisions = ask_decisions(pending, held, bound)
    if decisions:
        await asettle_run(get_config())  # as above
    for cid, decision in decisions.items():
        answer = await executor.aconfirm(cid, caller, decision, allow=allow)
        note_outcome(cid, answer, await executor.aconfirmation(cid), done, problems)
    overrides = await executor.ledger.asettings()  # a resumed run reads the settings anew
    return _update(held, done, problems, overrides, bound.both_settings(overrides)[1])


def split_held(
    held: list[HeldCall], found: list[Confirmation | None]
) -> tuple[Pending, dict[str, dict[str, Any]]]:
    """The calls still waiting, and the outcomes of those decided, expired or gone already."""
    pending: Pending = []
    done: dict[str, dict[str, Any]] = {}
    for call, confirmation in zip(held, found, strict=True):
        if confirmation is not None and confirmation.outcome is None:
            pending.append((call, confirmation))
        else:
            done[call["confirmation_id"]] = settled(call["confirmation_id"], confirmation)
    return pending, done


def ask_decisions(pending: Pending, held: list[HeldCall], bound: Bound) -> dict[str, Any]:
    """One interrupt for every pending call; the validated decisions by confirmation id.

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
    for _ in held:  # each pass is one interrupt of this node; LangGraph resumes them in order
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
    answer: dict[str, Any],
    after: Confirmation | None,
    done: dict[str, dict[str, Any]],
    problems: dict[str, str],
) -> None:
    """Record a decision's outcome when it is final; else why it was not applied."""
    if after is not None and after.outcome is not None:
        done[cid] = after.outcome
    elif answers.is_error(answer):
        problems[cid] = answer["error"]["message"]


def _update(
    held: list[HeldCall],
    done: dict[str, dict[str, Any]],
    problems: dict[str, str],
    overrides: dict[str, Any],
    settings: Settings,
) -> dict[str, Any]:
    limit = settings.agent_tool_result_chars
    messages, still = [], []
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
    update: dict[str, Any] = {"held": still, "overrides": overrides}
    if messages:
        update["messages"] = messages
    return update
