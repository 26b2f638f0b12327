"""The ``messages`` channel: ``add_messages`` semantics, stored as deltas.

With LangGraph's default reducer channel every checkpoint stores the whole conversation again, so
the bytes a thread stores per round grow with its length (quadratic in total). ``TurnState`` keeps
its messages in a ``DeltaChannel`` instead: a checkpoint stores only the round's new writes, and a
run that loads the thread replays them through ``fold_messages``.

Replaying asks two things of the reducer that ``add_messages`` does not give:

- **Determinism.** ``add_messages`` gives a message without an id a random one, so a replay would
  rename it. Here its id is derived from the message before it and its own content.
- **Batching invariance.** A replay folds many steps' writes at once, so the result must not depend
  on how writes are grouped: removals apply in order, message by message.

A dict that names a LangChain message ``type`` (a bare dict write, or what a server's store
hands back) is rebuilt as that message class, field for field, instead of going through
``convert_to_messages``, which files unknown fields under ``additional_kwargs``. (Message dicts
inside a list are converted by LangGraph itself, with ``convert_to_messages``, before they are
stored.) A bare ``(role, content)`` tuple is refused: stored, it reads back as a list.
"""

from __future__ import annotations

import functools
import hashlib
import json
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core import messages as lc
from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    BaseMessageChunk,
    RemoveMessage,
    convert_to_messages,
    message_chunk_to_message,
)
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import REMOVE_ALL_MESSAGES

__all__ = ["SNAPSHOT_EVERY", "fold_messages", "message_id", "messages_channel"]

SNAPSHOT_EVERY = 300
"""Updates of the channel between full snapshots (LangGraph 1.2.24's default is 100).

A snapshot stores the whole conversation once; between snapshots a checkpoint stores only the new
messages, and loading a thread replays the writes since the last snapshot. A round of a turn makes
about four updates, so this is a snapshot every ~70 rounds. Measured on SQLite
(``bench/checkpoint_growth.py``): a round stores ~24 KB however long the thread, plus the
snapshot (~230 KB at round 70); replaying costs ~0.16 ms per round since the snapshot when a turn
loads the thread, so up to ~11 ms. With 1000, bytes grew even less, but a turn at round 100 took
28 ms instead of 12."""

_NAMESPACE = uuid.UUID("6f1c2a52-3b1e-4f43-9a59-5e0b7c1d2f10")
_CLASSES = ("AIMessage", "HumanMessage", "SystemMessage", "ToolMessage", "ChatMessage",
            "FunctionMessage", "RemoveMessage")  # fmt: skip
_TYPES: dict[str, type[BaseMessage]] = {
    cls.model_fields["type"].default: cls
    for cls in [getattr(lc, name) for name in _CLASSES]
    + [getattr(lc, name + "Chunk") for name in _CLASSES if hasattr(lc, name + "Chunk")]
}
"""LangChain's message classes by their ``type`` (``"ai"``, ``"AIMessageChunk"``, ...)."""


def message_id(previous: str | None, message: BaseMessage) -> str:
    """A stable id for ``message`` (which has none) placed after the message ``previous``."""
    digest = hashlib.blake2b(digest_size=16)
    content = json.dumps(message.content, sort_keys=True, default=str)  # tuples read as lists
    for part in (previous or "", message.type, content):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return str(uuid.uuid5(_NAMESPACE, digest.hexdigest()))


def _message(value: Any) -> Any:
    """A LangChain message from a dict that names its ``type``; anything else unchanged."""
    if isinstance(value, dict) and isinstance(cls := _TYPES.get(str(value.get("type"))), type):
        if "content" not in value:
            value = {**value, "content": ""}
        value = cls.model_validate(value)
    if isinstance(value, BaseMessageChunk):
        return message_chunk_to_message(value)
    return value


def _messages(update: Any) -> list[BaseMessage]:
    """One write as a list of messages (``add_messages`` accepts one message or a list).

    Raises:
        TypeError: for a bare ``(role, content)`` tuple. Stored, it would read back as a list
            of two messages; refused before it becomes part of the thread.
    """
    if isinstance(update, tuple):
        raise TypeError(
            f"a messages update must be a message or a list, not the tuple {update!r:.80}: write"
            " [(role, content)] (turnkit stores messages as deltas, and a tuple is read back as"
            " a list of two messages)"
        )
    items = update if isinstance(update, list) else [update]
    if all(_plain(kind) for kind in set(map(type, items))):  # a history: checked per type
        return items
    typed = [_message(item) for item in items]
    if all(isinstance(item, BaseMessage) for item in typed):
        return typed
    return [
        message_chunk_to_message(m) if isinstance(m, BaseMessageChunk) else m
        for m in convert_to_messages(typed)
    ]


@functools.cache
def _plain(kind: type) -> bool:
    """A message class stored as it is: a ``BaseMessage``, not a chunk (nor a removal)."""
    return (
        issubclass(kind, BaseMessage)
        and not issubclass(kind, BaseMessageChunk)
        and not issubclass(kind, RemoveMessage)
    )


class _Fold:
    """The conversation being folded: a list with holes for removed messages, and an id index."""

    def __init__(self, current: Iterable[BaseMessage]) -> None:
        self.items: list[BaseMessage | None] = list(current)
        self.index = {m.id: i for i, m in enumerate(self.items) if m is not None}
        self.holes = 0

    def last_id(self) -> str | None:
        for item in reversed(self.items):
            if item is not None:
                return item.id
        return None

    def apply(self, message: BaseMessage) -> None:
        if message.id is None:
            message = message.model_copy(update={"id": message_id(self.last_id(), message)})
        if isinstance(message, RemoveMessage):
            if message.id == REMOVE_ALL_MESSAGES:
                self.items, self.index, self.holes = [], {}, 0
                return
            at = self.index.pop(message.id, None)
            if at is None:
                raise ValueError(
                    f"Attempting to delete a message with an ID that doesn't exist ({message.id!r})"
                )
            self.items[at] = None
            self.holes += 1
            return
        at = self.index.get(message.id)
        if at is None:
            self.index[message.id] = len(self.items)
            self.items.append(message)
        else:
            self.items[at] = message

    def result(self) -> list[BaseMessage]:
        if not self.holes:
            return self.items  # type: ignore[return-value]  # no holes: all messages
        return [m for m in self.items if m is not None]


def fold_messages(current: Sequence[AnyMessage], writes: Sequence[Any]) -> list[AnyMessage]:
    """Apply ``writes`` (each one message or a list, as ``add_messages`` takes) to ``current``.

    Messages with a known id replace that message in place; a ``RemoveMessage`` deletes by id (all
    messages for ``REMOVE_ALL_MESSAGES``); anything else is appended. Deterministic, and the same
    whether the writes come one by one or all at once. ``current`` is not changed.

    Where ``add_messages`` applies a list's removals only at its end, this applies every message
    in order, which batching invariance needs: a message removed and added again in one update
    moves to the end (``add_messages`` keeps its place); removing one id twice is refused like an
    unknown id; the messages after ``REMOVE_ALL_MESSAGES`` are applied (``add_messages`` keeps
    them as they are, removals included).
    """
    items = _messages(current if isinstance(current, list) else list(current))
    batch = [message for update in writes for message in _messages(update)]
    if all(_plain(type(m)) and m.id for m in batch):  # the common case: new messages appended
        ids = {message.id for message in items}
        if len(ids | {m.id for m in batch}) == len(ids) + len(batch):
            return [*items, *batch]  # type: ignore[list-item]  # _messages gave messages only
    fold = _Fold(items)  # copies
    for message in batch:
        fold.apply(message)
    return fold.result()  # type: ignore[return-value]  # a _Fold holds messages only


def messages_channel() -> DeltaChannel[list[AnyMessage]]:
    """The ``messages`` channel of ``TurnState`` (``Annotated[list[AnyMessage], ...]``)."""
    return DeltaChannel(fold_messages, list, snapshot_frequency=SNAPSHOT_EVERY)
