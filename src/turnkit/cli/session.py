"""What a ``turnkit`` command works on: storage, modules, the caller, and the model.

Storage defaults to ``.turnkit/turnkit.sqlite`` and the model to the OpenAI-compatible one named
by ``--model`` / ``TURNKIT_MODEL``. The tools are the application's (``--module``,
``--entry-points``) or, only when asked with ``--demo``, the demo catalogue in
``.turnkit/catalogue.sqlite`` (``--catalogue``): never both, and never the demo by default, so a
tool of the application's is never answered by the demo's tool of the same name. The demo's
permissions are its own user's (``turnkit.demo.DEMO_USER``), whoever the command acts for.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from turnkit.errors import TurnkitError
from turnkit.executor.door import SWITCH
from turnkit.executor.executor import Executor
from turnkit.registry.caller import (
    Caller,
    PermissionProvider,
    StaticPermissions,
    permissions_now,
)
from turnkit.registry.references import instance_of, resolve
from turnkit.registry.registry import Registry
from turnkit.registry.settings import Settings
from turnkit.storage import Storage, open_storage

DEFAULT_DB = Path(".turnkit") / "turnkit.sqlite"
DEFAULT_CATALOGUE = Path(".turnkit") / "catalogue.sqlite"
SCRIPTED = "scripted"
"""The scripted demo model's name, as ``turnkit.agent.models.SCRIPTED`` resolves it (that module
is not imported before a model is made: the ``agent`` package loads LangGraph)."""


class SetupError(TurnkitError):
    """A command-line option that cannot be used; the message says what to do."""


@dataclass
class Session:
    """The storage, executor and caller of one command."""

    storage: Storage
    executor: Executor
    caller: Caller
    demo: bool
    notes: list[str] = field(default_factory=list)
    granted: StaticPermissions | None = None
    """The command's own rights (``--grant``, and the demo's), or None when ``--permissions``
    gave the application's provider."""

    def knows_rights(self, user: str | None, permission: str) -> bool:
        """Whether this command can tell if ``user`` holds ``permission`` as the chat could: with
        the application's provider (everyone's rights, the decider's included, are then the
        application's), or on the demo for the demo user and a permission of the demo's."""
        if self.granted is None:
            return True
        from turnkit.demo import DEMO_PERMISSIONS, DEMO_USER

        return self.demo and user == DEMO_USER and permission in DEMO_PERMISSIONS

    def close(self) -> None:
        """Close the connections (and, for a session, its executor and storage, and the
        upstreams' sessions: a server on stdio ends with the command)."""
        try:
            self.executor.close()
            self.storage.close()
        finally:
            close_upstreams(self.executor.registry)


def close_upstreams(modules: Registry | list[Any]) -> None:
    """End the sessions of the upstream MCP servers among ``modules`` (``--upstream``)."""
    if "turnkit.upstream" not in sys.modules:  # none was made: nothing to import or close
        return
    from turnkit.upstream import McpUpstream

    given = modules.modules.values() if isinstance(modules, Registry) else modules
    for module in given:
        if isinstance(module, McpUpstream):
            module.close()


def open_session(
    *,
    db: str | None,
    modules: list[str],
    entry_points: bool,
    demo: bool,
    catalogue: str | None,
    user: str,
    grants: list[str],
    act: list[str],
    permissions: str | None = None,
    upstreams: list[str] | None = None,
) -> Session:
    """Open the storage and build the executor for the options of a command.

    Nothing persistent changes: ``act`` (the modules the agent may act in) becomes this command's
    default for ``api_session_write_modules``, which an operator's setting in the ledger
    (``turnkit settings set``) overrides. ``permissions`` names the application's permission
    provider (``package.module:provider``); without it, the user holds ``grants``, and with
    ``demo`` the demo user (only) holds the demo's permissions.

    Raises:
        SetupError: an option that cannot be used (the message says what to do).
        StorageError: ``db`` names nothing that can be opened.
    """
    if not user.strip():
        raise SetupError("--user must name the signed-in user, e.g. --user alice")
    caller = Caller.session(user)
    provider = None if permissions is None else _provider(permissions, caller)
    registry = registry_of(modules, entry_points, demo, catalogue, upstreams or [])
    url = db or str(DEFAULT_DB)
    if db is None:
        DEFAULT_DB.parent.mkdir(parents=True, exist_ok=True)
    static = StaticPermissions({user: set(grants)})
    notes = [str(w) for w in registry.warnings]
    if demo:
        from turnkit.demo import DEMO_PERMISSIONS, DEMO_USER, Catalogue

        static.grant(DEMO_USER, *DEMO_PERMISSIONS)
        act = [*act, Catalogue.key]
        if provider is None and user != DEMO_USER:
            held = ", ".join(sorted(grants)) or "nothing"
            more = " ".join(f"--grant {name}" for name in sorted(DEMO_PERMISSIONS))
            notes.append(
                f"with --demo, only the demo user {DEMO_USER!r} holds the demo's permissions:"
                f" {user!r} holds {held} here (to give them: {more})"
            )
    try:
        storage = open_storage(url)
    except BaseException:
        close_upstreams(registry)
        raise
    try:
        settings = Settings(api_session_write_modules=frozenset(act))
        executor = Executor(
            registry, ledger=storage.ledger, permissions=provider or static, settings=settings
        )
        notes += _overridden(storage, act)
    except BaseException:
        storage.close()
        close_upstreams(registry)
        raise
    return Session(storage, executor, caller, demo, notes, None if provider else static)


def registry_of(
    modules: list[str],
    entry_points: bool,
    demo: bool,
    catalogue: str | None,
    upstreams: list[str] | None = None,
) -> Registry:
    """The registry of a command's ``--module``, ``--upstream``, ``--entry-points`` and ``--demo``
    (with its ``--catalogue``); only the upstreams are connected, to list their tools.

    Raises:
        SetupError: the options load what cannot be loaded together, or a module fails to load.
    """
    if demo and (modules or entry_points or upstreams):
        raise SetupError(
            "--demo loads the demo catalogue alone: leave out --module, --upstream and"
            " --entry-points"
        )
    if catalogue is not None and not demo:
        raise SetupError(
            f"--catalogue {catalogue!r} is the demo catalogue's file: add --demo, or leave it out"
        )
    if not demo:
        from turnkit.cli.upstreams import load

        given = [*(_module(spec) for spec in modules), *load(upstreams or [])]
        try:
            return Registry(given, entry_points=entry_points)
        except BaseException:
            close_upstreams(given)
            raise
    from turnkit.demo import Catalogue

    return Registry([Catalogue(Path(catalogue or DEFAULT_CATALOGUE))])


def open_records(db: str | None) -> Session:
    """Open the storage alone, for a command that reads or writes the ledger's records (settings,
    the list of confirmations): no module is loaded, no folder made but the default storage's.

    Raises:
        StorageError: ``db`` names nothing that can be opened.
    """
    if db is None:
        DEFAULT_DB.parent.mkdir(parents=True, exist_ok=True)
    storage = open_storage(db or str(DEFAULT_DB))
    nobody = StaticPermissions()  # no module, so no rights to hold
    try:
        executor = Executor(Registry(), ledger=storage.ledger, permissions=nobody)
    except BaseException:
        storage.close()
        raise
    return Session(storage, executor, Caller.session("operator"), demo=False, granted=nobody)


def _overridden(storage: Storage, act: list[str]) -> list[str]:
    """A note when the ledger's switch overrides ``--act`` for some of its modules."""
    override = storage.ledger.settings().get(SWITCH)
    if override is None or not act:
        return []
    ignored = sorted(set(act) - set(override))
    if not ignored:
        return []
    return [
        f"the agent may not act in {', '.join(map(repr, ignored))}: the ledger's setting {SWITCH}"
        f" is {sorted(override)} (change it with: turnkit settings set {SWITCH} '[...]')"
    ]


def _module(spec: str) -> Any:
    """``--module package.module:object``: a module object, or a class or factory making one."""
    value = _made("--module", spec, instance_of, _resolved("--module", spec))
    if callable(value) and not hasattr(value, "api_tools"):
        return _made("--module", spec, value)
    return value


def _provider(spec: str, caller: Caller) -> PermissionProvider:
    """``--permissions package.module:provider``: the application's provider (a class is
    instantiated), a callable ``(caller) -> permissions``, asked once for ``caller``'s rights so
    that one that cannot answer is told now, not as the failure of the first call it spoils."""
    value = _made("--permissions", spec, instance_of, _resolved("--permissions", spec))
    if not callable(value):
        raise SetupError(
            f"--permissions {spec!r} is a {type(value).__name__}, not a permission provider: name"
            " a function (caller) -> set of permissions, or an object with __call__"
        )
    _made("--permissions", spec, permissions_now, value, caller)
    return value


WANTED = {
    "--module": "a module object, or a class or factory that takes no arguments",
    "--permissions": "a function (caller) -> set of permissions (not async)",
}
"""What each option that names the application's code must name."""


def _made(option: str, spec: str, make: Callable[..., Any], *args: Any) -> Any:
    """``make(*args)``; the application's code failing in it is told as a mistake in ``option``."""
    try:
        return make(*args)
    except Exception as exc:  # the application's own code: it may raise anything
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        raise SetupError(
            f"{option} {spec!r} failed when called ({reason}): name {WANTED[option]}"
        ) from None


def _resolved(option: str, spec: str) -> Any:
    """The object ``spec`` names, imported as uvicorn and ``langgraph dev`` import an app: the
    current folder first on ``sys.path`` (the console script does not put it there), so
    ``--module myapp:tools`` works from the folder that holds ``myapp.py``."""
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        return resolve(spec)
    except ValueError as exc:
        missing = exc.__cause__
        if isinstance(missing, ModuleNotFoundError) and _names_spec(missing.name, spec):
            raise SetupError(_not_found(option, spec, str(missing.name), here)) from None
        raise SetupError(f"{option} {exc}") from None


def _names_spec(missing: str | None, spec: str) -> bool:
    """Whether the module Python did not find is ``spec``'s own (or a package on its way),
    not one that the application's module imports."""
    module = spec.partition(":")[0]
    return missing is not None and (module == missing or module.startswith(missing + "."))


def _not_found(option: str, spec: str, missing: str, here: str) -> str:
    top = missing.partition(".")[0]
    return (
        f"{option} {spec!r}: no module {missing!r} in the current folder ({here}) nor on"
        f" Python's path (PYTHONPATH, installed packages): run turnkit in the folder that holds"
        f" {top}.py (or the package folder {top}/), set PYTHONPATH to that folder, or install"
        " your package (pip install -e .)"
    )


def make_model(name: str | None, base_url: str | None) -> Any:
    """The chat model for ``--model`` / ``--base-url``; ``scripted`` is the offline demo model."""
    name = name or os.environ.get("TURNKIT_MODEL") or "gpt-4o-mini"
    url = base_url or os.environ.get("OPENAI_BASE_URL")
    needs_server = name != SCRIPTED and ":" not in name  # Agent("scripted") is the same model
    if needs_server and not url and not os.environ.get("OPENAI_API_KEY"):
        raise SetupError(
            "no model is configured. Set OPENAI_API_KEY to use OpenAI, or OPENAI_BASE_URL (or"
            " --base-url) for an OpenAI-compatible server such as vLLM, llama.cpp or Ollama,"
            " e.g. --base-url http://127.0.0.1:11434/v1 --model llama3.1.\n"
            "No model at hand? `turnkit demo` shows the whole flow offline, and"
            " `turnkit chat --demo --model scripted` chats with the scripted demo model."
        )
    from turnkit.agent.models import resolve_model

    named = name if ":" in name or name == SCRIPTED else f"openai:{name}"
    return resolve_model(named, base_url=url)
