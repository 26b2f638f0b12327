"""Whether this door can run a held write as it was held (docs/architecture.md §4, "Seven
doors, one promise").

A confirmation is decided wherever a person is: the CLI, a server's inbox or REST API, the turn
graph, another application on the same ledger. Each of these doors has its own registry and its
own settings given in code. When approving would fail, or run other code, because of **the door's
own configuration** — not the held user's rights — the decision is refused and the write stays
pending, with a line saying what differs, so the door that can run it still may:

- the door does not declare the held tool, or declares it differently (another module's handler
  under the same name, a changed schema: ``registry/declaration.py``);
- the held input is over this door's ``max_input_chars``;
- the tool's module is disabled here;
- the agent's switch: the write was held for a signed-in user in a module the agent may act in
  where it was held (``api_session_write_modules`` in that door's settings), and this door's
  settings in code leave the module out. When the operator's setting in the ledger leaves it out,
  every door agrees: that is the rule now, and the approval closes as ``forbidden``.

A rejection runs nothing and is never refused here.
"""

from __future__ import annotations

from typing import Any

from turnkit.executor import steps
from turnkit.executor.answers import Refused
from turnkit.executor.effects import Environment, Steps
from turnkit.executor.pipeline import enabled_now
from turnkit.ledger.records import Confirmation
from turnkit.registry.declaration import fingerprint
from turnkit.registry.settings import Settings

__all__ = ["SWITCH", "door_refusal"]

SWITCH = "api_session_write_modules"
"""The setting of the modules the agent may act in."""


def door_refusal(
    env: Environment,
    held: Confirmation,
    settings: Settings,
    overrides: dict[str, Any],
    *,
    edit: bool = False,
) -> Steps[Refused | None]:
    """A ``cannot_decide_here`` answer when this door's own configuration keeps it from running
    ``held`` as it was held (see above), else None. ``overrides``: the operator's settings in
    the ledger, read now; ``settings``: this door's defaults with them; ``edit``: the decision
    replaces the held input (the edit's own is checked, not the held one)."""
    tool = env.registry.get(held.tool)
    where = f"module {held.module!r}" if held.module else "the module that declares it"
    if tool is None:
        return _refused(
            held,
            f"this door does not declare the tool {held.tool!r}; it was held by {where}: decide"
            f" it where that module is loaded (the turnkit command: --module"
            f" package.module:object, the one that declares {held.tool!r})",
            missing=held.tool,
        )
    if held.fingerprint is not None and fingerprint(tool) != held.fingerprint:
        return _refused(
            held,
            f"this door declares {held.tool!r} (module {tool.module!r}) differently from the"
            f" declaration that held it ({where}): another handler or schema would run. Decide"
            f" it where {where} is loaded as it was when the call was held",
            module=held.module,
            here=tool.module,
        )
    problem = None if edit else steps.input_error(tool, held.input, settings)[0]
    if problem is not None:  # the declaration is the same: this door's own limits differ
        return _refused(
            held,
            f"the held input does not pass this door's checks ({problem.message});"
            f" its setting 'max_input_chars' is {settings.max_input_chars}: decide it where the"
            " call was held, or give this door the same settings",
            setting="max_input_chars",
        )
    enabled = (yield from enabled_now(env.registry, [tool.module]))[tool.module]
    if not enabled:
        return _refused(
            held,
            f"module {tool.module!r} is disabled in this door; decide it where it is enabled",
            module=tool.module,
        )
    if (
        held.caller.kind == "session"
        and tool.is_write
        and not tool.is_system
        and tool.module not in settings.api_session_write_modules
        and SWITCH not in overrides
    ):
        here = sorted(str(m) for m in settings.api_session_write_modules)
        return _refused(
            held,
            f"the agent made this write in module {tool.module!r}, where the door that held it"
            f" lets it act, but this door's setting {SWITCH!r} is {here} (given in code, not in"
            f" the ledger). Decide it where the agent may act in {tool.module!r}, give this door"
            f" the same setting (the turnkit command: --act {tool.module}), or set it for every"
            f" door in the ledger: turnkit settings set {SWITCH} '[\"{tool.module}\"]'",
            setting=SWITCH,
            module=tool.module,
        )
    return None


def _refused(held: Confirmation, why: str, **details: Any) -> Refused:
    return Refused(
        "cannot_decide_here",
        f"confirmation {held.id!r} was not decided: {why}. It is still pending.",
        details,
    )
