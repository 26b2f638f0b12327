"""Serve the registry over HTTP: a REST API under ``/v1`` and MCP at ``/mcp``, for API-key callers.

``create_app(executor)`` returns a FastAPI app that an application mounts in its own, or that
``turnkit serve`` runs with uvicorn. Every call goes through the same executor and ledger as the
agent's, so rights, holds, idempotency and the audit are the same for every surface.
"""

from turnkit.server.app import create_app

__all__ = ["create_app"]
