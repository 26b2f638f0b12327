"""A deployment's configuration, read from ``TURNKIT_*`` environment variables.

- ``TURNKIT_DATABASE_URL`` (required): the ledger, a SQLite file (``.sqlite``, ``.sqlite3``,
  ``.db``), ``sqlite:///path`` or ``postgresql://...``.
- ``TURNKIT_MODULES``: the application's modules, ``package.module:object`` separated by commas or
  spaces (a class or a factory is called).
- ``TURNKIT_PERMISSIONS``: the permission provider, ``package.module:provider`` (a function
  ``(caller) -> permissions``, sync or async; a class is instantiated); without it nobody holds
  any permission.
- ``TURNKIT_MODEL``: the chat model: a name on OpenAI or on ``OPENAI_BASE_URL``'s server (default
  ``gpt-4o-mini``), or a ``provider:model``.
- ``TURNKIT_MODEL_FACTORY``: instead, a ``package.module:function`` called with no arguments
  that returns the chat model (any LangChain chat model with ``bind_tools``); for the offline
  demo model, ``turnkit.demo:scripted_demo_model``.
- ``TURNKIT_DEFAULT_USER``: the session user of runs no one signed in; without it such a run
  fails, saying how to sign in.
- ``TURNKIT_MCP_ALLOWED_HOSTS``, ``TURNKIT_MCP_ALLOWED_ORIGINS``: the ``Host`` names and browser
  origins ``/mcp`` answers besides the loopback ones, separated by commas or spaces
  (``create_app``'s ``mcp_allowed_hosts`` and ``mcp_allowed_origins``): a deployment reached by
  its domain names it here.

Reading them only checks their form; nothing is imported or opened until the deployment is
first built (``Deployment.executor``), and every mistake is a ``ConfigError`` naming the variable.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from turnkit.errors import ConfigError, StorageError
from turnkit.ledger.urls import ACCEPTED, parse_url
from turnkit.registry.caller import PermissionProvider
from turnkit.registry.references import instance_of, resolve

__all__ = [
    "DEFAULT_MODEL",
    "SCRIPTED",
    "DeployConfig",
    "load_model",
    "load_modules",
    "load_permissions",
]

DEFAULT_MODEL = "gpt-4o-mini"
"""The model asked of OpenAI or ``OPENAI_BASE_URL``'s server when ``TURNKIT_MODEL`` is not set."""
SCRIPTED = "scripted"
"""What ``turnkit chat --model`` calls the demo's scripted model: not a name a deployment takes
(the demo is built on this package, not under it: ``TURNKIT_MODEL_FACTORY`` names it)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class DeployConfig:
    """What a deployment is built from; ``from_env()`` reads it from the environment.

    Examples:
        >>> DeployConfig.from_env({"TURNKIT_DATABASE_URL": "ledger.sqlite"}).modules
        ()
    """

    database_url: str
    """The ledger's URL (``TURNKIT_DATABASE_URL``)."""
    modules: tuple[str, ...] = ()
    """The modules, as ``package.module:object`` references (``TURNKIT_MODULES``)."""
    permissions: str | None = None
    """The permission provider's reference (``TURNKIT_PERMISSIONS``), or None: no one holds any."""
    model: str = DEFAULT_MODEL
    """The chat model's name (``TURNKIT_MODEL``)."""
    model_factory: str | None = None
    """The reference of a function that makes the chat model (``TURNKIT_MODEL_FACTORY``), or None:
    ``model`` names it."""
    default_user: str | None = None
    """The session user of runs no one signed in (``TURNKIT_DEFAULT_USER``), or None."""
    mcp_allowed_hosts: tuple[str, ...] = ()
    """The ``Host`` names MCP answers besides the loopback ones (``TURNKIT_MCP_ALLOWED_HOSTS``)."""
    mcp_allowed_origins: tuple[str, ...] = ()
    """The browser origins MCP answers besides the loopback ones
    (``TURNKIT_MCP_ALLOWED_ORIGINS``)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> DeployConfig:
        """The configuration in ``environ`` (default ``os.environ``).

        Raises:
            ConfigError: a variable is missing or malformed; the message names it and the fix.
        """
        env = os.environ if environ is None else environ
        url = (env.get("TURNKIT_DATABASE_URL") or "").strip()
        if not url:
            raise ConfigError(f"set TURNKIT_DATABASE_URL to the ledger: {ACCEPTED}")
        try:
            parse_url(url)
        except StorageError as exc:
            raise ConfigError(f"TURNKIT_DATABASE_URL: {exc}") from None
        modules = _listed(env, "TURNKIT_MODULES")
        for reference in modules:
            _check_form("TURNKIT_MODULES", reference)
        permissions = (env.get("TURNKIT_PERMISSIONS") or "").strip() or None
        if permissions is not None:
            _check_form("TURNKIT_PERMISSIONS", permissions)
        default_user = (env.get("TURNKIT_DEFAULT_USER") or "").strip() or None
        model = (env.get("TURNKIT_MODEL") or "").strip() or DEFAULT_MODEL
        factory = (env.get("TURNKIT_MODEL_FACTORY") or "").strip() or None
        if factory is not None:
            _check_form("TURNKIT_MODEL_FACTORY", factory)
            if env.get("TURNKIT_MODEL", "").strip():
                raise ConfigError(
                    "set TURNKIT_MODEL or TURNKIT_MODEL_FACTORY, not both: one names the model"
                )
        elif model == SCRIPTED:
            raise ConfigError(
                "TURNKIT_MODEL names a chat model; for the demo's scripted model set"
                " TURNKIT_MODEL_FACTORY=turnkit.demo:scripted_demo_model instead"
            )
        return cls(
            database_url=url,
            modules=modules,
            permissions=permissions,
            model=model,
            model_factory=factory,
            default_user=default_user,
            mcp_allowed_hosts=_listed(env, "TURNKIT_MCP_ALLOWED_HOSTS"),
            mcp_allowed_origins=_listed(env, "TURNKIT_MCP_ALLOWED_ORIGINS"),
        )


def _listed(env: Mapping[str, str], variable: str) -> tuple[str, ...]:
    """The items of ``variable``, separated by commas or spaces."""
    return tuple(item for item in re.split(r"[\s,]+", env.get(variable, "").strip()) if item)


def _check_form(variable: str, reference: str) -> None:
    module, sep, attribute = reference.partition(":")
    if not sep or not module or not attribute:
        raise ConfigError(
            f"{variable}: {reference!r} is not 'package.module:object' (e.g. myapp.tools:Shop)"
        )


def load_modules(references: tuple[str, ...]) -> list[Any]:
    """The module objects ``references`` name (a class or a factory is called).

    Raises:
        ConfigError: a reference cannot be loaded, or its class or factory fails.
    """
    return [_module(reference) for reference in references]


def _module(reference: str) -> Any:
    value = _made(
        "TURNKIT_MODULES", reference, lambda: instance_of(_resolved("TURNKIT_MODULES", reference))
    )
    if callable(value) and not hasattr(value, "api_tools"):
        return _made("TURNKIT_MODULES", reference, value)
    return value


def load_permissions(reference: str | None) -> PermissionProvider | None:
    """The permission provider ``reference`` names (a class is instantiated), or None.

    Raises:
        ConfigError: it cannot be loaded, or it is not callable.
    """
    if reference is None:
        return None
    resolved = _resolved("TURNKIT_PERMISSIONS", reference)
    value = _made("TURNKIT_PERMISSIONS", reference, lambda: instance_of(resolved))
    if not callable(value):
        raise ConfigError(
            f"TURNKIT_PERMISSIONS: {reference!r} is a {type(value).__name__}, not a permission"
            " provider: name a function (caller) -> set of permissions, or a class with __call__"
        )
    provider: PermissionProvider = value
    return provider


def _resolved(variable: str, reference: str) -> Any:
    try:
        return resolve(reference)
    except ValueError as exc:
        raise ConfigError(f"{variable}: {exc}") from None


def _made(variable: str, reference: str, make: Any) -> Any:
    try:
        return make()
    except ConfigError:
        raise
    except Exception as exc:  # the application's own code: it may raise anything
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        raise ConfigError(f"{variable}: {reference!r} failed when called ({reason})") from None


def load_model(name: str, factory: str | None = None) -> Any:
    """The chat model ``TURNKIT_MODEL_FACTORY``'s function makes, else the one ``TURNKIT_MODEL``
    names (see the module docstring).

    Raises:
        ConfigError: the factory cannot be loaded, or it fails.
        ModelError: the named model cannot be built: no ``OPENAI_API_KEY`` and no
            ``OPENAI_BASE_URL`` for an OpenAI name, an unknown provider, ...
    """
    if factory is not None:
        make = _resolved("TURNKIT_MODEL_FACTORY", factory)
        return _made("TURNKIT_MODEL_FACTORY", factory, make)
    from turnkit.agent.models import resolve_model  # langchain-openai costs ~2 s: only now

    return resolve_model(name if ":" in name else f"openai:{name}")
