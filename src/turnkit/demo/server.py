"""The REST and MCP app ``langgraph dev`` serves beside the demo graph (``langgraph.json``
``"http": {"app": "turnkit.demo.server:app"}``).

It uses the Studio graph's own executor (``turnkit.demo.studio.executor``): one ledger and one key
store, so a write a Studio run holds is listed and decided at ``/v1/confirmations``, and the paused
run, resumed, honours that decision. langgraph-api's own ``/mcp`` route is turned off
(``"disable_mcp": true``: it speaks only older MCP protocols and serves graphs, not tools), so
``/mcp`` is turnkit's. Keys: ``turnkit keys create --db .turnkit/demo.ledger.sqlite --user demo
--scope catalogue.products:read --scope system.confirmations:decide`` (the ledger beside
``TURNKIT_DEMO_DB``; the second scope lets the key decide the Studio session's holds).

The demo has one person, the demo user: serving this app, they may also decide every held write
(``system.confirm_any``), so a key of theirs approves over REST what a Studio run held for them.
"""

from __future__ import annotations

from turnkit.demo import DEMO_USER
from turnkit.demo.studio import executor
from turnkit.registry.caller import StaticPermissions
from turnkit.registry.confirmations import CONFIRM_ANY
from turnkit.server import create_app

__all__ = ["app"]

if isinstance(executor.permissions, StaticPermissions):  # the demo's own, not an application's
    executor.permissions.grant(DEMO_USER, CONFIRM_ANY)
app = create_app(executor)
"""The app ``langgraph.json`` mounts."""
