"""The demo catalogue: products in a SQLite file, and the handlers of its tools.

The file is created with its table and a few dozen products on first use (the first handler call,
never the constructor), so building the module does no I/O. Every call opens its own connection,
so handlers are safe to run from many threads (the executor runs sync handlers in worker threads)
and from several processes sharing one file (WAL journaling, a busy timeout).

A normal "no such product" is part of a result the model can act on (``{"found": false, ...}``),
never an exception: the executor turns exceptions into a generic ``internal_error``.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from turnkit.demo.data import CATEGORIES, PRODUCTS
from turnkit.demo.tools import declarations

__all__ = ["CATEGORIES", "PRODUCTS", "Catalogue"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS products (
    sku TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    category TEXT NOT NULL,
    price REAL NOT NULL CHECK (price > 0),
    stock INTEGER NOT NULL CHECK (stock >= 0)
)
"""
_COLUMNS = "sku, name, category, price, stock"


class Catalogue:
    """Module ``catalogue``: list, read, reprice and delete the products in a SQLite file.

    Examples:
        >>> from turnkit import Registry
        >>> Registry([Catalogue("/tmp/turnkit-demo-doctest.sqlite")]).names()[:2]
        ['catalogue.list_products', 'catalogue.get_product']
    """

    key = "catalogue"

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 30.0) -> None:
        """Use the catalogue in the SQLite file at ``path``; nothing is opened until first use."""
        self.path = Path(path)
        self._busy_timeout = busy_timeout
        self._ready = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Catalogue({str(self.path)!r})"

    def api_tools(self) -> list[dict[str, Any]]:
        """The module's tool declarations (see ``turnkit.demo.tools``)."""
        return declarations(self)

    # --- storage ----------------------------------------------------------------------------

    def setup(self) -> None:
        """Create the file, its table and the demo products when missing (idempotent)."""
        with self._lock:
            if self._ready:
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = self._open()
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("BEGIN IMMEDIATE")  # one process seeds, the others wait and see it
                conn.execute(_SCHEMA)
                if conn.execute("SELECT COUNT(*) FROM products").fetchone()[0] == 0:
                    conn.executemany(
                        f"INSERT INTO products ({_COLUMNS})"
                        " VALUES (:sku, :name, :category, :price, :stock)",
                        PRODUCTS,
                    )
                conn.execute("COMMIT")
            finally:
                conn.close()
            self._ready = True

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=self._busy_timeout, isolation_level=None)
        conn.row_factory = sqlite3.Row
        return conn

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """A fresh connection (autocommit; use ``BEGIN`` for a transaction), closed afterwards."""
        self.setup()
        conn = self._open()
        try:
            yield conn
        finally:
            conn.close()

    # --- handlers ---------------------------------------------------------------------------

    def list_products(self, input: dict[str, Any], ctx: Any = None) -> dict[str, Any]:
        """Products matching the filters, ordered by sku, one page at a time, and the total."""
        where, params = [], []
        if "category" in input:
            where.append("category = ?")
            params.append(input["category"])
        if "name_contains" in input:
            where.append("instr(lower(name), lower(?)) > 0")
            params.append(input["name_contains"])
        if "min_price" in input:
            where.append("price >= ?")
            params.append(input["min_price"])
        if "max_price" in input:
            where.append("price <= ?")
            params.append(input["max_price"])
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        limit, offset = input.get("limit", 20), input.get("offset", 0)
        with self.connection() as conn:
            total = conn.execute(f"SELECT COUNT(*) FROM products{clause}", params).fetchone()[0]
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM products{clause} ORDER BY sku LIMIT ? OFFSET ?",
                [*params, limit, offset],
            ).fetchall()
        items = [dict(row) for row in rows]
        following = offset + len(items)
        return {
            "items": items,
            "total": total,
            "offset": offset,
            "next_offset": following if following < total else None,
        }

    def get_product(self, input: dict[str, Any], ctx: Any = None) -> dict[str, Any]:
        """One product by sku: ``{"found": true, "product": ...}`` or ``{"found": false, ...}``."""
        sku = input["sku"]
        with self.connection() as conn:
            row = conn.execute(f"SELECT {_COLUMNS} FROM products WHERE sku = ?", [sku]).fetchone()
        if row is None:
            return {"found": False, "sku": sku, "message": _not_found(sku)}
        return {"found": True, "product": dict(row)}

    def set_prices(self, input: dict[str, Any], ctx: Any = None) -> dict[str, Any]:
        """New prices (rounded to cents) in one transaction; unknown skus are reported, not
        written. When a sku is listed twice, its last price wins."""
        wanted: dict[str, float] = {}
        for entry in input["prices"]:
            wanted.pop(entry["sku"], None)  # keep the order of the last mention
            wanted[entry["sku"]] = round(float(entry["price"]), 2)
        updated, unknown = [], []
        with self.connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for sku, price in wanted.items():
                    row = conn.execute("SELECT price FROM products WHERE sku = ?", [sku]).fetchone()
                    if row is None:
                        unknown.append(sku)
                        continue
                    conn.execute("UPDATE products SET price = ? WHERE sku = ?", [price, sku])
                    updated.append({"sku": sku, "old_price": row["price"], "price": price})
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return {"updated": updated, "unknown_skus": unknown}

    def delete_product(self, input: dict[str, Any], ctx: Any = None) -> dict[str, Any]:
        """Remove a product: ``{"deleted": true, "product": ...}``, or ``{"deleted": false}`` with
        a message when no product has the sku."""
        sku = input["sku"]
        with self.connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    f"SELECT {_COLUMNS} FROM products WHERE sku = ?", [sku]
                ).fetchone()
                if row is not None:
                    conn.execute("DELETE FROM products WHERE sku = ?", [sku])
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        if row is None:
            return {"deleted": False, "sku": sku, "message": _not_found(sku)}
        return {"deleted": True, "product": dict(row)}

    def preview_prices(self, input: dict[str, Any], ctx: Any = None) -> dict[str, Any]:
        """What ``set_prices`` would change, read without writing: each product's price before
        and after, and the skus that match no product (for the people who approve it)."""
        wanted = {e["sku"]: round(float(e["price"]), 2) for e in input["prices"]}
        with self.connection() as conn:
            marks = ", ".join("?" for _ in wanted)
            rows = conn.execute(
                f"SELECT sku, name, price FROM products WHERE sku IN ({marks})", list(wanted)
            ).fetchall()
        found = {row["sku"]: row for row in rows}
        changes = [
            {"sku": sku, "name": found[sku]["name"], "before": found[sku]["price"], "after": price}
            for sku, price in wanted.items()
            if sku in found
        ]
        return {"changes": changes, "unknown_skus": [sku for sku in wanted if sku not in found]}

    def preview_delete(self, input: dict[str, Any], ctx: Any = None) -> dict[str, Any]:
        """What ``delete_product`` would remove: the whole row, or that no product has the sku."""
        found = self.get_product(input, ctx)
        if not found["found"]:
            return {"would_delete": None, "message": found["message"]}
        return {"would_delete": found["product"]}


def _not_found(sku: str) -> str:
    return (
        f"No product has sku {sku!r}. Call catalogue_list_products (filter by name_contains or"
        " category) to find the right sku."
    )
