"""``turnkit threads``: the conversation threads in a ``--db``, most recently active first.

What it shows is what the database holds, nothing guessed: each thread's latest checkpoint (its
time, its step, whether the turn is paused at an interrupt), the writes of the thread that wait
for a person (pending confirmations, whose thread is recorded or read from their idempotency key),
and the run holding the thread's lease now, if any (``ledger.thread_leases().holder``: a lock
row's ``host:pid#token`` on SQLite and behind a pooler, the holder's application name for a
PostgreSQL advisory lock). A thread with held writes but no checkpoint here (say, a conversation
run by ``langgraph dev``, whose checkpoints live in its own store) is listed with its holds alone.

The checkpoints are read newest first, a page of ``PAGE`` at a time (a PostgreSQL saver loads a
whole answer into memory before it yields any of it), until ``--limit`` threads are found: the
cost follows the recent history, not the whole database.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from turnkit.cli.options import Db, console, records
from turnkit.cli.session import Session
from turnkit.ledger.records import iso
from turnkit.ledger.report import duration_text
from turnkit.turn.keys import thread_of

__all__ = ["ThreadRow", "thread_rows", "threads"]

PAGE = 200
"""Checkpoints read per query (``list(limit=PAGE, before=the last one read)``)."""
INTERRUPT = "__interrupt__"
"""The channel of a pending interrupt in a checkpoint's writes (LangGraph's ``INTERRUPT``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ThreadRow:
    """One thread as ``turnkit threads`` lists it."""

    thread: str
    """The thread id (``--thread`` of ``turnkit chat``, ``thread_id`` in a run's config)."""
    last_activity: float | None
    """Seconds since the epoch of its latest checkpoint or hold; None when neither has a time."""
    step: int | None
    """The step of its latest checkpoint (None: no checkpoint in this database)."""
    paused: bool
    """Its latest checkpoint has a pending interrupt: the turn waits for an answer."""
    waiting: list[str]
    """The ids of its writes that wait for a person (pending confirmations)."""
    lease: str | None
    """Who runs it now (the lease's holder), or None."""

    @property
    def state(self) -> str:
        """``running``, ``waits for a person``, ``paused``, ``idle`` or ``held writes only``."""
        if self.lease:
            return "running"
        if self.waiting:
            return "waits for a person" if self.step is not None else "held writes only"
        return "paused" if self.paused else "idle"

    def as_dict(self) -> dict[str, Any]:
        """The row as JSON data (``--json``): times in ISO 8601 UTC."""
        data = asdict(self)
        data["last_activity"] = None if self.last_activity is None else iso(self.last_activity)
        return data | {"state": self.state}


def thread_rows(opened: Session, limit: int) -> list[ThreadRow]:
    """The ``limit`` most recently active threads of ``opened``'s database, newest first."""
    latest: dict[str, Any] = {}
    for found in _newest_first(opened.storage.checkpointer):
        configurable = found.config["configurable"]
        if configurable.get("checkpoint_ns"):  # a subgraph's: its thread is listed by the root
            continue
        latest.setdefault(configurable["thread_id"], found)
        if len(latest) >= limit:
            break
    clock = opened.executor.clock()
    held: dict[str, list[Any]] = {}
    for c in opened.storage.ledger.list_confirmations(status="pending"):
        thread = c.thread_id or thread_of(c.idempotency_key)
        if thread is not None and c.expires_at > clock:
            held.setdefault(thread, []).append(c)
    leases = opened.storage.ledger.thread_leases()
    rows = []
    for thread in {*latest, *held}:
        checkpoint = latest.get(thread)
        holds = held.get(thread, [])
        times = [c.created_at for c in holds]
        if checkpoint is not None and checkpoint.checkpoint.get("ts"):
            times.append(datetime.fromisoformat(checkpoint.checkpoint["ts"]).timestamp())
        rows.append(
            ThreadRow(
                thread=thread,
                last_activity=max(times, default=None),
                step=None if checkpoint is None else checkpoint.metadata.get("step"),
                paused=checkpoint is not None
                and any(write[1] == INTERRUPT for write in checkpoint.pending_writes or []),
                waiting=sorted(c.id for c in holds),
                lease=leases.holder(thread),
            )
        )
    rows.sort(key=lambda row: row.last_activity or 0.0, reverse=True)
    return rows[:limit]


def _newest_first(checkpointer: Any) -> Iterator[Any]:
    """Every checkpoint of every thread, newest first (checkpoint ids grow with time), read a
    page at a time so that stopping early reads little."""
    before = None
    while True:
        page = list(checkpointer.list(None, limit=PAGE, before=before))
        yield from page
        if len(page) < PAGE:
            return
        before = {
            "configurable": {"checkpoint_id": page[-1].config["configurable"]["checkpoint_id"]}
        }


def threads(
    db: Db = None,
    limit: Annotated[
        int, typer.Option(min=1, help="At most this many threads, the most recent.")
    ] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON array, for scripts.")] = False,
) -> None:
    """The conversation threads, most recently active first: last activity, state, the writes
    that wait for a person, and the run holding the thread now."""
    opened = records(db)
    try:
        rows = thread_rows(opened, limit)
        now = opened.executor.clock()
    finally:
        opened.close()
    if as_json:
        typer.echo(json.dumps([row.as_dict() for row in rows], indent=2, ensure_ascii=False))
        return
    if not rows:
        console.print("no threads yet: `turnkit chat --demo --model scripted` starts one")
        return
    table = Table(title="threads", title_justify="left")
    for column in ("thread", "last activity", "state", "step", "writes waiting", "held by"):
        table.add_column(column, no_wrap=column == "thread", overflow="fold")
    for row in rows:
        active = "-" if row.last_activity is None else _ago(row.last_activity, now)
        table.add_row(
            escape(row.thread),
            active,
            row.state,
            "-" if row.step is None else str(row.step),
            " ".join(c[:8] for c in row.waiting) or "-",
            escape(row.lease or "-"),
        )
    console.print(table)
    if any(row.waiting for row in rows):
        console.print(
            "[dim]one whole: turnkit confirmations show ID (its first 8 characters do)[/]"
        )


def _ago(moment: float, now: float) -> str:
    return f"{iso(moment)} ({duration_text(max(0.0, now - moment))} ago)"
