"""What a ``turnkit`` command works on: storage, modules, the caller, and the model.

The defaults are the demo's: the catalogue module in ``.turnkit/catalogue.sqlite``, storage in
``.turnkit/turnkit.sqlite``, the demo user (a signed-in session whose writes wait for a yes), and
the OpenAI-compatible model named by ``--model`` / ``TURNKIT_MODEL``.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from turnkit.registry.caller import Caller, StaticPermissions
from turnkit.registry.executor import Executor
from turnkit.registry.registry import Registry
from turnkit.storage import Storage, open_storage

DEFAULT_DB = Path(".turnkit") / "turnkit.sqlite"
DEFAULT_CATALOGUE = Path(".turnkit") / "catalogue.sqlite"
SCRIPTED = "scripted"


class SetupError(Exception):
    """A command-line option that cannot be used; the message says what to do."""


@dataclass
class Session:
    """The storage, executor and caller of one command."""

    storage: Storage
    executor: Executor
    caller: Caller
    demo: bool
    notes: list[str] = field(default_factory=list)

    def close(self) -> None:
        """Close the connections (and, for a session, its executor and storage)."""
        self.executor.close()
        self.storage.close()


def open_session(
    *,
    db: str | None,
    modules: list[str],
    entry_points: bool,
    catalogue: str | None,
    user: str,
    grants: list[str],
    act: list[str],
) -> Session:
    """Open the storage and build the executor for the options of a command."""
    url = db or str(DEFAULT_DB)
    if "://" not in url:
        Path(url).parent.mkdir(parents=True, exist_ok=True)
    storage = open_storage(url)
    try:
        loaded = [_load(spec) for spec in modules]
        demo = not loaded and not entry_points
        permissions = StaticPermissions({user: set(grants)})
        if demo:
            from turnkit.demo import DEMO_PERMISSIONS, Catalogue

            path = Path(catalogue or DEFAULT_CATALOGUE)
            path.parent.mkdir(parents=True, exist_ok=True)
            loaded = [Catalogue(path)]
            permissions.grant(user, *DEMO_PERMISSIONS)
            act = [*act, Catalogue.key]
        registry = Registry(loaded, entry_points=entry_points)
        if act:
            storage.ledger.set_setting("api_session_write_modules", sorted(set(act)))
        executor = Executor(registry, ledger=storage.ledger, permissions=permissions)
    except BaseException:
        storage.close()
        raise
    notes = [str(w) for w in registry.warnings]
    return Session(storage, executor, Caller.session(user), demo, notes)


def _load(spec: str) -> Any:
    """``package.module:object`` (a module object, or a class/factory to call) as a module."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise SetupError(f"--module {spec!r}: write it as 'package.module:object'")
    try:
        value: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        raise SetupError(f"--module {spec!r} could not be loaded: {exc}") from exc
    return value() if callable(value) and not hasattr(value, "api_tools") else value


def make_model(name: str | None, base_url: str | None) -> Any:
    """The chat model for ``--model`` / ``--base-url``; ``scripted`` is the offline demo model."""
    name = name or os.environ.get("TURNKIT_MODEL") or "gpt-4o-mini"
    if name == SCRIPTED:
        from turnkit.demo import scripted_demo_model

        return scripted_demo_model()
    url = base_url or os.environ.get("OPENAI_BASE_URL")
    if not url and not os.environ.get("OPENAI_API_KEY") and ":" not in name:
        raise SetupError(
            "no model is configured. Set OPENAI_API_KEY to use OpenAI, or OPENAI_BASE_URL (or"
            " --base-url) for an OpenAI-compatible server such as vLLM, llama.cpp or Ollama,"
            " e.g. --base-url http://127.0.0.1:11434/v1 --model llama3.1.\n"
            "No model at hand? `turnkit demo` shows the whole flow offline, and"
            " `turnkit chat --model scripted` chats with the scripted demo model."
        )
    from turnkit.models import resolve_model

    return resolve_model(name if ":" in name else f"openai:{name}", base_url=url)
