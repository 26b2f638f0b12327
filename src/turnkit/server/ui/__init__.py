"""The web inbox at ``/ui/``: people approve, reject or edit held writes in a browser."""

from turnkit.server.ui.pages import inbox_router, static_files
from turnkit.server.ui.session import SignIn

__all__ = ["SignIn", "inbox_router", "static_files"]
