"""The ten steps of ``execute``, in order; the first failure ends the call.

(docs/architecture.md §4)

1 rights now, 2 control fields, 3 input and schema, 4 ``max_items``, 5 idempotency, 6 dry run,
7 hold for a person, 8 rate limit, 9 the handler, 10 record. Every call leaves one audit row.
Written as a generator of effects (see ``effects.py``) so the same steps run sync and async.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import replace
from typing import Any

from turnkit.errors import ToolError
from turnkit.executor import previews, steps, tracing
from turnkit.executor.answers import Answer, DryRun, Held, Ran, Refused, answer_from_json
from turnkit.executor.calls import Call, Checked
from turnkit.executor.closing import expire_overdue
from turnkit.executor.effects import (
    Cancelled,
    Environment,
    HandlerOutcome,
    NeverRan,
    OnLedger,
    Pause,
    Permissions,
    RunHandler,
    Steps,
    UserCode,
    on_ledger,
)
from turnkit.ledger import Ledger
from turnkit.ledger.records import Confirmation, iso
from turnkit.observe import spans
from turnkit.registry.caller import Caller
from turnkit.registry.context import CallContext
from turnkit.registry.declaration import fingerprint
from turnkit.registry.json_text import canonical
from turnkit.registry.registry import Registry
from turnkit.registry.settings import Settings
from turnkit.registry.tool import Quorum, Tool
from turnkit.registry.visibility import hidden_reason

log = logging.getLogger("turnkit.executor")

POLL_SECONDS = 0.02
"""How often a call waiting for another process's outcome looks again."""
WAIT_GRACE = 1.0
"""Seconds beyond the handler timeout that a waiting call waits before answering in_progress."""
IN_PROGRESS_RETRY = 1.0
"""Seconds after which a repeat that did not wait (over HTTP) is told to ask again."""
OUTCOME_UNKNOWN = (
    "the {what} was started but never finished (its process stopped or it was cancelled): the"
    " write may or may not have happened. Check the data before trying again."
)


def settings_now(env: Environment) -> Steps[Settings]:
    """The defaults with the operator's overrides, read from the ledger now."""
    overrides = yield on_ledger(Ledger.settings)
    return env.settings(overrides)


def execute_steps(env: Environment, call: Call) -> Steps[Answer]:
    """Run the pipeline for ``call`` and write its audit row, then the answer its idempotency
    key keeps (``Call.outcome``): in that order, so a process dying between them leaves the
    row of a write that ran and its key still running (repeats answer ``outcome_unknown``), not
    a key that replays a write the audit never saw."""
    started = time.perf_counter()
    span = call.span = tracing.call_started(call)
    try:
        answer = yield from _pipeline(env, call)
    except BaseException as stop:
        tracing.call_failed(span, stop)
        raise
    # a repeat answered from its idempotency record ran nothing: audited as such, so the audit
    # keeps one "ok" row per write that ran
    status = tracing.status_of(answer)
    code = answer.code if isinstance(answer, Refused) and not answer.replayed else None
    held_id = answer.confirmation_id if isinstance(answer, Held) else None
    row: dict[str, Any] = {
        "at": env.clock(),
        "caller": call.caller.identity,
        "tool": call.name if isinstance(call.name, str) else repr(call.name)[:100],
        "status": status,
        "code": code,
        "duration_ms": (time.perf_counter() - started) * 1000,
        "confirmation_id": call.confirmation_id or held_id,
        "detail": call.detail,
    }
    tracing.call_ended(call, answer, span, row)  # sets row["trace_id"]
    yield on_ledger(Ledger.audit, **row)
    if call.outcome is not None:  # only now: a write replayed from its key has its audit row
        yield on_ledger(Ledger.store_idempotency, *call.outcome)
    return answer


def _pipeline(env: Environment, call: Call) -> Steps[Answer]:
    settings = call.settings or (yield from settings_now(env))
    caller = call.caller

    # 1. the tool exists and the caller may use it, checked now
    tool = env.registry.get(call.name) if isinstance(call.name, str) else None
    if tool is None:
        shown = call.name[:100] if isinstance(call.name, str) else repr(call.name)[:100]
        return Refused("not_found", f"no tool named {shown!r}")
    permissions = frozenset() if caller.kind == "public" else (yield Permissions(caller))
    reason = hidden_reason(
        caller,
        tool,
        permissions=permissions,
        settings=settings,
        enabled=(yield from enabled_now(env.registry, [tool.module])).__getitem__,
        allow=call.allow,
    )
    if reason is not None:
        if caller.kind == "public":
            return Refused("not_found", f"no tool named {tool.name!r}")
        return Refused("forbidden", f"{tool.name!r} is not allowed: {reason}", {"reason": reason})

    # 2. control fields, 3. input, 4. list lengths
    failure = steps.control_error(call.control)
    if failure is not None:
        return failure
    failure, text = steps.input_error(tool, call.input, settings)
    if failure is not None:
        return failure
    value = steps.normalised(text)
    failure = steps.too_many_items(tool, value)
    if failure is not None:
        return failure

    digest = steps.input_hash(text)
    key: str | None = call.control.get("idempotency_key")
    dry = call.control.get("dry_run", False)
    ctx = CallContext(
        caller=caller,
        tool=tool,
        permissions=permissions,
        settings=settings,
        call_id=call.call_id,
        dry_run=True,
        idempotency_key=key,
    )
    checked = Checked(tool=tool, value=value, digest=digest, ctx=ctx, settings=settings)
    approved = None if dry else (yield from _approved(call, tool, digest))
    if isinstance(approved, Refused):  # a token that runs nothing (spent, or not this call's)
        return approved
    if approved is not None:
        call.confirmation_id = approved.id
        spans.link_hold(call.span, approved.trace_context)  # held → decided → ran
        outcome = yield from _hold_charge_run(env, call, checked, approved)
        if approved.idempotency_key is not None and not outcome.ran_nothing:
            held_key = approved.idempotency_key  # stored after the audit row (Call.outcome)
            call.outcome = (caller.identity, tool.name, held_key, outcome.to_json())
        return outcome

    # 5. idempotency: a repeat replays, a different input conflicts
    if key is not None:
        if dry:
            record = yield on_ledger(Ledger.get_idempotency, caller.identity, tool.name, key)
        else:
            now = call.reserved_at = env.clock()
            record = yield on_ledger(
                Ledger.reserve_idempotency, caller.identity, tool.name, key, digest, now
            )
        if record is not None:
            return (yield from _replay(env, call, tool, key, digest, record, settings))

    # 6. dry run: nothing charged, held or run
    if dry:
        would_hold = yield from hold_need(tool, caller, value, ctx)
        return DryRun(bool(would_hold), (yield from _cost(tool, value)))

    try:
        outcome = yield from _hold_charge_run(env, call, checked, None)
    except Exception as stop:
        # released, unless an interrupt stopped the call with its handler handed over: that may
        # run, so the key waits for an outcome (a repeat answers in_progress, then
        # outcome_unknown once the call is stale, as after a crash): never a second run
        if key is not None and not (call.started and isinstance(stop, Cancelled)):
            yield on_ledger(Ledger.release_idempotency, caller.identity, tool.name, key)
        raise
    if key is not None:
        if outcome.ran_nothing:  # nothing was held or run: a retry may go ahead
            yield on_ledger(Ledger.release_idempotency, caller.identity, tool.name, key)
        else:  # stored after the audit row (Call.outcome)
            call.outcome = (caller.identity, tool.name, key, outcome.to_json())
    return outcome


def enabled_now(registry: Registry, modules: list[str | None]) -> Steps[dict[str | None, bool]]:
    """Whether each module is enabled now; modules with an ``enabled()`` are asked off-loop."""
    if not any(registry.asks_enabled(module) for module in modules):
        return {module: registry.is_enabled(module) for module in modules}
    flags = yield UserCode(lambda: {module: registry.is_enabled(module) for module in modules})
    return flags


def hold_need(tool: Tool, caller: Caller, value: Any, ctx: CallContext) -> Steps[bool | Quorum]:
    """``steps.needs_hold`` for this input, a danger check run as the application's code."""
    if callable(tool.danger):
        return (yield UserCode(steps.needs_hold, (tool, caller, value, ctx)))
    return steps.needs_hold(tool, caller, value, ctx)


def _cost(tool: Tool, value: Any) -> Steps[int]:
    if callable(tool.cost):
        return (yield UserCode(steps.cost_of, (tool, value)))
    return steps.cost_of(tool, value)


TOKEN_REFUSED = (
    "this confirm_token runs nothing: a token runs the one approved write it was made for, once"
    " (it was spent, or it is not this call's). Held writes are decided by a person: approve"
    " the confirmation instead"
)


def _approved(call: Call, tool: Tool, digest: str) -> Steps[Confirmation | Refused | None]:
    """The confirmation whose approved write this call runs: its ``confirm_token`` is spent here,
    by the one call it was made for (the same caller, tool, declaration and input); a call
    carrying any other token is refused (an answer), never run or held instead."""
    token = call.control.get("confirm_token")
    if token is None:
        return None
    found: Confirmation | None = yield on_ledger(Ledger.confirmation_for_token, token)
    if (
        found is None
        or found.caller.identity != call.caller.identity
        or found.tool != tool.name
        or found.input_hash != digest
        or (found.fingerprint is not None and found.fingerprint != fingerprint(tool))
        or not (yield on_ledger(Ledger.use_token, found.id, token))
    ):
        return Refused("forbidden", TOKEN_REFUSED)
    return found


def _hold_charge_run(
    env: Environment, call: Call, checked: Checked, approved: Confirmation | None
) -> Steps[Answer]:
    caller, tool, value, ctx, settings = (
        call.caller, checked.tool, checked.value, checked.ctx, checked.settings
    )  # fmt: skip
    now = env.clock()

    # 7. hold for a person, unless a person approved this very call; the hold reserves its
    # cost now (a hold is work a person must do: it is not free)
    cost = call.cost = yield from _cost(tool, value)
    if approved is None:
        need = yield from hold_need(tool, caller, value, ctx)
        if need:
            return (yield from _hold(env, call, checked, cost, now, need))

    # 8. rate limit (an approved write spent its units when it was held)
    if approved is not None:
        cost -= approved.reserved_units
        if cost < 0 and approved.reserved_window is not None:  # an edit that costs less
            yield on_ledger(
                Ledger.refund_all, steps.budgets(caller), approved.reserved_window, -cost
            )
    if cost > 0:
        refused, _ = yield from _charge(caller, cost, settings, now)
        if refused is not None:
            return refused

    # 9. run the handler
    run_ctx = CallContext(
        caller=caller,
        tool=tool,
        permissions=ctx.permissions,
        settings=settings,
        call_id=call.call_id,
        confirmation_id=None if approved is None else approved.id,
        idempotency_key=ctx.idempotency_key,
    )
    key = ctx.idempotency_key
    if approved is None and key is not None and call.reserved_at is not None:
        started_at = env.clock()
        if started_at - call.reserved_at > WAIT_GRACE / 2:  # slow checks: a repeat in another
            # process would take the running call for a dead one before its handler's time ran out
            yield on_ledger(Ledger.restart_idempotency, caller.identity, tool.name, key, started_at)
    call.started = True
    handler = RunHandler(tool.handler, value, run_ctx, settings.handler_timeout, call.span)  # type: ignore[arg-type]  # step 3 made value an object
    try:
        outcome = yield handler
    except NeverRan:  # handed over, dropped unrun: cleaned up as a call that never started
        call.started = False
        raise
    return _result_answer(call, tool, outcome, settings)


def _hold(
    env: Environment, call: Call, checked: Checked, cost: int, now: float, need: bool | Quorum
) -> Steps[Answer]:
    """Step 7: store a pending confirmation, its cost reserved, within the caller's cap, with
    what its approvers need: the tool's preview, the request, the key's name, the quorum."""
    caller, tool, settings = call.caller, checked.tool, checked.settings
    refused, window = yield from _charge(caller, cost, settings, now)
    if refused is not None:
        return refused
    preview = yield from previews.preview_of(tool, checked.value, checked.ctx)
    approvals, separate = previews.quorum(tool, need)
    cid = str(uuid.uuid4())
    hold_span = spans.start_hold(call.span, tool.name, cid, approvals)
    confirmation = Confirmation(
        id=cid,
        caller=caller,
        tool=tool.name,
        input=checked.value,
        input_hash=checked.digest,
        idempotency_key=checked.ctx.idempotency_key,
        status="pending",
        created_at=now,
        expires_at=now + settings.confirmation_ttl,
        module=tool.module,
        fingerprint=fingerprint(tool),
        thread_id=call.thread,
        reserved_units=0 if window is None else cost,
        reserved_window=window,
        preview=preview,
        request=previews.bounded_request(call.request),
        caller_name=(yield from previews.caller_name(caller)),
        approvals_needed=approvals,
        separate_duties=separate,
        trace_context=spans.traceparent(hold_span),
    )
    cap = settings.max_pending_holds or None
    try:
        stored = yield on_ledger(Ledger.create_confirmation, confirmation, max_pending=cap)
    finally:
        hold_span.end()
    if stored:
        return Held(confirmation.id, iso(confirmation.expires_at))
    if window is not None:
        yield on_ledger(Ledger.refund_all, steps.budgets(caller), window, cost)
    expiries: list[float] = yield on_ledger(Ledger.pending_expiries, caller.identity, now)
    retry_after = round(max(1.0, (expiries[0] if expiries else now + 1) - now), 3)
    return Refused(
        "too_many_pending",
        f"{len(expiries) or cap} writes of this caller already wait for a person's decision, the"
        f" most allowed (setting 'max_pending_holds' = {cap}): nothing was held. Have them"
        f" decided first, or try again in {retry_after:g} s, when the oldest expires",
        {"retry_after": retry_after, "limit": cap, "pending": len(expiries)},
    )


def _charge_all(budgets: tuple[str, ...], window_start: int, units: int, limit: int) -> OnLedger:
    """Charge ``units`` to each budget in the window when they fit under ``limit`` in all;
    whether they did (one budget: the ledger's plainer statement)."""
    if len(budgets) == 1:
        return on_ledger(Ledger.charge, budgets[0], window_start, units, limit)
    return on_ledger(Ledger.charge_all, budgets, window_start, units, limit)


def _charge(
    caller: Caller, cost: int, settings: Settings, now: float
) -> Steps[tuple[Refused | None, int | None]]:
    """Step 8: charge ``cost`` to the caller's budgets (a key's and its user's) in this window.

    ``(refusal, None)`` when there is no room; ``(None, window)`` once charged (the window's
    ``window_start``); ``(None, None)`` when rate limits are off."""
    limit = settings.rate_limit_units
    if limit <= 0:
        return None, None
    if cost > limit:
        return Refused(
            "rate_limited",
            f"this call costs {cost} units, more than the whole budget of {limit} per window:"
            " it can never run; send smaller calls",
            {"retry_after": None, "cost": cost, "limit": limit},
        ), None
    window = settings.rate_limit_window
    start = steps.window_start(now, window)
    if (yield _charge_all(steps.budgets(caller), start, cost, limit)):
        return None, start
    # out of room: holds of this caller that expired undecided give their units back first
    if (yield from expire_overdue(caller, now)) and (
        yield _charge_all(steps.budgets(caller), start, cost, limit)
    ):
        return None, start
    retry_after = round(start / 1000 + window - now, 3)
    return Refused(
        "rate_limited",
        f"rate limit reached: {limit} units per {window:g} s; this call costs {cost}."
        f" Try again in {retry_after:g} s",
        {"retry_after": retry_after, "cost": cost, "limit": limit},
    ), None


def _result_answer(call: Call, tool: Tool, outcome: HandlerOutcome, settings: Settings) -> Answer:
    """Step 10's answer from how the handler ended; failures are logged with their detail."""
    generic = f"{tool.name!r} failed; the error was logged (call id {call.call_id})"
    if outcome.kind == "timeout":
        call.detail = f"handler ran longer than {settings.handler_timeout:g} s"
        log.error("tool %r: %s (call %s)", tool.name, call.detail, call.call_id)
        return Refused(
            "timeout",
            f"{tool.name!r} did not finish within {settings.handler_timeout:g} s; it may still"
            " complete: check before calling again",
            {"call_id": call.call_id},
        )
    if outcome.kind == "error" and isinstance(outcome.value, ToolError):
        exc = outcome.value
        call.detail = f"ToolError: {exc.message}"[:2000]
        return Refused("tool_error", exc.message[:2000], _json_details(exc.details))
    if outcome.kind == "error":
        exc = outcome.value
        call.detail = f"{type(exc).__name__}: {exc}"[:2000]
        log.error("tool %r raised (call %s)", tool.name, call.call_id, exc_info=exc)
        return Refused("internal_error", generic, {"call_id": call.call_id})
    result = outcome.value
    try:
        canonical(result)
    except (TypeError, ValueError, RecursionError) as exc:
        call.detail = f"handler returned a value that is not JSON: {exc}"[:2000]
        log.error("tool %r: %s (call %s)", tool.name, call.detail, call.call_id)
        return Refused("internal_error", generic, {"call_id": call.call_id})
    if tool.output_validator is not None:
        violations = tool.output_validator.errors(result)
        if violations:
            call.detail = "result breaks output_schema: " + json.dumps(violations[:10])[:2000]
            log.error("bug in tool %r: %s (call %s)", tool.name, call.detail, call.call_id)
            return Refused("internal_error", generic, {"call_id": call.call_id})
    return Ran(result)


def _json_details(details: dict[str, Any]) -> dict[str, Any]:
    """A ToolError's details when they are JSON data, else their text."""
    try:
        canonical(details)
    except (TypeError, ValueError, RecursionError):
        return {key: repr(value)[:500] for key, value in details.items()}
    return details


def _replay(
    env: Environment, call: Call, tool: Tool, key: str, digest: str, record: Any, settings: Settings
) -> Steps[Answer]:
    """Step 5 for a key seen before: the stored answer again, or a conflict."""
    if record.input_hash != digest:
        return Refused(
            "idempotency_conflict",
            f"idempotency key {key[:80]!r} was used before with a different input for"
            f" {tool.name!r}; use a new key for a new call",
        )
    where = (call.caller.identity, tool.name, key)
    stale_before = env.clock() - settings.handler_timeout - WAIT_GRACE
    if record.state == "running" and record.created_at < stale_before:
        unknown = Refused("outcome_unknown", OUTCOME_UNKNOWN.format(what=f"call {key!r}")).to_json()
        yield on_ledger(Ledger.abandon_idempotency, *where, unknown, stale_before)
        record = yield on_ledger(Ledger.get_idempotency, *where)
    if record.state == "running" and not call.wait:
        return Refused(
            "in_progress",
            f"the first call with idempotency key {key[:80]!r} is still running: send this"
            f" request again in {IN_PROGRESS_RETRY:g} s for its answer (nothing ran for this one)",
            {"retry_after": IN_PROGRESS_RETRY},
        )
    deadline = time.monotonic() + settings.handler_timeout + WAIT_GRACE
    while record is not None and record.state == "running" and time.monotonic() < deadline:
        yield Pause(POLL_SECONDS)
        record = yield on_ledger(Ledger.get_idempotency, *where)
    if record is None or record.state == "running":
        return Refused(
            "in_progress",
            f"the first call with idempotency key {key[:80]!r} has not finished; its outcome is"
            " unknown: check the data before calling again with a new key",
        )
    answer = answer_from_json(record.answer)
    if isinstance(answer, Held):
        call.confirmation_id = held_id = answer.confirmation_id
        held: Confirmation | None = yield on_ledger(Ledger.get_confirmation, held_id)
        if held is not None and held.outcome is not None:
            answer = answer_from_json(held.outcome)
    return replace(answer, replayed=True)
