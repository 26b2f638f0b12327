"""Deploying turnkit on LangGraph's server (``langgraph dev``, LangGraph Platform).

- ``Deployment``: one executor, model and turn graph, built on first use in a worker thread;
  ``Deployment.agraph`` is the graph factory ``langgraph.json`` names, ``Deployment.app()`` the
  REST and MCP app on the same ledger. ``Deployment.from_env()`` reads ``TURNKIT_DATABASE_URL``,
  ``TURNKIT_MODULES``, ``TURNKIT_PERMISSIONS``, ``TURNKIT_MODEL`` and ``TURNKIT_DEFAULT_USER``
  (``turnkit.deploy.config``); ``turnkit.deploy.env`` holds the objects to name for it.
- Who is calling: ``turnkit_auth``, ``key_user`` and ``owner_only`` map LangGraph's custom auth to
  turnkit callers (``turnkit.deploy.auth``); the turn graph reads the authenticated user from the
  run's config and makes it a caller with ``caller_of_user`` (``turnkit.turn.server_user``).

Examples:
    >>> from turnkit.deploy import Deployment
    >>> deployment = Deployment.from_env({"TURNKIT_DATABASE_URL": "ledger.sqlite"})
    >>> graph = deployment.agraph  # nothing is opened until the server first calls it
"""

from __future__ import annotations

from turnkit.deploy.auth import bearer_token, key_user, owner_only, turnkit_auth
from turnkit.deploy.config import DeployConfig
from turnkit.deploy.deployment import Deployment
from turnkit.turn.server_user import caller_of_user

__all__ = [
    "DeployConfig",
    "Deployment",
    "bearer_token",
    "caller_of_user",
    "key_user",
    "owner_only",
    "turnkit_auth",
]
