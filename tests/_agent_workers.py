"""Agents in spawned processes: each opens the storage from its path, as a restarted app does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from turnkit import Agent, tool
from turnkit.testing import ScriptedModel

SYSTEM = "You remember what people tell you."


def notes_tools(log: str) -> list[Any]:
    """``delete_note``: a write that always waits for a person; each run appends to ``log``."""

    @tool(danger="always")
    def delete_note(title: str) -> dict[str, str]:
        """Delete one of the user's notes."""
        with Path(log).open("a") as handle:
            handle.write(title + "\n")
        return {"deleted": title}

    return [delete_note]


def first_exchange(storage: str, thread_id: str, results: Any) -> None:
    """Say "My name is Alice." on ``thread_id`` and report the answer."""
    model = ScriptedModel(["Hello Alice."])
    with Agent(model, system=SYSTEM, storage=storage, thread_id=thread_id) as agent:
        results.put(agent.prompt("My name is Alice.").content)


def start_held_delete(storage: str, thread_id: str, log: str, results: Any) -> None:
    """Ask to delete a note; the write is held. Report the pending confirmations."""
    model = ScriptedModel(
        [{"tool_calls": [{"name": "delete_note", "args": {"title": "groceries"}}]}]
    )
    with Agent(model, tools=notes_tools(log), storage=storage, thread_id=thread_id) as agent:
        response = agent.prompt("Delete my groceries note.")
        results.put(
            {
                "content": response.content,
                "pending": [
                    {"id": p.id, "tool": p.tool, "arguments": p.arguments} for p in response.pending
                ],
            }
        )


def hold_delete_for(storage: str, thread_id: str, log: str, user: str, results: Any) -> None:
    """``start_held_delete`` with the agent acting for the signed-in ``user``."""
    from turnkit import Caller, Settings

    model = ScriptedModel(
        [{"tool_calls": [{"name": "delete_note", "args": {"title": "groceries"}}]}]
    )
    caller = Caller.session(user)
    acting = Settings(api_session_write_modules=["local"])  # the agent may act for the user
    with Agent(model, tools=notes_tools(log), storage=storage, thread_id=thread_id,
               caller=caller, settings=acting) as agent:  # fmt: skip
        response = agent.prompt("Delete my groceries note.")
        results.put([p.id for p in response.pending])
