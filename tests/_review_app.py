"""An application for the command-line tests of what approvers see and how many must approve:
module ``review``, whose writes are lines of ``writes.log`` in ``TURNKIT_TEST_APP_DIR``.

- ``review.set_price``: previews the price before and after, and needs two approvers, neither of
  them the person whose write it is (``approvals=2``, ``separate_duties=True``);
- ``review.drop_item``: its preview always fails (the card says why); one approver.

The permission provider is ``_cli_app.permissions`` (``rights.json`` in the same folder).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

PRICES = {"TEA-0001": 4.5}
SKU = {"type": "object", "required": ["sku"], "additionalProperties": False,
       "properties": {"sku": {"type": "string"}, "price": {"type": "number"}}}  # fmt: skip


def _log() -> Path:
    return Path(os.environ["TURNKIT_TEST_APP_DIR"]) / "writes.log"


class Review:
    """Module ``review`` (given to ``--module`` as a class)."""

    key = "review"

    def _write(self, entry: dict[str, Any]) -> dict[str, Any]:
        with _log().open("a") as handle:
            handle.write(json.dumps(entry) + "\n")
        return entry

    def set_price(self, input: dict, ctx: Any) -> dict:
        return self._write({"tool": "set_price", "input": input})

    def preview_price(self, input: dict, ctx: Any) -> dict:
        return {"sku": input["sku"], "before": PRICES.get(input["sku"]), "after": input["price"]}

    def drop_item(self, input: dict, ctx: Any) -> dict:
        return self._write({"tool": "drop_item", "input": input})

    def preview_drop(self, input: dict, ctx: Any) -> dict:
        raise LookupError("the catalogue is offline")

    def api_tools(self) -> list[dict]:
        return [
            {"name": "review.set_price", "scope": "review.items:write",
             "permission": "shop.manage", "handler": self.set_price, "input_schema": SKU,
             "preview": self.preview_price, "approvals": 2, "separate_duties": True},
            {"name": "review.drop_item", "scope": "review.items:write",
             "permission": "shop.manage", "handler": self.drop_item, "input_schema": SKU,
             "preview": self.preview_drop, "danger": "always"},
        ]  # fmt: skip
