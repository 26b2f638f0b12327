"""What ``langgraph.json`` names for a deployment configured by ``TURNKIT_*`` variables.

.. code-block:: json

    {
      "dependencies": ["."],
      "graphs": {"agent": "turnkit.deploy.env:graph"},
      "auth": {"path": "turnkit.deploy.env:auth"},
      "http": {"app": "turnkit.deploy.env:app", "disable_mcp": true}
    }

Importing this module reads and checks the variables (``turnkit.deploy.config``), so a mistake
stops the server at start-up, in one line naming the variable (``ConfigError: ...``); it opens
and writes nothing. Under ``langgraph dev``'s reloader (its default) the server runs in a child
process and the reloader would wait for a file to change: the child stops the reloader too.
The modules, the permission provider, the ledger and the model are loaded when the graph
is first built (the first run, or the server's first look at the graph), in a worker thread.

- ``graph``: the graph factory (``Deployment.agraph``).
- ``auth``: turnkit API keys (``Authorization: Bearer tk_...``) from the ledger, threads kept to
  their owner (``turnkit_auth``). An application that signs its users in writes its own
  ``Auth`` with ``turnkit_auth(deployment, sessions=...)``, or with ``key_user`` in its own
  handler (see docs/guides/langchain.md, "Who is calling").
- ``app``: REST ``/v1`` and MCP ``/mcp`` on the same executor and ledger.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
from typing import NoReturn

from turnkit.deploy.auth import turnkit_auth
from turnkit.deploy.deployment import Deployment
from turnkit.errors import ConfigError

__all__ = ["app", "auth", "deployment", "graph"]


def _stop(problem: ConfigError) -> NoReturn:
    """End the server that imports this module with ``problem`` in one line (no traceback): in
    a worker that uvicorn's reloader (or its supervisor of several workers) started, stop that
    parent as well, else it waits for a file to change and the server never answers."""
    print(f"turnkit: ConfigError: {problem}; the server stops", file=sys.stderr, flush=True)
    parent = multiprocessing.parent_process()
    if parent is not None and parent.pid and "uvicorn._subprocess" in sys.modules:
        os.kill(parent.pid, signal.SIGTERM)
    raise SystemExit(1)


try:
    deployment = Deployment.from_env()
    """The deployment the environment describes (built on first use)."""
except ConfigError as wrong:
    _stop(wrong)
graph = deployment.agraph
"""The graph factory ``langgraph.json`` names."""
auth = turnkit_auth(deployment)
"""API-key sign-in for ``langgraph.json``'s ``"auth"``."""
app = deployment.app()
"""The REST and MCP app for ``langgraph.json``'s ``"http": {"app": ...}``."""
