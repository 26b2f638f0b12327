"""What ``langgraph.json`` names for a deployment configured by ``TURNKIT_*`` variables.

.. code-block:: json

    {
      "dependencies": ["."],
      "graphs": {"agent": "turnkit.deploy.env:graph"},
      "auth": {"path": "turnkit.deploy.env:auth"},
      "http": {"app": "turnkit.deploy.env:app", "disable_mcp": true}
    }

Importing this module reads and checks the variables (``turnkit.deploy.config``), so a mistake
stops the server at start-up with a ``ConfigError`` naming the variable; it opens and writes
nothing. The modules, the permission provider, the ledger and the model are loaded when the graph
is first built (the first run, or the server's first look at the graph), in a worker thread.

- ``graph``: the graph factory (``Deployment.agraph``).
- ``auth``: turnkit API keys (``Authorization: Bearer tk_...``) from the ledger, threads kept to
  their owner (``turnkit_auth``). An application that signs its users in writes its own
  ``Auth`` with ``turnkit_auth(deployment, sessions=...)``, or with ``key_user`` in its own
  handler (see docs/guides/langchain.md, "Who is calling").
- ``app``: REST ``/v1`` and MCP ``/mcp`` on the same executor and ledger.
"""

from __future__ import annotations

from turnkit.deploy.auth import turnkit_auth
from turnkit.deploy.deployment import Deployment

__all__ = ["app", "auth", "deployment", "graph"]

deployment = Deployment.from_env()
"""The deployment the environment describes (built on first use)."""
graph = deployment.agraph
"""The graph factory ``langgraph.json`` names."""
auth = turnkit_auth(deployment)
"""API-key sign-in for ``langgraph.json``'s ``"auth"``."""
app = deployment.app()
"""The REST and MCP app for ``langgraph.json``'s ``"http": {"app": ...}``."""
