"""``Executor``: what a caller may see, and every call run through the ten steps (§4 of
docs/architecture.md).

The executor is the only place that runs a tool. It asks the application's permission provider at
call time, reads the operator's settings from the ledger at call time, holds writes for a person,
replays idempotent repeats, charges rate limits, and writes an audit row per call. Each operation
has a sync form for scripts and an ``a``-prefixed async twin that never blocks the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, TypeVar

from turnkit.executor import steps
from turnkit.executor.answers import Answer, AnswerJSON
from turnkit.executor.calls import Call, Resolved
from turnkit.executor.confirmations import (
    Decision,
    confirm_steps,
    current_steps,
    key_holds_steps,
    refusal_for_others,
)
from turnkit.executor.drivers import adrive, drive
from turnkit.executor.effects import (
    Environment,
    Orphans,
    Permissions,
    Steps,
    UserCode,
    on_ledger,
)
from turnkit.executor.pipeline import enabled_now, execute_steps, settings_now
from turnkit.executor.steps import HoldRule, hold_rule
from turnkit.ledger import Confirmation, Ledger, MemoryLedger
from turnkit.ledger.keys import ApiKey
from turnkit.registry import ids
from turnkit.registry._memo import remember
from turnkit.registry.caller import Caller, PermissionProvider, apermissions_now
from turnkit.registry.registry import Registry
from turnkit.registry.settings import Settings
from turnkit.registry.tool import Tool
from turnkit.registry.visibility import Allow, hidden_reason, visible

__all__ = ["Executor"]

log = logging.getLogger("turnkit.executor")
R = TypeVar("R")

CLOSE_WAIT = 10.0
"""How long ``close`` waits, at most, for the outcomes of cancelled calls being recorded (a few
ledger statements each)."""


def no_permissions(caller: Caller) -> frozenset[str]:
    """The default provider: nobody holds any permission (only public and system tools run)."""
    return frozenset()


class Executor:
    """Runs tools for callers, with rights checked now and writes held for a person.

    Examples:
        >>> from turnkit import Registry, StaticPermissions
        >>> executor = Executor(Registry(), permissions=StaticPermissions())
        >>> executor.execute(Caller.public(), "shop.list_orders", {})["error"]["code"]
        'not_found'
    """

    def __init__(
        self,
        registry: Registry,
        *,
        ledger: Ledger | None = None,
        permissions: PermissionProvider = no_permissions,
        settings: Settings | None = None,
        clock: Callable[[], float] = time.time,
        handler_threads: int = 32,
        inline_handlers: bool = True,
    ) -> None:
        """Bind the registry, the ledger and the application's permission provider.

        Args:
            registry: the tools.
            ledger: where confirmations, idempotency records, usage and audit rows live. Default:
                a ``MemoryLedger`` of its own, in this process's memory: nothing survives.
            permissions: ``(caller) -> permissions``, sync or async, asked on every call.
            settings: the defaults; the operator's overrides in the ledger win at call time.
            clock: seconds since the epoch (tests pass a fake one to expire confirmations).
            handler_threads: worker threads for sync handlers (kept apart from ledger work, so a
                hung handler cannot starve the ledger): those of ``call`` and ``execute``, of
                an executor without a ledger, and (with ``inline_handlers=False``, or while a
                handler that overran its timeout still runs) of the async calls.
            inline_handlers: an async call (``acall``, REST, MCP, the turn graph) on a ledger
                that blocks runs its sync handler in the worker thread that runs its ledger
                work, its ``handler_timeout`` kept by a watchdog thread: one thread hop a call,
                not two (measured: ~20 % more requests/s from one ``turnkit serve`` worker).
                ``False`` hands every sync handler to the ``handler_threads`` pool.
        """
        self._checked: set[tuple[str | None, frozenset[str]]] = set()  # see _warn_switch
        self._shown: dict[tuple[Any, ...], list[Tool]] = {}  # visible tools by every input
        self._forget: Callable[[], None] = lambda: None
        self.ledger_is_temporary = ledger is None
        """Whether the ledger is the executor's own, in memory (no ``ledger`` was given)."""
        if ledger is None:  # a ledger of its own, closed on close (or collection)
            ledger = MemoryLedger()
            self._forget = weakref.finalize(self, ledger.close)
        self.registry = registry
        self.ledger = ledger
        self.permissions = permissions
        self.clock = clock
        """Seconds since the epoch, as this executor reads them (confirmations expire by it)."""
        self._env = Environment(
            registry=registry,
            defaults=settings or Settings(),
            clock=clock,
            ledger=ledger,
            permissions=permissions,
            handler_pool=ThreadPoolExecutor(handler_threads, thread_name_prefix="turnkit-handler"),
            orphans=Orphans(),
            inline_handlers=inline_handlers,
        )

    # --- what a caller sees -----------------------------------------------------------------

    @property
    def defaults(self) -> Settings:
        """The settings given at construction, before the operator's overrides."""
        return self._env.defaults

    def settings_now(self) -> Settings:
        """The settings in force now: the defaults with the operator's overrides."""
        return drive(settings_now(self._env), self._env)

    async def asettings_now(self) -> Settings:
        """Async twin of ``settings_now``."""
        return await adrive(settings_now(self._env), self._env)

    def settings_with(self, overrides: Mapping[str, Any]) -> Settings:
        """The defaults with the operator's ``overrides`` (as ``Ledger.settings`` reads them)
        applied: the settings in force for a door that read them itself (with a key, in one
        statement). Merged once per distinct overrides."""
        return self._env.settings(overrides)

    def visible_for(
        self, caller: Caller, allow: Allow = "all", *, settings: Settings | None = None
    ) -> list[Tool]:
        """The tools ``caller`` may see now (module enabled, scope, permission, session switch).

        ``settings``: the settings in force, when the caller has just read them
        (``settings_now``); by default they are read here.
        """
        return drive(self._visible_steps(caller, allow, settings), self._env)

    async def avisible_for(
        self, caller: Caller, allow: Allow = "all", *, settings: Settings | None = None
    ) -> list[Tool]:
        """Async twin of ``visible_for``."""
        return await adrive(self._visible_steps(caller, allow, settings), self._env)

    def tools_now(
        self, caller: Caller, allow: Allow = "all", overrides: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], list[Tool]]:
        """``(the operator's setting overrides, the tools caller may see under them)``, read
        now, together: what a turn starts with (one thread hop on the async path, not two).
        ``overrides`` just read elsewhere (with the run's thread lease) are used as they are."""
        return drive(self._tools_steps(caller, allow, overrides), self._env)

    async def atools_now(
        self, caller: Caller, allow: Allow = "all", overrides: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], list[Tool]]:
        """Async twin of ``tools_now``."""
        return await adrive(self._tools_steps(caller, allow, overrides), self._env)

    def _tools_steps(self, caller: Caller, allow: Allow, overrides: dict[str, Any] | None) -> Any:
        if overrides is None:
            overrides = yield on_ledger(Ledger.settings)
        tools = yield from self._visible_steps(caller, allow, self._env.settings(overrides))
        return overrides, tools

    def hidden_for(self, caller: Caller, allow: Allow = "all") -> list[tuple[Tool, str]]:
        """The tools ``caller`` may not see now, each with the reason (``visible_for``'s rules)."""
        return drive(self._hidden_steps(caller, allow), self._env)

    def _rights(self, caller: Caller, settings: Settings | None) -> Any:
        """``(settings, permissions, enabled)``: what decides visibility, read now."""
        if settings is None:
            settings = yield from settings_now(self._env)
        permissions = frozenset() if caller.kind == "public" else (yield Permissions(caller))
        modules = {tool.module for tool in self.registry.tools}
        flags = yield from enabled_now(self.registry, list(modules))
        return settings, permissions, flags.__getitem__

    def _visible_steps(self, caller: Caller, allow: Allow, settings: Settings | None) -> Any:
        settings, permissions, enabled = yield from self._rights(caller, settings)
        rights = {"permissions": permissions, "settings": settings, "enabled": enabled}
        modules = {tool.module for tool in self.registry.tools}
        key = (
            caller.kind,
            caller.scopes,
            permissions,
            allow if allow == "all" else frozenset(allow),
            settings.api_session_write_modules,
            frozenset(m for m in modules if not enabled(m)),
        )
        shown = self._shown.get(key)  # the same rights now list the same tools: remembered
        if shown is None:
            shown = visible(caller, self.registry.tools, allow=allow, **rights)
            remember(self._shown, key, shown, limit=256)
        if caller.kind == "session":
            self._warn_switch(caller, allow, rights)
        return list(shown)

    def _hidden_steps(self, caller: Caller, allow: Allow) -> Any:
        settings, permissions, enabled = yield from self._rights(caller, None)
        rights = {"permissions": permissions, "settings": settings, "enabled": enabled}
        found = [
            (tool, hidden_reason(caller, tool, allow=allow, **rights)) for tool in self.registry
        ]
        return [(tool, reason) for tool, reason in found if reason is not None]

    def _warn_switch(self, caller: Caller, allow: Allow, rights: dict[str, Any]) -> None:
        """Log once per module whose write tools a session misses only for the agent's switch
        (looked at once per module and set of permissions: one caller lacking the module's
        permission does not silence the warning another caller should see)."""
        switch = rights["settings"].api_session_write_modules
        permissions = rights["permissions"]
        unchecked = {
            tool.module
            for tool in self.registry.tools
            if tool.is_write
            and tool.module not in switch
            and (tool.module, permissions) not in self._checked
        }
        if not unchecked:
            return
        self._checked.update((module, permissions) for module in unchecked)
        widened = replace(rights["settings"], api_session_write_modules=switch | unchecked)
        opened = {**rights, "settings": widened}
        for module in sorted(unchecked, key=str):
            names = [
                tool.name
                for tool in self.registry.tools
                if tool.module == module
                and tool.is_write
                and hidden_reason(caller, tool, allow=allow, **rights) is not None
                and hidden_reason(caller, tool, allow=allow, **opened) is None
            ]
            if names:
                log.warning(
                    "the agent of %s does not see the write tools of module %r (%s): they are"
                    " hidden only by the setting 'api_session_write_modules'; add %r to it to let"
                    " the agent act there (their writes then wait for a person's yes)",
                    caller.identity, module, ", ".join(names), module,
                )  # fmt: skip

    @staticmethod
    def hold_rule(caller: Caller, tool: Tool, settings: Settings | None = None) -> HoldRule:
        """When ``caller``'s calls of ``tool`` wait for a person: ``person`` (the agent acts for
        a signed-in user), ``operator`` (a key's write, and the setting ``hold_key_writes`` is
        on), ``always``, ``input`` (the tool's danger check decides per call), ``batch`` (a list
        over ``confirm_batch_over``) or ``never``; step 7 applies this rule. ``settings``: those
        in force (``settings_now()``); without them the operator's ``hold_key_writes`` is not
        known and a key's write is told by its tool alone."""
        return hold_rule(tool, caller, settings)

    @staticmethod
    def input_schema(tool: Tool) -> dict[str, Any]:
        """The schema of ``tool``'s input as shown to a model (control fields never appear)."""
        return dict(tool.input_schema)  # type: ignore[arg-type]  # a dict once the tool is built

    # --- calls ------------------------------------------------------------------------------

    def execute(
        self,
        caller: Caller,
        name: str,
        input: object,
        control: Mapping[str, Any] | None = None,
        *,
        allow: Allow = "all",
        settings: Settings | None = None,
        thread: str | None = None,
        wait: bool = True,
        request: Mapping[str, str] | None = None,
    ) -> AnswerJSON:
        """Run ``name`` with ``input`` for ``caller`` through the ten steps; never raises for bad
        input, only answers (``{"executed": ..., "status": ...}``).

        ``control`` holds the control fields: ``dry_run``, ``confirm_token``, ``idempotency_key``.
        ``settings``: the settings in force, when the caller has just read them with
        ``settings_now()`` (the turn graph reads them once per run and hands them to each call);
        by default they are read from the ledger for this call. Settings built any other way
        replace the operator's overrides for the call: pass only what ``settings_now()`` gave.
        ``thread``: the conversation the call belongs to, kept with a hold (listed and filtered
        by it). ``request``: what led to the call — ``{"user": the person's message, "model":
        the model's text}`` — kept, bounded, with a hold for its approvers. ``wait``: a repeat
        of an idempotency key whose first call still runs waits for its answer (up to
        ``handler_timeout`` + 1 s; the default, for code in one process) or, with False, answers
        ``in_progress`` at once with ``retry_after`` (what REST and MCP do).
        """
        return self.call(
            caller,
            name,
            input,
            control,
            allow=allow,
            settings=settings,
            thread=thread,
            wait=wait,
            request=request,
        ).to_json()

    async def aexecute(
        self,
        caller: Caller,
        name: str,
        input: object,
        control: Mapping[str, Any] | None = None,
        *,
        allow: Allow = "all",
        settings: Settings | None = None,
        thread: str | None = None,
        wait: bool = True,
        request: Mapping[str, str] | None = None,
    ) -> AnswerJSON:
        """Async twin of ``execute``: sync handlers and ledger work run in worker threads."""
        answer = await self.acall(
            caller,
            name,
            input,
            control,
            allow=allow,
            settings=settings,
            thread=thread,
            wait=wait,
            request=request,
        )
        return answer.to_json()

    def call(
        self,
        caller: Caller,
        name: str,
        input: object,
        control: Mapping[str, Any] | None = None,
        *,
        allow: Allow = "all",
        settings: Settings | None = None,
        thread: str | None = None,
        wait: bool = True,
        request: Mapping[str, str] | None = None,
    ) -> Answer:
        """``execute``, its answer a typed value to match on instead of JSON: ``Ran``,
        ``Held``, ``DryRun``, ``Rejected`` or ``Refused`` (``turnkit.executor.answers``; its
        ``to_json()`` is what ``execute`` returns). turnkit's own doors call this."""
        call = self._call(caller, name, input, control, allow, settings, thread, wait, request)
        return drive(execute_steps(self._env, call), self._env)

    async def acall(
        self,
        caller: Caller,
        name: str,
        input: object,
        control: Mapping[str, Any] | None = None,
        *,
        allow: Allow = "all",
        settings: Settings | None = None,
        thread: str | None = None,
        wait: bool = True,
        request: Mapping[str, str] | None = None,
    ) -> Answer:
        """Async twin of ``call``."""
        call = self._call(caller, name, input, control, allow, settings, thread, wait, request)
        return await adrive(execute_steps(self._env, call), self._env)

    async def acall_as(
        self,
        resolve: Callable[[], Resolved | R],
        name: str,
        input: object,
        control: Mapping[str, Any] | None = None,
        *,
        wait: bool = True,
        request: Mapping[str, str] | None = None,
    ) -> Answer | R:
        """``acall`` for a caller that blocking code finds, such as an API key looked up by its
        secret: ``resolve()`` runs in the worker thread that runs the call, so finding the
        caller and the call cost one thread hop, not two (measured: a hop is ~0.1 ms, more
        than a SQLite read). It returns ``Resolved`` to make the call, or anything else (why
        the caller is refused), returned as it is: nothing is then called or audited."""
        steps = self._resolved_steps(resolve, name, input, control, wait, request)
        return await adrive(steps, self._env)

    def _resolved_steps(
        self,
        resolve: Callable[[], Resolved | R],
        name: str,
        input: object,
        control: Mapping[str, Any] | None,
        wait: bool,
        request: Mapping[str, str] | None,
    ) -> Steps[Answer | R]:
        found = yield UserCode(resolve)
        if not isinstance(found, Resolved):
            return found
        settings = None if found.overrides is None else self.settings_with(found.overrides)
        call = self._call(found.caller, name, input, control, found.allow, settings, None, wait,
                          request)  # fmt: skip
        return (yield from execute_steps(self._env, call))

    @staticmethod
    def _call(
        caller: Caller,
        name: str,
        input: object,
        control: Mapping[str, Any] | None,
        allow: Allow,
        settings: Settings | None,
        thread: str | None,
        wait: bool,
        request: Mapping[str, str] | None = None,
    ) -> Call:
        if not isinstance(caller, Caller):
            raise TypeError(f"caller must be a turnkit Caller, got {type(caller).__name__}")
        return Call(
            caller=caller,
            name=name,
            input=input,
            control=control if control is not None else {},  # type: ignore[arg-type]  # step 2 checks it
            allow=allow,
            call_id=ids.uuid4_text(),
            settings=settings,
            thread=thread if isinstance(thread, str) and steps.plain_text(thread) else None,
            wait=wait,
            request=request,
        )

    # --- confirmations ----------------------------------------------------------------------

    def confirm(
        self,
        confirmation_id: str,
        decider: Caller,
        decision: Decision | object,
        *,
        allow: Allow = "all",
        seen: str | None = None,
    ) -> AnswerJSON:
        """Decide a held write: approve, reject (with a message) or edit (new input).

        Runs the write at most once however often, or from however many processes, it is called;
        every call answers with the same stored outcome, marked ``"already_decided": True`` when
        this decision came after another one (nothing ran for it). Approval re-runs the whole
        pipeline as the held caller, with their rights now: when they decide themselves, with
        ``decider`` (a key's current scopes) and ``allow`` (its allow list now). ``seen``: the
        ``input_hash`` of the arguments the person was shown (``Confirmation.input_hash``): an
        approval or edit is refused ``arguments_changed`` once another approver edited them.
        """
        return self.decide(confirmation_id, decider, decision, allow=allow, seen=seen).to_json()

    async def aconfirm(
        self,
        confirmation_id: str,
        decider: Caller,
        decision: Decision | object,
        *,
        allow: Allow = "all",
        seen: str | None = None,
    ) -> AnswerJSON:
        """Async twin of ``confirm``."""
        answer = await self.adecide(confirmation_id, decider, decision, allow=allow, seen=seen)
        return answer.to_json()

    def decide(
        self,
        confirmation_id: str,
        decider: Caller,
        decision: Decision | object,
        *,
        allow: Allow = "all",
        seen: str | None = None,
    ) -> Answer:
        """``confirm``, its answer a typed value to match on instead of JSON (``call``'s kinds;
        ``already_decided`` set when another decision came first). turnkit's own doors call
        this."""
        steps = confirm_steps(self._env, confirmation_id, decider, decision, allow, seen)
        return drive(steps, self._env)

    async def adecide(
        self,
        confirmation_id: str,
        decider: Caller,
        decision: Decision | object,
        *,
        allow: Allow = "all",
        seen: str | None = None,
    ) -> Answer:
        """Async twin of ``decide``."""
        steps = confirm_steps(self._env, confirmation_id, decider, decision, allow, seen)
        return await adrive(steps, self._env)

    def end_key_holds(self, key: ApiKey, *, by: str = "operator") -> int:
        """Close every write still held under ``key`` as ``forbidden`` ("key revoked" or "key
        expired") when the key can no longer be used; how many were closed (none while it can).
        Deciding one of them closes it so too; ``turnkit keys revoke`` calls this at once."""
        return drive(key_holds_steps(self._env, key, by), self._env)

    def confirmation(self, confirmation_id: str) -> Confirmation | None:
        """The confirmation ``confirmation_id`` as it stands now, or None when there is none.

        One whose time ran out while it waited is closed as expired first (in the ledger, once),
        so its ``outcome`` is the ``confirmation_expired`` answer a conversation should see.
        """
        return drive(current_steps(self._env, confirmation_id), self._env)

    async def aconfirmation(self, confirmation_id: str) -> Confirmation | None:
        """Async twin of ``confirmation``."""
        return await adrive(current_steps(self._env, confirmation_id), self._env)

    async def arefusal_to_decide(
        self, decider: Caller, confirmation: Confirmation, allow: Allow = "all"
    ) -> str | None:
        """Why ``decider`` may not see or decide ``confirmation`` now, or None when they may:
        the caller it was held for may; anyone else by ``refusal_for_others`` (the rule
        ``confirm`` applies)."""
        if decider.identity == confirmation.caller.identity:
            return None
        permissions = await apermissions_now(self.permissions, decider)
        return refusal_for_others(decider, confirmation, permissions, allow)

    def recorded(self, caller: Caller, name: str, idempotency_key: str) -> AnswerJSON | None:
        """The answer an earlier call of ``name`` by ``caller`` with ``idempotency_key`` got,
        when the ledger recorded it; None when there was none or it never finished."""
        record = self.ledger.get_idempotency(caller.identity, name, idempotency_key)
        return record.answer if record is not None and record.state == "done" else None

    async def arecorded(self, caller: Caller, name: str, idempotency_key: str) -> AnswerJSON | None:
        """Async twin of ``recorded``."""
        return await asyncio.to_thread(self.recorded, caller, name, idempotency_key)

    def pending(self, caller: Caller | None = None) -> list[Confirmation]:
        """Confirmations still waiting for a decision and not expired, oldest first."""
        now = self._env.clock()
        found = self.ledger.list_confirmations(status="pending", caller=caller)
        return [c for c in found if c.expires_at > now]

    def close(self) -> None:
        """Stop the handler threads (waiting for none); close the ledger only if the executor
        made it (a ledger passed in belongs to the caller, e.g. to a ``Storage``).

        A cancelled call whose handler has ended gets its outcome recorded before this returns
        (waiting at most ``CLOSE_WAIT`` seconds); one whose handler still runs is not recorded
        (a warning says so). So once it returns, the ledger may be closed: no thread of this
        executor records anything on it any more.
        """
        self._env.handler_pool.shutdown(wait=False, cancel_futures=True)  # queued ones never run
        if not self._env.orphans.close(CLOSE_WAIT):
            log.warning("closing: outcomes of cancelled calls still being recorded after %g s",
                        CLOSE_WAIT)  # fmt: skip
        self._forget()
