"""Who may see and decide a confirmation in the inbox: the executor's rule
(``refusal_for_others``), within the allow list of the key the person signed in with. A card,
a confirmation's own page, the history and every decision a page sends ask it here."""

from __future__ import annotations

from collections.abc import Collection

from turnkit.executor.confirmations import refusal_for_others
from turnkit.executor.executor import Executor
from turnkit.ledger.records import Confirmation
from turnkit.registry.caller import apermissions_now
from turnkit.server.ui.session import Person

__all__ = ["may_decide", "permissions_of", "theirs"]


async def permissions_of(executor: Executor, who: Person) -> Collection[str]:
    """The permissions ``who`` holds now."""
    return await apermissions_now(executor.permissions, who.caller)


def theirs(who: Person, held: Confirmation, permissions: Collection[str]) -> bool:
    """Whether ``who`` may see and decide ``held``: the executor's rule, within their allow
    list (a key's allow list binds the person who signed in with it, as it does over REST)."""
    if who.allow != "all" and held.tool not in who.allow:
        return False
    if held.caller.identity == who.caller.identity:
        return True
    return refusal_for_others(who.caller, held, permissions, who.allow) is None


async def may_decide(executor: Executor, who: Person, held: Confirmation) -> bool:
    """``theirs`` with the permissions ``who`` holds now."""
    return theirs(who, held, await permissions_of(executor, who))
