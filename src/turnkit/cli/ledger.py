"""``turnkit ledger prune``: forget what the ledger no longer needs (``ledger/retention.py``).

Decided confirmations and idempotency records older than the setting ``retention_days``, expired
sign-ins of the web inbox, ended rate-limit windows, and audit rows only when the setting
``audit_retention_days`` asks for it. Safe to run while servers run (from cron, say); ``--dry-run``
counts without deleting.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from turnkit.cli.options import HELP_MARKUP, Db, HelpGroup, console, records
from turnkit.ledger.retention import prune as prune_ledger

app = typer.Typer(
    help="Keep the ledger's database small.",
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
    cls=HelpGroup,
)

_WHAT = {
    "confirmations": "decided confirmations (and pending ones long expired)",
    "idempotency": "idempotency records",
    "sessions": "expired inbox sign-ins",
    "usage": "ended rate-limit windows",
    "audit": "audit rows",
    "approvals": "approvals of deleted confirmations",
    "notifications": "notifications sent or given up",
}


@app.command()
def prune(
    db: Db = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would go; delete nothing.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="The counts as JSON.")] = False,
) -> None:
    """Delete what the retention settings let go (retention_days, audit_retention_days)."""
    opened = records(db)
    try:
        settings = opened.executor.settings_now()
        pruned = prune_ledger(
            opened.storage.ledger,
            now=opened.executor.clock(),
            retention_days=settings.retention_days,
            audit_retention_days=settings.audit_retention_days,
            rate_limit_window=settings.rate_limit_window,
            dry_run=dry_run,
        )
    finally:
        opened.close()
    if as_json:
        typer.echo(json.dumps(pruned.as_dict() | {"dry_run": dry_run}))
        return
    verb = "would delete" if dry_run else "deleted"
    for kind, count in pruned.as_dict().items():
        console.print(f"{verb} {count} {_WHAT[kind]}")
    kept = f"kept for {settings.retention_days:g} days"
    audit = (
        f"audit rows kept for {settings.audit_retention_days:g} days"
        if settings.audit_retention_days
        else "audit rows kept for good (turnkit settings set audit_retention_days 365 to prune)"
    )
    console.print(f"[dim]confirmations and idempotency records {kept}; {audit}[/]")
