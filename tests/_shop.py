"""A small shop module for the executor tests; every write is appended to a log file.

The log file is the ground truth of "did the write happen, and how often", also across processes.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

PRICES_SCHEMA = {
    "type": "object",
    "required": ["prices"],
    "additionalProperties": False,
    "properties": {
        "prices": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["sku", "price"],
                "additionalProperties": False,
                "properties": {
                    "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
                    "price": {"type": "number", "exclusiveMinimum": 0},
                },
            },
        }
    },
}


class Shop:
    """Module ``shop``: list (read), set prices (write, batch), delete (write, always held)."""

    key = "shop"

    def __init__(self, log: Path) -> None:
        self.log = Path(log)
        self.release = threading.Event()

    def writes(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def _write(self, entry: dict[str, Any]) -> None:
        with self.log.open("a") as handle:
            handle.write(json.dumps(entry) + "\n")

    size = 1
    """How many products the catalogue has (a test may grow it)."""

    reads = 0
    """How often ``list_products`` ran (in this process)."""

    def list_products(self, input: dict, ctx: Any) -> list[dict]:
        self.reads += 1
        count = min(self.size, input.get("limit", 10))
        return [{"sku": f"TEA-{i + 1:04d}", "price": 4.5} for i in range(count)]

    def set_prices(self, input: dict, ctx: Any) -> dict:
        self._write({"tool": "set_prices", "input": input, "caller": ctx.caller.identity})
        return {"updated": len(input["prices"])}

    def delete_product(self, input: dict, ctx: Any) -> dict:
        self._write({"tool": "delete_product", "input": input})
        return {"deleted": input["sku"]}

    def api_tools(self) -> list[dict]:
        return [
            {
                "name": "shop.list_products",
                "scope": "shop.products:read",
                "permission": "shop.view",
                "handler": self.list_products,
                "annotations": {"read_only": True},
                "input_schema": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"limit": {"type": "integer", "minimum": 1}},
                },
            },
            {
                "name": "shop.set_prices",
                "scope": "shop.products:write",
                "permission": "shop.manage",
                "handler": self.set_prices,
                "input_schema": PRICES_SCHEMA,
                "max_items": 100,
            },
            {
                "name": "shop.delete_product",
                "scope": "shop.products:write",
                "permission": "shop.manage",
                "handler": self.delete_product,
                "danger": "always",
                "annotations": {"destructive": True},
                "input_schema": {
                    "type": "object",
                    "required": ["sku"],
                    "additionalProperties": False,
                    "properties": {"sku": {"type": "string"}},
                },
            },
        ]


def prices(*skus: str, price: float = 5.0) -> dict:
    """A valid set_prices input."""
    return {"prices": [{"sku": sku, "price": price} for sku in skus or ("TEA-0001",)]}
