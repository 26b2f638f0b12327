"""The demo catalogue's data: its categories and the products a new catalogue starts with."""

from __future__ import annotations

from typing import Any

__all__ = ["CATEGORIES", "PRODUCTS"]

_NAMES = {
    "tea": (
        "TEA",
        [
            "Sencha green tea",
            "Assam breakfast tea",
            "Darjeeling first flush",
            "Earl Grey",
            "Jasmine pearls",
            "Rooibos vanilla",
            "Oolong Tie Guan Yin",
            "Chamomile blossoms",
            "Genmaicha",
            "Lapsang souchong",
            "White peony",
            "Peppermint leaves",
        ],
    ),
    "coffee": (
        "COF",
        [
            "Ethiopia Yirgacheffe beans",
            "Colombia Huila beans",
            "Brazil Santos beans",
            "Espresso blend",
            "Decaf house blend",
            "Kenya AA beans",
            "Guatemala Antigua beans",
            "Sumatra Mandheling beans",
            "Cold brew coarse grind",
            "Instant coffee",
        ],
    ),
    "cocoa": (
        "COC",
        [
            "Drinking chocolate 70%",
            "Raw cacao nibs",
            "Dutch cocoa powder",
            "White hot chocolate",
            "Spiced cocoa mix",
            "Cacao husk tea",
        ],
    ),
    "accessories": (
        "ACC",
        [
            "Glass teapot 1 l",
            "Cast iron kettle",
            "Pour-over dripper",
            "Paper filters (100)",
            "Burr grinder",
            "Milk frother",
            "Tea infuser ball",
            "Double-wall mug",
            "French press 0.6 l",
            "Bamboo tea scoop",
        ],
    ),
}

CATEGORIES: tuple[str, ...] = tuple(_NAMES)
"""The categories of the demo products."""


def _seed() -> list[dict[str, Any]]:
    """The products a new catalogue starts with: deterministic, so tests and demos agree."""
    products = []
    for c, (category, (prefix, names)) in enumerate(_NAMES.items()):
        for i, name in enumerate(names, start=1):
            cents = 299 + ((i * 137 + c * 89) % 2400)  # 2.99 .. 26.98, varied but fixed
            products.append(
                {
                    "sku": f"{prefix}-{i:04d}",
                    "name": name,
                    "category": category,
                    "price": cents / 100,
                    "stock": (i * 17 + c * 5) % 60,
                }
            )
    return products


PRODUCTS: tuple[dict[str, Any], ...] = tuple(_seed())
"""The products a new demo catalogue starts with (38 of them)."""
