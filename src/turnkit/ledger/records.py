"""Plain records the ledger returns: a confirmation and an idempotency record."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TypeAlias

from turnkit.registry.caller import Caller

__all__ = [
    "Approval",
    "Confirmation",
    "ConfirmationStatus",
    "Cursor",
    "IdempotencyRecord",
    "Preview",
    "Readable",
    "caller_from_json",
    "iso",
]

ConfirmationStatus: TypeAlias = Literal[
    "pending", "running", "done", "rejected", "expired", "forbidden"
]
"""``pending`` until decided; ``running`` while an approved write runs; then ``done``, or without
a write ``rejected`` (a person said no), ``expired`` (nobody decided in time) or ``forbidden``
(the right it was held under is gone: its API key was revoked or expired)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Preview:
    """What a held write would change, as its tool's ``preview`` said when it was held: shown to
    approvers, never to the model (docs/architecture.md, "Deciding well")."""

    value: Any = None
    """The preview's JSON data; its JSON text cut to the limit when ``truncated``."""
    truncated: bool = False
    """The preview was longer than the limit: ``value`` is the start of its JSON text."""
    unavailable: str | None = None
    """Why there is no preview (it failed, took too long, or was not JSON data), or None."""

    def to_json(self) -> dict[str, Any]:
        """The preview as JSON data, as the ledger stores it."""
        if self.unavailable is not None:
            return {"unavailable": self.unavailable}
        return {"value": self.value, "truncated": True} if self.truncated else {"value": self.value}

    @classmethod
    def from_json(cls, data: Any) -> Preview | None:
        """The preview ``to_json`` stored, or None (none, or a row this turnkit cannot read)."""
        if not isinstance(data, dict):
            return None
        if isinstance(data.get("unavailable"), str):
            return cls(unavailable=data["unavailable"])
        if "value" not in data:
            return None
        return cls(value=data["value"], truncated=data.get("truncated") is True)


@dataclass(frozen=True, kw_only=True, slots=True)
class Approval:
    """One person's approval of a held write that needs more than one (``approvals=N``)."""

    by: str
    """The approver's identity."""
    at: float
    """When they approved (seconds since the epoch)."""
    input_hash: str
    """The hash of the input they approved: an edit after it makes it count no more."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Confirmation:
    """A write held for a person's decision, as the ledger keeps it."""

    id: str
    """The confirmation's uuid."""
    caller: Caller
    """Who made the held call; the approved write runs as them, with rights checked again."""
    tool: str
    """The registry name of the held tool."""
    input: dict[str, Any]
    """The exact validated input that will run on approval (an edit replaces it)."""
    input_hash: str
    """Hash of the canonical JSON of ``input``."""
    idempotency_key: str | None
    """The held call's idempotency key, whose record gets the final outcome."""
    status: ConfirmationStatus
    """Where the confirmation is in its life."""
    created_at: float
    """When it was held (seconds since the epoch)."""
    expires_at: float
    """When it stops being decidable."""
    decided_at: float | None = None
    """When a person decided."""
    decided_by: str | None = None
    """The identity of the decider."""
    decision: dict[str, Any] | None = None
    """What was decided: ``{"kind": "approve" | "reject" | "edit", ...}``."""
    outcome: dict[str, Any] | None = None
    """The stored answer once decided and run; returned on every repeat."""
    module: str | None = None
    """The key of the module whose declaration of ``tool`` held the call."""
    fingerprint: str | None = None
    """The fingerprint of that declaration (``registry/declaration.py``): a door whose registry
    declares ``tool`` differently does not decide it. None for confirmations made before
    fingerprints were recorded."""
    thread_id: str | None = None
    """The conversation (LangGraph thread) whose turn made the held call, when it was a turn."""
    reserved_units: int = 0
    """Rate-limit units the hold reserved against its caller's budget: spent when it runs,
    given back when it is rejected, expires or is refused."""
    reserved_window: int | None = None
    """The rate-limit window those units were reserved in."""
    preview: Preview | None = None
    """What the write would change, from the tool's ``preview`` (None: it declares none)."""
    request: dict[str, str] | None = None
    """The request that led to the hold, bounded: ``user`` (the person's last message) and
    ``model`` (the model's text of that round), when a conversation made the call."""
    caller_name: str | None = None
    """The name of the caller's API key when it was held (``turnkit keys create --name``)."""
    approvals_needed: int = 1
    """How many distinct people must approve before the write runs (``approvals=N``)."""
    separate_duties: bool = False
    """The caller whose write is held may not approve it (four eyes)."""
    approvals: tuple[Approval, ...] = ()
    """The approvals given so far, oldest first, while more than one is needed."""
    trace_context: str | None = None
    """The W3C ``traceparent`` of the hold's span (``turnkit.observe``), when one was traced:
    the decision and the run that follow link to it, hours later and in another process."""

    @property
    def approvals_given(self) -> int:
        """The approvals that count now: those given for the input as it stands."""
        return sum(1 for a in self.approvals if a.input_hash == self.input_hash)

    def caller_label(self) -> str:
        """Who the write was held for, in a person's words: a key's user and name, a session's
        user, or the caller's identity."""
        caller = self.caller
        if caller.kind == "key":
            named = f" ({self.caller_name})" if self.caller_name else ""
            owner = f" of {caller.user_id}" if caller.user_id else ""
            return f"key {caller.key_id}{named}{owner}"
        if caller.kind == "session":
            return f"{caller.user_id} (signed in)"
        return caller.identity

    @property
    def expires_at_iso(self) -> str:
        """``expires_at`` as an ISO 8601 UTC timestamp."""
        return iso(self.expires_at)


@dataclass(frozen=True, kw_only=True, slots=True)
class Cursor:
    """Where a page of confirmations ended: the next page starts after it."""

    created_at: float
    """The last confirmation's ``created_at``."""
    id: str
    """The last confirmation's id (confirmations held at the same instant are ordered by it)."""

    @classmethod
    def of(cls, confirmation: Confirmation) -> Cursor:
        """The cursor after ``confirmation``."""
        return cls(created_at=confirmation.created_at, id=confirmation.id)

    def text(self) -> str:
        """The cursor as an opaque URL-safe text (``?after=...``)."""
        raw = json.dumps([self.created_at, self.id], separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def parse(cls, text: str) -> Cursor | None:
        """The cursor ``text`` names, or None when it names none (a typo, another API's)."""
        if not 0 < len(text) <= 400:
            return None
        try:
            created_at, cid = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        except (ValueError, TypeError, binascii.Error):
            return None
        if not isinstance(created_at, int | float) or isinstance(created_at, bool):
            return None
        if not isinstance(cid, str) or not 0 < len(cid) <= 200 or "\x00" in cid:
            return None
        return cls(created_at=float(created_at), id=cid)


@dataclass(frozen=True, kw_only=True, slots=True)
class Readable:
    """Which confirmations a reader may see: those held for it, and others' of some tools.

    Examples:
        >>> Readable(identity="key:k1", others=None).sql()
        ('caller_identity = ?', ['key:k1'])
    """

    identity: str
    """The reader's own identity: the confirmations held for it are always readable."""
    others: Literal["all"] | Collection[str] | None = None
    """Others' confirmations it may see: of every tool, of these tools only, or none."""

    def sql(self) -> tuple[str, list[Any]]:
        """The condition (and its parameters) for the ledger's ``WHERE``."""
        if self.others == "all":
            return "1 = 1", []
        if not self.others:
            return "caller_identity = ?", [self.identity]
        tools = sorted(self.others)
        marks = ", ".join("?" for _ in tools)
        return f"(caller_identity = ? OR tool IN ({marks}))", [self.identity, *tools]


@dataclass(frozen=True, kw_only=True, slots=True)
class IdempotencyRecord:
    """What the ledger remembers of one idempotency key of one caller and tool."""

    input_hash: str
    """Hash of the input first sent with the key."""
    state: Literal["running", "done"]
    """``running`` while the first call is under way; ``done`` once its answer is stored."""
    answer: dict[str, Any] | None
    """The stored answer (``done`` only)."""
    created_at: float
    """When the key was first seen."""


def iso(timestamp: float) -> str:
    """Seconds since the epoch as an ISO 8601 UTC timestamp with a ``Z``."""
    moment = datetime.fromtimestamp(timestamp, tz=UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def caller_to_json(caller: Caller) -> dict[str, Any]:
    """A caller as JSON data for the ledger."""
    return {
        "kind": caller.kind,
        "user_id": caller.user_id,
        "key_id": caller.key_id,
        "scopes": sorted(caller.scopes),
        "client_id": caller.client_id,
    }


def caller_from_json(data: dict[str, Any]) -> Caller:
    """The caller that ``caller_to_json`` stored."""
    return Caller(
        kind=data["kind"],
        user_id=data.get("user_id"),
        key_id=data.get("key_id"),
        scopes=frozenset(data.get("scopes") or ()),
        client_id=data.get("client_id"),
    )
