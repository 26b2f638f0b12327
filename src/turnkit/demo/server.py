"""The REST and MCP app ``langgraph dev`` serves beside the demo graph (``langgraph.json``
``"http": {"app": "turnkit.demo.server:app"}``).

It is the app of the Studio graph's deployment (``turnkit.demo.studio.deployment``), built with
its executor when the server starts: one ledger and one key store, so a write a Studio run holds
is listed and decided at ``/v1/confirmations``, and the paused run, resumed, honours that
decision. langgraph-api's own ``/mcp`` route is turned off (``"disable_mcp": true``: it speaks only
older MCP protocols and serves graphs, not tools), so ``/mcp`` is turnkit's. Keys: ``turnkit keys
create --db .turnkit/demo.ledger.sqlite --user demo --scope catalogue.products:read --scope
system.confirmations:decide`` (the ledger beside ``TURNKIT_DEMO_DB``; the second scope lets the
key decide the Studio session's holds).

The demo has one person, the demo user: serving this app, they may also decide every held write
(``system.confirm_any``), so a key of theirs approves over REST what a Studio run held for them.
"""

from __future__ import annotations

from turnkit.demo import DEMO_USER
from turnkit.demo.studio import deployment
from turnkit.executor.confirmations import CONFIRM_ANY
from turnkit.executor.executor import Executor
from turnkit.registry.caller import StaticPermissions

__all__ = ["app"]


def _decide_any(executor: Executor) -> None:
    """Let the demo user decide every held write (the demo's own rights, not an application's)."""
    if isinstance(executor.permissions, StaticPermissions):
        executor.permissions.grant(DEMO_USER, CONFIRM_ANY)


app = deployment.app(prepare=_decide_any)
"""The app ``langgraph.json`` mounts (its executor is built when the server starts)."""
