"""The turn loop of ``turnkit chat`` and ``turnkit demo``: stream a turn, show it, ask decisions.

A write needs an explicit yes: the decision prompt has no default, and takes ``a``/``approve``,
``e``/``edit`` or ``r``/``reject``. Ctrl-C or Ctrl-D at any prompt, or during a turn, leaves the
chat with the command that continues it; a held write stays pending in the ledger.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command
from rich.console import Console
from rich.markup import escape

from turnkit.cli import render
from turnkit.cli.line_input import read_line
from turnkit.errors import LeaseLost, ThreadBusy
from turnkit.executor.executor import Executor
from turnkit.ledger.records import Confirmation
from turnkit.registry.caller import Caller
from turnkit.registry.json_limits import json_problem
from turnkit.turn.context import TurnContext
from turnkit.turn.keys import thread_of

Decide = Callable[[dict[str, Any]], Any]
"""Ask for the decision on a held write (its interrupt entry); None: it was decided elsewhere, so
the resume leaves it out (and the decision taken there is honoured)."""

CHOICES = {"a": "approve", "approve": "approve", "e": "edit", "edit": "edit", "r": "reject",
           "reject": "reject"}  # fmt: skip
"""What a person may type at the decision prompt."""


class Left(Exception):
    """The person left the chat at a prompt (Ctrl-C, Ctrl-D)."""

    def __init__(self, *, interrupted: bool) -> None:
        super().__init__("Ctrl-C" if interrupted else "Ctrl-D")
        self.interrupted = interrupted
        """Left with Ctrl-C: the command ends with ``options.INTERRUPTED``."""


def run_turn(
    graph: Any,
    request: Any,
    config: RunnableConfig,
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
            decision = decide(entry)
            if decision is not None:
                decisions[entry["confirmation_id"]] = decision
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


def ask(console: Console, executor: Executor) -> Decide:
    """Ask the person at the terminal: approve, edit (new JSON arguments) or reject; no default.
    A write decided elsewhere while the prompt waited (another terminal on the thread, ``turnkit
    confirmations``, the inbox) is told: who decided what, and that this answer changes nothing."""

    def decide(entry: dict[str, Any]) -> Any:
        answer = _decision(console, entry)
        found = executor.confirmation(entry["confirmation_id"])
        if found is None or found.status == "pending":
            return answer
        console.print(
            f"[yellow]already decided elsewhere[/]: {escape(render.decided(found))}\n[dim]your"
            " answer changes nothing; the chat goes on[/]"
        )
        return None

    return decide


def _decision(console: Console, entry: dict[str, Any]) -> Any:
    """The person's decision on ``entry``: ``approve``, a rejection or an edit."""
    choice = _choice(console)
    if choice == "approve":
        return "approve"
    if choice == "reject":
        message = _read(console, "why (optional, Enter for none): ")
        return {"action": "reject", "message": message.strip() or None}
    shown = json.dumps(entry["arguments"], ensure_ascii=False)
    console.print(f"[dim]the arguments now: {escape(shown)}[/]")
    while True:
        text = _read(console, "new arguments (one JSON object): ")
        try:
            arguments = json.loads(text)
        except ValueError as exc:
            console.print(f"[red]not JSON ({escape(str(exc))}); try again[/]")
            continue
        problem = json_problem(arguments) if isinstance(arguments, dict) else "not an object"
        if problem is None:
            return {"action": "edit", "arguments": arguments}
        console.print(f"[red]the arguments must be one plain JSON object ({problem}); try again[/]")


def _choice(console: Console) -> str:
    while True:
        text = _read(console, "[bold]approve, edit or reject?[/] [a/e/r] ").strip().lower()
        if text in CHOICES:
            return CHOICES[text]
        console.print(
            "[yellow]type a (approve), e (edit) or r (reject): a write runs only on an explicit"
            " yes[/]"
        )


def _read(console: Console, prompt: str) -> str:
    try:
        return read_line(console, prompt)
    except EOFError:
        raise Left(interrupted=False) from None
    except KeyboardInterrupt:
        raise Left(interrupted=True) from None


def chat_loop(
    graph: Any,
    executor: Executor,
    config: RunnableConfig,
    context: TurnContext,
    console: Console,
) -> None:
    """Resume what the thread waits for, then one turn per message until the person leaves."""
    decide = ask(console, executor)
    resume_waiting(graph, executor, config, context, console, decide)
    while True:
        text = _read(console, "[bold green]you>[/] ")
        command = text.strip().lower()
        if command in ("/quit", "/exit"):
            return
        if command == "/help":
            help_text(console)
        elif command.startswith("/") and " " not in command:
            console.print(
                f"[yellow]the chat has no command {escape(command)!r}[/]: /help lists its commands"
            )
        elif command:
            turn(graph, {"messages": [HumanMessage(text)]}, config, context, console, decide)


COMMANDS = {
    "/help": "list these commands",
    "/quit": "leave the chat (so do /exit, Ctrl-D and Ctrl-C); a held write stays pending, and"
    " the closing line says how to continue",
}
"""What the chat understands besides messages to the model (a line of one word starting with
``/`` is never sent to the model)."""


def help_text(console: Console) -> None:
    """``/help``: the chat's commands, and what a message and a held write do."""
    console.print("[bold]commands[/]")
    for command, said in COMMANDS.items():
        console.print(f"  {command:<7} {escape(said)}")
    console.print(
        "anything else is a message to the model. A write the model asks for waits for your"
        " decision: a (approve), e (edit its arguments) or r (reject)."
    )


def turn(
    graph: Any,
    request: Any,
    config: RunnableConfig,
    context: TurnContext,
    console: Console,
    decide: Decide,
) -> None:
    """One turn; a failure of the model (its server down, ...) is told in one line, and the
    thread keeps everything said so far."""
    try:
        run_turn(graph, request, config, context, console, decide)
    except Left:
        raise
    except LeaseLost:
        console.print(
            "[yellow]the turn stopped: another program took this thread while it ran[/]\n[dim]what"
            " was said before is kept; type again to go on from there[/]"
        )
    except ThreadBusy as busy:
        who = f" ({escape(busy.holder)})" if busy.holder else ""
        console.print(
            f"[yellow]thread {escape(busy.thread_id)} is busy: another turnkit chat or program"
            f"{who} is running a turn on it[/]\n[dim]nothing was sent; wait for it to end, then"
            " type again[/]"
        )
    except Exception as exc:  # the model's server, a tool's code: say it, keep the chat alive
        if os.environ.get("TURNKIT_DEBUG"):
            raise
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        console.print(
            f"[red]the turn stopped: {escape(reason)}[/]\n[dim]what was said is kept in the thread;"
            " type again, or leave and continue later (TURNKIT_DEBUG=1 shows the traceback)[/]"
        )


def resume_waiting(
    graph: Any,
    executor: Executor,
    config: RunnableConfig,
    context: TurnContext,
    console: Console,
    decide: Decide,
) -> None:
    """A thread paused at held writes: say which were decided elsewhere and which wait, then
    resume it (decisions taken elsewhere are honoured)."""
    waiting = pending(graph, config)
    if not waiting:
        return
    decided = []
    for entry in waiting:
        found = executor.confirmation(entry["confirmation_id"])
        if found is not None and found.outcome is not None:
            decided.append(render.decided(found))
    if decided:
        console.print(f"[yellow]{len(decided)} write(s) of this thread were decided elsewhere:[/]")
        for line in decided:
            console.print(f"  {escape(line)}")
    if len(waiting) > len(decided):
        count = len(waiting) - len(decided)
        console.print(f"[yellow]{count} write(s) of this thread wait for your decision[/]")
    turn(graph, Command(resume={}), config, context, console, decide)


def pending(graph: Any, config: RunnableConfig) -> list[dict[str, Any]]:
    """The confirmations a paused thread is waiting for (from its last interrupt)."""
    state = graph.get_state(config)
    return [
        entry
        for interrupt in state.interrupts
        if isinstance(interrupt.value, dict)
        for entry in interrupt.value.get("confirmations", [])
    ]


def waiting_in(executor: Executor, caller: Caller, thread_id: str) -> list[Confirmation]:
    """The writes of ``caller``'s held in the thread ``thread_id`` that still wait for a
    decision (not those of the caller's other threads)."""
    return [
        c
        for c in executor.pending(caller)
        if (c.thread_id or thread_of(c.idempotency_key)) == thread_id
    ]
