"""The demo: a product catalogue module on SQLite, its demo user, and a scripted model.

Used by ``turnkit demo`` and by Studio (``langgraph dev``, see ``turnkit.demo.studio``).

- ``Catalogue(path)``: module ``catalogue`` with ``list_products`` and ``get_product`` (reads) and
  ``set_prices`` and ``delete_product`` (writes; delete always waits for a confirmation).
- The demo user: the session user ``"demo"`` (``DEMO_CALLER``), holding ``catalogue.view`` and
  ``catalogue.manage`` (``demo_permissions()``). Runs that name no caller act for this user.
- ``demo_executor(db_path)``: the registry, the executor and its ledger (a sibling file of the
  catalogue), with the "agent may act" switch on for ``catalogue``: the demo user's agent sees the
  write tools, and every write it makes waits for the person's confirmation.
- ``scripted_demo_model()``: a **scripted**, rule-based model (no language model, no network).

Examples:
    >>> ex = demo_executor("/tmp/turnkit-demo/catalogue.sqlite")  # doctest: +SKIP
    >>> ex.execute(DEMO_CALLER, "catalogue.get_product", {"sku": "TEA-0001"})  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from turnkit.demo.catalogue import Catalogue
from turnkit.demo.data import CATEGORIES, PRODUCTS
from turnkit.demo.model import ScriptedDemoModel, scripted_demo_model
from turnkit.executor.executor import Executor
from turnkit.ledger import open_ledger
from turnkit.registry.caller import Caller, PermissionProvider, StaticPermissions
from turnkit.registry.registry import Registry
from turnkit.registry.settings import Settings

__all__ = [
    "CATEGORIES",
    "DEMO_CALLER",
    "DEMO_PERMISSIONS",
    "DEMO_USER",
    "PRODUCTS",
    "Catalogue",
    "ScriptedDemoModel",
    "demo_executor",
    "demo_permissions",
    "ledger_path",
    "scripted_demo_model",
]

DEMO_USER = "demo"
"""The user id of the demo's signed-in user."""
DEMO_PERMISSIONS = frozenset({"catalogue.view", "catalogue.manage"})
"""What the demo user holds: view and manage the catalogue."""
DEMO_CALLER = Caller.session(DEMO_USER)
"""The demo's caller, and the default caller of Studio runs that pass no context."""


def demo_permissions() -> StaticPermissions:
    """A permission provider where the demo user holds ``DEMO_PERMISSIONS`` and nobody else
    holds anything (grant or revoke on it while runs are live)."""
    return StaticPermissions({DEMO_USER: DEMO_PERMISSIONS})


def ledger_path(db_path: str | os.PathLike[str]) -> Path:
    """The demo ledger's file: ``<name>.ledger<suffix>`` beside the catalogue file."""
    path = Path(db_path)
    return path.with_name(f"{path.stem}.ledger{path.suffix or '.sqlite'}")


def demo_executor(
    db_path: str | os.PathLike[str],
    *,
    permissions: PermissionProvider | None = None,
    settings: Settings | None = None,
) -> Executor:
    """An executor on the demo catalogue at ``db_path`` and a ledger beside it.

    Creates the folder and the ledger's file; the catalogue's file is created on first use. The
    "agent may act" switch (``api_session_write_modules``) is on for ``catalogue`` by default;
    an operator's setting in the ledger overrides it, as always.

    Args:
        db_path: the catalogue's SQLite file.
        permissions: the permission provider; default ``demo_permissions()``.
        settings: the executor's defaults.
    """
    path = Path(db_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    defaults = settings or Settings()
    switch = defaults.api_session_write_modules | {Catalogue.key}
    return Executor(
        Registry([Catalogue(path)]),
        ledger=open_ledger(ledger_path(path)),
        permissions=permissions if permissions is not None else demo_permissions(),
        settings=dataclasses.replace(defaults, api_session_write_modules=switch),
    )
