"""The declarations of the demo catalogue's four tools: schemas, rights, titles and descriptions.

Written for a model: each description says what the tool does, what it returns and what to do
next. Reads need ``catalogue.view`` (keys: ``catalogue.products:read``); writes need
``catalogue.manage`` (keys: ``catalogue.products:write``), and a signed-in user's writes wait for
the person's confirmation.
"""

from __future__ import annotations

from typing import Any, Protocol

from turnkit.demo.data import CATEGORIES

__all__ = ["MAX_PRICES", "PAGE_MAX", "SKU_PATTERN", "Handlers", "declarations"]

SKU_PATTERN = "^[A-Z]{3}-[0-9]{4}$"
"""A sku: three capital letters, a dash, four digits (``TEA-0001``)."""
PAGE_MAX = 50
"""The largest page ``list_products`` returns."""
MAX_PRICES = 200
"""The most prices one ``set_prices`` call accepts."""

READ_SCOPE, WRITE_SCOPE = "catalogue.products:read", "catalogue.products:write"
VIEW, MANAGE = "catalogue.view", "catalogue.manage"

_SKU = {"type": "string", "pattern": SKU_PATTERN, "description": "e.g. TEA-0001"}
_PRICE = {
    "type": "number",
    "exclusiveMinimum": 0,
    "maximum": 100000,
    "description": "in euros; rounded to whole cents",
}
_PRODUCT = {
    "type": "object",
    "required": ["sku", "name", "category", "price", "stock"],
    "additionalProperties": False,
    "properties": {
        "sku": {"type": "string"},
        "name": {"type": "string"},
        "category": {"type": "string"},
        "price": {"type": "number"},
        "stock": {"type": "integer", "minimum": 0},
    },
}
_SKU_INPUT = {
    "type": "object",
    "required": ["sku"],
    "additionalProperties": False,
    "properties": {"sku": _SKU},
}


def _list_input(categories: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "category": {"type": "string", "enum": categories},
            "name_contains": {
                "type": "string",
                "minLength": 1,
                "maxLength": 100,
                "description": "case-insensitive part of the product name",
            },
            "min_price": {"type": "number", "minimum": 0},
            "max_price": {"type": "number", "minimum": 0},
            "limit": {"type": "integer", "minimum": 1, "maximum": PAGE_MAX, "default": 20},
            "offset": {"type": "integer", "minimum": 0, "default": 0},
        },
    }


_LIST_OUTPUT = {
    "type": "object",
    "required": ["items", "total", "offset", "next_offset"],
    "additionalProperties": False,
    "properties": {
        "items": {"type": "array", "items": _PRODUCT},
        "total": {"type": "integer", "minimum": 0},
        "offset": {"type": "integer", "minimum": 0},
        "next_offset": {"type": ["integer", "null"]},
    },
}
_GET_OUTPUT = {
    "type": "object",
    "required": ["found"],
    "additionalProperties": False,
    "properties": {
        "found": {"type": "boolean"},
        "product": _PRODUCT,
        "sku": {"type": "string"},
        "message": {"type": "string"},
    },
}
_SET_PRICES_INPUT = {
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
                "properties": {"sku": _SKU, "price": _PRICE},
            },
        }
    },
}
_SET_PRICES_OUTPUT = {
    "type": "object",
    "required": ["updated", "unknown_skus"],
    "additionalProperties": False,
    "properties": {
        "updated": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["sku", "old_price", "price"],
                "additionalProperties": False,
                "properties": {
                    "sku": {"type": "string"},
                    "old_price": {"type": "number"},
                    "price": {"type": "number"},
                },
            },
        },
        "unknown_skus": {"type": "array", "items": {"type": "string"}},
    },
}
_DELETE_OUTPUT = {
    "type": "object",
    "required": ["deleted"],
    "additionalProperties": False,
    "properties": {
        "deleted": {"type": "boolean"},
        "product": _PRODUCT,
        "sku": {"type": "string"},
        "message": {"type": "string"},
    },
}


class Handlers(Protocol):
    """The handlers of the four tools and the previews of the two writes (``Catalogue``'s
    methods)."""

    def list_products(self, input: dict[str, Any], ctx: Any = None) -> dict[str, Any]: ...

    def get_product(self, input: dict[str, Any], ctx: Any = None) -> dict[str, Any]: ...

    def set_prices(self, input: dict[str, Any], ctx: Any = None) -> dict[str, Any]: ...

    def delete_product(self, input: dict[str, Any], ctx: Any = None) -> dict[str, Any]: ...

    def preview_prices(self, input: dict[str, Any], ctx: Any = None) -> dict[str, Any]: ...

    def preview_delete(self, input: dict[str, Any], ctx: Any = None) -> dict[str, Any]: ...


def declarations(catalogue: Handlers) -> list[dict[str, Any]]:
    """The tools of ``catalogue`` as declaration dicts, handlers bound to it."""

    return [
        {
            "name": "catalogue.list_products",
            "title": "List products",
            "description": (
                "List products in the catalogue, ordered by sku, one page at a time. Filter by"
                " category, part of the name, or a price range. Returns items (sku, name,"
                " category, price, stock), the total number of matches, and next_offset to pass"
                " as offset for the next page (null on the last page)."
            ),
            "scope": READ_SCOPE,
            "permission": VIEW,
            "handler": catalogue.list_products,
            "annotations": {"read_only": True, "idempotent": True},
            "input_schema": _list_input(list(CATEGORIES)),
            "output_schema": _LIST_OUTPUT,
        },
        {
            "name": "catalogue.get_product",
            "title": "Get a product",
            "description": (
                "Look up one product by its sku. Returns found=true and the product, or"
                " found=false with a message when no product has that sku (then list products"
                " to find the right sku)."
            ),
            "scope": READ_SCOPE,
            "permission": VIEW,
            "handler": catalogue.get_product,
            "annotations": {"read_only": True, "idempotent": True},
            "input_schema": _SKU_INPUT,
            "output_schema": _GET_OUTPUT,
        },
        {
            "name": "catalogue.set_prices",
            "title": "Set product prices",
            "description": (
                f"Change the prices of up to {MAX_PRICES} products in one call, all in one"
                " transaction. Give each product's sku and new price in euros. Returns the"
                " updated products with old and new price, and unknown_skus: skus that matched"
                " no product and were not changed. A person may have to confirm the change"
                " before it runs."
            ),
            "scope": WRITE_SCOPE,
            "permission": MANAGE,
            "handler": catalogue.set_prices,
            "preview": catalogue.preview_prices,
            "annotations": {"idempotent": True},
            "input_schema": _SET_PRICES_INPUT,
            "output_schema": _SET_PRICES_OUTPUT,
            "max_items": MAX_PRICES,
        },
        {
            "name": "catalogue.delete_product",
            "title": "Delete a product",
            "description": (
                "Delete one product by sku, for good. Always waits for a person's confirmation."
                " Returns deleted=true and the removed product, or deleted=false with a message"
                " when no product has that sku."
            ),
            "scope": WRITE_SCOPE,
            "permission": MANAGE,
            "handler": catalogue.delete_product,
            "preview": catalogue.preview_delete,
            "annotations": {"destructive": True},
            "danger": "always",
            "input_schema": _SKU_INPUT,
            "output_schema": _DELETE_OUTPUT,
        },
    ]
