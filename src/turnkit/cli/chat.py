"""The turn loop of ``turnkit chat`` and ``turnkit demo``: stream a turn, show it, ask decisions."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.types import Command
from rich.console import Console
from rich.markup import escape
from rich.prompt import Prompt

from turnkit.cli import render
from turnkit.graph.context import TurnContext

Decide = Callable[[dict[str, Any]], Any]


def run_turn(
    graph: Any,
    request: Any,
    config: dict[str, Any],
    context: TurnContext,
    console: Console,
    decide: Decide,
) -> str:
    """Run a turn (and its resumes) to the model's answer; return that answer."""
    answer = ""
    while True:
        interrupts: Any = None
        with console.status("[dim]working…[/]", spinner="dots"):
            for update in graph.stream(request, config, context=context, stream_mode="updates"):
                for node, change in update.items():
                    if node == "__interrupt__":
                        interrupts = change
                    elif isinstance(change, dict):
                        answer = _show(console, change.get("messages") or []) or answer
        if not interrupts:
            return answer
        decisions = {}
        for entry in interrupts[0].value["confirmations"]:
            render.held(console, entry)
            decisions[entry["confirmation_id"]] = decide(entry)
        request = Command(resume=decisions)


def _show(console: Console, messages: list[Any]) -> str:
    answer = ""
    for message in messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                render.tool_call(console, call["name"], call["args"])
            for bad in message.invalid_tool_calls:
                render.tool_call(console, str(bad.get("name")), bad.get("args"))
            if message.text and not message.tool_calls:
                answer = message.text
                console.print(f"[bold magenta]assistant>[/] {escape(answer)}", highlight=False)
        elif isinstance(message, ToolMessage):
            render.outcome(console, message.content)
    return answer


def ask(console: Console) -> Decide:
    """Ask the person at the terminal: approve, edit (new JSON arguments) or reject."""

    def decide(entry: dict[str, Any]) -> Any:
        choice = Prompt.ask(
            "[bold]approve, edit or reject?[/]",
            choices=["a", "e", "r"],
            default="a",
            console=console,
        )
        if choice == "a":
            return "approve"
        if choice == "r":
            message = Prompt.ask("why (optional)", default="", console=console)
            return {"action": "reject", "message": message or None}
        while True:
            text = Prompt.ask(
                "new arguments (JSON)",
                default=json.dumps(entry["arguments"], ensure_ascii=False),
                console=console,
            )
            try:
                arguments = json.loads(text)
            except ValueError as exc:
                console.print(f"[red]not JSON ({exc}); try again[/]")
                continue
            if isinstance(arguments, dict):
                return {"action": "edit", "arguments": arguments}
            console.print("[red]the arguments must be a JSON object; try again[/]")

    return decide


def pending(graph: Any, config: dict[str, Any]) -> list[dict[str, Any]]:
    """The confirmations a paused thread is waiting for (from its last interrupt)."""
    state = graph.get_state(config)
    return [
        entry
        for interrupt in state.interrupts
        if isinstance(interrupt.value, dict)
        for entry in interrupt.value.get("confirmations", [])
    ]
