"""A two-minute tour of turnkit: declare tools, see what a caller may use, run and confirm a write.

Run it with ``python examples/tour.py``. No model, network or key is needed.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from turnkit import (
    Caller,
    Decision,
    Executor,
    Registry,
    StaticPermissions,
    Tool,
    model_name,
    open_ledger,
    validate,
)

PRODUCTS = [{"sku": "TEA-0001", "name": "Green tea", "price": 4.5}]


def list_products(input: dict, ctx: object) -> list[dict]:
    return PRODUCTS[: input.get("limit", 20)]


def set_prices(input: dict, ctx: object) -> dict:
    return {"updated": len(input["prices"])}


class Catalogue:
    """A module: a key and the declarations of its tools (dicts, so one bad one spares the rest)."""

    key = "catalogue"

    def api_tools(self) -> list[dict]:
        return [
            {
                "name": "catalogue.list_products",
                "title": "List products",
                "scope": "catalogue.products:read",
                "permission": "catalogue.view",
                "handler": list_products,
                "annotations": {"read_only": True},
                "input_schema": {
                    "type": "object",
                    "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": 100}},
                    "additionalProperties": False,
                },
            },
            {
                "name": "catalogue.set_prices",
                "title": "Set prices",
                "scope": "catalogue.products:write",
                "permission": "catalogue.manage",
                "handler": set_prices,
                "max_items": 200,
                "input_schema": {
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
                },
            },
            # Deliberately wrong: a public tool with a scope, and a keyword outside the subset.
            {
                "name": "catalogue.search_products",
                "audience": "public",
                "scope": "catalogue.products:read",
                "handler": list_products,
                "input_schema": {"type": "object", "anyOf": [{"required": ["q"]}]},
            },
        ]


def main() -> None:
    registry = Registry([Catalogue()])
    print("Registered tools (registry name -> model name):")
    for tool in registry:
        kind = "write" if tool.is_write else "read"
        print(f"  {tool.name:28} -> {model_name(tool.name):28} {kind:5} scope={tool.scope}")

    print("\nOne warning for the module, naming every ignored declaration:")
    for warning in registry.warnings:
        print("  " + str(warning).replace("\n", "\n  "))

    rights = StaticPermissions({"u_1": {"catalogue.view", "catalogue.manage"}})
    caller = Caller.key("k_1", user_id="u_1", scopes={"catalogue.products:read"})
    print(f"\nPermissions of {caller.identity} asked now: {sorted(rights(caller))}")

    bad = {"prices": [{"sku": "tea", "price": 0}, {"price": 3}]}
    print(f"\nValidating {json.dumps(bad)} against catalogue.set_prices:")
    for violation in validate(registry["catalogue.set_prices"].input_validator, bad):
        print(f"  {violation.path or '/'}: {violation.message}")

    try:
        Tool(name="Catalogue.Delete", handler="no.such.module:f", cost=5000)
    except ValueError as exc:
        print(f"\nBuilding a bad tool reports every problem at once:\n{exc}")

    ledger = open_ledger(Path(tempfile.mkdtemp()) / "ledger.sqlite")
    executor = Executor(registry, ledger=ledger, permissions=rights)
    ledger.set_setting("api_session_write_modules", ["catalogue"])  # the "agent may act" switch
    session = Caller.session("u_1")
    print(f"\n{session.identity} sees: {[t.name for t in executor.visible_for(session)]}")
    print("read :", executor.execute(session, "catalogue.list_products", {"limit": 1}))
    change = {"prices": [{"sku": "TEA-0001", "price": 5.0}]}
    held = executor.execute(session, "catalogue.set_prices", change, {"idempotency_key": "t-1"})
    print("write:", held)
    print(
        "again:",
        executor.execute(session, "catalogue.set_prices", change, {"idempotency_key": "t-1"}),
    )
    print("yes  :", executor.confirm(held["confirmation_id"], session, Decision.approve()))
    print("again:", executor.confirm(held["confirmation_id"], session, "approve"))
    executor.close()


if __name__ == "__main__":
    main()
