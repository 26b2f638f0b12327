"""``turnkit tools``: which tools a caller sees now, and which of them wait for a confirmation."""

from __future__ import annotations

from turnkit.cli.session import SetupError
from turnkit.executor.executor import Executor
from turnkit.registry.caller import Caller
from turnkit.registry.names import model_name


def caller_of(spec: str, scopes: list[str]) -> Caller:
    """``session:<user>``, ``key:<key id>`` or ``public`` as a ``Caller``."""
    kind, _, ident = spec.partition(":")
    if kind == "session" and ident:
        return Caller.session(ident)
    if kind == "key" and ident:
        return Caller.key(ident, scopes=scopes, user_id="demo")
    if kind == "public":
        return Caller.public()
    raise SetupError(f"--caller {spec!r}: use session:<user>, key:<key id> or public")


def rows(executor: Executor, caller: Caller) -> list[dict[str, str]]:
    """One row per tool the caller may see now; when it waits for a person, by the executor's
    own rule (``Executor.hold_rule``)."""
    settings = executor.settings_now()
    batch_over = settings.confirm_batch_over
    words = {
        "person": "yes: the agent acts for a person",
        "operator": "yes: the operator holds every key write (hold_key_writes)",
        "always": "yes: always",
        "input": "depends on the input",
        "input or batch": f"depends on the input, and when a list has over {batch_over} items",
        "batch": f"when a list has over {batch_over} items",
        "never": "no",
    }
    return [
        {
            "name": tool.name,
            "model": model_name(tool.name) or "(hidden: name too long)",
            "kind": "write" if tool.is_write else "read",
            "scope": tool.scope or "-",
            "confirm": words[executor.hold_rule(caller, tool, settings)],
        }
        for tool in executor.visible_for(caller, settings=settings)
    ]


def hidden(executor: Executor, caller: Caller) -> list[tuple[str, str]]:
    """``(tool name, why the caller may not see it now)`` for every registered tool hidden."""
    return [(tool.name, reason) for tool, reason in executor.hidden_for(caller)]
