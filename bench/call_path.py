"""The files one tool call goes through, from the ``execute`` node to its audit row.

Not part of ``python -m bench``'s table: a diagnostic of the layout (docs/architecture.md, "The path
of one tool call"). One sync ``invoke`` of the turn graph on the demo catalogue, a read by a
signed-in user, SQLite ledger. It prints two measures:

- **files run**: every file of the package in which a function ran while the ``execute`` node
  handled the call (a profiler hook on every thread), in the order first entered, and the folders
  they are in;
- **the stack at the audit row**: the package's files on the call stack when the audit row's
  ``INSERT`` is sent: the path the call itself takes (a suspended generator, like the pipeline
  between two effects, is not on it).

Only public imports, so the same script measures an older checkout too:

    .venv/bin/python bench/call_path.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import traceback
from types import FrameType
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

import turnkit
from turnkit import Caller, Executor, Registry, open_ledger
from turnkit.demo import Catalogue, demo_permissions
from turnkit.graph import TurnContext, build_turn_graph
from turnkit.testing import ScriptedModel

ROOT = os.path.dirname(turnkit.__file__)
CALLER = Caller.session("demo")


def _graph(executor: Executor, sku: str) -> Any:
    call = {"name": "catalogue_get_product", "args": {"sku": sku}}
    model = ScriptedModel([{"tool_calls": [call]}, "done"])  # a scripted model, for the trace
    return build_turn_graph(executor, model, checkpointer=InMemorySaver())


def _turn(graph: Any, thread: str) -> None:
    config = {"configurable": {"thread_id": thread}}
    graph.invoke({"messages": [HumanMessage("tea?")]}, config, context=TurnContext(caller=CALLER))


def _is_node(frame: FrameType) -> bool:
    code = frame.f_code
    return code.co_name == "execute" and code.co_filename.endswith(
        os.path.join("nodes", "execute.py")
    )


def files_run(executor: Executor) -> list[str]:
    """The package's files in which code ran during the ``execute`` node, first entered first."""
    order: list[str] = []
    active = [False]

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and _is_node(frame):
            active[0] = True
        if active[0] and event == "call" and frame.f_code.co_filename.startswith(ROOT):
            relative = os.path.relpath(frame.f_code.co_filename, ROOT)
            if relative not in order:
                order.append(relative)
        if event == "return" and _is_node(frame):
            active[0] = False

    graph = _graph(executor, "TEA-0001")
    sys.setprofile(hook)
    threading.setprofile(hook)
    try:
        _turn(graph, "trace")
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return order


def stack_at_audit(executor: Executor) -> list[str]:
    """The package's files on the stack when the audit row's INSERT is sent (consecutive frames
    of one file counted once)."""
    ledger_class = type(executor.ledger)
    original = ledger_class._run
    stacks: list[list[str]] = []

    def spy(self: Any, sql: str, params: Any = ()) -> int:
        if sql.lstrip().upper().startswith("INSERT") and "turnkit_audit" in sql:
            frames = traceback.extract_stack()
            stacks.append(
                [os.path.relpath(f.filename, ROOT) for f in frames if f.filename.startswith(ROOT)]
            )
        return original(self, sql, params)

    ledger_class._run = spy  # type: ignore[method-assign]  # a diagnostic's spy, undone below
    try:
        _turn(_graph(executor, "TEA-0002"), "stack")
    finally:
        ledger_class._run = original  # type: ignore[method-assign]
    path: list[str] = []
    for name in stacks[0]:
        if not path or path[-1] != name:
            path.append(name)
    return path


def main() -> None:
    folder = tempfile.mkdtemp(prefix="turnkit-call-path-")
    executor = Executor(
        Registry([Catalogue(os.path.join(folder, "catalogue.sqlite"))]),
        permissions=demo_permissions(),
        ledger=open_ledger(os.path.join(folder, "ledger.sqlite")),
    )
    run = files_run(executor)
    folders = sorted({name.split(os.sep)[0] if os.sep in name else "(top)" for name in run})
    listed = ", ".join(folders)
    print(f"files run in the execute node: {len(run)} in {len(folders)} folders ({listed})")
    for name in run:
        print(f"  {name}")
    path = stack_at_audit(executor)
    print(
        f"the stack at the audit row's INSERT: {len(path)} files (then the ledger's _run sends it)"
    )
    print("  " + " -> ".join(path))
    executor.close()


if __name__ == "__main__":
    main()
