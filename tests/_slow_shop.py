"""A shop whose writes can be held up by the test, for the tests of several server processes.

Every handler run appends ``{"event": "start", "sku": ..., "pid": ..., "at": time}`` to ``runs.log``
in the folder named by ``SLOW_SHOP_DIR`` **before** anything else, so the file counts handler
runs across every process (a SIGKILLed one included). A call whose input names a ``gate`` then
waits until the file ``open-<gate>`` exists in that folder (at most 60 s, so no thread is stuck
for good); one whose input says ``"refuse": true`` then raises a ``ToolError``; else it appends
its ``end`` line. Lines are single small ``O_APPEND`` writes: whole, in order, from any number
of processes. ``slow.set_checked_price`` first asks a danger check that takes ``check`` seconds
(as one asking a remote service would) and never holds.

Given to ``turnkit serve`` as ``--module _slow_shop:SlowShop --permissions _slow_shop:permissions``
with ``tests/`` on ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from turnkit import ToolError

FOLDER = "SLOW_SHOP_DIR"
"""The environment variable naming the folder of ``runs.log`` and the ``open-<gate>`` files."""

_INPUT = {
    "type": "object",
    "required": ["sku"],
    "additionalProperties": False,
    "properties": {
        "sku": {"type": "string", "minLength": 1, "maxLength": 80},
        "gate": {"type": "string", "pattern": "^[a-z0-9-]{1,40}$"},
        "refuse": {"type": "boolean"},
        "check": {"type": "number", "minimum": 0, "maximum": 5},
    },
}


def folder() -> Path:
    return Path(os.environ[FOLDER])


def runs(sku: str, root: Path | None = None) -> list[dict[str, Any]]:
    """The lines ``sku``'s handler runs wrote so far (every process's)."""
    log = (root or folder()) / "runs.log"
    if not log.exists():
        return []
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    return [line for line in lines if line["sku"] == sku]


def open_gate(gate: str, root: Path | None = None) -> None:
    """Let every handler waiting on ``gate`` go on."""
    ((root or folder()) / f"open-{gate}").touch()


class SlowShop:
    """Module ``slow``: set a price (a write run at once, or after a slow danger check) and delete
    (a write always held)."""

    key = "slow"

    def __init__(self) -> None:
        self.folder = folder()

    def _log(self, event: str, input: dict[str, Any]) -> None:
        fields = {"event": event, "sku": input["sku"], "pid": os.getpid(), "at": time.time()}
        line = json.dumps(fields) + "\n"
        fd = os.open(self.folder / "runs.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def _run(self, input: dict[str, Any], ctx: Any) -> dict[str, Any]:
        self._log("start", input)
        gate = input.get("gate")
        if gate is not None:
            opened = self.folder / f"open-{gate}"
            deadline = time.monotonic() + 60
            while not opened.exists() and time.monotonic() < deadline:
                time.sleep(0.005)
        if input.get("refuse"):
            raise ToolError(f"sku {input['sku']!r} is locked; nothing was changed")
        self._log("end", input)
        return {"sku": input["sku"], "pid": os.getpid()}

    @staticmethod
    def _slow_check(input: dict[str, Any], ctx: Any) -> bool:
        time.sleep(input.get("check", 0))
        return False

    def api_tools(self) -> list[dict[str, Any]]:
        write = {
            "scope": "slow.products:write",
            "permission": "slow.manage",
            "input_schema": _INPUT,
        }
        return [
            {"name": "slow.set_price", "handler": self._run, **write},
            {
                "name": "slow.set_checked_price",
                "handler": self._run,
                "danger": self._slow_check,
                **write,
            },
            {
                "name": "slow.delete_product",
                "handler": self._run,
                "danger": "always",
                "annotations": {"destructive": True},
                **write,
            },
        ]


def permissions(caller: Any) -> set[str]:
    """Every user may manage the slow shop."""
    return {"slow.manage"}
