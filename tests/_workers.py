"""Functions run in other processes (spawned, so each opens its own ledger connections)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _shop import Shop
from turnkit import Caller, Executor, Registry, StaticPermissions, open_ledger


def _executor(ledger_url: str, log: str) -> Executor:
    rights = StaticPermissions({"alice": {"shop.view", "shop.manage"}})
    return Executor(Registry([Shop(Path(log))]), ledger=open_ledger(ledger_url), permissions=rights)


def approve(ledger_url: str, log: str, confirmation_id: str, barrier: Any, results: Any) -> None:
    """Wait for the sibling process, then approve the same confirmation at the same moment."""
    executor = _executor(ledger_url, log)
    try:
        barrier.wait(timeout=60)
        results.put(executor.confirm(confirmation_id, Caller.session("alice"), "approve"))
    finally:
        executor.close()
        executor.ledger.close()


def execute_with_key(ledger_url: str, log: str, key: str, input: dict, results: Any) -> None:
    """A brand-new executor (a restarted process) repeating an idempotent call."""
    executor = _executor(ledger_url, log)
    try:
        caller = Caller.key("key-1", user_id="alice", scopes={"shop.products:write"})
        results.put(executor.execute(caller, "shop.set_prices", input, {"idempotency_key": key}))
    finally:
        executor.close()
        executor.ledger.close()


class _CrashingShop(Shop):
    """A shop whose writes kill the process half-way, as a power cut would. Its tools are the
    shop's own declarations (only the write inside them differs), so any door may decide its
    confirmations."""

    def _write(self, entry: dict[str, Any]) -> None:
        import os

        os._exit(3)


def crash_during_write(ledger_url: str, log: str, key: str | None, decide: str | None) -> None:
    """Start a write (with ``key``, or by approving confirmation ``decide``) and die inside it."""
    rights = StaticPermissions({"alice": {"shop.view", "shop.manage"}})
    executor = Executor(
        Registry([_CrashingShop(Path(log))]), ledger=open_ledger(ledger_url), permissions=rights
    )
    if decide is not None:
        executor.confirm(decide, Caller.session("alice"), "approve")
    else:
        caller = Caller.key("key-1", user_id="alice", scopes={"shop.products:write"})
        executor.execute(caller, "shop.set_prices", {"prices": [{"sku": "TEA-0001", "price": 5.0}]},
                         {"idempotency_key": key})  # fmt: skip


def open_and_count_settings(ledger_url: str) -> int:
    """Open the ledger (creating its tables if need be) and read it."""
    ledger = open_ledger(ledger_url)
    try:
        return len(ledger.settings())
    finally:
        ledger.close()
