"""``build_turn_graph``: the six nodes wired into a compiled LangGraph ``StateGraph``.

Each I/O node is given as a sync and an async twin, so ``invoke``/``stream`` and
``ainvoke``/``astream`` both work and async runs never block their event loop; pure nodes run
inline in both.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import Durability

from turnkit._compat import CONFIG_KEY_DURABILITY, RunnableCallable
from turnkit.executor.executor import Executor
from turnkit.graph import routing
from turnkit.graph.views import VIEWS
from turnkit.ledger import Ledger
from turnkit.nodes.await_confirmation import aawait_confirmation, await_confirmation
from turnkit.nodes.call_model import acall_model, call_model
from turnkit.nodes.execute import aexecute, execute
from turnkit.nodes.fit_results import fit_results
from turnkit.nodes.list_tools import alist_tools, list_tools
from turnkit.nodes.state import TurnOutput, TurnState
from turnkit.nodes.validate_args import validate_args
from turnkit.registry.caller import Caller
from turnkit.registry.settings import Settings
from turnkit.threads.fenced import durable
from turnkit.threads.leases import Leases
from turnkit.threads.turn_graph import BUSY_TIMEOUT_KEY, TurnGraph
from turnkit.turn.bound import Bound
from turnkit.turn.context import TurnContext

__all__ = ["build_turn_graph", "builder", "leased", "with_thread_leases"]

log = logging.getLogger("turnkit.graph")


def _twin(name: str, sync: Callable[..., Any], async_: Callable[..., Any], bound: Bound) -> Any:
    return RunnableCallable(
        functools.partial(sync, bound=bound),
        functools.partial(async_, bound=bound),
        name=name,
        trace=False,
    )


def _pure(name: str, node: Callable[..., Any], **bind: Any) -> Any:
    sync = functools.partial(node, **bind) if bind else node

    async def inline(state: TurnState) -> Any:  # pure and quick: no thread hop needed
        return sync(state)

    return RunnableCallable(sync, inline, name=name, trace=False)


def builder(
    executor: Executor,
    model: Any,
    *,
    settings: Settings | None = None,
    default_caller: Caller | None = None,
) -> StateGraph[TurnState, TurnContext, TurnState, TurnOutput]:
    """The uncompiled turn graph (for ``langgraph dev``, which brings its own persistence)."""
    bound = Bound(executor=executor, model=model, default_caller=default_caller, settings=settings)
    graph = StateGraph(TurnState, context_schema=TurnContext, output_schema=TurnOutput)
    nodes = {
        "list_tools": _twin("list_tools", list_tools, alist_tools, bound),
        "call_model": _twin("call_model", call_model, acall_model, bound),
        "validate_args": _pure("validate_args", validate_args, bound=bound),
        "execute": _twin("execute", execute, aexecute, bound),
        "fit_results": _pure("fit_results", fit_results),
        "await_confirmation": _twin(
            "await_confirmation", await_confirmation, aawait_confirmation, bound
        ),
    }
    return wire(graph, nodes)


Graph = StateGraph[Any, Any, Any, Any]


def wire(graph: Graph, nodes: dict[str, Any]) -> Graph:
    """Add the six ``nodes`` (by name, each reading its view) and the turn's edges to ``graph``:
    the one shape of a turn (``bench/_shape.py`` wires its stand-ins with it too)."""
    for name, node in nodes.items():
        graph.add_node(name, node, input_schema=VIEWS[name])
    graph.add_edge(START, "list_tools")
    graph.add_edge("list_tools", "call_model")
    for source, route in [
        ("call_model", routing.after_model),
        ("validate_args", routing.after_validation),
        ("fit_results", routing.after_results),
        ("await_confirmation", routing.after_confirmation),
    ]:
        graph.add_conditional_edges(source, RunnableCallable(route, name=None, trace=False))
    graph.add_edge("execute", "fit_results")
    return graph


def build_turn_graph(
    executor: Executor,
    model: Any,
    *,
    settings: Settings | None = None,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    store: BaseStore | None = None,
    default_caller: Caller | None = None,
    durability: Durability = "sync",
    busy_timeout: float = 0.0,
    lease_ttl: float = 30.0,
) -> TurnGraph:
    """A compiled turn graph: list tools, call the model, validate, execute, fit, confirm.

    Args:
        executor: runs the tools (rights, validation, holds, ledger).
        model: a LangChain chat model that supports ``bind_tools``.
        settings: the turn's defaults (``max_rounds``, ``agent_tool_result_chars``, ...); the
            ledger's overrides win at call time. Default: the executor's.
        checkpointer: persistence for resumable runs (see ``turnkit.storage``).
        store: a LangGraph store, passed through.
        default_caller: the caller of runs that pass no ``context=TurnContext(...)``.
        durability: when checkpoints are written (a run may still pass its own). ``"sync"`` by
            default: with LangGraph's ``"async"``, a crash while the checkpoint after the model
            call is still being written re-asks the model, whose new message ids make new
            idempotency keys, so a write could run twice. See docs/performance.md.
        busy_timeout: how long a run waits for a thread another run has before it raises
            ``ThreadBusy`` (0: at once). A run may pass its own as
            ``configurable={"busy_timeout": seconds}``.
        lease_ttl: on SQLite, how long a thread's lease outlives its holder when that dies
            (a running holder renews it). PostgreSQL frees a dead holder's lease at once.

    Examples:
        >>> graph = build_turn_graph(executor, model, checkpointer=saver)  # doctest: +SKIP
        >>> graph.invoke({"messages": [("user", "list products")]},
        ...              {"configurable": {"thread_id": "t1"}},
        ...              context=TurnContext(caller=Caller.session("u_1")))  # doctest: +SKIP
    """
    if executor.ledger_is_temporary and durable(checkpointer):
        log.warning(
            "the turn graph's checkpoints are durable, but its executor keeps its ledger in"
            " this process's memory: its held writes, idempotency records and thread leases"
            " end with this process. Give the executor the storage's ledger:"
            " Executor(registry, ledger=storage.ledger)"
        )
    graph = builder(executor, model, settings=settings, default_caller=default_caller)
    compiled = leased(
        graph.compile(checkpointer=checkpointer, store=store, name="turnkit"),
        executor.ledger.thread_leases(lease_ttl),
        defers_checkpoints=True,  # its execute and await_confirmation settle before they act
    )
    configurable: dict[str, Any] = {}
    if checkpointer is not None:  # nothing to make durable without (LangGraph 1.2 fails then)
        configurable[CONFIG_KEY_DURABILITY] = durability
    if busy_timeout:
        configurable[BUSY_TIMEOUT_KEY] = busy_timeout
    return compiled.with_config({"configurable": configurable}) if configurable else compiled


def leased(
    compiled: CompiledStateGraph[Any, Any, Any, Any],
    leases: Leases,
    *,
    defers_checkpoints: bool = False,
) -> TurnGraph:
    """``compiled`` as a ``TurnGraph`` whose runs take their thread's lease from ``leases``
    (now, or when a server attaches its checkpointer). ``defers_checkpoints``: its nodes settle
    the run (``turnkit.threads.leases.settle_run``) before they act, so its checkpoints may wait."""
    attrs = {k: v for k, v in compiled.__dict__.items() if k != "__orig_class__"}
    return TurnGraph(thread_leases=leases, defers_checkpoints=defers_checkpoints, **attrs)


def with_thread_leases(
    graph: CompiledStateGraph[Any, Any, Any, Any],
    ledger: Ledger,
    *,
    busy_timeout: float = 0.0,
    lease_ttl: float = 30.0,
) -> TurnGraph:
    """Any compiled LangGraph graph — ``create_agent``'s with ``TurnkitMiddleware``, say — with
    one writer per thread, as ``build_turn_graph``'s: each run takes its thread's lease in
    ``ledger``'s database and its checkpoint writes are fenced (docs/guides/postgres.md, "One
    writer per thread"). ``busy_timeout`` and ``lease_ttl`` as for ``build_turn_graph``.

    Examples:
        >>> agent = with_thread_leases(  # doctest: +SKIP
        ...     create_agent(model, middleware=[TurnkitMiddleware(executor)], checkpointer=saver),
        ...     executor.ledger,
        ... )
    """
    compiled = leased(graph, ledger.thread_leases(lease_ttl))
    if busy_timeout:
        return compiled.with_config({"configurable": {BUSY_TIMEOUT_KEY: busy_timeout}})
    return compiled
