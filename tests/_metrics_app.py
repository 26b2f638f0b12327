"""The command-line tests' shop with one more read, ``shop.which_worker``: the process id of the
``turnkit serve`` worker that ran it, so a test can tell when its calls reached every worker."""

from __future__ import annotations

import os
from typing import Any

from _cli_app import App as Shop


class App(Shop):
    """The shop in the test's folder (``TURNKIT_TEST_APP_DIR``), plus ``shop.which_worker``."""

    def which_worker(self, input: dict, ctx: Any) -> dict:
        return {"pid": os.getpid()}

    def api_tools(self) -> list[dict]:
        return [
            *super().api_tools(),
            {
                "name": "shop.which_worker",
                "scope": "shop.products:read",
                "permission": "shop.view",
                "handler": self.which_worker,
                "annotations": {"read_only": True},
                "input_schema": {"type": "object", "additionalProperties": False},
            },
        ]
