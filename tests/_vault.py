"""A vault module for the approver tests: previews of every kind, and writes that need more than
one person. Every write is appended to a log file, the ground truth across processes."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from turnkit import Caller, Executor, Quorum, Registry, StaticPermissions, open_ledger

AMOUNT = {
    "type": "object",
    "required": ["account", "amount"],
    "additionalProperties": False,
    "properties": {
        "account": {"type": "string", "maxLength": 40},
        "amount": {"type": "integer", "minimum": 1},
        "note": {"type": "string", "maxLength": 5000},
    },
}

RIGHTS = {
    "alice": {"vault.use"},
    "bob": {"vault.use", "system.confirm_any"},
    "carol": {"vault.use", "system.confirm_any"},
}


class Vault:
    """Module ``vault``: ``move_funds`` (2 approvals, separate duties, a preview),
    ``set_note`` (a preview that misbehaves as its input asks), ``pay_invoice`` (a danger check
    asking for 2 approvals over 1000)."""

    key = "vault"

    def __init__(self, log: Path) -> None:
        self.log = Path(log)
        self.balances = {"ops": 500, "payroll": 9000}
        self.previews = 0

    def writes(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def _write(self, tool: str, input: dict[str, Any], ctx: Any) -> dict[str, Any]:
        with self.log.open("a") as handle:
            handle.write(json.dumps({"tool": tool, "input": input, "by": ctx.caller.identity}))
            handle.write("\n")
        return {"done": True}

    def move_funds(self, input: dict, ctx: Any) -> dict:
        return self._write("move_funds", input, ctx)

    def preview_move(self, input: dict, ctx: Any) -> dict:
        assert ctx.dry_run, "a preview runs as a dry run"
        self.previews += 1
        before = self.balances.get(input["account"], 0)
        return {"account": input["account"], "before": before, "after": before - input["amount"]}

    def set_note(self, input: dict, ctx: Any) -> dict:
        return self._write("set_note", input, ctx)

    def preview_note(self, input: dict, ctx: Any) -> Any:
        note = input.get("note", "")
        if note == "fail":
            raise RuntimeError("the notes service is down")
        if note == "slow":
            time.sleep(1.5)
            return {"late": True}
        if note == "not json":
            return {"when": object()}
        if note.startswith("big"):
            return {"text": "x" * 50_000}
        return {"note": note}

    async def apreview_note(self, input: dict, ctx: Any) -> Any:
        return {"async": input.get("note", "")}

    def pay_invoice(self, input: dict, ctx: Any) -> dict:
        return self._write("pay_invoice", input, ctx)

    @staticmethod
    def big_payment(input: dict, ctx: Any) -> bool | Quorum:
        return Quorum(2, separate_duties=True) if input["amount"] > 1000 else False

    def api_tools(self) -> list[dict]:
        common = {"permission": "vault.use", "input_schema": AMOUNT}
        return [
            {
                "name": "vault.move_funds",
                "scope": "vault.funds:write",
                "handler": self.move_funds,
                "preview": self.preview_move,
                "approvals": 2,
                "separate_duties": True,
                **common,
            },
            {
                "name": "vault.set_note",
                "scope": "vault.notes:write",
                "handler": self.set_note,
                "preview": self.preview_note,
                **common,
            },
            {
                "name": "vault.set_memo",
                "scope": "vault.notes:write",
                "handler": self.set_note,
                "preview": self.apreview_note,
                **common,
            },
            {
                "name": "vault.pay_invoice",
                "scope": "vault.funds:write",
                "handler": self.pay_invoice,
                "danger": self.big_payment,
                **common,
            },
        ]


def vault_executor(ledger_url: str, log: str, **kwargs: Any) -> Executor:
    """An executor over the vault on the ledger at ``ledger_url`` (a process of its own)."""
    return Executor(
        Registry([Vault(Path(log))]),
        ledger=open_ledger(ledger_url),
        permissions=StaticPermissions(RIGHTS),
        **kwargs,
    )


def approve_as(
    ledger_url: str, log: str, confirmation_id: str, user: str, barrier: Any, results: Any
) -> None:
    """In a process of its own: wait for the sibling, then approve as ``user`` at once."""
    executor = vault_executor(ledger_url, log)
    try:
        barrier.wait(timeout=60)
        answer = executor.confirm(confirmation_id, Caller.session(user), "approve")
        results.put((user, answer))
    finally:
        executor.close()
        executor.ledger.close()
