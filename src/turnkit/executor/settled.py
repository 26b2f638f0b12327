"""The outcome of a decided confirmation, as a decider is answered it: the stored one, waited
for while its approved write runs elsewhere, and closed as ``outcome_unknown`` when that run
stopped (a dead process)."""

from __future__ import annotations

import time
from dataclasses import replace

from turnkit.executor.answers import Answer, Refused, answer_from_json
from turnkit.executor.effects import Environment, Pause, Steps, on_ledger
from turnkit.executor.pipeline import OUTCOME_UNKNOWN, POLL_SECONDS, WAIT_GRACE
from turnkit.ledger import Ledger
from turnkit.ledger.records import Confirmation

__all__ = ["abandon", "decided_before", "settled"]


def abandon(confirmation_id: str, stale_before: float) -> Steps[None]:
    """Close an approved write whose run stopped before ``stale_before``: outcome unknown."""
    what = f"approved write of {confirmation_id!r}"
    unknown = Refused("outcome_unknown", OUTCOME_UNKNOWN.format(what=what)).to_json()
    yield on_ledger(Ledger.abandon_confirmation, confirmation_id, unknown, stale_before)


def decided_before(env: Environment, confirmation_id: str, timeout: float) -> Steps[Answer]:
    """``settled`` for a decision that came too late: the stored outcome, marked
    ``already_decided`` so a surface can tell the person that this decision changed nothing."""
    answer = yield from settled(env, confirmation_id, timeout)
    current: Confirmation | None = yield on_ledger(Ledger.get_confirmation, confirmation_id)
    if current is None or current.status == "pending":  # reopened (a rate limit): undecided
        return answer
    return replace(answer, already_decided=True)


def settled(env: Environment, confirmation_id: str, timeout: float) -> Steps[Answer]:
    """The stored outcome of a decided confirmation, waiting while its write runs elsewhere."""
    deadline = time.monotonic() + timeout + WAIT_GRACE
    stale_before = env.clock() - timeout - WAIT_GRACE
    while True:
        current: Confirmation | None = yield on_ledger(Ledger.get_confirmation, confirmation_id)
        if current is None:
            return Refused("not_found", f"no confirmation {confirmation_id!r}")
        if current.outcome is not None:
            return answer_from_json(current.outcome)
        if current.status == "running" and (current.decided_at or 0) < stale_before:
            yield from abandon(confirmation_id, stale_before)
            continue
        if current.status == "pending":
            return Refused(
                "in_progress", f"confirmation {confirmation_id!r} is still waiting for a decision"
            )
        if time.monotonic() >= deadline:
            return Refused(
                "in_progress",
                f"the approved write of {confirmation_id!r} has not finished; its outcome is"
                " unknown yet: ask again later",
            )
        yield Pause(POLL_SECONDS)
