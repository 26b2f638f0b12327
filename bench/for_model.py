"""One round's tool listing on a large registry: ``executor.visible_for`` + ``for_model``.

10,000 registered tools in 100 modules; a key caller whose scopes cover every other tool (and who
holds every permission), so it sees 5,000. A round is what ``list_tools`` does at a turn's start:
the tools the caller may see now (one settings read from the ledger, one permission lookup, the
rights of every tool) and their OpenAI definitions with the map back from model names. The first
call after building the registry is "cold" (definitions not cached yet); "warm" is the median of
the following calls, also split into its two halves. The peer is the same listing done by hand,
without rights: every tool's definition dict built afresh, as a framework that binds a fixed
tool list would do (``convert_to_openai_tool`` on dicts, here the bare dict literal).

    .venv/bin/python bench/for_model.py [--quick]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

try:
    from bench import _common
except ModuleNotFoundError:  # run as a script: bench/ is sys.path[0], the repository is not
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench import _common

from turnkit import Caller, Executor, Registry, StaticPermissions, Tool
from turnkit.turn.tools import for_model

SCENARIO = "for_model"
TOOLS, MODULES = 10_000, 100
ROUNDS, QUICK_ROUNDS = 200, 40
TARGET_RATIO = 1.0
"""The listing's time over building the same definitions by hand, at most."""
SCHEMA = {
    "type": "object",
    "properties": {
        "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100},
    },
    "required": ["sku"],
    "additionalProperties": False,
}


class _Module:
    def __init__(self, index: int, per_module: int) -> None:
        self.key = f"m{index:03d}"
        self.per_module = per_module

    def api_tools(self) -> list[Tool]:
        return [
            Tool(
                name=f"{self.key}.get_item_{i:04d}",
                scope=f"{self.key}.{'seen' if i % 2 == 0 else 'hidden'}:read",
                permission=f"{self.key}.view",
                description=f"Get item {i} of module {self.key} by its SKU.",
                input_schema=SCHEMA,
                annotations={"read_only": True},
                handler=lambda input, ctx: None,
            )
            for i in range(self.per_module)
        ]


def setup() -> tuple[Executor, Caller]:
    modules = [_Module(m, TOOLS // MODULES) for m in range(MODULES)]
    registry = Registry(modules)
    permissions = StaticPermissions({"u_1": {f"{m.key}.view" for m in modules}})
    caller = Caller.key("k_1", user_id="u_1", scopes={f"{m.key}.seen:read" for m in modules})
    return Executor(registry, permissions=permissions), caller


def _timed(call: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    value = call()
    return (time.perf_counter() - start) * 1000, value


def _by_hand(tools: tuple[Tool, ...]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name.replace(".", "_"),
                "description": tool.description,
                "parameters": tool.input_schema,
            },
        }
        for tool in tools
    ]


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Cold and warm milliseconds per round, and the warm round's two halves."""
    rounds = QUICK_ROUNDS if quick else ROUNDS
    executor, caller = setup()
    try:
        cold_list, tools = _timed(lambda: executor.visible_for(caller))
        cold_defs, (definitions, _) = _timed(lambda: for_model(tools))
        if (
            len(registry_tools := executor.registry.tools) != TOOLS
            or len(definitions) != TOOLS // 2
        ):
            raise RuntimeError(f"expected {TOOLS} tools, {TOOLS // 2} visible")
        listing, defining, whole, peer = [], [], [], []
        half = tuple(registry_tools[::2])
        for _ in range(rounds):
            ms_list, tools = _timed(lambda: executor.visible_for(caller))
            ms_defs, _ = _timed(lambda tools=tools: for_model(tools))
            listing.append(ms_list)
            defining.append(ms_defs)
            whole.append(ms_list + ms_defs)
            peer.append(_timed(lambda: _by_hand(half))[0])
    finally:
        executor.close()
    warm = _common.median(whole)
    peer_ms = _common.median(peer)
    row = _common.row
    return [
        row(SCENARIO, "cold: visible_for + for_model", cold_list + cold_defs, "ms"),
        row(SCENARIO, "warm: visible_for (median)", _common.median(listing), "ms"),
        row(SCENARIO, "warm: for_model (median)", _common.median(defining), "ms"),
        row(
            SCENARIO,
            "warm: visible_for + for_model (÷ definitions by hand)",
            warm,
            "ms",
            ratio=warm / peer_ms,
            target=f"<= {TARGET_RATIO:g}x",
            met=warm / peer_ms <= TARGET_RATIO,
        ),
        row(SCENARIO, "peer: 5,000 definitions by hand (median)", peer_ms, "ms"),
    ]


if __name__ == "__main__":
    print(f"{TOOLS:,} tools, the caller sees {TOOLS // 2:,}")
    print(_common.format_table(run("--quick" in sys.argv)))
