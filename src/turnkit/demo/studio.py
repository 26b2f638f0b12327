"""The graph ``langgraph dev`` (LangGraph Studio) serves: the turn graph on the demo catalogue.

``langgraph.json`` at the repository root points here (``turnkit.demo.studio:graph``): a graph
factory, the demo's configuration of ``turnkit.deploy.Deployment``. Importing this module opens
and writes nothing; the server's first call of ``graph`` builds the demo's executor (its catalogue
and ledger files), model and graph in a worker thread, and every later call returns the same
graph. The graph is compiled **without** a checkpointer or store: the server brings its own
persistence (and refuses a graph that has one).

Chosen by environment variables, read when the graph is first built:

- ``OPENAI_API_KEY`` or ``OPENAI_BASE_URL`` set: an OpenAI-compatible chat model (OpenAI, vLLM,
  llama.cpp, Ollama, ...) named by ``TURNKIT_MODEL`` (default ``gpt-4o-mini``); a local server
  needs only ``OPENAI_BASE_URL``. Otherwise the **scripted** demo model (offline, rule-based).
- ``TURNKIT_DEMO_DB``: the demo catalogue's SQLite file (its ledger lies beside it); default
  ``.turnkit/demo.sqlite`` under the current folder.

Runs that pass no context act for the demo user (``turnkit.demo.DEMO_CALLER``: the session user
``"demo"``, who may view and manage the catalogue); each of its writes waits for a confirmation.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from langgraph.graph.state import CompiledStateGraph

from turnkit.demo import DEMO_CALLER, demo_executor, scripted_demo_model
from turnkit.deploy.deployment import Deployment
from turnkit.executor.executor import Executor
from turnkit.graph.build import build_turn_graph

__all__ = [
    "DEFAULT_DB",
    "DEFAULT_MODEL",
    "demo_db_path",
    "deployment",
    "graph",
    "make_graph",
    "studio_model",
]

DEFAULT_DB = Path(".turnkit") / "demo.sqlite"
"""The demo catalogue's file when ``TURNKIT_DEMO_DB`` is not set (under the current folder)."""
DEFAULT_MODEL = "gpt-4o-mini"
"""The model name asked of an OpenAI-compatible endpoint when ``TURNKIT_MODEL`` is not set."""


def demo_db_path() -> Path:
    """``TURNKIT_DEMO_DB``, else ``.turnkit/demo.sqlite``; the folder is created."""
    path = Path(os.environ.get("TURNKIT_DEMO_DB") or DEFAULT_DB)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def studio_model() -> Any:
    """An OpenAI-compatible chat model when ``OPENAI_API_KEY`` or ``OPENAI_BASE_URL`` is set,
    else the scripted demo model."""
    if not (os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")):
        return scripted_demo_model()
    from turnkit.agent.models import resolve_model  # langchain-openai costs ~2 s: only now

    return resolve_model(f"openai:{os.environ.get('TURNKIT_MODEL') or DEFAULT_MODEL}")


def make_graph(executor: Executor | None = None) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The Studio graph: ``executor`` (default: the demo's), model from the environment, the
    demo user as default caller, no checkpointer. Does blocking file I/O: call it outside an
    event loop."""
    return build_turn_graph(
        executor or demo_executor(demo_db_path()), studio_model(), default_caller=DEMO_CALLER
    )


deployment = Deployment(
    lambda: demo_executor(demo_db_path()), studio_model, default_caller=DEMO_CALLER
)
"""The demo's deployment: one executor shared by the graph and the REST/MCP app
``turnkit.demo.server`` (one ledger: a write the graph holds is decided over REST)."""
graph = deployment.agraph
"""The graph factory ``langgraph.json`` names (see the module docstring)."""
