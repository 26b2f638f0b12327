"""``turnkit audit``: who called what, how it ended, how long it took — the ledger's audit rows.

Filters are the ledger's (``ledger/audit.py``, ``AuditQuery``); ``--since``/``--until`` take an
ISO 8601 time or a period back from now (``15m``, ``2h``, ``7d``). The table shows the latest
rows (50 unless ``--limit``); ``--jsonl``, ``--json`` and ``--csv`` write every matching row
(unless ``--limit``), read from the ledger a page at a time and written as they come, so an
export of any size runs in the same memory. It reads the ledger only (no module is loaded).
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from turnkit.cli.options import PERIODS, USAGE, Db, console, period_seconds, records
from turnkit.ledger.audit import AuditJson, AuditQuery, AuditRecord
from turnkit.ledger.records import iso

__all__ = ["audit"]

SHOWN = 50
"""Rows the table shows unless ``--limit`` says otherwise."""
FIELDS = tuple(AuditJson.__annotations__)
"""The fields of a row, in the order ``--csv`` writes them."""

Moment = Annotated[
    str | None,
    typer.Option(
        help="ISO 8601 (2026-05-01, 2026-05-01T09:30Z; UTC when it names no zone) or a period"
        f" back from now: {PERIODS}.",
    ),
]


def audit(
    db: Db = None,
    since: Moment = None,
    until: Moment = None,
    tool: Annotated[
        str | None,
        typer.Option(help="Only this tool's calls; a module and a dot (catalogue.) for its tools."),
    ] = None,
    caller: Annotated[
        str | None,
        typer.Option(help="Only this caller's calls: key:KEY_ID, session:USER, public."),
    ] = None,
    status: Annotated[
        str | None,
        typer.Option(help="Only calls that ended so: ok, error, held, dry_run, replayed..."),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            min=1,
            help=f"At most this many rows (the table: {SHOWN} by default; the other formats:"
            " every row).",
        ),
    ] = None,
    oldest_first: Annotated[
        bool, typer.Option("--oldest-first", help="Oldest first (newest first by default).")
    ] = False,
    as_jsonl: Annotated[
        bool, typer.Option("--jsonl", help="One JSON object a line, streamed (an export).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="A JSON array.")] = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="CSV with a header line.")] = False,
) -> None:
    """The audit: every call through the executor (who, which tool, how it ended, how long it
    took, its trace id), newest first, filtered."""
    if as_jsonl + as_json + as_csv > 1:
        console.print("[red]--jsonl, --json and --csv each choose the format: give one[/]")
        raise typer.Exit(USAGE)
    opened = records(db)
    try:
        now = opened.executor.clock()
        query = AuditQuery(
            since=None if since is None else moment("--since", since, now),
            until=None if until is None else moment("--until", until, now),
            tool=tool,
            caller=caller,
            status=status,
            oldest_first=oldest_first,
        )
        found = opened.storage.ledger.audit_stream(query)
        machine = as_jsonl or as_json or as_csv
        rows = itertools.islice(found, limit or (None if machine else SHOWN))
        if as_jsonl:
            _written(_jsonl(rows))
        elif as_json:
            _written(_json_array(rows))
        elif as_csv:
            _written_csv(rows)
        else:
            _table(list(rows), query, limit or SHOWN)
    finally:
        opened.close()


def moment(option: str, text: str, now: float) -> float:
    """``--since``/``--until``: seconds since the epoch of an ISO 8601 time (UTC when it names no
    zone) or of a period back from ``now``; anything else ends the command (``USAGE``)."""
    back = period_seconds(text)
    if back is not None:
        return now - back
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        console.print(
            f"[red]{option} {escape(repr(text))} is neither a time nor a period[/]: give ISO 8601"
            f" (2026-05-01, 2026-05-01T09:30Z) or a period back from now ({PERIODS})"
        )
        raise typer.Exit(USAGE) from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


def _jsonl(rows: Iterator[AuditRecord]) -> Iterator[str]:
    for row in rows:
        yield json.dumps(row.to_json()) + "\n"


def _json_array(rows: Iterator[AuditRecord]) -> Iterator[str]:
    yield "["
    for i, row in enumerate(rows):
        yield ("," if i else "") + "\n  " + json.dumps(row.to_json())
    yield "\n]\n"


def _written(chunks: Iterator[str]) -> None:
    """Write ``chunks`` to stdout as they come; a reader that stops early (``| head``) ends the
    command quietly."""
    try:
        for chunk in chunks:
            sys.stdout.write(chunk)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        raise typer.Exit(0) from None


def _written_csv(rows: Iterator[AuditRecord]) -> None:
    writer = csv.DictWriter(sys.stdout, FIELDS, lineterminator="\n")

    def lines() -> Iterator[str]:
        writer.writeheader()
        for row in rows:
            writer.writerow(row.to_json())
            yield ""

    _written(lines())


def _table(rows: list[AuditRecord], query: AuditQuery, limit: int) -> None:
    if not rows:
        console.print(_none(query))
        return
    shown = Table(title="audit, " + ("oldest first" if query.oldest_first else "newest first"),
                  title_justify="left")  # fmt: skip
    for column in ("time (UTC)", "caller", "tool", "status", "ms", "confirmation", "trace id"):
        shown.add_column(
            column,
            overflow="fold",
            justify="right" if column == "ms" else "left",
            no_wrap=column in ("time (UTC)", "status"),
        )
    for row in rows:
        ended = row.status if row.code is None else f"{row.status}: {row.code}"
        when = iso(row.at).replace("T", " ").removesuffix("Z")
        shown.add_row(when, row.caller, row.tool, ended, f"{row.duration_ms:.1f}",
                      row.confirmation_id or "-", row.trace_id or "-")  # fmt: skip
    console.print(shown)
    if len(rows) == limit:
        console.print(
            f"[dim]{limit} rows shown: --limit N for more, --jsonl or --csv for every one[/]"
        )


def _none(query: AuditQuery) -> str:
    """What to do when no row matched."""
    filters = (query.since, query.until, query.tool, query.caller, query.status)
    if any(value is not None for value in filters):
        return (
            "no audit rows match these filters: widen them (an earlier --since, a module's"
            " name and a dot for --tool, no --status) or leave them out"
        )
    return (
        "the audit is empty: every call through the executor leaves a row (turnkit demo makes"
        " some); check that --db names the ledger your servers and agents write to"
    )
