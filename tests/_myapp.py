"""A user's own application whose module key is ``catalogue``, as the demo's is: it declares
``catalogue.set_prices`` (the README's own example name) with a handler of its own that writes to
its own file, so a test can tell whose code ran when a held write was approved.

``TURNKIT_TEST_APP_DIR`` names the folder of ``myapp-writes.log`` (one line per write).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from _shop import PRICES_SCHEMA
from turnkit import Caller


def _log() -> Path:
    return Path(os.environ["TURNKIT_TEST_APP_DIR"]) / "myapp-writes.log"


class MyCatalogue:
    """Module ``catalogue`` of the application (given to ``--module`` as a class)."""

    key = "catalogue"

    def set_prices(self, input: dict[str, Any], ctx: Any) -> dict[str, Any]:
        with _log().open("a") as handle:
            handle.write(json.dumps(input) + "\n")
        return {"myapp_updated": len(input["prices"])}

    def api_tools(self) -> list[dict[str, Any]]:
        return [
            {
                "name": "catalogue.set_prices",
                "scope": "catalogue.products:write",
                "permission": "catalogue.manage",
                "handler": self.set_prices,
                "input_schema": PRICES_SCHEMA,
            }
        ]


def writes() -> list[dict[str, Any]]:
    """The writes the application's handler made, in order."""
    log = _log()
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def permissions(caller: Caller) -> set[str]:
    """The application's provider: alice manages the catalogue."""
    return {"catalogue.manage"} if caller.user_id == "alice" else set()
