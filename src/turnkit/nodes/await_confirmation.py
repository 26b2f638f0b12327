"""``await_confirmation``: one interrupt for every held call; apply the person's decisions.

Decisions already taken elsewhere (the CLI, another process) are honoured without asking, and a
confirmation whose time ran out is closed as expired, never offered for a decision. The rest are
listed in one ``interrupt()`` (see ``turn/decisions.py`` for the payload and the resume value).
Each decision goes to ``Executor.decide`` as the turn's caller; its outcome replaces the held tool
message (same message id). A call without a decision stays held and is asked again; a decision the
executor refused (an invalid edit, a rate limit) is asked again with the reason.

Everything before ``interrupt()`` only reads, so LangGraph may run this node again on resume.
"""

from __future__ import annotations

from typing import Any

from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from turnkit.executor.answers import Answer
from turnkit.nodes.state import TurnState
from turnkit.registry.settings import Settings
from turnkit.threads.leases import asettle_run, settle_run
from turnkit.turn.bound import Bound
from turnkit.turn.held import ask_decisions, note_outcome, replace_settled, split_held
from turnkit.turn.state import HeldCall

__all__ = ["aawait_confirmation", "await_confirmation"]


def await_confirmation(state: TurnState, runtime: Runtime[Any], *, bound: Bound) -> dict[str, Any]:
    """Sync node: ask for the held calls' decisions and apply them."""
    caller, allow = bound.caller(runtime)
    executor = bound.executor
    held = state.get("held") or []
    pending, done = split_held(held, [executor.confirmation(h["confirmation_id"]) for h in held])
    problems: dict[str, str] = {}
    decisions = ask_decisions(pending, held, bound, interrupt)
    if decisions:
        settle_run(get_config())  # the rule before acting (the resume saved it all already)
    for cid, decision in decisions.items():
        answer = executor.decide(cid, caller, decision, allow=allow)
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
    decisions = ask_decisions(pending, held, bound, interrupt)
    if decisions:
        await asettle_run(get_config())  # as above
    for cid, decision in decisions.items():
        answer = await executor.adecide(cid, caller, decision, allow=allow)
        note_outcome(cid, answer, await executor.aconfirmation(cid), done, problems)
    overrides = await executor.ledger.asettings()  # a resumed run reads the settings anew
    return _update(held, done, problems, overrides, bound.both_settings(overrides)[1])


def _update(
    held: list[HeldCall],
    done: dict[str, Answer],
    problems: dict[str, str],
    overrides: dict[str, Any],
    settings: Settings,
) -> dict[str, Any]:
    messages, still = replace_settled(held, done, problems, settings.agent_tool_result_chars)
    update: dict[str, Any] = {"held": still, "overrides": overrides}
    if messages:
        update["messages"] = messages
    return update
