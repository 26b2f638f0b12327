"""The ``langgraph.json`` ``"auth"`` of the deployment tests: turnkit keys from the deployment's
ledger, ``Bearer alice-token`` / ``bob-token`` signed in by the application's check."""

from __future__ import annotations

from _deploy_app import signed_in
from turnkit.deploy import turnkit_auth
from turnkit.deploy.env import deployment  # internal: what langgraph.json serves

auth = turnkit_auth(deployment, sessions=signed_in)
